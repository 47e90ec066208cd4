//! Versions of custom resources: objects are stored at the CRD's storage version and served at
//! the version a request names, pruned to that version's schema on the way out. Strategy `None`
//! only rewrites `apiVersion`; strategy `Webhook`
//! asks the CRD's conversion webhook through a [`WebhookConverter`] the composition root
//! provides (the registry knows no HTTP). Reads also fill in the schema's defaults, so a default
//! added to a CRD shows on objects stored before it.

use std::sync::Arc;

use futures::future::BoxFuture;
use kcp_apimachinery::object;
use kcp_apimachinery::schema::{self, Defaults};
use kcp_apis::builtin::Resource;
use kcp_apis::custom::{Conversion, Webhook};
use serde_json::{Value, json};

use crate::error::RegistryError;
use crate::store::{Registry, Target};

/// Sends ConversionReviews to conversion webhooks.
pub trait WebhookConverter: Send + Sync {
    /// `objects` converted to `desired_api_version` by the webhook, in order; `Err` with the
    /// reason the conversion failed.
    fn convert<'a>(
        &'a self,
        webhook: &'a Webhook,
        objects: Vec<Value>,
        desired_api_version: &'a str,
    ) -> BoxFuture<'a, Result<Vec<Value>, String>>;
}

/// `group/version`, or `version` for the core group (a CRD's, in kcp's workspaces).
fn api_version(group: &str, version: &str) -> String {
    match group {
        "" => version.to_string(),
        group => format!("{group}/{version}"),
    }
}

impl Registry {
    /// `objects` (of `resource`'s kind) at `version` of its group.
    pub(crate) async fn convert(
        &self,
        resource: &Resource,
        objects: Vec<Value>,
        version: &str,
    ) -> Result<Vec<Value>, RegistryError> {
        let Some(custom) = resource.custom() else {
            return Ok(objects);
        };
        let desired = api_version(&resource.group, version);
        if objects.iter().all(|o| o["apiVersion"] == desired.as_str()) {
            return Ok(objects);
        }
        if kcp_apis::system::converts(resource) {
            return Ok(objects
                .into_iter()
                .map(|object| {
                    kcp_apis::system::conversion::convert(&resource.kind, object, version)
                })
                .collect());
        }
        match &custom.conversion {
            Conversion::None => Ok(objects
                .into_iter()
                .map(|mut object| {
                    object["apiVersion"] = json!(desired);
                    object
                })
                .collect()),
            Conversion::Webhook(webhook) => {
                self.convert_by_webhook(resource, webhook, objects, &desired)
                    .await
            }
        }
    }

    /// `objects` at `desired` through the CRD's conversion webhook: only those at another
    /// version are sent, in one ConversionReview; what comes back must keep each object's kind,
    /// name, namespace and uid, and only labels and annotations of its metadata count (as
    /// kube-apiserver checks). Failures are 500s naming the version converted from.
    async fn convert_by_webhook(
        &self,
        resource: &Resource,
        webhook: &Webhook,
        objects: Vec<Value>,
        desired: &str,
    ) -> Result<Vec<Value>, RegistryError> {
        let (done, todo): (Vec<_>, Vec<_>) = objects
            .into_iter()
            .enumerate()
            .partition(|(_, o)| o["apiVersion"] == desired);
        let (positions, todo): (Vec<usize>, Vec<Value>) = todo.into_iter().unzip();
        let Some(first) = todo.first() else {
            return Ok(done.into_iter().map(|(_, object)| object).collect());
        };
        let gvk = format!(
            "{}, Kind={}",
            object::text(first, "apiVersion"),
            resource.kind
        );
        let failed = |reason: &str| {
            RegistryError::Internal(format!("conversion webhook for {gvk} failed: {reason}"))
        };
        if webhook.url.is_none() {
            return Err(failed(
                "clientConfig.service cannot be reached from kcp (there are no services to \
                 call); use clientConfig.url",
            ));
        }
        let Some(converter) = self.webhook_converter() else {
            return Err(failed("no webhook client is configured"));
        };
        let converted = converter
            .convert(webhook, todo.clone(), desired)
            .await
            .map_err(|reason| failed(&reason))?;
        if converted.len() != todo.len() {
            return Err(RegistryError::Internal(format!(
                "conversion webhook for {gvk} returned {} objects, expected {}",
                converted.len(),
                todo.len()
            )));
        }
        let single = todo.len() == 1;
        let mut all = done;
        for (index, ((position, original), object)) in
            positions.into_iter().zip(todo).zip(converted).enumerate()
        {
            let checked = check_converted(&original, object, desired).map_err(|reason| {
                RegistryError::Internal(if single {
                    format!("conversion webhook for {gvk} returned invalid object: {reason}")
                } else {
                    format!(
                        "conversion webhook for {gvk} returned invalid converted object at index {index}: {reason}"
                    )
                })
            })?;
            all.push((position, checked));
        }
        all.sort_by_key(|(position, _)| *position);
        Ok(all.into_iter().map(|(_, object)| object).collect())
    }

    /// A stored object as the target's version serves it: converted and defaulted.
    pub(crate) async fn present(
        &self,
        target: &Target<'_>,
        object: Value,
    ) -> Result<Value, RegistryError> {
        Ok(self
            .present_all(target.resource, vec![object])
            .await?
            .pop()
            .unwrap_or_default())
    }

    /// Stored objects as `resource`'s version serves them: custom resources converted, pruned
    /// and defaulted; kcp's system kinds only converted (the two-version ones) and defaulted
    /// (see [`kcp_apis::system::is_system`]).
    pub(crate) async fn present_all(
        &self,
        resource: &Resource,
        objects: Vec<Value>,
    ) -> Result<Vec<Value>, RegistryError> {
        if resource.custom().is_none() {
            return Ok(objects);
        }
        let system = kcp_apis::system::is_system(resource);
        let mut objects = if system && !kcp_apis::system::converts(resource) {
            objects
        } else {
            self.convert(resource, objects, &resource.version).await?
        };
        for object in &mut objects {
            if !system {
                prune_as_read(resource, object);
            }
            default_as_read(resource, object);
        }
        Ok(objects)
    }

    /// An object of the target's version as it is stored.
    pub(crate) async fn for_storage(
        &self,
        target: &Target<'_>,
        object: Value,
    ) -> Result<Value, RegistryError> {
        let Some(custom) = target.resource.custom() else {
            return Ok(object);
        };
        Ok(self
            .convert(target.resource, vec![object], &custom.storage_version)
            .await?
            .pop()
            .unwrap_or_default())
    }
}

/// How reads present a resource's stored objects: as stored, with only what [`json_answer`]
/// splices in (no decoding), or decoded and presented ([`Registry::present_all`]).
///
/// [`json_answer`]: crate::store::json_answer
pub(crate) enum Presentation<'a> {
    /// Built-in kinds: as stored.
    AsStored,
    /// Custom resources: as stored where presenting would change nothing, else decoded and
    /// presented. Objects are pruned and defaulted as they are written, so they need it only
    /// when stored at another version or before their schema changed.
    Checked {
        /// The group and version a stored object's `apiVersion` must name (none for kcp's
        /// system kinds of one version, which are not converted).
        version: Option<(&'a str, &'a str)>,
        /// The schema that must prune nothing (none where reads do not prune: system kinds,
        /// schemas that preserve unknown fields at their root).
        schema: Option<Arc<Value>>,
        /// The defaults that must fill nothing in.
        defaults: Option<&'a Defaults>,
    },
}

impl<'a> Presentation<'a> {
    pub(crate) fn of(resource: &'a Resource) -> Presentation<'a> {
        let Some(custom) = resource.custom() else {
            return Presentation::AsStored;
        };
        let defaults = custom.defaults.as_ref();
        if kcp_apis::system::is_system(resource) {
            let converts = kcp_apis::system::converts(resource);
            return Presentation::Checked {
                version: converts.then_some((&*resource.group, &*resource.version)),
                schema: None,
                defaults,
            };
        }
        Presentation::Checked {
            version: Some((&resource.group, &resource.version)),
            schema: custom.schema().filter(|schema| prunes(schema)),
            defaults,
        }
    }

    /// Whether the object stored as `stored` reads as it is stored.
    pub(crate) fn as_stored(&self, stored: &[u8]) -> bool {
        match self {
            Presentation::AsStored => true,
            Presentation::Checked {
                version,
                schema,
                defaults,
            } => {
                version.is_none_or(|version| {
                    stored_api_version(stored).and_then(|api| api.split_once('/')) == Some(version)
                }) && schema
                    .as_deref()
                    .is_none_or(|schema| schema::prune_nothing_in(schema, stored))
                    && defaults.is_none_or(|defaults| defaults.fill_nothing_in(stored))
            }
        }
    }
}

/// A JSON object's `apiVersion`, read without decoding the rest into values.
fn stored_api_version(json: &[u8]) -> Option<&str> {
    #[derive(serde::Deserialize)]
    struct Head<'a> {
        #[serde(rename = "apiVersion", borrow)]
        api_version: Option<&'a str>,
    }
    serde_json::from_slice::<Head<'_>>(json).ok()?.api_version
}

/// Whether reads prune by `schema` (not when its root preserves unknown fields).
fn prunes(schema: &Value) -> bool {
    !schema["x-kubernetes-preserve-unknown-fields"]
        .as_bool()
        .unwrap_or(false)
}

/// Prunes what the served version's schema does not declare, as kube-apiserver decodes objects
/// from storage: an object stored at another version (or before a schema change) may hold
/// fields this version does not know.
fn prune_as_read(resource: &Resource, object: &mut Value) {
    if let Some(custom) = resource.custom()
        && let Some(schema) = custom.schema()
        && prunes(&schema)
    {
        schema::prune(&schema, object);
    }
}

/// Applies the schema defaults of `resource` (a custom resource, or one of kcp's kinds served
/// from a schema) as a read does: reads default what storage lacks, so a write answers with
/// them too, as kube-apiserver answers with the object decoded back from storage.
pub(crate) fn default_as_read(resource: &Resource, object: &mut Value) {
    if let Some(defaults) = resource
        .custom()
        .and_then(|custom| custom.defaults.as_ref())
    {
        defaults.apply(object);
    }
}

/// A webhook's answer for `original`, checked as kube-apiserver checks it: the desired
/// apiVersion, the same kind, name, namespace and uid; the original metadata with the answer's
/// labels and annotations (string maps).
fn check_converted(original: &Value, mut converted: Value, desired: &str) -> Result<Value, String> {
    let received = object::text(&converted, "apiVersion");
    if received != desired {
        return Err(format!(
            "invalid groupVersion (expected {desired}, received {received})"
        ));
    }
    let meta = |object: &Value, field: &str| -> String {
        object["metadata"][field]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let kind = |object: &Value| object::text(object, "kind").to_string();
    if kind(original) != kind(&converted) {
        return Err(format!(
            "invalid kind (expected {}, received {})",
            kind(original),
            kind(&converted)
        ));
    }
    for (field, label) in [("name", "name"), ("namespace", "namespace"), ("uid", "UID")] {
        let (expected, got) = (meta(original, field), meta(&converted, field));
        if expected != got {
            return Err(format!("must have the same {label}: {expected} != {got}"));
        }
    }
    let Some(answered) = converted.get("metadata").cloned() else {
        return Err("missing metadata in converted object".into());
    };
    let Value::Object(answered) = answered else {
        return Err("invalid metadata in converted object".into());
    };
    let mut metadata = original["metadata"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    for field in ["labels", "annotations"] {
        match answered.get(field) {
            None | Some(Value::Null) => {
                metadata.remove(field);
            }
            Some(Value::Object(map)) => {
                if let Some((key, _)) = map.iter().find(|(_, v)| !v.is_string()) {
                    return Err(format!(
                        "metadata.{field}[{key}] must be a string in converted object"
                    ));
                }
                metadata.insert(field.into(), Value::Object(map.clone()));
            }
            Some(_) => {
                return Err(format!("invalid metadata.{field} in converted object"));
            }
        }
    }
    converted["metadata"] = Value::Object(metadata);
    Ok(converted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_api_version_is_read_from_the_json() {
        let encoded = br#"{"kind":"Widget","metadata":{"name":"w","labels":{"a":"b"}},"apiVersion":"example.com/v1","spec":[1,{"x":null}]}"#;
        assert_eq!(stored_api_version(encoded), Some("example.com/v1"));
        assert_eq!(stored_api_version(br#"{"kind":"Widget"}"#), None);
        // Escaped text cannot be borrowed: such an object is decoded instead.
        assert_eq!(
            stored_api_version(br#"{"apiVersion":"example.com\/v1"}"#),
            None
        );
        assert_eq!(stored_api_version(b"not json"), None);
    }

    fn widget(version: &str) -> Value {
        json!({
            "apiVersion": format!("example.com/{version}"),
            "kind": "Widget",
            "metadata": {"name": "a", "namespace": "n", "uid": "u", "resourceVersion": "7",
                         "labels": {"l": "1"}},
            "spec": {"size": 1}
        })
    }

    #[test]
    fn converted_objects_keep_the_original_metadata_but_labels_and_annotations() {
        let mut answer = widget("v2");
        answer["metadata"] = json!({"name": "a", "namespace": "n", "uid": "u",
            "resourceVersion": "99", "generation": 42, "labels": {"l": "2"},
            "annotations": {"a": "b"}});
        answer["spec"] = json!({"dimensions": {"size": 1}});
        let checked = check_converted(&widget("v1"), answer, "example.com/v2").unwrap();
        assert_eq!(checked["metadata"]["resourceVersion"], "7");
        assert!(checked["metadata"].get("generation").is_none());
        assert_eq!(checked["metadata"]["labels"], json!({"l": "2"}));
        assert_eq!(checked["metadata"]["annotations"], json!({"a": "b"}));
        assert_eq!(checked["spec"], json!({"dimensions": {"size": 1}}));
    }

    #[test]
    fn converted_objects_must_be_the_same_object_at_the_desired_version() {
        let check = |answer: Value| check_converted(&widget("v1"), answer, "example.com/v2");
        assert_eq!(
            check(widget("v1")).unwrap_err(),
            "invalid groupVersion (expected example.com/v2, received example.com/v1)"
        );
        let mut renamed = widget("v2");
        renamed["metadata"]["name"] = json!("b");
        assert_eq!(
            check(renamed).unwrap_err(),
            "must have the same name: a != b"
        );
        let mut other_uid = widget("v2");
        other_uid["metadata"]["uid"] = json!("x");
        assert_eq!(
            check(other_uid).unwrap_err(),
            "must have the same UID: u != x"
        );
        let mut bad_label = widget("v2");
        bad_label["metadata"]["labels"] = json!({"l": 1});
        assert!(check(bad_label).unwrap_err().contains("must be a string"));
    }
}
