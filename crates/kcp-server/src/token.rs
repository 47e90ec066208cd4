//! The admin bearer token: made once, kept in `<root>/admin-token` (owner-only, like the
//! kubeconfig that carries it), reused by every later start.

use std::path::Path;

use anyhow::Context;
use ring::rand::{SecureRandom, SystemRandom};

const FILE: &str = "admin-token";

pub fn load_or_create(root: &Path) -> anyhow::Result<String> {
    let path = root.join(FILE);
    if let Ok(existing) = std::fs::read_to_string(&path) {
        let token = existing.trim().to_string();
        if !token.is_empty() {
            return Ok(token);
        }
    }
    let mut random = [0u8; 32];
    SystemRandom::new()
        .fill(&mut random)
        .map_err(|_| anyhow::anyhow!("no system randomness"))?;
    let token: String = random.iter().map(|b| format!("{b:02x}")).collect();
    crate::write_private(&path, token.as_bytes()).context("store the admin token")?;
    Ok(token)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_token_is_random_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let first = super::load_or_create(dir.path()).unwrap();
        assert_eq!(first.len(), 64);
        assert_eq!(super::load_or_create(dir.path()).unwrap(), first);
        let other = tempfile::tempdir().unwrap();
        assert_ne!(super::load_or_create(other.path()).unwrap(), first);
    }
}
