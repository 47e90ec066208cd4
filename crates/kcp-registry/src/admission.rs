//! The admission chain: what every write passes after it is decoded and defaulted and before
//! its kind validates it, whoever writes (the API server, the server's controllers), in one
//! order written down in [`ORDER`], as kcp lists its admission plugins in order.
//!
//! - [`Plugin::NamespaceLifecycle`], Kubernetes' plugin: objects of namespaced kinds are created
//!   only in a namespace that exists (404 otherwise) and is not terminating (403 with cause
//!   `NamespaceTerminating`); `default`, `kube-system` and `kube-public` are never deleted (403).
//! - [`Plugin::Tenancy`], kcp's plugins for its own kinds: Workspaces, LogicalClusters,
//!   WorkspaceTypes, their reserved metadata and finalizers ([`crate::tenancy`]).
//! - [`Plugin::ReservedCrd`], kcp's `ReservedCRDGroups` and `ReservedCRDAnnotations`: CRDs
//!   written through the API may not use `*apis.kcp.io` groups or `apis.kcp.io` annotations
//!   (`crate::reserved_crds`).
//! - [`Plugin::RbacEscalation`], Kubernetes' RBAC rules for users' writes of roles and
//!   bindings: a role may hold only rules its writer holds (or verb `escalate`), a binding may
//!   grant only a role whose rules its writer holds (or verb `bind` on it)
//!   (`crate::escalation`).
//!
//! The server's own controllers write through [`Registry::privileged`], which only
//! NamespaceLifecycle's create checks hold to.

use serde_json::Value;

use crate::error::{Cause, RegistryError};
use crate::kinds::core::{IMMORTAL_NAMESPACES, namespace_terminating};
use crate::store::{Registry, Target, decode, namespaces};

/// One admission plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plugin {
    NamespaceLifecycle,
    Tenancy,
    ReservedCrd,
    RbacEscalation,
}

/// The order writes pass the plugins in.
pub const ORDER: &[Plugin] = &[
    Plugin::NamespaceLifecycle,
    Plugin::Tenancy,
    Plugin::ReservedCrd,
    Plugin::RbacEscalation,
];

impl Registry {
    /// Admits a new object; `sent_name` is its name as the client sent it (empty when the
    /// server generated it), which NamespaceLifecycle names in its refusal as Kubernetes does.
    pub(crate) async fn admit_create(
        &self,
        target: &Target<'_>,
        object: &mut Value,
        sent_name: &str,
    ) -> Result<(), RegistryError> {
        for plugin in ORDER {
            match plugin {
                Plugin::NamespaceLifecycle => match target.namespace {
                    Some(namespace) if target.resource.namespaced => {
                        self.require_live_namespace(target, namespace, sent_name)
                            .await?
                    }
                    _ => {}
                },
                Plugin::Tenancy => self.admit_tenancy_create(target, object).await?,
                Plugin::ReservedCrd => self.admit_reserved_crd(target, object)?,
                Plugin::RbacEscalation => self.admit_rbac_write(target, object).await?,
            }
        }
        Ok(())
    }

    /// Admits `next` replacing `stored` (updates and patches); a plugin may change `next`.
    pub(crate) async fn admit_update(
        &self,
        target: &Target<'_>,
        name: &str,
        stored: &Value,
        next: &mut Value,
    ) -> Result<(), RegistryError> {
        for plugin in ORDER {
            match plugin {
                Plugin::NamespaceLifecycle => {}
                Plugin::Tenancy => self.admit_tenancy_update(target, name, stored, next)?,
                Plugin::ReservedCrd => self.admit_reserved_crd(target, next)?,
                Plugin::RbacEscalation => self.admit_rbac_write(target, next).await?,
            }
        }
        Ok(())
    }

    /// Admits deleting the object `name`.
    pub(crate) async fn admit_delete(
        &self,
        target: &Target<'_>,
        name: &str,
    ) -> Result<(), RegistryError> {
        for plugin in ORDER {
            match plugin {
                Plugin::NamespaceLifecycle => {
                    let resource = target.resource;
                    let immortal = resource.group.is_empty()
                        && resource.name == "namespaces"
                        && IMMORTAL_NAMESPACES.contains(&name);
                    if immortal && !self.is_privileged() {
                        return Err(RegistryError::Forbidden {
                            qualified_resource: target.qualified_resource(),
                            name: name.to_string(),
                            message: "this namespace may not be deleted".into(),
                            causes: Vec::new(),
                        });
                    }
                }
                Plugin::Tenancy => self.admit_tenancy_delete(target, name).await?,
                Plugin::ReservedCrd | Plugin::RbacEscalation => {}
            }
        }
        Ok(())
    }

    /// Fails with `namespaces "<ns>" not found` unless the namespace exists in the cluster, and
    /// with 403 Forbidden while it is terminating.
    async fn require_live_namespace(
        &self,
        target: &Target<'_>,
        namespace: &str,
        sent_name: &str,
    ) -> Result<(), RegistryError> {
        let namespaces = Target {
            cluster: target.cluster,
            resource: namespaces(),
            namespace: None,
        };
        let stored = decode(&self.read(&namespaces, namespace).await?)?;
        if namespace_terminating(&stored) {
            return Err(RegistryError::Forbidden {
                qualified_resource: target.qualified_resource(),
                name: sent_name.to_string(),
                message: format!(
                    "unable to create new content in namespace {namespace} because it is being terminated"
                ),
                causes: vec![Cause {
                    reason: crate::error::NAMESPACE_TERMINATING,
                    field: "metadata.namespace".into(),
                    message: format!("namespace {namespace} is being terminated"),
                }],
            });
        }
        Ok(())
    }
}
