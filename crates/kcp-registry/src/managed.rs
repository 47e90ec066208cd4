//! Field ownership on every write: which manager a registry view writes for, the field
//! manager of a kind and part (its schema, apiVersion, subresource and the top-level fields
//! the part does not own), tracking of updates, patches and creates, and server-side apply
//! (created when absent).
//!
//! The ownership rules themselves are `kcp_apimachinery::managedfields`'s; this module only
//! chooses their inputs and maps their errors.

use std::sync::Arc;

use kcp_apimachinery::managedfields::{ApplyError, FieldManager};
use kcp_apis::builtin::Resource;
use serde_json::Value;

use crate::error::{Cause, RegistryError};
use crate::store::{Registry, Target};
use crate::strategy::Part;
use crate::{meta, store};

/// The manager of writes that name none (the server's own controllers).
pub const DEFAULT_MANAGER: &str = "kcp";

/// An apply function: the object to store from the current one (`None`: absent, the apply
/// creates it) and what it found besides.
pub type ApplyWith<'a, T> =
    dyn Fn(Option<&Value>) -> Result<(Value, T), RegistryError> + Send + Sync + 'a;

impl Registry {
    /// The same registry writing for `manager` (a request's `fieldManager`, or its user
    /// agent's product name).
    pub fn managed_by(&self, manager: &str) -> Registry {
        let mut view = self.clone();
        view.set_manager(Arc::from(manager));
        view
    }

    /// The manager this view's writes are recorded under.
    pub fn manager_name(&self) -> &str {
        self.manager().unwrap_or(DEFAULT_MANAGER)
    }

    /// The field manager of writes to `resource` through this view, now (`custom_schema`: the
    /// parsed schema of a custom resource, [`kcp_apis::custom::CustomResource::schema`]).
    pub fn field_manager<'a>(
        &self,
        resource: &'a Resource,
        custom_schema: Option<&'a Value>,
    ) -> FieldManager<'a> {
        let part = self.part();
        let has_status = resource.subresources.iter().any(|(n, _)| *n == "status");
        let (subresource, ignored): (&str, &'static [&'static str]) = match part {
            Part::Whole if has_status => ("", &["status"]),
            Part::Whole | Part::Everything => ("", &[]),
            Part::Status => ("status", &["spec", "metadata"]),
            Part::Finalize => ("finalize", &[]),
            Part::Approval => ("approval", &[]),
        };
        FieldManager {
            schema: kcp_apis::schema::catalogue().apply_schema(resource, custom_schema),
            api_version: resource.group_version(),
            subresource,
            ignored,
            now: meta::now(),
        }
    }

    /// Records in `next`'s managedFields what this write changes from `live` (`None`: a
    /// create), for this view's manager.
    pub(crate) fn track_write(&self, target: &Target<'_>, live: Option<&Value>, next: &mut Value) {
        meta::remove_cluster_annotation(next);
        let schema = target.resource.custom().and_then(|custom| custom.schema());
        let manager = self.field_manager(target.resource, schema.as_deref());
        match live {
            Some(live) => {
                let mut live = live.clone();
                meta::remove_cluster_annotation(&mut live);
                manager.update(Some(&live), next, self.manager_name());
            }
            None => manager.update(None, next, self.manager_name()),
        }
    }

    /// `config` applied over `live` (`None`: absent) for this view's manager: the object to
    /// store, with its managedFields; conflicts are 409 with one cause per field.
    pub fn apply_config(
        &self,
        resource: &Resource,
        live: Option<&Value>,
        config: &Value,
        force: bool,
    ) -> Result<Value, RegistryError> {
        check_apply_kind(resource, config)?;
        let schema = resource.custom().and_then(|custom| custom.schema());
        let manager = self.field_manager(resource, schema.as_deref());
        let live = live.map(|live| {
            let mut live = live.clone();
            meta::remove_cluster_annotation(&mut live);
            live
        });
        manager
            .apply(live.as_ref(), config, self.manager_name(), force)
            .map_err(|error| match error {
                ApplyError::BadRequest(message) => RegistryError::BadRequest(message),
                ApplyError::Conflicts { message, causes } => RegistryError::ApplyConflict {
                    message,
                    causes: causes
                        .into_iter()
                        .map(|c| Cause {
                            reason: "FieldManagerConflict",
                            field: c.field,
                            message: c.message,
                        })
                        .collect(),
                },
            })
    }

    /// Server-side apply: `apply` runs on the current object (or on `None` when there is
    /// none, and its result is created), and its result is stored with the managedFields it
    /// carries. Answers the stored object, what `apply` found, and whether it was created.
    pub async fn apply_with<T: Send>(
        &self,
        target: Target<'_>,
        name: &str,
        apply: &ApplyWith<'_, T>,
    ) -> Result<(Value, T, bool), RegistryError> {
        for _ in 0..store::CONFLICT_RETRIES {
            match self.read(&target, name).await {
                Err(RegistryError::NotFound { .. }) => {
                    let (object, found) = apply(None)?;
                    check_name(&object, name)?;
                    match self.create_object(target, object, false).await {
                        Err(RegistryError::AlreadyExists { .. }) => continue,
                        other => return other.map(|object| (object, found, true)),
                    }
                }
                Err(other) => return Err(other),
                Ok(_) => {
                    let with_some = |current: &Value| apply(Some(current));
                    match self
                        .patch_once(&target, name, &with_some, store::Tracking::Applied)
                        .await?
                    {
                        Some((object, found)) => return Ok((object, found, false)),
                        None => continue,
                    }
                }
            }
        }
        Err(target.conflict(name))
    }
}

/// kube-apiserver's checks of an applied configuration's type: its group, version and kind
/// must be the endpoint's.
fn check_apply_kind(resource: &Resource, config: &Value) -> Result<(), RegistryError> {
    let text = |key: &str| config.get(key).and_then(Value::as_str).unwrap_or_default();
    let (api_version, kind) = (text("apiVersion"), text("kind"));
    if api_version == resource.group_version() && kind == resource.kind {
        return Ok(());
    }
    let (group, version) = match api_version.split_once('/') {
        Some((group, version)) => (group, version),
        None => ("", api_version),
    };
    Err(RegistryError::BadRequest(format!(
        "invalid object type: {group}/{version}, Kind={kind}"
    )))
}

/// The object's name must be the URL's.
pub(crate) fn check_name(object: &Value, name: &str) -> Result<(), RegistryError> {
    let object_name = meta::string(object, "name").unwrap_or_default();
    if object_name == name {
        Ok(())
    } else {
        Err(RegistryError::BadRequest(format!(
            "the name of the object ({object_name}) does not match the name on the URL ({name})"
        )))
    }
}

/// A name the object carries must be the URL's (patches may leave it out).
pub(crate) fn check_name_if_set(object: &Value, name: &str) -> Result<(), RegistryError> {
    match meta::string(object, "name") {
        Some(object_name) if object_name != name => check_name(object, name),
        _ => Ok(()),
    }
}
