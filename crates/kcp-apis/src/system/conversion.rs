//! Conversion of kcp's two-version kinds, `apis.kcp.io` APIExport and APIBinding, between
//! v1alpha1 (served) and v1alpha2 (stored), by kcp's rules:
//!
//! - APIExport v1alpha1 names its schemas in `spec.latestResourceSchemas`
//!   (`<prefix>.<resource>.<group>`); v1alpha2 lists `spec.resources` (`{group, name, schema,
//!   storage: {crd: {}}}`). Resources not stored as CRDs have no v1alpha1 form and ride in an
//!   annotation.
//! - Permission claims: v1alpha1 has `all` and `resourceSelector`, v1alpha2 `verbs` (default
//!   `["*"]`) and selectors. What one version cannot say is kept in an annotation of the other
//!   (kcp's `apis.v1alpha2.kcp.io/*` annotations), so a round trip loses nothing.
//!
//! Everything else (metadata, references, phases, bound resources, conditions) is the same in
//! both versions.

use serde_json::{Map, Value, json};

const RESOURCE_SCHEMAS: &str = "apis.v1alpha2.kcp.io/resource-schemas";
const PERMISSION_CLAIMS: &str = "apis.v1alpha2.kcp.io/permission-claims";
const V1_PERMISSION_CLAIMS: &str = "apis.v1alpha2.kcp.io/v1alpha1-permission-claims";
const ACCEPTABLE_CLAIMS: &str = "apis.v1alpha2.kcp.io/acceptable-permission-claims";
const STATUS_CLAIMS: &str = "apis.v1alpha2.kcp.io/status-export-permission-claims";
const STATUS_APPLIED: &str = "apis.v1alpha2.kcp.io/status-applied-permission-claims";
const V1_STATUS_CLAIMS: &str = "apis.v1alpha2.kcp.io/v1alpha1-status-export-permission-claims";
const V1_STATUS_APPLIED: &str = "apis.v1alpha2.kcp.io/v1alpha1-status-applied-permission-claims";

/// `object` (an APIExport or APIBinding at either version) at `version` (`v1alpha1` or
/// `v1alpha2`); anything else comes back with only its `apiVersion` changed.
pub fn convert(kind: &str, mut object: Value, version: &str) -> Value {
    let from = object["apiVersion"]
        .as_str()
        .and_then(|v| v.rsplit_once('/'))
        .map(|(_, v)| v.to_string())
        .unwrap_or_default();
    if from != version {
        match (kind, from.as_str(), version) {
            ("APIExport", "v1alpha2", "v1alpha1") => export_to_v1(&mut object),
            ("APIExport", "v1alpha1", "v1alpha2") => export_to_v2(&mut object),
            ("APIBinding", "v1alpha2", "v1alpha1") => binding_to_v1(&mut object),
            ("APIBinding", "v1alpha1", "v1alpha2") => binding_to_v2(&mut object),
            _ => {}
        }
    }
    object["apiVersion"] = json!(format!("{}/{version}", super::APIS_GROUP));
    object
}

/// Whether two claims name the same group, resource and identity.
fn same_claim(a: &Value, b: &Value) -> bool {
    ["group", "resource", "identityHash"]
        .iter()
        .all(|field| text(a, field) == text(b, field))
}

fn text<'a>(value: &'a Value, field: &str) -> &'a str {
    value[field].as_str().unwrap_or_default()
}

fn items(value: &Value) -> Vec<Value> {
    value.as_array().cloned().unwrap_or_default()
}

/// The claim's group, resource and identity alone.
fn claim_names(claim: &Value) -> Map<String, Value> {
    let mut out = Map::new();
    for field in ["group", "resource", "identityHash"] {
        if let Some(value) = claim.get(field).filter(|v| !v.is_null()) {
            out.insert(field.into(), value.clone());
        }
    }
    out
}

/// Whether a v1alpha2 claim grants every verb.
fn all_verbs(claim: &Value) -> bool {
    claim["verbs"]
        .as_array()
        .is_some_and(|verbs| verbs.len() == 1 && verbs[0] == "*")
}

/// Whether a selector is empty (no matchAll, labels or expressions).
fn empty_selector(selector: &Value) -> bool {
    selector["matchAll"] != true
        && selector["matchLabels"]
            .as_object()
            .is_none_or(Map::is_empty)
        && selector["matchExpressions"]
            .as_array()
            .is_none_or(Vec::is_empty)
}

fn annotations(object: &mut Value) -> &mut Map<String, Value> {
    if !object["metadata"].is_object() {
        object["metadata"] = json!({});
    }
    let metadata = object["metadata"].as_object_mut().expect("set above");
    if !metadata.get("annotations").is_some_and(Value::is_object) {
        metadata.insert("annotations".into(), json!({}));
    }
    metadata["annotations"].as_object_mut().expect("set above")
}

/// Keeps `values` (if any) as JSON in annotation `key`.
fn keep(object: &mut Value, key: &str, values: &[Value]) {
    if !values.is_empty() {
        let encoded = serde_json::to_string(values).unwrap_or_default();
        annotations(object).insert(key.into(), json!(encoded));
    }
}

/// Takes annotation `key`'s JSON list out of `object` (empty when absent or unreadable).
fn take(object: &mut Value, key: &str) -> Vec<Value> {
    let Some(map) = object
        .get_mut("metadata")
        .and_then(|m| m.get_mut("annotations"))
        .and_then(Value::as_object_mut)
    else {
        return Vec::new();
    };
    let taken = map
        .remove(key)
        .and_then(|v| {
            v.as_str()
                .and_then(|s| serde_json::from_str::<Value>(s).ok())
        })
        .map(|v| items(&v))
        .unwrap_or_default();
    if map.is_empty()
        && let Some(metadata) = object["metadata"].as_object_mut()
    {
        metadata.remove("annotations");
    }
    taken
}

/// Copies `fields` of each kept claim onto the matching claim of `parent`'s list `list`.
fn restore(parent: Option<&mut Value>, list: &str, kept: &[Value], fields: &[&str]) {
    let Some(claims) = parent
        .and_then(|p| p.get_mut(list))
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for kept in kept {
        for claim in claims.iter_mut().filter(|c| same_claim(c, kept)) {
            for field in fields {
                match kept.get(*field) {
                    Some(value) if !value.is_null() => claim[*field] = value.clone(),
                    _ => {
                        if let Some(claim) = claim.as_object_mut() {
                            claim.remove(*field);
                        }
                    }
                }
            }
        }
    }
}

/// Sets `parent`'s list `field`, or removes it when empty (a missing parent stays missing).
fn set_or_remove(parent: Option<&mut Value>, field: &str, value: Vec<Value>) {
    let Some(parent) = parent.and_then(Value::as_object_mut) else {
        return;
    };
    if value.is_empty() {
        parent.remove(field);
    } else {
        parent.insert(field.into(), Value::Array(value));
    }
}

fn export_to_v1(object: &mut Value) {
    let resources = items(&object["spec"]["resources"]);
    let (crd, other): (Vec<Value>, Vec<Value>) = resources
        .into_iter()
        .partition(|r| r["storage"].get("crd").is_some());
    keep(object, RESOURCE_SCHEMAS, &other);
    let claims = items(&object["spec"]["permissionClaims"]);
    let overhanging: Vec<Value> = claims.iter().filter(|c| !all_verbs(c)).cloned().collect();
    keep(object, PERMISSION_CLAIMS, &overhanging);
    let v1_claims: Vec<Value> = claims
        .iter()
        .map(|c| Value::Object(claim_names(c)))
        .collect();
    if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
        spec.remove("resources");
    }
    let latest: Vec<Value> = crd.iter().map(|r| r["schema"].clone()).collect();
    set_or_remove(object.get_mut("spec"), "latestResourceSchemas", latest);
    set_or_remove(object.get_mut("spec"), "permissionClaims", v1_claims);
    let kept = take(object, V1_PERMISSION_CLAIMS);
    restore(
        object.get_mut("spec"),
        "permissionClaims",
        &kept,
        &["all", "resourceSelector"],
    );
}

/// `<prefix>.<resource>.<group>` as a v1alpha2 resource (group `core` is the core group).
fn schema_resource(schema: &str) -> Option<Value> {
    let mut parts = schema.splitn(3, '.');
    let (_, resource, group) = (parts.next()?, parts.next()?, parts.next()?);
    let group = if group == "core" { "" } else { group };
    Some(json!({"group": group, "name": resource, "schema": schema, "storage": {"crd": {}}}))
}

fn export_to_v2(object: &mut Value) {
    let claims = items(&object["spec"]["permissionClaims"]);
    keep(object, V1_PERMISSION_CLAIMS, &claims);
    let mut resources: Vec<Value> = items(&object["spec"]["latestResourceSchemas"])
        .iter()
        .filter_map(|s| schema_resource(s.as_str()?))
        .collect();
    resources.extend(take(object, RESOURCE_SCHEMAS));
    let mut v2_claims = json!({"claims": claims
        .iter()
        .map(|c| Value::Object(claim_names(c)))
        .collect::<Vec<_>>()});
    let kept = take(object, PERMISSION_CLAIMS);
    restore(
        Some(&mut v2_claims),
        "claims",
        &kept,
        &["verbs", "defaultSelector"],
    );
    default_verbs(&mut v2_claims["claims"]);
    if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
        spec.remove("latestResourceSchemas");
    }
    set_or_remove(object.get_mut("spec"), "resources", resources);
    set_or_remove(
        object.get_mut("spec"),
        "permissionClaims",
        items(&v2_claims["claims"]),
    );
}

fn default_verbs(claims: &mut Value) {
    for claim in claims.as_array_mut().into_iter().flatten() {
        if claim["verbs"].as_array().is_none_or(Vec::is_empty) {
            claim["verbs"] = json!(["*"]);
        }
    }
}

fn default_selectors(claims: &mut Value) {
    for claim in claims.as_array_mut().into_iter().flatten() {
        if empty_selector(&claim["selector"]) {
            claim["selector"] = json!({"matchAll": true});
        }
    }
}

/// A v1alpha2 claim with a selector (a binding's accepted or applied claim) as v1alpha1's:
/// `all` from `matchAll`, plus `state` where there is one.
fn scoped_to_v1(claim: &Value) -> Value {
    let mut out = claim_names(claim);
    if claim["selector"]["matchAll"] == true {
        out.insert("all".into(), json!(true));
    }
    if let Some(state) = claim.get("state").filter(|s| !s.is_null()) {
        out.insert("state".into(), state.clone());
    }
    Value::Object(out)
}

/// The reverse of [`scoped_to_v1`], before what an annotation kept is restored.
fn scoped_to_v2(claim: &Value) -> Value {
    let mut out = claim_names(claim);
    if claim["all"] == true {
        out.insert("selector".into(), json!({"matchAll": true}));
    }
    if let Some(state) = claim.get("state").filter(|s| !s.is_null()) {
        out.insert("state".into(), state.clone());
    }
    Value::Object(out)
}

fn binding_to_v1(object: &mut Value) {
    let plain = |c: &Value| all_verbs(c) && c["selector"]["matchAll"] == true;
    let spec_claims = items(&object["spec"]["permissionClaims"]);
    let export_claims = items(&object["status"]["exportPermissionClaims"]);
    let applied = items(&object["status"]["appliedPermissionClaims"]);
    let overhanging: Vec<Value> = spec_claims.iter().filter(|c| !plain(c)).cloned().collect();
    keep(object, ACCEPTABLE_CLAIMS, &overhanging);
    let overhanging: Vec<Value> = export_claims
        .iter()
        .filter(|c| !all_verbs(c))
        .cloned()
        .collect();
    keep(object, STATUS_CLAIMS, &overhanging);
    let overhanging: Vec<Value> = applied.iter().filter(|c| !plain(c)).cloned().collect();
    keep(object, STATUS_APPLIED, &overhanging);

    let spec_claims: Vec<Value> = spec_claims.iter().map(scoped_to_v1).collect();
    set_or_remove(object.get_mut("spec"), "permissionClaims", spec_claims);
    let kept = take(object, V1_PERMISSION_CLAIMS);
    let all = ["all", "resourceSelector"];
    restore(object.get_mut("spec"), "permissionClaims", &kept, &all);

    let export_claims: Vec<Value> = export_claims
        .iter()
        .map(|c| Value::Object(claim_names(c)))
        .collect();
    set_or_remove(
        object.get_mut("status"),
        "exportPermissionClaims",
        export_claims,
    );
    let applied: Vec<Value> = applied.iter().map(scoped_to_v1).collect();
    set_or_remove(object.get_mut("status"), "appliedPermissionClaims", applied);
    for (key, field) in [
        (V1_STATUS_CLAIMS, "exportPermissionClaims"),
        (V1_STATUS_APPLIED, "appliedPermissionClaims"),
    ] {
        let kept = take(object, key);
        restore(object.get_mut("status"), field, &kept, &all);
    }
}

fn binding_to_v2(object: &mut Value) {
    let with_selector = |c: &Value| {
        c["resourceSelector"]
            .as_array()
            .is_some_and(|s| !s.is_empty())
    };
    let spec_claims = items(&object["spec"]["permissionClaims"]);
    let export_claims = items(&object["status"]["exportPermissionClaims"]);
    let applied = items(&object["status"]["appliedPermissionClaims"]);
    let overhanging: Vec<Value> = spec_claims
        .iter()
        .filter(|c| with_selector(c))
        .cloned()
        .collect();
    keep(object, V1_PERMISSION_CLAIMS, &overhanging);
    keep(object, V1_STATUS_CLAIMS, &export_claims);
    let overhanging: Vec<Value> = applied
        .iter()
        .filter(|c| with_selector(c))
        .cloned()
        .collect();
    keep(object, V1_STATUS_APPLIED, &overhanging);

    let mut claims = json!({
        "spec": spec_claims.iter().map(scoped_to_v2).collect::<Vec<_>>(),
        "export": export_claims.iter().map(|c| Value::Object(claim_names(c))).collect::<Vec<_>>(),
        "applied": applied.iter().map(scoped_to_v2).collect::<Vec<_>>(),
    });
    let selected = ["verbs", "selector"];
    let kept = take(object, ACCEPTABLE_CLAIMS);
    restore(Some(&mut claims), "spec", &kept, &selected);
    let kept = take(object, STATUS_CLAIMS);
    restore(Some(&mut claims), "export", &kept, &["verbs"]);
    let kept = take(object, STATUS_APPLIED);
    restore(Some(&mut claims), "applied", &kept, &selected);
    for list in ["spec", "export", "applied"] {
        default_verbs(&mut claims[list]);
    }
    default_selectors(&mut claims["spec"]);
    default_selectors(&mut claims["applied"]);
    set_or_remove(
        object.get_mut("spec"),
        "permissionClaims",
        items(&claims["spec"]),
    );
    set_or_remove(
        object.get_mut("status"),
        "exportPermissionClaims",
        items(&claims["export"]),
    );
    set_or_remove(
        object.get_mut("status"),
        "appliedPermissionClaims",
        items(&claims["applied"]),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_export_round_trips_through_v1alpha1() {
        let v2 = json!({
            "apiVersion": "apis.kcp.io/v1alpha2", "kind": "APIExport",
            "metadata": {"name": "widgets"},
            "spec": {
                "resources": [
                    {"group": "example.io", "name": "widgets", "schema": "v1.widgets.example.io",
                     "storage": {"crd": {}}},
                    {"group": "example.io", "name": "gadgets", "schema": "v1.gadgets.example.io",
                     "storage": {"virtual": {"reference": {"kind": "X", "name": "y"}, "identityHash": "h"}}}
                ],
                "permissionClaims": [
                    {"group": "", "resource": "configmaps", "verbs": ["*"]},
                    {"group": "", "resource": "secrets", "verbs": ["get", "list"]}
                ]
            },
            "status": {"identityHash": "abc"}
        });
        let v1 = convert("APIExport", v2.clone(), "v1alpha1");
        assert_eq!(v1["apiVersion"], "apis.kcp.io/v1alpha1");
        assert_eq!(
            v1["spec"]["latestResourceSchemas"],
            json!(["v1.widgets.example.io"])
        );
        assert!(v1["spec"].get("resources").is_none());
        // kcp reads a claim of every verb back as just its group and resource.
        assert_eq!(
            v1["spec"]["permissionClaims"][0],
            json!({"group": "", "resource": "configmaps"})
        );
        assert!(v1["metadata"]["annotations"][RESOURCE_SCHEMAS].is_string());
        assert_eq!(v1["status"]["identityHash"], "abc");
        let back = convert("APIExport", v1, "v1alpha2");
        assert_eq!(back["spec"]["resources"], v2["spec"]["resources"]);
        assert_eq!(
            back["spec"]["permissionClaims"],
            v2["spec"]["permissionClaims"]
        );
        assert!(
            back["metadata"]["annotations"]
                .get(RESOURCE_SCHEMAS)
                .is_none()
        );
    }

    #[test]
    fn a_v1alpha1_export_is_stored_with_resources() {
        let v1 = json!({
            "apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIExport",
            "metadata": {"name": "e"},
            "spec": {"latestResourceSchemas": ["today.cowboys.wildwest.dev", "v1.things.core"]}
        });
        let v2 = convert("APIExport", v1, "v1alpha2");
        assert_eq!(
            v2["spec"]["resources"],
            json!([
                {"group": "wildwest.dev", "name": "cowboys", "schema": "today.cowboys.wildwest.dev", "storage": {"crd": {}}},
                {"group": "", "name": "things", "schema": "v1.things.core", "storage": {"crd": {}}}
            ])
        );
        assert!(v2["metadata"].get("annotations").is_none());
    }

    #[test]
    fn a_binding_round_trips_through_v1alpha1() {
        let v2 = json!({
            "apiVersion": "apis.kcp.io/v1alpha2", "kind": "APIBinding",
            "metadata": {"name": "b"},
            "spec": {
                "reference": {"export": {"path": "root:p", "name": "widgets"}},
                "permissionClaims": [
                    {"group": "", "resource": "configmaps", "verbs": ["*"],
                     "selector": {"matchAll": true}, "state": "Accepted"},
                    {"group": "", "resource": "secrets", "verbs": ["get"],
                     "selector": {"matchLabels": {"a": "b"}}, "state": "Rejected"}
                ]
            },
            "status": {
                "phase": "Bound",
                "exportPermissionClaims": [{"group": "", "resource": "configmaps", "verbs": ["*"]}],
                "appliedPermissionClaims": [{"group": "", "resource": "configmaps", "verbs": ["*"],
                                             "selector": {"matchAll": true}}]
            }
        });
        let v1 = convert("APIBinding", v2.clone(), "v1alpha1");
        assert_eq!(
            v1["spec"]["permissionClaims"][0],
            json!({"group": "", "resource": "configmaps", "all": true, "state": "Accepted"})
        );
        assert_eq!(v1["spec"]["reference"], v2["spec"]["reference"]);
        let back = convert("APIBinding", v1, "v1alpha2");
        assert_eq!(back["spec"], v2["spec"]);
        assert_eq!(
            back["status"]["appliedPermissionClaims"],
            v2["status"]["appliedPermissionClaims"]
        );
        assert_eq!(
            back["status"]["exportPermissionClaims"],
            v2["status"]["exportPermissionClaims"]
        );
        assert_eq!(back["status"]["phase"], "Bound");
    }
}
