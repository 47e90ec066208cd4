//! The columns `kubectl get` prints for each built-in kind, as kube-apiserver's printers define
//! them: column definitions (priority 1 = only with `-o wide`) and the cells of one object.
//! The server always fills every column; kubectl hides the wide ones.
//!
//! Kinds without a printer upstream get the default convertor's `Name`, `Created At` (roles,
//! cluster roles, CRDs); anything else gets `Name`, `Age`.

use jiff::Timestamp;
use kcp_apis::builtin::Resource;
use serde_json::{Value, json};

/// One column of a Table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Column {
    pub name: &'static str,
    /// The OpenAPI type: `string`, `integer`, `date`, ...
    pub kind: &'static str,
    pub format: &'static str,
    pub description: &'static str,
    pub priority: u8,
}

impl Column {
    pub fn to_json(self) -> Value {
        json!({
            "name": self.name,
            "type": self.kind,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        })
    }
}

const fn col(name: &'static str, kind: &'static str, description: &'static str) -> Column {
    Column {
        name,
        kind,
        format: "",
        description,
        priority: 0,
    }
}

const fn wide(name: &'static str, kind: &'static str, description: &'static str) -> Column {
    Column {
        priority: 1,
        ..col(name, kind, description)
    }
}

const NAME: Column = Column {
    format: "name",
    ..col(
        "Name",
        "string",
        "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated.",
    )
};
const AGE: Column = col(
    "Age",
    "string",
    "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.",
);
const CREATED_AT: Column = Column {
    name: "Created At",
    kind: "date",
    ..AGE
};

const NAME_AGE: &[Column] = &[NAME, AGE];
const NAME_CREATED_AT: &[Column] = &[NAME, CREATED_AT];
const NAMESPACE: &[Column] = &[
    NAME,
    col("Status", "string", "The status of the namespace"),
    AGE,
];
const CONFIG_MAP: &[Column] = &[
    NAME,
    col(
        "Data",
        "string",
        "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'.",
    ),
    AGE,
];
const SECRET: &[Column] = &[
    NAME,
    col(
        "Type",
        "string",
        "Used to facilitate programmatic handling of secret data.",
    ),
    col(
        "Data",
        "string",
        "Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' or '.'.",
    ),
    AGE,
];
const SERVICE_ACCOUNT: &[Column] = &[
    NAME,
    col(
        "Secrets",
        "string",
        "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use.",
    ),
    AGE,
];
const EVENT: &[Column] = &[
    col(
        "Last Seen",
        "string",
        "The time at which the most recent occurrence of this event was recorded.",
    ),
    col(
        "Type",
        "string",
        "Type of this event (Normal, Warning), new types could be added in the future",
    ),
    col(
        "Reason",
        "string",
        "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
    ),
    col("Object", "string", "The object that this event is about."),
    wide(
        "Subobject",
        "string",
        "If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement, such as desiredState.manifest.containers[2].",
    ),
    wide(
        "Source",
        "string",
        "The component reporting this event. Should be a short machine understandable string.",
    ),
    col(
        "Message",
        "string",
        "A human-readable description of the status of this operation.",
    ),
    wide(
        "First Seen",
        "string",
        "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)",
    ),
    wide(
        "Count",
        "string",
        "The number of times this event has occurred.",
    ),
    Column {
        priority: 1,
        ..NAME
    },
];
const RESOURCE_QUOTA: &[Column] = &[
    NAME,
    col(
        "Request",
        "string",
        "Request represents a minimum amount of cpu/memory that a container may consume.",
    ),
    col(
        "Limit",
        "string",
        "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node.",
    ),
    AGE,
];
const LEASE: &[Column] = &[
    NAME,
    col(
        "Holder",
        "string",
        "holderIdentity contains the identity of the holder of a current lease.",
    ),
    AGE,
];
const ROLE_BINDING: &[Column] = &[
    NAME,
    col(
        "Role",
        "string",
        "RoleRef can reference a Role in the current namespace or a ClusterRole in the global namespace.",
    ),
    AGE,
    wide("Users", "string", "Users in the roleBinding"),
    wide("Groups", "string", "Groups in the roleBinding"),
    wide(
        "ServiceAccounts",
        "string",
        "ServiceAccounts in the roleBinding",
    ),
];
const CLUSTER_ROLE_BINDING: &[Column] = &[
    NAME,
    col(
        "Role",
        "string",
        "RoleRef can only reference a ClusterRole in the global namespace.",
    ),
    AGE,
    wide("Users", "string", "Users in the clusterRoleBinding"),
    wide("Groups", "string", "Groups in the clusterRoleBinding"),
    wide(
        "ServiceAccounts",
        "string",
        "ServiceAccounts in the clusterRoleBinding",
    ),
];
const CERTIFICATE_SIGNING_REQUEST: &[Column] = &[
    NAME,
    AGE,
    col(
        "SignerName",
        "string",
        "Requested signer for the request. It is a qualified name in the form: `scope-hostname.io/name`.",
    ),
    col("Requestor", "string", "Base64-encoded PKCS#10 CSR data"),
    col(
        "RequestedDuration",
        "string",
        "expirationSeconds is the requested duration of validity of the issued certificate.",
    ),
    col(
        "Condition",
        "string",
        "Conditions applied to the request, such as approval or denial.",
    ),
];
const WEBHOOK_CONFIGURATION: &[Column] = &[
    NAME,
    col(
        "Webhooks",
        "integer",
        "Webhooks indicates the number of webhooks registered in this configuration",
    ),
    AGE,
];
const VALIDATING_ADMISSION_POLICY: &[Column] = &[
    NAME,
    col(
        "Validations",
        "integer",
        "Validations indicates the number of validation rules defined in this configuration",
    ),
    col(
        "ParamKind",
        "string",
        "ParamKind specifies the kind of resources used to parameterize this policy",
    ),
    AGE,
];
const VALIDATING_ADMISSION_POLICY_BINDING: &[Column] = &[
    NAME,
    col(
        "PolicyName",
        "string",
        "PolicyName indicates the policy definition which the policy binding binded to",
    ),
    col(
        "ParamRef",
        "string",
        "ParamRef indicates the param resource which sets the configration param",
    ),
    AGE,
];

/// Which upstream printer a kind has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Printer {
    Namespace,
    ConfigMap,
    Secret,
    ServiceAccount,
    Event,
    ResourceQuota,
    Lease,
    RoleBinding,
    ClusterRoleBinding,
    CertificateSigningRequest,
    WebhookConfiguration,
    ValidatingAdmissionPolicy,
    ValidatingAdmissionPolicyBinding,
    /// The default Table convertor: Name, Created At.
    CreatedAt,
    /// No printer: Name, Age.
    NameAge,
}

fn printer(resource: &Resource) -> Printer {
    match (&*resource.group, &*resource.kind) {
        ("", "Namespace") => Printer::Namespace,
        ("", "ConfigMap") => Printer::ConfigMap,
        ("", "Secret") => Printer::Secret,
        ("", "ServiceAccount") => Printer::ServiceAccount,
        ("", "Event") | ("events.k8s.io", "Event") => Printer::Event,
        ("", "ResourceQuota") => Printer::ResourceQuota,
        ("coordination.k8s.io", "Lease") => Printer::Lease,
        ("rbac.authorization.k8s.io", "Role" | "ClusterRole") => Printer::CreatedAt,
        ("rbac.authorization.k8s.io", "RoleBinding") => Printer::RoleBinding,
        ("rbac.authorization.k8s.io", "ClusterRoleBinding") => Printer::ClusterRoleBinding,
        ("certificates.k8s.io", "CertificateSigningRequest") => Printer::CertificateSigningRequest,
        (
            "admissionregistration.k8s.io",
            "MutatingWebhookConfiguration" | "ValidatingWebhookConfiguration",
        ) => Printer::WebhookConfiguration,
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy") => {
            Printer::ValidatingAdmissionPolicy
        }
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding") => {
            Printer::ValidatingAdmissionPolicyBinding
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") => Printer::CreatedAt,
        _ => Printer::NameAge,
    }
}

/// The columns of `resource`'s Table.
pub fn columns(resource: &Resource) -> &'static [Column] {
    match printer(resource) {
        Printer::Namespace => NAMESPACE,
        Printer::ConfigMap => CONFIG_MAP,
        Printer::Secret => SECRET,
        Printer::ServiceAccount => SERVICE_ACCOUNT,
        Printer::Event => EVENT,
        Printer::ResourceQuota => RESOURCE_QUOTA,
        Printer::Lease => LEASE,
        Printer::RoleBinding => ROLE_BINDING,
        Printer::ClusterRoleBinding => CLUSTER_ROLE_BINDING,
        Printer::CertificateSigningRequest => CERTIFICATE_SIGNING_REQUEST,
        Printer::WebhookConfiguration => WEBHOOK_CONFIGURATION,
        Printer::ValidatingAdmissionPolicy => VALIDATING_ADMISSION_POLICY,
        Printer::ValidatingAdmissionPolicyBinding => VALIDATING_ADMISSION_POLICY_BINDING,
        Printer::CreatedAt => NAME_CREATED_AT,
        Printer::NameAge => NAME_AGE,
    }
}

/// The cells of one object's row, one per column of [`columns`], `now` being the time ages are
/// measured to.
pub fn cells(resource: &Resource, object: &Value, now: Timestamp) -> Vec<Value> {
    let name = json!(str_at(object, &["metadata", "name"]));
    let age = json!(since(object["metadata"]["creationTimestamp"].as_str(), now));
    let count = |path: &[&str]| -> usize {
        match value_at(object, path) {
            Some(Value::Object(map)) => map.len(),
            Some(Value::Array(items)) => items.len(),
            _ => 0,
        }
    };
    match printer(resource) {
        Printer::Namespace => {
            // Stored namespaces may lack the phase the API sets (Active, Terminating once
            // deleting); print what it would be.
            let phase = match str_at(object, &["status", "phase"]) {
                "" if object["metadata"]["deletionTimestamp"].is_string() => "Terminating",
                "" => "Active",
                phase => phase,
            };
            vec![name, json!(phase), age]
        }
        Printer::ConfigMap => vec![name, json!(count(&["data"]) + count(&["binaryData"])), age],
        Printer::Secret => {
            // The API defaults an empty type to Opaque.
            let kind = match str_at(object, &["type"]) {
                "" => "Opaque",
                kind => kind,
            };
            vec![name, json!(kind), json!(count(&["data"])), age]
        }
        Printer::ServiceAccount => vec![name, json!(count(&["secrets"])), age],
        Printer::Event => event_cells(&event_as_core(resource, object), now),
        Printer::ResourceQuota => {
            let (request, limit) = quota_columns(object);
            vec![name, json!(request), json!(limit), age]
        }
        Printer::Lease => vec![
            name,
            json!(str_at(object, &["spec", "holderIdentity"])),
            age,
        ],
        Printer::RoleBinding | Printer::ClusterRoleBinding => {
            let role = format!(
                "{}/{}",
                str_at(object, &["roleRef", "kind"]),
                str_at(object, &["roleRef", "name"])
            );
            let (users, groups, service_accounts) = subjects(object);
            vec![
                name,
                json!(role),
                age,
                json!(users),
                json!(groups),
                json!(service_accounts),
            ]
        }
        Printer::CertificateSigningRequest => {
            let signer = or_none(str_at(object, &["spec", "signerName"]));
            let duration = object["spec"]["expirationSeconds"]
                .as_i64()
                .map_or("<none>".to_string(), human_duration);
            vec![
                name,
                age,
                json!(signer),
                json!(str_at(object, &["spec", "username"])),
                json!(duration),
                json!(csr_condition(object)),
            ]
        }
        Printer::WebhookConfiguration => vec![name, json!(count(&["webhooks"])), age],
        Printer::ValidatingAdmissionPolicy => {
            let param_kind = match value_at(object, &["spec", "paramKind"]) {
                Some(kind) if kind.is_object() => format!(
                    "{}/{}",
                    str_at(kind, &["apiVersion"]),
                    str_at(kind, &["kind"])
                ),
                _ => "<unset>".to_string(),
            };
            vec![
                name,
                json!(count(&["spec", "validations"])),
                json!(param_kind),
                age,
            ]
        }
        Printer::ValidatingAdmissionPolicyBinding => vec![
            name,
            json!(str_at(object, &["spec", "policyName"])),
            json!(param_ref(object)),
            age,
        ],
        Printer::CreatedAt => vec![name, json!(created_at(object))],
        Printer::NameAge => vec![name, age],
    }
}

fn value_at<'a>(object: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(object, |value, key| value.get(key))
}

/// The string at `path`, or "" if absent.
fn str_at<'a>(object: &'a Value, path: &[&str]) -> &'a str {
    value_at(object, path)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn or_none(text: &str) -> &str {
    if text.is_empty() { "<none>" } else { text }
}

/// How long ago `timestamp` was, as kubectl prints ages; `<unknown>` when absent or unreadable.
fn since(timestamp: Option<&str>, now: Timestamp) -> String {
    match timestamp.and_then(|t| t.parse::<Timestamp>().ok()) {
        Some(then) => human_duration(now.as_second() - then.as_second()),
        None => "<unknown>".to_string(),
    }
}

/// The creation time in RFC 3339 UTC, as the default Table convertor prints it.
fn created_at(object: &Value) -> String {
    object["metadata"]["creationTimestamp"]
        .as_str()
        .and_then(|t| t.parse::<Timestamp>().ok())
        .map_or_else(
            || "0001-01-01T00:00:00Z".to_string(),
            |t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
        )
}

/// Durations as Kubernetes prints them (apimachinery's `HumanDuration`): `45s`, `3m20s`, `2h10m`,
/// `5d`, `2y30d`.
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".to_string();
    }
    let s = seconds.max(0);
    if s < 120 {
        return format!("{s}s");
    }
    let m = s / 60;
    if m < 10 {
        return match s % 60 {
            0 => format!("{m}m"),
            rest => format!("{m}m{rest}s"),
        };
    }
    if m < 180 {
        return format!("{m}m");
    }
    let h = s / 3600;
    if h < 8 {
        return match m % 60 {
            0 => format!("{h}h"),
            rest => format!("{h}h{rest}m"),
        };
    }
    if h < 48 {
        return format!("{h}h");
    }
    if h < 24 * 8 {
        return match h % 24 {
            0 => format!("{}d", h / 24),
            rest => format!("{}d{rest}h", h / 24),
        };
    }
    if h < 24 * 365 * 2 {
        return format!("{}d", h / 24);
    }
    if h < 24 * 365 * 8 {
        let years = h / 24 / 365;
        return match (h / 24) % 365 {
            0 => format!("{years}y"),
            days => format!("{years}y{days}d"),
        };
    }
    format!("{}y", h / 24 / 365)
}

/// An `events.k8s.io` Event in the core Event's field names (what upstream converts it to
/// before printing); core Events are returned as they are.
fn event_as_core(resource: &Resource, object: &Value) -> Value {
    if resource.group != "events.k8s.io" {
        return object.clone();
    }
    let mut core = object.clone();
    for (from, to) in [
        ("regarding", "involvedObject"),
        ("note", "message"),
        ("deprecatedFirstTimestamp", "firstTimestamp"),
        ("deprecatedLastTimestamp", "lastTimestamp"),
        ("deprecatedCount", "count"),
        ("deprecatedSource", "source"),
        ("reportingController", "reportingComponent"),
    ] {
        if let Some(value) = object.get(from) {
            core[to] = value.clone();
        }
    }
    core
}

/// The cells of a core Event, wide columns included.
fn event_cells(event: &Value, now: Timestamp) -> Vec<Value> {
    let first_seen = match event["firstTimestamp"].as_str() {
        Some(first) => since(Some(first), now),
        None => since(event["eventTime"].as_str(), now),
    };
    let mut last_seen = match event["lastTimestamp"].as_str() {
        Some(last) => since(Some(last), now),
        None => first_seen.clone(),
    };
    let mut count = event["count"].as_i64().unwrap_or(0);
    if event["series"].is_object() {
        last_seen = since(event["series"]["lastObservedTime"].as_str(), now);
        count = event["series"]["count"].as_i64().unwrap_or(0);
    } else if count == 0 {
        count = 1;
    }
    let kind = str_at(event, &["involvedObject", "kind"]).to_lowercase();
    let object = match str_at(event, &["involvedObject", "name"]) {
        "" => kind,
        name => format!("{kind}/{name}"),
    };
    let component = first_non_empty(
        str_at(event, &["source", "component"]),
        str_at(event, &["reportingComponent"]),
    );
    let instance = first_non_empty(
        str_at(event, &["source", "host"]),
        str_at(event, &["reportingInstance"]),
    );
    let source = if instance.is_empty() {
        component.to_string()
    } else {
        format!("{component}, {instance}")
    };
    vec![
        json!(last_seen),
        json!(str_at(event, &["type"])),
        json!(str_at(event, &["reason"])),
        json!(object),
        json!(str_at(event, &["involvedObject", "fieldPath"])),
        json!(source),
        json!(str_at(event, &["message"]).trim()),
        json!(first_seen),
        json!(count),
        json!(str_at(event, &["metadata", "name"])),
    ]
}

fn first_non_empty<'a>(a: &'a str, b: &'a str) -> &'a str {
    if a.is_empty() { b } else { a }
}

/// The Request and Limit cells of a ResourceQuota: `name: used/hard` per resource in
/// `status.hard`, sorted, `limits.*` in the Limit column.
fn quota_columns(quota: &Value) -> (String, String) {
    let mut request = Vec::new();
    let mut limit = Vec::new();
    if let Some(hard) = quota["status"]["hard"].as_object() {
        // serde_json maps are sorted by key.
        for (resource, hard_quantity) in hard {
            let used = quota["status"]["used"][resource].as_str().unwrap_or("0");
            let entry = format!(
                "{resource}: {used}/{}",
                hard_quantity.as_str().unwrap_or("0")
            );
            if resource.split('.').next() == Some("limits") && resource.contains('.') {
                limit.push(entry);
            } else {
                request.push(entry);
            }
        }
    }
    (request.join(", "), limit.join(", "))
}

/// Users, groups and service accounts (`namespace/name`) of a (cluster) role binding.
fn subjects(binding: &Value) -> (String, String, String) {
    let (mut users, mut groups, mut service_accounts) = (Vec::new(), Vec::new(), Vec::new());
    for subject in binding["subjects"].as_array().into_iter().flatten() {
        let name = str_at(subject, &["name"]);
        match str_at(subject, &["kind"]) {
            "User" => users.push(name.to_string()),
            "Group" => groups.push(name.to_string()),
            "ServiceAccount" => {
                service_accounts.push(format!("{}/{name}", str_at(subject, &["namespace"])))
            }
            _ => {}
        }
    }
    (
        users.join(", "),
        groups.join(", "),
        service_accounts.join(", "),
    )
}

/// A CSR's Condition cell: `Approved`, `Denied` or `Pending`, then `,Failed` and `,Issued`.
fn csr_condition(csr: &Value) -> String {
    let has = |kind: &str| {
        csr["status"]["conditions"]
            .as_array()
            .is_some_and(|conditions| conditions.iter().any(|c| c["type"] == kind))
    };
    let mut status = if has("Denied") {
        "Denied".to_string()
    } else if has("Approved") {
        "Approved".to_string()
    } else {
        "Pending".to_string()
    };
    if has("Failed") {
        status.push_str(",Failed");
    }
    if csr["status"]["certificate"]
        .as_str()
        .is_some_and(|c| !c.is_empty())
    {
        status.push_str(",Issued");
    }
    status
}

/// A ValidatingAdmissionPolicyBinding's ParamRef cell.
fn param_ref(binding: &Value) -> String {
    let Some(reference) = value_at(binding, &["spec", "paramRef"]).filter(|r| r.is_object()) else {
        return "<unset>".to_string();
    };
    let name = str_at(reference, &["name"]);
    let namespace = str_at(reference, &["namespace"]);
    if !name.is_empty() {
        return match namespace {
            "" => format!("*/{name}"),
            namespace => format!("{namespace}/{name}"),
        };
    }
    match reference["selector"]["matchLabels"].as_object() {
        Some(labels) => labels
            .iter()
            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
            .collect::<Vec<_>>()
            .join(","),
        None => "<unset>".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kcp_apis::builtin::RESOURCES;

    fn resource(group: &str, name: &str) -> &'static Resource {
        RESOURCES
            .iter()
            .find(|r| r.group == group && r.name == name)
            .unwrap()
    }

    fn now() -> Timestamp {
        "2024-01-02T00:00:00Z".parse().unwrap()
    }

    fn names(resource: &Resource) -> Vec<&'static str> {
        columns(resource).iter().map(|c| c.name).collect()
    }

    #[test]
    fn ages_read_like_kubectl() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(200), "3m20s");
        assert_eq!(human_duration(300), "5m");
        assert_eq!(human_duration(3600), "60m");
        assert_eq!(human_duration(4 * 3600 + 60), "4h1m");
        assert_eq!(human_duration(30 * 3600), "30h");
        assert_eq!(human_duration(3 * 86400 + 3600), "3d1h");
        assert_eq!(human_duration(30 * 86400), "30d");
        assert_eq!(human_duration(800 * 86400), "2y70d");
        assert_eq!(human_duration(-5), "<invalid>");
    }

    #[test]
    fn every_row_has_one_cell_per_column() {
        let object =
            json!({"metadata": {"name": "x", "creationTimestamp": "2024-01-01T00:00:00Z"}});
        for resource in RESOURCES {
            assert_eq!(
                cells(resource, &object, now()).len(),
                columns(resource).len(),
                "{}",
                resource.name
            );
        }
    }

    #[test]
    fn core_kinds_have_kubectls_columns() {
        assert_eq!(names(resource("", "namespaces")), ["Name", "Status", "Age"]);
        assert_eq!(names(resource("", "configmaps")), ["Name", "Data", "Age"]);
        assert_eq!(
            names(resource("", "secrets")),
            ["Name", "Type", "Data", "Age"]
        );
        assert_eq!(
            names(resource("", "serviceaccounts")),
            ["Name", "Secrets", "Age"]
        );
        let cm = json!({"metadata": {"name": "cm", "creationTimestamp": "2024-01-01T23:59:00Z"}, "data": {"a": "1", "b": "2"}, "binaryData": {"c": "AA=="}});
        assert_eq!(
            cells(resource("", "configmaps"), &cm, now()),
            [json!("cm"), json!(3), json!("60s")]
        );
        let secret = json!({"metadata": {"name": "s"}, "type": "kubernetes.io/tls", "data": {"tls.crt": "", "tls.key": ""}});
        assert_eq!(
            cells(resource("", "secrets"), &secret, now()),
            [
                json!("s"),
                json!("kubernetes.io/tls"),
                json!(2),
                json!("<unknown>")
            ]
        );
        let ns = json!({"metadata": {"name": "n"}, "status": {"phase": "Active"}});
        assert_eq!(cells(resource("", "namespaces"), &ns, now())[1], "Active");
        let deleting =
            json!({"metadata": {"name": "n", "deletionTimestamp": "2024-01-01T00:00:00Z"}});
        assert_eq!(
            cells(resource("", "namespaces"), &deleting, now())[1],
            "Terminating"
        );
        let fresh = json!({"metadata": {"name": "n"}});
        assert_eq!(
            cells(resource("", "namespaces"), &fresh, now())[1],
            "Active"
        );
    }

    #[test]
    fn events_print_last_seen_object_and_wide_columns() {
        let event = json!({
            "metadata": {"name": "e1"},
            "involvedObject": {"kind": "ConfigMap", "name": "cm", "fieldPath": "data"},
            "type": "Warning", "reason": "Odd", "message": " hello \n",
            "firstTimestamp": "2024-01-01T00:00:00Z", "lastTimestamp": "2024-01-01T23:00:00Z",
            "count": 4, "source": {"component": "me", "host": "h"},
        });
        let core = resource("", "events");
        let wide: Vec<&str> = columns(core)
            .iter()
            .filter(|c| c.priority == 1)
            .map(|c| c.name)
            .collect();
        assert_eq!(wide, ["Subobject", "Source", "First Seen", "Count", "Name"]);
        assert_eq!(
            cells(core, &event, now()),
            [
                json!("60m"),
                json!("Warning"),
                json!("Odd"),
                json!("configmap/cm"),
                json!("data"),
                json!("me, h"),
                json!("hello"),
                json!("24h"),
                json!(4),
                json!("e1")
            ]
        );
        let new_style = json!({
            "metadata": {"name": "e2"}, "regarding": {"kind": "Lease", "name": "l"},
            "note": "n", "eventTime": "2024-01-01T23:59:50.000000Z", "reportingController": "ctl",
        });
        let cells = cells(resource("events.k8s.io", "events"), &new_style, now());
        assert_eq!(cells[0], "10s");
        assert_eq!(cells[3], "lease/l");
        assert_eq!(cells[5], "ctl");
        assert_eq!(cells[6], "n");
        assert_eq!(cells[8], 1);
    }

    #[test]
    fn rbac_and_other_groups() {
        let rb = resource("rbac.authorization.k8s.io", "rolebindings");
        assert_eq!(
            names(rb),
            ["Name", "Role", "Age", "Users", "Groups", "ServiceAccounts"]
        );
        let binding = json!({"metadata": {"name": "b"}, "roleRef": {"kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "User", "name": "u1"}, {"kind": "User", "name": "u2"},
                         {"kind": "Group", "name": "g"}, {"kind": "ServiceAccount", "name": "sa", "namespace": "ns"}]});
        assert_eq!(
            cells(rb, &binding, now()),
            [
                json!("b"),
                json!("ClusterRole/view"),
                json!("<unknown>"),
                json!("u1, u2"),
                json!("g"),
                json!("ns/sa")
            ]
        );
        let role = resource("rbac.authorization.k8s.io", "roles");
        assert_eq!(names(role), ["Name", "Created At"]);
        assert_eq!(columns(role)[1].kind, "date");
        let r = json!({"metadata": {"name": "r", "creationTimestamp": "2024-01-01T00:00:00Z"}});
        assert_eq!(cells(role, &r, now())[1], "2024-01-01T00:00:00Z");
        assert_eq!(
            names(resource(
                "apiextensions.k8s.io",
                "customresourcedefinitions"
            )),
            ["Name", "Created At"]
        );
        let lease = json!({"metadata": {"name": "l"}, "spec": {"holderIdentity": "me"}});
        assert_eq!(
            cells(resource("coordination.k8s.io", "leases"), &lease, now())[1],
            "me"
        );
        let hooks = json!({"metadata": {"name": "w"}, "webhooks": [{}, {}]});
        let webhook = resource(
            "admissionregistration.k8s.io",
            "validatingwebhookconfigurations",
        );
        assert_eq!(names(webhook), ["Name", "Webhooks", "Age"]);
        assert_eq!(cells(webhook, &hooks, now())[1], 2);
        let csr = json!({"metadata": {"name": "c"}, "spec": {"signerName": "s/x", "username": "bob", "expirationSeconds": 3600},
            "status": {"conditions": [{"type": "Approved"}], "certificate": "Zm9v"}});
        assert_eq!(
            cells(
                resource("certificates.k8s.io", "certificatesigningrequests"),
                &csr,
                now()
            )[2..],
            [
                json!("s/x"),
                json!("bob"),
                json!("60m"),
                json!("Approved,Issued")
            ]
        );
    }

    #[test]
    fn quotas_split_requests_and_limits() {
        let quota = json!({"metadata": {"name": "q"}, "status": {
            "hard": {"pods": "10", "limits.cpu": "2", "requests.memory": "1Gi"},
            "used": {"pods": "3", "limits.cpu": "500m"}}});
        let cells = cells(resource("", "resourcequotas"), &quota, now());
        assert_eq!(cells[1], "pods: 3/10, requests.memory: 0/1Gi");
        assert_eq!(cells[2], "limits.cpu: 500m/2");
    }
}
