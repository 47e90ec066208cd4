//! Bad input on every built-in resource and verb: each answer is a Kubernetes `Status` with a
//! 4xx code, never a 500 or a panic, and a refused write changes nothing.

use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request, header};
use http_body_util::{BodyExt, Full};
use kcp_apiserver::authn::{TokenAuthenticator, User, token_digest};
use kcp_apiserver::router::Router;
use kcp_registry::Registry;

fn router() -> Router {
    let mut authn = TokenAuthenticator::default();
    authn.add(
        token_digest("t"),
        User {
            name: "admin".into(),
            groups: vec!["system:masters".into()],
            ..Default::default()
        },
    );
    Router::new(
        authn,
        Registry::new(Arc::new(kcp_storage::MemoryStorage::new())),
    )
}

async fn send(
    router: &Router,
    method: &Method,
    path: &str,
    content_type: &str,
    body: &[u8],
) -> (u16, serde_json::Value) {
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header(header::AUTHORIZATION, "Bearer t")
        .header(header::CONTENT_TYPE, content_type)
        .body(Full::new(Bytes::copy_from_slice(body)))
        .unwrap();
    let response = router.handle(request).await;
    let code = response.status().as_u16();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let value = serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
    (code, value)
}

const BODIES: &[&[u8]] = &[
    b"",
    b"{",
    b"null",
    b"[]",
    b"42",
    b"\"text\"",
    b"{\"metadata\": 5}",
    b"{\"metadata\": {\"name\": 7}}",
    b"{\"metadata\": {\"name\": \"UPPER\"}}",
    b"{\"metadata\": {\"name\": \"x\", \"labels\": {\"a\": 1}}}",
    b"{\"metadata\": {\"name\": \"x\", \"finalizers\": \"no\"}}",
    b"{\"metadata\": {\"name\": \"x\", \"resourceVersion\": \"abc\"}}",
    b"{\"apiVersion\": \"v2\", \"kind\": \"Nope\", \"metadata\": {\"name\": \"x\"}}",
    b"k8s\x00\x0a\x02v1",
    b"\xff\xfe\x00garbage",
    b"[{\"op\": \"explode\", \"path\": \"/x\"}]",
    b"{\"$patch\": \"replace\", \"metadata\": {\"$retainKeys\": 3}}",
];

const CONTENT_TYPES: &[&str] = &[
    "application/json",
    "application/vnd.kubernetes.protobuf",
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
    "text/plain",
];

#[tokio::test]
async fn garbage_never_breaks_the_server_or_the_store() {
    let router = router();
    let (code, _) = send(
        &router,
        &Method::POST,
        "/clusters/root/api/v1/namespaces",
        "application/json",
        br#"{"metadata":{"name":"ns"}}"#,
    )
    .await;
    assert_eq!(code, 201);
    let mut paths = Vec::new();
    for (group, versions) in std::iter::once(("", vec!["v1"])).chain(kcp_apis::builtin::groups()) {
        for version in versions {
            for resource in kcp_apis::builtin::in_group_version(group, version) {
                let base = if group.is_empty() {
                    format!("/clusters/root/api/{version}")
                } else {
                    format!("/clusters/root/apis/{group}/{version}")
                };
                let scope = if resource.namespaced {
                    "/namespaces/ns"
                } else {
                    ""
                };
                paths.push(format!("{base}{scope}/{}", resource.name));
                paths.push(format!("{base}{scope}/{}/x", resource.name));
                paths.push(format!("{base}{scope}/{}/x/status", resource.name));
            }
        }
    }
    paths.push("/clusters/root/api/v1/namespaces/ns/configmaps?limit=abc".into());
    paths.push("/clusters/root/api/v1/namespaces/ns/configmaps?labelSelector=a%20in%20(".into());
    paths.push("/clusters/root/api/v1/namespaces/ns/configmaps?fieldSelector=spec.x=1".into());
    paths.push("/clusters/root/api/v1/namespaces/ns/configmaps?continue=%%%".into());
    paths.push("/clusters/root/api/v1/namespaces/ns/configmaps?watch=1&resourceVersion=x".into());

    let mut requests = 0;
    let mut failures = Vec::new();
    for path in &paths {
        for method in [Method::POST, Method::PUT, Method::PATCH, Method::DELETE] {
            for body in BODIES {
                for content_type in CONTENT_TYPES {
                    let (code, status) = send(&router, &method, path, content_type, body).await;
                    requests += 1;
                    let refused_properly = (400..500).contains(&code)
                        && status["kind"] == "Status"
                        && status["code"] == code;
                    // Some of these bodies are fine for some verbs (an empty JSON patch, a
                    // delete without options): success is allowed, errors must be Status.
                    if !(refused_properly || (200..300).contains(&code)) {
                        failures.push(format!(
                            "{method} {path} ({content_type}) {:?}: {code} {status}",
                            String::from_utf8_lossy(body)
                        ));
                    }
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} bad answers, e.g.:\n{}",
        failures.len(),
        failures
            .iter()
            .take(40)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(requests > 5000);

    // Whatever was stored is well-formed: no value of the wrong type got through.
    let catalogue = kcp_apis::schema::catalogue();
    for resource in kcp_apis::builtin::RESOURCES {
        if !resource.verbs.contains(&"list") {
            continue;
        }
        let base = if resource.group.is_empty() {
            format!("/clusters/root/api/{}", resource.version)
        } else {
            format!(
                "/clusters/root/apis/{}/{}",
                resource.group, resource.version
            )
        };
        let (code, list) = send(
            &router,
            &Method::GET,
            &format!("{base}/{}", resource.name),
            "application/json",
            b"",
        )
        .await;
        assert_eq!(code, 200, "{list}");
        for item in list["items"].as_array().unwrap() {
            assert!(item["metadata"]["name"].is_string(), "{item}");
            let errors = catalogue.type_errors(resource, item);
            assert!(errors.is_empty(), "{item}: {errors:?}");
        }
    }
}

#[tokio::test]
async fn values_of_the_wrong_type_are_bad_requests() {
    let router = router();
    let namespaces = "/clusters/root/api/v1/namespaces";
    let (code, status) = send(
        &router,
        &Method::POST,
        namespaces,
        "application/json",
        br#"{"metadata":{"name":"x","labels":{"a":1}}}"#,
    )
    .await;
    assert_eq!(code, 400);
    assert_eq!(
        status["message"],
        "Namespace in version \"v1\" cannot be handled as a Namespace: json: cannot unmarshal number into Go struct field ObjectMeta.metadata.labels of type string"
    );
    send(
        &router,
        &Method::POST,
        namespaces,
        "application/json",
        br#"{"metadata":{"name":"x"}}"#,
    )
    .await;
    let (code, _) = send(
        &router,
        &Method::PATCH,
        &format!("{namespaces}/x"),
        "application/merge-patch+json",
        br#"{"metadata":{"name":7}}"#,
    )
    .await;
    assert_eq!(code, 400);
}

/// DeleteOptions in the body of a delete or deletecollection, in JSON, YAML and protobuf, of
/// kind DeleteOptions under any group's version (client-go sends its client's: Helm's release
/// storage deletes its Secrets so), as kube-apiserver reads them; other kinds are refused.
#[tokio::test]
async fn delete_options_are_read_in_every_format() {
    use k8s_pb::apimachinery::pkg::apis::meta::v1::DeleteOptions;
    use prost::Message;
    let router = router();
    let configmaps = "/clusters/root/api/v1/namespaces/default/configmaps";
    let (code, _) = send(
        &router,
        &Method::POST,
        "/clusters/root/api/v1/namespaces",
        "application/json",
        br#"{"metadata":{"name":"default"}}"#,
    )
    .await;
    assert!(code == 201 || code == 409, "{code}");
    for name in ["kept", "gone", "labelled-a", "labelled-b"] {
        let body = format!(
            r#"{{"metadata":{{"name":"{name}","labels":{{"set":"{}"}}}}}}"#,
            name.starts_with("labelled")
        );
        let (code, status) = send(
            &router,
            &Method::POST,
            configmaps,
            "application/json",
            body.as_bytes(),
        )
        .await;
        assert_eq!(code, 201, "{status}");
    }
    let exists = async |name: &str| {
        let path = format!("{configmaps}/{name}");
        send(&router, &Method::GET, &path, "application/json", b"")
            .await
            .0
            == 200
    };
    let kept = format!("{configmaps}/kept");

    let dry_run = DeleteOptions {
        dry_run: vec!["All".into()],
        propagation_policy: Some("Background".into()),
        ..Default::default()
    };
    let pb = "application/vnd.kubernetes.protobuf";
    for (content_type, body) in [
        (
            pb,
            kcp_apiserver::protobuf::envelope("v1", "DeleteOptions", dry_run.encode_to_vec()),
        ),
        (
            pb,
            kcp_apiserver::protobuf::envelope(
                "meta.k8s.io/v1",
                "DeleteOptions",
                dry_run.encode_to_vec(),
            ),
        ),
        (
            "application/yaml",
            b"apiVersion: v1\nkind: DeleteOptions\ndryRun: [All]\n".to_vec(),
        ),
        (
            "application/json",
            br#"{"apiVersion":"meta.k8s.io/v1","kind":"DeleteOptions","dryRun":["All"]}"#.to_vec(),
        ),
        ("application/json", br#"{"dryRun":["All"]}"#.to_vec()),
    ] {
        let (code, status) = send(&router, &Method::DELETE, &kept, content_type, &body).await;
        assert_eq!(code, 200, "{content_type}: {status}");
        assert!(
            exists("kept").await,
            "{content_type}: a dry run deletes nothing"
        );
    }

    // Read and checked: an invalid policy is the 422 of DeleteOptions.
    let bogus = DeleteOptions {
        propagation_policy: Some("Sideways".into()),
        ..Default::default()
    };
    let (code, status) = send(
        &router,
        &Method::DELETE,
        &kept,
        pb,
        &kcp_apiserver::protobuf::envelope("v1", "DeleteOptions", bogus.encode_to_vec()),
    )
    .await;
    assert_eq!(code, 422, "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .starts_with("DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported value: \"Sideways\""),
        "{status}"
    );
    // Not DeleteOptions: refused as kube-apiserver refuses them.
    for (body, message) in [
        (
            r#"{"apiVersion":"v1","kind":"CreateOptions"}"#,
            "decoded object cannot be converted to DeleteOptions",
        ),
        (
            r#"{"apiVersion":"v1","kind":"ConfigMap"}"#,
            "no kind \"ConfigMap\" is registered for version \"v1\"",
        ),
        ("[1]", "the DeleteOptions body is not an object"),
    ] {
        let (code, status) = send(
            &router,
            &Method::DELETE,
            &kept,
            "application/json",
            body.as_bytes(),
        )
        .await;
        assert_eq!(code, 400, "{body}: {status}");
        assert!(
            status["message"].as_str().unwrap().contains(message),
            "{status}"
        );
        assert!(exists("kept").await);
    }

    // The real thing, in protobuf: a delete and a deletecollection (an apps client's version).
    let (code, status) = send(
        &router,
        &Method::DELETE,
        &format!("{configmaps}/gone"),
        pb,
        &kcp_apiserver::protobuf::envelope(
            "v1",
            "DeleteOptions",
            DeleteOptions::default().encode_to_vec(),
        ),
    )
    .await;
    assert_eq!(code, 200, "{status}");
    assert!(!exists("gone").await);
    let (code, status) = send(
        &router,
        &Method::DELETE,
        &format!("{configmaps}?labelSelector=set%3Dtrue"),
        pb,
        &kcp_apiserver::protobuf::envelope(
            "apps/v1",
            "DeleteOptions",
            DeleteOptions::default().encode_to_vec(),
        ),
    )
    .await;
    assert_eq!(code, 200, "{status}");
    assert!(!exists("labelled-a").await && !exists("labelled-b").await);
    assert!(exists("kept").await);
}
