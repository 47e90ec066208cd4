//! Service account credentials: TokenRequest (`serviceaccounts/<name>/token`, what `kubectl
//! create token` asks) and authenticating the tokens [`tokens`] issues, with Kubernetes'
//! lookups: a token is valid only while its service account exists with the uid it names (a
//! deleted and re-created account's old tokens fail), a bound token only while the Secret it is
//! bound to does, and a legacy token only while its Secret holds it.
//!
//! The lookups are kept between requests and dropped on writes to their objects
//! ([`lookups`]).
//!
//! Owns: the TokenRequest subresource and the lookups. Must not know HTTP or who may ask
//! (the API server authorizes `create serviceaccounts/token` first).

mod lookups;
pub(crate) use lookups::Lookups;
pub mod tokens;

use std::sync::Arc;

use serde_json::{Value, json};

use kcp_apis::builtin::core;

use crate::error::{Cause, RegistryError};
use crate::store::{Registry, Target};
use tokens::{BoundObject, Form};
pub use tokens::{ServiceAccountTokens, TokenConfig, TokenSubject};

/// The Secret type of legacy service account tokens.
pub const TOKEN_SECRET_TYPE: &str = "kubernetes.io/service-account-token";
/// The annotation naming a token Secret's service account.
pub const NAME_ANNOTATION: &str = "kubernetes.io/service-account.name";
/// The annotation holding a token Secret's service account uid.
pub const UID_ANNOTATION: &str = "kubernetes.io/service-account.uid";
/// The extra key of a bound token's id.
pub const CREDENTIAL_ID: &str = "authentication.kubernetes.io/credential-id";
/// kcp's extra keys naming the logical cluster a user authenticated in.
pub const CLUSTER_NAME_EXTRA: &str = "authentication.kcp.io/cluster-name";
pub const SCOPES_EXTRA: &str = "authentication.kcp.io/scopes";
/// A TokenRequest without `expirationSeconds` asks for an hour, as Kubernetes defaults it.
const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;

/// The service account a token authenticated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceAccountUser {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: std::collections::BTreeMap<String, Vec<String>>,
}

impl Registry {
    /// The same registry issuing and accepting service account tokens with `tokens`.
    pub fn with_service_account_tokens(mut self, tokens: Arc<ServiceAccountTokens>) -> Registry {
        self.set_service_account_tokens(tokens);
        self
    }

    /// Answers a TokenRequest for the service account `name` in `namespace` of `cluster`.
    pub async fn request_token(
        &self,
        cluster: &str,
        namespace: &str,
        name: &str,
        mut request: Value,
    ) -> Result<Value, RegistryError> {
        let tokens = self.service_account_tokens().ok_or_else(|| {
            RegistryError::MethodNotAllowed("service account tokens are not issued".into())
        })?;
        let in_namespace = |resource: &'static str| Target {
            cluster,
            resource: core(resource),
            namespace: Some(namespace),
        };
        let account = self.get(in_namespace("serviceaccounts"), name).await?;
        let spec = &request["spec"];
        let expiration = spec["expirationSeconds"]
            .as_i64()
            .unwrap_or(DEFAULT_EXPIRATION_SECONDS);
        let mut causes = Vec::new();
        if expiration < 600 {
            causes.push(invalid(
                "spec.expirationSeconds",
                &expiration.to_string(),
                "may not specify a duration less than 10 minutes",
            ));
        } else if expiration > 1 << 32 {
            causes.push(invalid(
                "spec.expirationSeconds",
                &expiration.to_string(),
                "may not specify a duration larger than 2^32 seconds",
            ));
        }
        let audiences: Vec<String> = match spec["audiences"].as_array() {
            Some(list) if !list.is_empty() => list
                .iter()
                .filter_map(|a| a.as_str().map(str::to_string))
                .collect(),
            _ => tokens.api_audiences().to_vec(),
        };
        let bound = &spec["boundObjectRef"];
        let mut secret = None;
        if bound.is_object() {
            let kind = bound["kind"].as_str().unwrap_or_default();
            if kind != "Secret" {
                causes.push(Cause {
                    reason: "FieldValueNotSupported",
                    field: "spec.boundObjectRef.kind".into(),
                    message: format!("Unsupported value: \"{kind}\": supported values: \"Secret\""),
                });
            } else {
                let secret_name = bound["name"].as_str().unwrap_or_default();
                let found = self.get(in_namespace("secrets"), secret_name).await?;
                let uid = found["metadata"]["uid"].as_str().unwrap_or_default();
                if let Some(wanted) = bound["uid"].as_str().filter(|u| !u.is_empty())
                    && wanted != uid
                {
                    return Err(RegistryError::Conflict {
                        qualified_resource: "secrets".into(),
                        name: secret_name.into(),
                        reason: format!(
                            "the UID in the bound object reference ({wanted}) does not match the UID in record. The object might have been deleted and then recreated"
                        ),
                    });
                }
                secret = Some(BoundObject {
                    name: secret_name.into(),
                    uid: uid.into(),
                });
            }
        }
        if !causes.is_empty() {
            return Err(RegistryError::Invalid {
                kind: "TokenRequest".into(),
                group: "authentication.k8s.io".into(),
                name: name.into(),
                causes,
            });
        }
        let lifetime = tokens.lifetime(expiration);
        let now = jiff::Timestamp::now().as_second();
        let subject = TokenSubject {
            cluster: cluster.into(),
            namespace: namespace.into(),
            name: name.into(),
            uid: account["metadata"]["uid"]
                .as_str()
                .unwrap_or_default()
                .into(),
        };
        let token = tokens
            .issue_bound(&subject, &audiences, now, lifetime, secret)
            .map_err(RegistryError::Internal)?;
        let expires = jiff::Timestamp::from_second(now + lifetime)
            .map_err(|e| RegistryError::Internal(e.to_string()))?;
        if let Some(object) = request.as_object_mut() {
            object.insert("apiVersion".into(), json!("authentication.k8s.io/v1"));
            object.insert("kind".into(), json!("TokenRequest"));
            object.insert(
                "metadata".into(),
                json!({"name": name, "namespace": namespace, "creationTimestamp": null}),
            );
            let spec = object.entry("spec").or_insert_with(|| json!({}));
            spec["audiences"] = json!(audiences);
            spec["expirationSeconds"] = json!(expiration);
            if spec.get("boundObjectRef").is_none_or(Value::is_null) {
                spec["boundObjectRef"] = Value::Null;
            }
            object.insert(
                "status".into(),
                json!({
                    "token": token,
                    "expirationTimestamp": expires.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
                }),
            );
        }
        Ok(request)
    }

    /// The service account `token` names, if it is a service account token this server
    /// accepts and its service account (and Secret) still stand. `Ok(None)` is a token that
    /// does not authenticate (as a service account).
    pub async fn authenticate_service_account(
        &self,
        token: &str,
    ) -> Result<Option<ServiceAccountUser>, RegistryError> {
        let Some(tokens) = self.service_account_tokens() else {
            return Ok(None);
        };
        let Some(verified) = tokens.verify(token) else {
            return Ok(None);
        };
        let subject = &verified.subject;
        let lookups = self.service_account_lookups();
        let key = |resource: &'static str, name: &str| {
            (
                subject.cluster.clone(),
                resource,
                subject.namespace.clone(),
                name.to_string(),
            )
        };
        let account = lookups
            .seen(self, key("serviceaccounts", &subject.name))
            .await?;
        match account {
            None => {
                tracing::debug!(account = %subject.name, "service account token of a missing account");
                return Ok(None);
            }
            Some(account) if account.uid != subject.uid => {
                tracing::debug!(account = %subject.name, "service account token of a re-created account");
                return Ok(None);
            }
            Some(_) => {}
        }
        let mut extra = std::collections::BTreeMap::new();
        match &verified.form {
            Form::Bound { id, secret } => {
                if let Some(bound) = secret {
                    let found = lookups.seen(self, key("secrets", &bound.name)).await?;
                    if found.is_none_or(|secret| secret.uid != bound.uid) {
                        return Ok(None);
                    }
                }
                extra.insert(CREDENTIAL_ID.to_string(), vec![format!("JTI={id}")]);
            }
            Form::Legacy { secret } => {
                let found = lookups.seen(self, key("secrets", secret)).await?;
                let held = found.and_then(|secret| secret.token);
                if held.as_deref() != Some(token.as_bytes()) {
                    return Ok(None);
                }
            }
        }
        extra.insert(
            CLUSTER_NAME_EXTRA.to_string(),
            vec![subject.cluster.clone()],
        );
        extra.insert(
            SCOPES_EXTRA.to_string(),
            vec![format!("cluster:{}", subject.cluster)],
        );
        Ok(Some(ServiceAccountUser {
            name: tokens::service_account_user(&subject.namespace, &subject.name),
            uid: subject.uid.clone(),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{}", subject.namespace),
            ],
            extra,
        }))
    }
}

fn invalid(field: &str, value: &str, message: &str) -> Cause {
    Cause {
        reason: "FieldValueInvalid",
        field: field.into(),
        message: format!("Invalid value: {value}: {message}"),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;

    fn registry() -> Registry {
        let tokens = ServiceAccountTokens::new(TokenConfig {
            signing_key_pem: tokens::generate_signing_key().unwrap(),
            verifying_keys_pem: Vec::new(),
            issuers: Vec::new(),
            audiences: Vec::new(),
            max_expiration_seconds: None,
            root_ca_pem: Vec::new(),
        })
        .unwrap();
        Registry::new(Arc::new(kcp_storage::MemoryStorage::new()))
            .with_service_account_tokens(Arc::new(tokens))
    }

    #[tokio::test]
    async fn a_kept_lookup_goes_with_its_account() {
        let registry = registry();
        registry.ensure_namespace("c1", "default").await.unwrap();
        let accounts = Target {
            cluster: "c1",
            resource: core("serviceaccounts"),
            namespace: Some("default"),
        };
        registry
            .create(accounts, json!({"metadata": {"name": "robot"}}))
            .await
            .unwrap();
        let answer = registry
            .request_token("c1", "default", "robot", json!({"spec": {}}))
            .await
            .unwrap();
        let token = answer["status"]["token"].as_str().unwrap().to_string();
        // Read once, then kept: both authenticate.
        for _ in 0..2 {
            let user = registry.authenticate_service_account(&token).await.unwrap();
            assert_eq!(user.unwrap().name, "system:serviceaccount:default:robot");
        }
        registry.delete(accounts, "robot").await.unwrap();
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            if registry
                .authenticate_service_account(&token)
                .await
                .unwrap()
                .is_none()
            {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the deletion is never seen"
            );
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }
}
