//! Bearer-token authentication. Tokens are compared by SHA-256 digest, so the server keeps no
//! token in memory or on disk in the clear.

use std::collections::HashMap;

use ring::digest::{SHA256, digest};

/// Who made a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub groups: Vec<String>,
}

/// The tokens the server accepts, by digest.
#[derive(Debug, Clone, Default)]
pub struct TokenAuthenticator {
    users: HashMap<[u8; 32], User>,
}

/// The SHA-256 digest of a token.
pub fn token_digest(token: &str) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(digest(&SHA256, token.as_bytes()).as_ref());
    out
}

impl TokenAuthenticator {
    /// Accepts the token whose digest is `digest` as `user`.
    pub fn add(&mut self, digest: [u8; 32], user: User) {
        self.users.insert(digest, user);
    }

    /// The user an `Authorization` header value names, if it carries an accepted bearer token.
    pub fn authenticate(&self, authorization: Option<&str>) -> Option<&User> {
        let value = authorization?;
        let (scheme, token) = value.split_once(' ')?;
        if !scheme.eq_ignore_ascii_case("bearer") {
            return None;
        }
        let token = token.trim();
        if token.is_empty() {
            return None;
        }
        self.users.get(&token_digest(token))
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
        };
        authn.add(token_digest("s3cret"), admin.clone());
        assert_eq!(authn.authenticate(Some("Bearer s3cret")), Some(&admin));
        assert_eq!(authn.authenticate(Some("bearer s3cret")), Some(&admin));
        assert_eq!(authn.authenticate(Some("Bearer wrong")), None);
        assert_eq!(authn.authenticate(Some("Basic s3cret")), None);
        assert_eq!(authn.authenticate(Some("Bearer ")), None);
        assert_eq!(authn.authenticate(None), None);
    }
}
