//! Server-side apply and field ownership (`metadata.managedFields`), as kube-apiserver's
//! field manager does them over structured-merge-diff.
//!
//! - [`types`]: what a schema says about merging (scalar, granular or atomic maps, atomic,
//!   set or map lists), deduced from values where there is no schema.
//! - [`typed`]: the walks: field sets, comparisons, merges, removals.
//! - [`entries`]: managedFields entries, decoded, encoded, capped.
//! - here: [`FieldManager`], one write's view: [`FieldManager::update`] records what an
//!   update, patch or create changed for its manager; [`FieldManager::apply`] merges an
//!   applied configuration, refusing conflicts with other owners unless forced, and removes
//!   what the applier stopped sending and nobody else owns.
//!
//! Must not know: HTTP, storage, clocks (the caller gives the time), which kinds exist (the
//! caller gives the schema).

pub mod entries;
#[cfg(test)]
mod tests;
pub mod typed;
pub mod types;

use serde_json::Value;

use crate::fieldpath::{PathElement, Set};
use entries::{Entry, Operation, Provided};
pub use typed::TypeError;
pub use types::{NoReferences, Resolve, Schema};

/// The annotation `kubectl apply` (client-side) keeps its last configuration in.
pub const LAST_APPLIED_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The manager kubectl's server-side apply uses, the one the client-side → server-side
/// migration is for.
pub const KUBECTL_MANAGER: &str = "kubectl";

/// The owner of an object's fields before its first apply, when nothing recorded them.
pub const BEFORE_FIRST_APPLY: &str = "before-first-apply";

/// The largest total size of an object's annotations (bytes of keys and values).
const ANNOTATIONS_SIZE_LIMIT: usize = 256 * 1024;

/// Metadata fields nobody owns.
const STRIPPED_METADATA: &[&str] = &[
    "name",
    "namespace",
    "creationTimestamp",
    "selfLink",
    "uid",
    "clusterName",
    "generation",
    "managedFields",
    "resourceVersion",
];

/// One write's field manager.
pub struct FieldManager<'a> {
    /// The schema of the object's kind at the request's version.
    pub schema: Schema<'a>,
    /// The request's `group/version`.
    pub api_version: String,
    /// The subresource written (`""` for the object itself).
    pub subresource: &'a str,
    /// Top-level fields this write does not own (`status` for the object of a kind with a
    /// status subresource, `spec` for that subresource).
    pub ignored: &'a [&'a str],
    /// The time to record, RFC 3339 in seconds.
    pub now: String,
}

/// Why an apply was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApplyError {
    /// The configuration is not something to apply (400).
    BadRequest(String),
    /// Other managers own fields the configuration changes (409), one cause per field.
    Conflicts {
        message: String,
        causes: Vec<Conflict>,
    },
}

/// A field another manager owns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The path as structured-merge-diff prints it (`.data.key`).
    pub field: String,
    /// `conflict with "manager"`.
    pub message: String,
}

impl FieldManager<'_> {
    fn entry(&self, manager: &str, operation: Operation) -> Entry {
        Entry {
            manager: if manager.is_empty() {
                "unknown".into()
            } else {
                manager.into()
            },
            operation,
            api_version: self.api_version.clone(),
            subresource: self.subresource.into(),
            time: None,
            fields: Set::new(),
        }
    }

    /// Removes the fields nobody owns and the ignored top-level fields from `set`.
    fn filter(&self, set: &mut Set) {
        for name in ["apiVersion", "kind", "metadata"] {
            set.members.remove(&PathElement::Field(name.into()));
        }
        if let Some(metadata) = set.children.get_mut(&PathElement::Field("metadata".into())) {
            for name in STRIPPED_METADATA {
                metadata.members.remove(&PathElement::Field((*name).into()));
                metadata
                    .children
                    .remove(&PathElement::Field((*name).into()));
            }
        }
        for name in self.ignored {
            set.members.remove(&PathElement::Field((*name).into()));
            set.children.remove(&PathElement::Field((*name).into()));
        }
        set.children.retain(|_, child| !child.is_empty());
    }

    fn compare(&self, old: &Value, new: &Value) -> Result<typed::Comparison, TypeError> {
        let mut comparison = typed::compare(old, new, self.schema)?;
        self.filter(&mut comparison.added);
        self.filter(&mut comparison.modified);
        self.filter(&mut comparison.removed);
        Ok(comparison)
    }

    /// Records in `new`'s managedFields what `manager` changed from `live` (`None`: a
    /// create) with an update, a non-apply patch or a create. The managedFields `new`
    /// carries are the base when they decode (clients may rewrite them; `[]` or `[{}]`
    /// clears them), else `live`'s. An object without recorded owners is not tracked by
    /// updates (only creates and applies start tracking). What cannot be tracked drops the
    /// managedFields, as Kubernetes' field manager does; the write itself always goes on.
    pub fn update(&self, live: Option<&Value>, new: &mut Value, manager: &str) {
        let live_entries = || live.map(entries::of).unwrap_or_default();
        let mut owners = match entries::provided(new) {
            Provided::Reset => Vec::new(),
            Provided::Entries(entries) => entries,
            Provided::Absent | Provided::Invalid(_) => live_entries(),
        };
        if owners.is_empty() && live.is_some() {
            remove_managed_fields(new);
            return;
        }
        remove_managed_fields(new);
        let empty = Value::Object(Default::default());
        match self.track_update(live.unwrap_or(&empty), new, &mut owners, manager) {
            Ok(()) => entries::set(new, &owners),
            Err(_) => remove_managed_fields(new),
        }
    }

    fn track_update(
        &self,
        live: &Value,
        new: &Value,
        owners: &mut Vec<Entry>,
        manager: &str,
    ) -> Result<(), TypeError> {
        let typed::Comparison {
            added: mut touched,
            modified,
            removed,
        } = self.compare(live, new)?;
        touched.add(&modified);
        for owner in owners.iter_mut() {
            owner.fields = owner.fields.difference(&touched).difference(&removed);
        }
        let me = self.entry(manager, Operation::Update);
        if !touched.is_empty() {
            match owners.iter_mut().find(|o| o.same_owner(&me)) {
                Some(mine) => {
                    mine.fields.add(&touched);
                    mine.time = Some(self.now.clone());
                }
                None => owners.push(Entry {
                    time: Some(self.now.clone()),
                    fields: touched,
                    ..me
                }),
            }
        }
        owners.retain(|o| !o.fields.is_empty());
        entries::cap_updaters(owners);
        Ok(())
    }

    /// Applies `config` for `manager` over `live` (`None`: the object does not exist yet):
    /// the merged object, with its managedFields. Fields other managers own and `config`
    /// changes are conflicts unless `force` (then they change owner); fields `manager`
    /// applied before, left out now and owned by nobody else are removed.
    pub fn apply(
        &self,
        live: Option<&Value>,
        config: &Value,
        manager: &str,
        force: bool,
    ) -> Result<Value, ApplyError> {
        if config
            .get("metadata")
            .and_then(|m| m.get("managedFields"))
            .is_some_and(|m| !m.is_null())
        {
            return Err(ApplyError::BadRequest(
                "metadata.managedFields must be nil".into(),
            ));
        }
        let empty = Value::Object(Default::default());
        let mut live_object = live.cloned().unwrap_or_else(|| empty.clone());
        let mut owners = entries::of(&live_object);
        remove_managed_fields(&mut live_object);
        if owners.is_empty() && live.is_some() {
            // Fields set before anything was recorded belong to one updater.
            self.track_update(&empty, &live_object, &mut owners, BEFORE_FIRST_APPLY)
                .map_err(type_error)?;
        }
        let result = self.apply_once(&live_object, config, &mut owners.clone(), manager, force);
        let (mut object, owners) = match result {
            Err(ApplyError::Conflicts { .. }) if manager == KUBECTL_MANAGER && !force => {
                match self.migrated_from_client_side(&live_object, config, &owners, manager)? {
                    Some(applied) => applied,
                    None => {
                        return self
                            .apply_once(&live_object, config, &mut owners, manager, force)
                            .map(|(object, _)| object);
                    }
                }
            }
            other => other?,
        };
        entries::set(&mut object, &owners);
        if manager == KUBECTL_MANAGER && last_applied(&live_object).is_some() {
            set_last_applied(&mut object, config);
        }
        Ok(object)
    }

    /// One apply; `owners` become the new owners.
    fn apply_once(
        &self,
        live: &Value,
        config: &Value,
        owners: &mut Vec<Entry>,
        manager: &str,
        force: bool,
    ) -> Result<(Value, Vec<Entry>), ApplyError> {
        let merged = typed::merge(live, config, self.schema).map_err(type_error)?;
        let mut applied = typed::field_set(config, self.schema).map_err(type_error)?;
        self.filter(&mut applied);
        let me = self.entry(manager, Operation::Apply);
        let previous = owners
            .iter()
            .position(|o| o.same_owner(&me))
            .map(|i| owners.remove(i));
        let mut merged = merged;
        if let Some(previous) = &previous {
            // What the applier owned, no longer applies, and nobody else owns: removed.
            let mut still_owned = applied.clone();
            for owner in owners.iter() {
                still_owned.add(&owner.fields);
            }
            let mut dropped = previous.fields.difference(&still_owned);
            keep_fields_with_owned_insides(&mut dropped, &still_owned);
            if !dropped.is_empty() {
                merged = typed::remove(&merged, &dropped, self.schema);
            }
        }
        let comparison = self.compare(live, &merged).map_err(type_error)?;
        let touched = comparison.added.union(&comparison.modified);
        let mut conflicts = Vec::new();
        for owner in owners.iter() {
            let clash = owner.fields.intersection(&touched);
            for path in clash.paths() {
                conflicts.push((owner.describe(), path));
            }
        }
        if !conflicts.is_empty() && !force {
            return Err(conflict_error(conflicts));
        }
        for owner in owners.iter_mut() {
            owner.fields = owner
                .fields
                .difference(&touched)
                .difference(&comparison.removed);
        }
        let changed = !comparison.is_same() || merged != *live;
        let time = match (&previous, changed) {
            (_, true) => Some(self.now.clone()),
            (Some(previous), false) => previous.time.clone(),
            (None, false) => None,
        };
        owners.push(Entry {
            time,
            fields: applied,
            ..me
        });
        owners.retain(|o| !o.fields.is_empty());
        entries::cap_updaters(owners);
        Ok((merged, owners.clone()))
    }

    /// kubectl's move from client-side to server-side apply: conflicts only over fields the
    /// last-applied annotation holds with the live values are forced. `None` when other
    /// conflicts remain (reported by the caller's plain apply).
    #[allow(clippy::type_complexity)]
    fn migrated_from_client_side(
        &self,
        live: &Value,
        config: &Value,
        owners: &[Entry],
        manager: &str,
    ) -> Result<Option<(Value, Vec<Entry>)>, ApplyError> {
        let Some(allowed) = self.allowed_by_last_applied(live) else {
            return Ok(None);
        };
        let me = self.entry(manager, Operation::Apply);
        let merged = typed::merge(live, config, self.schema).map_err(type_error)?;
        let comparison = self.compare(live, &merged).map_err(type_error)?;
        let touched = comparison.added.union(&comparison.modified);
        let contested =
            owners
                .iter()
                .filter(|o| !o.same_owner(&me))
                .fold(Set::new(), |mut acc, o| {
                    acc.add(&o.fields.intersection(&touched));
                    acc
                });
        if !contested.difference(&allowed).is_empty() {
            return Ok(None);
        }
        let mut owners = owners.to_vec();
        self.apply_once(live, config, &mut owners, manager, true)
            .map(Some)
    }

    /// The fields of the last-applied annotation whose values the live object still has.
    fn allowed_by_last_applied(&self, live: &Value) -> Option<Set> {
        let text = last_applied(live)?;
        let last: Value = serde_json::from_str(text).ok()?;
        if last.get("apiVersion").and_then(Value::as_str) != Some(self.api_version.as_str()) {
            return None;
        }
        let fields = typed::field_set(&last, self.schema).ok()?;
        let comparison = typed::compare(&last, live, self.schema).ok()?;
        Some(
            fields
                .difference(&comparison.modified)
                .difference(&comparison.added)
                .difference(&comparison.removed),
        )
    }
}

/// A field (not a list item) the applier no longer owns stays when something inside it is
/// still owned; only what is inside goes (structured-merge-diff treats named fields with owned
/// children as owned).
fn keep_fields_with_owned_insides(dropped: &mut Set, owned: &Set) {
    dropped.members.retain(|element| {
        !matches!(element, PathElement::Field(_))
            || owned.children.get(element).is_none_or(Set::is_empty)
    });
    for (element, below) in dropped.children.iter_mut() {
        if let Some(owned_below) = owned.children.get(element) {
            keep_fields_with_owned_insides(below, owned_below);
        }
    }
}

fn type_error(error: TypeError) -> ApplyError {
    ApplyError::BadRequest(format!("failed to create typed patch object: {error}"))
}

/// The 409 of conflicts with other managers, with Kubernetes' message.
fn conflict_error(conflicts: Vec<(String, Vec<PathElement>)>) -> ApplyError {
    let causes: Vec<Conflict> = conflicts
        .iter()
        .map(|(owner, path)| Conflict {
            field: typed::path_string(path),
            message: format!("conflict with {owner}"),
        })
        .collect();
    let message = if let [(owner, path)] = conflicts.as_slice() {
        format!(
            "Apply failed with 1 conflict: conflict with {owner}: {}",
            typed::path_string(path)
        )
    } else {
        let mut by_owner: std::collections::BTreeMap<&str, Vec<String>> = Default::default();
        for (owner, path) in &conflicts {
            by_owner
                .entry(owner)
                .or_default()
                .push(typed::path_string(path));
        }
        let mut lines = Vec::new();
        for (owner, paths) in by_owner {
            lines.push(format!("conflicts with {owner}:"));
            lines.extend(paths.into_iter().map(|p| format!("- {p}")));
        }
        format!(
            "Apply failed with {} conflicts: {}",
            conflicts.len(),
            lines.join("\n")
        )
    };
    ApplyError::Conflicts { message, causes }
}

fn remove_managed_fields(object: &mut Value) {
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("managedFields");
    }
}

fn last_applied(object: &Value) -> Option<&str> {
    object
        .get("metadata")?
        .get("annotations")?
        .get(LAST_APPLIED_ANNOTATION)?
        .as_str()
        .filter(|text| !text.is_empty())
}

/// Keeps kubectl's last-applied annotation in step with a server-side apply, so going back
/// to client-side apply works; dropped if the annotations would grow past their limit.
fn set_last_applied(object: &mut Value, config: &Value) {
    let mut config = config.clone();
    if let Some(annotations) = config
        .get_mut("metadata")
        .and_then(|m| m.get_mut("annotations"))
        .and_then(Value::as_object_mut)
    {
        annotations.remove(LAST_APPLIED_ANNOTATION);
    }
    let text = config.to_string();
    let Some(annotations) = object
        .get_mut("metadata")
        .and_then(|m| m.get_mut("annotations"))
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    annotations.insert(LAST_APPLIED_ANNOTATION.into(), Value::String(text));
    let size: usize = annotations
        .iter()
        .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
        .sum();
    if size > ANNOTATIONS_SIZE_LIMIT {
        annotations.remove(LAST_APPLIED_ANNOTATION);
    }
}
