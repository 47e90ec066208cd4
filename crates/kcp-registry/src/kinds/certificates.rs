//! CertificateSigningRequest: a PEM `CERTIFICATE REQUEST` in `spec.request`, known usages
//! without repeats, a `signerName` of the form `example.com/signer-name`, expirations of at
//! least ten minutes. (The request's signature is not checked.)

use jiff::Timestamp;
use kcp_apimachinery::dns::{dns1123_label_errors, dns1123_subdomain_errors};
use kcp_apimachinery::object;
use kcp_apimachinery::patch::strategic::ListStrategy;
use kcp_apis::builtin::Resource;
use serde_json::{Value, json};

use crate::error::RegistryError;
use crate::kinds::printing::{self, Column, col};
use crate::kinds::{Kind, conditions_list_strategy};
use crate::names::NameRule;
use crate::strategy::{self, Part};
use crate::validation::field::{
    Bad, Errors, duplicate, forbidden, go_bytes, index, invalid, not_supported, required, too_long,
};
use crate::validation::formats::decode_base64;
use crate::validation::{decode_error, json_type};

pub(crate) struct CertificateSigningRequest;
pub(crate) static CERTIFICATE_SIGNING_REQUEST: CertificateSigningRequest =
    CertificateSigningRequest;

const COLUMNS: &[Column] = &[
    printing::NAME,
    printing::AGE,
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

impl Kind for CertificateSigningRequest {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("certificates.k8s.io", "CertificateSigningRequest")
    }

    fn name_rule(&self) -> NameRule {
        NameRule::PathSegment
    }

    fn decode(&self, _: &Resource, object: &mut Value) -> Result<(), RegistryError> {
        decode(object)
    }

    fn validate(&self, object: &Value, old: Option<&Value>, errs: &mut Errors) {
        validate(object, errs);
        validate_conditions(object, old, errs);
    }

    fn validate_update_of_part(&self, part: Part, new: &Value, old: &Value, errs: &mut Errors) {
        validate_condition_changes(part, new, old, errs);
    }

    /// As Kubernetes' strategies: the main resource keeps the stored status, `status` keeps the
    /// spec, `approval` changes only the conditions; new conditions get their times.
    fn prepare_update(
        &self,
        resource: &Resource,
        part: Part,
        stored: &Value,
        requested: Value,
    ) -> Value {
        let mut next = match part {
            Part::Approval => {
                let mut next = stored.clone();
                let conditions = requested["status"]["conditions"].clone();
                if !next["status"].is_object() {
                    next["status"] = json!({});
                }
                match conditions {
                    Value::Null => {
                        if let Some(status) = next["status"].as_object_mut() {
                            status.remove("conditions");
                        }
                    }
                    conditions => next["status"]["conditions"] = conditions,
                }
                next
            }
            _ => strategy::update_of_part(resource, part, stored, requested),
        };
        if matches!(part, Part::Status | Part::Approval) {
            stamp_conditions(&mut next, stored);
        }
        next
    }

    /// As Kubernetes' strategy: the requester's name, uid, groups and extra replace whatever
    /// the client sent.
    fn record_requester(&self, object: &mut Value, requester: &crate::store::Requester) {
        let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) else {
            return;
        };
        for field in ["username", "uid", "groups", "extra"] {
            spec.remove(field);
        }
        spec.insert("username".into(), json!(requester.name));
        if !requester.uid.is_empty() {
            spec.insert("uid".into(), json!(requester.uid));
        }
        if !requester.groups.is_empty() {
            spec.insert("groups".into(), json!(requester.groups));
        }
        if !requester.extra.is_empty() {
            spec.insert("extra".into(), json!(requester.extra));
        }
    }

    fn selectable_fields(&self) -> &'static [&'static str] {
        &["spec.signerName"]
    }

    fn list_strategy(&self, path: &[&str]) -> ListStrategy {
        conditions_list_strategy(path)
    }

    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    fn cells(&self, object: &Value, now: Timestamp) -> Vec<Value> {
        let signer = printing::or_none(object::str_at(object, &["spec", "signerName"]));
        let duration = object["spec"]["expirationSeconds"]
            .as_i64()
            .map_or("<none>".to_string(), printing::human_duration);
        vec![
            printing::name(object),
            printing::age(object, now),
            json!(signer),
            json!(object::str_at(object, &["spec", "username"])),
            json!(duration),
            json!(csr_condition(object)),
        ]
    }
}

/// Conditions whose status may only be `True`.
const TRUE_ONLY: [&str; 3] = ["Approved", "Denied", "Failed"];

fn conditions(csr: &Value) -> &[Value] {
    csr["status"]["conditions"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
}

fn of_type<'a>(csr: &'a Value, kind: &str) -> Vec<&'a Value> {
    conditions(csr)
        .iter()
        .filter(|c| c["type"] == kind)
        .collect()
}

/// `status.conditions`, as Kubernetes validates them: a type (unless the stored object
/// already had an empty one) and a status (`True` only for Approved, Denied and Failed), not
/// both Approved and Denied, no type twice (each unless the stored object already did).
fn validate_conditions(csr: &Value, old: Option<&Value>, errs: &mut Errors) {
    let had = |test: &dyn Fn(&Value) -> bool| old.is_some_and(test);
    let allow_empty_type = had(&|old| {
        conditions(old)
            .iter()
            .any(|c| object::text(c, "type").is_empty())
    });
    let allow_duplicates = had(&|old| {
        let mut seen = Vec::new();
        conditions(old).iter().any(|c| {
            let kind = object::text(c, "type");
            let again = seen.contains(&kind);
            seen.push(kind);
            again
        })
    });
    let allow_both =
        had(&|old| !of_type(old, "Approved").is_empty() && !of_type(old, "Denied").is_empty());
    let mut seen: Vec<&str> = Vec::new();
    let (mut approved, mut denied) = (false, false);
    for (i, condition) in conditions(csr).iter().enumerate() {
        let path = index("status.conditions", i);
        let kind = object::text(condition, "type");
        if kind.is_empty() && !allow_empty_type {
            errs.push(required(format!("{path}.type"), ""));
        }
        let status = object::text(condition, "status");
        let allowed: &[&str] = if TRUE_ONLY.contains(&kind) {
            &["True"]
        } else {
            &["False", "True", "Unknown"]
        };
        if status.is_empty() {
            errs.push(required(format!("{path}.status"), ""));
        } else if !allowed.contains(&status) {
            errs.push(not_supported(
                format!("{path}.status"),
                Bad::Str(status),
                allowed,
            ));
        }
        if !allow_both {
            let exclusive = match kind {
                "Approved" => {
                    approved = true;
                    denied
                }
                "Denied" => {
                    denied = true;
                    approved
                }
                _ => false,
            };
            if exclusive {
                errs.push(invalid(
                    format!("{path}.type"),
                    Bad::Str(kind),
                    "Approved and Denied conditions are mutually exclusive",
                ));
            }
        }
        if !allow_duplicates {
            if seen.contains(&kind) {
                errs.push(duplicate(format!("{path}.type"), Bad::Str(kind)));
            }
            seen.push(kind);
        }
    }
}

/// What an update may do to the conditions: never remove an Approved, Denied or Failed one,
/// and add or change Approved and Denied only through `approval`.
fn validate_condition_changes(part: Part, new: &Value, old: &Value, errs: &mut Errors) {
    for kind in TRUE_ONLY {
        if of_type(new, kind).len() < of_type(old, kind).len() {
            errs.push(forbidden(
                "status.conditions",
                &format!("updates may not remove a condition of type {kind:?}"),
            ));
        }
    }
    if part == Part::Approval {
        return;
    }
    for kind in ["Approved", "Denied"] {
        let (before, after) = (of_type(old, kind), of_type(new, kind));
        if after.len() > before.len() {
            errs.push(forbidden(
                "status.conditions",
                &format!("updates may not add a condition of type {kind:?}"),
            ));
        } else if after.len() == before.len() && after != before {
            errs.push(forbidden(
                "status.conditions",
                &format!("updates may not modify a condition of type {kind:?}"),
            ));
        }
    }
}

/// New conditions' `lastUpdateTime` (now) and `lastTransitionTime` (the stored condition's of
/// the same type and status, else now), as Kubernetes fills them.
fn stamp_conditions(next: &mut Value, stored: &Value) {
    let now = crate::meta::now();
    let previous: Vec<Value> = conditions(stored).to_vec();
    let Some(list) = next["status"]["conditions"].as_array_mut() else {
        return;
    };
    for condition in list.iter_mut().filter(|c| c.is_object()) {
        if object::text(condition, "lastUpdateTime").is_empty() {
            condition["lastUpdateTime"] = json!(now);
        }
        if object::text(condition, "lastTransitionTime").is_empty() {
            let kept = previous.iter().find(|old| {
                old["type"] == condition["type"]
                    && old["status"] == condition["status"]
                    && !object::text(old, "lastTransitionTime").is_empty()
            });
            condition["lastTransitionTime"] =
                kept.map_or_else(|| json!(now), |old| old["lastTransitionTime"].clone());
        }
    }
}

const USAGES: &[&str] = &[
    "any",
    "cert sign",
    "client auth",
    "code signing",
    "content commitment",
    "crl sign",
    "data encipherment",
    "decipher only",
    "digital signature",
    "email protection",
    "encipher only",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "key agreement",
    "key encipherment",
    "microsoft sgc",
    "netscape sgc",
    "ocsp signing",
    "s/mime",
    "server auth",
    "signing",
    "timestamping",
];

/// `spec.request` is bytes: it must be base64, or decoding fails (400).
fn decode(object: &mut Value) -> Result<(), RegistryError> {
    let kind = "CertificateSigningRequest";
    match &object["spec"]["request"] {
        Value::Null => Ok(()),
        Value::String(text) => decode_base64(text)
            .map(|_| ())
            .map_err(|message| decode_error(kind, "v1", &message)),
        other => Err(decode_error(
            kind,
            "v1",
            &format!(
                "json: cannot unmarshal {} into Go struct field CertificateSigningRequestSpec.spec.request of type []uint8",
                json_type(other)
            ),
        )),
    }
}

fn has_pem_request(bytes: &[u8]) -> bool {
    let text = String::from_utf8_lossy(bytes);
    text.contains("-----BEGIN CERTIFICATE REQUEST-----")
        && text.contains("-----END CERTIFICATE REQUEST-----")
}

fn validate(object: &Value, errs: &mut Errors) {
    let spec = &object["spec"];
    let request = spec["request"]
        .as_str()
        .and_then(|t| decode_base64(t).ok())
        .unwrap_or_default();
    if !has_pem_request(&request) {
        errs.push(invalid(
            "spec.request",
            Bad::Go(go_bytes(&request)),
            "PEM block type must be CERTIFICATE REQUEST",
        ));
    }
    let usages: Vec<&str> = spec["usages"]
        .as_array()
        .map(|u| u.iter().map(|v| v.as_str().unwrap_or_default()).collect())
        .unwrap_or_default();
    if usages.is_empty() {
        errs.push(required("spec.usages", ""));
    }
    for (i, usage) in usages.iter().enumerate() {
        if !USAGES.contains(usage) {
            errs.push(not_supported(
                index("spec.usages", i),
                Bad::Str(usage),
                USAGES,
            ));
        }
    }
    for (i, usage) in usages.iter().enumerate() {
        if usages[..i].contains(usage) {
            errs.push(duplicate(index("spec.usages", i), Bad::Str(usage)));
        }
    }
    let signer = object::text(spec, "signerName");
    if signer == "kubernetes.io/legacy-unknown" {
        errs.push(invalid(
            "spec.signerName",
            Bad::Str(signer),
            "the legacy signerName is not allowed via this API version",
        ));
    } else {
        validate_signer_name(signer, errs);
    }
    if let Some(seconds) = spec["expirationSeconds"].as_i64().filter(|s| *s < 600) {
        errs.push(invalid(
            "spec.expirationSeconds",
            Bad::Int(seconds),
            "may not specify a duration less than 600 seconds (10 minutes)",
        ));
    }
}

fn validate_signer_name(signer: &str, errs: &mut Errors) {
    const PATH: &str = "spec.signerName";
    if signer.is_empty() {
        errs.push(required(PATH, ""));
        return;
    }
    let Some((domain, path)) = signer.split_once('/').filter(|(_, p)| !p.contains('/')) else {
        errs.push(invalid(
            PATH,
            Bad::Str(signer),
            "must be a fully qualified domain and path of the form 'example.com/signer-name'",
        ));
        return;
    };
    if domain.len() > 253 {
        errs.push(too_long(PATH, 253));
    }
    let labels: Vec<&str> = domain.split('.').collect();
    for label in &labels {
        let problems = dns1123_label_errors(label);
        if !problems.is_empty() {
            for problem in problems {
                errs.push(invalid(
                    PATH,
                    Bad::Str(domain),
                    &format!("validating label \"{label}\": {problem}"),
                ));
            }
            break;
        }
    }
    if labels.len() < 2 {
        errs.push(invalid(
            PATH,
            Bad::Str(domain),
            "should be a domain with at least two segments separated by dots",
        ));
    }
    for label in path.split('.') {
        let problems = dns1123_subdomain_errors(label);
        if !problems.is_empty() {
            for problem in problems {
                errs.push(invalid(
                    PATH,
                    Bad::Str(path),
                    &format!("validating label \"{label}\": {problem}"),
                ));
            }
            break;
        }
    }
    let max = 253 + (253 + 63 + 1) + 1;
    if signer.len() > max {
        errs.push(too_long(PATH, max));
    }
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
