//! The admission chain: what every write passes, whoever writes (the API server, the server's
//! controllers), in two phases as Kubernetes runs them, each an ordered list of plugins:
//!
//! 1. [`MUTATING`], after the write is decoded and defaulted and before its kind validates it;
//!    plugins may change the object (and refuse it).
//!    - [`Plugin::NamespaceLifecycle`], Kubernetes' plugin: objects of namespaced kinds are
//!      created only in a namespace that exists (404 otherwise) and is not terminating (403
//!      with cause `NamespaceTerminating`); `default`, `kube-system` and `kube-public` are
//!      never deleted (403).
//!    - [`Plugin::Tenancy`], kcp's plugins for its own kinds: Workspaces, LogicalClusters,
//!      WorkspaceTypes, their reserved metadata and finalizers ([`crate::tenancy`]).
//!    - [`Plugin::RbacEscalation`], Kubernetes' RBAC rules for users' writes of roles and
//!      bindings: a role may hold only rules its writer holds (or verb `escalate`), a binding
//!      may grant only a role whose rules its writer holds (or verb `bind` on it)
//!      (`crate::escalation`; kube-apiserver checks them before the object is validated too).
//!    - [`Plugin::MutatingWebhooks`], last: the workspace's mutating admission webhooks
//!      ([`webhooks`]); the object they patch is decoded and defaulted again.
//! 2. [`VALIDATING`], once the kind has validated the object and the server set its uid and
//!    creation time, just before it is stored; plugins only refuse.
//!    - [`Plugin::ApiSharing`], kcp's `apiresourceschema` and `apibinding` plugins:
//!      APIResourceSchemas valid as CRDs and immutable; binding an export needs verb `bind` on
//!      it (`crate::apis`).
//!    - [`Plugin::ReservedCrd`], kcp's `ReservedCRDGroups` and `ReservedCRDAnnotations`: CRDs
//!      written through the API may not use `*apis.kcp.io` groups or `apis.kcp.io`
//!      annotations (`crate::reserved_crds`).
//!    - [`Plugin::ValidatingAdmissionPolicy`], the workspace's ValidatingAdmissionPolicies
//!      through their bindings ([`policies`]).
//!    - [`Plugin::ValidatingWebhooks`], the workspace's validating admission webhooks, all
//!      called at once ([`webhooks`]).
//!    - [`Plugin::ResourceQuota`], last, as in Kubernetes: a create takes its place in its
//!      namespace's quotas only once everything else admitted it (`crate::quota`).
//!
//! The server's own controllers write through [`Registry::privileged`], which only
//! NamespaceLifecycle's create checks hold to.

mod configurations;
pub(crate) mod policies;
pub mod webhooks;

pub(crate) use configurations::AdmissionConfigurations;

use serde_json::Value;

use crate::error::{Cause, RegistryError};
use crate::kinds::core::{IMMORTAL_NAMESPACES, namespace_terminating};
use crate::store::{Registry, Target, decode, namespaces};

/// One admission plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plugin {
    NamespaceLifecycle,
    Tenancy,
    RbacEscalation,
    MutatingWebhooks,
    ApiSharing,
    ReservedCrd,
    ValidatingAdmissionPolicy,
    ValidatingWebhooks,
    ResourceQuota,
}

/// The two phases of admission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Before the object is validated: plugins may change it.
    Mutating,
    /// After: plugins only refuse.
    Validating,
}

/// The plugins of the mutating phase, in order.
pub const MUTATING: &[Plugin] = &[
    Plugin::NamespaceLifecycle,
    Plugin::Tenancy,
    Plugin::RbacEscalation,
    Plugin::MutatingWebhooks,
];

/// The plugins of the validating phase, in order.
pub const VALIDATING: &[Plugin] = &[
    Plugin::ApiSharing,
    Plugin::ReservedCrd,
    Plugin::ValidatingAdmissionPolicy,
    Plugin::ValidatingWebhooks,
    Plugin::ResourceQuota,
];

impl Phase {
    /// Its plugins, in order.
    pub fn plugins(self) -> &'static [Plugin] {
        match self {
            Phase::Mutating => MUTATING,
            Phase::Validating => VALIDATING,
        }
    }
}

impl Registry {
    /// Admits a new object in `phase` (the validating phase changes nothing); `sent_name` is
    /// its name as the client sent it (empty when the server generated it), which
    /// NamespaceLifecycle and ResourceQuota name in their refusals as Kubernetes does.
    pub(crate) async fn admit_create(
        &self,
        phase: Phase,
        target: &Target<'_>,
        object: &mut Value,
        sent_name: &str,
    ) -> Result<(), RegistryError> {
        for plugin in phase.plugins() {
            match plugin {
                Plugin::NamespaceLifecycle => match target.namespace {
                    Some(namespace) if target.resource.namespaced => {
                        self.require_live_namespace(target, namespace, sent_name)
                            .await?
                    }
                    _ => {}
                },
                Plugin::Tenancy => self.admit_tenancy_create(target, object).await?,
                Plugin::RbacEscalation => self.admit_rbac_write(target, object).await?,
                Plugin::ApiSharing => self.admit_api_sharing_create(target, object).await?,
                Plugin::ReservedCrd => self.admit_reserved_crd(target, object)?,
                Plugin::MutatingWebhooks => {
                    let name = object["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string();
                    let write = webhooks::Write {
                        operation: webhooks::Operation::Create,
                        target,
                        name: &name,
                        old: None,
                    };
                    self.call_mutating_webhooks(&write, Some(object)).await?
                }
                Plugin::ValidatingAdmissionPolicy | Plugin::ValidatingWebhooks => {
                    let name = object["metadata"]["name"].as_str().unwrap_or_default();
                    let write = webhooks::Write {
                        operation: webhooks::Operation::Create,
                        target,
                        name,
                        old: None,
                    };
                    match plugin {
                        Plugin::ValidatingAdmissionPolicy => {
                            self.call_policies(&write, Some(object)).await?
                        }
                        _ => self.call_validating_webhooks(&write, Some(object)).await?,
                    }
                }
                Plugin::ResourceQuota => self.admit_quota(target, sent_name).await?,
            }
        }
        Ok(())
    }

    /// Admits `next` replacing `stored` (updates and patches) in `phase` (the validating phase
    /// changes nothing).
    pub(crate) async fn admit_update(
        &self,
        phase: Phase,
        target: &Target<'_>,
        name: &str,
        stored: &Value,
        next: &mut Value,
    ) -> Result<(), RegistryError> {
        for plugin in phase.plugins() {
            match plugin {
                Plugin::NamespaceLifecycle | Plugin::ResourceQuota => {}
                Plugin::Tenancy => self.admit_tenancy_update(target, name, stored, next)?,
                Plugin::RbacEscalation => self.admit_rbac_write(target, next).await?,
                Plugin::ApiSharing => {
                    self.admit_api_sharing_update(target, name, stored, next)
                        .await?
                }
                Plugin::ReservedCrd => self.admit_reserved_crd(target, next)?,
                Plugin::MutatingWebhooks
                | Plugin::ValidatingAdmissionPolicy
                | Plugin::ValidatingWebhooks => {
                    let write = webhooks::Write {
                        operation: webhooks::Operation::Update,
                        target,
                        name,
                        old: Some(stored),
                    };
                    match plugin {
                        Plugin::MutatingWebhooks => {
                            self.call_mutating_webhooks(&write, Some(next)).await?
                        }
                        Plugin::ValidatingAdmissionPolicy => {
                            self.call_policies(&write, Some(next)).await?
                        }
                        _ => self.call_validating_webhooks(&write, Some(next)).await?,
                    }
                }
            }
        }
        Ok(())
    }

    /// Admits deleting the object `name`: both phases (there is no object to change).
    pub(crate) async fn admit_delete(
        &self,
        target: &Target<'_>,
        name: &str,
    ) -> Result<(), RegistryError> {
        for plugin in MUTATING.iter().chain(VALIDATING) {
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
                // Both kinds of webhooks at once: the object is read only when some apply.
                Plugin::MutatingWebhooks => self.call_delete_webhooks(target, name).await?,
                Plugin::RbacEscalation
                | Plugin::ApiSharing
                | Plugin::ReservedCrd
                | Plugin::ValidatingAdmissionPolicy
                | Plugin::ValidatingWebhooks
                | Plugin::ResourceQuota => {}
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
