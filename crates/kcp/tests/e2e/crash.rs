//! Crash safety of the whole server on the embedded store: every create kcp acknowledged (201)
//! is still there, with its data, after the process is SIGKILLed mid-write and started again on
//! the same root directory.
//!
//! Why this can fail: the client counts a configmap as acknowledged only once it has read the
//! 201, which the server can only have sent before it died, and the SIGKILL is sent from that very
//! code path, right after the `kill_after`th 201, with up to 32 creates in flight. So if kcp
//! answered before the storage commit was durable, some acknowledged configmap is missing after
//! the restart. Checked by breaking the redb writer on purpose, then reverting:
//! - commits with `Durability::None` (redb drops them on the next open after a crash): round 0
//!   loses every acknowledged configmap, every time;
//! - replying to the batch before `commit()` instead of after: caught in 3 of 4 runs of the 20
//!   rounds (the window is the commit's own duration, which the kill has to land in).
//!
//! SIGKILL leaves the kernel's page cache intact, so a missing fsync alone (written but not
//! flushed) would only show after a power loss; that part rests on redb's `Durability::Immediate`.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ListParams, PostParams};

use super::support::{Kcp, is_namespace_default};

const NAMESPACE: &str = "crash";
const ROUNDS: usize = 20;
const CREATES_PER_ROUND: usize = 200;
const IN_FLIGHT: usize = 32;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_creates_survive_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let mut rng = fastrand::Rng::with_seed(0x6b6370);
    // Every acknowledged configmap, over all rounds, with the data it was created with.
    let mut acknowledged: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();

    let kcp = start(&root).await;
    let namespace =
        serde_json::from_value::<Namespace>(serde_json::json!({"metadata": {"name": NAMESPACE}}))
            .unwrap();
    Api::<Namespace>::all(kcp.kube_client().await)
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();
    let mut kcp = Some(kcp);

    for round in 0..ROUNDS {
        let running = kcp.take().unwrap();
        // No retries: kube-rs retries 429, 503 and 504 for minutes, which would hide an
        // answer the server should not give here; every failure is counted instead.
        let mut config = running.kube_config_in(running.home()).await;
        config.default_retry = false;
        let api: Api<ConfigMap> =
            Api::namespaced(kube::Client::try_from(config).unwrap(), NAMESPACE);
        let failures: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
        let failed = Arc::clone(&failures);
        // Kill once this many creates are acknowledged, with up to IN_FLIGHT still in flight.
        let kill_after = rng.usize(IN_FLIGHT..CREATES_PER_ROUND - IN_FLIGHT);
        let (acks, mut acked) = tokio::sync::mpsc::unbounded_channel();
        let pid = running.pid();
        let acked_count = Arc::new(AtomicUsize::new(0));
        let writer = tokio::spawn(async move {
            futures::stream::iter(0..CREATES_PER_ROUND)
                .for_each_concurrent(IN_FLIGHT, |i| {
                    let (api, acks) = (api.clone(), acks.clone());
                    let acked_count = Arc::clone(&acked_count);
                    let failed = Arc::clone(&failed);
                    async move {
                        let (name, data) = configmap_content(round, i);
                        let object = configmap(&name, &data);
                        let created = api.create(&PostParams::default(), &object).await;
                        if let Err(error) = &created {
                            failed.lock().unwrap().push(error.to_string());
                        }
                        if created.is_ok() {
                            let _ = acks.send((name, data));
                            // SIGKILL right in the answer's path, no graceful stop, so the
                            // writes in flight (and any commit still running) are cut short.
                            if acked_count.fetch_add(1, Ordering::SeqCst) + 1 == kill_after {
                                // The server child is not reaped yet, so its pid is still its own.
                                kcp_testing::signal::kill(pid).expect("SIGKILL the server");
                            }
                        }
                    }
                })
                .await;
        });
        // The other creates fail once the server is gone; answers read before the kill count.
        // A killed process keeps its sockets until its last thread leaves the kernel, which for
        // one in an fsync on a busy disk can take long: the message says where it waits.
        match tokio::time::timeout(Duration::from_secs(120), writer).await {
            Ok(written) => written.unwrap(),
            Err(_) => panic!(
                "in-flight creates did not end within 120 s of the SIGKILL; the server: {}",
                kcp_testing::signal::describe(pid)
            ),
        }
        // Reaps the killed process.
        tokio::task::spawn_blocking(move || drop(running))
            .await
            .unwrap();
        let mut this_round = 0;
        while let Ok((name, data)) = acked.try_recv() {
            acknowledged.insert(name, data);
            this_round += 1;
        }
        let failures: Vec<String> = failures.lock().unwrap().iter().take(5).cloned().collect();
        assert!(
            this_round >= kill_after,
            "round {round}: only {this_round} creates were acknowledged; failures: {failures:?}"
        );

        let restarted = start(&root).await;
        let api: Api<ConfigMap> = Api::namespaced(restarted.kube_client().await, NAMESPACE);
        let stored: BTreeMap<String, BTreeMap<String, String>> = api
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .map(|cm| {
                let data = cm.data.unwrap_or_default().into_iter().collect();
                (cm.metadata.name.unwrap(), data)
            })
            .collect();
        eprintln!(
            "round {round}: killed after {kill_after} acks, {this_round} acknowledged in all; \
             {} acknowledged so far, {} stored",
            acknowledged.len(),
            stored.len()
        );
        let missing: Vec<&String> = acknowledged
            .keys()
            .filter(|name| !stored.contains_key(*name))
            .collect();
        assert!(
            missing.is_empty(),
            "round {round}: {} of {} acknowledged configmaps lost after SIGKILL, e.g. {:?}",
            missing.len(),
            acknowledged.len(),
            &missing[..missing.len().min(5)]
        );
        for (name, data) in &acknowledged {
            assert_eq!(&stored[name], data, "round {round}: data of {name}");
        }
        // Unacknowledged creates may or may not have landed, but whatever is there is whole.
        for (name, data) in stored
            .iter()
            .filter(|(name, _)| !is_namespace_default(name))
        {
            let (round, i) = parse_name(name);
            assert_eq!(data, &configmap_content(round, i).1, "data of {name}");
        }
        kcp = Some(restarted);
    }
    let last = kcp.take().unwrap();
    tokio::task::spawn_blocking(move || last.stop())
        .await
        .unwrap();
}

async fn start(root: &Path) -> Kcp {
    let root = root.to_path_buf();
    tokio::task::spawn_blocking(move || Kcp::start(&root, &[]))
        .await
        .unwrap()
}

/// The name and data of the `i`th configmap of `round`.
fn configmap_content(round: usize, i: usize) -> (String, BTreeMap<String, String>) {
    let name = format!("cm-{round}-{i}");
    let data = BTreeMap::from([
        ("round".to_string(), round.to_string()),
        ("payload".to_string(), format!("{name}:").repeat(64)),
    ]);
    (name, data)
}

fn parse_name(name: &str) -> (usize, usize) {
    let mut parts = name
        .strip_prefix("cm-")
        .expect("only our configmaps")
        .split('-');
    let round = parts.next().unwrap().parse().unwrap();
    let i = parts.next().unwrap().parse().unwrap();
    (round, i)
}

fn configmap(name: &str, data: &BTreeMap<String, String>) -> ConfigMap {
    serde_json::from_value(serde_json::json!({"metadata": {"name": name}, "data": data})).unwrap()
}
