//! Discovery documents byte for byte as kube-apiserver writes them for the same resources
//! (`tests/fixtures/kube-apiserver-discovery`, recorded from kube-apiserver 1.37): field
//! order, resource and group order, storage version hashes, response kinds. kcp's own groups
//! (`*.kcp.io`, and the physical clusters' `cluster.example.dev`) come after the built-in ones,
//! where kube-apiserver lists custom groups.

use std::path::PathBuf;
use std::process::Command;

use super::support::Kcp;

const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kube-apiserver-discovery")
}

/// The body `path` answers in the workspace, as `accept`.
fn fetch(kcp: &Kcp, token: &str, path: &str, accept: &str) -> String {
    let output = Command::new("curl")
        .args(["-sS", "--fail-with-body", "--cacert"])
        .arg(kcp.root.join("ca.crt"))
        .args(["-H", &format!("Authorization: Bearer {token}")])
        .args(["-H", &format!("Accept: {accept}")])
        .arg(format!("{}/clusters/{}{path}", kcp.base_url(), kcp.home()))
        .output()
        .expect("run curl");
    assert!(
        output.status.success(),
        "{path}: {}",
        String::from_utf8_lossy(&output.stdout)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// `document` without kcp's own groups, which it lists last (after `at`, the start of the
/// first of them); each of those is checked to be one of kcp's.
fn without_kcp_groups(document: &str, at: &str) -> String {
    let Some(cut) = document.find(at) else {
        return document.to_string();
    };
    let rest = document[cut + 1..].trim_end();
    let groups = format!("[{}", rest.strip_suffix('}').expect("the document ends"));
    let groups: Vec<serde_json::Value> = serde_json::from_str(&groups).unwrap();
    for group in &groups {
        let name = group["name"]
            .as_str()
            .or(group["metadata"]["name"].as_str())
            .unwrap();
        assert!(
            name.ends_with(".kcp.io") || name == "cluster.example.dev",
            "{name} after kcp's groups"
        );
    }
    format!("{}]}}\n", &document[..cut])
}

#[test]
fn discovery_documents_are_kube_apiservers_bytes() {
    let kcp = Kcp::shared("discovery-bytes");
    let token = kcp_testing::kubeconfig::admin_token(&kcp.root, "kcp-admin");
    let token = token.trim();
    let address = kcp.base_url().trim_start_matches("https://").to_string();
    let mut compared = 0;
    for entry in std::fs::read_dir(fixtures()).unwrap() {
        let file = entry.unwrap().path();
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let Some(stem) = name.strip_suffix(".json") else {
            continue;
        };
        let expected = std::fs::read_to_string(&file).unwrap();
        let (path, accept) = match stem.strip_prefix("agg_") {
            Some(rest) => (format!("/{rest}"), AGGREGATED),
            None => (
                format!("/{}", stem.replacen('_', "/", 2)),
                "application/json",
            ),
        };
        let answered = fetch(&kcp, token, &path, accept);
        let answered = match (stem, accept) {
            ("apis", _) => without_kcp_groups(&answered, r#",{"name":"apiresource.kcp.io""#),
            ("agg_apis", _) => {
                without_kcp_groups(&answered, r#",{"metadata":{"name":"apiresource.kcp.io"}"#)
            }
            ("api", _) => answered.replace(&address, "ADDRESS"),
            _ => answered,
        };
        assert_eq!(answered, expected, "{path} ({accept})");
        compared += 1;
    }
    assert_eq!(compared, 23, "every recorded document was compared");
}
