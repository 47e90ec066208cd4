//! Registry semantics on the in-memory store.

use std::sync::Arc;

use kcp_registry::{
    DeleteOptions, DeleteOutcome, ListOptions, Propagation, Registry, RegistryError, Target,
};
use kcp_storage::MemoryStorage;
use serde_json::json;

use crate::support::{builtin, cluster_wide, configmaps};

async fn registry() -> Registry {
    let registry = Registry::new(Arc::new(MemoryStorage::new()));
    for cluster in ["root", "root:other"] {
        registry.ensure_namespace(cluster, "default").await.unwrap();
    }
    registry
}

#[tokio::test]
async fn create_sets_server_fields_and_rejects_duplicates_and_bad_names() {
    let registry = registry().await;
    let created = registry
        .create(
            configmaps("root", "default"),
            json!({"metadata": {"name": "a"}, "data": {"k": "v"}}),
        )
        .await
        .unwrap();
    assert_eq!(created["kind"], "ConfigMap");
    assert_eq!(created["apiVersion"], "v1");
    assert_eq!(created["metadata"]["namespace"], "default");
    assert_eq!(created["metadata"]["uid"].as_str().unwrap().len(), 36);
    assert!(
        created["metadata"]["creationTimestamp"]
            .as_str()
            .unwrap()
            .ends_with('Z')
    );
    assert!(
        created["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
            > 0
    );

    let again = registry
        .create(
            configmaps("root", "default"),
            json!({"metadata": {"name": "a"}}),
        )
        .await;
    assert_eq!(
        again.unwrap_err().to_string(),
        "configmaps \"a\" already exists"
    );
    let bad = registry
        .create(
            configmaps("root", "default"),
            json!({"metadata": {"name": "Bad_Name"}}),
        )
        .await
        .unwrap_err();
    assert!(matches!(bad, RegistryError::Invalid { .. }));
    assert!(
        bad.to_string()
            .starts_with("ConfigMap \"Bad_Name\" is invalid: metadata.name: Invalid value"),
        "{bad}"
    );
    let generated = registry
        .create(
            configmaps("root", "default"),
            json!({"metadata": {"generateName": "gen-"}}),
        )
        .await
        .unwrap();
    assert!(
        generated["metadata"]["name"]
            .as_str()
            .unwrap()
            .starts_with("gen-")
    );
    let wrong_kind = registry
        .create(
            configmaps("root", "default"),
            json!({"kind": "Secret", "metadata": {"name": "s"}}),
        )
        .await;
    assert!(matches!(wrong_kind, Err(RegistryError::BadRequest(_))));
    let missing_ns = Target {
        namespace: Some("nope"),
        ..configmaps("root", "default")
    };
    let error = registry
        .create(missing_ns, json!({"metadata": {"name": "x"}}))
        .await
        .unwrap_err();
    assert_eq!(error.to_string(), "namespaces \"nope\" not found");
    // The same name in another logical cluster is another object.
    registry
        .create(
            configmaps("root:other", "default"),
            json!({"metadata": {"name": "a"}}),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn update_checks_resource_version_and_keeps_server_fields() {
    let registry = registry().await;
    let created = registry
        .create(
            configmaps("root", "default"),
            json!({"metadata": {"name": "a"}, "data": {"k": "1"}}),
        )
        .await
        .unwrap();
    let mut changed = created.clone();
    changed["data"]["k"] = json!("2");
    changed["metadata"]["uid"] = json!("forged");
    let updated = registry
        .update(configmaps("root", "default"), "a", changed.clone())
        .await
        .unwrap();
    assert_eq!(updated["data"]["k"], "2");
    assert_eq!(updated["metadata"]["uid"], created["metadata"]["uid"]);
    let stale = registry
        .update(configmaps("root", "default"), "a", changed)
        .await
        .unwrap_err();
    assert_eq!(
        stale.to_string(),
        "Operation cannot be fulfilled on configmaps \"a\": the object has been modified; please apply your changes to the latest version and try again"
    );
    let missing = registry
        .update(
            configmaps("root", "default"),
            "b",
            json!({"metadata": {"name": "b"}}),
        )
        .await
        .unwrap_err();
    assert!(matches!(missing, RegistryError::NotFound { .. }));
    let renamed = registry
        .update(
            configmaps("root", "default"),
            "a",
            json!({"metadata": {"name": "c"}}),
        )
        .await
        .unwrap_err();
    assert!(matches!(renamed, RegistryError::BadRequest(_)));
}

#[tokio::test]
async fn finalizers_hold_a_delete_until_they_are_removed() {
    let registry = registry().await;
    registry
        .create(
            configmaps("root", "default"),
            json!({"metadata": {"name": "f", "finalizers": ["example.com/hold"]}}),
        )
        .await
        .unwrap();
    let pending = match registry
        .delete(configmaps("root", "default"), "f")
        .await
        .unwrap()
    {
        DeleteOutcome::Pending(object) => object,
        other => panic!("expected pending, got {other:?}"),
    };
    assert!(pending["metadata"]["deletionTimestamp"].is_string());
    let mut released = registry
        .get(configmaps("root", "default"), "f")
        .await
        .unwrap();
    released["metadata"]["finalizers"] = json!([]);
    registry
        .update(configmaps("root", "default"), "f", released)
        .await
        .unwrap();
    assert!(matches!(
        registry.get(configmaps("root", "default"), "f").await,
        Err(RegistryError::NotFound { .. })
    ));
    assert!(matches!(
        registry.delete(configmaps("root", "default"), "f").await,
        Err(RegistryError::NotFound { .. })
    ));
}

#[tokio::test]
async fn propagation_policies_set_the_collectors_finalizers_and_preconditions_hold() {
    let registry = registry().await;
    let target = || configmaps("root", "default");
    let created = registry
        .create(target(), json!({"metadata": {"name": "p"}}))
        .await
        .unwrap();
    let wrong_uid = DeleteOptions {
        uid: Some("not-its-uid".into()),
        ..DeleteOptions::default()
    };
    let refused = registry
        .delete_with(target(), "p", &wrong_uid)
        .await
        .unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("Precondition failed: UID in precondition"),
        "{refused}"
    );
    // Orphan: marked, with the orphan finalizer; Foreground on top swaps it.
    let orphan = DeleteOptions {
        uid: created["metadata"]["uid"].as_str().map(str::to_string),
        ..DeleteOptions::propagating(Propagation::Orphan)
    };
    let DeleteOutcome::Pending(pending) =
        registry.delete_with(target(), "p", &orphan).await.unwrap()
    else {
        panic!("an orphaning delete waits for the collector");
    };
    assert_eq!(pending["metadata"]["finalizers"], json!(["orphan"]));
    assert!(pending["metadata"]["deletionTimestamp"].is_string());
    let foreground = DeleteOptions::propagating(Propagation::Foreground);
    let DeleteOutcome::Pending(swapped) = registry
        .delete_with(target(), "p", &foreground)
        .await
        .unwrap()
    else {
        panic!("a foreground delete waits for the collector");
    };
    assert_eq!(
        swapped["metadata"]["finalizers"],
        json!(["foregroundDeletion"])
    );
    assert_eq!(
        swapped["metadata"]["deletionTimestamp"],
        pending["metadata"]["deletionTimestamp"]
    );
    // Background clears the collector's finalizers: the object goes.
    let background = DeleteOptions::propagating(Propagation::Background);
    assert!(matches!(
        registry
            .delete_with(target(), "p", &background)
            .await
            .unwrap(),
        DeleteOutcome::Deleted(_)
    ));
    assert!(matches!(
        registry.get(target(), "p").await,
        Err(RegistryError::NotFound { .. })
    ));
    // Namespaces take preconditions too.
    let namespaces = || cluster_wide("root", builtin("", "namespaces"));
    registry
        .create(namespaces(), json!({"metadata": {"name": "doomed"}}))
        .await
        .unwrap();
    let refused = registry
        .delete_with(namespaces(), "doomed", &wrong_uid)
        .await
        .unwrap_err();
    assert!(
        refused.to_string().contains("Precondition failed"),
        "{refused}"
    );
    // Without a policy an object goes at once.
    registry
        .create(target(), json!({"metadata": {"name": "q"}}))
        .await
        .unwrap();
    assert!(matches!(
        registry.delete(target(), "q").await.unwrap(),
        DeleteOutcome::Deleted(_)
    ));
}

#[tokio::test]
async fn lists_page_one_snapshot_with_continue_tokens() {
    let registry = registry().await;
    for i in 0..7 {
        registry
            .create(
                configmaps("root", "default"),
                json!({"metadata": {"name": format!("cm{i}")}}),
            )
            .await
            .unwrap();
    }
    registry
        .create(
            configmaps("root:other", "default"),
            json!({"metadata": {"name": "elsewhere"}}),
        )
        .await
        .unwrap();
    let first = registry
        .list(
            configmaps("root", "default"),
            ListOptions {
                limit: 3,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(first.items.len(), 3);
    assert_eq!(first.remaining_item_count, Some(4));
    registry
        .create(
            configmaps("root", "default"),
            json!({"metadata": {"name": "cm9"}}),
        )
        .await
        .unwrap();
    let mut names: Vec<String> = first
        .items
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    let mut token = first.continue_token;
    while let Some(t) = token {
        let page = registry
            .list(
                configmaps("root", "default"),
                ListOptions {
                    limit: 3,
                    continue_token: Some(t),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(page.resource_version, first.resource_version);
        names.extend(
            page.items
                .iter()
                .map(|o| o["metadata"]["name"].as_str().unwrap().to_string()),
        );
        token = page.continue_token;
    }
    assert_eq!(
        names,
        (0..7).map(|i| format!("cm{i}")).collect::<Vec<_>>(),
        "the snapshot excludes cm9"
    );
    let filtered = registry
        .list(
            configmaps("root", "default"),
            ListOptions {
                limit: 2,
                filter: Some(Box::new(|o| {
                    o["metadata"]["name"].as_str().unwrap().ends_with('9')
                })),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(filtered.items.len(), 1);
    assert!(filtered.continue_token.is_none());
}

#[tokio::test]
async fn watches_translate_storage_events_and_follow_selectors() {
    use futures::StreamExt;
    let registry = registry().await;
    let start = registry
        .list(configmaps("root", "default"), ListOptions::default())
        .await
        .unwrap()
        .resource_version;
    let only_web: kcp_registry::Filter = Box::new(|o| o["metadata"]["labels"]["app"] == "web");
    let events = registry
        .watch(configmaps("root", "default"), start, Some(only_web))
        .await
        .unwrap();
    let all = registry
        .watch(configmaps("root", "default"), start, None)
        .await
        .unwrap();

    let created = registry
        .create(
            configmaps("root", "default"),
            json!({"metadata": {"name": "w", "labels": {"app": "web"}}}),
        )
        .await
        .unwrap();
    let mut relabelled = created.clone();
    relabelled["metadata"]["labels"]["app"] = json!("db");
    registry
        .update(configmaps("root", "default"), "w", relabelled)
        .await
        .unwrap();
    registry
        .delete(configmaps("root", "default"), "w")
        .await
        .unwrap();
    registry
        .create(
            configmaps("root:other", "default"),
            json!({"metadata": {"name": "w"}}),
        )
        .await
        .unwrap();

    let kinds = |events: Vec<kcp_registry::WatchEvent>| {
        events.into_iter().map(|e| e.kind).collect::<Vec<_>>()
    };
    let filtered: Vec<_> = events.take(2).map(Result::unwrap).collect().await;
    assert_eq!(
        kinds(filtered),
        ["ADDED", "DELETED"],
        "leaving the selector is a DELETED"
    );
    let everything: Vec<_> = all.take(3).map(Result::unwrap).collect().await;
    let deleted = everything[2].object().unwrap();
    assert_eq!(kinds(everything), ["ADDED", "MODIFIED", "DELETED"]);
    assert_eq!(
        deleted["metadata"]["labels"]["app"], "db",
        "a delete carries the last state"
    );
}

#[tokio::test]
async fn dry_runs_check_everything_and_store_nothing() {
    let registry = registry().await;
    let dry = registry.dry_run();
    let created = dry
        .create(
            configmaps("root", "default"),
            json!({"metadata": {"name": "d"}}),
        )
        .await
        .unwrap();
    assert!(created["metadata"]["uid"].is_string());
    assert!(created["metadata"].get("resourceVersion").is_none());
    assert!(matches!(
        registry.get(configmaps("root", "default"), "d").await,
        Err(RegistryError::NotFound { .. })
    ));

    let stored = registry
        .create(
            configmaps("root", "default"),
            json!({"metadata": {"name": "d"}, "data": {"k": "1"}}),
        )
        .await
        .unwrap();
    assert!(matches!(
        dry.create(
            configmaps("root", "default"),
            json!({"metadata": {"name": "d"}})
        )
        .await,
        Err(RegistryError::AlreadyExists { .. })
    ));
    let mut changed = stored.clone();
    changed["data"]["k"] = json!("2");
    assert_eq!(
        dry.update(configmaps("root", "default"), "d", changed)
            .await
            .unwrap()["data"]["k"],
        "2"
    );
    assert!(matches!(
        dry.delete(configmaps("root", "default"), "d")
            .await
            .unwrap(),
        DeleteOutcome::Deleted(_)
    ));
    assert_eq!(
        registry
            .get(configmaps("root", "default"), "d")
            .await
            .unwrap(),
        stored,
        "nothing changed"
    );
}

async fn current(registry: &Registry) -> u64 {
    registry
        .list(configmaps("root", "default"), ListOptions::default())
        .await
        .unwrap()
        .resource_version
}

async fn create_configmaps(registry: &Registry, cluster: &str, names: std::ops::Range<usize>) {
    for i in names {
        registry
            .create(
                configmaps(cluster, "default"),
                json!({"metadata": {"name": format!("c{i}")}}),
            )
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn watchers_of_a_resource_share_each_encoded_event() {
    use futures::StreamExt;
    let registry = registry().await;
    let start = current(&registry).await;
    let mut a = registry
        .watch(configmaps("root", "default"), start, None)
        .await
        .unwrap();
    let mut b = registry
        .watch(configmaps("root", "default"), start, None)
        .await
        .unwrap();
    let mut other = registry
        .watch(configmaps("root:other", "default"), start, None)
        .await
        .unwrap();
    create_configmaps(&registry, "root:other", 0..1).await;
    create_configmaps(&registry, "root", 0..1).await;
    let (a, b) = (
        a.next().await.unwrap().unwrap(),
        b.next().await.unwrap().unwrap(),
    );
    assert_eq!(a.object().unwrap()["metadata"]["name"], "c0");
    assert_eq!(
        a.encoded.as_ptr(),
        b.encoded.as_ptr(),
        "one encoding for both watchers"
    );
    let seen = other.next().await.unwrap().unwrap();
    assert_eq!(seen.object().unwrap()["metadata"]["namespace"], "default");
    assert_ne!(
        seen.encoded.as_ptr(),
        a.encoded.as_ptr(),
        "each cluster sees its own"
    );
    let parsed: serde_json::Value = serde_json::from_slice(&a.encoded).unwrap();
    assert_eq!(parsed, *a.object().unwrap());
}

#[tokio::test]
async fn a_watcher_that_falls_behind_catches_up_or_expires() {
    use futures::StreamExt;
    // A window of 1,024 events, which the 1,700 below overflow (the server keeps more).
    let registry = registry().await.with_watch_window(1024);
    let start = current(&registry).await;
    let mut slow = registry
        .watch(configmaps("root", "default"), start, None)
        .await
        .unwrap();
    let mut slower = registry
        .watch(configmaps("root", "default"), start, None)
        .await
        .unwrap();
    // More than a watcher's channel holds, less than the hub's buffer: caught up, in order.
    create_configmaps(&registry, "root", 0..400).await;
    for i in 0..400 {
        let event = slow.next().await.unwrap().unwrap();
        assert_eq!(event.object().unwrap()["metadata"]["name"], format!("c{i}"));
    }
    // More than the buffer: the watcher ends with 410, as kube-apiserver ends slow watchers.
    // The other watcher keeps up, in steps well inside the buffer.
    for step in (400..1700).step_by(100) {
        create_configmaps(&registry, "root", step..step + 100).await;
        for i in step..step + 100 {
            let event = slow.next().await.unwrap().unwrap();
            assert_eq!(event.object().unwrap()["metadata"]["name"], format!("c{i}"));
        }
    }
    let mut outcome = None;
    while let Some(event) = slower.next().await {
        if let Err(error) = event {
            outcome = Some(error);
            break;
        }
    }
    assert!(
        matches!(outcome, Some(RegistryError::Expired(_))),
        "{outcome:?}"
    );
    // A new watcher from an old revision outside the window still gets every event.
    let late = registry
        .watch(configmaps("root", "default"), start, None)
        .await
        .unwrap();
    let names: Vec<_> = late
        .take(1700)
        .map(|e| e.unwrap().object().unwrap()["metadata"]["name"].clone())
        .collect()
        .await;
    assert_eq!(names[1699], "c1699");
}

#[tokio::test]
async fn generation_counts_spec_changes_of_the_kinds_that_track_it() {
    let registry = registry().await;
    let webhooks = cluster_wide(
        "root",
        builtin(
            "admissionregistration.k8s.io",
            "validatingwebhookconfigurations",
        ),
    );
    let created = registry
        .create(
            webhooks,
            json!({"metadata": {"name": "w", "generation": 9}, "webhooks": []}),
        )
        .await
        .unwrap();
    assert_eq!(created["metadata"]["generation"], 1);
    let mut labelled = created.clone();
    labelled["metadata"]["labels"] = json!({"a": "b"});
    let labelled = registry.update(webhooks, "w", labelled).await.unwrap();
    assert_eq!(
        labelled["metadata"]["generation"], 1,
        "metadata changes keep it"
    );
    let mut changed = labelled.clone();
    changed["webhooks"] = json!([{
        "name": "a.b.c",
        "clientConfig": {"url": "https://example.com/hook"},
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
    }]);
    changed["metadata"]["generation"] = json!(40);
    let changed = registry.update(webhooks, "w", changed).await.unwrap();
    assert_eq!(changed["metadata"]["generation"], 2);

    let configmap = registry
        .create(
            configmaps("root", "default"),
            json!({"metadata": {"name": "g", "generation": 5}}),
        )
        .await
        .unwrap();
    assert!(configmap["metadata"].get("generation").is_none());
}

#[tokio::test]
async fn updates_and_patches_that_change_nothing_write_nothing() {
    use futures::StreamExt;

    let registry = registry().await;
    let created = registry
        .create(
            configmaps("root", "default"),
            json!({"metadata": {"name": "same", "labels": {"a": "1"}}, "data": {"k": "v"}}),
        )
        .await
        .unwrap();
    let revision: u64 = created["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let mut events = registry
        .watch(configmaps("root", "default"), revision, None)
        .await
        .unwrap();

    // The object as read (resourceVersion and kcp.io/cluster included), and without them.
    let read = registry
        .get(configmaps("root", "default"), "same")
        .await
        .unwrap();
    let updated = registry
        .update(configmaps("root", "default"), "same", read.clone())
        .await
        .unwrap();
    assert_eq!(updated, read);
    let bare = json!({"metadata": {"name": "same", "labels": {"a": "1"}}, "data": {"k": "v"}});
    let updated = registry
        .update(configmaps("root", "default"), "same", bare)
        .await
        .unwrap();
    assert_eq!(
        updated["metadata"]["resourceVersion"],
        read["metadata"]["resourceVersion"]
    );
    let patched = registry
        .patch(configmaps("root", "default"), "same", &|current| {
            Ok(current.clone())
        })
        .await
        .unwrap();
    assert_eq!(patched, read);
    assert_eq!(current(&registry).await, revision);

    // A real change is the first event the watch sees.
    let changed = registry
        .patch(configmaps("root", "default"), "same", &|current| {
            let mut next = current.clone();
            next["data"]["k"] = json!("w");
            Ok(next)
        })
        .await
        .unwrap();
    let event = events.next().await.unwrap().unwrap();
    assert_eq!(
        (event.kind, event.object().unwrap()["data"]["k"].clone()),
        ("MODIFIED", json!("w"))
    );
    assert_eq!(
        event.revision.to_string(),
        changed["metadata"]["resourceVersion"].as_str().unwrap()
    );
}
