//! Versions of custom resources: objects are stored at the CRD's storage version and served at
//! the version a request names. Strategy `None` only rewrites `apiVersion`; strategy `Webhook`
//! asks the CRD's conversion webhook through a [`WebhookConverter`] the composition root
//! provides (the registry knows no HTTP). Reads also fill in the schema's defaults, so a default
//! added to a CRD shows on objects stored before it.

use futures::future::BoxFuture;
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

fn api_version(group: &str, version: &str) -> String {
    format!("{group}/{version}")
}

impl Registry {
    /// `objects` (of `resource`'s kind) at `version` of its group.
    pub(crate) async fn convert(
        &self,
        resource: &Resource,
        objects: Vec<Value>,
        version: &str,
    ) -> Result<Vec<Value>, RegistryError> {
        let Some(custom) = resource.custom else {
            return Ok(objects);
        };
        let desired = api_version(resource.group, version);
        if objects.iter().all(|o| o["apiVersion"] == desired.as_str()) {
            return Ok(objects);
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
                let failed = |reason: String| {
                    RegistryError::Internal(format!(
                        "conversion webhook for {}, Kind={} failed: {reason}",
                        desired, resource.kind
                    ))
                };
                let Some(converter) = self.webhook_converter() else {
                    return Err(failed("no webhook client is configured".into()));
                };
                let (done, todo): (Vec<_>, Vec<_>) = objects
                    .into_iter()
                    .enumerate()
                    .partition(|(_, o)| o["apiVersion"] == desired.as_str());
                let (positions, todo): (Vec<usize>, Vec<Value>) = todo.into_iter().unzip();
                let converted = converter
                    .convert(webhook, todo, &desired)
                    .await
                    .map_err(failed)?;
                if converted.len() != positions.len() {
                    return Err(failed(format!(
                        "expected {} converted objects, got {}",
                        positions.len(),
                        converted.len()
                    )));
                }
                let mut all: Vec<(usize, Value)> = done;
                all.extend(positions.into_iter().zip(converted));
                all.sort_by_key(|(position, _)| *position);
                Ok(all.into_iter().map(|(_, object)| object).collect())
            }
        }
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

    /// Stored objects as `resource`'s version serves them.
    pub(crate) async fn present_all(
        &self,
        resource: &Resource,
        objects: Vec<Value>,
    ) -> Result<Vec<Value>, RegistryError> {
        let Some(custom) = resource.custom else {
            return Ok(objects);
        };
        let mut objects = self.convert(resource, objects, resource.version).await?;
        if custom.has_defaults
            && let Some(schema) = &custom.schema
        {
            for object in &mut objects {
                kcp_apimachinery::schema::default(schema, object);
            }
        }
        Ok(objects)
    }

    /// An object of the target's version as it is stored.
    pub(crate) async fn for_storage(
        &self,
        target: &Target<'_>,
        object: Value,
    ) -> Result<Value, RegistryError> {
        let Some(custom) = target.resource.custom else {
            return Ok(object);
        };
        Ok(self
            .convert(target.resource, vec![object], custom.storage_version)
            .await?
            .pop()
            .unwrap_or_default())
    }
}
