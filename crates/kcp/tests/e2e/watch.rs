//! Watch through kubectl: `get -w` sees ADDED, MODIFIED and DELETED, and `delete` waits for
//! finalizers (kubectl waits with a watch).

use std::process::{Command, Stdio};
use std::time::Duration;

use kcp_testing::output::{Lines, json};
use kcp_testing::wait;

use super::support::{Kcp, write_file};

#[test]
fn kubectl_get_watch_sees_added_modified_and_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::shared("watch-kubectl");
    let file = write_file(
        dir.path(),
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: watched\n",
    );
    kcp.kubectl_ok(&["create", "-f", &file]);

    let mut watcher = Command::new("kubectl")
        .env("KUBECONFIG", kcp.kubeconfig())
        .args([
            "get",
            "configmaps",
            "--watch",
            "--output-watch-events",
            "--no-headers",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let events = Lines::of(watcher.stdout.take().unwrap());
    let next = || {
        let line = events.next("a watch event");
        line.split_whitespace()
            .take(2)
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    assert_eq!(next(), ["ADDED", "watched"], "the list part arrives first");

    // A replace that changes nothing is no event (kube-apiserver writes nothing); a change is.
    let current = write_file(
        dir.path(),
        "current.json",
        &kcp.kubectl_ok(&["get", "cm", "watched", "-o", "json"]),
    );
    kcp.kubectl_ok(&["replace", "-f", &current]);
    kcp.kubectl_ok(&["label", "cm", "watched", "seen=yes"]);
    assert_eq!(next(), ["MODIFIED", "watched"]);
    kcp.kubectl_ok(&["delete", "cm", "watched"]);
    assert_eq!(next(), ["DELETED", "watched"]);
    let _ = watcher.kill();
    let _ = watcher.wait();
}

#[test]
fn kubectl_delete_waits_for_finalizers() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::shared("watch-finalizers");
    let file = write_file(
        dir.path(),
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: held\n  finalizers: [example.com/hold]\n",
    );
    kcp.kubectl_ok(&["create", "-f", &file]);
    let mut delete = Command::new("kubectl")
        .env("KUBECONFIG", kcp.kubeconfig())
        .args(["delete", "cm", "held", "--timeout=60s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // kubectl has sent the delete once the object is terminating.
    let terminating = wait::until("kubectl's delete reaches the server", || {
        let held = json(&kcp.kubectl_ok(&["get", "cm", "held", "-o", "json"]));
        held["metadata"]["deletionTimestamp"]
            .is_string()
            .then_some(held)
    });
    // Deliberately a fixed window: kubectl must NOT return while the finalizer holds the object,
    // and a delete that did not wait would return within milliseconds of the server's answer.
    std::thread::sleep(Duration::from_secs(1));
    assert!(
        delete.try_wait().unwrap().is_none(),
        "delete returned while a finalizer holds the object"
    );

    let mut released = terminating.clone();
    released["metadata"]["finalizers"] = serde_json::json!([]);
    let released = write_file(dir.path(), "released.json", &released.to_string());
    kcp.kubectl_ok(&["replace", "-f", &released]);
    let output = delete.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(String::from_utf8_lossy(&output.stdout).contains("configmap \"held\" deleted"));
    assert!(!kcp.kubectl(&["get", "cm", "held"]).status.success());
}
