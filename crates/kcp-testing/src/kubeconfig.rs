//! Reading the admin kubeconfig a kcp server writes: the tokens of its two users, `kcp-admin`
//! (group `system:kcp:admin`, a new token at every start) and `shard-admin` (`system:masters`).

use std::path::Path;

/// The token of `user` in the admin kubeconfig under the root directory `root`.
pub fn admin_token(root: &Path, user: &str) -> String {
    let path = root.join("admin.kubeconfig");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("read {}: {error}", path.display()));
    token(&text, user).unwrap_or_else(|| panic!("{} has no token for {user}", path.display()))
}

/// The token of `user` in a kubeconfig's text (its `users` entries, as kcp writes them).
pub fn token(kubeconfig: &str, user: &str) -> Option<String> {
    let mut lines = kubeconfig.lines().skip_while(|line| {
        line.trim()
            .trim_start_matches("- name:")
            .trim()
            .trim_matches('"')
            != user
            || !line.trim_start().starts_with("- name:")
    });
    lines.next()?;
    lines
        .take_while(|line| line.starts_with(' '))
        .find_map(|line| line.trim().strip_prefix("token:"))
        .map(|token| token.trim().trim_matches('"').to_string())
}

#[cfg(test)]
mod tests {
    #[test]
    fn tokens_are_read_per_user() {
        let text = "contexts:\n- name: \"root\"\n  context:\n    user: kcp-admin\nusers:\n- name: kcp-admin\n  user:\n    token: \"a\"\n- name: shard-admin\n  user:\n    token: \"b\"\n";
        assert_eq!(super::token(text, "kcp-admin").as_deref(), Some("a"));
        assert_eq!(super::token(text, "shard-admin").as_deref(), Some("b"));
        assert_eq!(super::token(text, "root"), None);
    }
}
