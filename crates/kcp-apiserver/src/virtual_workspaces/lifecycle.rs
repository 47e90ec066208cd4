//! The views of a workspace's life: `/services/initializingworkspaces/<initializer>/...` and
//! `/services/terminatingworkspaces/<terminator>/...`, what a WorkspaceType's initializer or
//! terminator (`<type's workspace path>:<type name>`) sees, as kcp serves them:
//!
//! - `clusters/*/apis/core.kcp.io/v1alpha1/logicalclusters`: the LogicalClusters in phase
//!   Initializing whose `status.initializers` hold the initializer (or being deleted, whose
//!   `status.terminators` hold the terminator); list and watch, and one that stops matching
//!   leaves a watch as DELETED;
//! - `clusters/<logical cluster>/...`: while that cluster waits for it, its content, and its
//!   LogicalCluster, whose initializer (terminator) the controller removes when it is done;
//! - authorized by verb `initialize` (`terminate`) on the WorkspaceType in its workspace.

use std::sync::Arc;

use kcp_apimachinery::object::text;
use kcp_apimachinery::rbac::Target as RbacTarget;
use kcp_apis::builtin::ResourceRef;
use kcp_registry::{ALL_CLUSTERS, Registry, ServedResources, Target};
use serde_json::Value;

use super::{Admitted, cluster_of, forbidden};
use crate::authn::User;
use crate::authz::{Authorizer, Decision};
use crate::error::ApiError;
use crate::request_info::{RequestInfo, Restriction};

/// Which end of a workspace's life a view serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Initializing,
    Terminating,
}

impl Stage {
    /// The verb on the WorkspaceType the view needs.
    fn verb(self) -> &'static str {
        match self {
            Stage::Initializing => "initialize",
            Stage::Terminating => "terminate",
        }
    }

    /// What the refusal of a cluster that does not wait for the view calls its owner.
    fn role(self) -> &'static str {
        match self {
            Stage::Initializing => "initializer",
            Stage::Terminating => "terminator",
        }
    }

    /// Whether `logical_cluster` waits for `name` at this stage.
    fn waits_for(self, logical_cluster: &Value, name: &str) -> bool {
        let (at_stage, list) = match self {
            Stage::Initializing => (
                logical_cluster["status"]["phase"] == "Initializing",
                "initializers",
            ),
            Stage::Terminating => (
                logical_cluster["metadata"]
                    .get("deletionTimestamp")
                    .is_some(),
                "terminators",
            ),
        };
        at_stage
            && logical_cluster["status"][list]
                .as_array()
                .is_some_and(|all| all.iter().any(|i| i == name))
    }
}

/// Admits `info` to the `stage` view of `initializer` (or terminator) for `user`, or answers
/// why not.
pub async fn admit(
    registry: &Registry,
    authz: &Authorizer,
    user: &User,
    (stage, initializer): (Stage, &str),
    mut info: RequestInfo,
) -> Result<Admitted, ApiError> {
    let Some((type_path, type_name)) = initializer.rsplit_once(':') else {
        return Err(forbidden("access not permitted".into()));
    };
    let type_cluster = registry
        .resolve_path(type_path)
        .await
        .map_err(|_| forbidden("access not permitted".into()))?;
    let target = RbacTarget::Resource {
        api_group: "tenancy.kcp.io",
        resource: "workspacetypes",
        subresource: "",
        name: type_name,
        namespace: "",
    };
    let decision = match user.groups.iter().any(|g| g == "system:masters") {
        true => Decision::Allow,
        false => {
            authz
                .decide(&user.info(), &type_cluster, stage.verb(), target)
                .await?
        }
    };
    if let Decision::Deny(denial) = decision {
        return Err(forbidden(denial.message));
    }
    let Some(cluster) = cluster_of(&info) else {
        return Err(ApiError::NoSuchResource);
    };
    let logical_clusters = kcp_apis::system::logical_clusters();
    if cluster == ALL_CLUSTERS {
        if let RequestInfo::Resource(request) = &mut info {
            let is_logical_clusters = request.group == *logical_clusters.group
                && request.version == *logical_clusters.version
                && request.resource == *logical_clusters.name;
            if !is_logical_clusters {
                return Err(ApiError::NoSuchResource);
            }
            let initializer = initializer.to_string();
            request.restrict = Some(Restriction(Arc::new(move |o: &Value| {
                stage.waits_for(o, &initializer)
            })));
        }
        return Ok(Admitted {
            info,
            served: ServedResources::only(vec![ResourceRef::from(logical_clusters)]),
        });
    }
    if !kcp_registry::tenancy::paths::valid_cluster_name(&cluster) {
        return Err(forbidden(
            "Path not resolved to a valid virtual workspace".into(),
        ));
    }
    let target = Target {
        cluster: &cluster,
        resource: logical_clusters,
        namespace: None,
    };
    let found = registry
        .privileged()
        .get(target, kcp_registry::tenancy::LOGICAL_CLUSTER)
        .await
        .ok();
    if !found
        .as_ref()
        .is_some_and(|lc| stage.waits_for(lc, initializer))
    {
        let name = found
            .as_ref()
            .map_or(cluster.as_str(), |lc| text(&lc["metadata"], "name"));
        tracing::debug!(name, initializer, "not initializing for this initializer");
        return Err(forbidden(format!(
            "{} {initializer:?} cannot access this workspace",
            stage.role()
        )));
    }
    Ok(Admitted {
        info,
        served: registry.served(&cluster),
    })
}
