//! The APIExport view: `/services/apiexport/<cluster>/<export>/clusters/<consumer or *>/...`,
//! the view an export's provider has of every consumer bound to it:
//!
//! - the resources the export exports (stored under its identity: the view of `*` is the
//!   wildcard read of `<resource>:<identity>`, so exactly the binders' objects), the resources
//!   it claims (only in clusters whose binding accepted the claim, and only the objects its
//!   selector selects there), and the `apibindings` to the export;
//! - a consumer is named by its logical cluster name (a workspace path is refused, as kcp
//!   refuses it: `Path not resolved to a valid virtual workspace`);
//! - authorized by the request's verb on `apiexports/content` of the export, in the
//!   provider's logical cluster.

use std::collections::BTreeMap;
use std::sync::Arc;

use kcp_apimachinery::labels::Selector;
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

/// Admits `info` to the view of the export `export` of `cluster` for `user`, or answers why
/// not.
pub async fn admit(
    registry: &Registry,
    authz: &Authorizer,
    user: &User,
    cluster: &str,
    export: &str,
    mut info: RequestInfo,
) -> Result<Admitted, ApiError> {
    let Some(consumer) = cluster_of(&info) else {
        return Err(ApiError::NoSuchResource);
    };
    if consumer != ALL_CLUSTERS && !kcp_registry::tenancy::paths::valid_cluster_name(&consumer) {
        return Err(forbidden(
            "Path not resolved to a valid virtual workspace".into(),
        ));
    }
    let verb = match &info {
        RequestInfo::Resource(r) => r.verb.clone(),
        RequestInfo::NonResource { .. } => "get".to_string(),
    };
    let target = RbacTarget::Resource {
        api_group: kcp_apis::system::APIS_GROUP,
        resource: "apiexports",
        subresource: "content",
        name: export,
        namespace: "",
    };
    let decision = match user.groups.iter().any(|g| g == "system:masters") {
        true => Decision::Allow,
        false => authz.decide(&user.info(), cluster, &verb, target).await?,
    };
    if let Decision::Deny(denial) = decision {
        return Err(forbidden(denial.message));
    }
    let privileged = registry.privileged();
    let exports = Target {
        cluster,
        resource: kcp_apis::system::api_exports(),
        namespace: None,
    };
    let export_object = privileged
        .get(exports, export)
        .await
        .map_err(|_| ApiError::NoSuchResource)?;
    let identity = text(&export_object["status"], "identityHash").to_string();
    let exported = privileged.export_resources(cluster, &export_object).await?;
    // Claimed resources: built-in ones, and bound ones (a claim naming their export's identity).
    let mut claimed: Vec<ResourceRef> = Vec::new();
    for claim in export_object["spec"]["permissionClaims"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let (group, resource) = (text(claim, "group"), text(claim, "resource"));
        match text(claim, "identityHash") {
            "" => claimed.extend(
                kcp_apis::builtin::RESOURCES
                    .iter()
                    .filter(|r| r.group == group && r.name == resource)
                    .map(ResourceRef::from),
            ),
            identity => claimed.extend(registry.bound_with_identity(group, resource, identity)),
        }
    }
    let bindings = kcp_apis::system::resources()
        .iter()
        .filter(|r| r.group == kcp_apis::system::APIS_GROUP && r.name == "apibindings")
        .map(ResourceRef::from);
    let mut served: Vec<ResourceRef> = exported.clone();
    served.extend(claimed.iter().cloned());
    served.extend(bindings);
    if let RequestInfo::Resource(request) = &mut info {
        let binds_export = binding_filter(cluster, export);
        let is_exported = exported.iter().any(|r| {
            r.group == request.group && r.version == request.version && r.name == request.resource
        });
        let claimed_identity = claimed
            .iter()
            .find(|r| r.group == request.group && r.name == request.resource)
            .map(|r| r.identity().to_string());
        if request.group == kcp_apis::system::APIS_GROUP && request.resource == "apibindings" {
            let filter = binds_export.clone();
            request.restrict = Some(Restriction(Arc::new(move |o: &Value| filter(o))));
        } else if is_exported {
            if consumer == ALL_CLUSTERS {
                request.resource = format!("{}:{identity}", request.resource);
            } else {
                let bound = registry
                    .serves(
                        &consumer,
                        &request.group,
                        &request.version,
                        &request.resource,
                    )
                    .is_some_and(|r| r.identity() == identity);
                if !bound {
                    return Err(ApiError::NoSuchResource);
                }
            }
        } else if let Some(identity) = claimed_identity {
            let accepted = accepting_clusters(registry, (cluster, export), request);
            if consumer != ALL_CLUSTERS && !accepted.contains_key(&consumer) {
                return Err(ApiError::NoSuchResource);
            }
            if consumer == ALL_CLUSTERS && !identity.is_empty() {
                // A claimed bound resource: the wildcard read of its export's identity.
                request.resource = format!("{}:{identity}", request.resource);
            }
            let accepted = Arc::new(accepted);
            request.restrict = Some(Restriction(Arc::new(move |o: &Value| {
                accepted
                    .get(text(&o["metadata"]["annotations"], "kcp.io/cluster"))
                    .is_some_and(|selector| selector.matches(&o["metadata"]["labels"]))
            })));
        } else {
            return Err(ApiError::NoSuchResource);
        }
    }
    Ok(Admitted {
        info,
        served: ServedResources::only(served),
    })
}

type BindingFilter = Arc<dyn Fn(&Value) -> bool + Send + Sync>;

/// Whether an APIBinding binds the export `export` of `cluster`.
fn binding_filter(cluster: &str, export: &str) -> BindingFilter {
    let (cluster, export) = (cluster.to_string(), export.to_string());
    Arc::new(move |binding: &Value| {
        text(&binding["status"], "apiExportClusterName") == cluster
            && text(&binding["spec"]["reference"]["export"], "name") == export
    })
}

/// The logical clusters whose binding to the export accepted the claim on `request`'s
/// resource, each with the claim's selector (`matchAll`, or its labels and expressions; one
/// that does not parse selects nothing), as the registry's bound index keeps them.
fn accepting_clusters(
    registry: &Registry,
    (cluster, export): (&str, &str),
    request: &crate::request_info::ResourceRequest,
) -> BTreeMap<String, Selector> {
    registry
        .accepted_claims(cluster, export, &request.group, &request.resource)
        .into_iter()
        .map(|(at, selector)| {
            let selector = match selector["matchAll"] == true {
                true => Selector::everything(),
                false => {
                    Selector::from_label_selector(&selector).unwrap_or_else(|_| Selector::nothing())
                }
            };
            (at, selector)
        })
        .collect()
}
