//! Bearer-token authentication. Tokens are compared by SHA-256 digest, so the server keeps no
//! token in memory or on disk in the clear.
//!
//! The `Authorization` header is read exactly as kube-apiserver's bearer-token authenticator
//! reads it: surrounding whitespace is ignored, the value is split at single spaces, the first
//! part must be `bearer` in any case, and the token is the second part, which must not be
//! empty. So `Bearer  tok` (two spaces) carries the empty token and is refused, while
//! `Bearer tok extra` carries `tok`.
//!
//! A token that is not one of the static tokens may be a service account token, which the
//! registry verifies and looks up ([`kcp_registry::serviceaccounts`]), or one a token webhook
//! accepts ([`webhook`]).
//!
//! Owns: parsing the header and looking the token up. Must not know where tokens come from
//! (the composition root adds them) or what a user may do.

pub mod webhook;

use std::collections::HashMap;
use std::sync::Arc;

use kcp_registry::{Registry, RegistryError};
use ring::digest::{SHA256, digest};

/// Who made a request, as Kubernetes' `user.Info`: a name, a uid (empty when the
/// authenticator knows none), groups and extra values.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: std::collections::BTreeMap<String, Vec<String>>,
}

impl User {
    /// The user as authorization sees them.
    pub fn info(&self) -> kcp_apimachinery::rbac::UserInfo {
        kcp_apimachinery::rbac::UserInfo {
            name: self.name.clone(),
            groups: self.groups.clone(),
            extra: self.extra.clone(),
        }
    }
}

/// The user a verified client certificate names, as kube-apiserver's x509 authenticator reads
/// it: the subject's common name is the user, its organizations are the groups. Set on each
/// request of the connection by the accept loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientCertificateUser(pub User);

/// The user of a client certificate (DER) the TLS handshake verified, if its subject has a
/// common name.
pub fn user_of_certificate(der: &[u8]) -> Option<User> {
    let (_, certificate) = x509_parser::parse_x509_certificate(der).ok()?;
    let subject = certificate.subject();
    let name = subject
        .iter_common_name()
        .next()?
        .as_str()
        .ok()?
        .to_string();
    if name.is_empty() {
        return None;
    }
    let mut groups: Vec<String> = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok().map(str::to_string))
        .collect();
    groups.push(AUTHENTICATED.to_string());
    Some(User {
        name,
        groups,
        ..User::default()
    })
}

/// The logical cluster a service account user authenticated in (their token names it).
pub fn service_account_cluster(user: &User) -> Option<String> {
    if !user.name.starts_with("system:serviceaccount:") {
        return None;
    }
    let names = user
        .extra
        .get(kcp_registry::serviceaccounts::CLUSTER_NAME_EXTRA)?;
    names.first().cloned()
}

/// The group of every authenticated user.
pub const AUTHENTICATED: &str = "system:authenticated";

/// The tokens the server accepts, by digest.
#[derive(Debug, Clone, Default)]
pub struct TokenAuthenticator {
    users: HashMap<[u8; 32], User>,
    /// Who a request without credentials is, when anonymous requests are enabled.
    anonymous: Option<User>,
    /// Asked about tokens nothing else accepts (`--authentication-token-webhook-config-file`).
    webhook: Option<Arc<webhook::TokenWebhook>>,
}

/// The user of requests without credentials (`--anonymous-auth`).
pub const ANONYMOUS: &str = "system:anonymous";
/// The group of requests without credentials.
pub const UNAUTHENTICATED: &str = "system:unauthenticated";

/// The SHA-256 digest of a token.
pub fn token_digest(token: &str) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(digest(&SHA256, token.as_bytes()).as_ref());
    out
}

/// The token an `Authorization` header value carries, if it is a bearer token.
pub fn bearer_token(authorization: &str) -> Option<&str> {
    let value = authorization.trim();
    if value.is_empty() {
        return None;
    }
    let mut parts = value.split(' ');
    let scheme = parts.next()?;
    let token = parts.next()?;
    if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() {
        return None;
    }
    Some(token)
}

impl TokenAuthenticator {
    /// Accepts the token whose digest is `digest` as `user`, who is also in
    /// `system:authenticated`, as every authenticated user is in Kubernetes.
    pub fn add(&mut self, digest: [u8; 32], mut user: User) {
        if !user.groups.iter().any(|group| group == AUTHENTICATED) {
            user.groups.push(AUTHENTICATED.to_string());
        }
        self.users.insert(digest, user);
    }

    /// Asks `webhook` about tokens neither the static tokens nor service accounts accept.
    pub fn with_webhook(mut self, webhook: webhook::TokenWebhook) -> Self {
        self.webhook = Some(Arc::new(webhook));
        self
    }

    /// Treats requests without credentials as `system:anonymous` in `system:unauthenticated`
    /// (kube-apiserver's `--anonymous-auth`, on by default there), for authorization to decide.
    pub fn with_anonymous(mut self, enabled: bool) -> Self {
        self.anonymous = enabled.then(|| User {
            name: ANONYMOUS.into(),
            groups: vec![UNAUTHENTICATED.into()],
            ..User::default()
        });
        self
    }

    /// The user an `Authorization` header value names, if it carries an accepted bearer token.
    pub fn authenticate(&self, authorization: Option<&str>) -> Option<&User> {
        let token = bearer_token(authorization?)?;
        self.users.get(&token_digest(token))
    }

    /// Who makes a request: the user of its bearer token; without credentials (no header, or
    /// one that carries no bearer token), the anonymous user if enabled. `None` is a 401: a
    /// token that is not accepted, or no credentials with anonymous requests off.
    pub async fn identify(
        &self,
        registry: &Registry,
        authorization: Option<&str>,
    ) -> Result<Option<User>, RegistryError> {
        match authorization.and_then(bearer_token) {
            Some(token) => self.user_of_token(registry, token).await,
            None => Ok(self.anonymous.clone()),
        }
    }

    /// The user `token` names: a static token's, else a service account's (from a token the
    /// registry accepts). `None`: no user.
    pub async fn user_of_token(
        &self,
        registry: &Registry,
        token: &str,
    ) -> Result<Option<User>, RegistryError> {
        if let Some(user) = self.users.get(&token_digest(token)) {
            return Ok(Some(user.clone()));
        }
        if let Some(account) = registry.authenticate_service_account(token).await? {
            let mut groups = account.groups;
            groups.push(AUTHENTICATED.to_string());
            return Ok(Some(User {
                name: account.name,
                uid: account.uid,
                groups,
                extra: account.extra,
            }));
        }
        Ok(match &self.webhook {
            Some(webhook) => webhook.authenticate(token).await,
            None => None,
        })
    }

    /// `user` as the logical cluster `cluster` sees them: a user scoped to other clusters (a
    /// service account, whose token names its own) is, as kcp has it, a foreign identity
    /// there: `system:anonymous` in `system:authenticated` and `system:cluster:<origin>` for
    /// each cluster they are scoped to.
    pub fn as_seen_in(user: &User, cluster: &str) -> Option<User> {
        let scopes = user
            .extra
            .get(kcp_registry::serviceaccounts::SCOPES_EXTRA)?;
        // Each value lists clusters (comma-separated); a user is scoped to the intersection.
        let mut allowed: Option<Vec<&str>> = None;
        for value in scopes {
            let listed: Vec<&str> = value
                .split(',')
                .filter_map(|scope| scope.trim().strip_prefix("cluster:"))
                .collect();
            allowed = Some(match allowed {
                None => listed,
                Some(before) => before.into_iter().filter(|c| listed.contains(c)).collect(),
            });
        }
        let allowed = allowed.unwrap_or_default();
        if allowed.contains(&cluster) {
            return None;
        }
        let mut groups = vec![AUTHENTICATED.to_string()];
        groups.extend(
            allowed
                .iter()
                .map(|origin| format!("system:cluster:{origin}")),
        );
        Some(User {
            name: ANONYMOUS.into(),
            groups,
            ..User::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_known_bearer_tokens_authenticate() {
        let mut authn = TokenAuthenticator::default();
        let admin = User {
            name: "kcp-admin".into(),
            groups: vec!["system:masters".into()],
            ..Default::default()
        };
        authn.add(token_digest("s3cret"), admin.clone());
        let admin = User {
            groups: vec!["system:masters".into(), AUTHENTICATED.into()],
            ..admin
        };
        assert_eq!(authn.authenticate(Some("Bearer s3cret")), Some(&admin));
        assert_eq!(authn.authenticate(Some("bearer s3cret")), Some(&admin));
        assert_eq!(authn.authenticate(Some("Bearer wrong")), None);
        assert_eq!(authn.authenticate(Some("Basic s3cret")), None);
        assert_eq!(authn.authenticate(Some("Bearer ")), None);
        assert_eq!(authn.authenticate(None), None);
    }

    #[tokio::test]
    async fn requests_without_credentials_are_anonymous_when_enabled() {
        let registry = Registry::new(std::sync::Arc::new(kcp_storage::MemoryStorage::new()));
        let mut authn = TokenAuthenticator::default();
        authn.add(
            token_digest("s3cret"),
            User {
                name: "alice".into(),
                ..Default::default()
            },
        );
        let name = |header: Option<&'static str>| {
            let authn = authn.clone();
            let registry = registry.clone();
            async move {
                let user = authn.identify(&registry, header).await.unwrap();
                user.map(|user| user.name)
            }
        };
        // Off (the default here): no credentials, or a bad token, is a 401.
        assert_eq!(name(None).await, None);
        assert_eq!(name(Some("Bearer wrong")).await, None);
        let authn = authn.clone().with_anonymous(true);
        let anonymous = authn.identify(&registry, None).await.unwrap().unwrap();
        assert_eq!(anonymous.name, ANONYMOUS);
        assert_eq!(anonymous.groups, [UNAUTHENTICATED]);
        let identify = |header| authn.identify(&registry, Some(header));
        // A header that carries no bearer token is no credential either.
        let basic = identify("Basic abc").await.unwrap().unwrap();
        assert_eq!(basic.name, ANONYMOUS);
        // A token that is not accepted stays a 401; an accepted one is its user.
        assert_eq!(identify("Bearer wrong").await.unwrap(), None);
        let alice = identify("Bearer s3cret").await.unwrap().unwrap();
        assert_eq!(alice.name, "alice");
    }

    #[test]
    fn scoped_users_are_foreign_identities_elsewhere() {
        let mut user = User {
            name: "system:serviceaccount:default:robot".into(),
            groups: vec!["system:serviceaccounts".into(), AUTHENTICATED.into()],
            ..User::default()
        };
        assert_eq!(TokenAuthenticator::as_seen_in(&user, "c1"), None);
        user.extra.insert(
            kcp_registry::serviceaccounts::SCOPES_EXTRA.into(),
            vec!["cluster:c1,cluster:c2".into()],
        );
        assert_eq!(TokenAuthenticator::as_seen_in(&user, "c1"), None);
        assert_eq!(TokenAuthenticator::as_seen_in(&user, "c2"), None);
        let foreign = TokenAuthenticator::as_seen_in(&user, "c3").unwrap();
        assert_eq!(foreign.name, ANONYMOUS);
        assert_eq!(
            foreign.groups,
            [AUTHENTICATED, "system:cluster:c1", "system:cluster:c2"]
        );
        // Several values: the user is scoped to their intersection.
        user.extra.insert(
            kcp_registry::serviceaccounts::SCOPES_EXTRA.into(),
            vec!["cluster:c1,cluster:c2".into(), "cluster:c2".into()],
        );
        assert!(TokenAuthenticator::as_seen_in(&user, "c1").is_some());
        assert_eq!(TokenAuthenticator::as_seen_in(&user, "c2"), None);
    }

    #[test]
    fn the_header_is_split_as_kube_apiserver_splits_it() {
        let accepted = [
            ("Bearer tok", "tok"),
            ("bearer tok", "tok"),
            ("BEARER tok", "tok"),
            ("BeArEr tok", "tok"),
            // Whitespace around the whole value is ignored.
            ("Bearer tok ", "tok"),
            ("Bearer tok   ", "tok"),
            ("  Bearer tok", "tok"),
            ("\tBearer tok\t", "tok"),
            // Whatever follows the token after a space is ignored.
            ("Bearer tok a", "tok"),
            ("Bearer tok a b c", "tok"),
            ("Bearer tok   a", "tok"),
        ];
        for (header, token) in accepted {
            assert_eq!(bearer_token(header), Some(token), "{header:?}");
        }
        let refused = [
            "",
            "   ",
            "Bearer",
            "Bearer ",
            "Bearer   ",
            // A second space makes the token empty.
            "Bearer  tok",
            "Bearer   tok  ",
            // Only a single space separates the scheme.
            "Bearer\ttok",
            "Bearer: tok",
            "bear tok",
            "Basic tok",
            "Bearertok",
        ];
        for header in refused {
            assert_eq!(bearer_token(header), None, "{header:?}");
        }
    }

    #[test]
    fn extra_spaces_before_a_valid_token_do_not_authenticate() {
        let mut authn = TokenAuthenticator::default();
        authn.add(
            token_digest("s3cret"),
            User {
                name: "u".into(),
                groups: vec![],
                ..Default::default()
            },
        );
        assert!(authn.authenticate(Some("Bearer s3cret  ")).is_some());
        assert_eq!(authn.authenticate(Some("Bearer   s3cret  ")), None);
        assert_eq!(authn.authenticate(Some("Bearer  s3cret")), None);
    }
}
