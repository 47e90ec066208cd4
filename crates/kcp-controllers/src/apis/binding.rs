//! One APIBinding, as kcp's binding controller settles it:
//!
//! 1. the finalizer `apis.kcp.io/apibinding-finalizer` first, so deleting a binding deletes
//!    its bound objects (`BindingResourceDeleteSuccess` False while some are left) before it
//!    goes;
//! 2. the export resolved (`APIExportValid`, reasons `APIExportInvalidReference`,
//!    `APIExportNotFound`) and its identity known;
//! 3. each exported resource's APIResourceSchema read, and its group and resource checked
//!    against the cluster's CRDs and other bindings: a name someone else holds is a
//!    `NamingConflicts` (kcp's message), and the binding stays in phase Binding;
//! 4. otherwise `boundResources` (schema name, UID and the export's identity hash, storage
//!    versions), the export's claims and the accepted ones, phase Bound and its conditions.
//!    The registry serves the bound resources ([`Registry::observe_binding`]) before the status
//!    says Bound, so a client that waits for Bound can use them at once.

use std::collections::BTreeSet;
use std::time::Duration;

use kcp_apimachinery::object::text;
use kcp_registry::apis::BINDING_FINALIZER;
use kcp_registry::{Registry, RegistryError};
use serde_json::{Map, Value, json};

use super::{bindings, export_cluster, exports, schemas};
use crate::Context;
use crate::conditions::{self, Condition};
use crate::driver::{Key, Outcome};

/// How soon a binding waiting for its export (or a name another holds) looks again.
const WAIT: Duration = Duration::from_secs(2);

pub async fn run(registry: Registry, context: Context) {
    super::run_simple(
        registry,
        context,
        "apibinding",
        (kcp_apis::system::api_bindings(), unsettled),
        |registry, key| Box::pin(async move { reconcile(&registry, &key).await }),
        Vec::new(),
    )
    .await
}

/// Whether a binding's change needs a reconcile: all but a binding Bound whose spec never
/// changed since (generation 1), not being deleted: its own status write, or the Bound
/// bindings a workspace's initialization makes by the thousand. (Lists at start reconcile every
/// binding.)
fn unsettled(binding: &Value) -> bool {
    let settled = binding["status"]["phase"] == "Bound"
        && binding["metadata"]["generation"] == 1
        && binding["metadata"].get("deletionTimestamp").is_none()
        && binding["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| f.iter().any(|f| f == BINDING_FINALIZER));
    !settled
}

fn condition(
    kind: &'static str,
    ok: bool,
    reason: &'static str,
    message: String,
) -> Condition<'static> {
    Condition {
        kind,
        status: ok,
        reason,
        message,
    }
}

fn holds(kind: &'static str) -> Condition<'static> {
    condition(kind, true, "", String::new())
}

async fn reconcile(registry: &Registry, key: &Key) -> Result<Outcome, RegistryError> {
    let privileged = registry.privileged();
    let binding = match privileged.get(bindings(&key.cluster), &key.name).await {
        Ok(binding) => binding,
        Err(RegistryError::NotFound { .. }) => {
            privileged.forget_binding(&key.cluster, &key.name);
            return Ok(Outcome::Finished);
        }
        Err(other) => return Err(other),
    };
    let finalizers: Vec<&str> = binding["metadata"]["finalizers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let finalized = finalizers.contains(&BINDING_FINALIZER);
    if binding["metadata"].get("deletionTimestamp").is_some() {
        // The index learns the binding is going: its objects are no longer created.
        privileged.observe_binding(&key.cluster, &binding).await?;
        return match finalized {
            true => delete_bound_objects(&privileged, key, &binding).await,
            false => Ok(Outcome::Finished),
        };
    }
    if !finalized {
        let mut next = binding.clone();
        let mut all: Vec<Value> = finalizers.iter().map(|f| json!(f)).collect();
        all.push(json!(BINDING_FINALIZER));
        next["metadata"]["finalizers"] = Value::Array(all);
        return match privileged
            .update(bindings(&key.cluster), &key.name, next)
            .await
        {
            // Its own event brings it back.
            Ok(_) | Err(RegistryError::NotFound { .. }) => Ok(Outcome::Finished),
            Err(RegistryError::Conflict { .. }) => Ok(Outcome::Again(Duration::ZERO)),
            Err(other) => Err(other),
        };
    }
    let (status, outcome) = bind(&privileged, key, &binding).await?;
    write_status(&privileged, key, &binding, status).await?;
    Ok(outcome)
}

/// Makes the APIBinding a workspace type's `defaultAPIBindings` entry `(path, export)` asks for
/// in `cluster` (kcp's name for it), bound at once when it can be (its status written with
/// it), unless it exists; whether it is Bound.
pub(crate) async fn bind_default(
    registry: &Registry,
    cluster: &str,
    path: &str,
    export: &str,
) -> Result<bool, RegistryError> {
    let privileged = registry.privileged();
    let name = kcp_registry::apis::default_binding_name(cluster, path, export);
    let is_bound = |binding: &Value| binding["status"]["phase"] == "Bound";
    let mut binding = json!({
        "apiVersion": "apis.kcp.io/v1alpha2",
        "kind": "APIBinding",
        "metadata": {"name": name, "finalizers": [BINDING_FINALIZER]},
        "spec": {"reference": {"export": {"path": path, "name": export}}},
    });
    let key = Key {
        cluster: cluster.to_string(),
        namespace: String::new(),
        name: name.clone(),
    };
    let (status, _) = bind(&privileged, &key, &binding).await?;
    binding["status"] = Value::Object(status);
    let bound = is_bound(&binding);
    // Served once stored: the workspace is not Ready (nor its path resolved) before this ends.
    match privileged.create(bindings(cluster), binding).await {
        Ok(created) => {
            if bound {
                privileged.observe_binding(cluster, &created).await?;
            }
            Ok(bound)
        }
        Err(RegistryError::AlreadyExists { .. }) => {
            Ok(is_bound(&privileged.get(bindings(cluster), &name).await?))
        }
        Err(other) => Err(other),
    }
}

/// The binding's next status, and when to look again.
async fn bind(
    registry: &Registry,
    key: &Key,
    binding: &Value,
) -> Result<(Map<String, Value>, Outcome), RegistryError> {
    let mut status = binding["status"].as_object().cloned().unwrap_or_default();
    if text(&binding["status"], "phase").is_empty() {
        status.insert("phase".into(), json!("Binding"));
    }
    let reference = &binding["spec"]["reference"]["export"];
    let path = text(reference, "path");
    let name = text(reference, "name");
    let shown = match path {
        "" => name.to_string(),
        path => format!("{path}:{name}"),
    };
    let Ok(cluster) = export_cluster(registry, &key.cluster, path).await else {
        let message = format!("APIExport {shown} not found");
        not_ready(&mut status, "APIExportValid", "APIExportNotFound", message);
        return Ok((status, Outcome::Again(WAIT)));
    };
    let export = match registry.get(exports(&cluster), name).await {
        Ok(export) => export,
        Err(RegistryError::NotFound { .. }) => {
            let message = format!("APIExport {shown} not found");
            not_ready(&mut status, "APIExportValid", "APIExportNotFound", message);
            return Ok((status, Outcome::Again(WAIT)));
        }
        Err(other) => return Err(other),
    };
    conditions::set(&mut status, holds("APIExportValid"));
    let identity = text(&export["status"], "identityHash");
    if identity.is_empty() {
        // The export's controller has not made its identity yet.
        return Ok((status, Outcome::Again(Duration::from_millis(200))));
    }
    let mut bound = Vec::new();
    for resource in export["spec"]["resources"].as_array().into_iter().flatten() {
        if resource["storage"].get("crd").is_none() {
            continue;
        }
        let schema_name = text(resource, "schema");
        let schema = match registry
            .get_part::<SchemaPart>(schemas(&cluster), schema_name)
            .await
        {
            Ok(schema) => schema.into_value(),
            Err(RegistryError::NotFound { .. }) => {
                let message = format!("APIResourceSchema {cluster}|{schema_name} not found");
                not_ready(
                    &mut status,
                    "APIExportValid",
                    "APIResourceSchemaNotFound",
                    message,
                );
                return Ok((status, Outcome::Again(WAIT)));
            }
            Err(other) => return Err(other),
        };
        bound.push(schema);
    }
    let conflicts = naming_conflicts(registry, key, &bound).await?;
    if !conflicts.is_empty() {
        let listed: Vec<String> = conflicts
            .iter()
            .map(|gr| format!("{gr}:{{ true}}"))
            .collect();
        let message = format!(
            "Unable to bind APIs because they are bound by other APIBindings or CRDs: map[{}]",
            listed.join(" ")
        );
        if !conditions_true(&status, "InitialBindingCompleted") {
            conditions::set(
                &mut status,
                condition(
                    "InitialBindingCompleted",
                    false,
                    "NamingConflicts",
                    message.clone(),
                ),
            );
        }
        not_ready(&mut status, "BindingUpToDate", "NamingConflicts", message);
        return Ok((status, Outcome::Again(WAIT)));
    }
    let bound_resources: Vec<Value> = bound
        .iter()
        .map(|schema| {
            let spec = &schema["spec"];
            let storage: Vec<Value> = spec["versions"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|v| v["storage"] == true)
                .map(|v| v["name"].clone())
                .collect();
            json!({
                "group": spec["group"],
                "resource": spec["names"]["plural"],
                "schema": {
                    "name": schema["metadata"]["name"],
                    "UID": schema["metadata"]["uid"],
                    "identityHash": identity,
                },
                "storageVersions": storage,
            })
        })
        .collect();
    status.insert("apiExportClusterName".into(), json!(cluster));
    status.insert("boundResources".into(), Value::Array(bound_resources));
    let export_claims: Vec<Value> = export["spec"]["permissionClaims"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let applied: Vec<Value> = binding["spec"]["permissionClaims"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|claim| claim["state"] == "Accepted")
        .filter(|claim| export_claims.iter().any(|e| same_claim(e, claim)))
        .map(|claim| {
            let mut applied = claim.clone();
            if let Some(fields) = applied.as_object_mut() {
                fields.remove("state");
            }
            applied
        })
        .collect();
    for (field, claims) in [
        ("exportPermissionClaims", export_claims),
        ("appliedPermissionClaims", applied),
    ] {
        match claims.is_empty() {
            true => status.remove(field),
            false => status.insert(field.into(), Value::Array(claims)),
        };
    }
    status.insert("phase".into(), json!("Bound"));
    for kind in [
        "BindingUpToDate",
        "InitialBindingCompleted",
        "PermissionClaimsApplied",
        "PermissionClaimsValid",
        "Ready",
    ] {
        conditions::set(&mut status, holds(kind));
    }
    Ok((status, Outcome::Finished))
}

/// What binding reads of an APIResourceSchema: its name, UID, group, plural and versions'
/// names and storage flags, not its (often large) schemas.
#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct SchemaPart {
    metadata: SchemaMeta,
    spec: SchemaSpec,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct SchemaMeta {
    name: String,
    uid: String,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct SchemaSpec {
    group: String,
    names: SchemaNames,
    versions: Vec<SchemaVersion>,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct SchemaNames {
    plural: String,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct SchemaVersion {
    name: String,
    storage: bool,
}

impl SchemaPart {
    /// The same fields as an object's JSON.
    fn into_value(self) -> Value {
        let versions: Vec<Value> = self
            .spec
            .versions
            .into_iter()
            .map(|v| json!({"name": v.name, "storage": v.storage}))
            .collect();
        json!({
            "metadata": {"name": self.metadata.name, "uid": self.metadata.uid},
            "spec": {"group": self.spec.group, "names": {"plural": self.spec.names.plural},
                     "versions": versions},
        })
    }
}

/// Whether two claims name the same group, resource and identity.
fn same_claim(a: &Value, b: &Value) -> bool {
    ["group", "resource", "identityHash"]
        .iter()
        .all(|field| text(a, field) == text(b, field))
}

fn conditions_true(status: &Map<String, Value>, kind: &str) -> bool {
    kcp_registry::custom::status_condition_true(&Value::Object(status.clone()), kind)
}

/// Sets condition `kind` False for `reason`, and `Ready` with it.
fn not_ready(
    status: &mut Map<String, Value>,
    kind: &'static str,
    reason: &'static str,
    message: String,
) {
    conditions::set(status, condition(kind, false, reason, message.clone()));
    conditions::set(status, condition("Ready", false, reason, message));
}

/// `<resource>.<group>` of each schema someone else in the cluster holds: a CRD of that name,
/// or another binding's bound resource.
async fn naming_conflicts(
    registry: &Registry,
    key: &Key,
    schemas: &[Value],
) -> Result<BTreeSet<String>, RegistryError> {
    let others = registry
        .list(bindings(&key.cluster), kcp_registry::ListOptions::default())
        .await?;
    let crds = kcp_apis::builtin::in_group_version("apiextensions.k8s.io", "v1")
        .find(|r| r.name == "customresourcedefinitions")
        .expect("the catalogue has customresourcedefinitions");
    let mut conflicts = BTreeSet::new();
    for schema in schemas {
        let group = text(&schema["spec"], "group");
        let plural = text(&schema["spec"]["names"], "plural");
        let name = format!("{plural}.{group}");
        let taken_by_binding = others.items.iter().any(|other| {
            text(&other["metadata"], "name") != key.name
                && other["status"]["boundResources"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|r| text(r, "group") == group && text(r, "resource") == plural)
        });
        let crd_name = if group.is_empty() {
            format!("{plural}.core")
        } else {
            name.clone()
        };
        let taken_by_crd = match registry
            .get(super::cluster_scoped(&key.cluster, crds), &crd_name)
            .await
        {
            Ok(_) => true,
            Err(RegistryError::NotFound { .. }) => false,
            Err(other) => return Err(other),
        };
        if taken_by_binding || taken_by_crd {
            conflicts.insert(name);
        }
    }
    Ok(conflicts)
}

/// Writes `status` if it changed; the registry serves what it binds first.
async fn write_status(
    registry: &Registry,
    key: &Key,
    binding: &Value,
    status: Map<String, Value>,
) -> Result<(), RegistryError> {
    let mut next = binding.clone();
    next["status"] = Value::Object(status);
    registry.observe_binding(&key.cluster, &next).await?;
    if next["status"] == binding["status"] {
        return Ok(());
    }
    let Some(status_registry) = registry.subresource("status") else {
        return Ok(());
    };
    match status_registry
        .update(bindings(&key.cluster), &key.name, next)
        .await
    {
        Ok(written) => registry.observe_binding(&key.cluster, &written).await,
        Err(RegistryError::NotFound { .. }) | Err(RegistryError::Conflict { .. }) => Ok(()),
        Err(other) => Err(other),
    }
}

/// Deletes the objects a deleting binding bound, then lets the binding go.
async fn delete_bound_objects(
    registry: &Registry,
    key: &Key,
    binding: &Value,
) -> Result<Outcome, RegistryError> {
    let mut remaining = 0;
    for bound in binding["status"]["boundResources"]
        .as_array()
        .into_iter()
        .flatten()
    {
        remaining += registry
            .delete_custom_resources_as_stored(
                &key.cluster,
                text(bound, "group"),
                text(bound, "resource"),
                text(&bound["schema"], "identityHash"),
                None,
            )
            .await?
            .objects;
    }
    if remaining > 0 {
        let mut status = binding["status"].as_object().cloned().unwrap_or_default();
        conditions::set(
            &mut status,
            condition(
                "BindingResourceDeleteSuccess",
                false,
                "ResourceDeletionFailed",
                format!("{remaining} bound objects are waiting for their finalizers"),
            ),
        );
        write_status(registry, key, binding, status).await?;
        return Ok(Outcome::Again(Duration::from_secs(1)));
    }
    let mut next = binding.clone();
    let kept: Vec<Value> = binding["metadata"]["finalizers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| *f != BINDING_FINALIZER)
        .cloned()
        .collect();
    next["metadata"]["finalizers"] = Value::Array(kept);
    match registry
        .update(bindings(&key.cluster), &key.name, next)
        .await
    {
        Ok(_) | Err(RegistryError::NotFound { .. }) => {
            registry.forget_binding(&key.cluster, &key.name);
            Ok(Outcome::Finished)
        }
        Err(RegistryError::Conflict { .. }) => Ok(Outcome::Again(Duration::ZERO)),
        Err(other) => Err(other),
    }
}
