//! Sending SIGTERM or SIGKILL to a child process by its id.
//!
//! `std::process::Child::kill` only sends SIGKILL and needs the `Child`; tests also stop a server
//! the polite way (SIGTERM, then require a clean exit) and kill one from another thread that only
//! knows its process id. These wrap `kill(2)`, so the tests themselves need no `unsafe`.

use std::io;

/// Asks process `pid` to stop (SIGTERM).
pub fn terminate(pid: u32) -> io::Result<()> {
    send(pid, libc::SIGTERM)
}

/// Kills process `pid` at once (SIGKILL), as a crash would.
pub fn kill(pid: u32) -> io::Result<()> {
    send(pid, libc::SIGKILL)
}

/// What the kernel says of process `pid` (from `/proc`): its state (`R`, `S`, `D` for a wait
/// on the disk that even SIGKILL waits out, `Z` once dead and not reaped) and where it waits.
/// For a test's failure message: a killed server whose sockets stay open is often one still
/// in `D`, finishing an fsync on a busy disk.
pub fn describe(pid: u32) -> String {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return format!("process {pid} is gone");
    };
    // The state follows the command name, which is in parentheses and may hold spaces.
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .unwrap_or("?");
    let waits = std::fs::read_to_string(format!("/proc/{pid}/wchan")).unwrap_or_default();
    format!("process {pid} in state {state}, waiting in {waits:?}")
}

fn send(pid: u32, signal: libc::c_int) -> io::Result<()> {
    let pid = libc::pid_t::try_from(pid)
        .ok()
        .filter(|pid| *pid > 0)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("bad pid {pid}")))?;
    // SAFETY: kill(2) takes plain integers and touches no memory of ours; a positive pid names
    // one process (never a process group), so a stale pid can at worst signal that one process.
    if unsafe { libc::kill(pid, signal) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;
    use std::process::Command;

    use super::*;

    #[test]
    fn signals_reach_the_child() {
        for (send, expected) in [
            (terminate as fn(u32) -> io::Result<()>, libc::SIGTERM),
            (kill, libc::SIGKILL),
        ] {
            let mut child = Command::new("sleep").arg("60").spawn().unwrap();
            send(child.id()).unwrap();
            assert_eq!(child.wait().unwrap().signal(), Some(expected));
        }
        assert!(terminate(0).is_err(), "0 would be the whole process group");
    }

    #[test]
    fn a_process_is_described_by_its_state_until_it_is_reaped() {
        let mut child = Command::new("sleep").arg("60").spawn().unwrap();
        let pid = child.id();
        let sleeping = described_once_asleep(pid);
        assert!(sleeping.contains("in state S"), "{sleeping}");
        kill(pid).unwrap();
        child.wait().unwrap();
        assert_eq!(describe(pid), format!("process {pid} is gone"));
    }

    /// The description of `pid` once it sleeps (a child just spawned may still be starting).
    fn described_once_asleep(pid: u32) -> String {
        for _ in 0..200 {
            let described = describe(pid);
            if described.contains("in state S") {
                return described;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        describe(pid)
    }
}
