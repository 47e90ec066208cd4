//! Hardening through kubectl: patch bombs answer 4xx and the server stays up, objects deeper
//! than the nesting limit are refused, duplicate keys are warned about or refused.

use kcp_testing::output::stderr;
use kcp_testing::patches::{exponential_copy_patch, self_nesting_patch};

use super::support::{Kcp, write_file};

/// The configmaps of namespace `default` in the test's workspace, as a raw path.
fn configmaps(kcp: &Kcp) -> String {
    format!(
        "/clusters/{}/api/v1/namespaces/default/configmaps",
        kcp.home()
    )
}

/// Sends a JSON patch from a file (some are larger than one command-line argument may be).
fn json_patch(kcp: &Kcp, dir: &std::path::Path, patch: &str) -> String {
    let file = write_file(dir, "patch.json", patch);
    let output = kcp.kubectl(&[
        "patch",
        "cm",
        "target",
        "--type",
        "json",
        "--patch-file",
        &file,
    ]);
    stderr(&output)
}

#[test]
fn patch_bombs_and_deep_objects_are_refused_and_the_server_stays_up() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::shared("limits-patch-bombs");
    kcp.kubectl_ok(&["create", "configmap", "target", "--from-literal=a=1"]);

    let stderr = json_patch(&kcp, dir.path(), &self_nesting_patch());
    assert!(stderr.contains("exceeded max depth of 100"), "{stderr}");

    let stderr = json_patch(&kcp, dir.path(), &exponential_copy_patch());
    assert!(
        stderr.contains("Unable to complete the copy, the accumulated size increase of copy is"),
        "{stderr}"
    );
    assert!(stderr.contains("exceeding the limit 3145728"), "{stderr}");

    // More operations than kube-apiserver takes: 413.
    let many = vec![r#"{"op":"test","path":"/data/a","value":"1"}"#; 10_001].join(",");
    let stderr = json_patch(&kcp, dir.path(), &format!("[{many}]"));
    assert!(
        stderr.contains(
            "Request entity too large: The allowed maximum operations in a JSON patch is 10000, got 10001"
        ),
        "{stderr}"
    );

    // A merge patch building a deep object: 422, nothing stored.
    let deep_patch = format!(
        r#"{{"metadata":{{"annotations":null}},"x":{}1{}}}"#,
        r#"{"a":"#.repeat(120),
        "}".repeat(120)
    );
    let output = kcp.kubectl(&[
        "patch",
        "cm",
        "target",
        "--type",
        "merge",
        "-p",
        &deep_patch,
    ]);
    assert!(!output.status.success());

    // A configmap deeper than the limit (in managedFields' free-form fieldsV1): 400.
    let deep_fields = format!(
        "{}{}",
        r#"{"f:a":"#.repeat(100),
        "{}".to_string() + &"}".repeat(100)
    );
    let deep = format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"deep","managedFields":[{{"manager":"m","operation":"Update","apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{deep_fields}}}]}}}}"#
    );
    let file = write_file(dir.path(), "deep.json", &deep);
    let output = kcp.kubectl(&["create", "-f", &file]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains(
            "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: exceeded max depth of 100"
        ),
        "{stderr}"
    );

    // The server is up and nothing changed.
    assert_eq!(
        kcp.kubectl_ok(&["get", "cm", "target", "-o", "jsonpath={.data}"]),
        r#"{"a":"1"}"#
    );
    let names = kcp.kubectl_ok(&["get", "cm", "-o", "name"]);
    assert!(!names.contains("deep"), "{names}");
}

#[test]
fn duplicate_keys_are_warned_about_or_refused_as_kubectl_shows() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::shared("limits-duplicate-keys");
    let body = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"dup","name":"dup"},"data":{"a":"1","a":"2"}}"#;
    let file = write_file(dir.path(), "dup.json", body);

    let output = kcp.kubectl(&["create", "--raw", &configmaps(&kcp), "-f", &file]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains(r#"Warning: duplicate field "metadata.name""#),
        "{stderr}"
    );
    assert!(
        stderr.contains(r#"Warning: duplicate field "data.a""#),
        "{stderr}"
    );
    assert_eq!(
        kcp.kubectl_ok(&["get", "cm", "dup", "-o", "jsonpath={.data.a}"]),
        "2"
    );

    let strict = format!("{}?fieldValidation=Strict", configmaps(&kcp));
    let body = body.replace(
        r#""name":"dup","name":"dup""#,
        r#""name":"dup2","name":"dup2""#,
    );
    let file = write_file(dir.path(), "dup2.json", &body);
    let output = kcp.kubectl(&["create", "--raw", &strict, "-f", &file]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains(
            r#"ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: duplicate field \"metadata.name\", duplicate field \"data.a\""#
        ) || stderr.contains(
            r#"ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: duplicate field "metadata.name", duplicate field "data.a""#
        ),
        "{stderr}"
    );
    let names = kcp.kubectl_ok(&["get", "cm", "-o", "name"]);
    assert!(!names.contains("dup2"), "{names}");
}
