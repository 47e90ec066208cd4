//! Durability under SIGKILL: a child process writes in a loop and reports each acknowledged write;
//! the test kills it at random moments, reopens the store and requires every acknowledged write.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use kcp_storage::{RangeRequest, Storage};
use kcp_storage_redb::RedbStorage;

const KILLS: usize = 24;
/// How long the writer may take to open the store (generous: only a failing run waits this long).
const STARTUP: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kcp.redb");
    let mut rng = fastrand::Rng::with_seed(0xc4a5);
    let mut created: Vec<String> = Vec::new();
    let mut counters: HashMap<String, u64> = HashMap::new();

    for round in 0..KILLS {
        let mut child = Command::new(env!("CARGO_BIN_EXE_kcp-storage-crash-writer"))
            .arg(&path)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the crash writer");
        let stdout = child.stdout.take().unwrap();
        let (ready, started) = tokio::sync::oneshot::channel();
        let reader = std::thread::spawn(move || {
            let mut ready = Some(ready);
            let mut lines = Vec::new();
            let mut reader = BufReader::new(stdout);
            let mut line = Vec::new();
            // Only complete lines count: a kill can cut the last one short.
            while reader.read_until(b'\n', &mut line).unwrap_or(0) > 0 {
                if line.ends_with(b"\n") {
                    let text = String::from_utf8_lossy(&line[..line.len() - 1]).into_owned();
                    if text == "ready"
                        && let Some(ready) = ready.take()
                    {
                        let _ = ready.send(());
                    }
                    lines.push(text);
                }
                line.clear();
            }
            lines
        });
        // Wait until the writer has opened the store and writes.
        if !matches!(tokio::time::timeout(STARTUP, started).await, Ok(Ok(()))) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("round {round}: the writer never started (not ready within {STARTUP:?})");
        }
        // Deliberately a random moment: the kill must land anywhere in the writer's loop (between
        // writes, in a commit, in an acknowledgement), not at a condition the test could wait for.
        tokio::time::sleep(Duration::from_millis(rng.u64(0..450))).await;
        child.kill().expect("SIGKILL the writer");
        child.wait().unwrap();
        let lines = reader.join().unwrap();
        assert!(
            lines.iter().any(|l| l == "ready"),
            "round {round}: the writer never started"
        );

        let acknowledged = lines
            .iter()
            .filter(|l| l.starts_with("create ") || l.starts_with("counter "))
            .count();
        for line in &lines {
            let parts: Vec<&str> = line.split(' ').collect();
            match parts[..] {
                ["create", key] => created.push(key.to_string()),
                ["counter", key, n] => {
                    let n: u64 = n.parse().unwrap();
                    let entry = counters.entry(key.to_string()).or_default();
                    *entry = (*entry).max(n);
                }
                _ => {}
            }
        }

        let store = RedbStorage::open(&path)
            .unwrap_or_else(|e| panic!("round {round}: reopen failed: {e}"));
        for key in &created {
            let kv = store.get(key.as_bytes(), 0).await.unwrap().kv;
            let kv = kv.unwrap_or_else(|| panic!("round {round}: acknowledged key {key} is lost"));
            let expected: String = key.chars().rev().collect();
            assert_eq!(
                kv.value,
                expected.as_bytes(),
                "round {round}: value of {key}"
            );
        }
        for (key, acked) in &counters {
            let kv = store.get(key.as_bytes(), 0).await.unwrap().kv.unwrap();
            let stored: u64 = std::str::from_utf8(&kv.value).unwrap().parse().unwrap();
            assert!(
                stored >= *acked,
                "round {round}: counter {key} is {stored}, acknowledged {acked}"
            );
        }
        let all = store.range(RangeRequest::prefix("/crash/")).await.unwrap();
        assert!(all.count as usize >= created.len());
        eprintln!(
            "round {round}: {acknowledged} writes acknowledged, {} keys in total",
            all.count
        );
        store.close().await;
    }
    assert!(created.len() > KILLS, "the writer made progress");
}
