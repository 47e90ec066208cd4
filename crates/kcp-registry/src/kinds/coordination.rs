//! Lease: durations positive, transition counts non-negative, a known (or domain-qualified)
//! strategy, and a preferred holder only with a strategy.

use jiff::Timestamp;
use kcp_apimachinery::object;
use serde_json::{Value, json};

use crate::kinds::Kind;
use crate::kinds::printing::{self, Column, col};
use crate::validation::field::{Bad, Errors, forbidden, invalid, not_supported};
use crate::validation::formats::qualified_name_errors;

pub(crate) struct Lease;
pub(crate) static LEASE: Lease = Lease;

const COLUMNS: &[Column] = &[
    printing::NAME,
    col(
        "Holder",
        "string",
        "holderIdentity contains the identity of the holder of a current lease.",
    ),
    printing::AGE,
];

impl Kind for Lease {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("coordination.k8s.io", "Lease")
    }

    fn validate(&self, object: &Value, _old: Option<&Value>, errs: &mut Errors) {
        validate(object, errs);
    }

    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    fn cells(&self, object: &Value, now: Timestamp) -> Vec<Value> {
        vec![
            printing::name(object),
            json!(object::str_at(object, &["spec", "holderIdentity"])),
            printing::age(object, now),
        ]
    }
}

fn validate(object: &Value, errs: &mut Errors) {
    let spec = &object["spec"];
    if let Some(duration) = spec["leaseDurationSeconds"].as_i64().filter(|d| *d <= 0) {
        errs.push(invalid(
            "spec.leaseDurationSeconds",
            Bad::Int(duration),
            "must be greater than 0",
        ));
    }
    if let Some(transitions) = spec["leaseTransitions"].as_i64().filter(|t| *t < 0) {
        errs.push(invalid(
            "spec.leaseTransitions",
            Bad::Int(transitions),
            "must be greater than or equal to 0",
        ));
    }
    let strategy = spec["strategy"].as_str();
    if let Some(strategy) = strategy {
        // Kubernetes reports this one as `spec.strategy.strategy`.
        let path = "spec.strategy.strategy";
        if !strategy.contains('/') {
            if strategy != "OldestEmulationVersion" {
                errs.push(not_supported(
                    path,
                    Bad::Str(strategy),
                    &["OldestEmulationVersion"],
                ));
            }
        } else {
            for message in qualified_name_errors(strategy) {
                errs.push(invalid(path, Bad::Str(strategy), &message));
            }
        }
    }
    let holder = object::text(spec, "preferredHolder");
    if !holder.is_empty() && strategy.is_none_or(str::is_empty) {
        errs.push(forbidden(
            "spec.preferredHolder",
            "may only be specified if `strategy` is defined",
        ));
    }
}
