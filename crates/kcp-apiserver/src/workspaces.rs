//! Workspaces on the request path: `/clusters/<path>` resolved to its logical cluster before a
//! request is served (an unknown path answers kcp's 404), and the home workspace `~`
//! (`GET /clusters/root/apis/tenancy.kcp.io/v1alpha1/workspaces/~`), created on first use.

use std::time::{Duration, Instant};

use http::{Response, StatusCode, header};
use kcp_registry::Registry;
use kcp_registry::tenancy::{HomeWorkspace, ROOT};

use crate::request_info::{RequestInfo, ResourceRequest};
use crate::status::{Body, from_registry_error, json_response};

/// How long a request for `~` waits for a new home to become Ready before answering 429.
const HOME_WAIT: Duration = Duration::from_secs(3);
const HOME_POLL: Duration = Duration::from_millis(10);

/// Replaces the workspace path of `info` by the logical cluster it names. `*` (every cluster)
/// and requests outside `/clusters/` are left alone.
pub async fn resolve(registry: &Registry, info: &mut RequestInfo) -> Result<(), Response<Body>> {
    let cluster = match info {
        RequestInfo::Resource(request) => &mut request.cluster,
        RequestInfo::NonResource { cluster, .. } => cluster,
    };
    let Some(path) = cluster.as_deref().filter(|path| *path != "*") else {
        return Ok(());
    };
    match registry.resolve_path(path).await {
        Ok(name) => {
            *cluster = Some(name);
            Ok(())
        }
        Err(error) => Err(from_registry_error(&error)),
    }
}

/// Whether `request` asks for the home workspace `~`.
pub fn is_home(request: &ResourceRequest) -> bool {
    request.cluster.as_deref() == Some(ROOT)
        && request.group == "tenancy.kcp.io"
        && request.resource == "workspaces"
        && request.name.as_deref() == Some("~")
        && request.subresource.is_none()
        && request.verb == "get"
}

/// The home workspace of `user`: created if missing, answered once Ready; 429 with
/// `Retry-After` if it takes longer than a moment.
pub async fn home(registry: &Registry, user: &str) -> Response<Body> {
    let deadline = Instant::now() + HOME_WAIT;
    loop {
        match registry.home_workspace(user).await {
            Ok(HomeWorkspace::Ready(workspace)) => {
                return json_response(StatusCode::OK, &workspace);
            }
            Ok(HomeWorkspace::Initializing) if Instant::now() < deadline => {
                tokio::time::sleep(HOME_POLL).await;
            }
            Ok(HomeWorkspace::Initializing) => {
                let mut response = crate::status::failure(
                    StatusCode::TOO_MANY_REQUESTS,
                    "TooManyRequests",
                    "the home workspace is being initialized, please try again",
                );
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, http::HeaderValue::from_static("1"));
                return response;
            }
            Err(error) => return from_registry_error(&error),
        }
    }
}
