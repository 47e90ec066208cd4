//! A real third-party admission webhook: cert-manager's (built from its Go module by
//! `scripts/test`, `KCP_TEST_CERT_MANAGER_WEBHOOK`), registered in a workspace with
//! cert-manager's CRDs (`KCP_TEST_CERT_MANAGER_CRDS`), admits valid Certificates and Issuers and
//! refuses invalid ones with its own words, in that workspace only.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use base64::Engine;

use super::support::{Kcp, write_file};

fn from_env(name: &str) -> PathBuf {
    PathBuf::from(std::env::var(name).unwrap_or_else(|_| {
        panic!(
            "{name} is not set: run scripts/test, which builds cert-manager's webhook and sets it"
        )
    }))
}

/// The webhook process, killed when dropped.
struct Webhook(Child);

impl Drop for Webhook {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn cert_managers_webhook_admits_and_refuses_its_resources() {
    let binary = from_env("KCP_TEST_CERT_MANAGER_WEBHOOK");
    let crds = from_env("KCP_TEST_CERT_MANAGER_CRDS");
    let kcp = Kcp::shared("cert-manager");
    let dir = tempfile::tempdir().unwrap();
    let ws = kcp.workspace("certs");
    let sibling = kcp.workspace("no-certs-webhook");
    for cluster in [&ws, &sibling] {
        for crd in [
            "cert-manager.io_certificates.yaml",
            "cert-manager.io_issuers.yaml",
        ] {
            let path = crds.join(crd);
            kcp.kubectl_in_ok(
                cluster,
                &["apply", "--server-side", "-f", path.to_str().unwrap()],
            );
        }
        kcp.wait_established(cluster, "certificates.cert-manager.io");
        kcp.wait_established(cluster, "issuers.cert-manager.io");
    }

    // The webhook, serving a certificate for 127.0.0.1 on a free port.
    let certified = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
    let cert = write_file(dir.path(), "tls.crt", &certified.cert.pem());
    let key = write_file(
        dir.path(),
        "tls.key",
        &certified.signing_key.serialize_pem(),
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let kubeconfig = kcp.kubeconfig_in(dir.path(), &ws, None);
    let _webhook = Webhook(
        Command::new(&binary)
            .args([
                &format!("--secure-port={port}"),
                &format!("--tls-cert-file={cert}"),
                &format!("--tls-private-key-file={key}"),
                &format!("--api-kubeconfig={}", kubeconfig.display()),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start cert-manager's webhook"),
    );
    kcp_testing::wait::until("cert-manager's webhook listens", || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    let ca = base64::engine::general_purpose::STANDARD.encode(certified.cert.pem());
    // The validating and the mutating configuration, as cert-manager's chart registers them.
    let configuration = |kind: &str, path: &str| {
        format!(
            "apiVersion: admissionregistration.k8s.io/v1
kind: {kind}WebhookConfiguration
metadata: {{name: cert-manager-webhook}}
webhooks:
- name: webhook.cert-manager.io
  clientConfig: {{url: \"https://127.0.0.1:{port}/{path}\", caBundle: {ca}}}
  rules:
  - {{apiGroups: [cert-manager.io, acme.cert-manager.io], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [\"*/*\"]}}
  sideEffects: None
  admissionReviewVersions: [v1]
  failurePolicy: Fail
  timeoutSeconds: 30
"
        )
    };
    let configurations = format!(
        "{}---\n{}",
        configuration("Validating", "validate"),
        configuration("Mutating", "mutate")
    );
    let path = write_file(dir.path(), "webhooks.yaml", &configurations);
    kcp.kubectl_in_ok(&ws, &["apply", "-f", &path]);

    // A Certificate naming no identity at all passes the CRD's schema; the webhook refuses it.
    let empty = write_file(
        dir.path(),
        "empty.yaml",
        "apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: empty, namespace: default}
spec:
  secretName: empty-tls
  issuerRef: {name: self-signed, kind: Issuer}
",
    );
    let mut refused = String::new();
    kcp_testing::wait::until(
        "cert-manager's webhook refuses an empty Certificate",
        || {
            refused =
                String::from_utf8_lossy(&kcp.kubectl_in(&ws, &["apply", "-f", &empty]).stderr)
                    .to_string();
            refused.contains("admission webhook \"webhook.cert-manager.io\" denied the request")
        },
    );
    assert!(refused.contains("at least one of"), "{refused}");

    // Valid ones go through.
    let valid = write_file(
        dir.path(),
        "valid.yaml",
        "apiVersion: cert-manager.io/v1
kind: Issuer
metadata: {name: self-signed, namespace: default}
spec: {selfSigned: {}}
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: example, namespace: default}
spec:
  secretName: example-tls
  dnsNames: [example.com]
  issuerRef: {name: self-signed, kind: Issuer}
",
    );
    kcp.kubectl_in_ok(&ws, &["apply", "-f", &valid]);
    // An Issuer of no kind is refused too.
    let no_kind = write_file(
        dir.path(),
        "no-kind.yaml",
        "apiVersion: cert-manager.io/v1\nkind: Issuer\nmetadata: {name: nothing, namespace: default}\nspec: {}\n",
    );
    let refused = kcp.kubectl_in_err(&ws, &["apply", "-f", &no_kind]);
    assert!(refused.contains("denied the request"), "{refused}");

    // The sibling workspace registered no webhook: the empty Certificate is stored there.
    kcp.kubectl_in_ok(&sibling, &["apply", "-f", &empty]);
}
