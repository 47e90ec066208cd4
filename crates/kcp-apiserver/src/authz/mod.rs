//! Authorization, per logical cluster, in the order kcp chains it:
//!
//! 1. `system:masters` may do anything anywhere.
//! 2. Wildcard requests (`/clusters/*`) are for those identities alone, and for those an
//!    authorization webhook allows: no workspace's RBAC, nor the bootstrap bindings that hold in
//!    every workspace, reach across workspaces (kcp's chain has no opinion on a request without
//!    one logical cluster, so `kcp-admin` is refused too).
//! 3. Required groups: a LogicalCluster annotated `authorization.kcp.io/required-groups` admits
//!    only users in one of the group sets it names (service accounts, kcp's admins and its
//!    workspace bootstrapper always).
//! 4. Workspace content: entering a logical cluster needs verb `access` on path `/` there,
//!    granted by its own RBAC (root grants it to `system:authenticated`) or a bootstrap role
//!    bound in it; without it the request is denied whatever else it holds, so nothing reveals
//!    what the workspace contains. Its own service accounts enter without it.
//! 5. RBAC: the logical cluster's own Roles, ClusterRoles and bindings ([`policies`]), its
//!    bindings able to name the bootstrap ClusterRoles ([`bootstrap`]) without a copy, and the
//!    bootstrap bindings that hold everywhere (discovery for every authenticated user,
//!    `cluster-admin` for `system:kcp:admin`).
//! 6. An authorization webhook, if configured ([`webhook`]), about what the above did not
//!    allow (required groups excepted: their denial is final).
//!
//! Impersonation ([`impersonation`]) is authorized by the same chain (verb `impersonate`) before
//! the request is authorized as the impersonated user.
//!
//! A denial is answered with kube-apiserver's 403 `Status` and its words (see
//! [`kcp_apimachinery::rbac::forbidden_message`]), followed by kcp's reason, which kcp makes
//! `access denied` whichever step refused (it anonymizes its authorizers' reasons); access
//! reviews report the same reason.

mod bootstrap;
pub mod impersonation;
mod maximal_permission;
mod policies;
pub mod reviews;
pub mod webhook;

use std::sync::Arc;

use futures::future::BoxFuture;
use kcp_apimachinery::rbac::{Attributes, Policy, Rule, Target, UserInfo};
use kcp_registry::{ALL_CLUSTERS, AccessCheck, Place, Registry, RegistryError, Requester};

use crate::authn::User;
use crate::request_info::RequestInfo;

/// The group whose members every authorizer lets through.
pub const MASTERS: &str = "system:masters";

/// What the chain decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow,
    Deny(Denial),
}

/// Why a request is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// The message of the 403: `User "alice" cannot ...: <reason>`.
    pub message: String,
    /// The authorizer's reason alone (`access denied`), as access reviews report it.
    pub reason: String,
}

/// The authorization chain of one server.
#[derive(Clone)]
pub struct Authorizer {
    registry: Registry,
    policies: policies::Policies,
    bootstrap: Arc<Policy>,
    /// Asked last, about what RBAC does not allow (`--authorization-webhook-config-file`).
    webhook: Option<Arc<webhook::AuthorizationWebhook>>,
}

impl Authorizer {
    pub fn new(registry: Registry) -> Authorizer {
        Authorizer {
            registry: registry.clone(),
            policies: policies::Policies::new(registry, bootstrap::cluster_roles()),
            bootstrap: Arc::new(bootstrap::policy()),
            webhook: None,
        }
    }

    /// The same chain asking `webhook` about what RBAC does not allow.
    pub fn with_webhook(mut self, webhook: webhook::AuthorizationWebhook) -> Authorizer {
        self.webhook = Some(Arc::new(webhook));
        self
    }

    /// `user` as the registry's admission sees them, able to ask this authorizer.
    pub fn requester(&self, user: &User) -> Requester {
        Requester {
            name: user.name.clone(),
            uid: user.uid.clone(),
            groups: user.groups.clone(),
            extra: user.extra.clone(),
            access: Arc::new(UserAccess {
                authorizer: self.clone(),
                subject: user.info(),
            }),
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
        let subject = user.info();
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
        self.decide(&subject, cluster.unwrap_or("root"), verb, target)
            .await
    }

    /// Decides whether `subject` may do `verb` on `target` in the logical cluster `cluster`
    /// (`*` for every cluster), as for a request (access reviews ask this too).
    pub async fn decide(
        &self,
        subject: &UserInfo,
        cluster: &str,
        verb: &str,
        target: Target<'_>,
    ) -> Result<Decision, RegistryError> {
        self.decide_as(subject, cluster, verb, target, Depth::Request)
            .await
    }

    /// [`Authorizer::decide_as`], then, for a request's Allow on a bound resource, the
    /// maximal permission policy of its export ([`maximal_permission`]).
    async fn decide_as(
        &self,
        subject: &UserInfo,
        cluster: &str,
        verb: &str,
        target: Target<'_>,
        depth: Depth,
    ) -> Result<Decision, RegistryError> {
        let decision = self
            .decide_chain(subject, cluster, verb, target, depth)
            .await?;
        if decision != Decision::Allow
            || depth == Depth::Deep
            || cluster == ALL_CLUSTERS
            || subject.groups.iter().any(|group| group == MASTERS)
        {
            return Ok(decision);
        }
        match self
            .maximal_permission_refuses(subject, cluster, verb, target)
            .await?
        {
            None => Ok(decision),
            Some(reason) => {
                let attributes = Attributes {
                    user: subject,
                    verb,
                    target,
                };
                Ok(Decision::Deny(Denial {
                    message: format!(
                        "{}: {reason}",
                        kcp_apimachinery::rbac::forbidden_message(&attributes)
                    ),
                    reason,
                }))
            }
        }
    }

    /// [`Authorizer::decide`]'s chain, or, at [`Depth::Deep`], without the workspace access
    /// step (kcp's "deep" SubjectAccessReviews: what RBAC grants in a cluster whoever may enter
    /// it, as admission asks whether a user may bind an export of a workspace they cannot
    /// enter).
    async fn decide_chain(
        &self,
        subject: &UserInfo,
        cluster: &str,
        verb: &str,
        target: Target<'_>,
        depth: Depth,
    ) -> Result<Decision, RegistryError> {
        if subject.groups.iter().any(|group| group == MASTERS) {
            return Ok(Decision::Allow);
        }
        let attributes = Attributes {
            user: subject,
            verb,
            target,
        };
        let deny = |reason: String| {
            Decision::Deny(Denial {
                message: format!(
                    "{}: {reason}",
                    kcp_apimachinery::rbac::forbidden_message(&attributes)
                ),
                reason,
            })
        };
        // What the bootstrap bindings that hold everywhere allow needs no cluster's state,
        // when the user is one every cluster admits (kcp's admins).
        let everywhere = || {
            self.bootstrap.allows(&attributes, None)
                && self.bootstrap.allows(&access(subject), None)
        };
        if cluster == ALL_CLUSTERS {
            return self.ask_webhook(subject, cluster, verb, target, deny).await;
        }
        let exempt = exempt_from_required_groups(subject);
        if exempt && everywhere() {
            return Ok(Decision::Allow);
        }
        let state = self.policies.of(cluster).await?;
        if !exempt && !state.admits_groups(&subject.groups) {
            // kcp words every denial of its chain the same way (it anonymizes the reasons).
            let required = state.required_groups.as_deref().unwrap_or_default();
            tracing::debug!(user = %subject.name, cluster, required, "not a member of required groups");
            return Ok(deny("access denied".into()));
        }
        let enters = depth == Depth::Deep
            || local_service_account(subject, cluster)
            || self.may_enter(&state.policy, subject);
        if enters && self.grants(&state.policy, &attributes) {
            return Ok(Decision::Allow);
        }
        self.ask_webhook(subject, cluster, verb, target, deny).await
    }

    /// The last step of the chain: the authorization webhook, if any, about what the steps
    /// before did not allow; `deny` words a refusal.
    async fn ask_webhook(
        &self,
        subject: &UserInfo,
        cluster: &str,
        verb: &str,
        target: Target<'_>,
        deny: impl Fn(String) -> Decision,
    ) -> Result<Decision, RegistryError> {
        let Some(webhook) = &self.webhook else {
            return Ok(deny("access denied".into()));
        };
        Ok(match webhook.decide(subject, cluster, verb, target).await {
            webhook::Answer::Allowed => Decision::Allow,
            webhook::Answer::Refused(reason) if reason.is_empty() => deny("access denied".into()),
            webhook::Answer::Refused(reason) => deny(reason),
        })
    }

    /// Whether `user` may have a home workspace made on their first request for `~`, as kcp's
    /// home-workspace handler decides it: the chain asked about `create` of workspace `~` in
    /// root (root's policy grants it to every authenticated user), and never for an anonymous
    /// identity, whether it sent no credentials or is a service account outside its own
    /// workspace (which is anonymous there). A refusal is kcp's 403 with its reason
    /// `workspace access not permitted`.
    pub async fn may_have_home(&self, user: &User) -> Result<Option<Denial>, RegistryError> {
        const NOT_PERMITTED: &str = "workspace access not permitted";
        let subject = user.info();
        let target = Target::Resource {
            api_group: "tenancy.kcp.io",
            resource: "workspaces",
            subresource: "",
            name: "~",
            namespace: "",
        };
        let anonymous = subject.name == crate::authn::ANONYMOUS
            || subject
                .groups
                .iter()
                .any(|group| group == crate::authn::UNAUTHENTICATED);
        if !anonymous && self.decide(&subject, "root", "create", target).await? == Decision::Allow {
            return Ok(None);
        }
        let attributes = Attributes {
            user: &subject,
            verb: "create",
            target,
        };
        Ok(Some(Denial {
            message: format!(
                "{}: {NOT_PERMITTED}",
                kcp_apimachinery::rbac::forbidden_message(&attributes)
            ),
            reason: NOT_PERMITTED.into(),
        }))
    }

    /// Whether a logical cluster's `policy`, or the bootstrap bindings that hold everywhere,
    /// allow the request.
    fn grants(&self, policy: &Policy, attributes: &Attributes<'_>) -> bool {
        policy.allows(attributes, Some(&self.bootstrap)) || self.bootstrap.allows(attributes, None)
    }

    /// Whether `subject` may enter the logical cluster of `policy` (verb `access` on `/`).
    fn may_enter(&self, policy: &Policy, subject: &UserInfo) -> bool {
        self.grants(policy, &access(subject))
    }

    /// Every rule `subject` holds in `namespace` of `cluster` (cluster-wide ones only when it
    /// is empty), for rules reviews; none without access to the cluster.
    pub async fn rules_for(
        &self,
        subject: &UserInfo,
        cluster: &str,
        namespace: &str,
    ) -> Result<Vec<Rule>, RegistryError> {
        if subject.groups.iter().any(|group| group == MASTERS) {
            return Ok(vec![
                Rule {
                    verbs: vec!["*".into()],
                    api_groups: vec!["*".into()],
                    resources: vec!["*".into()],
                    ..Rule::default()
                },
                Rule {
                    verbs: vec!["*".into()],
                    non_resource_urls: vec!["*".into()],
                    ..Rule::default()
                },
            ]);
        }
        if cluster == ALL_CLUSTERS {
            return Ok(Vec::new());
        }
        let state = self.policies.of(cluster).await?;
        let admitted = exempt_from_required_groups(subject) || state.admits_groups(&subject.groups);
        let enters =
            local_service_account(subject, cluster) || self.may_enter(&state.policy, subject);
        if !admitted || !enters {
            return Ok(Vec::new());
        }
        let mut rules: Vec<Rule> = Vec::new();
        let granted = state
            .policy
            .rules_for(subject, namespace, Some(&self.bootstrap))
            .chain(self.bootstrap.rules_for(subject, namespace, None));
        for rule in granted {
            if !rules.contains(rule) {
                rules.push(rule.clone());
            }
        }
        Ok(rules)
    }
}

/// Entering a logical cluster: verb `access` on path `/`.
fn access(subject: &UserInfo) -> Attributes<'_> {
    Attributes {
        user: subject,
        verb: "access",
        target: Target::NonResource { path: "/" },
    }
}

/// Whether `subject` is a service account of the logical cluster `cluster`, which enters it
/// without verb `access`, as kcp lets them.
fn local_service_account(subject: &UserInfo, cluster: &str) -> bool {
    subject.name.starts_with("system:serviceaccount:")
        && subject
            .extra
            .get(kcp_registry::serviceaccounts::CLUSTER_NAME_EXTRA)
            .is_some_and(|names| names.iter().any(|name| name == cluster))
}

/// Whether required groups do not apply to `subject`, as kcp exempts them: service accounts,
/// logical cluster admins, kcp's admins and its workspace bootstrapper.
fn exempt_from_required_groups(subject: &UserInfo) -> bool {
    subject.name.starts_with("system:serviceaccount:")
        || subject.groups.iter().any(|group| {
            matches!(
                group.as_str(),
                "system:kcp:admin"
                    | "system:kcp:tenancy:workspace-bootstrapper"
                    | "system:kcp:logical-cluster-admin"
                    | "system:kcp:external-logical-cluster-admin"
            )
        })
}

/// Which steps of the chain a decision takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Depth {
    /// All of them, as for a request.
    Request,
    /// All but the workspace access check.
    Deep,
}

/// The authorizer answering admission's questions about one user.
struct UserAccess {
    authorizer: Authorizer,
    subject: UserInfo,
}

impl UserAccess {
    /// Whether the user may do `verb` on the object `name` of `resource` in `group`, at `at`,
    /// through the chain's steps `depth` takes.
    async fn ask(
        &self,
        at: Place<'_>,
        verb: &str,
        group: &str,
        resource: &str,
        name: &str,
        depth: Depth,
    ) -> Result<bool, RegistryError> {
        let target = Target::Resource {
            api_group: group,
            resource,
            subresource: "",
            name,
            namespace: at.namespace,
        };
        let decision = self
            .authorizer
            .decide_as(&self.subject, at.cluster, verb, target, depth)
            .await?;
        Ok(decision == Decision::Allow)
    }
}

impl AccessCheck for UserAccess {
    fn allowed<'a>(
        &'a self,
        at: Place<'a>,
        verb: &'a str,
        group: &'a str,
        resource: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<bool, RegistryError>> {
        Box::pin(self.ask(at, verb, group, resource, name, Depth::Request))
    }

    fn allowed_deep<'a>(
        &'a self,
        at: Place<'a>,
        verb: &'a str,
        group: &'a str,
        resource: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<bool, RegistryError>> {
        Box::pin(self.ask(at, verb, group, resource, name, Depth::Deep))
    }

    fn rules_held<'a>(&'a self, at: Place<'a>) -> BoxFuture<'a, Result<Vec<Rule>, RegistryError>> {
        Box::pin(async move {
            self.authorizer
                .rules_for(&self.subject, at.cluster, at.namespace)
                .await
        })
    }

    fn role_rules<'a>(
        &'a self,
        at: Place<'a>,
        kind: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Vec<Rule>>, RegistryError>> {
        Box::pin(async move {
            let state = self.authorizer.policies.of(at.cluster).await?;
            let rules = match kind {
                "Role" => state.policy.role(at.namespace, name),
                _ => state
                    .policy
                    .cluster_role(name)
                    .or_else(|| self.authorizer.bootstrap.cluster_role(name)),
            };
            Ok(rules.map(<[Rule]>::to_vec))
        })
    }
}
