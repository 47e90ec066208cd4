//! An APIExport's identity: the Secret its `spec.identity.secretRef` names (by default
//! `kcp-system/<export>`), made with a new random key (and its namespace) when absent, and the
//! hash of that key, which the export's bound resources are stored under.

use base64::Engine;
use kcp_apimachinery::object::text;
use serde_json::{Value, json};

use super::{IDENTITY_NAMESPACE, identity_hash, new_identity_key};
use crate::error::RegistryError;
use crate::store::{Registry, Target, namespaces};

fn secrets() -> &'static kcp_apis::builtin::Resource {
    kcp_apis::builtin::in_group_version("", "v1")
        .find(|r| r.name == "secrets")
        .expect("the catalogue has secrets")
}

impl Registry {
    /// The identity hash of `export` (an APIExport of `cluster`), its Secret made when absent.
    pub async fn export_identity(
        &self,
        cluster: &str,
        export: &Value,
    ) -> Result<String, RegistryError> {
        let secret_ref = &export["spec"]["identity"]["secretRef"];
        let namespace = match text(secret_ref, "namespace") {
            "" => IDENTITY_NAMESPACE,
            namespace => namespace,
        };
        let name = match text(secret_ref, "name") {
            "" => text(&export["metadata"], "name"),
            name => name,
        };
        let key = self.identity_key(cluster, namespace, name).await?;
        Ok(identity_hash(&key))
    }

    /// The identity key of the Secret `namespace/name`, made (namespace and all) when absent.
    async fn identity_key(
        &self,
        cluster: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Vec<u8>, RegistryError> {
        let privileged = self.privileged();
        let target = Target {
            cluster,
            resource: secrets(),
            namespace: Some(namespace),
        };
        let secret = match privileged.get(target, name).await {
            Ok(secret) => secret,
            Err(RegistryError::NotFound { .. }) => {
                let namespaces = Target {
                    cluster,
                    resource: namespaces(),
                    namespace: None,
                };
                let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}});
                match privileged.create(namespaces, body).await {
                    Ok(_) | Err(RegistryError::AlreadyExists { .. }) => {}
                    Err(other) => return Err(other),
                }
                let encoded =
                    base64::engine::general_purpose::STANDARD.encode(new_identity_key().as_bytes());
                let body = json!({
                    "apiVersion": "v1", "kind": "Secret",
                    "metadata": {"name": name, "namespace": namespace},
                    "data": {"key": encoded},
                });
                match privileged.create(target, body).await {
                    Ok(created) => created,
                    Err(RegistryError::AlreadyExists { .. }) => {
                        privileged.get(target, name).await?
                    }
                    Err(other) => return Err(other),
                }
            }
            Err(other) => return Err(other),
        };
        Ok(base64::engine::general_purpose::STANDARD
            .decode(text(&secret["data"], "key"))
            .unwrap_or_default())
    }
}
