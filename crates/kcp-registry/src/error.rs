//! Registry errors: each knows its Kubernetes reason; the API server maps them to `Status`.

/// One field-level problem of an invalid object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// e.g. `FieldValueRequired`, `FieldValueInvalid`.
    pub reason: &'static str,
    pub field: String,
    pub message: String,
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum RegistryError {
    /// `<resource> "<name>" not found`.
    #[error("{qualified_resource} \"{name}\" not found")]
    NotFound {
        qualified_resource: String,
        name: String,
    },
    #[error("{qualified_resource} \"{name}\" already exists")]
    AlreadyExists {
        qualified_resource: String,
        name: String,
    },
    #[error("Operation cannot be fulfilled on {qualified_resource} \"{name}\": {reason}")]
    Conflict {
        qualified_resource: String,
        name: String,
        reason: String,
    },
    /// 409: a server-side apply changes fields other managers own; one
    /// `FieldManagerConflict` cause per field.
    #[error("{message}")]
    ApplyConflict { message: String, causes: Vec<Cause> },
    /// 422 with field causes; `kind`, `group` and `name` name the object.
    #[error("{}", invalid_message(kind, group, name, causes))]
    Invalid {
        kind: String,
        group: String,
        name: String,
        causes: Vec<Cause>,
    },
    /// 403: the request is refused (creating in a terminating namespace, deleting `default`).
    /// `name` may be empty (an object with only a generateName).
    #[error("{qualified_resource}{} is forbidden: {message}", if name.is_empty() { String::new() } else { format!(" \"{name}\"") })]
    Forbidden {
        qualified_resource: String,
        name: String,
        message: String,
        causes: Vec<Cause>,
    },
    #[error("{0}")]
    BadRequest(String),
    /// 405: the verb is not allowed on the resource now (creating custom resources of a
    /// terminating CRD).
    #[error("{0}")]
    MethodNotAllowed(String),
    /// 422: a well-formed request that cannot apply (a JSON patch whose test fails).
    #[error("{0}")]
    Unprocessable(String),
    /// 413: a request larger than the server takes (a JSON patch of more than 10,000
    /// operations), with kube-apiserver's `Request entity too large: ` before the reason.
    #[error("Request entity too large: {0}")]
    RequestEntityTooLarge(String),
    /// 410: a continue token or resource version that storage has compacted away.
    #[error("{0}")]
    Expired(String),
    /// 410: a continue token whose snapshot storage has compacted away. `continue_token`
    /// resumes the list after the same key at the latest revision: the rest of an inconsistent
    /// list, which kube-apiserver offers in the Status's `metadata.continue`.
    #[error("{CONTINUE_EXPIRED}")]
    ContinueExpired { continue_token: String },
    /// 504: a read asked for a resource version storage has not reached.
    #[error("Too large resource version: {requested}, current: {current}")]
    TooLargeResourceVersion { requested: u64, current: u64 },
    /// 504/503: storage could not answer.
    #[error("{0}")]
    Unavailable(String),
    #[error("{0}")]
    Internal(String),
    /// A refusal worded by someone else (an admission webhook's `status`): its code (400 or
    /// more), reason, message and details, as they come.
    #[error("{message}")]
    Refused {
        code: u16,
        reason: String,
        message: String,
        details: Option<serde_json::Value>,
    },
}

/// kube-apiserver's message for a continue token past compaction, with a token for the rest.
const CONTINUE_EXPIRED: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

/// kube-apiserver's `NewInvalid` message: `Kind.group "name" is invalid: <causes>`, the causes
/// aggregated as Go aggregates errors (duplicates dropped; more than one in brackets).
fn invalid_message(kind: &str, group: &str, name: &str, causes: &[Cause]) -> String {
    let qualified_kind = if group.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}.{group}")
    };
    let mut seen = Vec::new();
    for cause in causes {
        let text = format!("{}: {}", cause.field, cause.message);
        if !seen.contains(&text) {
            seen.push(text);
        }
    }
    match seen.len() {
        0 => format!("{qualified_kind} \"{name}\" is invalid"),
        1 => format!("{qualified_kind} \"{name}\" is invalid: {}", seen[0]),
        _ => format!(
            "{qualified_kind} \"{name}\" is invalid: [{}]",
            seen.join(", ")
        ),
    }
}

/// The cause of a create refused because its namespace is being deleted (Kubernetes'
/// `NamespaceTerminatingCause`).
pub(crate) const NAMESPACE_TERMINATING: &str = "NamespaceTerminating";

impl RegistryError {
    /// Whether this refused a create because its namespace is being deleted: there is nothing
    /// to make in it any more, and a controller takes the refusal as done, not to retry.
    pub fn refused_as_namespace_terminating(&self) -> bool {
        matches!(self, RegistryError::Forbidden { causes, .. }
            if causes.iter().any(|cause| cause.reason == NAMESPACE_TERMINATING))
    }
}

impl From<kcp_storage::StorageError> for RegistryError {
    fn from(error: kcp_storage::StorageError) -> Self {
        use kcp_storage::StorageError as S;
        match error {
            S::Compacted { .. } => RegistryError::Expired(
                "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.".into(),
            ),
            S::FutureRevision { requested, .. } => {
                RegistryError::Unavailable(format!("Too large resource version: {requested}"))
            }
            S::Unavailable(message) => RegistryError::Unavailable(message),
            other => RegistryError::Internal(other.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cause(field: &str, message: &str) -> Cause {
        Cause {
            reason: "FieldValueInvalid",
            field: field.into(),
            message: message.into(),
        }
    }

    #[test]
    fn invalid_messages_name_the_group_and_aggregate_causes() {
        let invalid = |group: &str, causes: Vec<Cause>| RegistryError::Invalid {
            kind: "RoleBinding".into(),
            group: group.into(),
            name: "rb".into(),
            causes,
        };
        assert_eq!(
            invalid("", vec![]).to_string(),
            "RoleBinding \"rb\" is invalid"
        );
        assert_eq!(
            invalid("rbac.authorization.k8s.io", vec![cause("a", "x")]).to_string(),
            "RoleBinding.rbac.authorization.k8s.io \"rb\" is invalid: a: x"
        );
        assert_eq!(
            invalid("", vec![cause("a", "x"), cause("b", "y"), cause("a", "x")]).to_string(),
            "RoleBinding \"rb\" is invalid: [a: x, b: y]"
        );
    }
}
