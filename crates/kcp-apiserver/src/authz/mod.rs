//! Authorization, per logical cluster, in the order kcp chains it:
//!
//! 1. `system:masters` may do anything anywhere.
//! 2. Wildcard requests (`/clusters/*`) are for those identities only.
//! 3. Workspace content: entering a logical cluster needs verb `access` on path `/` there,
//!    granted by its own RBAC (root grants it to `system:authenticated`) or a bootstrap role
//!    bound in it; without it the request is denied whatever else it holds, so nothing reveals
//!    what the workspace contains.
//! 4. RBAC: the logical cluster's own Roles, ClusterRoles and bindings ([`policies`]), its
//!    bindings able to name the bootstrap ClusterRoles ([`bootstrap`]) without a copy, and the
//!    bootstrap bindings that hold everywhere (discovery for every authenticated user).
//!
//! A denial is answered with kube-apiserver's 403 `Status` and its words (see
//! [`kcp_apimachinery::rbac::forbidden_message`]), followed by kcp's reason.

mod bootstrap;
mod policies;

use std::sync::Arc;

use kcp_apimachinery::rbac::{Attributes, Policy, Target, UserInfo};
use kcp_registry::{ALL_CLUSTERS, Registry, RegistryError};

use crate::authn::User;
use crate::request_info::RequestInfo;

/// The group whose members every authorizer lets through.
pub const MASTERS: &str = "system:masters";

/// What the chain decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// Refused: the message of the 403 (`User "alice" cannot ...: <reason>`).
    Deny(String),
}

/// The authorization chain of one server.
#[derive(Clone)]
pub struct Authorizer {
    policies: policies::Policies,
    bootstrap: Arc<Policy>,
}

impl Authorizer {
    pub fn new(registry: Registry) -> Authorizer {
        Authorizer {
            policies: policies::Policies::new(registry),
            bootstrap: Arc::new(bootstrap::policy()),
        }
    }

    /// Decides whether `user` may make the request `info` describes (its cluster resolved).
    pub async fn authorize(
        &self,
        user: &User,
        info: &RequestInfo,
    ) -> Result<Decision, RegistryError> {
        if user.groups.iter().any(|group| group == MASTERS) {
            return Ok(Decision::Allow);
        }
        let user_info = UserInfo {
            name: user.name.clone(),
            groups: user.groups.clone(),
        };
        let (cluster, verb, target) = match info {
            RequestInfo::Resource(request) => (
                request.cluster.as_deref(),
                request.verb.as_str(),
                Target::Resource {
                    api_group: &request.group,
                    resource: &request.resource,
                    subresource: request.subresource.as_deref().unwrap_or_default(),
                    name: request.name.as_deref().unwrap_or_default(),
                    namespace: request.namespace.as_deref().unwrap_or_default(),
                },
            ),
            RequestInfo::NonResource {
                cluster,
                path,
                verb,
            } => (
                cluster.as_deref(),
                verb.as_str(),
                Target::NonResource { path },
            ),
        };
        let attributes = Attributes {
            user: &user_info,
            verb,
            target,
        };
        let deny = |reason: &str| {
            Decision::Deny(format!(
                "{}: {reason}",
                kcp_apimachinery::rbac::forbidden_message(&attributes)
            ))
        };
        let cluster = cluster.unwrap_or("root");
        if cluster == ALL_CLUSTERS {
            return Ok(deny("wildcard requests are for privileged identities"));
        }
        let policy = self.policies.of(cluster).await?;
        let access = Attributes {
            user: &user_info,
            verb: "access",
            target: Target::NonResource { path: "/" },
        };
        let allows = |attributes: &Attributes<'_>| {
            policy.allows(attributes, Some(&self.bootstrap))
                || self.bootstrap.allows(attributes, None)
        };
        if !allows(&access) {
            return Ok(deny("access denied"));
        }
        if allows(&attributes) {
            Ok(Decision::Allow)
        } else {
            Ok(deny("access denied"))
        }
    }
}
