//! Runs a real single-member etcd for tests and benchmarks.
//!
//! [`EtcdProcess`] spawns the `etcd` binary found on `PATH` with a temporary data directory
//! (under `/dev/shm` when available, for speed), free loopback ports for clients and peers,
//! limits raised so 1.5 MiB values fit, and quiet logging (errors go to `etcd.log` beside the
//! data directory and are quoted when startup fails). It waits until etcd serves reads, and kills
//! it when dropped. [`EtcdProcess::kill`] and [`EtcdProcess::restart`] simulate a crash and
//! recovery on the same ports and data.
//!
//! On Linux etcd is also tied to the life of the test process (it gets SIGKILL when the process
//! dies, even by SIGKILL), so an aborted test run leaves no etcd behind.
//!
//! A missing `etcd` binary is a loud failure ([`EtcdProcess::start`] panics), never a silently
//! skipped test. This module owns the process only; it must not know storage semantics beyond
//! connecting to check readiness. It needs the crate's `etcd` feature.

use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tokio::time::Instant;

use kcp_storage_etcd::{EtcdConfig, EtcdStorage, EtcdTls};

/// How long etcd may take to start serving.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// Attempts with fresh ports when another process grabbed one between choosing and binding.
const PORT_ATTEMPTS: usize = 5;
/// Large enough for a transaction carrying a 1.5 MiB value (etcd's default is 1.5 MiB in all).
const MAX_REQUEST_BYTES: u64 = 3 * 1024 * 1024;
/// The backend size at which etcd stops accepting writes (its default is 2 GiB).
const QUOTA_BACKEND_BYTES: u64 = 8 * 1024 * 1024 * 1024;

/// How to run etcd.
#[derive(Clone, Debug, Default)]
pub struct EtcdOptions {
    /// Serve clients over TLS.
    pub tls: Option<EtcdServerTls>,
    /// The etcd binary; default: `etcd` from `PATH`.
    pub binary: Option<PathBuf>,
    /// More command-line flags, appended last.
    pub extra_args: Vec<String>,
    /// Where to create the data directory; default: `/dev/shm` when usable (fast tests), else
    /// the system temporary directory. Benchmarks set it to the disk the compared store uses.
    pub data_parent: Option<PathBuf>,
}

/// TLS material for etcd's client port (peers stay on plain HTTP on loopback).
#[derive(Clone, Debug)]
pub struct EtcdServerTls {
    /// The server certificate; it must be valid for `127.0.0.1`.
    pub cert_pem: Vec<u8>,
    pub key_pem: Vec<u8>,
    /// CA that client certificates must chain to; given, etcd requires client certificates
    /// (`--client-cert-auth`).
    pub client_ca_pem: Option<Vec<u8>>,
    /// What clients use to connect, including the readiness check and [`EtcdProcess::config`].
    pub client: EtcdTls,
}

/// A running etcd, killed on drop. Its data lives as long as this value.
pub struct EtcdProcess {
    child: Option<Child>,
    dir: tempfile::TempDir,
    binary: PathBuf,
    options: EtcdOptions,
    client_port: u16,
    peer_port: u16,
}

impl EtcdProcess {
    /// Starts a plain-HTTP etcd; panics if it cannot (for example when `etcd` is not on `PATH`).
    pub async fn start() -> EtcdProcess {
        Self::start_with(EtcdOptions::default()).await
    }

    /// Starts etcd with `options`; panics if it cannot.
    pub async fn start_with(options: EtcdOptions) -> EtcdProcess {
        match Self::try_start_with(options).await {
            Ok(process) => process,
            Err(error) => panic!("cannot run etcd for this test: {error}"),
        }
    }

    /// Starts etcd with `options`, describing what went wrong if it cannot.
    pub async fn try_start_with(options: EtcdOptions) -> Result<EtcdProcess, String> {
        let binary = match &options.binary {
            Some(binary) => binary.clone(),
            None => find_on_path("etcd").ok_or_else(|| {
                "the `etcd` binary is not on PATH; install etcd (Debian: apt-get install \
                 etcd-server) or set EtcdOptions::binary"
                    .to_string()
            })?,
        };
        let mut last_error = String::new();
        for _ in 0..PORT_ATTEMPTS {
            let (client_port, peer_port) = free_ports()?;
            let mut process = EtcdProcess {
                child: None,
                dir: temp_dir(options.data_parent.as_deref())?,
                binary: binary.clone(),
                options: options.clone(),
                client_port,
                peer_port,
            };
            process.write_tls_files()?;
            match process.launch().await {
                Ok(()) => return Ok(process),
                Err(Launch::PortTaken(error)) => last_error = error,
                Err(Launch::Failed(error)) => return Err(error),
            }
        }
        Err(last_error)
    }

    /// The client URL, `http://127.0.0.1:PORT` or `https://...` with TLS.
    pub fn endpoint(&self) -> String {
        let scheme = if self.options.tls.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://127.0.0.1:{}", self.client_port)
    }

    /// A configuration that connects to this etcd (with the client TLS material, if any).
    pub fn config(&self) -> EtcdConfig {
        let config = EtcdConfig::new([self.endpoint()]);
        match &self.options.tls {
            Some(tls) => config.with_tls(tls.client.clone()),
            None => config,
        }
    }

    pub fn client_port(&self) -> u16 {
        self.client_port
    }

    /// The data directory, kept across [`kill`](Self::kill) and [`restart`](Self::restart).
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// Kills etcd with SIGKILL, as a crash would, and waits until it is gone.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            // Errors mean it has exited already.
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts etcd again on the same ports and data directory (killing it first if it runs) and
    /// waits until it serves; panics if it cannot.
    pub async fn restart(&mut self) {
        self.kill();
        let result = match self.launch().await {
            Ok(()) => Ok(()),
            Err(Launch::PortTaken(error) | Launch::Failed(error)) => Err(error),
        };
        if let Err(error) = result {
            panic!("cannot restart etcd: {error}");
        }
    }

    fn write_tls_files(&self) -> Result<(), String> {
        let Some(tls) = &self.options.tls else {
            return Ok(());
        };
        let write = |name: &str, pem: &[u8]| {
            fs::write(self.dir.path().join(name), pem)
                .map_err(|e| format!("cannot write {name}: {e}"))
        };
        write("server.crt", &tls.cert_pem)?;
        write("server.key", &tls.key_pem)?;
        if let Some(ca) = &tls.client_ca_pem {
            write("client-ca.crt", ca)?;
        }
        Ok(())
    }

    fn args(&self) -> Vec<String> {
        let dir = self.dir.path();
        let peer = format!("http://127.0.0.1:{}", self.peer_port);
        let mut args: Vec<String> = vec![
            "--name".into(),
            "kcp-test".into(),
            "--data-dir".into(),
            path_arg(&self.data_dir()),
            "--listen-client-urls".into(),
            self.endpoint(),
            "--advertise-client-urls".into(),
            self.endpoint(),
            "--listen-peer-urls".into(),
            peer.clone(),
            "--initial-advertise-peer-urls".into(),
            peer.clone(),
            "--initial-cluster".into(),
            format!("kcp-test={peer}"),
            "--initial-cluster-state".into(),
            "new".into(),
            "--initial-cluster-token".into(),
            format!("kcp-test-{}", self.client_port),
            "--max-request-bytes".into(),
            MAX_REQUEST_BYTES.to_string(),
            "--quota-backend-bytes".into(),
            QUOTA_BACKEND_BYTES.to_string(),
            "--logger".into(),
            "zap".into(),
            "--log-outputs".into(),
            "stderr".into(),
            "--log-level".into(),
            "error".into(),
        ];
        if let Some(tls) = &self.options.tls {
            args.extend([
                "--cert-file".into(),
                path_arg(&dir.join("server.crt")),
                "--key-file".into(),
                path_arg(&dir.join("server.key")),
            ]);
            if tls.client_ca_pem.is_some() {
                args.extend([
                    "--trusted-ca-file".into(),
                    path_arg(&dir.join("client-ca.crt")),
                    "--client-cert-auth".into(),
                ]);
            }
        }
        args.extend(self.options.extra_args.iter().cloned());
        args
    }

    /// Spawns etcd and waits until it serves reads.
    async fn launch(&mut self) -> Result<(), Launch> {
        let log_path = self.dir.path().join("etcd.log");
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(|e| Launch::Failed(format!("cannot open {}: {e}", log_path.display())))?;
        let mut command = Command::new(&self.binary);
        command
            .args(self.args())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        let child = crate::process::spawn_tied_to_process(command)
            .map_err(|e| Launch::Failed(format!("cannot spawn {}: {e}", self.binary.display())))?;
        self.child = Some(child);

        let mut config = self.config();
        config.connect_timeout = Duration::from_millis(500);
        config.request_timeout = Duration::from_secs(2);
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        loop {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                self.child = None;
                let log = log_tail(&log_path);
                let message = format!("etcd exited during startup with {status}; log:\n{log}");
                return Err(if log.contains("address already in use") {
                    Launch::PortTaken(message)
                } else {
                    Launch::Failed(message)
                });
            }
            if EtcdStorage::connect(config.clone()).await.is_ok() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                self.kill();
                return Err(Launch::Failed(format!(
                    "etcd did not serve within {STARTUP_TIMEOUT:?}; log:\n{}",
                    log_tail(&log_path)
                )));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for EtcdProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

enum Launch {
    /// A port was taken meanwhile; worth retrying with other ports.
    PortTaken(String),
    Failed(String),
}

fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// A fresh temporary directory under `parent`, or else in memory when `/dev/shm` is usable.
fn temp_dir(parent: Option<&Path>) -> Result<tempfile::TempDir, String> {
    let builder = {
        let mut builder = tempfile::Builder::new();
        builder.prefix("kcp-etcd-");
        builder
    };
    if let Some(parent) = parent {
        return builder
            .tempdir_in(parent)
            .map_err(|e| format!("cannot create a directory in {}: {e}", parent.display()));
    }
    let shm = Path::new("/dev/shm");
    if shm.is_dir()
        && let Ok(dir) = builder.tempdir_in(shm)
    {
        return Ok(dir);
    }
    builder
        .tempdir()
        .map_err(|e| format!("cannot create a temporary directory: {e}"))
}

/// Two distinct loopback ports nobody listens on right now.
fn free_ports() -> Result<(u16, u16), String> {
    let bind =
        || TcpListener::bind("127.0.0.1:0").map_err(|e| format!("cannot find a free port: {e}"));
    let port = |listener: &TcpListener| {
        listener
            .local_addr()
            .map(|addr| addr.port())
            .map_err(|e| format!("cannot find a free port: {e}"))
    };
    // Both stay bound until both are chosen, so they differ.
    let (first, second) = (bind()?, bind()?);
    Ok((port(&first)?, port(&second)?))
}

fn path_arg(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// The last lines of etcd's log, for failure messages.
fn log_tail(path: &Path) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}
