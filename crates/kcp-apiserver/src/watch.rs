//! Watch responses: JSON lines (`{"type": ..., "object": ...}`) streamed for as long as the client
//! stays, over HTTP/1.1 chunked or HTTP/2 data frames.
//!
//! `resourceVersion` unset or "0" starts with a synthetic ADDED event per existing object, as
//! kube-apiserver does; `sendInitialEvents=true` ends those with a BOOKMARK carrying the
//! `k8s.io/initial-events-end` annotation. A start too old for storage ends with an ERROR event
//! holding a 410 `Status`. `timeoutSeconds` ends the stream. Event objects are converted as
//! negotiated: one-row Tables, or PartialObjectMetadata (bookmarks too).

use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use http::{StatusCode, header};
use http_body_util::{BodyExt, StreamBody};
use kcp_registry::{ListOptions, Registry, RegistryError, Target, WatchEvent};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::handlers::{Params, selector_filter};
use crate::negotiation::{Conversion, IncludeObject, partial_object_metadata};
use crate::status::Body;

/// Longest watch when the client gives no timeout (kube-apiserver picks 30-60 minutes).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);

pub async fn serve(
    registry: &Registry,
    target: Target<'_>,
    params: &Params,
    conversion: Conversion,
) -> Result<http::Response<Body>, RegistryError> {
    let include = match conversion {
        Conversion::Table(_) => IncludeObject::from_params(params)?,
        _ => IncludeObject::Metadata,
    };
    let requested = params.get("resourceVersion").unwrap_or("0");
    let from: u64 = requested
        .parse()
        .map_err(|_| RegistryError::BadRequest(format!("invalid resource version: {requested}")))?;
    let send_initial = params.get("sendInitialEvents") == Some("true") || from == 0;
    let bookmark_initial_end = params.get("sendInitialEvents") == Some("true");
    let timeout = params
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .map_or(DEFAULT_TIMEOUT, Duration::from_secs);

    let mut initial = Vec::new();
    let mut start = from;
    if send_initial {
        let listed = registry
            .list(
                target,
                ListOptions {
                    filter: selector_filter(params, target.resource)?,
                    ..Default::default()
                },
            )
            .await?;
        start = listed.resource_version;
        initial = listed.items;
    }
    let events = match registry
        .watch(target, start, selector_filter(params, target.resource)?)
        .await
    {
        Ok(events) => Some(events),
        Err(RegistryError::Expired(_)) => None,
        Err(other) => return Err(other),
    };
    let resource = target.resource;
    let (sender, receiver) = mpsc::channel::<Bytes>(64);
    tokio::spawn(async move {
        let encode = |kind: &str, object: Value| -> Bytes {
            let object = match conversion {
                _ if kind == "ERROR" => object,
                Conversion::Table(version) if kind != "BOOKMARK" => {
                    crate::table::render(resource, &[object], json!({}), version, include)
                }
                Conversion::PartialObjectMetadata(version) => {
                    partial_object_metadata(&object, version)
                }
                _ => object,
            };
            let mut line =
                serde_json::to_vec(&json!({"type": kind, "object": object})).unwrap_or_default();
            line.push(b'\n');
            Bytes::from(line)
        };
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        for object in initial {
            if sender.send(encode("ADDED", object)).await.is_err() {
                return;
            }
        }
        if bookmark_initial_end {
            let bookmark = json!({
                "kind": resource.kind,
                "apiVersion": resource.group_version(),
                "metadata": {"resourceVersion": start.to_string(), "annotations": {"k8s.io/initial-events-end": "true"}},
            });
            if sender.send(encode("BOOKMARK", bookmark)).await.is_err() {
                return;
            }
        }
        let Some(events) = events else {
            let _ = sender.send(encode("ERROR", too_old(from))).await;
            return;
        };
        tokio::pin!(events);
        loop {
            tokio::select! {
                _ = &mut deadline => return,
                _ = sender.closed() => return,
                next = events.next() => match next {
                    Some(Ok(WatchEvent { kind, object })) => {
                        if sender.send(encode(kind, object)).await.is_err() {
                            return;
                        }
                    }
                    Some(Err(RegistryError::Expired(_))) => {
                        let _ = sender.send(encode("ERROR", too_old(from))).await;
                        return;
                    }
                    Some(Err(error)) => {
                        tracing::warn!(%error, "watch ended by a storage error");
                        return;
                    }
                    None => return,
                },
            }
        }
    });
    let frames = tokio_stream::wrappers::ReceiverStream::new(receiver)
        .map(|bytes| Ok(hyper::body::Frame::data(bytes)));
    let body = StreamBody::new(frames).boxed_unsync();
    Ok(http::Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::CACHE_CONTROL, "no-cache, private")
        .body(body)
        .unwrap_or_else(|_| http::Response::new(crate::status::full(Bytes::new()))))
}

/// The Status of an ERROR event for a start revision storage no longer has.
fn too_old(from: u64) -> Value {
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": format!("too old resource version: {from}"),
        "reason": "Expired",
        "code": 410,
    })
}
