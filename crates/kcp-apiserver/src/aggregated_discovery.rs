//! Aggregated discovery (`apidiscovery.k8s.io/v2`, and `v2beta1` for older clients): one
//! `APIGroupDiscoveryList` on `/api` (the core group) and one on `/apis` (every other group),
//! each resource with its verbs, scope, singular name, short names, categories, response kind
//! and subresources. kubectl 1.32 asks for it first and uses it only when both documents come
//! back with the aggregated Content-Type; otherwise it falls back to [`crate::discovery`].

use http::{HeaderValue, Response, StatusCode, header};
use kcp_apis::builtin::Resource;
use serde_json::{Value, json};

use crate::status::{Body, json_response};
use kcp_registry::ServedResources;

/// The Content-Type of an aggregated document of `version` (kubectl recognises it by these
/// parameters, in any order).
pub fn content_type(version: &str) -> String {
    format!("application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList")
}

/// The kind a subresource answers with: its parent's kind, except for the few that answer
/// with a kind of their own (`serviceaccounts/token`, the `scale` of custom resources).
pub(crate) fn subresource_kind(resource: &Resource, subresource: &str) -> Value {
    match (&*resource.group, &*resource.name, subresource) {
        ("", "serviceaccounts", "token") => {
            json!({"group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest"})
        }
        (_, _, "scale") => json!({"group": "autoscaling", "version": "v1", "kind": "Scale"}),
        _ => json!({"group": resource.group, "version": resource.version, "kind": resource.kind}),
    }
}

/// The kind a resource (or a subresource answering with its resource's kind) answers with,
/// as kube-apiserver's aggregated discovery names it: a built-in kind by its name alone (its
/// group and version are the document's), a custom resource's whole.
fn response_kind(r: &Resource) -> Value {
    match r.custom() {
        Some(_) => json!({"group": r.group, "version": r.version, "kind": r.kind}),
        None => json!({"group": "", "version": "", "kind": r.kind}),
    }
}

fn resource_document(r: &Resource) -> Value {
    let mut document = json!({
        "resource": r.name,
        "responseKind": response_kind(r),
        "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": r.singular,
        "verbs": r.verbs,
    });
    if !r.short_names.is_empty() {
        document["shortNames"] = json!(r.short_names);
    }
    if !r.categories.is_empty() {
        document["categories"] = json!(r.categories);
    }
    if !r.subresources.is_empty() {
        let mut subresources: Vec<Value> = r
            .subresources
            .iter()
            .map(|(name, verbs)| {
                let kind = subresource_kind(r, name);
                let kind = match kind["kind"] == *r.kind && kind["group"] == *r.group {
                    true => response_kind(r),
                    false => kind,
                };
                json!({"subresource": name, "responseKind": kind, "verbs": verbs})
            })
            .collect();
        subresources.sort_by(|a, b| a["subresource"].as_str().cmp(&b["subresource"].as_str()));
        document["subresources"] = json!(subresources);
    }
    document
}

fn group_document(served: &ServedResources, group: &str, versions: &[&str]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|version| {
            let mut resources: Vec<Value> = served
                .in_group_version(group, version)
                .map(resource_document)
                .collect();
            resources.sort_by(|a, b| a["resource"].as_str().cmp(&b["resource"].as_str()));
            json!({"version": version, "resources": resources, "freshness": "Current"})
        })
        .collect();
    // The core group has no name, and kube-apiserver writes none.
    let metadata = match group {
        "" => json!({}),
        group => json!({"name": group}),
    };
    json!({"metadata": metadata, "versions": versions})
}

/// The `APIGroupDiscoveryList` of `/api` (`core`) or `/apis`, in `version`.
pub fn document(served: &ServedResources, core: bool, version: &str) -> Value {
    let items: Vec<Value> = if core {
        vec![group_document(served, "", &["v1"])]
    } else {
        served
            .groups()
            .iter()
            .map(|(group, versions)| group_document(served, group, versions))
            .collect()
    };
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": format!("apidiscovery.k8s.io/{version}"),
        "metadata": {},
        "items": items,
    })
}

/// The aggregated document as a response with its Content-Type.
pub fn response(served: &ServedResources, core: bool, version: &'static str) -> Response<Body> {
    let mut response = json_response(StatusCode::OK, &document(served, core, version));
    if let Ok(value) = HeaderValue::from_str(&content_type(version)) {
        response.headers_mut().insert(header::CONTENT_TYPE, value);
    }
    response
        .headers_mut()
        .insert(header::VARY, HeaderValue::from_static("Accept"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find<'a>(list: &'a Value, group: &str, resource: &str) -> &'a Value {
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["metadata"]["name"].as_str().unwrap_or_default() == group)
            .unwrap()["versions"][0]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resource"] == resource)
            .unwrap()
    }

    #[test]
    fn core_group_carries_kubectls_fields() {
        let core = document(&ServedResources::builtin(), true, "v2");
        assert_eq!(core["apiVersion"], "apidiscovery.k8s.io/v2");
        assert_eq!(core["items"].as_array().unwrap().len(), 1);
        assert_eq!(core["items"][0]["versions"][0]["freshness"], "Current");
        let cm = find(&core, "", "configmaps");
        assert_eq!(cm["scope"], "Namespaced");
        assert_eq!(cm["singularResource"], "configmap");
        assert_eq!(cm["shortNames"], json!(["cm"]));
        // A built-in kind by its name alone, as kube-apiserver writes it.
        assert_eq!(
            cm["responseKind"],
            json!({"group": "", "version": "", "kind": "ConfigMap"})
        );
        assert_eq!(core["items"][0]["metadata"], json!({}));
        assert!(cm["verbs"].as_array().unwrap().contains(&json!("watch")));
        let ns = find(&core, "", "namespaces");
        assert_eq!(ns["scope"], "Cluster");
        // Subresources by name.
        assert_eq!(ns["subresources"][0]["subresource"], "finalize");
        assert_eq!(ns["subresources"][1]["subresource"], "status");
        assert_eq!(ns["subresources"][1]["responseKind"]["kind"], "Namespace");
        assert_eq!(
            ns["subresources"][1]["verbs"],
            json!(["get", "patch", "update"])
        );
        let token = &find(&core, "", "serviceaccounts")["subresources"][0];
        assert_eq!(token["responseKind"]["kind"], "TokenRequest");
        assert_eq!(token["responseKind"]["group"], "authentication.k8s.io");
    }

    #[test]
    fn other_groups_are_under_apis() {
        let apis = document(&ServedResources::builtin(), false, "v2beta1");
        assert_eq!(apis["apiVersion"], "apidiscovery.k8s.io/v2beta1");
        let crd = find(&apis, "apiextensions.k8s.io", "customresourcedefinitions");
        assert_eq!(crd["shortNames"], json!(["crd", "crds"]));
        assert_eq!(crd["categories"], json!(["api-extensions"]));
        assert!(
            apis["items"]
                .as_array()
                .unwrap()
                .iter()
                .all(|g| g["metadata"]["name"] != "")
        );
    }

    #[test]
    fn the_scale_of_a_custom_resource_answers_with_autoscaling_v1_scale() {
        let interner = kcp_apis::custom::Interner::default();
        let resources = interner.resources(&json!({
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                          "subresources": {"status": {}, "scale": {
                              "specReplicasPath": ".spec.replicas",
                              "statusReplicasPath": ".status.replicas"}}}]
        }));
        let document = resource_document(&resources[0]);
        assert_eq!(
            document["subresources"][0]["responseKind"],
            json!({"group": "autoscaling", "version": "v1", "kind": "Scale"})
        );
        // A custom resource's own kind whole, as the CRDs' discovery writes it.
        assert_eq!(
            document["subresources"][1]["responseKind"],
            json!({"group": "example.com", "version": "v1", "kind": "Widget"})
        );
    }

    #[test]
    fn responses_name_the_aggregated_type() {
        let response = response(&ServedResources::builtin(), false, "v2");
        assert_eq!(
            response.headers()[header::CONTENT_TYPE],
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
        );
    }
}
