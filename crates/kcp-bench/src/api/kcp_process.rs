//! The real `kcp` binary as a child process: found next to `kcp-bench` (both in `target/release`),
//! started on a free loopback port, timed from spawn to its "ready to serve" log line, measured
//! through `/proc/<pid>/status`, and stopped with SIGTERM (SIGKILL on drop). Its log's "storage
//! compacted" lines tell how far its history is compacted.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// How long a start or a stop may take before the benchmark gives up (a server holding a
/// million workspaces included).
const START_TIMEOUT: Duration = Duration::from_secs(300);

/// The `kcp` binary to run: `explicit` if given, else `kcp` next to this executable.
pub fn locate_binary(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    let candidate = match explicit {
        Some(path) => path.to_path_buf(),
        None => std::env::current_exe()
            .context("find the kcp-bench executable")?
            .parent()
            .context("kcp-bench executable has no directory")?
            .join("kcp"),
    };
    if !candidate.is_file() {
        bail!(
            "no kcp binary at {}: build it first with `cargo build --release -p kcp` \
             (kcp-bench looks next to its own executable), or pass --kcp-binary <path>",
            candidate.display()
        );
    }
    Ok(candidate)
}

/// A running `kcp start`.
pub struct KcpProcess {
    child: Child,
    /// The port it serves on (it was started with `--secure-port 0`).
    pub port: u16,
    /// From spawn to the "ready to serve" log line.
    pub start_to_ready: Duration,
    /// The revision of its last "storage compacted" log line (0: none yet).
    compacted: Arc<AtomicU64>,
}

impl KcpProcess {
    /// Starts `binary` with `root` as its root directory on a free loopback port and waits for
    /// its "ready to serve" line. Later log lines are drained so logging never blocks it.
    pub async fn start(binary: &Path, root: &Path) -> anyhow::Result<KcpProcess> {
        KcpProcess::start_with(binary, root, &[]).await
    }

    /// [`KcpProcess::start`] with `args` added to `kcp start`.
    pub async fn start_with(
        binary: &Path,
        root: &Path,
        args: &[&str],
    ) -> anyhow::Result<KcpProcess> {
        let began = Instant::now();
        let mut child = Command::new(binary)
            .arg("start")
            .arg("--root-directory")
            .arg(root)
            .args(["--secure-port", "0", "--bind-address", "127.0.0.1"])
            .args(args)
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("run {}", binary.display()))?;
        let mut lines = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
        let mut stderr = child.stderr.take().expect("piped stderr");
        let ready = tokio::time::timeout(START_TIMEOUT, async {
            while let Some(line) = lines.next_line().await? {
                if line.contains("ready to serve") {
                    return Ok(Some(line));
                }
            }
            anyhow::Ok(None)
        })
        .await;
        let start_to_ready = began.elapsed();
        let line = match ready {
            Ok(Ok(Some(line))) => line,
            other => {
                let _ = child.start_kill();
                let mut errors = String::new();
                let _ = tokio::io::AsyncReadExt::read_to_string(&mut stderr, &mut errors).await;
                bail!(
                    "kcp did not become ready ({}): {}",
                    match other {
                        Err(_) => format!("no ready line within {START_TIMEOUT:?}"),
                        Ok(Err(error)) => format!("reading its log: {error}"),
                        _ => "it exited".to_string(),
                    },
                    errors.trim()
                );
            }
        };
        // The server's log is dropped unless `KCP_BENCH_SERVER_LOG` names a file to append it to.
        let log = match std::env::var_os("KCP_BENCH_SERVER_LOG") {
            Some(path) => Some(
                tokio::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&path)
                    .await
                    .with_context(|| format!("open {}", path.to_string_lossy()))?,
            ),
            None => None,
        };
        // Its log lines come on stdout (after the ready line), anything else on stderr.
        let stdout_log = match &log {
            Some(file) => Some(file.try_clone().await?),
            None => None,
        };
        let compacted = Arc::new(AtomicU64::new(0));
        let compacted_seen = Arc::clone(&compacted);
        tokio::spawn(async move {
            let mut stdout_log = stdout_log;
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(revision) = compacted_revision(&line) {
                    compacted_seen.fetch_max(revision, Ordering::Relaxed);
                }
                if let Some(file) = &mut stdout_log {
                    let _ =
                        tokio::io::AsyncWriteExt::write_all(file, format!("{line}\n").as_bytes())
                            .await;
                }
            }
        });
        tokio::spawn(async move {
            let _ = match log {
                Some(mut file) => tokio::io::copy(&mut stderr, &mut file).await,
                None => tokio::io::copy(&mut stderr, &mut tokio::io::sink()).await,
            };
        });
        let port = parse_ready_line(&line)?;
        Ok(KcpProcess {
            child,
            port,
            start_to_ready,
            compacted,
        })
    }

    /// The revision its history was last compacted at, by its log (0: not yet).
    pub fn compacted_revision(&self) -> u64 {
        self.compacted.load(Ordering::Relaxed)
    }

    /// Resident memory now (`VmRSS`), in bytes.
    pub fn rss_bytes(&self) -> anyhow::Result<u64> {
        let pid = self.child.id().context("kcp has exited")?;
        read_status_kib(pid, "VmRSS:").map(|kib| kib * 1024)
    }

    /// Resident memory now, split into what the process allocated and the files it maps.
    pub fn resident(&self) -> anyhow::Result<Resident> {
        Resident::of(self.child.id().context("kcp has exited")?)
    }

    /// The process id.
    pub fn pid(&self) -> anyhow::Result<u32> {
        self.child.id().context("kcp has exited")
    }

    /// CPU time kcp has used so far (user and system), in seconds.
    pub fn cpu_seconds(&self) -> anyhow::Result<f64> {
        let pid = self.child.id().context("kcp has exited")?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
        // The fields after the command name (which may hold spaces) in parentheses.
        let after = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest)
            .unwrap_or_default();
        let fields: Vec<&str> = after.split_whitespace().collect();
        let ticks = |i: usize| -> anyhow::Result<f64> {
            Ok(fields.get(i).context("short /proc stat")?.parse::<u64>()? as f64)
        };
        // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
        // SAFETY: sysconf has no preconditions.
        let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        Ok((ticks(11)? + ticks(12)?) / per_second.max(1.0))
    }

    /// Peak resident memory so far (`VmHWM`), in bytes.
    pub fn peak_rss_bytes(&self) -> anyhow::Result<u64> {
        let pid = self.child.id().context("kcp has exited")?;
        read_status_kib(pid, "VmHWM:").map(|kib| kib * 1024)
    }

    /// SIGTERM, then waits for a clean exit.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        let pid = self.child.id().context("kcp has exited")?;
        // SAFETY: kill(2) on the pid of a child we own and have not reaped.
        unsafe { libc::kill(pid as i32, libc::SIGTERM) };
        let status = tokio::time::timeout(START_TIMEOUT, self.child.wait())
            .await
            .context("kcp did not stop after SIGTERM")??;
        anyhow::ensure!(status.success(), "kcp exited with {status}");
        Ok(())
    }
}

/// `... storage compacted revision=1234 took_ms=56` → 1234.
fn compacted_revision(line: &str) -> Option<u64> {
    if !line.contains("storage compacted") {
        return None;
    }
    let from = line.find("revision=")? + "revision=".len();
    let digits: String = line[from..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// `... ready to serve on https://127.0.0.1:43211; use it with ...` → 43211.
fn parse_ready_line(line: &str) -> anyhow::Result<u16> {
    let from = line
        .find("https://")
        .with_context(|| format!("no address in the ready line: {line}"))?;
    let url = line[from..]
        .split(|c: char| c == ';' || c.is_whitespace())
        .next()
        .unwrap_or_default();
    url.rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .with_context(|| format!("no port in the ready line: {line}"))
}

/// Resident memory (`/proc/<pid>/status`), in bytes.
#[derive(Debug, Clone, Copy)]
pub struct Resident {
    /// `VmRSS`: all of it.
    pub total: u64,
    /// `RssAnon`: what the process allocated (heap, stacks) and holds.
    pub allocated: u64,
    /// `RssFile`: pages of the files it maps (its own code, libraries), which the kernel can
    /// drop and read again.
    pub files: u64,
}

impl Resident {
    /// Process `pid`'s, from one reading of its status (so the parts add up).
    fn of(pid: u32) -> anyhow::Result<Resident> {
        let status = read_status(pid)?;
        let bytes = |field| status_kib(&status, pid, field).map(|kib| kib * 1024);
        Ok(Resident {
            total: bytes("VmRSS:")?,
            allocated: bytes("RssAnon:")?,
            files: bytes("RssFile:")?,
        })
    }
}

/// A `kB` field of `/proc/<pid>/status`.
pub(crate) fn read_status_kib(pid: u32, field: &str) -> anyhow::Result<u64> {
    status_kib(&read_status(pid)?, pid, field)
}

fn read_status(pid: u32) -> anyhow::Result<String> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("read /proc/{pid}/status"))
}

/// A `kB` field of `status`, process `pid`'s status.
fn status_kib(status: &str, pid: u32, field: &str) -> anyhow::Result<u64> {
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
        .with_context(|| format!("no {field} in /proc/{pid}/status"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_ready_line_gives_address_and_port() {
        let line = "2025-01-01T00:00:00Z  INFO kcp_server: ready to serve on https://127.0.0.1:43211; \
                    use it with KUBECONFIG=/tmp/x/admin.kubeconfig";
        assert_eq!(super::parse_ready_line(line).unwrap(), 43211);
        assert!(super::parse_ready_line("ready to serve").is_err());
    }

    #[test]
    fn compaction_lines_give_their_revision() {
        let line = "2025-01-01T00:00:00Z  INFO kcp_server::compactor: storage compacted \
                    revision=98765 took_ms=12";
        assert_eq!(super::compacted_revision(line), Some(98765));
        assert_eq!(super::compacted_revision("revision=5 written"), None);
    }

    #[test]
    fn status_fields_are_read_for_this_process() {
        let kib = super::read_status_kib(std::process::id(), "VmRSS:").unwrap();
        assert!(kib > 0);
        // One reading: resident memory is its parts (shared memory aside).
        let resident = super::Resident::of(std::process::id()).unwrap();
        assert!(resident.allocated > 0 && resident.files > 0);
        assert!(resident.allocated + resident.files <= resident.total);
    }
}
