//! The initializing workspaces view: `/services/initializingworkspaces/<initializer>/...`, what
//! a WorkspaceType's initializer (`<type's workspace path>:<type name>`) sees, as kcp serves it:
//!
//! - `clusters/*/apis/core.kcp.io/v1alpha1/logicalclusters`: the LogicalClusters in phase
//!   Initializing whose `status.initializers` hold the initializer (list and watch; one that
//!   stops matching leaves a watch as DELETED);
//! - `clusters/<logical cluster>/...`: while that cluster is Initializing and holds the
//!   initializer, its whole content, to set it up, and its LogicalCluster, whose initializer
//!   the controller removes when it is done;
//! - authorized by verb `initialize` on the WorkspaceType in its workspace.

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

/// Whether `logical_cluster` is Initializing and waits for `initializer`.
fn waits_for(logical_cluster: &Value, initializer: &str) -> bool {
    logical_cluster["status"]["phase"] == "Initializing"
        && logical_cluster["status"]["initializers"]
            .as_array()
            .is_some_and(|all| all.iter().any(|i| i == initializer))
}

/// Admits `info` to the view of `initializer` for `user`, or answers why not.
pub async fn admit(
    registry: &Registry,
    authz: &Authorizer,
    user: &User,
    initializer: &str,
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
                .decide(&user.info(), &type_cluster, "initialize", target)
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
                waits_for(o, &initializer)
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
    if !found.as_ref().is_some_and(|lc| waits_for(lc, initializer)) {
        let name = found
            .as_ref()
            .map_or(cluster.as_str(), |lc| text(&lc["metadata"], "name"));
        tracing::debug!(name, initializer, "not initializing for this initializer");
        return Err(forbidden(format!(
            "initializer {initializer:?} cannot access this workspace"
        )));
    }
    Ok(Admitted {
        info,
        served: registry.served(&cluster),
    })
}
