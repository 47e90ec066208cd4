//! kcp's maximal permission policy: a request in a consumer's workspace on a resource an
//! APIBinding binds, from an APIExport whose `spec.maximalPermissionPolicy.local` is set, must
//! also be allowed by the RBAC of the export's workspace to the same user and groups prefixed
//! with `apis.kcp.io:binding:` (what the provider grants its consumers at most). Deep reviews
//! and `system:masters` skip it, as in kcp.

use kcp_apimachinery::rbac::{Attributes, Target, UserInfo};
use kcp_registry::RegistryError;

use super::Authorizer;

/// The prefix of the user and groups the export's workspace authorizes.
pub const PREFIX: &str = "apis.kcp.io:binding:";

/// The reason of a refusal.
pub const NOT_PERMITTED: &str = "access not permitted by maximal permission policy";

impl Authorizer {
    /// Why the maximal permission policy of the export binding `target`'s resource in
    /// `cluster` refuses the request, if it does.
    pub(super) async fn maximal_permission_refuses(
        &self,
        subject: &UserInfo,
        cluster: &str,
        verb: &str,
        target: Target<'_>,
    ) -> Result<Option<String>, RegistryError> {
        let Target::Resource {
            api_group,
            resource,
            ..
        } = target
        else {
            return Ok(None);
        };
        // kcp's own kinds are served as such, whatever binds them (root's tenancy export).
        if kcp_apis::system::resources()
            .iter()
            .any(|r| r.group == api_group && r.name == resource)
        {
            return Ok(None);
        }
        let Some((export_cluster, export)) =
            self.registry.bound_export(cluster, api_group, resource)
        else {
            return Ok(None);
        };
        let exports = kcp_registry::Target {
            cluster: &export_cluster,
            resource: kcp_apis::system::api_exports(),
            namespace: None,
        };
        let export_object = match self.registry.privileged().get(exports, &export).await {
            Ok(found) => found,
            // A deleted export's policy no longer applies.
            Err(RegistryError::NotFound { .. }) => return Ok(None),
            Err(other) => return Err(other),
        };
        if export_object["spec"]["maximalPermissionPolicy"]
            .get("local")
            .is_none()
        {
            return Ok(None);
        }
        let prefixed = UserInfo {
            name: format!("{PREFIX}{}", subject.name),
            groups: subject
                .groups
                .iter()
                .map(|group| format!("{PREFIX}{group}"))
                .collect(),
            extra: subject.extra.clone(),
        };
        let state = self.policies.of(&export_cluster).await?;
        let attributes = Attributes {
            user: &prefixed,
            verb,
            target,
        };
        Ok((!self.grants(&state.policy, &attributes)).then(|| NOT_PERMITTED.to_string()))
    }
}
