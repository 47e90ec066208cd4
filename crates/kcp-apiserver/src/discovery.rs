//! Legacy discovery documents (`/api`, `/apis`, `/api/v1`, `/apis/<group>[/<version>]`), built
//! from the catalogue of served resources. kubectl asks for aggregated discovery first and falls
//! back to these when the answer is plain `application/json`.

use kcp_apis::builtin::Resource;

use kcp_registry::ServedResources;
use serde_json::{Value, json};

/// `/api`, naming `address` (`host:port`, how the client reached the server) for every
/// client network, as kube-apiserver names its advertised address.
pub fn api_versions(address: Option<&str>) -> Value {
    let addresses: Vec<Value> = address
        .map(|address| json!({"clientCIDR": "0.0.0.0/0", "serverAddress": address}))
        .into_iter()
        .collect();
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": addresses,
    })
}

fn group_document(name: &str, versions: &[&str]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
        .collect();
    json!({
        "name": name,
        "versions": versions,
        "preferredVersion": versions.first().cloned().unwrap_or(Value::Null),
    })
}

/// `/apis`.
pub fn api_group_list(served: &ServedResources) -> Value {
    let groups: Vec<Value> = served
        .groups()
        .iter()
        .map(|(name, versions)| group_document(name, versions))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/<group>`, if the group is served.
pub fn api_group(served: &ServedResources, name: &str) -> Option<Value> {
    let groups = served.groups();
    let (name, versions) = groups.iter().find(|(g, _)| *g == name)?;
    let mut document = group_document(name, versions);
    document["kind"] = json!("APIGroup");
    document["apiVersion"] = json!("v1");
    Some(document)
}

/// `/api/v1` (group "") or `/apis/<group>/<version>`, if served.
pub fn resource_list(served: &ServedResources, group: &str, version: &str) -> Option<Value> {
    let mut resources = Vec::new();
    for r in served.in_group_version(group, version) {
        resources.push(resource_document(r));
        for (sub, verbs) in r.subresources {
            let mut entry = json!({
                "name": format!("{}/{sub}", r.name),
                "singularName": "",
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": verbs,
            });
            // A subresource answering with a kind of its own names its group and version
            // (client-go's scale client finds the Scale kind this way).
            let kind = crate::aggregated_discovery::subresource_kind(r, sub);
            if kind["kind"] != *r.kind || kind["group"] != *r.group {
                entry["group"] = kind["group"].clone();
                entry["version"] = kind["version"].clone();
                entry["kind"] = kind["kind"].clone();
            }
            resources.push(entry);
        }
    }
    if resources.is_empty() {
        return None;
    }
    // By name, subresources after their resource, as kube-apiserver installs them.
    resources.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    // `/api/v1`'s list says no apiVersion, as kube-apiserver's legacy group writes it.
    Some(match group {
        "" => json!({
            "kind": "APIResourceList",
            "groupVersion": version,
            "resources": resources,
        }),
        group => json!({
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": format!("{group}/{version}"),
            "resources": resources,
        }),
    })
}

/// Kubernetes' `storageVersionHash`: the first 8 bytes of the SHA-256 of
/// `<group>/<storage version>/<kind>`, in base64.
pub fn storage_version_hash(group: &str, version: &str, kind: &str) -> String {
    use base64::Engine;
    let digest = ring::digest::digest(
        &ring::digest::SHA256,
        format!("{group}/{version}/{kind}").as_bytes(),
    );
    base64::engine::general_purpose::STANDARD.encode(&digest.as_ref()[..8])
}

/// The group and version `r` is stored as in kube-apiserver: a custom resource's storage
/// version; events.k8s.io's Events as core Events; CustomResourceDefinitions still as
/// `apiextensions.k8s.io/v1beta1`.
fn storage_version(r: &Resource) -> (&str, &str) {
    if let Some(custom) = r.custom() {
        return (&r.group, &custom.storage_version);
    }
    match (&*r.group, &*r.kind) {
        ("events.k8s.io", "Event") => ("", "v1"),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => ("apiextensions.k8s.io", "v1beta1"),
        (group, _) => (group, &r.version),
    }
}

fn resource_document(r: &Resource) -> Value {
    let mut document = json!({
        "name": r.name,
        "singularName": r.singular,
        "namespaced": r.namespaced,
        "kind": r.kind,
        "verbs": r.verbs,
    });
    // Stored resources name their storage version's hash; reviews, never stored, do not.
    if r.verbs != ["create"] {
        let (group, version) = storage_version(r);
        document["storageVersionHash"] = json!(storage_version_hash(group, version, &r.kind));
    }
    if !r.short_names.is_empty() {
        document["shortNames"] = json!(r.short_names);
    }
    if !r.categories.is_empty() {
        document["categories"] = json!(r.categories);
    }
    document
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_resources_carry_kubernetes_storage_version_hash() {
        // kube-apiserver's values for configmaps and clusterroles.
        assert_eq!(storage_version_hash("", "v1", "ConfigMap"), "qFsyl6wFWjQ=");
        assert_eq!(
            storage_version_hash("rbac.authorization.k8s.io", "v1", "ClusterRole"),
            "bYE5ZWDrJ44="
        );
        let list = resource_list(&ServedResources::builtin(), "", "v1").unwrap();
        let configmaps = list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == "configmaps")
            .unwrap();
        assert_eq!(configmaps["storageVersionHash"], "qFsyl6wFWjQ=");
        let reviews =
            resource_list(&ServedResources::builtin(), "authorization.k8s.io", "v1").unwrap();
        assert!(
            reviews["resources"]
                .as_array()
                .unwrap()
                .iter()
                .all(|r| r.get("storageVersionHash").is_none())
        );
    }

    #[test]
    fn core_resources_and_their_subresources_are_listed() {
        let list = resource_list(&ServedResources::builtin(), "", "v1").unwrap();
        assert_eq!(list["groupVersion"], "v1");
        let names: Vec<&str> = list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        for name in [
            "namespaces",
            "namespaces/status",
            "namespaces/finalize",
            "configmaps",
            "serviceaccounts/token",
        ] {
            assert!(names.contains(&name), "{name} missing from {names:?}");
        }
        let cm = list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == "configmaps")
            .unwrap();
        assert_eq!(cm["shortNames"], json!(["cm"]));
        assert_eq!(cm["namespaced"], true);
    }

    #[test]
    fn groups_name_their_preferred_version() {
        let list = api_group_list(&ServedResources::builtin());
        let rbac = list["groups"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["name"] == "rbac.authorization.k8s.io")
            .unwrap();
        assert_eq!(
            rbac["preferredVersion"]["groupVersion"],
            "rbac.authorization.k8s.io/v1"
        );
        assert_eq!(
            api_group(&ServedResources::builtin(), "coordination.k8s.io").unwrap()["kind"],
            "APIGroup"
        );
        assert!(api_group(&ServedResources::builtin(), "apps").is_none());
        assert!(resource_list(&ServedResources::builtin(), "apps", "v1").is_none());
    }
}
