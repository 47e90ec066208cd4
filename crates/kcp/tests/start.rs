//! `kcp start` as a user runs it: the real binary, a temporary root directory, a signal to stop.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use kcp_storage_etcd::process::EtcdProcess;

/// Starts `kcp start` with `args` and waits for the line saying storage is ready.
fn start(root: &Path, args: &[&str]) -> (Child, mpsc::Receiver<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kcp"))
        .arg("start")
        .arg("--root-directory")
        .arg(root)
        .args(args)
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("run kcp");
    let (lines, receiver) = mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = lines.send(line);
        }
    });
    loop {
        match receiver.recv_timeout(Duration::from_secs(20)) {
            Ok(line) if line.contains("storage ready") => return (child, receiver),
            Ok(_) => {}
            Err(error) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("kcp did not report ready storage: {error}");
            }
        }
    }
}

fn stop(mut child: Child) {
    // SAFETY: plain kill(2) on the pid of a child we own.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert!(status.success(), "kcp exited with {status}");
}

#[test]
fn start_opens_the_embedded_store_under_the_root_directory_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("kcp-root");
    let (child, _) = start(&root, &[]);
    assert!(
        root.join("store.redb").exists(),
        "the embedded store lives in the root directory"
    );
    stop(child);
    // A second start reopens the same store.
    let (child, _) = start(&root, &[]);
    stop(child);
}

#[tokio::test]
async fn start_with_etcd_servers_uses_etcd() {
    let etcd = EtcdProcess::start().await;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("kcp-root");
    let servers = etcd.endpoint();
    let (child, _) = tokio::task::spawn_blocking({
        let root = root.clone();
        move || start(&root, &["--etcd-servers", &servers])
    })
    .await
    .unwrap();
    assert!(
        !root.join("store.redb").exists(),
        "no embedded store when etcd is configured"
    );
    stop(child);
}

#[test]
fn start_fails_when_etcd_is_unreachable() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_kcp"))
        .args(["start", "--etcd-servers", "http://127.0.0.1:1"])
        .arg("--root-directory")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("etcd"), "the error names etcd: {stderr}");
}
