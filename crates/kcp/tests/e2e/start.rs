//! `kcp start` as a user runs it: storage choice, root directory, stopping on a signal.

use std::process::Command;

use kcp_testing::etcd::EtcdProcess;

use super::support::Kcp;

#[test]
fn start_opens_the_embedded_store_under_the_root_directory_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("kcp-root");
    let kcp = Kcp::start(&root, &[]);
    assert!(
        root.join("store.redb").exists(),
        "the embedded store lives in the root directory"
    );
    kcp.stop();
    // A second start reopens the same store.
    Kcp::start(&root, &[]).stop();
}

#[tokio::test]
async fn start_with_etcd_servers_uses_etcd() {
    let etcd = EtcdProcess::start().await;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("kcp-root");
    let servers = etcd.endpoint();
    let kcp = tokio::task::spawn_blocking({
        let root = root.clone();
        move || Kcp::start(&root, &["--etcd-servers", &servers])
    })
    .await
    .unwrap();
    assert!(
        !root.join("store.redb").exists(),
        "no embedded store when etcd is configured"
    );
    kcp.stop();
}

#[test]
fn start_fails_when_etcd_is_unreachable() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_kcp"))
        .args([
            "start",
            "--etcd-servers",
            "http://127.0.0.1:1",
            "--secure-port",
            "0",
        ])
        .arg("--root-directory")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("etcd"), "the error names etcd: {stderr}");
}
