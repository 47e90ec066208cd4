//! kubectl's everyday read commands: output formats, chunked lists, `wait`, `events`.

use kcp_testing::output::Lines;
use kcp_testing::wait;

use super::support::{Kcp, is_namespace_default, without_namespace_defaults, write_file};

#[test]
fn get_prints_yaml_custom_columns_and_reads_in_chunks() {
    let kcp = Kcp::shared("out-get");
    kcp.kubectl_ok(&["create", "namespace", "outputs"]);
    for i in 0..7 {
        kcp.kubectl_ok(&[
            "create",
            "configmap",
            &format!("c{i}"),
            "-n",
            "outputs",
            &format!("--from-literal=index={i}"),
        ]);
    }

    let yaml = kcp.kubectl_ok(&["get", "cm", "c3", "-n", "outputs", "-o", "yaml"]);
    assert!(yaml.contains("kind: ConfigMap\n"), "{yaml}");
    assert!(yaml.contains("  index: \"3\"\n"), "{yaml}");
    assert!(yaml.contains("  namespace: outputs\n"), "{yaml}");

    let columns = kcp.kubectl_ok(&[
        "get",
        "cm",
        "-n",
        "outputs",
        "-o",
        "custom-columns=NAME:.metadata.name,INDEX:.data.index",
    ]);
    let rows: Vec<Vec<&str>> = columns
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|row| !row.first().is_some_and(|name| is_namespace_default(name)))
        .collect();
    assert_eq!(rows[0], ["NAME", "INDEX"]);
    assert_eq!(rows[4], ["c3", "3"]);
    assert_eq!(rows.len(), 8);

    let wide = kcp.kubectl_ok(&["get", "cm", "-n", "outputs", "-o", "wide"]);
    assert!(wide.starts_with("NAME"), "{wide}");
    assert_eq!(without_namespace_defaults(&wide).lines().count(), 8);

    // --chunk-size pages with limit/continue: every item arrives, over several requests.
    let chunked = kcp.kubectl(&[
        "get",
        "cm",
        "-n",
        "outputs",
        "--chunk-size=2",
        "-o",
        "name",
        "-v=6",
    ]);
    assert!(chunked.status.success());
    let names = without_namespace_defaults(&String::from_utf8_lossy(&chunked.stdout));
    assert_eq!(names.lines().count(), 7, "{names}");
    let log = String::from_utf8_lossy(&chunked.stderr);
    let pages = log
        .lines()
        .filter(|l| l.contains("/configmaps?") && l.contains("limit=2"))
        .count();
    assert_eq!(pages, 4, "{log}");
    assert_eq!(log.matches("continue=").count(), 3, "{log}");
}

#[test]
fn wait_for_jsonpath_sees_a_later_change() {
    let kcp = Kcp::shared("out-wait");
    kcp.kubectl_ok(&["create", "namespace", "waiting"]);
    kcp.kubectl_ok(&[
        "create",
        "configmap",
        "flag",
        "-n",
        "waiting",
        "--from-literal=state=pending",
    ]);

    let kubeconfig = kcp.kubeconfig();
    // A first wait times out quickly while the value is still pending.
    let early = kcp.kubectl(&[
        "wait",
        "configmap/flag",
        "-n",
        "waiting",
        "--for=jsonpath={.data.state}=ready",
        "--timeout=1s",
    ]);
    assert!(!early.status.success());

    // `-v=6` logs each request kubectl makes as it is answered, to stderr.
    let mut waiting = std::process::Command::new("kubectl")
        .env("KUBECONFIG", &kubeconfig)
        .args([
            "wait",
            "configmap/flag",
            "-n",
            "waiting",
            "--for=jsonpath={.data.state}=ready",
            "--timeout=30s",
            "-v=6",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let requests = Lines::of(waiting.stderr.take().unwrap());
    // Once kubectl watches the configmap (having listed it, still pending), the change below is
    // one it has to see arrive.
    requests.find("watch=true");
    kcp.kubectl_ok(&[
        "patch",
        "configmap",
        "flag",
        "-n",
        "waiting",
        "--type=merge",
        "-p",
        r#"{"data":{"state":"ready"}}"#,
    ]);
    let output = waiting.wait_with_output().unwrap();
    assert!(output.status.success(), "{output:?}");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        "configmap/flag condition met"
    );
}

#[test]
fn kubectl_events_lists_events_for_an_object() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::shared("out-events");
    kcp.kubectl_ok(&["create", "namespace", "happenings"]);
    kcp.kubectl_ok(&["create", "configmap", "subject", "-n", "happenings"]);
    let event = write_file(
        dir.path(),
        "event.yaml",
        "apiVersion: v1
kind: Event
metadata:
  name: subject.1
  namespace: happenings
involvedObject:
  apiVersion: v1
  kind: ConfigMap
  name: subject
  namespace: happenings
reason: Rotated
message: the keys were rotated
type: Normal
firstTimestamp: \"2026-01-01T00:00:00Z\"
lastTimestamp: \"2026-01-01T00:00:00Z\"
count: 1
source:
  component: tester
",
    );
    kcp.kubectl_ok(&["create", "-f", &event]);
    let other = event.replace("event.yaml", "other.yaml");
    std::fs::write(
        &other,
        std::fs::read_to_string(&event)
            .unwrap()
            .replace("subject.1", "unrelated.1")
            .replace("name: subject\n", "name: unrelated\n")
            .replace("Rotated", "Ignored"),
    )
    .unwrap();
    kcp.kubectl_ok(&["create", "-f", &other]);

    let all = kcp.kubectl_ok(&["events", "-n", "happenings"]);
    assert!(all.contains("Rotated") && all.contains("Ignored"), "{all}");
    let header: Vec<&str> = all.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    );

    let for_subject = kcp.kubectl_ok(&["events", "-n", "happenings", "--for", "configmap/subject"]);
    assert!(for_subject.contains("ConfigMap/subject"), "{for_subject}");
    assert!(
        for_subject.contains("the keys were rotated"),
        "{for_subject}"
    );
    assert!(!for_subject.contains("Ignored"), "{for_subject}");
}

#[test]
fn a_continue_token_past_compaction_is_expired() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::start(
        &dir.path().join("root"),
        &["--etcd-compaction-interval", "1s"],
    );
    kcp.kubectl_ok(&["create", "namespace", "compacted"]);
    for name in ["a", "b", "c"] {
        kcp.kubectl_ok(&["create", "configmap", name, "-n", "compacted"]);
    }
    let collection = "/clusters/root/api/v1/namespaces/compacted/configmaps";
    let page: serde_json::Value =
        serde_json::from_str(&kcp.kubectl_ok(&["get", "--raw", &format!("{collection}?limit=1")]))
            .unwrap();
    let token = page["metadata"]["continue"].as_str().unwrap().to_string();
    // Still good right away.
    kcp.kubectl_ok(&[
        "get",
        "--raw",
        &format!("{collection}?limit=1&continue={token}"),
    ]);
    kcp.kubectl_ok(&["create", "configmap", "later", "-n", "compacted"]);
    // The compactor runs every second; within a few, history passes the token's revision.
    let expired = wait::until("the continue token has expired", || {
        let output = kcp.kubectl(&[
            "get",
            "--raw",
            &format!("{collection}?limit=1&continue={token}"),
        ]);
        (!output.status.success()).then_some(output)
    });
    let stderr = String::from_utf8_lossy(&expired.stderr);
    assert!(
        stderr.contains("Error from server (Expired): The provided continue parameter is too old to display a consistent list result."),
        "{stderr}"
    );
    // The Status offers a token for the rest of the list at the latest revision, as
    // kube-apiserver's does: everything after the first page, including what came later.
    let admin = kcp_testing::kubeconfig::admin_token(&kcp.root, "kcp-admin");
    let curl = |query: &str| {
        let output = std::process::Command::new("curl")
            .args(["-sS", "--cacert"])
            .arg(kcp.root.join("ca.crt"))
            .arg("-H")
            .arg(format!("Authorization: Bearer {}", admin.trim()))
            .arg(format!("{}{collection}?{query}", kcp.base_url()))
            .output()
            .expect("run curl");
        serde_json::from_slice::<serde_json::Value>(&output.stdout).unwrap()
    };
    let status = curl(&format!("limit=1&continue={token}"));
    assert_eq!(status["code"], 410, "{status}");
    assert_eq!(status["reason"], "Expired", "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("or use the continue token in this response"),
        "{status}"
    );
    let rest_token = status["metadata"]["continue"].as_str().unwrap();
    let rest = curl(&format!("limit=100&continue={rest_token}"));
    let rest_names: Vec<&str> = rest["items"]
        .as_array()
        .unwrap_or_else(|| panic!("{rest}"))
        .iter()
        .map(|item| item["metadata"]["name"].as_str().unwrap())
        .filter(|name| !is_namespace_default(name))
        .collect();
    assert_eq!(rest_names, ["b", "c", "later"], "{rest}");
    // A fresh list works and sees everything.
    let names = without_namespace_defaults(&kcp.kubectl_ok(&[
        "get",
        "cm",
        "-n",
        "compacted",
        "-o",
        "name",
    ]));
    assert_eq!(names.lines().count(), 4, "{names}");
}
