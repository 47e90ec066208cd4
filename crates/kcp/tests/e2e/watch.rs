//! Watch through kubectl: `get -w` sees ADDED, MODIFIED and DELETED, and `delete` waits for
//! finalizers (kubectl waits with a watch).

use std::process::{Command, Stdio};
use std::time::Duration;

use kcp_testing::output::{Lines, json};
use kcp_testing::wait;

use super::support::{Kcp, is_namespace_default, write_file};

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
    // The namespace's own `kube-root-ca.crt` may come and go in between: not ours.
    let next = || loop {
        let line = events.next("a watch event");
        let event: Vec<String> = line
            .split_whitespace()
            .take(2)
            .map(str::to_string)
            .collect();
        if !event.get(1).is_some_and(|name| is_namespace_default(name)) {
            return event;
        }
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

/// Watches of one resource in many workspaces at once, and wildcard ones at `/clusters/*`: the
/// server's watch cache indexes watchers by workspace, and whatever happens in the others, each
/// watcher gets every event of its own workspace once, in order, and nothing else.
#[tokio::test(flavor = "multi_thread")]
async fn watch_fan_out_over_many_workspaces_loses_and_repeats_nothing() {
    use futures::StreamExt;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{
        Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
    };

    const WORKSPACES: usize = 12;
    const PER_WORKSPACE: usize = 3;
    const WILDCARD: usize = 2;
    const OBJECTS: usize = 8;
    let kcp = Kcp::shared("watch-fan-out");
    let paths: Vec<String> = tokio::task::block_in_place(|| {
        (0..WORKSPACES)
            .map(|i| kcp.workspace_in(kcp.home(), &format!("fan{i}")))
            .collect()
    });
    let mut clients = Vec::new();
    for path in &paths {
        clients.push(kcp.kube_client_in(path).await);
    }
    let wildcard = kcp.kube_client_in("*").await;

    // Every watcher starts at the same revision, after which everything below happens.
    let start = Api::<ConfigMap>::all(wildcard.clone())
        .list(&ListParams::default().limit(1))
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    type Seen = Vec<(String, String, String)>;
    let collect = |api: Api<ConfigMap>, expected: usize, workspaces: Option<Vec<String>>| {
        let start = start.clone();
        tokio::spawn(async move {
            let mut stream = api
                .watch(&WatchParams::default().timeout(120), &start)
                .await
                .unwrap()
                .boxed();
            let mut seen: Seen = Vec::new();
            while seen.len() < expected {
                let (kind, object) = match stream.next().await.expect("the watch goes on").unwrap()
                {
                    WatchEvent::Added(o) => ("ADDED", o),
                    WatchEvent::Modified(o) => ("MODIFIED", o),
                    WatchEvent::Deleted(o) => ("DELETED", o),
                    WatchEvent::Bookmark(_) => continue,
                    WatchEvent::Error(e) => panic!("{e:?}"),
                };
                let cluster = object
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get("kcp.io/cluster").cloned())
                    .unwrap_or_default();
                // Wildcard watchers see every workspace: keep this test's own.
                if workspaces
                    .as_ref()
                    .is_some_and(|ours| !ours.contains(&cluster))
                {
                    continue;
                }
                seen.push((cluster, kind.to_string(), object.metadata.name.unwrap()));
            }
            seen
        })
    };
    let clusters: Vec<String> = tokio::task::block_in_place(|| {
        paths.iter().map(|path| kcp.logical_cluster(path)).collect()
    });
    // Per workspace: OBJECTS creates, as many updates, half as many deletes.
    let per_workspace = OBJECTS * 2 + OBJECTS / 2;
    let mut watchers = Vec::new();
    for (client, cluster) in clients.iter().zip(&clusters) {
        for _ in 0..PER_WORKSPACE {
            let api = Api::<ConfigMap>::namespaced(client.clone(), "default");
            watchers.push((Some(cluster.clone()), collect(api, per_workspace, None)));
        }
    }
    for _ in 0..WILDCARD {
        let api = Api::<ConfigMap>::all(wildcard.clone());
        let total = per_workspace * WORKSPACES;
        watchers.push((None, collect(api, total, Some(clusters.clone()))));
    }

    // Writes interleaved over the workspaces, in an order every watcher must see.
    let mut written: Vec<(String, String, String)> = Vec::new();
    let patch = Patch::Merge(serde_json::json!({"data": {"changed": "yes"}}));
    for step in 0..3 {
        for i in 0..OBJECTS {
            for (w, client) in clients.iter().enumerate() {
                let api = Api::<ConfigMap>::namespaced(client.clone(), "default");
                let name = format!("o{i}");
                let kind = match step {
                    0 => {
                        let object: ConfigMap =
                            serde_json::from_value(serde_json::json!({"metadata": {"name": name}}))
                                .unwrap();
                        api.create(&PostParams::default(), &object).await.unwrap();
                        "ADDED"
                    }
                    1 => {
                        api.patch(&name, &PatchParams::default(), &patch)
                            .await
                            .unwrap();
                        "MODIFIED"
                    }
                    _ if i % 2 == 0 => {
                        api.delete(&name, &DeleteParams::default()).await.unwrap();
                        "DELETED"
                    }
                    _ => continue,
                };
                written.push((clusters[w].clone(), kind.to_string(), name));
            }
        }
    }
    for (cluster, watcher) in watchers {
        let seen = tokio::time::timeout(Duration::from_secs(60), watcher)
            .await
            .expect("every watcher gets its events")
            .unwrap();
        let expected: Seen = written
            .iter()
            .filter(|(c, _, _)| cluster.as_ref().is_none_or(|cluster| c == cluster))
            .cloned()
            .collect();
        assert_eq!(seen, expected, "watcher of {cluster:?}");
    }
}
