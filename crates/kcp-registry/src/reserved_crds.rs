//! kcp's admission plugins for CustomResourceDefinitions written through the API:
//!
//! - `apis.kcp.io/ReservedCRDGroups`: groups ending in `apis.kcp.io` are kcp's own (403
//!   `<group> is a reserved group`);
//! - `apis.kcp.io/ReservedCRDAnnotations`: annotations under `apis.kcp.io` (such as
//!   `apis.kcp.io/bound-crd`, which marks the CRDs kcp makes for APIBindings) are kcp's to set
//!   (403 `<key> is a reserved annotation`, several as Go aggregates them).
//!
//! The server's own writes pass.

use kcp_apimachinery::object::str_at;
use serde_json::Value;

use crate::error::RegistryError;
use crate::store::{Registry, Target};

/// The API group of kcp's API sharing, whose groups and annotations are reserved.
const APIS_GROUP: &str = "apis.kcp.io";

impl Registry {
    /// Checks a CustomResourceDefinition written through the API (other objects pass).
    pub(crate) fn admit_reserved_crd(
        &self,
        target: &Target<'_>,
        object: &Value,
    ) -> Result<(), RegistryError> {
        let resource = target.resource;
        if self.is_privileged()
            || resource.group != "apiextensions.k8s.io"
            || resource.name != "customresourcedefinitions"
        {
            return Ok(());
        }
        let name = str_at(object, &["metadata", "name"]);
        let group = str_at(object, &["spec", "group"]);
        if group.ends_with(APIS_GROUP) {
            return Err(target.forbidden(name, format!("{group} is a reserved group")));
        }
        let mut reserved: Vec<String> = object["metadata"]["annotations"]
            .as_object()
            .into_iter()
            .flat_map(|annotations| annotations.keys())
            .filter(|key| {
                let prefix = key.split('/').next().unwrap_or_default();
                prefix == APIS_GROUP || prefix.ends_with(&format!(".{APIS_GROUP}"))
            })
            .map(|key| format!("{key} is a reserved annotation"))
            .collect();
        reserved.sort();
        match reserved.len() {
            0 => Ok(()),
            1 => Err(target.forbidden(name, reserved.remove(0))),
            _ => Err(target.forbidden(name, format!("[{}]", reserved.join(", ")))),
        }
    }
}
