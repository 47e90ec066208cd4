//! Authentication and authorization webhooks, as kube-apiserver calls them: a token nothing
//! else accepts is sent to the token webhook in a TokenReview, and a request RBAC does not
//! allow is sent to the authorization webhook in a SubjectAccessReview naming the logical
//! cluster (kcp's `authorization.kcp.io/cluster-name` extra). The webhooks here are an HTTPS
//! server the test runs. (A server of its own: the webhooks are flags.)

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::support::{Kcp, write_file};

/// The webhooks' answers: `hook-token` is `hooked`; hooked may get configmaps; secrets are
/// denied outright; about the rest the webhook has no opinion.
fn answer(path: &str, review: &Value) -> Value {
    match path {
        "/authn" if review["spec"]["token"] == "hook-token" => json!({
            "apiVersion": review["apiVersion"], "kind": "TokenReview",
            "status": {"authenticated": true, "user": {"username": "hooked", "uid": "h-1", "groups": ["hook-group"]}},
        }),
        "/authn" => {
            json!({"apiVersion": review["apiVersion"], "kind": "TokenReview", "status": {"authenticated": false}})
        }
        _ => {
            let attributes = &review["spec"]["resourceAttributes"];
            let status = match (attributes["resource"].as_str(), attributes["verb"].as_str()) {
                (Some("configmaps"), Some("get")) if review["spec"]["user"] == "hooked" => {
                    json!({"allowed": true})
                }
                (Some("secrets"), _) => {
                    json!({"allowed": false, "denied": true, "reason": "secrets are off limits"})
                }
                _ => json!({"allowed": false, "reason": "no opinion here"}),
            };
            json!({"apiVersion": review["apiVersion"], "kind": "SubjectAccessReview", "status": status})
        }
    }
}

fn config_file(dir: &std::path::Path, name: &str, url: &str, ca_pem: &str) -> String {
    use base64::Engine;
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    write_file(
        dir,
        name,
        &format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: hook\n  cluster:\n    server: {url}\n    certificate-authority-data: {ca}\nusers:\n- name: kcp\n  user:\n    token: webhook-secret\ncontexts:\n- name: hook\n  context: {{cluster: hook, user: kcp}}\ncurrent-context: hook\n"
        ),
    )
}

#[test]
fn webhooks_authenticate_tokens_and_authorize_what_rbac_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let certificate = kcp_testing::https::certificate();
    let seen: Arc<Mutex<Vec<(String, Value)>>> = Arc::default();
    let recorder = seen.clone();
    let handler = Arc::new(move |path: &str, review: Value| {
        let answered = answer(path, &review);
        recorder.lock().unwrap().push((path.to_string(), review));
        answered
    });
    let (address, _server) = runtime.block_on(kcp_testing::https::serve(
        "127.0.0.1:0".parse().unwrap(),
        &certificate,
        handler,
    ));
    let authn = config_file(
        dir.path(),
        "authn.yaml",
        &format!("https://{address}/authn"),
        &certificate.ca_pem,
    );
    let authz = config_file(
        dir.path(),
        "authz.yaml",
        &format!("https://{address}/authz"),
        &certificate.ca_pem,
    );
    let kcp = Kcp::start(
        &dir.path().join("root"),
        &[
            "--authentication-token-webhook-config-file",
            &authn,
            "--authentication-token-webhook-version=v1",
            "--authorization-webhook-config-file",
            &authz,
        ],
    );
    let ws = kcp.workspace("hooked");
    kcp.kubectl_in_ok(
        &ws,
        &[
            "create",
            "clusterrolebinding",
            "hook-access",
            "--clusterrole=system:kcp:workspace:access",
            "--group=hook-group",
        ],
    );
    kcp.kubectl_in_ok(&ws, &["create", "configmap", "c", "-n", "default"]);
    let hooked = |args: &[&str]| {
        let mut all = vec!["--token=hook-token"];
        all.extend_from_slice(args);
        kcp.kubectl_in(&ws, &all)
    };

    // The token webhook names the user.
    let whoami = kcp_testing::output::stdout(&hooked(&["auth", "whoami", "-o", "json"]));
    assert_eq!(
        kcp_testing::output::json(&whoami)["status"]["userInfo"],
        json!({"username": "hooked", "uid": "h-1", "groups": ["hook-group", "system:authenticated"]})
    );
    let stranger = kcp.kubectl_in(&ws, &["--token=other-token", "get", "--raw", "/api"]);
    assert!(kcp_testing::output::stderr(&stranger).contains("Unauthorized"));

    // The authorization webhook allows what RBAC does not, and refuses with its reason.
    kcp_testing::output::stdout(&hooked(&[
        "get",
        "configmap",
        "c",
        "-n",
        "default",
        "-o",
        "name",
    ]));
    let path = format!("/clusters/{ws}/api/v1/namespaces/default/configmaps");
    let listed = kcp_testing::output::stderr(&hooked(&["get", "--raw", &path]));
    assert!(
        listed.contains(r#"User "hooked" cannot list resource "configmaps" in API group "" in the namespace "default": no opinion here"#),
        "{listed}"
    );
    let secrets = kcp_testing::output::stderr(&hooked(&[
        "get",
        "--raw",
        &format!("/clusters/{ws}/api/v1/namespaces/default/secrets"),
    ]));
    assert!(secrets.contains("secrets are off limits"), "{secrets}");

    // What the webhooks were sent.
    let seen = seen.lock().unwrap();
    let token_review = &seen.iter().find(|(path, _)| path == "/authn").unwrap().1;
    assert_eq!(token_review["apiVersion"], "authentication.k8s.io/v1");
    let cluster = kcp.logical_cluster(&ws);
    let review = &seen
        .iter()
        .find(|(path, review)| {
            path == "/authz"
                && review["spec"]["resourceAttributes"]["verb"] == "get"
                && review["spec"]["resourceAttributes"]["resource"] == "configmaps"
        })
        .unwrap()
        .1;
    assert_eq!(review["apiVersion"], "authorization.k8s.io/v1beta1");
    assert_eq!(review["spec"]["user"], "hooked");
    assert_eq!(
        review["spec"]["group"],
        json!(["hook-group", "system:authenticated"])
    );
    assert_eq!(
        review["spec"]["extra"]["authorization.kcp.io/cluster-name"],
        json!([cluster])
    );
    assert_eq!(
        review["spec"]["resourceAttributes"],
        json!({"verb": "get", "group": "", "resource": "configmaps", "namespace": "default", "name": "c"})
    );
}
