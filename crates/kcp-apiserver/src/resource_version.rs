//! `resourceVersion` and `resourceVersionMatch` on reads, as kube-apiserver validates and
//! serves them.
//!
//! Unset: the latest state. `"0"`: any state (served as the latest). `N` (NotOlderThan, the
//! default match): a state at least as new as N, so the latest once storage has reached N (it
//! waits up to 3 s for that, then answers 504 "Too large resource version"). `N` with `resourceVersionMatch=Exact` on a list: the
//! snapshot at N, 410 once compacted.

use std::time::Duration;

use kcp_registry::{Cause, Registry, RegistryError};

use crate::scope::Params;

/// Which state a read is served from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadAt {
    /// The latest state (resourceVersion unset or "0").
    Latest,
    /// The latest state, which must have reached this revision.
    NotOlderThan(u64),
    /// Exactly this snapshot.
    Exact(u64),
}

impl ReadAt {
    /// The revision to read a list at (0: latest), after checking storage has reached it.
    pub(crate) async fn revision(self, registry: &Registry) -> Result<u64, RegistryError> {
        let (ReadAt::NotOlderThan(requested) | ReadAt::Exact(requested)) = self else {
            return Ok(0);
        };
        wait_for_revision(registry, requested).await?;
        Ok(match self {
            ReadAt::Exact(revision) => revision,
            _ => 0,
        })
    }
}

/// How long a read of a revision storage has not reached yet waits for it before answering
/// "Too large resource version", as kube-apiserver's watch cache waits.
const FRESHNESS_WAIT: Duration = Duration::from_secs(3);
/// How often the wait looks at storage's revision again.
const FRESHNESS_POLL: Duration = Duration::from_millis(25);

/// Waits until storage has reached `requested` (at most [`FRESHNESS_WAIT`]).
pub(crate) async fn wait_for_revision(
    registry: &Registry,
    requested: u64,
) -> Result<(), RegistryError> {
    let deadline = tokio::time::Instant::now() + FRESHNESS_WAIT;
    loop {
        let current = registry.current_revision().await?;
        if requested <= current {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(RegistryError::TooLargeResourceVersion { requested, current });
        }
        tokio::time::sleep(FRESHNESS_POLL).await;
    }
}

fn parse_revision(value: &str) -> Result<u64, RegistryError> {
    value
        .parse()
        .map_err(|_| RegistryError::BadRequest(format!("invalid resource version: {value}")))
}

fn forbidden(message: &str) -> Cause {
    Cause {
        reason: "FieldValueForbidden",
        field: "resourceVersionMatch".into(),
        message: format!("Forbidden: {message}"),
    }
}

/// The read state of a get.
pub(crate) fn for_get(params: &Params) -> Result<ReadAt, RegistryError> {
    match params.get("resourceVersion") {
        None | Some("0") => Ok(ReadAt::Latest),
        Some(value) => Ok(ReadAt::NotOlderThan(parse_revision(value)?)),
    }
}

/// The read state of a list, after kube-apiserver's ListOptions validation.
pub(crate) fn for_list(params: &Params) -> Result<ReadAt, RegistryError> {
    let version = params.get("resourceVersion");
    let continued = params.get("continue").is_some();
    let mut causes = Vec::new();
    let matching = params.get("resourceVersionMatch");
    if let Some(matching) = matching {
        if version.is_none() {
            causes.push(forbidden(
                "resourceVersionMatch is forbidden unless resourceVersion is provided",
            ));
        }
        if continued {
            causes.push(forbidden(
                "resourceVersionMatch is forbidden when continue is provided",
            ));
        }
        if matching != "Exact" && matching != "NotOlderThan" {
            causes.push(Cause {
                reason: "FieldValueNotSupported",
                field: "resourceVersionMatch".into(),
                message: format!(
                    "Unsupported value: {matching:?}: supported values: \"Exact\", \"NotOlderThan\", \"\""
                ),
            });
        }
        if matching == "Exact" && version == Some("0") {
            causes.push(forbidden(
                "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
            ));
        }
    }
    if params.get("sendInitialEvents").is_some() {
        causes.push(Cause {
            reason: "FieldValueForbidden",
            field: "sendInitialEvents".into(),
            message: "Forbidden: sendInitialEvents is forbidden for list".into(),
        });
    }
    if !causes.is_empty() {
        return Err(RegistryError::Invalid {
            kind: "ListOptions".into(),
            group: "meta.k8s.io".into(),
            name: String::new(),
            causes,
        });
    }
    if continued && version.is_some_and(|v| v != "0") {
        return Err(RegistryError::BadRequest(
            "specifying resource version is not allowed when using continue".into(),
        ));
    }
    match (version, matching) {
        (None | Some("0"), _) => Ok(ReadAt::Latest),
        (Some(value), Some("Exact")) => Ok(ReadAt::Exact(parse_revision(value)?)),
        (Some(value), _) => Ok(ReadAt::NotOlderThan(parse_revision(value)?)),
    }
}

/// Checks a watch's options as kube-apiserver does: `resourceVersionMatch` only as
/// `NotOlderThan` together with `sendInitialEvents`, which needs it.
pub(crate) fn check_watch(params: &Params) -> Result<(), RegistryError> {
    let matching = params.get("resourceVersionMatch");
    let initial_events = params.get("sendInitialEvents").is_some();
    let mut causes = Vec::new();
    if initial_events && matching != Some("NotOlderThan") {
        causes.push(forbidden(
            "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ));
    }
    if let Some(matching) = matching {
        if !initial_events {
            causes.push(forbidden(
                "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
            ));
        }
        if matching != "NotOlderThan" {
            causes.push(Cause {
                reason: "FieldValueNotSupported",
                field: "resourceVersionMatch".into(),
                message: format!(
                    "Unsupported value: {matching:?}: supported values: \"NotOlderThan\""
                ),
            });
        }
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(RegistryError::Invalid {
            kind: "ListOptions".into(),
            group: "meta.k8s.io".into(),
            name: String::new(),
            causes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(query: &str) -> Result<ReadAt, RegistryError> {
        for_list(&Params::parse(Some(query)))
    }

    #[test]
    fn lists_read_latest_not_older_than_or_exact() {
        assert_eq!(list("").unwrap(), ReadAt::Latest);
        assert_eq!(list("resourceVersion=0").unwrap(), ReadAt::Latest);
        assert_eq!(list("resourceVersion=7").unwrap(), ReadAt::NotOlderThan(7));
        assert_eq!(
            list("resourceVersion=7&resourceVersionMatch=NotOlderThan").unwrap(),
            ReadAt::NotOlderThan(7)
        );
        assert_eq!(
            list("resourceVersion=7&resourceVersionMatch=Exact").unwrap(),
            ReadAt::Exact(7)
        );
    }

    #[test]
    fn watches_take_resource_version_match_only_with_initial_events() {
        let watch = |query: &str| check_watch(&Params::parse(Some(query)));
        assert!(watch("resourceVersion=5").is_ok());
        assert!(
            watch(
                "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"
            )
            .is_ok()
        );
        assert!(watch("sendInitialEvents=true").is_err());
        assert!(watch("resourceVersionMatch=NotOlderThan").is_err());
        assert!(watch("sendInitialEvents=true&resourceVersionMatch=Exact").is_err());
    }

    #[test]
    fn invalid_combinations_are_refused_as_kubernetes_does() {
        let error = list("resourceVersionMatch=Exact").unwrap_err();
        assert_eq!(
            error.to_string(),
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"
        );
        assert!(matches!(
            list("resourceVersion=0&resourceVersionMatch=Exact"),
            Err(RegistryError::Invalid { .. })
        ));
        assert!(matches!(
            list("resourceVersion=1&resourceVersionMatch=Newest"),
            Err(RegistryError::Invalid { .. })
        ));
        assert!(matches!(
            list("resourceVersion=5&continue=abc"),
            Err(RegistryError::BadRequest(_))
        ));
        assert!(matches!(
            list("resourceVersion=abc"),
            Err(RegistryError::BadRequest(_))
        ));
    }

    async fn call(
        router: &crate::router::Router,
        method: &str,
        path: &str,
        body: &str,
    ) -> (u16, serde_json::Value) {
        let (code, text) = crate::test_support::call(router, method, path, body).await;
        (code, serde_json::from_str(&text).unwrap())
    }

    // Paused time: the watch timeouts and waits pass as soon as nothing else can run.
    #[tokio::test(start_paused = true)]
    async fn lists_serve_exact_snapshots_and_refuse_future_versions() {
        let router = crate::test_support::router();
        let namespaces = "/clusters/root/api/v1/namespaces";
        let (code, first) = call(&router, "POST", namespaces, r#"{"metadata":{"name":"a"}}"#).await;
        assert_eq!(code, 201);
        let at = first["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .to_string();
        call(&router, "POST", namespaces, r#"{"metadata":{"name":"b"}}"#).await;

        let (_, latest) = call(&router, "GET", namespaces, "").await;
        assert_eq!(latest["items"].as_array().unwrap().len(), 2);
        let exact = format!("{namespaces}?resourceVersion={at}&resourceVersionMatch=Exact");
        let (code, snapshot) = call(&router, "GET", &exact, "").await;
        assert_eq!(code, 200);
        assert_eq!(snapshot["items"].as_array().unwrap().len(), 1);
        assert_eq!(snapshot["metadata"]["resourceVersion"], at.as_str());

        let (code, status) = call(
            &router,
            "GET",
            &format!("{namespaces}?resourceVersion=999"),
            "",
        )
        .await;
        assert_eq!(code, 504);
        assert_eq!(status["reason"], "Timeout");
        assert_eq!(
            status["details"]["causes"][0]["reason"],
            "ResourceVersionTooLarge"
        );
        let (code, _) = call(
            &router,
            "GET",
            &format!("{namespaces}/a?resourceVersion=999"),
            "",
        )
        .await;
        assert_eq!(code, 504);
        let (code, _) = call(
            &router,
            "GET",
            &format!("{namespaces}/a?resourceVersion={at}"),
            "",
        )
        .await;
        assert_eq!(code, 200);
        let (code, status) = call(
            &router,
            "GET",
            &format!("{namespaces}?resourceVersionMatch=Exact"),
            "",
        )
        .await;
        assert_eq!(code, 422);
        assert_eq!(
            status["details"]["causes"][0]["field"],
            "resourceVersionMatch"
        );
    }
}
