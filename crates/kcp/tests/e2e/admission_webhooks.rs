//! Admission webhooks, as kube-apiserver calls them, per workspace: a mutating webhook adds a
//! label and a validating one refuses a name in the workspace that configured them and not in
//! its sibling; failure policies with the webhook down, timeouts, dry runs and match
//! conditions; and kcp's twist, a provider's webhook on its exported resource called for every
//! consumer that binds it (never the consumer's own). The webhooks are an HTTPS server the test
//! runs, with its own CA.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use serde_json::{Value, json};

use super::api_sharing::{bind, export_widgets};
use super::support::{Kcp, write_file};

/// The reviews each path received, in order.
type Seen = Arc<Mutex<HashMap<String, Vec<Value>>>>;

/// A base64 JSON patch setting `metadata.<map>.<key>` to `yes` on `object`.
fn add_patch(object: &Value, map: &str, key: &str) -> String {
    let patch = match object["metadata"][map].is_object() {
        true => json!([{"op": "add", "path": format!("/metadata/{map}/{key}"), "value": "yes"}]),
        false => json!([{"op": "add", "path": format!("/metadata/{map}"), "value": {key: "yes"}}]),
    };
    base64::engine::general_purpose::STANDARD.encode(patch.to_string())
}

/// The test webhooks, by path: `/label` adds the label `webhooked: "yes"` (and warns);
/// `/deny-bad` refuses objects named `bad`; `/slow` answers after 3 seconds; `/dry` allows and
/// only records.
fn answer(path: &str, review: &Value) -> Value {
    let request = &review["request"];
    let uid = request["uid"].clone();
    let object = &request["object"];
    let response = match path {
        "/label" => json!({"uid": uid, "allowed": true, "patchType": "JSONPatch",
                           "patch": add_patch(object, "labels", "webhooked"),
                           "warnings": ["labelled by the test webhook"]}),
        "/deny-bad" if object["metadata"]["name"] == "bad" => json!({
            "uid": uid, "allowed": false,
            "status": {"code": 403, "reason": "Forbidden", "message": "bad is not a name here"},
        }),
        "/annotate" => json!({"uid": uid, "allowed": true, "patchType": "JSONPatch",
                              "patch": add_patch(object, "annotations", "annotated")}),
        "/slow" => {
            // The test's runtime has worker threads to spare for this one.
            std::thread::sleep(Duration::from_secs(3));
            json!({"uid": uid, "allowed": true})
        }
        _ => json!({"uid": uid, "allowed": true}),
    };
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})
}

struct Webhooks {
    url: String,
    ca_bundle: String,
    seen: Seen,
    _runtime: tokio::runtime::Runtime,
}

impl Webhooks {
    fn start() -> Webhooks {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let certificate = kcp_testing::https::certificate();
        let seen: Seen = Arc::default();
        let recorder = seen.clone();
        let handler = Arc::new(move |path: &str, review: Value| {
            let answered = answer(path, &review);
            let mut seen = recorder.lock().unwrap();
            seen.entry(path.to_string()).or_default().push(review);
            answered
        });
        let (address, _) = runtime.block_on(kcp_testing::https::serve(
            "127.0.0.1:0".parse().unwrap(),
            &certificate,
            handler,
        ));
        Webhooks {
            url: format!("https://{address}"),
            ca_bundle: base64::engine::general_purpose::STANDARD.encode(&certificate.ca_pem),
            seen,
            _runtime: runtime,
        }
    }

    /// [`configuration`] of the webhook at `path` of these webhooks.
    fn configuration(
        &self,
        kind: &str,
        name: &str,
        path: &str,
        group: &str,
        resources: &str,
        extra: &str,
    ) -> String {
        let url = format!("{}{path}", self.url);
        configuration(kind, name, &url, &self.ca_bundle, group, resources, extra)
    }

    fn seen(&self, path: &str) -> Vec<Value> {
        self.seen
            .lock()
            .unwrap()
            .get(path)
            .cloned()
            .unwrap_or_default()
    }
}

/// A webhook configuration of `kind` (`Validating` or `Mutating`) named `name` with one webhook
/// at `url` on `resources` of `group`, with `extra` YAML lines added to the webhook.
fn configuration(
    kind: &str,
    name: &str,
    url: &str,
    ca: &str,
    group: &str,
    resources: &str,
    extra: &str,
) -> String {
    format!(
        "apiVersion: admissionregistration.k8s.io/v1
kind: {kind}WebhookConfiguration
metadata: {{name: {name}}}
webhooks:
- name: {name}.example.com
  clientConfig: {{url: \"{url}\", caBundle: {ca}}}
  rules:
  - {{apiGroups: [\"{group}\"], apiVersions: [\"*\"], operations: [CREATE, UPDATE], resources: [{resources}]}}
  sideEffects: None
  admissionReviewVersions: [v1]
{extra}"
    )
}

/// Writes `text` to `file` and applies it in `cluster`.
fn apply_in(kcp: &Kcp, dir: &std::path::Path, cluster: &str, file: &str, text: &str) {
    let path = write_file(dir, file, text);
    kcp.kubectl_in_ok(cluster, &["apply", "-f", &path]);
}

#[test]
fn webhooks_mutate_and_refuse_in_their_workspace_only() {
    let kcp = Kcp::shared("admission-webhooks");
    let dir = tempfile::tempdir().unwrap();
    let hooks = Webhooks::start();
    let ws = kcp.workspace("hooked");
    let sibling = kcp.workspace("unhooked");
    let mutating = hooks.configuration("Mutating", "label", "/label", "", "configmaps", "");
    let validating =
        hooks.configuration("Validating", "deny-bad", "/deny-bad", "", "configmaps", "");
    apply_in(&kcp, dir.path(), &ws, "mutating.yaml", &mutating);
    apply_in(&kcp, dir.path(), &ws, "validating.yaml", &validating);

    // A ConfigMap gets the label (kubectl shows the webhook's warning).
    kcp_testing::wait::until("the mutating webhook labels new configmaps", || {
        let name = format!("probe-{}", fastrand::u32(..));
        let created = kcp.kubectl_in(&ws, &["create", "configmap", &name]);
        let label = kcp.kubectl_in_ok(
            &ws,
            &[
                "get",
                "configmap",
                &name,
                "-o",
                "jsonpath={.metadata.labels.webhooked}",
            ],
        );
        let warned = String::from_utf8_lossy(&created.stderr)
            .contains("Warning: labelled by the test webhook");
        label == "yes" && warned
    });
    // The validating webhook refuses `bad` with its own code and words.
    let refused = kcp.kubectl_in_err(&ws, &["create", "configmap", "bad"]);
    assert!(
        refused.contains(
            "admission webhook \"deny-bad.example.com\" denied the request: bad is not a name here"
        ),
        "{refused}"
    );
    let status = kcp.kubectl_in(&ws, &["create", "configmap", "bad", "-v=8"]);
    let log = String::from_utf8_lossy(&status.stderr);
    assert!(log.contains("403 Forbidden"), "{log}");
    // The sibling workspace calls neither.
    kcp.kubectl_in_ok(&sibling, &["create", "configmap", "bad"]);
    let label = kcp.kubectl_in_ok(
        &sibling,
        &[
            "get",
            "configmap",
            "bad",
            "-o",
            "jsonpath={.metadata.labels}",
        ],
    );
    assert_eq!(label, "");

    // What the webhooks were sent: kube's review, with the workspace in the object's
    // `kcp.io/cluster`; the validating webhook sees the mutated object with uid and time.
    let cluster = kcp.logical_cluster(&ws);
    let mutated = hooks.seen("/label");
    let first = &mutated.last().unwrap()["request"];
    assert_eq!(first["operation"], "CREATE");
    assert_eq!(
        first["kind"],
        json!({"group": "", "version": "v1", "kind": "ConfigMap"})
    );
    assert_eq!(
        first["resource"],
        json!({"group": "", "version": "v1", "resource": "configmaps"})
    );
    assert_eq!(first["namespace"], "default");
    assert_eq!(
        first["object"]["metadata"]["annotations"]["kcp.io/cluster"],
        cluster.as_str()
    );
    assert_eq!(first["options"]["kind"], "CreateOptions");
    assert_eq!(first["dryRun"], false);
    assert!(first["userInfo"]["username"].is_string(), "{first}");
    assert!(first["object"]["metadata"]["uid"].is_null(), "{first}");
    let validated = hooks.seen("/deny-bad");
    let last = &validated.last().unwrap()["request"];
    assert_eq!(
        last["object"]["metadata"]["annotations"]["kcp.io/cluster"],
        cluster.as_str()
    );
    let allowed = validated
        .iter()
        .map(|r| &r["request"])
        .find(|r| r["object"]["metadata"]["name"] != "bad")
        .unwrap();
    assert_eq!(allowed["object"]["metadata"]["labels"]["webhooked"], "yes");
    assert!(
        allowed["object"]["metadata"]["uid"].is_string(),
        "{allowed}"
    );
    assert!(
        allowed["object"]["metadata"]["creationTimestamp"].is_string(),
        "{allowed}"
    );

    // Updates send the old object too.
    let cm = kcp.kubectl_in_ok(&ws, &["get", "configmaps", "-o", "name"]);
    let some = cm
        .lines()
        .find(|l| l.contains("probe-"))
        .unwrap()
        .trim_start_matches("configmap/")
        .to_string();
    kcp.kubectl_in_ok(&ws, &["label", "configmap", &some, "x=y"]);
    let update = hooks
        .seen("/deny-bad")
        .into_iter()
        .map(|r| r["request"].clone())
        .find(|r| r["operation"] == "UPDATE")
        .unwrap();
    assert_eq!(update["oldObject"]["metadata"]["name"], some.as_str());
    assert_eq!(update["object"]["metadata"]["labels"]["x"], "y");
    assert_eq!(update["options"]["kind"], "UpdateOptions");
}

#[test]
fn failure_policies_timeouts_dry_runs_and_match_conditions() {
    let kcp = Kcp::shared("admission-failures");
    let dir = tempfile::tempdir().unwrap();
    let hooks = Webhooks::start();
    let ca = &hooks.ca_bundle;
    // Nothing listens on a port just freed.
    let down = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("https://{}/down", listener.local_addr().unwrap())
    };

    // With failurePolicy Fail the write fails as kube-apiserver words it; with Ignore it goes on.
    let failing = kcp.workspace("fail-closed");
    let ignoring = kcp.workspace("fail-open");
    for (workspace, policy) in [(&failing, "Fail"), (&ignoring, "Ignore")] {
        let extra = format!("  failurePolicy: {policy}\n");
        let config = configuration("Validating", "down", &down, ca, "", "configmaps", &extra);
        apply_in(&kcp, dir.path(), workspace, "down.yaml", &config);
    }
    kcp_testing::wait::until("a webhook that is down fails writes", || {
        let out = kcp.kubectl_in(
            &failing,
            &["create", "configmap", &format!("c-{}", fastrand::u32(..))],
        );
        let text = String::from_utf8_lossy(&out.stderr).to_string();
        text.contains("Internal error occurred: failed calling webhook \"down.example.com\": failed to call webhook: Post")
            && text.contains("?timeout=10s")
    });
    let slow = hooks.configuration(
        "Validating",
        "slow",
        "/slow",
        "",
        "secrets",
        "  timeoutSeconds: 1\n",
    );
    apply_in(&kcp, dir.path(), &ignoring, "slow.yaml", &slow);
    kcp.kubectl_in_ok(&ignoring, &["create", "configmap", "goes-through"]);
    // The one-second timeout is kept: the slow webhook's answer comes too late.
    kcp_testing::wait::until("the slow webhook times out", || {
        let out = kcp.kubectl_in(
            &ignoring,
            &[
                "create",
                "secret",
                "generic",
                &format!("s-{}", fastrand::u32(..)),
            ],
        );
        String::from_utf8_lossy(&out.stderr)
            .contains("failed calling webhook \"slow.example.com\": failed to call webhook: Post")
            && String::from_utf8_lossy(&out.stderr).contains("context deadline exceeded")
    });

    // Dry runs reach a side-effect-free webhook; a match condition keeps another to real writes.
    let dry = kcp.workspace("dry-runs");
    let seen_dry = hooks.configuration("Validating", "dry", "/dry", "", "configmaps", "");
    let real_only = hooks.configuration("Validating", "real-only", "/real-only", "", "configmaps", "  matchConditions:\n  - {name: not-dry, expression: \"!request.dryRun\"}\n  - {name: named, expression: \"object.metadata.name.startsWith('d')\"}\n");
    apply_in(&kcp, dir.path(), &dry, "dry.yaml", &seen_dry);
    apply_in(&kcp, dir.path(), &dry, "real-only.yaml", &real_only);
    kcp_testing::wait::until("both webhooks see real writes", || {
        let name = format!("d-{}", fastrand::u32(..));
        kcp.kubectl_in_ok(&dry, &["create", "configmap", &name]);
        let named = |path: &str| {
            hooks
                .seen(path)
                .iter()
                .any(|r| r["request"]["name"] == name.as_str())
        };
        named("/dry") && named("/real-only")
    });
    kcp.kubectl_in_ok(
        &dry,
        &["create", "configmap", "dry-one", "--dry-run=server"],
    );
    kcp.kubectl_in_ok(&dry, &["create", "configmap", "x-real"]);
    let dry_seen: Vec<_> = hooks
        .seen("/dry")
        .into_iter()
        .filter(|r| r["request"]["name"] == "dry-one")
        .collect();
    assert_eq!(dry_seen.len(), 1);
    assert_eq!(dry_seen[0]["request"]["dryRun"], true);
    assert_eq!(dry_seen[0]["request"]["options"]["dryRun"], json!(["All"]));
    let real_names: Vec<_> = hooks
        .seen("/real-only")
        .iter()
        .map(|r| r["request"]["name"].clone())
        .collect();
    assert!(!real_names.contains(&json!("dry-one")), "{real_names:?}");
    assert!(!real_names.contains(&json!("x-real")), "{real_names:?}");

    // admissionregistration v1 refuses webhooks that may have side effects.
    let some = hooks
        .configuration("Validating", "some", "/dry", "", "configmaps", "")
        .replace("sideEffects: None", "sideEffects: Some");
    let path = write_file(dir.path(), "some.yaml", &some);
    let refused = kcp.kubectl_in_err(&dry, &["apply", "-f", &path]);
    assert!(refused.contains("sideEffects"), "{refused}");
}

#[test]
fn a_providers_webhook_validates_its_resource_in_every_consumer() {
    let kcp = Kcp::shared("admission-providers");
    let dir = tempfile::tempdir().unwrap();
    let hooks = Webhooks::start();
    let provider = kcp.workspace("provider");
    export_widgets(&kcp, dir.path(), &provider, "red, blue");
    let config = hooks.configuration(
        "Validating",
        "deny-bad",
        "/deny-bad",
        "example.io",
        "widgets",
        "",
    );
    apply_in(&kcp, dir.path(), &provider, "provider-hook.yaml", &config);
    let consumers = [kcp.workspace("consumer-a"), kcp.workspace("consumer-b")];
    for consumer in &consumers {
        bind(
            &kcp,
            dir.path(),
            consumer,
            &format!("{provider}:widgets"),
            &[],
        );
    }
    // A consumer's own webhook on the bound resource is never called.
    let own = hooks
        .configuration(
            "Validating",
            "own",
            "/deny-bad",
            "example.io",
            "widgets",
            "",
        )
        .replace("deny-bad", "own-path");
    apply_in(&kcp, dir.path(), &consumers[0], "own.yaml", &own);
    let widget = |name: &str| {
        write_file(
            dir.path(),
            &format!("{name}.yaml"),
            &format!(
                "apiVersion: example.io/v1\nkind: Widget\nmetadata: {{name: {name}, namespace: default}}\nspec: {{color: red}}\n"
            ),
        )
    };
    for consumer in &consumers {
        kcp_testing::wait::until("the provider's webhook refuses bad widgets", || {
            let refused = kcp.kubectl_in(consumer, &["create", "-f", &widget("bad")]);
            String::from_utf8_lossy(&refused.stderr)
                .contains("admission webhook \"deny-bad.example.com\" denied the request: bad is not a name here")
        });
        kcp.kubectl_in_ok(consumer, &["create", "-f", &widget("good")]);
    }
    // The provider's webhook saw each consumer's widgets, with the consumer's cluster.
    let clusters: Vec<String> = consumers.iter().map(|c| kcp.logical_cluster(c)).collect();
    let seen: Vec<String> = hooks
        .seen("/deny-bad")
        .iter()
        .filter(|r| r["request"]["name"] == "good")
        .map(|r| {
            r["request"]["object"]["metadata"]["annotations"]["kcp.io/cluster"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    for cluster in &clusters {
        assert!(seen.contains(cluster), "{seen:?} lacks {cluster}");
    }
    assert!(hooks.seen("/own-path").is_empty());
    // Local resources of the consumer still call its own webhooks.
    let local = hooks.configuration("Validating", "local", "/deny-bad", "", "configmaps", "");
    apply_in(&kcp, dir.path(), &consumers[1], "local.yaml", &local);
    kcp_testing::wait::until("the consumer's own webhook refuses bad configmaps", || {
        kcp.kubectl_in_err(&consumers[1], &["create", "configmap", "bad"])
            .contains("denied the request")
    });
}

#[test]
fn mutations_reinvoke_if_needed_and_services_are_dialled_by_name() {
    let kcp = Kcp::shared("admission-reinvocation");
    let dir = tempfile::tempdir().unwrap();
    let hooks = Webhooks::start();
    let ws = kcp.workspace("reinvoked");
    let ca = &hooks.ca_bundle;
    // `a-label` runs first and asks to run again when a later webhook changes the object.
    let label = hooks.configuration(
        "Mutating",
        "a-label",
        "/label",
        "",
        "configmaps",
        "  reinvocationPolicy: IfNeeded\n",
    );
    let annotate = hooks.configuration("Mutating", "b-annotate", "/annotate", "", "configmaps", "");
    apply_in(&kcp, dir.path(), &ws, "a.yaml", &label);
    apply_in(&kcp, dir.path(), &ws, "b.yaml", &annotate);
    kcp_testing::wait::until("both mutating webhooks are called", || {
        let name = format!("m-{}", fastrand::u32(..));
        kcp.kubectl_in_ok(&ws, &["create", "configmap", &name]);
        let got = kcp.kubectl_in_ok(
            &ws,
            &[
                "get",
                "configmap",
                &name,
                "-o",
                "jsonpath={.metadata.labels.webhooked}/{.metadata.annotations.annotated}",
            ],
        );
        got == "yes/yes"
    });
    kcp.kubectl_in_ok(&ws, &["create", "configmap", "twice"]);
    let labelled: Vec<_> = hooks
        .seen("/label")
        .into_iter()
        .filter(|r| r["request"]["name"] == "twice")
        .collect();
    assert_eq!(labelled.len(), 2, "reinvoked once");
    assert_eq!(
        labelled[1]["request"]["object"]["metadata"]["annotations"]["annotated"],
        "yes"
    );
    assert_eq!(
        hooks
            .seen("/annotate")
            .iter()
            .filter(|r| r["request"]["name"] == "twice")
            .count(),
        1
    );

    // kcp serves no Services: a webhook's Service is dialled by its DNS name, as kcp does.
    let by_service = format!(
        "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {{name: by-service}}
webhooks:
- name: by-service.example.com
  clientConfig:
    service: {{namespace: default, name: hook, path: /check}}
    caBundle: {ca}
  rules:
  - {{apiGroups: [\"\"], apiVersions: [v1], operations: [CREATE], resources: [secrets]}}
  sideEffects: None
  admissionReviewVersions: [v1]
"
    );
    apply_in(&kcp, dir.path(), &ws, "by-service.yaml", &by_service);
    kcp_testing::wait::until("the Service's name is dialled", || {
        let refused = kcp.kubectl_in(
            &ws,
            &[
                "create",
                "secret",
                "generic",
                &format!("s-{}", fastrand::u32(..)),
            ],
        );
        String::from_utf8_lossy(&refused.stderr).contains(
            "failed calling webhook \"by-service.example.com\": failed to call webhook: Post \"https://hook.default.svc:443/check?timeout=10s\": dial tcp hook.default.svc:443",
        )
    });
}
