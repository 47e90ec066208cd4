//! The few JSON requests the controllers make to a workspace, as plain paths (objects stay
//! `serde_json::Value`s: schemas are data here, not types).

use anyhow::bail;
use http::Method;
use serde_json::Value;

/// How a request ended.
pub enum Answer {
    Ok(Value),
    NotFound,
    Conflict,
    AlreadyExists,
    /// 422: the server refused the object, with its message.
    Invalid(String),
}

/// A write the server refused as invalid (422), with its message: no retry makes it pass.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

/// Sends one JSON request; other API errors are errors.
pub async fn send(
    client: &kube::Client,
    method: Method,
    path: &str,
    body: Option<&Value>,
    content_type: &str,
) -> anyhow::Result<Answer> {
    let mut request = http::Request::builder()
        .method(method.clone())
        .uri(path)
        .header(http::header::ACCEPT, "application/json");
    if body.is_some() {
        request = request.header(http::header::CONTENT_TYPE, content_type);
    }
    let body = body
        .map(serde_json::to_vec)
        .transpose()?
        .unwrap_or_default();
    match client.request::<Value>(request.body(body)?).await {
        Ok(value) => Ok(Answer::Ok(value)),
        Err(kube::Error::Api(status)) => match (status.code, status.reason.as_str()) {
            (404, _) => Ok(Answer::NotFound),
            (422, _) => Ok(Answer::Invalid(status.message.clone())),
            (409, "AlreadyExists") => Ok(Answer::AlreadyExists),
            (409, _) => Ok(Answer::Conflict),
            _ => bail!("{method} {path}: {} ({})", status.message, status.code),
        },
        Err(other) => Err(anyhow::Error::new(other).context(format!("{method} {path}"))),
    }
}

/// GETs an object; `None` when there is none.
pub async fn get(client: &kube::Client, path: &str) -> anyhow::Result<Option<Value>> {
    match send(client, Method::GET, path, None, "").await? {
        Answer::Ok(value) => Ok(Some(value)),
        _ => Ok(None),
    }
}

/// Writes `body` with `method` (POST to a collection, PUT to an object or its status); a
/// conflict or an existing object is an error to retry after (the watches bring the news).
pub async fn write(
    client: &kube::Client,
    method: Method,
    path: &str,
    body: &Value,
) -> anyhow::Result<Value> {
    match send(client, method.clone(), path, Some(body), "application/json").await? {
        Answer::Ok(value) => Ok(value),
        Answer::NotFound => bail!("{method} {path}: not found"),
        Answer::Conflict => bail!("{method} {path}: conflict (the object changed)"),
        Answer::AlreadyExists => bail!("{method} {path}: already exists"),
        Answer::Invalid(message) => Err(Refused(message).into()),
    }
}

/// Merge-patches an object's status (what one controller owns there).
pub async fn patch_status(client: &kube::Client, path: &str, status: &Value) -> anyhow::Result<()> {
    let body = serde_json::json!({"status": status});
    match send(
        client,
        Method::PATCH,
        &format!("{path}/status"),
        Some(&body),
        "application/merge-patch+json",
    )
    .await?
    {
        Answer::Ok(_) | Answer::NotFound => Ok(()),
        Answer::Conflict | Answer::AlreadyExists => bail!("PATCH {path}/status: conflict"),
        Answer::Invalid(message) => Err(Refused(message).into()),
    }
}

/// DELETEs an object; one already gone is fine.
pub async fn delete(client: &kube::Client, path: &str) -> anyhow::Result<()> {
    match send(client, Method::DELETE, path, None, "").await? {
        Answer::Ok(_) | Answer::NotFound => Ok(()),
        Answer::Conflict | Answer::AlreadyExists | Answer::Invalid(_) => {
            bail!("DELETE {path}: conflict")
        }
    }
}

/// The path of `name` in the collection of `resource` (cluster-scoped, or in `namespace`).
pub fn path(resource: &kube::api::ApiResource, namespace: Option<&str>, name: &str) -> String {
    let mut path = collection(resource, namespace);
    if !name.is_empty() {
        path.push('/');
        path.push_str(name);
    }
    path
}

/// The path of the collection of `resource`.
pub fn collection(resource: &kube::api::ApiResource, namespace: Option<&str>) -> String {
    let base = match resource.group.as_str() {
        "" => format!("/api/{}", resource.version),
        group => format!("/apis/{group}/{}", resource.version),
    };
    match namespace {
        Some(namespace) => format!("{base}/namespaces/{namespace}/{}", resource.plural),
        None => format!("{base}/{}", resource.plural),
    }
}

/// The field manager of what the layer server-side applies.
const MANAGER: &str = "kcp-cluster-controller";

/// Server-side applies each of `objects` through `client`.
pub async fn apply(client: &kube::Client, objects: &[(String, Value)]) -> anyhow::Result<()> {
    for (path, object) in objects {
        let path = format!("{path}?fieldManager={MANAGER}&force=true");
        match send(
            client,
            Method::PATCH,
            &path,
            Some(object),
            "application/apply-patch+yaml",
        )
        .await?
        {
            Answer::Ok(_) => {}
            Answer::Invalid(message) => anyhow::bail!("PATCH {path}: {message}"),
            _ => anyhow::bail!("PATCH {path}: could not apply"),
        }
    }
    Ok(())
}
