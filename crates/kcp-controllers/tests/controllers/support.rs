//! Helpers the controller tests share: finding built-in resources, saying where a request goes,
//! and waiting for what the controllers do in the background.

use std::time::Duration;

use kcp_apis::builtin::{RESOURCES, Resource};
use kcp_registry::Target;
use tokio::time::Instant;

/// How long a test waits for the controllers before it fails. Generous: a loaded machine is
/// slow, and a passing test returns as soon as the condition holds.
const DEADLINE: Duration = Duration::from_secs(30);
/// How often a waiting test looks again.
const POLL: Duration = Duration::from_millis(10);

/// The built-in resource `name` of API group `group` (`""` for the core group).
pub fn builtin(group: &str, name: &str) -> &'static Resource {
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.name == name)
        .unwrap_or_else(|| panic!("no built-in resource {name} in group {group:?}"))
}

/// Namespaces of `cluster`.
pub fn namespaces(cluster: &str) -> Target<'_> {
    Target {
        cluster,
        resource: builtin("", "namespaces"),
        namespace: None,
    }
}

/// `resource` in `namespace` of `cluster`.
pub fn namespaced<'a>(cluster: &'a str, resource: &'a Resource, namespace: &'a str) -> Target<'a> {
    Target {
        cluster,
        resource,
        namespace: Some(namespace),
    }
}

/// Polls `check` until it answers something, and returns that; fails the test, naming `what`,
/// if nothing comes within the deadline.
pub async fn eventually_some<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + DEADLINE;
    loop {
        if let Some(done) = check().await {
            return done;
        }
        if Instant::now() >= deadline {
            panic!("timed out after {DEADLINE:?} waiting until {what}");
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Polls `check` until it holds; fails the test, naming `what`, if it does not within the
/// deadline.
pub async fn eventually(what: &str, mut check: impl AsyncFnMut() -> bool) {
    eventually_some(what, async || check().await.then_some(())).await
}
