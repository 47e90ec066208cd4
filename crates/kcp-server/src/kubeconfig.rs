//! `<root>/admin.kubeconfig`, as kcp writes it: clusters `root` (current context), `base` and
//! `system:admin`; contexts `root` and `base` as `kcp-admin`, `system:admin` and `shard-base`
//! (the `base` cluster) as `shard-admin` ([`crate::admin`]). Rewritten at every start, so it
//! always names the address the server really listens on and the new `kcp-admin` token.

use std::net::{IpAddr, SocketAddr};
use std::path::Path;

use base64::Engine;

use crate::admin::{AdminTokens, KCP_ADMIN, SHARD_ADMIN};

/// `https://host:port` for clients of a server listening on `address`; an unspecified address
/// is reached on loopback.
pub fn server_base(address: SocketAddr) -> String {
    let host = match address.ip() {
        IpAddr::V4(v4) if v4.is_unspecified() => "127.0.0.1".to_string(),
        IpAddr::V6(v6) if v6.is_unspecified() => "[::1]".to_string(),
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => format!("[{v6}]"),
    };
    format!("https://{host}:{}", address.port())
}

/// The kubeconfig text.
pub fn render(base: &str, ca_pem: &str, tokens: &AdminTokens) -> String {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let clusters = [
        ("root", format!("{base}/clusters/root")),
        ("base", base.to_string()),
        ("system:admin", format!("{base}/clusters/system:admin")),
    ];
    let mut out = String::from("apiVersion: v1\nkind: Config\nclusters:\n");
    for (name, server) in &clusters {
        out.push_str(&format!(
            "- name: \"{name}\"\n  cluster:\n    certificate-authority-data: {ca}\n    server: \"{server}\"\n"
        ));
    }
    let contexts = [
        ("root", "root", KCP_ADMIN),
        ("base", "base", KCP_ADMIN),
        ("system:admin", "system:admin", SHARD_ADMIN),
        ("shard-base", "base", SHARD_ADMIN),
    ];
    out.push_str("contexts:\n");
    for (name, cluster, user) in contexts {
        out.push_str(&format!(
            "- name: \"{name}\"\n  context:\n    cluster: \"{cluster}\"\n    user: {user}\n"
        ));
    }
    out.push_str("current-context: root\nusers:\n");
    for (user, token) in [
        (KCP_ADMIN, &tokens.kcp_admin),
        (SHARD_ADMIN, &tokens.shard_admin),
    ] {
        out.push_str(&format!(
            "- name: {user}\n  user:\n    token: \"{token}\"\n"
        ));
    }
    out
}

/// Writes the kubeconfig, readable by the owner only.
pub fn write(path: &Path, base: &str, ca_pem: &str, tokens: &AdminTokens) -> anyhow::Result<()> {
    crate::write_private(path, render(base, ca_pem, tokens).as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unspecified_addresses_are_reached_on_loopback() {
        assert_eq!(
            server_base("0.0.0.0:6443".parse().unwrap()),
            "https://127.0.0.1:6443"
        );
        assert_eq!(server_base("[::]:1".parse().unwrap()), "https://[::1]:1");
        assert_eq!(
            server_base("10.0.0.1:6443".parse().unwrap()),
            "https://10.0.0.1:6443"
        );
    }

    #[test]
    fn contexts_point_at_root_base_and_system_admin() {
        let tokens = AdminTokens {
            kcp_admin: "volatile".into(),
            shard_admin: "kept".into(),
        };
        let text = render("https://127.0.0.1:6443", "PEM", &tokens);
        assert!(text.contains("current-context: root\n"));
        assert!(text.contains("server: \"https://127.0.0.1:6443/clusters/root\""));
        assert!(text.contains("server: \"https://127.0.0.1:6443\"\n"));
        assert!(text.contains("server: \"https://127.0.0.1:6443/clusters/system:admin\""));
        assert!(text.contains("- name: kcp-admin\n  user:\n    token: \"volatile\"\n"));
        assert!(text.contains("- name: shard-admin\n  user:\n    token: \"kept\"\n"));
        assert_eq!(text.matches("user: kcp-admin").count(), 2);
        assert!(text.contains(
            "- name: \"shard-base\"\n  context:\n    cluster: \"base\"\n    user: shard-admin\n"
        ));
        assert!(text.contains(
            "- name: \"system:admin\"\n  context:\n    cluster: \"system:admin\"\n    user: shard-admin\n"
        ));
    }
}
