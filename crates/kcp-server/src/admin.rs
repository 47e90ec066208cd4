//! The two administrators kcp's admin kubeconfig names, as kcp makes them:
//!
//! - `shard-admin`, in `system:masters`: its token is made once and kept, but only its SHA-256
//!   digest is stored (`<root>/.admin-token-store`); the token itself lives only in the
//!   kubeconfig, from which a later start reads it back (refusing one whose digest differs).
//! - `kcp-admin`, in `system:kcp:admin` (bound to `cluster-admin` in every workspace, so subject
//!   to authorization): a new token at every start.
//!
//! A root directory from before the store (a clear-text `admin-token`) keeps its token as the
//! shard admin's; the clear-text file is removed.

use std::path::Path;

use anyhow::Context;
use kcp_apiserver::authn::{TokenAuthenticator, User, token_digest};
use ring::rand::{SecureRandom, SystemRandom};

/// The file of the shard admin token's digest.
const STORE: &str = ".admin-token-store";
/// Where earlier versions kept the admin token in the clear.
const LEGACY: &str = "admin-token";
/// The user in `system:masters`.
pub const SHARD_ADMIN: &str = "shard-admin";
/// The user in `system:kcp:admin`.
pub const KCP_ADMIN: &str = "kcp-admin";

/// The tokens of one start.
pub struct AdminTokens {
    /// A new token at every start.
    pub kcp_admin: String,
    /// The kept token.
    pub shard_admin: String,
}

impl AdminTokens {
    /// Accepts both tokens in `authn`.
    pub fn register(&self, authn: &mut TokenAuthenticator) {
        authn.add(
            token_digest(&self.kcp_admin),
            User {
                name: KCP_ADMIN.into(),
                groups: vec!["system:kcp:admin".into()],
                ..User::default()
            },
        );
        authn.add(
            token_digest(&self.shard_admin),
            User {
                name: SHARD_ADMIN.into(),
                groups: vec!["system:masters".into()],
                ..User::default()
            },
        );
    }
}

/// The tokens for a server whose root directory is `root` and whose admin kubeconfig is (or
/// will be) `kubeconfig`.
pub fn load_or_create(root: &Path, kubeconfig: &Path) -> anyhow::Result<AdminTokens> {
    let store = root.join(STORE);
    let shard_admin = match std::fs::read(&store) {
        Ok(stored) => {
            let kept = std::fs::read_to_string(kubeconfig)
                .ok()
                .and_then(|text| user_token(&text, SHARD_ADMIN));
            match kept {
                Some(token) if token_digest(&token).as_slice() == stored.as_slice() => token,
                _ => anyhow::bail!(
                    "admin token in file {:?} is not valid anymore. Remove file {:?} and restart kcp",
                    kubeconfig.display().to_string(),
                    store.display().to_string()
                ),
            }
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            let legacy = root.join(LEGACY);
            let token = match std::fs::read_to_string(&legacy) {
                Ok(text) if !text.trim().is_empty() => text.trim().to_string(),
                _ => random_token()?,
            };
            crate::write_private(&store, &token_digest(&token))
                .context("store the admin token's digest")?;
            if legacy.exists() {
                std::fs::remove_file(&legacy).context("remove the clear-text admin token")?;
            }
            token
        }
        Err(error) => {
            return Err(error).with_context(|| format!("read {}", store.display()));
        }
    };
    Ok(AdminTokens {
        kcp_admin: random_token()?,
        shard_admin,
    })
}

/// 32 random bytes in hex.
fn random_token() -> anyhow::Result<String> {
    let mut random = [0u8; 32];
    SystemRandom::new()
        .fill(&mut random)
        .map_err(|_| anyhow::anyhow!("no system randomness"))?;
    Ok(random.iter().map(|b| format!("{b:02x}")).collect())
}

/// The token of `user` in a kubeconfig this server wrote (see [`crate::kubeconfig::render`]).
fn user_token(kubeconfig: &str, user: &str) -> Option<String> {
    let mut lines = kubeconfig.lines().skip_while(|line| {
        line.trim() != format!("- name: {user}") && line.trim() != format!("- name: \"{user}\"")
    });
    lines.next()?;
    for line in lines {
        if line.starts_with("- ") || !line.starts_with(' ') {
            return None;
        }
        if let Some(token) = line.trim().strip_prefix("token:") {
            return Some(token.trim().trim_matches('"').to_string());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kubeconfig(dir: &Path, tokens: &AdminTokens) -> std::path::PathBuf {
        let path = dir.join("admin.kubeconfig");
        let text = crate::kubeconfig::render("https://127.0.0.1:1", "PEM", tokens);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn the_shard_admin_token_is_kept_as_a_digest_and_the_kcp_admin_token_is_new() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("admin.kubeconfig");
        let first = load_or_create(dir.path(), &path).unwrap();
        assert_eq!(first.shard_admin.len(), 64);
        let stored = std::fs::read(dir.path().join(STORE)).unwrap();
        assert_eq!(stored, token_digest(&first.shard_admin));
        kubeconfig(dir.path(), &first);
        let second = load_or_create(dir.path(), &path).unwrap();
        assert_eq!(second.shard_admin, first.shard_admin);
        assert_ne!(second.kcp_admin, first.kcp_admin);
        // No file holds the shard admin token in the clear but the kubeconfig.
        for entry in std::fs::read_dir(dir.path()).unwrap() {
            let entry = entry.unwrap();
            if entry.file_name() != "admin.kubeconfig" {
                let bytes = std::fs::read(entry.path()).unwrap();
                let text = String::from_utf8_lossy(&bytes);
                assert!(
                    !text.contains(&first.shard_admin),
                    "{:?}",
                    entry.file_name()
                );
            }
        }
    }

    #[test]
    fn a_kubeconfig_whose_token_does_not_match_the_store_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("admin.kubeconfig");
        let mut tokens = load_or_create(dir.path(), &path).unwrap();
        tokens.shard_admin = "forged".into();
        kubeconfig(dir.path(), &tokens);
        let error = load_or_create(dir.path(), &path).err().unwrap().to_string();
        assert!(error.contains("is not valid anymore"), "{error}");
        std::fs::remove_file(&path).unwrap();
        assert!(load_or_create(dir.path(), &path).is_err());
    }

    #[test]
    fn a_legacy_clear_text_token_becomes_the_shard_admin_token() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(LEGACY), "old-token\n").unwrap();
        let tokens = load_or_create(dir.path(), &dir.path().join("admin.kubeconfig")).unwrap();
        assert_eq!(tokens.shard_admin, "old-token");
        assert!(!dir.path().join(LEGACY).exists());
    }

    #[test]
    fn tokens_are_read_from_the_named_user_only() {
        let text = "users:\n- name: kcp-admin\n  user:\n    token: \"a\"\n- name: shard-admin\n  user:\n    token: \"b\"\n";
        assert_eq!(user_token(text, "kcp-admin").as_deref(), Some("a"));
        assert_eq!(user_token(text, "shard-admin").as_deref(), Some("b"));
        assert_eq!(user_token(text, "user"), None);
        assert_eq!(user_token("- name: x\n  user: {}\n", "x"), None);
    }
}
