//! Table-driven checks of every kind's rules: valid objects pass, invalid ones fail with
//! exactly Kubernetes' `field: message` lines.

use kcp_apis::builtin::{RESOURCES, Resource};
use serde_json::{Value, json};

use super::{prepare, validate_create, validate_update};
use crate::error::RegistryError;

fn resource(group: &str, kind: &str) -> &'static Resource {
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.kind == kind)
        .unwrap_or_else(|| panic!("{group} {kind} is served"))
}

/// `field: message` of each problem of a new object, after decoding checks and defaults.
fn create_errors(group: &str, kind: &str, mut object: Value) -> Vec<String> {
    let resource = resource(group, kind);
    prepare(resource, &mut object).expect("decodes");
    validate_create(resource, &object)
        .into_iter()
        .map(|c| format!("{}: {}", c.field, c.message))
        .collect()
}

fn update_errors(group: &str, kind: &str, mut old: Value, mut new: Value) -> Vec<String> {
    let resource = resource(group, kind);
    prepare(resource, &mut old).expect("old decodes");
    prepare(resource, &mut new).expect("new decodes");
    validate_update(resource, crate::strategy::Part::Whole, &new, &old)
        .into_iter()
        .map(|c| format!("{}: {}", c.field, c.message))
        .collect()
}

fn decode_failure(group: &str, kind: &str, mut object: Value) -> String {
    match prepare(resource(group, kind), &mut object) {
        Err(RegistryError::BadRequest(message)) => message,
        other => panic!("expected a 400, got {other:?}"),
    }
}

fn named(name: &str, rest: Value) -> Value {
    let mut object = json!({"metadata": {"name": name, "namespace": "ns"}});
    for (k, v) in rest.as_object().unwrap() {
        object[k] = v.clone();
    }
    object
}

const KEY_REGEX: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";
const NAME_PART: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const IMMUTABLE: &str = "Forbidden: field is immutable when `immutable` is set";

type Case = (&'static str, Value, &'static [&'static str]);

fn check_create(group: &str, kind: &str, cases: Vec<Case>) {
    for (what, object, expected) in cases {
        let got = create_errors(group, kind, object);
        let expected: Vec<String> = expected.iter().map(|s| s.to_string()).collect();
        assert_eq!(got, expected, "{kind}: {what}");
    }
}

#[test]
fn metadata_rules() {
    let long_annotation = "v".repeat(256 * 1024);
    let cases: Vec<Case> = vec![
        (
            "valid",
            named(
                "ok",
                json!({"metadata": {"name": "ok", "labels": {"app.kubernetes.io/name": "web", "empty": ""},
                    "annotations": {"Example.com/Note": "anything goes"}, "finalizers": ["example.com/f"],
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "d", "uid": "u", "controller": true}]}}),
            ),
            &[],
        ),
        (
            "missing name",
            json!({"metadata": {}}),
            &["metadata.name: Required value: name or generateName is required"],
        ),
        (
            "bad label key and value",
            json!({"metadata": {"name": "x", "labels": {"a b": "-v"}}}),
            &[
                "metadata.labels: Invalid value: \"a b\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
                "metadata.labels: Invalid value: \"-v\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
            ],
        ),
        (
            "annotations too large",
            json!({"metadata": {"name": "x", "annotations": {"a": long_annotation}}}),
            &["metadata.annotations: Too long: must have at most 262144 bytes"],
        ),
        (
            "bad finalizer",
            json!({"metadata": {"name": "x", "finalizers": ["a b"]}}),
            &[
                "metadata.finalizers: Invalid value: \"a b\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
            ],
        ),
        (
            "owner reference without version, kind, name, uid",
            json!({"metadata": {"name": "x", "ownerReferences": [{"apiVersion": "apps/"}]}}),
            &[
                "metadata.ownerReferences.apiVersion: Invalid value: \"apps/\": version must not be empty",
                "metadata.ownerReferences.kind: Invalid value: \"\": must not be empty",
                "metadata.ownerReferences.name: Invalid value: \"\": must not be empty",
                "metadata.ownerReferences.uid: Invalid value: \"\": must not be empty",
            ],
        ),
        (
            "two controllers",
            json!({"metadata": {"name": "x", "ownerReferences": [
                {"apiVersion": "v1", "kind": "A", "name": "a", "uid": "1", "controller": true},
                {"apiVersion": "v1", "kind": "B", "name": "b", "uid": "2", "controller": true}]}}),
            &[
                "metadata.ownerReferences: Invalid value: []v1.OwnerReference{v1.OwnerReference{APIVersion:\"v1\", Kind:\"A\", Name:\"a\", UID:\"1\", Controller:&true, BlockOwnerDeletion:(*bool)(nil)}, v1.OwnerReference{APIVersion:\"v1\", Kind:\"B\", Name:\"b\", UID:\"2\", Controller:&true, BlockOwnerDeletion:(*bool)(nil)}}: Only one reference can have Controller set to true. Found \"true\" in references for A/a and B/b",
            ],
        ),
        (
            "bad generateName",
            json!({"metadata": {"name": "Bad_x", "generateName": "Bad_"}}),
            &[
                "metadata.generateName: Invalid value: \"Bad_\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
                "metadata.name: Invalid value: \"Bad_x\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            ],
        ),
    ];
    check_create("", "ServiceAccount", cases);
    assert!(NAME_PART.starts_with("name part"));
}

#[test]
fn metadata_decoding_and_updates() {
    assert_eq!(
        decode_failure(
            "",
            "ConfigMap",
            json!({"metadata": {"name": "x", "labels": {"a": 1}}})
        ),
        "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: json: cannot unmarshal number into Go struct field ObjectMeta.metadata.labels of type string"
    );
    let deleting = json!({"metadata": {"name": "x", "deletionTimestamp": "2024-01-01T00:00:00Z", "finalizers": ["a.io/x"]}});
    let added = json!({"metadata": {"name": "x", "finalizers": ["a.io/x", "b.io/y"]}});
    assert_eq!(
        update_errors("", "ConfigMap", deleting, added),
        vec![
            "metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{\"b.io/y\"}"
        ]
    );
}

#[test]
fn namespaces() {
    check_create(
        "",
        "Namespace",
        vec![
            (
                "valid",
                json!({"metadata": {"name": "team-a"}, "spec": {"finalizers": ["kubernetes"]}}),
                &[],
            ),
            (
                "dots",
                json!({"metadata": {"name": "a.b"}}),
                &["metadata.name: Invalid value: \"a.b\": must not contain dots"],
            ),
            (
                "upper case",
                json!({"metadata": {"name": "Team"}}),
                &[
                    "metadata.name: Invalid value: \"Team\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
                ],
            ),
            (
                "unqualified finalizer",
                json!({"metadata": {"name": "n"}, "spec": {"finalizers": ["custom"]}}),
                &[
                    "spec.finalizers: Invalid value: \"custom\": name is neither a standard finalizer name nor is it fully qualified",
                ],
            ),
        ],
    );
}

#[test]
fn config_maps() {
    let big = "x".repeat(1024 * 1024 + 1);
    check_create(
        "",
        "ConfigMap",
        vec![
            (
                "valid",
                named(
                    "cm",
                    json!({"data": {"key.name": "v"}, "binaryData": {"bin": "AAE="}}),
                ),
                &[],
            ),
            (
                "bad key",
                named("x", json!({"data": {"a b": "1"}})),
                &[
                    "data[a b]: Invalid value: \"a b\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
                ],
            ),
            (
                "bad binary key",
                named("x", json!({"binaryData": {"..x": "AA=="}})),
                &["binaryData[..x]: Invalid value: \"..x\": must not start with '..'"],
            ),
            (
                "key in both",
                named(
                    "x",
                    json!({"data": {"k": "1"}, "binaryData": {"k": "AA=="}}),
                ),
                &["data[k]: Invalid value: \"k\": duplicate of key present in binaryData"],
            ),
            (
                "too big",
                named("x", json!({"data": {"k": big}})),
                &["[]: Too long: must have at most 1048576 bytes"],
            ),
        ],
    );
    assert!(KEY_REGEX.contains("config key"));
    assert_eq!(
        decode_failure(
            "",
            "ConfigMap",
            named("x", json!({"binaryData": {"k": "not base64"}}))
        ),
        "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: illegal base64 data at input byte 3"
    );
    assert_eq!(
        decode_failure("", "ConfigMap", named("x", json!({"data": {"k": 1}}))),
        "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: json: cannot unmarshal number into Go struct field ConfigMap.data of type string"
    );
    let immutable = named("x", json!({"immutable": true, "data": {"k": "1"}}));
    assert_eq!(
        update_errors("", "ConfigMap", immutable.clone(), immutable.clone()),
        Vec::<String>::new()
    );
    assert_eq!(
        update_errors(
            "",
            "ConfigMap",
            immutable.clone(),
            named("x", json!({"immutable": true, "data": {"k": "2"}}))
        ),
        vec![format!("data: {IMMUTABLE}")]
    );
    assert_eq!(
        update_errors(
            "",
            "ConfigMap",
            immutable,
            named(
                "x",
                json!({"data": {"k": "1"}, "binaryData": {"b": "AA=="}})
            )
        ),
        vec![
            format!("immutable: {IMMUTABLE}"),
            format!("binaryData: {IMMUTABLE}")
        ]
    );
    // Without `immutable` anything may change, and `immutable` may be set.
    assert!(
        update_errors(
            "",
            "ConfigMap",
            named("x", json!({"data": {"k": "1"}})),
            named("x", json!({"immutable": true}))
        )
        .is_empty()
    );
}

#[test]
fn secrets() {
    check_create(
        "",
        "Secret",
        vec![
            ("opaque", named("s", json!({"data": {"k": "djE="}})), &[]),
            (
                "string data folds into data",
                named("s", json!({"stringData": {"a b": "x"}})),
                &[
                    "data[a b]: Invalid value: \"a b\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
                ],
            ),
            (
                "service account token without account",
                named("s", json!({"type": "kubernetes.io/service-account-token"})),
                &["metadata.annotations[kubernetes.io/service-account.name]: Required value"],
            ),
            (
                "service account token",
                json!({"metadata": {"name": "s", "annotations": {"kubernetes.io/service-account.name": "default"}}, "type": "kubernetes.io/service-account-token"}),
                &[],
            ),
            (
                "docker config json missing",
                named("s", json!({"type": "kubernetes.io/dockerconfigjson"})),
                &["data[.dockerconfigjson]: Required value"],
            ),
            (
                "docker config json",
                named(
                    "s",
                    json!({"type": "kubernetes.io/dockerconfigjson", "data": {".dockerconfigjson": "eyJhdXRocyI6e319"}}),
                ),
                &[],
            ),
            (
                "basic auth without both",
                named("s", json!({"type": "kubernetes.io/basic-auth"})),
                &[
                    "data[username]: Required value",
                    "data[password]: Required value",
                ],
            ),
            (
                "basic auth with a password",
                named(
                    "s",
                    json!({"type": "kubernetes.io/basic-auth", "stringData": {"password": ""}}),
                ),
                &[],
            ),
            (
                "ssh auth empty key",
                named(
                    "s",
                    json!({"type": "kubernetes.io/ssh-auth", "data": {"ssh-privatekey": ""}}),
                ),
                &["data[ssh-privatekey]: Required value"],
            ),
            (
                "tls without key",
                named(
                    "s",
                    json!({"type": "kubernetes.io/tls", "data": {"tls.crt": ""}}),
                ),
                &["data[tls.key]: Required value"],
            ),
        ],
    );
    let mut secret = named("s", json!({"stringData": {"k": "v"}}));
    prepare(resource("", "Secret"), &mut secret).unwrap();
    assert_eq!(secret["data"]["k"], "dg==");
    assert_eq!(secret["type"], "Opaque");
    assert!(secret.get("stringData").is_none());
    assert_eq!(
        decode_failure("", "Secret", named("s", json!({"data": {"k": "YQ"}}))),
        "Secret in version \"v1\" cannot be handled as a Secret: illegal base64 data at input byte 0"
    );
    let tls = named(
        "s",
        json!({"type": "kubernetes.io/tls", "data": {"tls.crt": "", "tls.key": ""}}),
    );
    assert_eq!(
        update_errors(
            "",
            "Secret",
            tls,
            named("s", json!({"data": {"k": "djE="}}))
        ),
        vec!["type: Invalid value: \"Opaque\": field is immutable"]
    );
    // Stored before `type` was defaulted: still Opaque.
    let secrets = resource("", "Secret");
    let mut new = named("s", json!({"data": {"k": "djE="}}));
    prepare(secrets, &mut new).unwrap();
    assert!(
        validate_update(
            secrets,
            crate::strategy::Part::Whole,
            &new,
            &named("s", json!({}))
        )
        .is_empty()
    );
    let immutable = named("s", json!({"immutable": true, "data": {"k": "djE="}}));
    assert_eq!(
        update_errors(
            "",
            "Secret",
            immutable,
            named("s", json!({"immutable": false, "stringData": {"k": "v2"}}))
        ),
        vec![
            format!("immutable: {IMMUTABLE}"),
            format!("data: {IMMUTABLE}")
        ]
    );
}

#[test]
fn resource_quotas() {
    check_create(
        "",
        "ResourceQuota",
        vec![
            (
                "valid",
                named(
                    "q",
                    json!({"spec": {"hard": {"pods": "10", "requests.cpu": "500m", "count/widgets.example.com": 3}}}),
                ),
                &[],
            ),
            (
                "negative",
                named("q", json!({"spec": {"hard": {"pods": "-1"}}})),
                &["spec.hard[pods]: Invalid value: \"-1\": must be greater than or equal to 0"],
            ),
            (
                "fraction of an integer resource",
                named("q", json!({"spec": {"hard": {"secrets": "1500m"}}})),
                &["spec.hard[secrets]: Invalid value: 1500m: must be an integer"],
            ),
            (
                "unknown resource",
                named("q", json!({"spec": {"hard": {"widgets": "1"}}})),
                &[
                    "spec.hard[widgets]: Invalid value: \"widgets\": must be a standard resource for quota",
                ],
            ),
        ],
    );
    assert_eq!(
        decode_failure(
            "",
            "ResourceQuota",
            named("q", json!({"spec": {"hard": {"pods": "ten"}}}))
        ),
        "ResourceQuota in version \"v1\" cannot be handled as a ResourceQuota: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    );
}

#[test]
fn core_events() {
    check_create(
        "",
        "Event",
        vec![
            (
                "valid",
                named(
                    "pod.1",
                    json!({"involvedObject": {"kind": "Pod", "namespace": "ns", "name": "p"}, "reason": "Started"}),
                ),
                &[],
            ),
            (
                "other namespace",
                named("e", json!({"involvedObject": {"namespace": "other"}})),
                &[
                    "involvedObject.namespace: Invalid value: \"other\": does not match event.namespace",
                ],
            ),
            (
                "event time needs reporting fields",
                named(
                    "e",
                    json!({"involvedObject": {"namespace": "ns"}, "eventTime": "2024-01-01T00:00:00.000000Z"}),
                ),
                &[
                    "reportingController: Required value",
                    "reportingController: Invalid value: \"\": name part must be non-empty",
                    "reportingController: Invalid value: \"\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
                    "reportingInstance: Required value",
                    "action: Required value",
                    "reason: Required value",
                ],
            ),
        ],
    );
}

#[test]
fn events_v1() {
    let valid = named(
        "e",
        json!({"eventTime": "2024-01-01T00:00:00.000000Z", "regarding": {"namespace": "ns"}, "reportingController": "example.com/c",
            "reportingInstance": "i", "action": "Act", "reason": "Why", "type": "Normal"}),
    );
    let mut bad_type = valid.clone();
    bad_type["type"] = json!("Info");
    let mut deprecated = valid.clone();
    deprecated["deprecatedCount"] = json!(3);
    check_create(
        "events.k8s.io",
        "Event",
        vec![
            ("valid", valid.clone(), &[]),
            (
                "bad type",
                bad_type,
                &["type: Invalid value: \"\": has invalid value: Info"],
            ),
            (
                "deprecated fields",
                deprecated,
                &["count: Invalid value: \"\": needs to be unset"],
            ),
            (
                "no event time",
                named(
                    "e",
                    json!({"regarding": {"namespace": "ns"}, "type": "Warning"}),
                ),
                &["eventTime: Required value"],
            ),
        ],
    );
    let mut changed = valid.clone();
    changed["reason"] = json!("Other");
    assert_eq!(
        update_errors("events.k8s.io", "Event", valid, changed),
        vec!["reason: Invalid value: \"Other\": field is immutable"]
    );
}

#[test]
fn rbac_roles() {
    check_create(
        "rbac.authorization.k8s.io",
        "Role",
        vec![
            (
                "valid",
                named(
                    "system:reader",
                    json!({"rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}),
                ),
                &[],
            ),
            (
                "no verbs",
                named(
                    "r",
                    json!({"rules": [{"apiGroups": [""], "resources": ["pods"]}]}),
                ),
                &["rules[0].verbs: Required value: verbs must contain at least one value"],
            ),
            (
                "no groups or resources",
                named("r", json!({"rules": [{"verbs": ["get"]}]})),
                &[
                    "rules[0].apiGroups: Required value: resource rules must supply at least one api group",
                    "rules[0].resources: Required value: resource rules must supply at least one resource",
                ],
            ),
            (
                "non-resource URLs in a namespace",
                named(
                    "r",
                    json!({"rules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}]}),
                ),
                &[
                    "rules[0].nonResourceURLs: Invalid value: []string{\"/healthz\"}: namespaced rules cannot apply to non-resource URLs",
                ],
            ),
            (
                "path segment names",
                named("a/b", json!({})),
                &["metadata.name: Invalid value: \"a/b\": may not contain '/'"],
            ),
            (
                "dot",
                named("..", json!({})),
                &["metadata.name: Invalid value: \"..\": may not be '..'"],
            ),
        ],
    );
    check_create(
        "rbac.authorization.k8s.io",
        "ClusterRole",
        vec![(
            "non-resource URLs",
            json!({"metadata": {"name": "c"}, "rules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}]}),
            &[],
        )],
    );
}

#[test]
fn rbac_bindings() {
    let subjects = json!([
        {"kind": "User", "name": "alice"},
        {"kind": "Group", "name": "devs"},
        {"kind": "ServiceAccount", "name": "default", "namespace": "ns"}
    ]);
    check_create(
        "rbac.authorization.k8s.io",
        "RoleBinding",
        vec![
            (
                "valid, api groups defaulted",
                named(
                    "rb",
                    json!({"roleRef": {"kind": "ClusterRole", "name": "view"}, "subjects": subjects}),
                ),
                &[],
            ),
            (
                "no role ref",
                named("rb", json!({})),
                &[
                    "roleRef.kind: Unsupported value: \"\": supported values: \"Role\", \"ClusterRole\"",
                    "roleRef.name: Required value",
                ],
            ),
            (
                "bad subjects",
                named(
                    "rb",
                    json!({"roleRef": {"kind": "Role", "name": "r"}, "subjects": [
                    {"kind": "Robot", "name": "r2"},
                    {"kind": "User", "name": "bob", "apiGroup": "example.com"},
                    {"kind": "ServiceAccount", "name": "Bad", "apiGroup": "x"}]}),
                ),
                &[
                    "subjects[0].kind: Unsupported value: \"Robot\": supported values: \"ServiceAccount\", \"User\", \"Group\"",
                    "subjects[1].apiGroup: Unsupported value: \"example.com\": supported values: \"rbac.authorization.k8s.io\"",
                    "subjects[2].name: Invalid value: \"Bad\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
                    "subjects[2].apiGroup: Unsupported value: \"x\": supported values: \"\"",
                ],
            ),
        ],
    );
    check_create(
        "rbac.authorization.k8s.io",
        "ClusterRoleBinding",
        vec![(
            "role kind and service account namespace",
            json!({"metadata": {"name": "crb"}, "roleRef": {"kind": "Role", "name": "r"}, "subjects": [{"kind": "ServiceAccount", "name": "sa"}]}),
            &[
                "roleRef.kind: Unsupported value: \"Role\": supported values: \"ClusterRole\"",
                "subjects[0].namespace: Required value",
            ],
        )],
    );
    let old = named(
        "rb",
        json!({"roleRef": {"kind": "ClusterRole", "name": "view"}}),
    );
    // Compared after defaulting, also when the stored binding was never defaulted.
    let bindings = resource("rbac.authorization.k8s.io", "RoleBinding");
    let mut new = old.clone();
    prepare(bindings, &mut new).unwrap();
    assert!(validate_update(bindings, crate::strategy::Part::Whole, &new, &old).is_empty());
    assert!(
        update_errors(
            "rbac.authorization.k8s.io",
            "RoleBinding",
            old.clone(),
            old.clone()
        )
        .is_empty()
    );
    assert_eq!(
        update_errors(
            "rbac.authorization.k8s.io",
            "RoleBinding",
            old,
            named(
                "rb",
                json!({"roleRef": {"kind": "ClusterRole", "name": "edit"}})
            )
        ),
        vec![
            "roleRef: Invalid value: rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", Kind:\"ClusterRole\", Name:\"edit\"}: cannot change roleRef"
        ]
    );
}

#[test]
fn leases() {
    check_create(
        "coordination.k8s.io",
        "Lease",
        vec![
            (
                "valid",
                named(
                    "l",
                    json!({"spec": {"holderIdentity": "me", "leaseDurationSeconds": 15, "leaseTransitions": 0}}),
                ),
                &[],
            ),
            (
                "zero duration and negative transitions",
                named(
                    "l",
                    json!({"spec": {"leaseDurationSeconds": 0, "leaseTransitions": -1}}),
                ),
                &[
                    "spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0",
                    "spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0",
                ],
            ),
            (
                "holder without strategy",
                named("l", json!({"spec": {"preferredHolder": "me"}})),
                &[
                    "spec.preferredHolder: Forbidden: may only be specified if `strategy` is defined",
                ],
            ),
            (
                "unknown strategy",
                named("l", json!({"spec": {"strategy": "Newest"}})),
                &[
                    "spec.strategy.strategy: Unsupported value: \"Newest\": supported values: \"OldestEmulationVersion\"",
                ],
            ),
        ],
    );
}

#[test]
fn certificate_signing_requests() {
    let pem = "-----BEGIN CERTIFICATE REQUEST-----\nMIIB\n-----END CERTIFICATE REQUEST-----\n";
    let request = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, pem);
    check_create(
        "certificates.k8s.io",
        "CertificateSigningRequest",
        vec![
            (
                "valid",
                json!({"metadata": {"name": "any:name@at"}, "spec": {"request": request, "usages": ["client auth"], "signerName": "example.com/signer"}}),
                &[],
            ),
            (
                "nothing",
                json!({"metadata": {"name": "c"}, "spec": {}}),
                &[
                    "spec.request: Invalid value: []byte(nil): PEM block type must be CERTIFICATE REQUEST",
                    "spec.usages: Required value",
                    "spec.signerName: Required value",
                ],
            ),
            (
                "bad signer and usage",
                json!({"metadata": {"name": "c"}, "spec": {"request": request, "usages": ["flying", "signing", "signing"], "signerName": "signer", "expirationSeconds": 60}}),
                &[
                    "spec.usages[0]: Unsupported value: \"flying\": supported values: \"any\", \"cert sign\", \"client auth\", \"code signing\", \"content commitment\", \"crl sign\", \"data encipherment\", \"decipher only\", \"digital signature\", \"email protection\", \"encipher only\", \"ipsec end system\", \"ipsec tunnel\", \"ipsec user\", \"key agreement\", \"key encipherment\", \"microsoft sgc\", \"netscape sgc\", \"ocsp signing\", \"s/mime\", \"server auth\", \"signing\", \"timestamping\"",
                    "spec.usages[2]: Duplicate value: \"signing\"",
                    "spec.signerName: Invalid value: \"signer\": must be a fully qualified domain and path of the form 'example.com/signer-name'",
                    "spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 600 seconds (10 minutes)",
                ],
            ),
        ],
    );
    assert_eq!(
        decode_failure(
            "certificates.k8s.io",
            "CertificateSigningRequest",
            json!({"spec": {"request": "%%%"}})
        ),
        "CertificateSigningRequest in version \"v1\" cannot be handled as a CertificateSigningRequest: illegal base64 data at input byte 0"
    );
}

#[test]
fn webhook_configurations() {
    let hook = |extra: Value| {
        let mut hook = json!({"name": "check.example.com", "clientConfig": {"url": "https://hooks.example.com/check"},
            "sideEffects": "None", "admissionReviewVersions": ["v1"],
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]});
        for (k, v) in extra.as_object().unwrap() {
            hook[k] = v.clone();
        }
        json!({"metadata": {"name": "w"}, "webhooks": [hook]})
    };
    let cases: Vec<Case> = vec![
        ("valid", hook(json!({})), &[]),
        (
            "unqualified name, no side effects, no versions",
            hook(json!({"name": "check", "sideEffects": null, "admissionReviewVersions": null})),
            &[
                "webhooks[0].name: Invalid value: \"check\": should be a domain with at least three segments separated by dots",
                "webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun",
                "webhooks[0].admissionReviewVersions: Required value: must specify one of v1, v1beta1",
            ],
        ),
        (
            "url and service",
            hook(
                json!({"clientConfig": {"url": "https://a.example.com", "service": {"name": "s", "namespace": "n"}}}),
            ),
            &[
                "webhooks[0].clientConfig: Required value: exactly one of url or service is required",
            ],
        ),
        (
            "http url",
            hook(json!({"clientConfig": {"url": "http://a.example.com/x?y=1"}})),
            &[
                "webhooks[0].clientConfig.url: Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format: https://host[/path]",
                "webhooks[0].clientConfig.url: Invalid value: \"y=1\": query parameters are not permitted in the URL",
            ],
        ),
        (
            "service without namespace",
            hook(json!({"clientConfig": {"service": {"name": "s"}}})),
            &["webhooks[0].clientConfig.service.namespace: Required value"],
        ),
        (
            "side effects and timeout",
            hook(json!({"sideEffects": "Some", "timeoutSeconds": 31, "failurePolicy": "Maybe"})),
            &[
                "webhooks[0].failurePolicy: Unsupported value: \"Maybe\": supported values: \"Fail\", \"Ignore\"",
                "webhooks[0].sideEffects: Unsupported value: \"Some\": supported values: \"None\", \"NoneOnDryRun\"",
                "webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds",
            ],
        ),
        (
            "match conditions",
            hook(json!({"matchConditions": [
                {"name": "ok", "expression": "request.dryRun != true"},
                {"name": "ok", "expression": "object.metadata.name == "},
                {"name": "", "expression": " "},
            ]})),
            &[
                "webhooks[0].matchConditions[1].expression: Invalid value: \"object.metadata.name ==\": compilation failed: ERROR: <input>:1:24: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}\n| object.metadata.name ==\n| .......................^",
                "webhooks[0].matchConditions[1].name: Duplicate value: \"ok\"",
                "webhooks[0].matchConditions[2].expression: Required value",
                "webhooks[0].matchConditions[2].name: Required value",
            ],
        ),
        (
            "unknown review version",
            hook(json!({"admissionReviewVersions": ["v2"]})),
            &[
                "webhooks[0].admissionReviewVersions: Invalid value: []string{\"v2\"}: must include at least one of v1, v1beta1",
            ],
        ),
    ];
    check_create(
        "admissionregistration.k8s.io",
        "ValidatingWebhookConfiguration",
        cases,
    );
    let mut defaulted = hook(json!({"clientConfig": {"service": {"name": "s", "namespace": "n"}}}));
    prepare(
        resource(
            "admissionregistration.k8s.io",
            "MutatingWebhookConfiguration",
        ),
        &mut defaulted,
    )
    .unwrap();
    let hook = &defaulted["webhooks"][0];
    assert_eq!(
        (
            &hook["failurePolicy"],
            &hook["matchPolicy"],
            &hook["timeoutSeconds"],
            &hook["reinvocationPolicy"]
        ),
        (
            &json!("Fail"),
            &json!("Equivalent"),
            &json!(10),
            &json!("Never")
        )
    );
    assert_eq!(hook["clientConfig"]["service"]["port"], 443);
    assert_eq!(hook["rules"][0]["scope"], "*");
}

#[test]
fn custom_resource_definitions() {
    let crd = |name: &str, spec: Value| json!({"metadata": {"name": name}, "spec": spec});
    let schema = json!({"openAPIV3Schema": {"type": "object"}});
    let versions = json!([{"name": "v1", "served": true, "storage": true, "schema": schema}]);
    check_create(
        "apiextensions.k8s.io",
        "CustomResourceDefinition",
        vec![
            (
                "valid",
                crd(
                    "widgets.example.com",
                    json!({"group": "example.com", "scope": "Namespaced", "names": {"plural": "widgets", "kind": "Widget"}, "versions": versions}),
                ),
                &[],
            ),
            (
                "empty spec",
                crd("x", json!({})),
                &[
                    "metadata.name: Invalid value: \"x\": must be spec.names.plural+\".\"+spec.group",
                    "spec.group: Required value",
                    "spec.scope: Required value",
                    "spec.versions: Invalid value: []apiextensions.CustomResourceDefinitionVersion{}: must have exactly one version marked as storage version",
                    "spec.names.plural: Required value",
                    "spec.names.singular: Required value",
                    "spec.names.kind: Required value",
                    "spec.names.listKind: Required value",
                ],
            ),
            (
                "two storage versions and a bad scope",
                crd(
                    "widgets.example.com",
                    json!({"group": "example.com", "scope": "Global", "names": {"plural": "widgets", "kind": "Widget"},
                    "versions": [{"name": "v1", "served": true, "storage": true, "schema": schema}, {"name": "V2", "served": true, "storage": true, "schema": schema}]}),
                ),
                &[
                    "spec.scope: Unsupported value: \"Global\": supported values: \"Cluster\", \"Namespaced\"",
                    "spec.versions[1].name: Invalid value: \"V2\": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
                    "spec.versions: Invalid value: []apiextensions.CustomResourceDefinitionVersion{apiextensions.CustomResourceDefinitionVersion{Name:\"v1\", Served:true, Storage:true, ...}, apiextensions.CustomResourceDefinitionVersion{Name:\"V2\", Served:true, Storage:true, ...}}: must have exactly one version marked as storage version",
                ],
            ),
            (
                "group without a dot",
                crd(
                    "widgets.example",
                    json!({"group": "example", "scope": "Cluster", "names": {"plural": "widgets", "kind": "Widget"}, "versions": versions}),
                ),
                &[
                    "spec.group: Invalid value: \"example\": should be a domain with at least one dot",
                ],
            ),
            (
                "missing and non-structural schemas",
                crd(
                    "widgets.example.com",
                    json!({"group": "example.com", "scope": "Cluster", "names": {"plural": "widgets", "kind": "Widget"},
                    "versions": [
                        {"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {}}}}},
                        {"name": "v2", "served": true, "storage": false},
                    ]}),
                ),
                &[
                    "spec.versions[0].schema.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields",
                    "spec.versions[1].schema.openAPIV3Schema: Required value: schemas are required",
                ],
            ),
        ],
    );
    let mut old = crd(
        "widgets.example.com",
        json!({"group": "example.com", "scope": "Namespaced", "names": {"plural": "widgets", "kind": "Widget"}, "versions": versions}),
    );
    old["status"] = json!({"storedVersions": ["v1"]});
    let mut new = old.clone();
    new["spec"]["names"]["plural"] = json!("gadgets");
    new["metadata"]["name"] = json!("widgets.example.com");
    assert_eq!(
        update_errors("apiextensions.k8s.io", "CustomResourceDefinition", old, new),
        vec![
            "metadata.name: Invalid value: \"widgets.example.com\": must be spec.names.plural+\".\"+spec.group",
            "spec.names.plural: Invalid value: \"gadgets\": field is immutable",
        ]
    );
}

#[test]
fn custom_resource_definition_conversion() {
    let schema = json!({"openAPIV3Schema": {"type": "object"}});
    let crd = |conversion: Value| {
        json!({"metadata": {"name": "widgets.example.com"}, "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": schema}],
            "conversion": conversion}})
    };
    let url = json!({"url": "https://127.0.0.1:8443/convert"});
    check_create(
        "apiextensions.k8s.io",
        "CustomResourceDefinition",
        vec![
            (
                "a webhook with a url",
                crd(
                    json!({"strategy": "Webhook", "webhook": {"clientConfig": url, "conversionReviewVersions": ["v2", "v1"]}}),
                ),
                &[],
            ),
            (
                "a webhook without client config or review versions",
                crd(json!({"strategy": "Webhook"})),
                &[
                    "spec.conversion.webhookClientConfig: Required value: required when strategy is set to Webhook",
                    "spec.conversion.conversionReviewVersions: Required value",
                ],
            ),
            (
                "review versions the server does not speak",
                crd(
                    json!({"strategy": "Webhook", "webhook": {"clientConfig": url, "conversionReviewVersions": ["v2", "v2", "V3"]}}),
                ),
                &[
                    "spec.conversion.conversionReviewVersions[1]: Invalid value: \"v2\": duplicate version",
                    "spec.conversion.conversionReviewVersions[2]: Invalid value: \"V3\": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
                    "spec.conversion.conversionReviewVersions: Invalid value: []string{\"v2\", \"v2\", \"V3\"}: must include at least one of v1, v1beta1",
                ],
            ),
            (
                "webhook settings without the Webhook strategy",
                crd(
                    json!({"strategy": "None", "webhook": {"clientConfig": url, "conversionReviewVersions": ["v1"]}}),
                ),
                &[
                    "spec.conversion.webhookClientConfig: Forbidden: should not be set when strategy is not set to Webhook",
                    "spec.conversion.conversionReviewVersions: Forbidden: should not be set when strategy is not set to Webhook",
                ],
            ),
        ],
    );
}

#[test]
fn custom_resource_definition_stored_versions_stay_in_spec() {
    let schema = json!({"openAPIV3Schema": {"type": "object"}});
    let version = |name: &str, storage: bool| json!({"name": name, "served": true, "storage": storage, "schema": schema});
    let old = json!({"metadata": {"name": "widgets.example.com"}, "spec": {
        "group": "example.com", "scope": "Namespaced",
        "names": {"plural": "widgets", "kind": "Widget"},
        "versions": [version("v1beta1", false), version("v1", true)]},
        "status": {"storedVersions": ["v1beta1", "v1"]}});
    let mut new = old.clone();
    new["spec"]["versions"] = json!([version("v1", true)]);
    assert_eq!(
        update_errors(
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            old.clone(),
            new
        ),
        vec![
            "status.storedVersions[0]: Invalid value: \"v1beta1\": missing from spec.versions; v1beta1 was previously a storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted in v1beta1 and removes v1beta1 from status.storedVersions"
        ]
    );
    let mut emptied = old.clone();
    emptied["status"]["storedVersions"] = json!([]);
    assert_eq!(
        update_errors(
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            old,
            emptied
        ),
        vec![
            "status.storedVersions: Invalid value: []string{}: must have at least one stored version"
        ]
    );
}

#[test]
fn defaults_never_panic_on_fields_of_the_wrong_type() {
    let hooks = json!([
        {"name": "a.example.com", "clientConfig": "x"},
        {"name": "b.example.com", "clientConfig": {"url": "https://example.com"}},
        {"name": "c.example.com", "clientConfig": {"service": "x"}},
    ]);
    for kind in [
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ] {
        let mut object = json!({"metadata": {"name": "w"}, "webhooks": hooks});
        let _ = prepare(resource("admissionregistration.k8s.io", kind), &mut object);
        // Defaults go only where their parent is an object; nothing else is made up.
        assert_eq!(object["webhooks"][0]["clientConfig"], "x", "{kind}");
        assert_eq!(
            object["webhooks"][1]["clientConfig"],
            json!({"url": "https://example.com"}),
            "{kind}"
        );
    }
    for (kind, field) in [
        ("CustomResourceDefinition", "spec"),
        ("Secret", "data"),
        ("RoleBinding", "roleRef"),
    ] {
        let group = match kind {
            "CustomResourceDefinition" => "apiextensions.k8s.io",
            "RoleBinding" => "rbac.authorization.k8s.io",
            _ => "",
        };
        for value in [json!("x"), json!(1), json!([]), json!(null)] {
            let mut object = json!({"metadata": {"name": "w"}, "stringData": {"k": "v"}});
            object[field] = value.clone();
            let _ = prepare(resource(group, kind), &mut object);
        }
    }
}

#[test]
fn decoding_drops_undeclared_fields_for_every_writer() {
    let mut object =
        json!({"metadata": {"name": "cm", "bogus": 1}, "data": {"a": "b"}, "spec": {"x": 1}});
    prepare(resource("", "ConfigMap"), &mut object).unwrap();
    assert_eq!(
        object,
        json!({"metadata": {"name": "cm"}, "data": {"a": "b"}})
    );
}
