//! Publishing a negotiated resource as the workspace's CRD (`<plural>.<group>`, `<plural>.core`
//! for the core group), owned by the NegotiatedAPIResource, with the approval annotation
//! Kubernetes' own groups need: one version per negotiated resource, the newest stored. A CRD
//! applied by hand is never touched. Withdrawing removes the version again, and the CRD with
//! its last one.

use http::Method;
use serde_json::{Value, json};

use crate::kinds::{self, Gvr};
use crate::negotiation::negotiated_crd;
use crate::puller::{API_APPROVED, IMPORTED, needs_approval};
use crate::requests;

/// The CRD version a negotiated resource's spec describes.
fn crd_version(gvr: &Gvr, spec: &Value) -> Value {
    let mut version = json!({
        "name": gvr.version,
        "served": true,
        "storage": true,
        "schema": {"openAPIV3Schema": spec["openAPIV3Schema"]},
    });
    let has = |name: &str| {
        spec["subResources"]
            .as_array()
            .is_some_and(|s| s.iter().any(|s| s["name"] == name))
    };
    let mut subresources = serde_json::Map::new();
    if has("status") {
        subresources.insert("status".into(), json!({}));
    }
    if has("scale") {
        let mut scale =
            json!({"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"});
        if spec["openAPIV3Schema"]["properties"]["status"]["properties"]
            .get("selector")
            .is_some()
        {
            scale["labelSelectorPath"] = json!(".status.selector");
        }
        subresources.insert("scale".into(), scale);
    }
    if !subresources.is_empty() {
        version["subresources"] = Value::Object(subresources);
    }
    if let Some(columns) = spec["columnDefinitions"]
        .as_array()
        .filter(|c| !c.is_empty())
    {
        version["additionalPrinterColumns"] = json!(columns);
    }
    version
}

/// Kubernetes' order of versions: GA before beta before alpha, higher numbers first.
fn version_rank(version: &str) -> (u8, u64, u64) {
    let rest = version.strip_prefix('v').unwrap_or(version);
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let major = digits.parse().unwrap_or(0);
    let tail = &rest[digits.len()..];
    let (stage, minor) = match tail {
        "" => (3, 0),
        t if t.starts_with("beta") => (2, t[4..].parse().unwrap_or(0)),
        t if t.starts_with("alpha") => (1, t[5..].parse().unwrap_or(0)),
        _ => (0, 0),
    };
    (stage, major, minor)
}

/// Writes the CRD for `negotiated` (as stored: its uid owns the CRD); the CRD as it is now.
pub async fn publish(
    client: &kube::Client,
    negotiated: &Value,
    gvr: &Gvr,
) -> anyhow::Result<Option<Value>> {
    let spec = &negotiated["spec"];
    let path = requests::path(&kinds::crds(), None, &gvr.crd_name());
    let owner = kinds::owner_reference(
        negotiated,
        "apiresource.kcp.io/v1alpha1",
        "NegotiatedAPIResource",
    );
    let version = crd_version(gvr, spec);
    let Some(mut crd) = requests::get(client, &path).await? else {
        let mut names = json!({"plural": spec["plural"], "kind": spec["kind"]});
        for field in ["singular", "listKind", "shortNames", "categories"] {
            if let Some(value) = spec.get(field) {
                names[field] = value.clone();
            }
        }
        let mut crd = json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": gvr.crd_name(), "ownerReferences": [owner]},
            "spec": {"group": gvr.group, "names": names, "scope": spec["scope"], "versions": [version]},
        });
        if needs_approval(&gvr.group) {
            crd["metadata"]["annotations"] = json!({API_APPROVED: IMPORTED});
        }
        let collection = requests::collection(&kinds::crds(), None);
        return Ok(Some(
            requests::write(client, Method::POST, &collection, &crd).await?,
        ));
    };
    if !negotiated_crd(&crd) {
        return Ok(Some(crd));
    }
    let before = crd.clone();
    let versions = crd["spec"]["versions"]
        .as_array_mut()
        .map(std::mem::take)
        .unwrap_or_default();
    let mut versions: Vec<Value> = versions
        .into_iter()
        .filter(|v| v["name"] != gvr.version.as_str())
        .collect();
    versions.push(version);
    versions
        .sort_by_key(|v| std::cmp::Reverse(version_rank(v["name"].as_str().unwrap_or_default())));
    for (index, version) in versions.iter_mut().enumerate() {
        version["storage"] = json!(index == 0);
    }
    crd["spec"]["versions"] = Value::Array(versions);
    let owners = crd["metadata"]["ownerReferences"].as_array_mut();
    if let Some(owners) = owners
        && !owners.iter().any(|o| o["uid"] == owner["uid"])
    {
        owners.push(owner);
    }
    if crd == before {
        return Ok(Some(crd));
    }
    Ok(Some(
        requests::write(client, Method::PUT, &path, &crd).await?,
    ))
}

/// Removes what `negotiated` published: its version of the CRD it owns, the CRD with its last.
pub async fn withdraw(client: &kube::Client, negotiated: &Value, gvr: &Gvr) -> anyhow::Result<()> {
    let path = requests::path(&kinds::crds(), None, &gvr.crd_name());
    let Some(mut crd) = requests::get(client, &path).await? else {
        return Ok(());
    };
    let uid = &negotiated["metadata"]["uid"];
    let owned = crd["metadata"]["ownerReferences"]
        .as_array()
        .is_some_and(|owners| owners.iter().any(|o| o["uid"] == *uid));
    if !owned {
        return Ok(());
    }
    let versions: Vec<Value> = crd["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["name"] != gvr.version.as_str())
        .cloned()
        .collect();
    if versions.is_empty() {
        return requests::delete(client, &path).await;
    }
    let mut versions = versions;
    if !versions.iter().any(|v| v["storage"] == true) {
        versions[0]["storage"] = json!(true);
    }
    crd["spec"]["versions"] = Value::Array(versions);
    if let Some(owners) = crd["metadata"]["ownerReferences"].as_array_mut() {
        owners.retain(|o| o["uid"] != *uid);
    }
    requests::write(client, Method::PUT, &path, &crd).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_rank_as_kubernetes_orders_them() {
        let mut versions = ["v1alpha1", "v2", "v1beta2", "v1", "v1beta1", "v10"];
        versions.sort_by_key(|v| std::cmp::Reverse(version_rank(v)));
        assert_eq!(
            versions,
            ["v10", "v2", "v1", "v1beta2", "v1beta1", "v1alpha1"]
        );
    }

    #[test]
    fn a_version_carries_the_subresources_and_columns() {
        let gvr = Gvr {
            group: "apps".into(),
            version: "v1".into(),
            plural: "deployments".into(),
        };
        let spec = json!({
            "openAPIV3Schema": {"type": "object", "properties": {"status": {"type": "object", "properties": {"replicas": {"type": "integer"}}}}},
            "subResources": [{"name": "status"}, {"name": "scale"}],
            "columnDefinitions": [{"name": "Ready", "type": "string", "jsonPath": ".status.ready"}],
        });
        let version = crd_version(&gvr, &spec);
        assert_eq!(version["subresources"]["status"], json!({}));
        assert_eq!(
            version["subresources"]["scale"],
            json!({"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"})
        );
        assert_eq!(version["additionalPrinterColumns"][0]["name"], "Ready");
        assert_eq!(version["storage"], true);
    }
}
