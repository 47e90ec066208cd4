//! One rule set per kind, the way Kubernetes keeps a `strategy.go` per kind under
//! `pkg/registry/<group>/<kind>`: everything that makes a kind more than "an object with
//! metadata" is declared in one [`Kind`] implementation, in one file per API group here.
//!
//! A rule set says which names objects may have, what decoding checks and defaults (the 400s a
//! Go decoder answers), validation on create and update (422 causes), what the server sets on
//! create, what a subresource write may change, when a deletion is finished, which fields move
//! `metadata.generation`, which fields a field selector may name, how lists merge in a strategic
//! merge patch, the Table columns `kubectl get` prints with their cells, and which deletion path
//! the kind takes.
//!
//! [`rules`] finds the set of a served resource: custom resources share one ([`custom`]), every
//! built-in kind has its own entry in [`KINDS`], anything else gets the defaults ([`Plain`]).
//! Adding a built-in kind is one entry in `kcp_apis::builtin::RESOURCES` (names, verbs) and one
//! rule set here. The generic store and the API server ask [`rules`] and name no kind.
//!
//! Must not know: HTTP, storage keys, other logical clusters.

pub(crate) mod admission;
pub(crate) mod apiextensions;
pub(crate) mod certificates;
pub(crate) mod coordination;
pub mod core;
pub(crate) mod custom;
pub(crate) mod events;
pub(crate) mod flowcontrol;
pub mod printing;
pub(crate) mod rbac;

use std::borrow::Cow;

use jiff::Timestamp;
use kcp_apimachinery::patch::strategic::ListStrategy;
use kcp_apis::builtin::Resource;
use serde_json::{Value, json};

use crate::error::RegistryError;
use crate::names::NameRule;
use crate::strategy::{self, Part};
use crate::validation::field::Errors;
use crate::validation::metadata;
pub use printing::Column;

/// Which fields of an object move its `metadata.generation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Generation {
    /// The kind keeps no generation (any sent is dropped on create, kept on update).
    Untracked,
    /// These top-level fields: the generation starts at 1 and grows when one changes.
    Fields(&'static [&'static str]),
    /// Every top-level field but `apiVersion`, `kind`, `metadata` and, when `status` is a
    /// subresource, `status` (custom resources).
    AllButMetadata { status: bool },
}

/// How a delete of the kind proceeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deletion {
    /// Finalizers hold the object with a deletionTimestamp; without any it goes at once.
    Plain,
    /// The namespace lifecycle: the object turns Terminating, its content is removed by the
    /// namespace controller, and it goes once `spec.finalizers` is empty too.
    NamespaceLifecycle,
    /// A CustomResourceDefinition: its resource stops taking creates, its objects are removed,
    /// then the definition goes.
    ServedResources,
}

/// The rules of one kind; see the module docs. Every method has the default of a kind with no
/// rules of its own, so a rule set declares only what differs.
pub trait Kind: Sync + Send {
    /// The API group and kind this set serves (built-in kinds are looked up by it).
    fn group_kind(&self) -> (&'static str, &'static str);

    /// The rule object names follow.
    fn name_rule(&self) -> NameRule {
        NameRule::Subdomain
    }

    /// What decoding a body checks and fills in besides the schema's types: the exact Go
    /// messages of the fields users hit (a 400), and the API version's defaults.
    fn decode(&self, _resource: &Resource, _object: &mut Value) -> Result<(), RegistryError> {
        Ok(())
    }

    /// The problems of a new object (its name already generated).
    fn validate_create(&self, _resource: &Resource, object: &Value, errs: &mut Errors) {
        metadata::validate(object, self.name_rule(), errs);
        self.validate(object, None, errs);
    }

    /// The problems of `new` replacing `old`.
    fn validate_update(&self, _resource: &Resource, new: &Value, old: &Value, errs: &mut Errors) {
        metadata::validate_update(new, old, errs);
        metadata::validate(new, self.name_rule(), errs);
        self.validate(new, Some(old), errs);
    }

    /// Rules an update has through some parts and not others (a CertificateSigningRequest's
    /// approval conditions may change through `approval` only), after `validate_update`.
    fn validate_update_of_part(&self, _part: Part, _new: &Value, _old: &Value, _errs: &mut Errors) {
    }

    /// The kind's own rules, after the metadata ones (`old`: the stored object on update).
    fn validate(&self, _object: &Value, _old: Option<&Value>, _errs: &mut Errors) {}

    /// Fields a new object takes from who creates it (a CertificateSigningRequest records its
    /// requester), before it is validated.
    fn record_requester(&self, _object: &mut Value, _requester: &crate::store::Requester) {}

    /// Server-set fields of a new object written through `part`.
    fn prepare_create(&self, resource: &Resource, part: Part, object: &mut Value) {
        strategy::drop_status_on_create(resource, part, object);
    }

    /// The object an update of `part` stores, from the stored and the requested object.
    fn prepare_update(
        &self,
        resource: &Resource,
        part: Part,
        stored: &Value,
        requested: Value,
    ) -> Value {
        strategy::update_of_part(resource, part, stored, requested)
    }

    /// Whether storing `object` finishes its deletion: it is being deleted and nothing holds it.
    fn deletion_finished(&self, object: &Value) -> bool {
        strategy::nothing_holds(object)
    }

    /// Which fields move `metadata.generation`.
    fn generation(&self, _resource: &Resource) -> Generation {
        Generation::Untracked
    }

    /// Fields a field selector may name besides `metadata.name` and `metadata.namespace`.
    fn selectable_fields(&self) -> &'static [&'static str] {
        &[]
    }

    /// Whether a field selector may name `field` (besides the metadata ones).
    fn selects(&self, _resource: &Resource, field: &str) -> bool {
        self.selectable_fields().contains(&field)
    }

    /// The text a field selector compares for `field` (absent: compared as empty).
    fn field_value<'a>(&self, object: &'a Value, field: &str) -> Option<Cow<'a, str>> {
        field_at_path(object, field)
    }

    /// How the list at `path` merges in a strategic merge patch.
    fn list_strategy(&self, path: &[&str]) -> ListStrategy {
        metadata_list_strategy(path)
    }

    /// The Table columns `kubectl get` prints (priority 1: only with `-o wide`).
    fn columns(&self) -> &'static [Column] {
        printing::NAME_AGE
    }

    /// One object's row, one cell per column, ages measured to `now`.
    fn cells(&self, object: &Value, now: Timestamp) -> Vec<Value> {
        vec![printing::name(object), printing::age(object, now)]
    }

    /// How a delete proceeds.
    fn deletion(&self) -> Deletion {
        Deletion::Plain
    }
}

/// The defaults, for kinds with no rules of their own (the review kinds, which are never
/// stored, and anything served without a rule set).
pub struct Plain;

impl Kind for Plain {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("", "")
    }
}

/// The rule set of every built-in kind.
pub static KINDS: &[&dyn Kind] = &[
    &core::NAMESPACE,
    &core::CONFIG_MAP,
    &core::SECRET,
    &core::SERVICE_ACCOUNT,
    &core::RESOURCE_QUOTA,
    &events::CORE_EVENT,
    &events::EVENT,
    &certificates::CERTIFICATE_SIGNING_REQUEST,
    &coordination::LEASE,
    &rbac::ROLE,
    &rbac::CLUSTER_ROLE,
    &rbac::ROLE_BINDING,
    &rbac::CLUSTER_ROLE_BINDING,
    &admission::MUTATING_WEBHOOK_CONFIGURATION,
    &admission::VALIDATING_WEBHOOK_CONFIGURATION,
    &admission::VALIDATING_ADMISSION_POLICY,
    &admission::VALIDATING_ADMISSION_POLICY_BINDING,
    &flowcontrol::FLOW_SCHEMA,
    &flowcontrol::PRIORITY_LEVEL_CONFIGURATION,
    &apiextensions::CUSTOM_RESOURCE_DEFINITION,
];

/// The rule set of `resource`.
pub fn rules(resource: &Resource) -> &'static dyn Kind {
    if resource.custom.is_some() {
        return &custom::CUSTOM;
    }
    KINDS
        .iter()
        .copied()
        .find(|kind| kind.group_kind() == (&*resource.group, &*resource.kind))
        .unwrap_or(&Plain)
}

/// Whether a field selector on `resource` may name `field`, as kube-apiserver's field label
/// conversions allow.
pub fn selectable(resource: &Resource, field: &str) -> bool {
    matches!(field, "metadata.name" | "metadata.namespace")
        || rules(resource).selects(resource, field)
}

/// The value at a dotted field path as text: strings as they are, other scalars as Go prints
/// them; absent or null: `None`.
pub(crate) fn field_at_path<'a>(object: &'a Value, field: &str) -> Option<Cow<'a, str>> {
    match kcp_apimachinery::object::at_dotted(object, field)? {
        Value::String(text) => Some(Cow::Borrowed(text)),
        Value::Null => None,
        other => Some(Cow::Owned(kcp_apimachinery::jsonpath::text(other))),
    }
}

/// The metadata lists every kind merges (`finalizers` as a set, `ownerReferences` by uid).
pub(crate) fn metadata_list_strategy(path: &[&str]) -> ListStrategy {
    match path {
        ["metadata", "finalizers"] => ListStrategy::MergePrimitives,
        ["metadata", "ownerReferences"] => ListStrategy::MergeByKey("uid"),
        _ => ListStrategy::Replace,
    }
}

/// `status.conditions` merged by `type`, then the metadata lists.
pub(crate) fn conditions_list_strategy(path: &[&str]) -> ListStrategy {
    match path {
        ["status", "conditions"] => ListStrategy::MergeByKey("type"),
        _ => metadata_list_strategy(path),
    }
}

/// A JSON object with `status` reset to `{}` when it holds something else.
pub(crate) fn status_object(object: &mut Value) -> Option<&mut serde_json::Map<String, Value>> {
    let fields = object.as_object_mut()?;
    let status = fields.entry("status").or_insert_with(|| json!({}));
    if !status.is_object() {
        *status = json!({});
    }
    status.as_object_mut()
}

#[cfg(test)]
mod tests;
