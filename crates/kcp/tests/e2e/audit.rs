//! The audit log, as kube-apiserver writes it: a policy with each level writes the expected
//! events (read back by parsing the log), with kcp's workspace annotations; the log rotates by
//! size; a webhook backend that never answers drops events, counts them, and every request is
//! still answered. (A server of its own: the audit log is a flag.)

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use base64::Engine;
use serde_json::Value;

use super::support::{Kcp, write_file};

const POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: None
  resources: [{group: \"\", resources: [secrets]}]
- level: RequestResponse
  resources: [{group: \"\", resources: [configmaps]}]
  namespaces: [rr]
- level: Request
  resources: [{group: \"\", resources: [configmaps]}]
  namespaces: [req]
- level: Metadata
  omitStages: [RequestReceived]
  resources: [{group: \"\", resources: [configmaps]}]
  namespaces: [quiet]
- level: Metadata
";

/// The events of the log at `path`, by audit ID.
fn events(path: &Path) -> HashMap<String, Vec<Value>> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut by_id: HashMap<String, Vec<Value>> = HashMap::new();
    for line in text.lines() {
        let event: Value = serde_json::from_str(line).expect("a JSON event per line");
        let id = event["auditID"].as_str().unwrap().to_string();
        by_id.entry(id).or_default().push(event);
    }
    by_id
}

/// The events of the request that `matches` picks (its first event), once it has `stages`.
fn request_events(path: &Path, matches: impl Fn(&Value) -> bool, stages: usize) -> Vec<Value> {
    let mut found = Vec::new();
    kcp_testing::wait::until("the request's events are written", || {
        found = events(path)
            .into_values()
            .find(|events| matches(&events[0]))
            .unwrap_or_default();
        found.len() >= stages
    });
    found
}

fn is(event: &Value, verb: &str, namespace: &str, name: &str) -> bool {
    event["verb"] == verb
        && event["objectRef"]["resource"] == "configmaps"
        && event["objectRef"]["namespace"] == namespace
        && (name.is_empty() || event["objectRef"]["name"] == name)
}

#[test]
fn each_level_writes_its_events_with_the_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let policy = write_file(dir.path(), "policy.yaml", POLICY);
    let log = dir.path().join("audit.log");
    // A webhook backend too, taking EventLists.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let certificate = kcp_testing::https::certificate();
    let posted: Arc<Mutex<Vec<Value>>> = Arc::default();
    let recorder = posted.clone();
    let handler = Arc::new(move |_: &str, list: Value| {
        recorder.lock().unwrap().push(list);
        serde_json::json!({})
    });
    let (address, _server) = runtime.block_on(kcp_testing::https::serve(
        "127.0.0.1:0".parse().unwrap(),
        &certificate,
        handler,
    ));
    let ca = base64::engine::general_purpose::STANDARD.encode(&certificate.ca_pem);
    let hook = write_file(
        dir.path(),
        "webhook.yaml",
        &format!(
            "apiVersion: v1
kind: Config
clusters: [{{name: hook, cluster: {{server: \"https://{address}/audit\", certificate-authority-data: {ca}}}}}]
users: [{{name: hook, user: {{}}}}]
contexts: [{{name: hook, context: {{cluster: hook, user: hook}}}}]
current-context: hook
"
        ),
    );
    let kcp = Kcp::start(
        &dir.path().join("root"),
        &[
            "--audit-policy-file",
            &policy,
            "--audit-log-path",
            log.to_str().unwrap(),
            "--audit-webhook-config-file",
            &hook,
            "--audit-webhook-batch-max-wait=200ms",
        ],
    );
    let team = kcp.workspace("team");
    let cluster = kcp.logical_cluster(&team);
    for namespace in ["rr", "req", "meta", "quiet"] {
        kcp.kubectl_in_ok(&team, &["create", "namespace", namespace]);
        kcp.kubectl_in_ok(
            &team,
            &[
                "-n",
                namespace,
                "create",
                "configmap",
                "c",
                "--from-literal=k=v",
            ],
        );
    }
    kcp.kubectl_in_ok(&team, &["-n", "meta", "create", "secret", "generic", "s"]);

    // RequestResponse: both stages, the request and the response objects.
    let rr = request_events(&log, |e| is(e, "create", "rr", ""), 2);
    let stages: Vec<_> = rr.iter().map(|e| e["stage"].as_str().unwrap()).collect();
    assert_eq!(stages, ["RequestReceived", "ResponseComplete"]);
    let done = &rr[1];
    assert_eq!(done["apiVersion"], "audit.k8s.io/v1");
    assert_eq!(done["kind"], "Event");
    assert_eq!(done["level"], "RequestResponse");
    assert_eq!(done["requestObject"]["data"]["k"], "v");
    assert_eq!(done["responseObject"]["metadata"]["name"], "c");
    assert_eq!(done["responseStatus"]["code"], 201);
    assert_eq!(done["objectRef"]["apiVersion"], "v1");
    assert_eq!(done["user"]["username"], "kcp-admin");
    assert!(
        done["sourceIPs"][0]
            .as_str()
            .is_some_and(|ip| ip.starts_with("127.")),
        "{done}"
    );
    assert!(
        done["userAgent"].as_str().unwrap().starts_with("kubectl"),
        "{done}"
    );
    for event in &rr {
        let annotations = &event["annotations"];
        assert_eq!(annotations["kcp.io/cluster"], cluster.as_str(), "{event}");
        assert_eq!(annotations["tenancy.kcp.io/workspace"], cluster.as_str());
        assert_eq!(annotations["kcp.io/path"], "root:team");
        assert_eq!(annotations["authorization.k8s.io/decision"], "allow");
        assert_eq!(
            event["requestReceivedTimestamp"],
            rr[0]["requestReceivedTimestamp"]
        );
    }

    // Request: the request object only.
    let req = request_events(&log, |e| is(e, "create", "req", ""), 2);
    assert_eq!(req[1]["level"], "Request");
    assert_eq!(req[1]["requestObject"]["data"]["k"], "v");
    assert!(req[1].get("responseObject").is_none());

    // Metadata: neither; a stage the rule omits is not written.
    let meta = request_events(&log, |e| is(e, "create", "meta", ""), 2);
    assert_eq!(meta[1]["level"], "Metadata");
    assert!(meta[1].get("requestObject").is_none());
    let quiet = request_events(&log, |e| is(e, "create", "quiet", ""), 1);
    assert_eq!(quiet.len(), 1);
    assert_eq!(quiet[0]["stage"], "ResponseComplete");

    // The webhook got the same events, in EventLists.
    kcp_testing::wait::until("the webhook gets the events", || {
        let lists = posted.lock().unwrap();
        lists
            .iter()
            .all(|l| l["kind"] == "EventList" && l["apiVersion"] == "audit.k8s.io/v1")
            && lists
                .iter()
                .flat_map(|l| l["items"].as_array().cloned().unwrap_or_default())
                .any(|e| e["auditID"] == rr[1]["auditID"] && e["stage"] == "ResponseComplete")
    });

    // None: nothing.
    let all = events(&log);
    assert!(
        !all.values()
            .flatten()
            .any(|e| e["objectRef"]["resource"] == "secrets"),
        "secrets are not audited"
    );

    // A watch: received, started, and complete when it ends.
    let watch =
        format!("/clusters/{team}/api/v1/namespaces/meta/configmaps?watch=true&timeoutSeconds=1");
    kcp.kubectl_in_ok(&team, &["get", "--raw", &watch]);
    let watch = request_events(&log, |e| is(e, "watch", "meta", ""), 3);
    let stages: Vec<_> = watch.iter().map(|e| e["stage"].as_str().unwrap()).collect();
    assert_eq!(
        stages,
        ["RequestReceived", "ResponseStarted", "ResponseComplete"]
    );

    // Admission's annotations: a policy's validation failure and its audit annotation.
    let policy = write_file(
        dir.path(),
        "vap.yaml",
        "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: short-names}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [\"\"], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
  validations:
  - {expression: \"object.metadata.name.size() < 6\", message: names are short here}
  auditAnnotations:
  - {key: length, valueExpression: \"string(object.metadata.name.size())\"}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: short-names}
spec: {policyName: short-names, validationActions: [Warn, Audit]}
",
    );
    kcp.kubectl_in_ok(&team, &["apply", "-f", &policy]);
    kcp_testing::wait::until("the policy warns", || {
        let name = format!("long-{}", fastrand::u32(..));
        let out = kcp.kubectl_in(&team, &["-n", "meta", "create", "configmap", &name]);
        String::from_utf8_lossy(&out.stderr).contains("names are short here")
    });
    let audited = request_events(
        &log,
        |e| {
            is(e, "create", "meta", "")
                && e["annotations"]
                    .get("validation.policy.admission.k8s.io/validation_failure")
                    .is_some()
        },
        2,
    );
    let annotations = &audited[1]["annotations"];
    let failure: Value = serde_json::from_str(
        annotations["validation.policy.admission.k8s.io/validation_failure"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(failure[0]["policy"], "short-names");
    assert_eq!(failure[0]["binding"], "short-names");
    assert_eq!(failure[0]["message"], "names are short here");
    assert_eq!(
        failure[0]["validationActions"],
        serde_json::json!(["Warn", "Audit"])
    );
    assert!(
        annotations["short-names/length"].as_str().is_some(),
        "{annotations}"
    );

    // A refused request: the impersonated user, the decision, the failure.
    kcp.kubectl_ok(&["create", "configmap", "c"]);
    let refused = kcp.kubectl_err(&["--as=nobody", "-n", "default", "get", "configmap", "c"]);
    assert!(refused.contains("forbidden"), "{refused}");
    let denied = request_events(
        &log,
        |e| is(e, "get", "default", "c") && e["impersonatedUser"]["username"] == "nobody",
        2,
    );
    let done = &denied[1];
    assert_eq!(
        done["annotations"]["authorization.k8s.io/decision"],
        "forbid"
    );
    assert_eq!(done["responseStatus"]["code"], 403);
    assert_eq!(done["responseStatus"]["reason"], "Forbidden");
}

#[test]
fn the_log_rotates_and_a_hanging_webhook_never_holds_requests() {
    let dir = tempfile::tempdir().unwrap();
    let policy = write_file(
        dir.path(),
        "policy.yaml",
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: RequestResponse\n",
    );
    // A webhook that takes connections and never answers.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let _held = std::thread::spawn(move || {
        let mut open = Vec::new();
        for stream in listener.incoming() {
            open.push(stream);
        }
    });
    let hook = write_file(
        dir.path(),
        "webhook.yaml",
        &format!(
            "apiVersion: v1
kind: Config
clusters: [{{name: hook, cluster: {{server: \"https://{address}/audit\", insecure-skip-tls-verify: true}}}}]
users: [{{name: hook, user: {{}}}}]
contexts: [{{name: hook, context: {{cluster: hook, user: hook}}}}]
current-context: hook
"
        ),
    );
    let log = dir.path().join("logs").join("audit.log");
    let kcp = Kcp::start(
        &dir.path().join("root"),
        &[
            "--audit-policy-file",
            &policy,
            "--audit-log-path",
            log.to_str().unwrap(),
            "--audit-log-maxsize=1",
            "--audit-log-maxbackup=2",
            "--audit-webhook-config-file",
            &hook,
            "--audit-webhook-batch-max-size=10",
            "--audit-webhook-batch-max-wait=100ms",
        ],
    );
    // Large objects fill a megabyte of log quickly: the log rotates, two old files kept.
    let big = "x".repeat(400 * 1024);
    let file = write_file(dir.path(), "big.txt", &big);
    for i in 0..8 {
        kcp.kubectl_ok(&[
            "create",
            "configmap",
            &format!("big-{i}"),
            &format!("--from-file=big={file}"),
        ]);
    }
    let rotated = || {
        std::fs::read_dir(log.parent().unwrap())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_str().unwrap().starts_with("audit-"))
            .count()
    };
    kcp_testing::wait::until("the log rotates", || rotated() == 2);
    assert!(std::fs::metadata(&log).unwrap().len() <= 1 << 20);

    // The webhook holds its first batch forever; 10,000 requests are still answered,
    // and the events that do not fit its queue are counted as dropped.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let client = kcp.kube_client().await;
        let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(client);
        for _ in 0..10_000 {
            namespaces.get("default").await.unwrap();
        }
    });
    let metrics = kcp.kubectl_ok(&["get", "--raw", "/metrics"]);
    let dropped: f64 = metrics
        .lines()
        .find(|l| l.starts_with("apiserver_audit_error_total{plugin=\"buffered\"}"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    assert!(dropped > 0.0, "{metrics}");
    assert!(metrics.contains("apiserver_audit_event_total"), "{metrics}");
}
