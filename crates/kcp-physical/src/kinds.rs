//! The kinds the multi-cluster layer reads and writes, as kube-rs dynamic resources, and the
//! names it gives them: `Cluster` (`cluster.example.dev/v1alpha1`), `APIResourceImport` and
//! `NegotiatedAPIResource` (`apiresource.kcp.io/v1alpha1`), and the workspace's CRDs.

use kube::api::ApiResource;
use kube::core::GroupVersionKind;
use serde_json::{Value, json};

use crate::puller::crd_name;

/// The label that assigns an object (or a namespace) to a physical cluster (the prototype's).
pub const CLUSTER_LABEL: &str = "kcp.dev/cluster";
/// The label naming a split Deployment's root on its leaves (the prototype's).
pub const OWNED_BY_LABEL: &str = "kcp.dev/owned-by";

/// The annotation naming an import's or negotiated resource's API version (`apps/v1`, `v1`).
pub const API_VERSION_ANNOTATION: &str = "apiresource.kcp.io/apiVersion";

/// The annotation of a NegotiatedAPIResource naming the clusters (locations) whose imports its
/// schema was negotiated from, sorted and comma-separated.
pub const LOCATIONS_ANNOTATION: &str = "apiresource.kcp.io/locations";

/// The group of imports and negotiated resources.
pub const APIRESOURCE_GROUP: &str = "apiresource.kcp.io";

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

/// `cluster.example.dev/v1alpha1` `clusters`.
pub fn clusters() -> ApiResource {
    resource("cluster.example.dev", "v1alpha1", "Cluster", "clusters")
}

/// `apiresource.kcp.io/v1alpha1` `apiresourceimports`.
pub fn imports() -> ApiResource {
    resource(
        APIRESOURCE_GROUP,
        "v1alpha1",
        "APIResourceImport",
        "apiresourceimports",
    )
}

/// `apiresource.kcp.io/v1alpha1` `negotiatedapiresources`.
pub fn negotiated() -> ApiResource {
    resource(
        APIRESOURCE_GROUP,
        "v1alpha1",
        "NegotiatedAPIResource",
        "negotiatedapiresources",
    )
}

/// `apiextensions.k8s.io/v1` `customresourcedefinitions`.
pub fn crds() -> ApiResource {
    resource(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
    )
}

/// A resource of one version: what an import and a negotiated resource are about.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Gvr {
    /// Empty for the core group.
    pub group: String,
    pub version: String,
    pub plural: String,
}

impl Gvr {
    /// The resource an import's or negotiated resource's spec names (`core` is the core group).
    pub fn of_spec(spec: &Value) -> Option<Gvr> {
        let group = spec["groupVersion"]["group"].as_str().unwrap_or_default();
        Some(Gvr {
            group: if group == "core" { "" } else { group }.to_string(),
            version: spec["groupVersion"]["version"].as_str()?.to_string(),
            plural: spec["plural"].as_str()?.to_string(),
        })
    }

    /// The group as names spell it: `core` for the core group.
    fn group_name(&self) -> &str {
        match self.group.as_str() {
            "" => "core",
            group => group,
        }
    }

    /// `apps/v1`, or `v1` for the core group.
    pub fn api_version(&self) -> String {
        match self.group.as_str() {
            "" => self.version.clone(),
            group => format!("{group}/{}", self.version),
        }
    }

    /// The name of the workspace's CRD for this resource (all its versions).
    pub fn crd_name(&self) -> String {
        crd_name(&self.plural, &self.group)
    }

    /// The NegotiatedAPIResource's name: `<plural>.<version>.<group>`.
    pub fn negotiated_name(&self) -> String {
        format!("{}.{}.{}", self.plural, self.version, self.group_name())
    }

    /// The APIResourceImport's name for the cluster `location`:
    /// `<plural>.<location>.<version>.<group>`.
    pub fn import_name(&self, location: &str) -> String {
        format!(
            "{}.{location}.{}.{}",
            self.plural,
            self.version,
            self.group_name()
        )
    }

    /// `plural.group` (`plural` for the core group), as a Cluster's `syncedResources` lists it.
    pub fn group_resource(&self) -> String {
        match self.group.as_str() {
            "" => self.plural.clone(),
            group => format!("{}.{group}", self.plural),
        }
    }
}

/// The condition `kind` of an object's `status.conditions`.
pub fn condition<'v>(object: &'v Value, kind: &str) -> Option<&'v Value> {
    object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
}

/// Whether the condition `kind` is `True`.
pub fn is_true(object: &Value, kind: &str) -> bool {
    condition(object, kind).is_some_and(|c| c["status"] == "True")
}

/// Sets the condition `kind` in `conditions` (a `status.conditions` list); its
/// `lastTransitionTime` moves only when its status does. Says whether anything changed.
pub fn set_condition(
    conditions: &mut Vec<Value>,
    kind: &str,
    status: &str,
    reason: &str,
    message: &str,
) -> bool {
    let mut condition = json!({"type": kind, "status": status});
    if !reason.is_empty() {
        condition["reason"] = json!(reason);
    }
    if !message.is_empty() {
        condition["message"] = json!(message);
    }
    match conditions.iter_mut().find(|c| c["type"] == kind) {
        Some(existing) => {
            let time = match existing["status"] == status {
                true => existing["lastTransitionTime"].clone(),
                false => Value::Null,
            };
            condition["lastTransitionTime"] = match time {
                Value::Null => json!(now()),
                time => time,
            };
            let changed = *existing != condition;
            *existing = condition;
            changed
        }
        None => {
            condition["lastTransitionTime"] = json!(now());
            conditions.push(condition);
            true
        }
    }
}

/// Removes the condition `kind`; says whether there was one.
pub fn remove_condition(conditions: &mut Vec<Value>, kind: &str) -> bool {
    let before = conditions.len();
    conditions.retain(|c| c["type"] != kind);
    conditions.len() != before
}

/// Now, as Kubernetes writes times (whole seconds, UTC).
pub fn now() -> String {
    jiff::Timestamp::now()
        .round(jiff::Unit::Second)
        .unwrap_or_else(|_| jiff::Timestamp::now())
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// An owner reference to `owner` (a Cluster or a NegotiatedAPIResource).
pub fn owner_reference(owner: &Value, api_version: &str, kind: &str) -> Value {
    json!({
        "apiVersion": api_version,
        "kind": kind,
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_prototype() {
        let deployments = Gvr {
            group: "apps".into(),
            version: "v1".into(),
            plural: "deployments".into(),
        };
        assert_eq!(deployments.negotiated_name(), "deployments.v1.apps");
        assert_eq!(deployments.import_name("east"), "deployments.east.v1.apps");
        assert_eq!(deployments.crd_name(), "deployments.apps");
        assert_eq!(deployments.api_version(), "apps/v1");
        let pods = Gvr::of_spec(
            &json!({"groupVersion": {"group": "core", "version": "v1"}, "plural": "pods"}),
        )
        .unwrap();
        assert_eq!(pods.group, "");
        assert_eq!(pods.negotiated_name(), "pods.v1.core");
        assert_eq!(pods.crd_name(), "pods.core");
        assert_eq!(pods.group_resource(), "pods");
        assert_eq!(pods.api_version(), "v1");
    }

    #[test]
    fn a_condition_moves_its_time_only_when_its_status_changes() {
        let mut conditions = Vec::new();
        assert!(set_condition(&mut conditions, "Ready", "True", "Ok", ""));
        conditions[0]["lastTransitionTime"] = json!("2020-01-01T00:00:00Z");
        assert!(!set_condition(&mut conditions, "Ready", "True", "Ok", ""));
        assert!(set_condition(
            &mut conditions,
            "Ready",
            "True",
            "Other",
            "m"
        ));
        assert_eq!(conditions[0]["lastTransitionTime"], "2020-01-01T00:00:00Z");
        assert!(set_condition(&mut conditions, "Ready", "False", "Down", ""));
        assert_ne!(conditions[0]["lastTransitionTime"], "2020-01-01T00:00:00Z");
        assert!(remove_condition(&mut conditions, "Ready"));
        assert!(!remove_condition(&mut conditions, "Ready"));
    }
}
