//! Workspaces on the request path: `/clusters/<path>` resolved to its logical cluster before a
//! request is served (what is not a path answers kcp's 400 `invalid cluster: "<path>" does not
//! match the regex`, an unknown path or cluster kcp's 404), and the home workspace `~`
//! (`GET /clusters/root/apis/tenancy.kcp.io/v1alpha1/workspaces/~`), created on first use for
//! those the authorizer lets have one.

use std::time::{Duration, Instant};

use http::{Response, StatusCode, header};
use kcp_registry::tenancy::paths::valid_path;
use kcp_registry::tenancy::{HomeWorkspace, ROOT};
use kcp_registry::{Registry, RegistryError};

use crate::authn::User;
use crate::authz::Authorizer;
use crate::error::ApiError;
use crate::negotiation::Encoding;
use crate::request_info::{RequestInfo, ResourceRequest};
use crate::status::{Body, encoded, failure_as};

/// How long a request for `~` waits for a new home to become Ready before answering 429.
const HOME_WAIT: Duration = Duration::from_secs(3);
const HOME_POLL: Duration = Duration::from_millis(10);

/// Replaces the workspace path of `info` by the logical cluster it names. `*` (every cluster)
/// and requests outside `/clusters/` are left alone.
pub async fn resolve(registry: &Registry, info: &mut RequestInfo) -> Result<(), ApiError> {
    let cluster = match info {
        RequestInfo::Resource(request) => &mut request.cluster,
        RequestInfo::NonResource { cluster, .. } => cluster,
    };
    let Some(path) = cluster
        .as_deref()
        .filter(|path| *path != kcp_registry::ALL_CLUSTERS)
    else {
        return Ok(());
    };
    if !valid_path(path) {
        return Err(invalid_cluster(path));
    }
    match registry.resolve_path(path).await {
        Ok(name) => {
            *cluster = Some(name);
            Ok(())
        }
        Err(error) => Err(error.into()),
    }
}

/// kcp's answer to a `/clusters/<x>` whose `<x>` is not a workspace path.
fn invalid_cluster(path: &str) -> ApiError {
    kcp_registry::RegistryError::BadRequest(format!(
        "invalid cluster: {} does not match the regex",
        kcp_apimachinery::labels::validation::go_quote(path)
    ))
    .into()
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

/// The home workspace of `user`: made if missing and the authorizer lets `user` have one
/// (else kcp's 403), answered once Ready; 429 with `Retry-After` if it takes longer than a
/// moment.
pub async fn home(
    registry: &Registry,
    authorizer: &Authorizer,
    user: &User,
    encoding: Encoding,
) -> Response<Body> {
    let deadline = Instant::now() + HOME_WAIT;
    let mut create = false;
    loop {
        match registry.home_workspace(&user.name, create).await {
            Ok(HomeWorkspace::Ready(workspace)) => {
                return encoded(encoding, StatusCode::OK, &workspace);
            }
            Ok(HomeWorkspace::Missing) => match authorizer.may_have_home(user).await {
                Ok(None) => create = true,
                Ok(Some(denial)) => {
                    return ApiError::from(RegistryError::Forbidden {
                        qualified_resource: "workspaces.tenancy.kcp.io".into(),
                        name: "~".into(),
                        message: denial.message,
                        causes: Vec::new(),
                    })
                    .into_response(encoding);
                }
                Err(error) => return ApiError::from(error).into_response(encoding),
            },
            Ok(HomeWorkspace::Initializing) if Instant::now() < deadline => {
                tokio::time::sleep(HOME_POLL).await;
            }
            Ok(HomeWorkspace::Initializing) => {
                let mut response = failure_as(
                    encoding,
                    StatusCode::TOO_MANY_REQUESTS,
                    "TooManyRequests",
                    "the home workspace is being initialized, please try again",
                );
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, http::HeaderValue::from_static("1"));
                return response;
            }
            Err(error) => return ApiError::from(error).into_response(encoding),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::test_support::{call, router};

    #[tokio::test]
    async fn what_is_not_a_path_is_a_bad_request_and_unknown_clusters_are_not_found() {
        let router = router();
        let long = format!("/clusters/{}/api/v1/namespaces", "a".repeat(5000));
        for (path, shown) in [
            ("/clusters//api/v1/namespaces", r#"\"\""#.to_string()),
            ("/clusters/../api/v1/namespaces", r#"\"..\""#.to_string()),
            (
                "/clusters/%00/api/v1/namespaces",
                r#"\"\\x00\""#.to_string(),
            ),
            (
                "/clusters/Root/api/v1/namespaces",
                r#"\"Root\""#.to_string(),
            ),
            (
                "/clusters/root:/api/v1/namespaces",
                r#"\"root:\""#.to_string(),
            ),
            (long.as_str(), format!(r#"\"{}\""#, "a".repeat(5000))),
        ] {
            let (code, body) = call(&router, "POST", path, r#"{"metadata":{"name":"x"}}"#).await;
            assert_eq!(code, 400, "{path}: {body}");
            assert!(
                body.contains(&format!(
                    r#""message":"invalid cluster: {shown} does not match the regex""#
                )),
                "{path}: {body}"
            );
            assert!(body.contains(r#""reason":"BadRequest""#), "{body}");
        }

        for path in ["/clusters/phantom", "/clusters/system:phantom"] {
            let (code, body) = call(
                &router,
                "POST",
                &format!("{path}/api/v1/namespaces"),
                r#"{"metadata":{"name":"x"}}"#,
            )
            .await;
            assert_eq!(code, 404, "{path}: {body}");
            assert!(body.contains(r#"workspaces.tenancy.kcp.io \""#), "{body}");
        }
        for path in ["/clusters/root", "/clusters/*", "/clusters/%2A"] {
            let (code, body) = call(&router, "GET", &format!("{path}/api/v1/namespaces"), "").await;
            assert_eq!(code, 200, "{path}: {body}");
        }
    }
}
