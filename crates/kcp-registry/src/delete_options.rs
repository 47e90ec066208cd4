//! What a delete asks for besides the object's name (`DeleteOptions`): how its dependents go
//! (propagation), and what the object must still be (preconditions).
//!
//! Propagation is carried by two finalizers the garbage collector serves, as in Kubernetes:
//! `orphan` (dependents lose their reference to the object first) and `foregroundDeletion` (the
//! dependents go first). A delete sets or clears them before it marks the object deleted; an
//! object without either has its dependents collected after it is gone (background).

use serde_json::Value;

use crate::error::{Cause, RegistryError};

/// The finalizer of an object whose dependents are orphaned before it goes.
pub const ORPHAN_FINALIZER: &str = "orphan";
/// The finalizer of an object whose blocking dependents go before it does.
pub const FOREGROUND_FINALIZER: &str = "foregroundDeletion";

/// How an object's dependents go with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    /// They stay, without their reference to the object.
    Orphan,
    /// The object goes now; the garbage collector deletes them afterwards.
    Background,
    /// They go first (those with `blockOwnerDeletion`), then the object.
    Foreground,
}

impl Propagation {
    fn parse(text: &str) -> Option<Propagation> {
        match text {
            "Orphan" => Some(Propagation::Orphan),
            "Background" => Some(Propagation::Background),
            "Foreground" => Some(Propagation::Foreground),
            _ => None,
        }
    }

    /// The name Kubernetes gives the policy.
    pub fn as_str(self) -> &'static str {
        match self {
            Propagation::Orphan => "Orphan",
            Propagation::Background => "Background",
            Propagation::Foreground => "Foreground",
        }
    }
}

/// The options of a delete.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeleteOptions {
    /// `propagationPolicy`, or the deprecated `orphanDependents` as the policy it means (`true`:
    /// Orphan, `false`: Background). `None`: the object's deletion finalizers decide.
    pub propagation: Option<Propagation>,
    /// `preconditions.uid`: the object must have this uid.
    pub uid: Option<String>,
    /// `preconditions.resourceVersion`: the object must be at this revision.
    pub resource_version: Option<String>,
}

impl DeleteOptions {
    /// Options with only a propagation policy.
    pub fn propagating(propagation: Propagation) -> DeleteOptions {
        DeleteOptions {
            propagation: Some(propagation),
            ..DeleteOptions::default()
        }
    }

    /// Reads a DeleteOptions object (a request body, or one built from query parameters).
    pub fn from_value(options: &Value) -> Result<DeleteOptions, RegistryError> {
        let mut causes = Vec::new();
        let propagation = match &options["propagationPolicy"] {
            Value::Null => None,
            Value::String(text) => {
                let parsed = Propagation::parse(text);
                if parsed.is_none() {
                    causes.push(Cause {
                        reason: "FieldValueNotSupported",
                        field: "propagationPolicy".into(),
                        message: format!(
                            "Unsupported value: \"{text}\": supported values: \"Foreground\", \
                             \"Background\", \"Orphan\", \"nil\""
                        ),
                    });
                }
                parsed
            }
            _ => return Err(bad_options("propagationPolicy must be a string")),
        };
        let orphan = match &options["orphanDependents"] {
            Value::Null => None,
            Value::Bool(orphan) => Some(*orphan),
            _ => return Err(bad_options("orphanDependents must be a boolean")),
        };
        if let (Some(_), Some(policy)) = (orphan, options["propagationPolicy"].as_str()) {
            causes.insert(
                0,
                Cause {
                    reason: "FieldValueInvalid",
                    field: "propagationPolicy".into(),
                    message: format!(
                        "Invalid value: \"{policy}\": orphanDependents and deletionPropagation \
                         cannot be both set"
                    ),
                },
            );
        }
        if !causes.is_empty() {
            return Err(RegistryError::Invalid {
                kind: "DeleteOptions".into(),
                group: "meta.k8s.io".into(),
                name: String::new(),
                causes,
            });
        }
        let precondition = |field: &str| match &options["preconditions"][field] {
            Value::Null => Ok(None),
            Value::String(text) => Ok(Some(text.clone())),
            _ => Err(bad_options(&format!(
                "preconditions.{field} must be a string"
            ))),
        };
        Ok(DeleteOptions {
            propagation: propagation.or(orphan.map(|orphan| {
                if orphan {
                    Propagation::Orphan
                } else {
                    Propagation::Background
                }
            })),
            uid: precondition("uid")?,
            resource_version: precondition("resourceVersion")?,
        })
    }

    /// The 409 a precondition the object `current` (at `revision`) fails answers.
    pub(crate) fn failed_precondition(&self, current: &Value, revision: u64) -> Option<String> {
        let uid = current["metadata"]["uid"].as_str().unwrap_or_default();
        if let Some(wanted) = &self.uid
            && wanted != uid
        {
            return Some(format!(
                "Precondition failed: UID in precondition: {wanted}, UID in object meta: {uid}"
            ));
        }
        if let Some(wanted) = &self.resource_version
            && *wanted != revision.to_string()
        {
            return Some(format!(
                "Precondition failed: ResourceVersion in precondition: {wanted}, \
                 ResourceVersion in object meta: {revision}"
            ));
        }
        None
    }

    /// The finalizers `object` carries once this delete's propagation is applied: the
    /// garbage collector's two are set or cleared as the policy says; without a policy, the
    /// object's own say. Other finalizers keep their order. `None` when nothing changes.
    pub(crate) fn finalizers_for(&self, object: &Value) -> Option<Vec<Value>> {
        let current: Vec<&str> = object["metadata"]["finalizers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let next = self.finalizers_after(&current)?;
        Some(
            next.into_iter()
                .map(|f| Value::from(f.to_string()))
                .collect(),
        )
    }

    /// [`DeleteOptions::finalizers_for`] an object carrying the finalizers `current`.
    pub(crate) fn finalizers_after<'a>(&self, current: &[&'a str]) -> Option<Vec<&'a str>> {
        let has = |name: &str| current.contains(&name);
        let (orphan, foreground) = match self.propagation {
            Some(Propagation::Orphan) => (true, false),
            Some(Propagation::Foreground) => (false, true),
            Some(Propagation::Background) => (false, false),
            None if has(ORPHAN_FINALIZER) => (true, false),
            None if has(FOREGROUND_FINALIZER) => (false, true),
            None => (false, false),
        };
        let mut next: Vec<&'a str> = current
            .iter()
            .copied()
            .filter(|f| *f != ORPHAN_FINALIZER && *f != FOREGROUND_FINALIZER)
            .collect();
        if orphan {
            next.push(ORPHAN_FINALIZER);
        }
        if foreground {
            next.push(FOREGROUND_FINALIZER);
        }
        let same = next.len() == current.len() && next.iter().all(|f| current.contains(f));
        (!same).then_some(next)
    }

    /// Whether the delete names preconditions the object must meet.
    pub(crate) fn has_preconditions(&self) -> bool {
        self.uid.is_some() || self.resource_version.is_some()
    }
}

fn bad_options(message: &str) -> RegistryError {
    RegistryError::BadRequest(format!("invalid DeleteOptions: {message}"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn finalizers(options: &DeleteOptions, finalizers: Value) -> Option<Vec<Value>> {
        options.finalizers_for(&json!({"metadata": {"finalizers": finalizers}}))
    }

    #[test]
    fn a_policy_sets_its_finalizer_and_clears_the_other() {
        let orphan = DeleteOptions::propagating(Propagation::Orphan);
        let foreground = DeleteOptions::propagating(Propagation::Foreground);
        let background = DeleteOptions::propagating(Propagation::Background);
        assert_eq!(
            finalizers(&orphan, json!(["a/b"])),
            Some(vec![json!("a/b"), json!("orphan")])
        );
        assert_eq!(
            finalizers(&foreground, json!(["orphan", "a/b"])),
            Some(vec![json!("a/b"), json!("foregroundDeletion")])
        );
        assert_eq!(
            finalizers(&background, json!(["foregroundDeletion"])),
            Some(vec![])
        );
        assert_eq!(finalizers(&background, json!(["a/b"])), None);
        assert_eq!(finalizers(&orphan, json!(["orphan"])), None);
    }

    #[test]
    fn without_a_policy_the_objects_finalizers_decide() {
        let none = DeleteOptions::default();
        assert_eq!(finalizers(&none, json!(["orphan"])), None);
        assert_eq!(finalizers(&none, json!(["foregroundDeletion", "x"])), None);
        assert_eq!(finalizers(&none, json!(null)), None);
    }

    #[test]
    fn options_read_as_kubernetes_reads_them() {
        let read = |v: Value| DeleteOptions::from_value(&v);
        assert_eq!(
            read(json!({"propagationPolicy": "Foreground"})).unwrap(),
            DeleteOptions::propagating(Propagation::Foreground)
        );
        assert_eq!(
            read(json!({"orphanDependents": true})).unwrap().propagation,
            Some(Propagation::Orphan)
        );
        assert_eq!(
            read(json!({"orphanDependents": false}))
                .unwrap()
                .propagation,
            Some(Propagation::Background)
        );
        let both = read(json!({"orphanDependents": true, "propagationPolicy": "Orphan"}));
        assert!(
            matches!(both, Err(RegistryError::Invalid { .. })),
            "{both:?}"
        );
        let unknown = read(json!({"propagationPolicy": "Sideways"})).unwrap_err();
        assert!(
            unknown
                .to_string()
                .contains("Unsupported value: \"Sideways\"")
        );
        let uid = read(json!({"preconditions": {"uid": "u1"}})).unwrap();
        assert_eq!(uid.uid.as_deref(), Some("u1"));
        assert!(
            uid.failed_precondition(&json!({"metadata": {"uid": "u2"}}), 3)
                .unwrap()
                .contains("UID in precondition: u1, UID in object meta: u2")
        );
        assert_eq!(
            uid.failed_precondition(&json!({"metadata": {"uid": "u1"}}), 3),
            None
        );
        assert!(matches!(
            read(json!({"propagationPolicy": 3})),
            Err(RegistryError::BadRequest(_))
        ));
    }
}
