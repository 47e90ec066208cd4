//! Child processes that do not outlive the test process: a server shared by many tests is never
//! dropped (it lives in a `static`), so nothing would kill it when the tests end.

use std::process::{Child, Command};

/// Spawns `command` so that it is killed when this process exits.
///
/// Linux delivers the parent-death signal when the *thread* that forked the child exits, so the
/// fork happens on one helper thread that lives as long as the process, whichever thread or
/// async task asks for the spawn.
#[cfg(target_os = "linux")]
pub fn spawn_tied_to_process(mut command: Command) -> std::io::Result<Child> {
    use std::os::unix::process::CommandExt;
    use std::sync::OnceLock;
    use std::sync::mpsc;

    type Job = (Command, mpsc::Sender<std::io::Result<Child>>);
    static SPAWNER: OnceLock<Result<mpsc::Sender<Job>, String>> = OnceLock::new();

    let parent = std::process::id();
    // SAFETY: the closure runs between fork and exec and only calls prctl and getppid, both
    // async-signal-safe; it allocates nothing on success.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // If this process died before prctl took effect, do not outlive it.
            if u32::try_from(libc::getppid()).ok() != Some(parent) {
                return Err(std::io::Error::other("parent exited during spawn"));
            }
            Ok(())
        });
    }
    let spawner = SPAWNER.get_or_init(|| {
        let (sender, receiver) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("child-spawner".into())
            .spawn(move || {
                for (mut command, reply) in receiver {
                    let _ = reply.send(command.spawn());
                }
            })
            .map(|_| sender)
            .map_err(|e| e.to_string())
    });
    let spawner = spawner
        .as_ref()
        .map_err(|e| std::io::Error::other(format!("cannot start the spawner thread: {e}")))?;
    let (reply, result) = mpsc::channel();
    spawner
        .send((command, reply))
        .map_err(|_| std::io::Error::other("the spawner thread is gone"))?;
    result
        .recv()
        .map_err(|_| std::io::Error::other("the spawner thread is gone"))?
}

#[cfg(not(target_os = "linux"))]
pub fn spawn_tied_to_process(mut command: Command) -> std::io::Result<Child> {
    command.spawn()
}
