//! ServiceAccount: no rules of its own beyond metadata; `secrets` and `imagePullSecrets`
//! merge by name in a strategic merge patch.

use jiff::Timestamp;
use kcp_apimachinery::patch::strategic::ListStrategy;
use serde_json::{Value, json};

use crate::kinds::printing::{self, Column, col};
use crate::kinds::{Kind, metadata_list_strategy};

pub(crate) struct ServiceAccount;
pub(crate) static SERVICE_ACCOUNT: ServiceAccount = ServiceAccount;

const COLUMNS: &[Column] = &[
    printing::NAME,
    col(
        "Secrets",
        "string",
        "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use.",
    ),
    printing::AGE,
];

impl Kind for ServiceAccount {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("", "ServiceAccount")
    }

    fn list_strategy(&self, path: &[&str]) -> ListStrategy {
        match path {
            ["secrets"] | ["imagePullSecrets"] => ListStrategy::MergeByKey("name"),
            _ => metadata_list_strategy(path),
        }
    }

    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    fn cells(&self, object: &Value, now: Timestamp) -> Vec<Value> {
        vec![
            printing::name(object),
            json!(printing::count(object, &["secrets"])),
            printing::age(object, now),
        ]
    }
}
