//! CRDs with several versions, through kubectl: with conversion `None` objects are stored at the
//! storage version and served at every served version (deprecated ones with a Warning, each
//! version validating and defaulting by its own schema, watches converted too), the storage
//! version can change under existing objects, and `status.storedVersions` remembers them all;
//! with conversion `Webhook` kcp posts ConversionReviews to an HTTPS webhook the test runs, and a
//! webhook that is down makes reads and writes at other versions fail with a 500 that says why,
//! without losing data.

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use base64::Engine;
use serde_json::{Value, json};

use kcp_testing::crd::Crd;
use kcp_testing::output::{Lines, json};
use kcp_testing::wait;

use super::support::{Kcp, write_file};

fn stderr_of(kcp: &Kcp, args: &[&str]) -> (bool, String) {
    let output = kcp.kubectl(args);
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stderr).trim().to_string(),
    )
}

fn wait_established(kcp: &Kcp, crd: &str) {
    kcp.wait_established(kcp.home(), crd.trim_start_matches("crd/"));
}

/// `widgets.example.com` with a deprecated `v1beta1` (sizes up to 5, no defaults) and `v1`
/// (sizes up to 100, color defaults to blue), `storage` naming the storage version, and an
/// unserved `v1alpha1`.
fn none_crd(storage: &str) -> String {
    Crd::namespaced("widgets", "Widget")
        .singular("widget")
        .version(
            "
            name: v1alpha1
            served: false
            storage: false
            schema:
              openAPIV3Schema: {type: object, properties: {spec: {type: object, x-kubernetes-preserve-unknown-fields: true}}}
            ",
        )
        .version(&format!(
            "
            name: v1beta1
            served: true
            storage: {beta}
            deprecated: true
            schema:
              openAPIV3Schema:
                type: object
                properties:
                  spec:
                    type: object
                    properties:
                      size: {{type: integer, maximum: 5}}
                      color: {{type: string}}
            ",
            beta = storage == "v1beta1",
        ))
        .version(&format!(
            "
            name: v1
            served: true
            storage: {ga}
            schema:
              openAPIV3Schema:
                type: object
                properties:
                  spec:
                    type: object
                    properties:
                      size: {{type: integer, maximum: 100}}
                      color: {{type: string, default: blue}}
            ",
            ga = storage == "v1",
        ))
        .yaml()
}

fn widget(version: &str, name: &str, size: i64) -> String {
    json!({"apiVersion": format!("example.com/{version}"), "kind": "Widget",
           "metadata": {"name": name, "namespace": "versions"}, "spec": {"size": size}})
    .to_string()
}

#[test]
fn conversion_none_serves_every_version_of_the_stored_objects() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::shared("crd-versions-none");
    let cluster = kcp.home();
    let crd = write_file(dir.path(), "crd.yaml", &none_crd("v1"));
    kcp.kubectl_in_ok(cluster, &["create", "namespace", "versions"]);
    kcp.kubectl_in_ok(cluster, &["apply", "-f", &crd]);
    wait_established(&kcp, "crd/widgets.example.com");
    let deprecated = "Warning: example.com/v1beta1 Widget is deprecated; use example.com/v1 Widget";

    // Created at the deprecated version: a Warning, and the object is stored at v1.
    let old = write_file(dir.path(), "old.json", &widget("v1beta1", "old", 3));
    let (ok, stderr) = stderr_of(&kcp, &["create", "-f", &old]);
    assert!(ok, "{stderr}");
    assert!(stderr.contains(deprecated), "{stderr}");

    let at_v1 = json(&kcp.kubectl_in_ok(
        cluster,
        &[
            "get",
            "widgets.v1.example.com",
            "old",
            "-n",
            "versions",
            "-o",
            "json",
        ],
    ));
    assert_eq!(at_v1["apiVersion"], "example.com/v1");
    assert_eq!(at_v1["spec"], json!({"size": 3, "color": "blue"}));
    let output = kcp.kubectl_in(
        cluster,
        &[
            "get",
            "widgets.v1beta1.example.com",
            "old",
            "-n",
            "versions",
            "-o",
            "json",
        ],
    );
    assert!(output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains(deprecated));
    let at_beta = json(&String::from_utf8_lossy(&output.stdout));
    assert_eq!(at_beta["apiVersion"], "example.com/v1beta1");
    assert_eq!(at_beta["spec"]["size"], 3);
    assert_eq!(at_beta["metadata"]["uid"], at_v1["metadata"]["uid"]);

    // Each version validates by its own schema.
    let big_beta = write_file(dir.path(), "big-beta.json", &widget("v1beta1", "big", 7));
    let (ok, stderr) = stderr_of(&kcp, &["create", "-f", &big_beta]);
    assert!(!ok);
    assert!(
        stderr.contains(
            "spec.size: Invalid value: 7: spec.size in body should be less than or equal to 5"
        ),
        "{stderr}"
    );
    let big = write_file(dir.path(), "big.json", &widget("v1", "big", 7));
    kcp.kubectl_in_ok(cluster, &["create", "-f", &big]);

    // Unserved versions are not there (`--raw` paths name the cluster themselves).
    let raw = |version: &str| {
        stderr_of(
            &kcp,
            &[
                "get",
                "--raw",
                &format!(
                    "/clusters/{cluster}/apis/example.com/{version}/namespaces/versions/widgets"
                ),
            ],
        )
    };
    let (ok, stderr) = raw("v1alpha1");
    assert!(!ok);
    assert!(
        stderr.contains(
            "Error from server (NotFound): the server could not find the requested resource"
        ),
        "{stderr}"
    );
    let (ok, stderr) = raw("v1beta1");
    assert!(ok, "{stderr}");

    let stored_versions = |kcp: &Kcp| {
        kcp.kubectl_in_ok(
            cluster,
            &[
                "get",
                "crd",
                "widgets.example.com",
                "-o",
                "jsonpath={.status.storedVersions}",
            ],
        )
    };
    assert_eq!(stored_versions(&kcp), r#"["v1"]"#);

    // A watch at the non-storage version sees converted objects, old and new.
    // `--raw` paths start at the server's root, so they name the cluster themselves.
    let mut watch = Command::new("kubectl")
        .env("KUBECONFIG", kcp.kubeconfig())
        .args([
            "get",
            "--raw",
            &format!(
                "/clusters/{cluster}/apis/example.com/v1beta1/namespaces/versions/widgets?watch=true&timeoutSeconds=4"
            ),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let printed = Lines::of(watch.stdout.take().unwrap());
    // The watch runs once it has shown what exists already; `later` comes after that.
    let first = printed.next("the watch's first event");
    let later = write_file(dir.path(), "later.json", &widget("v1", "later", 4));
    kcp.kubectl_in_ok(cluster, &["create", "-f", &later]);
    watch.wait().unwrap();
    let watched = std::iter::once(first)
        .chain(printed.rest())
        .collect::<Vec<_>>()
        .join("\n");
    let events: Vec<Value> = watched.lines().map(json).collect();
    let names: Vec<&str> = events
        .iter()
        .map(|e| e["object"]["metadata"]["name"].as_str().unwrap_or_default())
        .collect();
    assert!(
        names.contains(&"old") && names.contains(&"later"),
        "{watched}"
    );
    for event in &events {
        assert_eq!(
            event["object"]["apiVersion"], "example.com/v1beta1",
            "{event}"
        );
    }

    // The storage version moves to v1beta1: old objects stay readable at both versions.
    let crd_beta = write_file(dir.path(), "crd-beta.yaml", &none_crd("v1beta1"));
    kcp.kubectl_in_ok(cluster, &["apply", "-f", &crd_beta]);
    assert_eq!(stored_versions(&kcp), r#"["v1","v1beta1"]"#);
    let newer = write_file(dir.path(), "newer.json", &widget("v1", "newer", 2));
    // The new spec reaches the resource index at once, but allow for a moment's delay.
    wait::until("a widget is created at the new storage version", || {
        let (ok, stderr) = stderr_of(&kcp, &["create", "-f", &newer]);
        if ok { Ok(()) } else { Err(stderr) }
    });
    for version in ["v1", "v1beta1"] {
        let list = json(&kcp.kubectl_in_ok(
            cluster,
            &[
                "get",
                &format!("widgets.{version}.example.com"),
                "-n",
                "versions",
                "-o",
                "json",
            ],
        ));
        let mut sizes: Vec<(String, i64)> = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|item| {
                assert_eq!(item["apiVersion"], format!("example.com/{version}"));
                (
                    item["metadata"]["name"].as_str().unwrap().to_string(),
                    item["spec"]["size"].as_i64().unwrap(),
                )
            })
            .collect();
        sizes.sort();
        assert_eq!(
            sizes,
            [
                ("big".to_string(), 7),
                ("later".to_string(), 4),
                ("newer".to_string(), 2),
                ("old".to_string(), 3)
            ]
        );
    }

    // A version that objects may still be stored at cannot leave spec.versions.
    let (ok, stderr) = stderr_of(
        &kcp,
        &[
            "patch",
            "crd",
            "widgets.example.com",
            "--type=json",
            "-p",
            r#"[{"op": "remove", "path": "/spec/versions/2"}]"#,
        ],
    );
    assert!(!ok);
    assert!(
        stderr.contains(
            "status.storedVersions[0]: Invalid value: \"v1\": missing from spec.versions"
        ),
        "{stderr}"
    );
}

/// A conversion webhook between `v1` (`spec.size`) and `v2` (`spec.dimensions.size`), served
/// over HTTPS with a self-signed certificate for 127.0.0.1 ([`kcp_testing::https`]).
mod webhook {
    use super::*;

    use std::net::SocketAddr;

    pub use kcp_testing::https::{Certificate, certificate};

    /// `spec` of a Widget at `to` from `spec` at `from`.
    fn convert_spec(spec: &Value, from: &str, to: &str) -> Value {
        let mut spec = spec.clone();
        match (from, to) {
            ("example.com/v1", "example.com/v2") => {
                if let Some(size) = spec.as_object_mut().and_then(|s| s.remove("size")) {
                    spec["dimensions"] = json!({"size": size});
                }
            }
            ("example.com/v2", "example.com/v1") => {
                if let Some(dimensions) = spec.as_object_mut().and_then(|s| s.remove("dimensions"))
                {
                    spec["size"] = dimensions["size"].clone();
                }
            }
            _ => {}
        }
        spec
    }

    fn review_answer(review: &Value) -> Value {
        let request = &review["request"];
        let desired = request["desiredAPIVersion"].as_str().unwrap_or_default();
        let converted: Vec<Value> = request["objects"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .map(|mut object| {
                let from = object["apiVersion"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                object["spec"] = convert_spec(&object["spec"], &from, desired);
                object["apiVersion"] = json!(desired);
                object
            })
            .collect();
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
               "response": {"uid": request["uid"], "result": {"status": "Success"},
                            "convertedObjects": converted}})
    }

    /// Serves the webhook on `address` until the returned task is aborted, counting reviews.
    pub async fn serve(
        address: SocketAddr,
        certificate: &Certificate,
        calls: Arc<AtomicUsize>,
    ) -> (SocketAddr, tokio::task::JoinHandle<()>) {
        let handler = Arc::new(move |_: &str, review: Value| {
            calls.fetch_add(1, Ordering::SeqCst);
            review_answer(&review)
        });
        kcp_testing::https::serve(address, certificate, handler).await
    }
}

fn webhook_crd(port: u16, ca_pem: &str) -> String {
    let ca_bundle = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    Crd::namespaced("widgets", "Widget")
        .singular("widget")
        .conversion(&format!(
            "
            strategy: Webhook
            webhook:
              conversionReviewVersions: [v1]
              clientConfig:
                url: https://127.0.0.1:{port}/convert
                caBundle: {ca_bundle}
            "
        ))
        .storage_version(
            "v1",
            "
            type: object
            properties:
              spec: {type: object, properties: {size: {type: integer}}}
            ",
        )
        .version(
            "
            name: v2
            served: true
            storage: false
            schema:
              openAPIV3Schema:
                type: object
                properties:
                  spec:
                    type: object
                    properties:
                      dimensions: {type: object, properties: {size: {type: integer}}}
            ",
        )
        .yaml()
}

#[test]
fn conversion_webhooks_convert_between_versions_and_failures_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::shared("crd-versions-webhook");
    let cluster = kcp.home();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let certificate = webhook::certificate();
    let calls = Arc::new(AtomicUsize::new(0));
    let (address, server) = runtime.block_on(webhook::serve(
        "127.0.0.1:0".parse().unwrap(),
        &certificate,
        calls.clone(),
    ));
    let crd = write_file(
        dir.path(),
        "crd.yaml",
        &webhook_crd(address.port(), &certificate.ca_pem),
    );
    kcp.kubectl_in_ok(cluster, &["create", "namespace", "versions"]);
    kcp.kubectl_in_ok(cluster, &["apply", "-f", &crd]);
    wait_established(&kcp, "crd/widgets.example.com");

    let w = write_file(dir.path(), "w.json", &widget("v1", "w", 3));
    kcp.kubectl_in_ok(cluster, &["create", "-f", &w]);
    assert_eq!(
        calls.load(Ordering::SeqCst),
        0,
        "nothing to convert at the storage version"
    );

    let get = |version: &str| {
        json(&kcp.kubectl_in_ok(
            cluster,
            &[
                "get",
                &format!("widgets.{version}.example.com"),
                "w",
                "-n",
                "versions",
                "-o",
                "json",
            ],
        ))
    };
    let at_v2 = get("v2");
    assert_eq!(at_v2["apiVersion"], "example.com/v2");
    assert_eq!(at_v2["spec"], json!({"dimensions": {"size": 3}}));
    assert!(calls.load(Ordering::SeqCst) >= 1, "the webhook was called");

    // Updated at v2: converted back to v1 for storage.
    kcp.kubectl_in_ok(
        cluster,
        &[
            "patch",
            "widgets.v2.example.com",
            "w",
            "-n",
            "versions",
            "--type=merge",
            "-p",
            r#"{"spec": {"dimensions": {"size": 5}}}"#,
        ],
    );
    assert_eq!(get("v1")["spec"], json!({"size": 5}));
    let list = json(&kcp.kubectl_in_ok(
        cluster,
        &[
            "get",
            "widgets.v2.example.com",
            "-n",
            "versions",
            "-o",
            "json",
        ],
    ));
    assert_eq!(list["items"][0]["spec"], json!({"dimensions": {"size": 5}}));

    // The webhook goes down: other versions fail with a 500 that says why; nothing is lost.
    server.abort();
    let _ = runtime.block_on(server);
    let (ok, stderr) = stderr_of(
        &kcp,
        &[
            "get",
            "widgets.v2.example.com",
            "w",
            "-n",
            "versions",
            "-o",
            "json",
        ],
    );
    assert!(!ok);
    let expected = format!(
        "conversion webhook for example.com/v1, Kind=Widget failed: Post \"https://127.0.0.1:{}/convert\": dial tcp 127.0.0.1:{}: ",
        address.port(),
        address.port()
    );
    assert!(stderr.contains(&expected), "{stderr}");
    assert!(stderr.contains("InternalError"), "{stderr}");
    let (ok, stderr) = stderr_of(
        &kcp,
        &[
            "patch",
            "widgets.v2.example.com",
            "w",
            "-n",
            "versions",
            "--type=merge",
            "-p",
            r#"{"spec": {"dimensions": {"size": 9}}}"#,
        ],
    );
    assert!(!ok);
    assert!(stderr.contains("conversion webhook for"), "{stderr}");
    let w2 = write_file(
        dir.path(),
        "w2.json",
        &json!({"apiVersion": "example.com/v2", "kind": "Widget",
                "metadata": {"name": "w2", "namespace": "versions"},
                "spec": {"dimensions": {"size": 1}}})
        .to_string(),
    );
    let (ok, stderr) = stderr_of(&kcp, &["create", "-f", &w2]);
    assert!(!ok);
    assert!(
        stderr.contains("conversion webhook for example.com/v2, Kind=Widget failed"),
        "{stderr}"
    );
    assert_eq!(
        get("v1")["spec"],
        json!({"size": 5}),
        "the storage version still reads"
    );
    let (ok, _) = stderr_of(
        &kcp,
        &["get", "widgets.v1.example.com", "w2", "-n", "versions"],
    );
    assert!(!ok, "a failed create stores nothing");

    // Back up on the same address: everything reads again.
    let (_, server) = runtime.block_on(webhook::serve(address, &certificate, calls.clone()));
    assert_eq!(get("v2")["spec"], json!({"dimensions": {"size": 5}}));

    // Service references cannot be called from kcp: a clear error.
    kcp.kubectl_in_ok(
        cluster,
        &["patch", "crd", "widgets.example.com", "--type=merge", "-p",
          r#"{"spec": {"conversion": {"webhook": {"clientConfig": {"url": null, "service": {"name": "conv", "namespace": "default"}}}}}}"#],
    );
    wait::until("reads say the webhook service cannot be reached", || {
        let (ok, stderr) = stderr_of(
            &kcp,
            &["get", "widgets.v2.example.com", "w", "-n", "versions"],
        );
        if !ok && stderr.contains("clientConfig.service cannot be reached from kcp") {
            Ok(())
        } else {
            Err(format!("{ok} {stderr}"))
        }
    });
    server.abort();
}
