//! API Priority and Fairness (`flowcontrol.apiserver.k8s.io/v1`): FlowSchemas and
//! PriorityLevelConfigurations, stored and validated as kube-apiserver does, with its defaults
//! and Table columns. The server does not act on them (it has its own in-flight limits), and it
//! creates none of the suggested or mandatory objects kube-apiserver keeps; a FlowSchema or
//! priority level named like a mandatory one is not held to the fixed spec.
//!
//! FlowSchema: a matching precedence in 1..=10000 (defaulted to 1000; 1 only for `exempt`), a
//! priority level name, a known distinguisher method, and rules that each name subjects and
//! resource or non-resource rules with supported verbs. PriorityLevelConfiguration: type
//! `Exempt` exactly for the one named `exempt`, else `Limited` with its shares, percentages
//! and a queuing configuration within the shuffle-sharding limits (defaulted: 30 shares, 64
//! queues, hands of 8, 50 requests per queue). Both keep a generation over `spec`.

use jiff::Timestamp;
use kcp_apimachinery::dns::{dns1123_label_errors, dns1123_subdomain_errors};
use kcp_apimachinery::labels::validation::go_quote;
use kcp_apimachinery::object::{self, strings, text};
use kcp_apimachinery::patch::strategic::ListStrategy;
use kcp_apis::builtin::Resource;
use serde_json::{Value, json};

use crate::error::RegistryError;
use crate::kinds::printing::{self, Column, col};
use crate::kinds::{Generation, Kind, conditions_list_strategy};
use crate::validation::field::{
    Bad, Errors, duplicate, forbidden, go_strings, index, invalid, not_supported, required,
};

const GROUP: &str = "flowcontrol.apiserver.k8s.io";
const MAX_MATCHING_PRECEDENCE: i64 = 10_000;
const MAX_QUEUES: i64 = 10_000_000;
/// The most hash bits shuffle sharding may need (`shufflesharding.MaxHashBits`).
const MAX_HASH_BITS: f64 = 60.0;
const VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "proxy",
    "update",
    "watch",
];
const NAMESPACE_INTRO: &str = "each member of this list must be '*' or a DNS-1123 label; ";

pub(crate) struct FlowSchema;
pub(crate) static FLOW_SCHEMA: FlowSchema = FlowSchema;
pub(crate) struct PriorityLevelConfiguration;
pub(crate) static PRIORITY_LEVEL_CONFIGURATION: PriorityLevelConfiguration =
    PriorityLevelConfiguration;

const FLOW_SCHEMA_COLUMNS: &[Column] = &[
    printing::NAME,
    col(
        "PriorityLevel",
        "string",
        "`name` is the name of the priority level configuration being referenced Required.",
    ),
    col(
        "MatchingPrecedence",
        "string",
        "`matchingPrecedence` is used to choose among the FlowSchemas that match a given request. The chosen FlowSchema is among those with the numerically lowest (which we take to be logically highest) MatchingPrecedence.  Each MatchingPrecedence value must be ranged in [1,10000]. Note that if the precedence is not specified, it will be set to 1000 as default.",
    ),
    col(
        "DistinguisherMethod",
        "string",
        "`distinguisherMethod` defines how to compute the flow distinguisher for requests that match this schema. `nil` specifies that the distinguisher is disabled and thus will always be the empty string.",
    ),
    printing::AGE,
    col(
        "MissingPL",
        "string",
        "references a broken or non-existent PriorityLevelConfiguration",
    ),
];

const PRIORITY_LEVEL_COLUMNS: &[Column] = &[
    printing::NAME,
    col(
        "Type",
        "string",
        "`type` indicates whether this priority level is subject to limitation on request execution.  A value of `\"Exempt\"` means that requests of this priority level are not subject to a limit (and thus are never queued) and do not detract from the capacity made available to other priority levels.  A value of `\"Limited\"` means that (a) requests of this priority level _are_ subject to limits and (b) some of the server's limited capacity is made available exclusively to this priority level. Required.",
    ),
    col(
        "NominalConcurrencyShares",
        "string",
        "`nominalConcurrencyShares` (NCS) contributes to the computation of the NominalConcurrencyLimit (NominalCL) of this level. This is the number of execution seats available at this priority level.",
    ),
    col(
        "Queues",
        "string",
        "`queues` is the number of queues for this priority level. The queues exist independently at each apiserver. The value must be positive.  Setting it to 1 effectively precludes shufflesharding and thus makes the distinguisher method of associated flow schemas irrelevant.  This field has a default value of 64.",
    ),
    col(
        "HandSize",
        "string",
        "`handSize` is a small positive number that configures the shuffle sharding of requests into queues.  When enqueuing a request at this priority level the request's flow identifier (a string pair) is hashed and the hash value is used to shuffle the list of queues and deal a hand of the size specified here.  The request is put into one of the shortest queues in that hand. `handSize` must be no larger than `queues`, and should be significantly smaller (so that a few heavy flows do not saturate most of the queues).  See the user-facing documentation for more extensive guidance on setting this field.  This field has a default value of 8.",
    ),
    col(
        "QueueLengthLimit",
        "string",
        "`queueLengthLimit` is the maximum number of requests allowed to be waiting in a given queue of this priority level at a time; excess requests are rejected.  This value must be positive.  If not specified, it will be defaulted to 50.",
    ),
    printing::AGE,
];

impl Kind for FlowSchema {
    fn group_kind(&self) -> (&'static str, &'static str) {
        (GROUP, "FlowSchema")
    }

    fn decode(&self, _: &Resource, object: &mut Value) -> Result<(), RegistryError> {
        if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut)
            && spec
                .get("matchingPrecedence")
                .is_none_or(|p| p.is_null() || p == 0)
        {
            spec.insert("matchingPrecedence".into(), json!(1000));
        }
        Ok(())
    }

    fn validate(&self, object: &Value, _old: Option<&Value>, errs: &mut Errors) {
        let name = object::str_at(object, &["metadata", "name"]);
        validate_flow_schema_spec(name, &object["spec"], errs);
        validate_conditions(&object["status"], errs);
    }

    fn generation(&self, _: &Resource) -> Generation {
        Generation::Fields(&["spec"])
    }

    fn list_strategy(&self, path: &[&str]) -> ListStrategy {
        conditions_list_strategy(path)
    }

    fn columns(&self) -> &'static [Column] {
        FLOW_SCHEMA_COLUMNS
    }

    fn cells(&self, object: &Value, now: Timestamp) -> Vec<Value> {
        let spec = &object["spec"];
        let method = match spec["distinguisherMethod"].is_object() {
            true => object::str_at(spec, &["distinguisherMethod", "type"]),
            false => "<none>",
        };
        let missing = conditions(&object["status"])
            .find(|c| c["type"] == "Dangling")
            .map_or("?", |c| object::text(c, "status"));
        vec![
            printing::name(object),
            json!(object::str_at(
                spec,
                &["priorityLevelConfiguration", "name"]
            )),
            json!(spec["matchingPrecedence"].as_i64().unwrap_or(0)),
            json!(method),
            printing::age(object, now),
            json!(missing),
        ]
    }
}

impl Kind for PriorityLevelConfiguration {
    fn group_kind(&self) -> (&'static str, &'static str) {
        (GROUP, "PriorityLevelConfiguration")
    }

    fn decode(&self, _: &Resource, object: &mut Value) -> Result<(), RegistryError> {
        default_priority_level(object);
        Ok(())
    }

    fn validate(&self, object: &Value, _old: Option<&Value>, errs: &mut Errors) {
        let name = object::str_at(object, &["metadata", "name"]);
        validate_priority_level_spec(name, &object["spec"], errs);
        validate_conditions(&object["status"], errs);
    }

    fn generation(&self, _: &Resource) -> Generation {
        Generation::Fields(&["spec"])
    }

    fn list_strategy(&self, path: &[&str]) -> ListStrategy {
        conditions_list_strategy(path)
    }

    fn columns(&self) -> &'static [Column] {
        PRIORITY_LEVEL_COLUMNS
    }

    fn cells(&self, object: &Value, now: Timestamp) -> Vec<Value> {
        let spec = &object["spec"];
        let none = || json!("<none>");
        let (mut shares, mut queues, mut hand, mut length) = (none(), none(), none(), none());
        if spec["limited"].is_object() {
            shares = spec["limited"]["nominalConcurrencyShares"].clone();
            let queuing = &spec["limited"]["limitResponse"]["queuing"];
            if queuing.is_object() {
                queues = queuing["queues"].clone();
                hand = queuing["handSize"].clone();
                length = queuing["queueLengthLimit"].clone();
            }
        }
        vec![
            printing::name(object),
            json!(object::str_at(spec, &["type"])),
            shares,
            queues,
            hand,
            length,
            printing::age(object, now),
        ]
    }
}

/// The `v1` defaults of a priority level: an `exempt` section for the Exempt type, 30 shares
/// and no lending for Limited ones, and 64 queues, hands of 8 and 50 requests per queue for a
/// queuing configuration that leaves them out.
fn default_priority_level(object: &mut Value) {
    let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if spec.get("type").and_then(Value::as_str) == Some("Exempt")
        && spec.get("exempt").is_none_or(Value::is_null)
    {
        spec.insert("exempt".into(), json!({}));
    }
    let unset = |section: &serde_json::Map<String, Value>, field: &str| {
        section.get(field).is_none_or(Value::is_null)
    };
    if let Some(exempt) = spec.get_mut("exempt").and_then(Value::as_object_mut) {
        for field in ["nominalConcurrencyShares", "lendablePercent"] {
            if unset(exempt, field) {
                exempt.insert(field.into(), json!(0));
            }
        }
    }
    let Some(limited) = spec.get_mut("limited").and_then(Value::as_object_mut) else {
        return;
    };
    if unset(limited, "nominalConcurrencyShares") {
        limited.insert("nominalConcurrencyShares".into(), json!(30));
    }
    if unset(limited, "lendablePercent") {
        limited.insert("lendablePercent".into(), json!(0));
    }
    let queuing = limited
        .get_mut("limitResponse")
        .and_then(|response| response.get_mut("queuing"))
        .and_then(Value::as_object_mut);
    if let Some(queuing) = queuing {
        for (field, default) in [("queues", 64), ("handSize", 8), ("queueLengthLimit", 50)] {
            if queuing.get(field).is_none_or(|v| v.is_null() || v == 0) {
                queuing.insert(field.into(), json!(default));
            }
        }
    }
}

fn conditions(status: &Value) -> impl Iterator<Item = &Value> {
    status["conditions"].as_array().into_iter().flatten()
}

fn validate_flow_schema_spec(name: &str, spec: &Value, errs: &mut Errors) {
    let precedence = spec["matchingPrecedence"].as_i64().unwrap_or(0);
    let path = "spec.matchingPrecedence";
    if precedence <= 0 {
        errs.push(invalid(
            path,
            Bad::Int(precedence),
            "must be a positive value",
        ));
    }
    if precedence > MAX_MATCHING_PRECEDENCE {
        errs.push(invalid(
            path,
            Bad::Int(precedence),
            &format!("must not be greater than {MAX_MATCHING_PRECEDENCE}"),
        ));
    }
    if precedence == 1 && name != "exempt" {
        errs.push(invalid(
            path,
            Bad::Int(precedence),
            "only the schema named 'exempt' may have matchingPrecedence 1",
        ));
    }
    if spec["distinguisherMethod"].is_object() {
        let method = text(&spec["distinguisherMethod"], "type");
        if !matches!(method, "ByNamespace" | "ByUser") {
            let shown = format!(
                "&flowcontrol.FlowDistinguisherMethod{{Type:{}}}",
                go_quote(method)
            );
            errs.push(not_supported(
                "spec.distinguisherMethod.type",
                Bad::Go(shown),
                &["ByNamespace", "ByUser"],
            ));
        }
    }
    let level = text(&spec["priorityLevelConfiguration"], "name");
    if level.is_empty() {
        errs.push(required(
            "spec.priorityLevelConfiguration.name",
            "must reference a priority level",
        ));
    }
    for message in dns1123_subdomain_errors(level)
        .into_iter()
        .filter(|_| !level.is_empty())
    {
        errs.push(invalid(
            "spec.priorityLevelConfiguration.name",
            Bad::Str(level),
            &message,
        ));
    }
    for (i, rule) in spec["rules"].as_array().into_iter().flatten().enumerate() {
        validate_rule(rule, &index("spec.rules", i), errs);
    }
}

fn validate_rule(rule: &Value, path: &str, errs: &mut Errors) {
    let subjects = rule["subjects"].as_array().cloned().unwrap_or_default();
    if subjects.is_empty() {
        errs.push(required(
            format!("{path}.subjects"),
            "subjects must contain at least one value",
        ));
    }
    for (i, subject) in subjects.iter().enumerate() {
        validate_subject(subject, &index(&format!("{path}.subjects"), i), errs);
    }
    let resource_rules = rule["resourceRules"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let other_rules = rule["nonResourceRules"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if resource_rules.is_empty() && other_rules.is_empty() {
        errs.push(required(
            path,
            "at least one of resourceRules and nonResourceRules has to be non-empty",
        ));
    }
    for (i, resource_rule) in resource_rules.iter().enumerate() {
        let rule_path = index(&format!("{path}.resourceRules"), i);
        validate_resource_rule(resource_rule, &rule_path, errs);
    }
    for (i, other_rule) in other_rules.iter().enumerate() {
        let rule_path = index(&format!("{path}.nonResourceRules"), i);
        validate_verbs(&strings(&other_rule["verbs"]), &rule_path, errs);
        validate_urls(&strings(&other_rule["nonResourceURLs"]), &rule_path, errs);
    }
}

fn validate_subject(subject: &Value, path: &str, errs: &mut Errors) {
    let sections = [
        ("ServiceAccount", "serviceAccount"),
        ("User", "user"),
        ("Group", "group"),
    ];
    let kind = text(subject, "kind");
    let Some((_, own)) = sections.iter().find(|(k, _)| *k == kind) else {
        errs.push(not_supported(
            format!("{path}.kind"),
            Bad::Str(kind),
            &["Group", "ServiceAccount", "User"],
        ));
        return;
    };
    let section = &subject[*own];
    if section.is_null() {
        errs.push(required(
            format!("{path}.{own}"),
            &format!("{own} is required when subject kind is '{kind}'"),
        ));
    } else {
        let name = text(section, "name");
        if name.is_empty() {
            errs.push(required(format!("{path}.{own}.name"), ""));
        } else if kind == "ServiceAccount" && name != "*" {
            for message in dns1123_subdomain_errors(name) {
                errs.push(invalid(
                    format!("{path}.{own}.name"),
                    Bad::Str(name),
                    &message,
                ));
            }
        }
        if kind == "ServiceAccount" {
            let namespace = text(section, "namespace");
            if namespace.is_empty() {
                errs.push(required(
                    format!("{path}.{own}.namespace"),
                    "must specify namespace for service account",
                ));
            }
            for message in dns1123_label_errors(namespace)
                .into_iter()
                .filter(|_| !namespace.is_empty())
            {
                errs.push(invalid(
                    format!("{path}.{own}.namespace"),
                    Bad::Str(namespace),
                    &message,
                ));
            }
        }
    }
    for (other_kind, other) in sections {
        if other_kind != kind && !subject[other].is_null() {
            errs.push(forbidden(
                format!("{path}.{other}"),
                &format!("{other} is forbidden when subject kind is not '{other_kind}'"),
            ));
        }
    }
}

/// Verbs: at least one, `*` alone, or only the verbs a request can have.
fn validate_verbs(verbs: &[String], path: &str, errs: &mut Errors) {
    let field = format!("{path}.verbs");
    if verbs.is_empty() {
        errs.push(required(field, "verbs must contain at least one value"));
    } else if verbs.iter().any(|v| v == "*") {
        if verbs.len() > 1 {
            errs.push(invalid(
                field,
                Bad::Go(go_strings(verbs)),
                "if '*' is present, must not specify other verbs",
            ));
        }
    } else if !verbs.iter().all(|v| VERBS.contains(&v.as_str())) {
        errs.push(not_supported(field, Bad::Go(go_strings(verbs)), VERBS));
    }
}

/// A list that must not be empty and may hold `*` only alone.
fn validate_wildcard_list(
    items: &[String],
    field: String,
    empty: &str,
    what: &str,
    errs: &mut Errors,
) {
    if items.is_empty() {
        errs.push(required(field, empty));
    } else if items.len() > 1 && items.iter().any(|i| i == "*") {
        errs.push(invalid(
            field,
            Bad::Go(go_strings(items)),
            &format!("if '*' is present, must not specify other {what}"),
        ));
    }
}

fn validate_resource_rule(rule: &Value, path: &str, errs: &mut Errors) {
    validate_verbs(&strings(&rule["verbs"]), path, errs);
    validate_wildcard_list(
        &strings(&rule["apiGroups"]),
        format!("{path}.apiGroups"),
        "resource rules must supply at least one api group",
        "api groups",
        errs,
    );
    validate_wildcard_list(
        &strings(&rule["resources"]),
        format!("{path}.resources"),
        "resource rules must supply at least one resource",
        "resources",
        errs,
    );
    let namespaces = strings(&rule["namespaces"]);
    let field = format!("{path}.namespaces");
    if namespaces.is_empty() && rule["clusterScope"].as_bool() != Some(true) {
        errs.push(required(
            field,
            "resource rules that are not cluster scoped must supply at least one namespace",
        ));
    } else if namespaces.iter().any(|n| n == "*") {
        if namespaces.len() > 1 {
            errs.push(invalid(
                field,
                Bad::Go(go_strings(&namespaces)),
                "if '*' is present, must not specify other namespaces",
            ));
        }
    } else {
        for (i, namespace) in namespaces.iter().enumerate() {
            for message in dns1123_label_errors(namespace) {
                errs.push(invalid(
                    index(&field, i),
                    Bad::Str(namespace),
                    &format!("{NAMESPACE_INTRO}{message}"),
                ));
            }
        }
    }
}

fn validate_urls(urls: &[String], path: &str, errs: &mut Errors) {
    let field = format!("{path}.nonResourceURLs");
    if urls.is_empty() {
        errs.push(required(
            field,
            "nonResourceURLs must contain at least one value",
        ));
        return;
    }
    if urls.iter().any(|u| u == "*") {
        if urls.len() > 1 {
            errs.push(invalid(
                field,
                Bad::Go(go_strings(urls)),
                "if '*' is present, must not specify other non-resource URLs",
            ));
        }
        return;
    }
    for (i, url) in urls.iter().enumerate() {
        let problem = if url.is_empty() {
            Some("must not be empty")
        } else if url == "/" {
            None
        } else if !url.starts_with('/') {
            Some("must start with slash")
        } else if url.contains(' ') {
            Some("must not contain white-space")
        } else if url.contains("//") {
            Some("must not contain double slash")
        } else {
            let stars = url.matches('*').count();
            (stars > 1 || (stars == 1 && !url.ends_with("/*")))
                .then_some("wildcard can only do suffix matching")
        };
        if let Some(problem) = problem {
            errs.push(invalid(index(&field, i), Bad::Str(url), problem));
        }
    }
}

fn validate_conditions(status: &Value, errs: &mut Errors) {
    let mut seen: Vec<&str> = Vec::new();
    for (i, condition) in conditions(status).enumerate() {
        let path = index("status.conditions", i);
        let kind = text(condition, "type");
        if seen.contains(&kind) {
            errs.push(duplicate(format!("{path}.type"), Bad::Str(kind)));
        }
        seen.push(kind);
        if kind.is_empty() {
            errs.push(required(format!("{path}.type"), "must not be empty"));
        }
    }
}

fn validate_priority_level_spec(name: &str, spec: &Value, errs: &mut Errors) {
    let kind = text(spec, "type");
    if (name == "exempt") != (kind == "Exempt") {
        errs.push(invalid(
            "spec.type",
            Bad::Str(kind),
            "type must be 'Exempt' if and only if name is 'exempt'",
        ));
    }
    match kind {
        "Exempt" => {
            if !spec["limited"].is_null() {
                errs.push(forbidden(
                    "spec.limited",
                    "must be nil if the type is not Limited",
                ));
            }
            let exempt = &spec["exempt"];
            non_negative(exempt, "spec.exempt", "nominalConcurrencyShares", errs);
            percent(exempt, "spec.exempt", errs);
        }
        "Limited" => {
            if !spec["exempt"].is_null() {
                errs.push(forbidden(
                    "spec.exempt",
                    "must be nil if the type is Limited",
                ));
            }
            if spec["limited"].is_null() {
                errs.push(required(
                    "spec.limited",
                    "must not be empty when type is Limited",
                ));
            } else {
                validate_limited(&spec["limited"], errs);
            }
        }
        _ => errs.push(not_supported(
            "spec.type",
            Bad::Str(kind),
            &["Exempt", "Limited"],
        )),
    }
}

fn non_negative(section: &Value, path: &str, field: &str, errs: &mut Errors) {
    if let Some(value) = section[field].as_i64().filter(|v| *v < 0) {
        errs.push(invalid(
            format!("{path}.{field}"),
            Bad::Int(value),
            "must be a non-negative integer",
        ));
    }
}

fn percent(section: &Value, path: &str, errs: &mut Errors) {
    if let Some(value) = section["lendablePercent"]
        .as_i64()
        .filter(|v| !(0..=100).contains(v))
    {
        errs.push(invalid(
            format!("{path}.lendablePercent"),
            Bad::Int(value),
            "must be between 0 and 100, inclusive",
        ));
    }
}

fn validate_limited(limited: &Value, errs: &mut Errors) {
    let path = "spec.limited";
    non_negative(limited, path, "nominalConcurrencyShares", errs);
    let response = &limited["limitResponse"];
    let queuing = &response["queuing"];
    match text(response, "type") {
        "Reject" if !queuing.is_null() => errs.push(forbidden(
            "spec.limited.limitResponse.queuing",
            "must be nil if limited.limitResponse.type is not Limited",
        )),
        "Reject" => {}
        "Queue" if queuing.is_null() => errs.push(required(
            "spec.limited.limitResponse.queuing",
            "must not be empty if limited.limitResponse.type is Limited",
        )),
        "Queue" => validate_queuing(queuing, errs),
        other => errs.push(not_supported(
            "spec.limited.limitResponse.type",
            Bad::Str(other),
            &["Queue", "Reject"],
        )),
    }
    percent(limited, path, errs);
    if let Some(limit) = limited["borrowingLimitPercent"].as_i64().filter(|v| *v < 0) {
        errs.push(invalid(
            "spec.limited.borrowingLimitPercent",
            Bad::Int(limit),
            "if specified, must be a non-negative integer",
        ));
    }
}

fn validate_queuing(queuing: &Value, errs: &mut Errors) {
    let path = "spec.limited.limitResponse.queuing";
    let number = |field: &str| queuing[field].as_i64().unwrap_or(0);
    let (length, queues, hand) = (
        number("queueLengthLimit"),
        number("queues"),
        number("handSize"),
    );
    if length <= 0 {
        errs.push(invalid(
            format!("{path}.queueLengthLimit"),
            Bad::Int(length),
            "must be positive",
        ));
    }
    if queues <= 0 {
        errs.push(invalid(
            format!("{path}.queues"),
            Bad::Int(queues),
            "must be positive",
        ));
    } else if queues > MAX_QUEUES {
        errs.push(invalid(
            format!("{path}.queues"),
            Bad::Int(queues),
            &format!("must not be greater than {MAX_QUEUES}"),
        ));
    }
    let hand_path = format!("{path}.handSize");
    if hand <= 0 {
        errs.push(invalid(hand_path, Bad::Int(hand), "must be positive"));
    } else if hand > queues {
        errs.push(invalid(
            hand_path,
            Bad::Int(hand),
            &format!("should not be greater than queues ({queues})"),
        ));
    } else if ((queues as f64).log2() * hand as f64).ceil() > MAX_HASH_BITS {
        errs.push(invalid(
            hand_path,
            Bad::Int(hand),
            &format!(
                "required entropy bits of deckSize {queues} and handSize {hand} should not be greater than {MAX_HASH_BITS}"
            ),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::rules;
    use kcp_apis::builtin::RESOURCES;

    fn resource(kind: &str) -> &'static Resource {
        RESOURCES
            .iter()
            .find(|r| r.group == GROUP && r.kind == kind)
            .unwrap()
    }

    fn problems(kind: &str, mut object: Value) -> Vec<String> {
        let resource = resource(kind);
        rules(resource).decode(resource, &mut object).unwrap();
        let mut errs = Errors::new();
        rules(resource).validate_create(resource, &object, &mut errs);
        errs.into_iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect()
    }

    #[test]
    fn flow_schemas_are_defaulted_and_validated_as_kube() {
        let good = json!({"metadata": {"name": "fs"}, "spec": {
            "priorityLevelConfiguration": {"name": "workload-low"},
            "distinguisherMethod": {"type": "ByUser"},
            "rules": [{"subjects": [{"kind": "Group", "group": {"name": "system:authenticated"}}],
                       "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "clusterScope": true, "namespaces": ["*"]}],
                       "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz", "/api/*"]}]}]}});
        assert!(problems("FlowSchema", good).is_empty());
        let bad = json!({"metadata": {"name": "fs"}, "spec": {
            "matchingPrecedence": 20000,
            "distinguisherMethod": {"type": "ByMood"},
            "rules": [{"subjects": [{"kind": "User", "group": {"name": "g"}}],
                       "resourceRules": [{"verbs": ["get", "*"], "apiGroups": [], "resources": ["a", "*"]}],
                       "nonResourceRules": [{"verbs": ["fly"], "nonResourceURLs": ["healthz", "/a*"]}]}]}});
        assert_eq!(
            problems("FlowSchema", bad),
            [
                "spec.matchingPrecedence: Invalid value: 20000: must not be greater than 10000",
                "spec.distinguisherMethod.type: Unsupported value: &flowcontrol.FlowDistinguisherMethod{Type:\"ByMood\"}: supported values: \"ByNamespace\", \"ByUser\"",
                "spec.priorityLevelConfiguration.name: Required value: must reference a priority level",
                "spec.rules[0].subjects[0].user: Required value: user is required when subject kind is 'User'",
                "spec.rules[0].subjects[0].group: Forbidden: group is forbidden when subject kind is not 'Group'",
                "spec.rules[0].resourceRules[0].verbs: Invalid value: []string{\"get\", \"*\"}: if '*' is present, must not specify other verbs",
                "spec.rules[0].resourceRules[0].apiGroups: Required value: resource rules must supply at least one api group",
                "spec.rules[0].resourceRules[0].resources: Invalid value: []string{\"a\", \"*\"}: if '*' is present, must not specify other resources",
                "spec.rules[0].resourceRules[0].namespaces: Required value: resource rules that are not cluster scoped must supply at least one namespace",
                "spec.rules[0].nonResourceRules[0].verbs: Unsupported value: []string{\"fly\"}: supported values: \"create\", \"delete\", \"deletecollection\", \"get\", \"list\", \"patch\", \"proxy\", \"update\", \"watch\"",
                "spec.rules[0].nonResourceRules[0].nonResourceURLs[0]: Invalid value: \"healthz\": must start with slash",
                "spec.rules[0].nonResourceRules[0].nonResourceURLs[1]: Invalid value: \"/a*\": wildcard can only do suffix matching",
            ]
        );
        let mut defaulted = json!({"spec": {}});
        FLOW_SCHEMA
            .decode(resource("FlowSchema"), &mut defaulted)
            .unwrap();
        assert_eq!(defaulted["spec"]["matchingPrecedence"], 1000);
    }

    #[test]
    fn priority_levels_are_defaulted_and_validated_as_kube() {
        let mut limited = json!({"metadata": {"name": "pl"}, "spec": {"type": "Limited",
            "limited": {"limitResponse": {"type": "Queue", "queuing": {}}}}});
        default_priority_level(&mut limited);
        assert_eq!(
            limited["spec"]["limited"],
            json!({"nominalConcurrencyShares": 30, "lendablePercent": 0,
                   "limitResponse": {"type": "Queue", "queuing": {"queues": 64, "handSize": 8, "queueLengthLimit": 50}}})
        );
        assert!(problems("PriorityLevelConfiguration", limited.clone()).is_empty());
        let cells = PRIORITY_LEVEL_CONFIGURATION.cells(&limited, Timestamp::now());
        assert_eq!(
            cells[1..6],
            [json!("Limited"), json!(30), json!(64), json!(8), json!(50)]
        );

        let bad = json!({"metadata": {"name": "pl"}, "spec": {"type": "Exempt",
            "limited": {"lendablePercent": 101, "limitResponse": {"type": "Queue", "queuing": {"queues": 4, "handSize": 5}}}}});
        assert_eq!(
            problems("PriorityLevelConfiguration", bad),
            [
                "spec.type: Invalid value: \"Exempt\": type must be 'Exempt' if and only if name is 'exempt'",
                "spec.limited: Forbidden: must be nil if the type is not Limited",
            ]
        );
        let bad = json!({"metadata": {"name": "pl"}, "spec": {"type": "Limited",
            "limited": {"lendablePercent": 101, "borrowingLimitPercent": -1,
                        "limitResponse": {"type": "Queue", "queuing": {"queues": 4, "handSize": 5, "queueLengthLimit": -1}}}}});
        assert_eq!(
            problems("PriorityLevelConfiguration", bad),
            [
                "spec.limited.limitResponse.queuing.queueLengthLimit: Invalid value: -1: must be positive",
                "spec.limited.limitResponse.queuing.handSize: Invalid value: 5: should not be greater than queues (4)",
                "spec.limited.lendablePercent: Invalid value: 101: must be between 0 and 100, inclusive",
                "spec.limited.borrowingLimitPercent: Invalid value: -1: if specified, must be a non-negative integer",
            ]
        );
        let exempt = json!({"metadata": {"name": "exempt"}, "spec": {"type": "Exempt"}});
        assert!(problems("PriorityLevelConfiguration", exempt).is_empty());
    }
}
