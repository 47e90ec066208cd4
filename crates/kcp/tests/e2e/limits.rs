//! Hardening through kubectl: patch bombs answer 4xx and the server stays up, objects deeper
//! than the nesting limit are refused, duplicate keys are warned about or refused.

use super::support::{Kcp, write_file};

const CONFIGMAPS: &str = "/clusters/root/api/v1/namespaces/default/configmaps";

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
    assert!(!output.status.success(), "the patch should fail");
    String::from_utf8_lossy(&output.stderr).trim().to_string()
}

#[test]
fn patch_bombs_and_deep_objects_are_refused_and_the_server_stays_up() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::start(&dir.path().join("root"), &[]);
    kcp.kubectl_ok(&["create", "configmap", "target", "--from-literal=a=1"]);

    // Copies nesting a value into its own deepest object: ~26k levels if nothing stopped them.
    let mut ops = vec![r#"{"op":"add","path":"/data2","value":{}}"#.to_string()];
    let mut depth = 1;
    while depth < 26_000 {
        ops.push(format!(
            r#"{{"op":"copy","from":"/data2","path":"/data2{}"}}"#,
            "/a".repeat(depth)
        ));
        depth *= 2;
    }
    let stderr = json_patch(&kcp, dir.path(), &format!("[{}]", ops.join(",")));
    assert!(stderr.contains("exceeded max depth of 100"), "{stderr}");

    // Copies doubling one list again and again (exponential growth).
    let mut ops = vec![r#"{"op":"add","path":"/d","value":["xxxxxxxxxxxxxxxx"]}"#.to_string()];
    for _ in 0..40 {
        ops.push(r#"{"op":"copy","from":"/d","path":"/e"}"#.into());
        ops.push(r#"{"op":"copy","from":"/e","path":"/d/-"}"#.into());
    }
    let stderr = json_patch(&kcp, dir.path(), &format!("[{}]", ops.join(",")));
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
    let kcp = Kcp::start(&dir.path().join("root"), &[]);
    let body = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"dup","name":"dup"},"data":{"a":"1","a":"2"}}"#;
    let file = write_file(dir.path(), "dup.json", body);

    let output = kcp.kubectl(&["create", "--raw", CONFIGMAPS, "-f", &file]);
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

    let strict = format!("{CONFIGMAPS}?fieldValidation=Strict");
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
