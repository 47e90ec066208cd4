//! API negotiation, per workspace and resource version (kcp's 2021 `apiresource` controller):
//! the imports of one resource from every Cluster of a workspace become one
//! `NegotiatedAPIResource` (`<plural>.<version>.<group>`), whose schema every cluster accepts.
//!
//! - A CRD for the resource applied by hand (one no NegotiatedAPIResource owns) wins: the
//!   negotiated resource takes its schema, `Enforced=True`, and each import is only checked
//!   against it (`Compatible=False`, reason `IncompatibleSchema`, with the field errors).
//! - Otherwise the schema is the least common denominator of the imports, in the order they were
//!   made; an import may narrow it as its `schemaUpdateStrategy` allows (`UpdateNever`: never;
//!   `UpdateUnpublished`, the default: while the negotiated resource is not published;
//!   `UpdatePublished`: always), and is otherwise only checked against it. While every cluster
//!   it was negotiated from is still there, a published schema is the base of the next
//!   negotiation; once one went (its imports removed), it is negotiated again from the imports
//!   left, which may widen it.
//! - No import left: the negotiated resource goes, with the CRD version it published.
//! - `spec.publish` (the controller's `auto_publish` for new ones): the schema becomes the
//!   workspace's CRD ([`crate::publish`]), the first time once no Cluster of the workspace is
//!   still connecting (clusters registered together negotiate together); `Published` follows the CRD's `Established` and
//!   `NamesAccepted`, and imports that are compatible are `Available` while it is published.
//!   A resource the workspace serves itself (ConfigMaps, Secrets) is never published over
//!   (`Published=False`, `CRDRefused`), but its compatible imports are `Available`
//!   (`ServedByWorkspace`): the syncer takes those objects to the clusters too.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use http::Method;
use kcp_apimachinery::schema::compat;
use kcp_sdk::ClusterKey;
use serde_json::{Value, json};

use crate::Shared;
use crate::kinds::{self, Gvr};
use crate::publish;
use crate::requests;

/// How soon a CRD just written is looked at again for `Established`.
const AWAIT_ESTABLISHED: Duration = Duration::from_millis(250);

/// Whether an import's strategy lets it narrow the negotiated schema.
fn may_narrow(strategy: &str, published: bool) -> bool {
    match strategy {
        "UpdateNever" => false,
        "UpdatePublished" => true,
        // UpdateUnpublished, the default.
        _ => !published,
    }
}

/// The outcome of one negotiation.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The negotiated resource's spec.
    pub spec: Value,
    /// The clusters its schema was negotiated from.
    pub locations: Vec<String>,
    /// Whether a CRD applied by hand decides the schema.
    pub enforced: bool,
    /// Each import's name and whether it is compatible.
    pub imports: Vec<(String, Verdict)>,
}

/// Whether an import is compatible, or why not: a reason and a message.
pub type Verdict = Result<(), (&'static str, String)>;

/// The spec fields every import and negotiated resource share, from an import.
fn common_spec(import: &Value) -> Value {
    let mut spec = import["spec"].clone();
    if let Some(spec) = spec.as_object_mut() {
        spec.remove("location");
        spec.remove("schemaUpdateStrategy");
    }
    spec
}

/// The schema of the CRD's version `version`.
fn crd_schema<'c>(crd: &'c Value, version: &str) -> Option<&'c Value> {
    crd["spec"]["versions"]
        .as_array()?
        .iter()
        .find(|v| v["name"] == version)
        .map(|v| &v["schema"]["openAPIV3Schema"])
}

/// Negotiates `imports` (of one resource version, oldest first) given the negotiated resource
/// so far and a CRD applied by hand, if any.
pub fn decide(
    gvr: &Gvr,
    imports: &[Value],
    negotiated: Option<&Value>,
    manual_crd: Option<&Value>,
    auto_publish: bool,
) -> Option<Decision> {
    let first = imports.first()?;
    let path = first["spec"]["kind"].as_str().unwrap_or_default();
    let name = |i: &Value| {
        i["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let location = |i: &Value| {
        i["spec"]["location"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let mut spec = common_spec(first);
    let mut verdicts = Vec::new();
    let mut locations = BTreeSet::new();
    if let Some(crd) = manual_crd {
        let crd_spec = &crd["spec"];
        spec["scope"] = crd_spec["scope"].clone();
        for field in [
            "plural",
            "singular",
            "kind",
            "listKind",
            "shortNames",
            "categories",
        ] {
            match crd_spec["names"].get(field) {
                Some(value) => spec[field] = value.clone(),
                None => {
                    spec.as_object_mut()?.remove(field);
                }
            }
        }
        spec["publish"] = json!(true);
        let schema = crd_schema(crd, &gvr.version);
        if let Some(schema) = schema {
            spec["openAPIV3Schema"] = schema.clone();
        }
        for import in imports {
            let verdict = match schema {
                None => Err((
                    "VersionNotServed",
                    format!(
                        "the CustomResourceDefinition {} serves no version {}",
                        gvr.crd_name(),
                        gvr.version
                    ),
                )),
                Some(schema) => {
                    compat::compare(path, schema, &import["spec"]["openAPIV3Schema"], false)
                        .map(|_| ())
                        .map_err(|errors| ("IncompatibleSchema", joined(&errors)))
                }
            };
            if verdict.is_ok() {
                locations.insert(location(import));
            }
            verdicts.push((name(import), verdict));
        }
        return Some(Decision {
            spec,
            locations: locations.into_iter().collect(),
            enforced: true,
            imports: verdicts,
        });
    }
    let published = negotiated.is_some_and(|n| kinds::is_true(n, "Published"));
    let recorded: BTreeSet<String> = negotiated
        .and_then(|n| n["metadata"]["annotations"][kinds::LOCATIONS_ANNOTATION].as_str())
        .map(|l| {
            l.split(',')
                .filter(|l| !l.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let present: BTreeSet<String> = imports.iter().map(location).collect();
    let removed = !recorded.is_subset(&present);
    let mut schema: Option<Value> = match negotiated {
        Some(n) if published && !removed => {
            spec = n["spec"].clone();
            if let Some(spec) = spec.as_object_mut() {
                spec.remove("publish");
            }
            locations = recorded;
            Some(n["spec"]["openAPIV3Schema"].clone())
        }
        _ => None,
    };
    let mut subresources: Option<BTreeSet<String>> = None;
    for import in imports {
        let theirs = &import["spec"]["openAPIV3Schema"];
        let verdict = match &schema {
            None => {
                schema = Some(theirs.clone());
                Ok(())
            }
            Some(current) => {
                let strategy = import["spec"]["schemaUpdateStrategy"]
                    .as_str()
                    .unwrap_or_default();
                let narrow = removed || may_narrow(strategy, published);
                match compat::compare(path, current, theirs, narrow) {
                    Ok(lcd) => {
                        if narrow {
                            schema = Some(lcd);
                        }
                        Ok(())
                    }
                    Err(errors) => Err(("IncompatibleSchema", joined(&errors))),
                }
            }
        };
        if verdict.is_ok() {
            locations.insert(location(import));
            let names: BTreeSet<String> = import["spec"]["subResources"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|s| s["name"].as_str().map(str::to_string))
                .collect();
            subresources = Some(match subresources {
                None => names,
                Some(before) => before.intersection(&names).cloned().collect(),
            });
        }
        verdicts.push((name(import), verdict));
    }
    spec["openAPIV3Schema"] = schema?;
    // Only the subresources every compatible cluster serves.
    match subresources.filter(|s| !s.is_empty()) {
        Some(names) => {
            spec["subResources"] =
                json!(names.iter().map(|n| json!({"name": n})).collect::<Vec<_>>())
        }
        None => {
            spec.as_object_mut()?.remove("subResources");
        }
    }
    spec["publish"] = match negotiated {
        Some(n) => json!(n["spec"]["publish"] == true),
        None => json!(auto_publish),
    };
    Some(Decision {
        spec,
        locations: locations.into_iter().collect(),
        enforced: false,
        imports: verdicts,
    })
}

fn joined(errors: &[compat::Incompatibility]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether a CRD was made by negotiation (a NegotiatedAPIResource owns it).
pub fn negotiated_crd(crd: &Value) -> bool {
    crd["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|o| {
            o["kind"] == "NegotiatedAPIResource" && o["apiVersion"] == "apiresource.kcp.io/v1alpha1"
        })
}

/// Whether a CRD serves what it defines: `Some(true)` once Established with its names
/// accepted, `Some(false)` when terminating or its names are refused, `None` while the server
/// has not said yet.
fn publishing(crd: &Value) -> Option<bool> {
    let status = |kind: &str| kinds::condition(crd, kind).and_then(|c| c["status"].as_str());
    if crd["metadata"]["deletionTimestamp"].is_string() || status("NamesAccepted") == Some("False")
    {
        return Some(false);
    }
    (status("Established") == Some("True") && status("NamesAccepted") == Some("True"))
        .then_some(true)
}

/// What the workspace answers when a CRD would take over a resource it serves itself.
const SERVED_BY_THE_WORKSPACE: &str = "is a resource the server itself serves";

pub async fn reconcile(
    shared: &Arc<Shared>,
    workspace: &str,
    gvr: &Gvr,
) -> anyhow::Result<Option<Duration>> {
    let client = shared.config.client(workspace)?;
    let imports: Vec<Value> = shared
        .imports_in(workspace)
        .into_iter()
        .filter(|i| Gvr::of_spec(&i["spec"]).as_ref() == Some(gvr))
        .filter(|i| !i["metadata"]["deletionTimestamp"].is_string())
        .collect();
    let name = gvr.negotiated_name();
    let negotiated_key = ClusterKey {
        cluster: workspace.to_string(),
        namespace: String::new(),
        name: name.clone(),
    };
    let negotiated = shared
        .negotiated
        .get(&negotiated_key)
        .map(|n| serde_json::to_value(&*n))
        .transpose()?;
    let crd_path = requests::path(&kinds::crds(), None, &gvr.crd_name());
    let crd = requests::get(&client, &crd_path).await?;
    let manual = crd.as_ref().filter(|c| !negotiated_crd(c));
    let negotiated_path = requests::path(&kinds::negotiated(), None, &name);

    let Some(decision) = decide(
        gvr,
        &imports,
        negotiated.as_ref(),
        manual,
        shared.options.auto_publish,
    ) else {
        if let Some(negotiated) = &negotiated {
            publish::withdraw(&client, negotiated, gvr).await?;
            requests::delete(&client, &negotiated_path).await?;
        }
        return Ok(None);
    };

    // The negotiated resource's spec and the clusters it was negotiated from.
    let locations = decision.locations.join(",");
    let negotiated = match negotiated {
        Some(current)
            if current["spec"] == decision.spec
                && current["metadata"]["annotations"][kinds::LOCATIONS_ANNOTATION]
                    == locations.as_str() =>
        {
            current
        }
        Some(mut current) => {
            current["spec"] = decision.spec.clone();
            current["metadata"]["annotations"][kinds::LOCATIONS_ANNOTATION] = json!(locations);
            requests::write(&client, Method::PUT, &negotiated_path, &current).await?
        }
        None => {
            let created = json!({
                "apiVersion": "apiresource.kcp.io/v1alpha1",
                "kind": "NegotiatedAPIResource",
                "metadata": {
                    "name": name,
                    "annotations": {
                        kinds::API_VERSION_ANNOTATION: gvr.api_version(),
                        kinds::LOCATIONS_ANNOTATION: locations,
                    },
                },
                "spec": decision.spec,
            });
            let collection = requests::collection(&kinds::negotiated(), None);
            requests::write(&client, Method::POST, &collection, &created).await?
        }
    };

    // Publishing, and what the CRD says of it.
    // A first publication waits for the workspace's clusters still connecting.
    let held = !kinds::is_true(&negotiated, "Published") && shared.connecting(workspace);
    let mut refused = None;
    let crd = match (&decision.enforced, decision.spec["publish"] == true) {
        (false, true) if !held => match publish::publish(&client, &negotiated, gvr).await {
            Ok(crd) => crd,
            // A CRD the workspace refuses (a resource it serves itself, a schema it rejects):
            // said on the negotiated resource, looked at again on the next pass.
            Err(error) => match error.downcast::<requests::Refused>() {
                Ok(requests::Refused(message)) => {
                    refused = Some(message);
                    None
                }
                Err(error) => return Err(error),
            },
        },
        _ => crd,
    };
    let published = crd.as_ref().map_or(Some(false), publishing);
    // A resource the workspace serves itself (ConfigMaps, Secrets) is there without a CRD:
    // compatible imports of it are available to sync.
    let native = refused
        .as_deref()
        .is_some_and(|m| m.contains(SERVED_BY_THE_WORKSPACE));
    let mut conditions = negotiated["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut changed = kinds::set_condition(
        &mut conditions,
        "Enforced",
        if decision.enforced { "True" } else { "False" },
        if decision.enforced {
            "ManuallyAppliedCRD"
        } else {
            "Negotiated"
        },
        "",
    );
    if decision.spec["publish"] == true && !decision.enforced && crd.is_some() {
        changed |= kinds::set_condition(&mut conditions, "Submitted", "True", "CRDWritten", "");
    }
    if let Some(published) = published.filter(|_| !held) {
        let (status, reason, message) = match (published, &refused) {
            (true, _) => ("True", "CRDEstablished", ""),
            (false, Some(message)) => ("False", "CRDRefused", message.as_str()),
            (false, None) => ("False", "CRDNotEstablished", ""),
        };
        changed |= kinds::set_condition(&mut conditions, "Published", status, reason, message);
    }
    if changed {
        requests::patch_status(
            &client,
            &negotiated_path,
            &json!({"conditions": conditions}),
        )
        .await?;
    }

    // Each import's verdict.
    for (import_name, verdict) in &decision.imports {
        let Some(import) = imports
            .iter()
            .find(|i| i["metadata"]["name"] == import_name.as_str())
        else {
            continue;
        };
        let mut conditions = import["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let mut changed = match verdict {
            Ok(()) => kinds::set_condition(
                &mut conditions,
                "Compatible",
                "True",
                "CompatibleSchema",
                "",
            ),
            Err((reason, message)) => {
                kinds::set_condition(&mut conditions, "Compatible", "False", reason, message)
            }
        };
        let available = verdict.is_ok() && published == Some(true);
        changed |= match (available, published) {
            (true, _) => {
                kinds::set_condition(&mut conditions, "Available", "True", "Published", "")
            }
            (false, _) if native && verdict.is_ok() => kinds::set_condition(
                &mut conditions,
                "Available",
                "True",
                "ServedByWorkspace",
                "",
            ),
            (false, Some(_)) | (false, None) if verdict.is_err() => {
                kinds::set_condition(&mut conditions, "Available", "False", "Incompatible", "")
            }
            (false, Some(false)) => {
                kinds::set_condition(&mut conditions, "Available", "False", "NotPublished", "")
            }
            (false, _) => false,
        };
        if changed {
            let path = requests::path(&kinds::imports(), None, import_name);
            requests::patch_status(&client, &path, &json!({"conditions": conditions})).await?;
        }
    }
    Ok(Some(match published {
        None => AWAIT_ESTABLISHED,
        Some(_) if held => AWAIT_ESTABLISHED,
        Some(_) => shared.options.poll_interval,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gvr() -> Gvr {
        Gvr {
            group: "example.dev".into(),
            version: "v1".into(),
            plural: "widgets".into(),
        }
    }

    fn import(location: &str, properties: Value) -> Value {
        json!({
            "metadata": {"name": gvr().import_name(location)},
            "spec": {
                "groupVersion": {"group": "example.dev", "version": "v1"},
                "scope": "Namespaced", "plural": "widgets", "kind": "Widget",
                "openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "properties": properties}}},
                "subResources": [{"name": "status"}],
                "location": location,
                "schemaUpdateStrategy": "UpdateUnpublished",
            },
        })
    }

    fn spec_fields(decision: &Decision) -> Vec<String> {
        let mut fields: Vec<String> =
            decision.spec["openAPIV3Schema"]["properties"]["spec"]["properties"]
                .as_object()
                .unwrap()
                .keys()
                .cloned()
                .collect();
        fields.sort();
        fields
    }

    #[test]
    fn the_schema_is_what_every_cluster_accepts() {
        let east = import(
            "east",
            json!({"size": {"type": "integer"}, "color": {"type": "string"}}),
        );
        let west = import("west", json!({"size": {"type": "integer"}}));
        let decision = decide(&gvr(), &[east, west], None, None, true).unwrap();
        assert_eq!(spec_fields(&decision), ["size"]);
        assert_eq!(decision.locations, ["east", "west"]);
        assert!(!decision.enforced);
        assert_eq!(decision.spec["publish"], true);
        assert!(decision.spec.get("location").is_none());
        assert!(decision.imports.iter().all(|(_, v)| v.is_ok()));
    }

    #[test]
    fn a_published_schema_is_kept_until_a_cluster_goes() {
        let east = import(
            "east",
            json!({"size": {"type": "integer"}, "color": {"type": "string"}}),
        );
        let first = decide(&gvr(), std::slice::from_ref(&east), None, None, true).unwrap();
        let mut negotiated = json!({
            "metadata": {"annotations": {kinds::LOCATIONS_ANNOTATION: "east"}},
            "spec": first.spec,
            "status": {"conditions": [{"type": "Published", "status": "True"}]},
        });
        // A narrower cluster joins after publishing: it is incompatible, the schema stays.
        let west = import("west", json!({"size": {"type": "integer"}}));
        let second = decide(
            &gvr(),
            &[east.clone(), west.clone()],
            Some(&negotiated),
            None,
            true,
        )
        .unwrap();
        assert_eq!(spec_fields(&second), ["color", "size"]);
        let (name, verdict) = &second.imports[1];
        assert_eq!(name, "widgets.west.v1.example.dev");
        let (reason, message) = verdict.as_ref().unwrap_err();
        assert_eq!(*reason, "IncompatibleSchema");
        assert!(message.contains("color"), "{message}");
        // With UpdatePublished it may narrow the published schema.
        let mut eager = west.clone();
        eager["spec"]["schemaUpdateStrategy"] = json!("UpdatePublished");
        let narrowed = decide(
            &gvr(),
            &[east.clone(), eager],
            Some(&negotiated),
            None,
            true,
        )
        .unwrap();
        assert_eq!(spec_fields(&narrowed), ["size"]);
        // East goes: negotiated again from west alone.
        negotiated["metadata"]["annotations"][kinds::LOCATIONS_ANNOTATION] = json!("east,west");
        let after = decide(&gvr(), &[west], Some(&negotiated), None, true).unwrap();
        assert_eq!(spec_fields(&after), ["size"]);
        assert_eq!(after.locations, ["west"]);
    }

    #[test]
    fn a_crd_applied_by_hand_is_enforced() {
        let crd = json!({"metadata": {"name": "widgets.example.dev"}, "spec": {
            "group": "example.dev", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                "spec": {"type": "object", "properties": {"size": {"type": "integer"}, "shape": {"type": "string"}}}}}}}],
        }});
        let east = import(
            "east",
            json!({"size": {"type": "integer"}, "shape": {"type": "string"}, "extra": {"type": "string"}}),
        );
        let west = import("west", json!({"size": {"type": "string"}}));
        let decision = decide(&gvr(), &[east, west], None, Some(&crd), false).unwrap();
        assert!(decision.enforced);
        assert_eq!(spec_fields(&decision), ["shape", "size"]);
        assert_eq!(decision.spec["publish"], true);
        assert!(decision.imports[0].1.is_ok());
        let (reason, message) = decision.imports[1].1.as_ref().unwrap_err();
        assert_eq!(*reason, "IncompatibleSchema");
        assert!(message.starts_with("Widget.properties[spec]"), "{message}");
        assert_eq!(decision.locations, ["east"]);
        assert!(negotiated_crd(&json!({"metadata": {"ownerReferences": [
            {"apiVersion": "apiresource.kcp.io/v1alpha1", "kind": "NegotiatedAPIResource", "name": "x", "uid": "u"}]}})));
        assert!(!negotiated_crd(&crd));
    }

    #[test]
    fn subresources_are_those_every_compatible_cluster_serves() {
        let east = import("east", json!({"size": {"type": "integer"}}));
        let mut west = import("west", json!({"size": {"type": "integer"}}));
        west["spec"]["subResources"] = json!([{"name": "status"}, {"name": "scale"}]);
        let decision = decide(&gvr(), &[west, east], None, None, false).unwrap();
        assert_eq!(decision.spec["subResources"], json!([{"name": "status"}]));
        assert_eq!(decision.spec["publish"], false);
        assert!(decide(&gvr(), &[], None, None, true).is_none());
    }
}
