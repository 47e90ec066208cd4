//! RBAC escalation prevention, as Kubernetes' RBAC storage enforces it on users' writes:
//!
//! - a Role or ClusterRole may hold only rules its writer holds where it applies (the Role's
//!   namespace, or cluster-wide), unless the writer has verb `escalate` on it;
//! - a RoleBinding or ClusterRoleBinding may grant only a role whose rules its writer holds
//!   where the binding applies, unless the writer has verb `bind` on that role.
//!
//! Refusals are 403 with Kubernetes' text: `user "alice" (groups=["a" "b"]) is attempting to
//! grant RBAC permissions not currently held:` and the missing rules, one per line. The
//! server's own writes and `system:masters` are not checked.

use kcp_apimachinery::object::str_at;
use kcp_apimachinery::rbac::{Rule, uncovered};
use serde_json::Value;

use crate::error::RegistryError;
use crate::store::{Place, Registry, Requester, Target};

const RBAC: &str = "rbac.authorization.k8s.io";

impl Registry {
    /// Checks a user's write of a role or binding (other objects pass).
    pub(crate) async fn admit_rbac_write(
        &self,
        target: &Target<'_>,
        object: &Value,
    ) -> Result<(), RegistryError> {
        let resource = target.resource;
        let Some(requester) = self.requester() else {
            return Ok(());
        };
        if resource.group != RBAC || requester.groups.iter().any(|g| g == "system:masters") {
            return Ok(());
        }
        let name = str_at(object, &["metadata", "name"]);
        let at = Place {
            cluster: target.cluster,
            namespace: target
                .namespace
                .filter(|_| resource.namespaced)
                .unwrap_or(""),
        };
        let wanted = match &*resource.name {
            "roles" | "clusterroles" => {
                let access = &requester.access;
                if access
                    .allowed(at, "escalate", RBAC, &resource.name, name)
                    .await?
                {
                    return Ok(());
                }
                Rule::all_of(object)
            }
            "rolebindings" | "clusterrolebindings" => {
                let kind = str_at(object, &["roleRef", "kind"]);
                let role = str_at(object, &["roleRef", "name"]);
                let roles = match kind {
                    "Role" => "roles",
                    _ => "clusterroles",
                };
                let access = &requester.access;
                if access.allowed(at, "bind", RBAC, roles, role).await? {
                    return Ok(());
                }
                match access.role_rules(at, kind, role).await? {
                    Some(rules) => rules,
                    None => {
                        return Err(
                            target.forbidden(name, format!("{roles}.{RBAC} {role:?} not found"))
                        );
                    }
                }
            }
            _ => return Ok(()),
        };
        let held = requester.access.rules_held(at).await?;
        let missing = uncovered(&held, &wanted);
        if missing.is_empty() {
            return Ok(());
        }
        Err(target.forbidden(name, not_held(requester, &missing)))
    }
}

/// Kubernetes' text for rules the writer does not hold.
fn not_held(requester: &Requester, missing: &[Rule]) -> String {
    let groups: Vec<String> = requester.groups.iter().map(|g| format!("{g:?}")).collect();
    let rules: Vec<String> = missing.iter().map(Rule::compact).collect();
    format!(
        "user {:?} (groups=[{}]) is attempting to grant RBAC permissions not currently held:\n{}",
        requester.name,
        groups.join(" "),
        rules.join("\n")
    )
}
