//! Custom resources in the registry on the in-memory store: a CRD serves its resource only in
//! its own logical cluster and only once Established; identical CRDs in several clusters share
//! one interned resource (and its compiled schema), freed once no cluster serves that spec;
//! objects are stored at the storage version and served at the requested one.

use std::sync::{Arc, Weak};

use kcp_apis::builtin::{Resource, ResourceRef};
use kcp_registry::{ListOptions, Registry};
use kcp_storage::{MemoryStorage, Storage};
use serde_json::{Value, json};

use crate::support::{cluster_wide, crds, establish_crd};

fn crd() -> Value {
    json!({
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Cluster",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [
                {"name": "v1", "served": true, "storage": true,
                 "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                     "spec": {"type": "object", "properties": {"size": {"type": "integer", "default": 1}}}}}}},
                {"name": "v1beta1", "served": true, "storage": false,
                 "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}
            ]
        }
    })
}

/// Creates the CRD in `cluster` and marks it Established, as the CRD controller would.
async fn create_established(registry: &Registry, cluster: &str) {
    let target = cluster_wide(cluster, crds());
    let mut created = registry.create(target, crd()).await.unwrap();
    created["status"]["conditions"] = json!([{"type": "Established", "status": "True"}]);
    registry
        .subresource("status")
        .unwrap()
        .update(target, "widgets.example.com", created)
        .await
        .unwrap();
}

#[tokio::test]
async fn identical_crds_share_one_resource_and_serve_only_their_cluster() {
    let registry = Registry::new(Arc::new(MemoryStorage::new()));
    let target = cluster_wide("root:a", crds());
    registry.create(target, crd()).await.unwrap();
    assert!(
        registry
            .resolve("root:a", "example.com", "v1", "widgets")
            .await
            .is_none(),
        "not served before it is Established"
    );
    establish_crd(&registry, "root:a", "widgets.example.com").await;
    create_established(&registry, "root:b").await;
    let a = registry
        .resolve("root:a", "example.com", "v1", "widgets")
        .await
        .unwrap();
    let b = registry
        .resolve("root:b", "example.com", "v1", "widgets")
        .await
        .unwrap();
    assert!(std::ptr::eq(&*a, &*b), "the same CRD is one resource");
    assert_eq!(registry.live_custom_resource_specs(), 1);
    assert!(
        registry
            .resolve("root:c", "example.com", "v1", "widgets")
            .await
            .is_none()
    );
    assert_eq!(registry.custom_resources("root:a").len(), 2);
    assert!(registry.custom_resources("root").is_empty());
}

#[tokio::test]
async fn objects_are_stored_at_the_storage_version_and_served_at_any() {
    let registry = Registry::new(Arc::new(MemoryStorage::new()));
    create_established(&registry, "root").await;
    let beta = registry
        .resolve("root", "example.com", "v1beta1", "widgets")
        .await
        .unwrap();
    let v1 = registry
        .resolve("root", "example.com", "v1", "widgets")
        .await
        .unwrap();
    fn at(resource: &Resource) -> kcp_registry::Target<'_> {
        cluster_wide("root", resource)
    }
    let created = registry
        .create(
            at(&beta),
            json!({"metadata": {"name": "w"}, "spec": {"extra": "beta only"}}),
        )
        .await
        .unwrap();
    assert_eq!(created["apiVersion"], "example.com/v1beta1");
    // Read at v1: converted, pruned to v1's schema and defaulted by it on the way out.
    let read = registry.get(at(&v1), "w").await.unwrap();
    assert_eq!(read["apiVersion"], "example.com/v1");
    assert_eq!(read["spec"], json!({"size": 1}));
    // At v1beta1, which preserves unknown fields, nothing was lost.
    let read = registry.get(at(&beta), "w").await.unwrap();
    assert_eq!(read["spec"]["extra"], "beta only");
    let listed = registry
        .list(at(&beta), ListOptions::default())
        .await
        .unwrap();
    assert_eq!(listed.items[0]["apiVersion"], "example.com/v1beta1");

    // JSON answers: from the stored bytes only where presenting them changes nothing (here an
    // object written at v1); the rest decoded and presented as above, byte for byte.
    registry
        .create(
            at(&v1),
            json!({"metadata": {"name": "x"}, "spec": {"size": 3}}),
        )
        .await
        .unwrap();
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    let json = |object: &Value| text(&kcp_apis::messages::to_json(object));
    match registry.get_json(at(&v1), "x").await.unwrap() {
        Ok(bytes) => assert_eq!(
            text(&bytes),
            json(&registry.get(at(&v1), "x").await.unwrap())
        ),
        Err(decoded) => panic!("decoded though it needs nothing: {decoded}"),
    }
    match registry.get_json(at(&v1), "w").await.unwrap() {
        Err(decoded) => assert_eq!(decoded["spec"], json!({"size": 1})),
        Ok(bytes) => panic!("served unpruned: {}", text(&bytes)),
    }
    match registry.get_json(at(&beta), "x").await.unwrap() {
        Err(decoded) => assert_eq!(decoded["apiVersion"], "example.com/v1beta1"),
        Ok(bytes) => panic!("served unconverted: {}", text(&bytes)),
    }
    for resource in [&v1, &beta] {
        let listed = registry
            .list(at(resource), ListOptions::default())
            .await
            .unwrap();
        let answers = registry
            .list_json(
                at(resource),
                ListOptions::default(),
                kcp_registry::JsonAnswer::ListItem,
            )
            .await
            .unwrap()
            .expect("widgets list as JSON answers");
        let answers: Vec<String> = answers.items.iter().map(|a| text(a)).collect();
        let objects: Vec<String> = listed.items.iter().map(json).collect();
        assert_eq!(answers, objects);
    }
}

const NAME: &str = "widgets.example.com";

/// A weak reference to the widgets resource `cluster` serves now.
async fn served_weakly(registry: &Registry, cluster: &str) -> Weak<Resource> {
    match registry
        .resolve(cluster, "example.com", "v1", "widgets")
        .await
    {
        Some(ResourceRef::Shared(resource)) => Arc::downgrade(&resource),
        other => panic!("widgets are not a shared custom resource in {cluster}: {other:?}"),
    }
}

/// Deletes the CRD of `cluster` as its controller would finish it: the delete starts
/// termination, removing the cleanup finalizer removes it.
async fn delete_crd(registry: &Registry, cluster: &str) {
    let target = cluster_wide(cluster, crds());
    registry.delete(target, NAME).await.unwrap();
    registry
        .patch(target, NAME, &|stored: &Value| {
            let mut next = stored.clone();
            next["metadata"]["finalizers"] = json!([]);
            Ok(next)
        })
        .await
        .unwrap();
    assert!(registry.get(target, NAME).await.is_err(), "{cluster}: gone");
}

#[tokio::test]
async fn custom_resources_are_freed_once_no_cluster_serves_their_spec() {
    let registry = Registry::new(Arc::new(MemoryStorage::new()));
    create_established(&registry, "root:a").await;
    create_established(&registry, "root:b").await;
    let original = served_weakly(&registry, "root:a").await;
    assert!(
        Weak::ptr_eq(&original, &served_weakly(&registry, "root:b").await),
        "two clusters with the same spec share one entry"
    );
    assert_eq!(registry.live_custom_resource_specs(), 1);

    let target = cluster_wide("root:a", crds());
    let mut previous: Option<Weak<Resource>> = None;
    for n in 0..20 {
        let mut crd = registry.get(target, NAME).await.unwrap();
        crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["description"] =
            json!(format!("revision {n}"));
        registry.update(target, NAME, crd).await.unwrap();
        let current = served_weakly(&registry, "root:a").await;
        assert!(!Weak::ptr_eq(&current, &original));
        if let Some(replaced) = previous.replace(current) {
            assert!(replaced.upgrade().is_none(), "the spec before {n} is freed");
        }
        assert_eq!(
            registry.live_custom_resource_specs(),
            2,
            "root:b's spec and root:a's latest"
        );
    }
    assert!(original.upgrade().is_some(), "root:b still serves it");

    delete_crd(&registry, "root:a").await;
    assert_eq!(registry.live_custom_resource_specs(), 1);
    assert!(previous.unwrap().upgrade().is_none());
    delete_crd(&registry, "root:b").await;
    assert_eq!(registry.live_custom_resource_specs(), 0);
    assert!(original.upgrade().is_none());
}

#[tokio::test]
async fn apis_kcp_io_groups_and_annotations_are_kcps() {
    let registry = Registry::new(Arc::new(MemoryStorage::new()));
    let target = cluster_wide("root:a", crds());
    let mut reserved_group = crd();
    reserved_group["metadata"]["name"] = json!("widgets.things.apis.kcp.io");
    reserved_group["spec"]["group"] = json!("things.apis.kcp.io");
    let error = registry
        .create(target, reserved_group.clone())
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        r#"customresourcedefinitions.apiextensions.k8s.io "widgets.things.apis.kcp.io" is forbidden: things.apis.kcp.io is a reserved group"#
    );
    // A validating plugin, as in kcp: an invalid CRD is refused as invalid first.
    let mut invalid = reserved_group.clone();
    invalid["spec"]["scope"] = json!("Galaxy");
    let error = registry.create(target, invalid).await.unwrap_err();
    assert!(
        matches!(error, kcp_registry::RegistryError::Invalid { .. }),
        "{error}"
    );
    let mut annotated = crd();
    annotated["metadata"]["annotations"] =
        json!({"apis.kcp.io/bound-crd": "", "example.com/ok": "yes"});
    let error = registry
        .create(target, annotated.clone())
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        r#"customresourcedefinitions.apiextensions.k8s.io "widgets.example.com" is forbidden: apis.kcp.io/bound-crd is a reserved annotation"#
    );
    // The server's own writes may use them.
    registry
        .privileged()
        .create(target, annotated)
        .await
        .unwrap();
}

/// Every question of what a cluster serves has one answer: a request's lookup, the listing
/// discovery reads, a lookup by kind or by any version, and the wildcard cluster's.
#[tokio::test]
async fn what_a_cluster_serves_is_answered_in_one_place() {
    let registry = Registry::new(Arc::new(MemoryStorage::new()));
    create_established(&registry, "root:a").await;

    for version in ["v1", "v1beta1"] {
        let served = registry.serves("root:a", "example.com", version, "widgets");
        assert_eq!(
            served.map(|r| r.version.to_string()).as_deref(),
            Some(version)
        );
        assert!(
            registry
                .serves("root:b", "example.com", version, "widgets")
                .is_none()
        );
    }
    let listed = registry.served("root:a");
    assert!(
        listed
            .groups()
            .iter()
            .any(|(group, versions)| *group == "example.com" && *versions == ["v1", "v1beta1"])
    );
    assert!(
        !registry
            .served("root:b")
            .groups()
            .iter()
            .any(|(g, _)| *g == "example.com")
    );
    let kinds: Vec<&str> = listed.non_builtin().iter().map(|r| &*r.kind).collect();
    let system = kcp_apis::system::resources().len();
    assert_eq!(kinds[..3], ["LogicalCluster", "Workspace", "WorkspaceType"]);
    assert_eq!(
        kinds[3..system],
        [
            "APIResourceSchema",
            "APIExport",
            "APIExport",
            "APIBinding",
            "APIBinding",
            "APIExportEndpointSlice",
            "Cluster",
            "APIResourceImport",
            "NegotiatedAPIResource"
        ]
    );
    assert_eq!(kinds[system..], ["Widget", "Widget"]);

    let by_kind = registry.serves_in_group("root:a", "example.com", |r| r.kind == "Widget");
    assert_eq!(
        by_kind.map(|r| r.version.to_string()).as_deref(),
        Some("v1")
    );
    // Built-in and kcp's kinds come first and are the same in every cluster.
    let configmaps = registry.serves("root:b", "", "v1", "configmaps").unwrap();
    assert!(matches!(configmaps, ResourceRef::Static(_)));
    assert!(
        registry
            .serves("root:b", "tenancy.kcp.io", "v1alpha1", "workspaces")
            .is_some()
    );

    let anywhere = registry
        .serves_anywhere("example.com", "v1", "widgets")
        .unwrap();
    let local = registry
        .serves("root:a", "example.com", "v1", "widgets")
        .unwrap();
    assert!(std::ptr::eq(&*anywhere, &*local));
    assert!(
        registry
            .serves_anywhere("example.com", "v2", "widgets")
            .is_none()
    );
}

/// A resource bound from an APIExport keeps its objects under the export's identity: the same
/// spec as a local CRD's in the same cluster, and another export's, never share objects.
#[tokio::test]
async fn bound_resources_are_stored_under_their_identity() {
    let storage = Arc::new(MemoryStorage::new());
    let registry = Registry::new(storage.clone());
    let interner = kcp_apis::custom::Interner::default();
    let spec = &crd()["spec"];
    let local = Arc::clone(&interner.resources(spec)[0]);
    let first = Arc::clone(&interner.resources_with_identity(spec, "abc123")[0]);
    let second = Arc::clone(&interner.resources_with_identity(spec, "def456")[0]);
    assert_eq!((local.identity(), first.identity()), ("", "abc123"));
    assert!(!Arc::ptr_eq(&first, &second));
    let made = [(&local, "local"), (&first, "first"), (&second, "second")];
    for (resource, name) in made {
        let widget =
            json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name}});
        registry
            .create(cluster_wide("root:a", resource), widget)
            .await
            .unwrap();
    }
    for (resource, name) in made {
        let listed = registry
            .list(cluster_wide("root:a", resource), ListOptions::default())
            .await
            .unwrap();
        let names: Vec<&str> = listed
            .items
            .iter()
            .filter_map(|item| item["metadata"]["name"].as_str())
            .collect();
        assert_eq!(names, [name]);
    }
    let bound =
        kcp_storage::keys::ResourceKeys::with_identity("example.com", "widgets", Some("abc123"));
    let stored = storage
        .get(&bound.object("root:a", None, "first"), 0)
        .await
        .unwrap();
    assert!(stored.kv.is_some());
}
