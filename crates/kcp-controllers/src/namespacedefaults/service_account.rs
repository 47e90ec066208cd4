//! The ServiceAccount `default` of a namespace: created when missing.

use kcp_apis::builtin::core;
use kcp_registry::{Registry, RegistryError, Target};
use serde_json::json;

/// The service account every namespace has.
pub const DEFAULT_SERVICE_ACCOUNT: &str = "default";

/// Creates the `default` ServiceAccount of `namespace` unless it exists.
pub(super) async fn ensure(
    registry: &Registry,
    cluster: &str,
    namespace: &str,
) -> Result<(), RegistryError> {
    let target = Target {
        cluster,
        resource: core("serviceaccounts"),
        namespace: Some(namespace),
    };
    // A read first: after a restart every namespace is looked at, and nearly all have theirs.
    match registry.summary(target, DEFAULT_SERVICE_ACCOUNT).await {
        Ok(_) => return Ok(()),
        Err(RegistryError::NotFound { .. }) => {}
        Err(error) => return Err(error),
    }
    let account = json!({"metadata": {"name": DEFAULT_SERVICE_ACCOUNT}});
    // Refused by a quota without room: retried. A namespace terminating meanwhile needs
    // nothing more.
    match registry.create(target, account).await {
        Ok(_) | Err(RegistryError::AlreadyExists { .. }) | Err(RegistryError::NotFound { .. }) => {
            Ok(())
        }
        Err(error) if error.refused_as_namespace_terminating() => Ok(()),
        Err(error) => Err(error),
    }
}
