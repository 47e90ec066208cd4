//! Virtual workspaces: views across logical clusters served under `/services/...`, as kcp's
//! in-process virtual workspace server serves them, over the same handlers as `/clusters/`.
//! Each view is a mount of its own ([`crate::mount`]) whose one layer admits a request to the
//! view: its own authorization, and the request rewritten to what the view lets it see.
//!
//! - [`apiexport`]: `/services/apiexport/<cluster>/<export>/clusters/<consumer or *>/...`, an
//!   export's provider's view of every workspace bound to it.
//! - [`lifecycle`]: `/services/initializingworkspaces/<initializer>/clusters/<* or
//!   cluster>/...` and `/services/terminatingworkspaces/<terminator>/...`, an initializer's
//!   (a terminator's) view of the workspaces waiting for it.

pub mod apiexport;
pub mod lifecycle;

pub use lifecycle::Stage;

use kcp_registry::{Registry, ServedResources};

use crate::authn::User;
use crate::authz::Authorizer;
use crate::error::ApiError;
use crate::request_info::RequestInfo;

/// A view a request is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum View {
    /// The APIExport `export` of the logical cluster `cluster`.
    ApiExport { cluster: String, export: String },
    /// The workspaces a WorkspaceType's initializer or terminator (`<type's workspace
    /// path>:<type>`) holds.
    Lifecycle { stage: Stage, name: String },
}

const APIEXPORT_PREFIX: &str = "/services/apiexport/";
const LIFECYCLE_PREFIXES: &[(&str, Stage)] = &[
    ("/services/initializingworkspaces/", Stage::Initializing),
    ("/services/terminatingworkspaces/", Stage::Terminating),
];

/// `rest` split after its first `n` segments: the segments and the rest of the path from its
/// `/` (empty when nothing follows).
fn segments(rest: &str, n: usize) -> Option<(Vec<&str>, &str)> {
    let mut taken = Vec::with_capacity(n);
    let mut left = rest;
    for _ in 0..n {
        let (segment, after) = match left.find('/') {
            Some(at) => (&left[..at], &left[at..]),
            None => (left, ""),
        };
        if segment.is_empty() {
            return None;
        }
        taken.push(segment);
        left = after;
        if taken.len() < n {
            left = left.strip_prefix('/')?;
        }
    }
    Some((taken, left))
}

/// The view a `/services/...` path names, and the rest of the path (`/clusters/...`) the
/// handlers read; `None` for paths outside the virtual workspaces.
pub fn route(path: &str) -> Option<(View, &str)> {
    if let Some(rest) = path.strip_prefix(APIEXPORT_PREFIX) {
        let (parts, inner) = segments(rest, 2)?;
        let view = View::ApiExport {
            cluster: parts[0].to_string(),
            export: parts[1].to_string(),
        };
        return Some((view, inner));
    }
    let (rest, stage) = LIFECYCLE_PREFIXES
        .iter()
        .find_map(|(prefix, stage)| Some((path.strip_prefix(prefix)?, *stage)))?;
    let (parts, inner) = segments(rest, 1)?;
    let view = View::Lifecycle {
        stage,
        name: parts[0].to_string(),
    };
    Some((view, inner))
}

/// What a view lets a request see: the request rewritten for the handlers, and the resources
/// its discovery lists.
pub struct Admitted {
    pub info: RequestInfo,
    pub served: ServedResources,
}

/// A 403 whose message is `message` alone.
fn forbidden(message: String) -> ApiError {
    ApiError::Forbidden(message)
}

/// The logical cluster a view's request names (`*` or a logical cluster's name).
fn cluster_of(info: &RequestInfo) -> Option<String> {
    match info {
        RequestInfo::Resource(r) => r.cluster.clone(),
        RequestInfo::NonResource { cluster, .. } => cluster.clone(),
    }
}

/// Admits `info` to `view` for `user`, or answers why not.
pub async fn admit(
    registry: &Registry,
    authz: &Authorizer,
    user: &User,
    view: &View,
    info: RequestInfo,
) -> Result<Admitted, ApiError> {
    match view {
        View::ApiExport { cluster, export } => {
            apiexport::admit(registry, authz, user, cluster, export, info).await
        }
        View::Lifecycle { stage, name } => {
            lifecycle::admit(registry, authz, user, (*stage, name), info).await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn view_paths_name_the_view_and_the_rest() {
        let (view, rest) =
            route("/services/apiexport/abc/widgets/clusters/*/apis/example.io/v1/widgets").unwrap();
        assert_eq!(
            view,
            View::ApiExport {
                cluster: "abc".into(),
                export: "widgets".into()
            }
        );
        assert_eq!(rest, "/clusters/*/apis/example.io/v1/widgets");
        assert_eq!(route("/services/apiexport/abc/widgets").unwrap().1, "");
        assert!(route("/clusters/root/api").is_none());
        assert!(route("/services/apiexport/abc").is_none());
        let (view, rest) =
            route("/services/initializingworkspaces/root:org:team/clusters/*/apis").unwrap();
        assert_eq!(
            view,
            View::Lifecycle {
                stage: Stage::Initializing,
                name: "root:org:team".into()
            }
        );
        assert_eq!(rest, "/clusters/*/apis");
        let (view, _) = route("/services/terminatingworkspaces/root:t/clusters/*/apis").unwrap();
        assert!(matches!(
            view,
            View::Lifecycle {
                stage: Stage::Terminating,
                ..
            }
        ));
    }
}
