//! Watch responses: JSON lines (`{"type": ..., "object": ...}`) streamed for as long as the client
//! stays, over HTTP/1.1 chunked or HTTP/2 data frames.
//!
//! `resourceVersion` unset or "0" starts with a synthetic ADDED event per existing object, as
//! kube-apiserver does; `sendInitialEvents=true` ends those with a BOOKMARK carrying the
//! `k8s.io/initial-events-end` annotation. A start too old for storage ends with an ERROR event
//! holding a 410 `Status`. `timeoutSeconds` ends the stream. `allowWatchBookmarks=true` adds
//! BOOKMARK events (every minute and 2 s before the timeout) carrying the last revision sent.
//! Event objects are converted as negotiated: one-row Tables, or PartialObjectMetadata
//! (bookmarks too).

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
/// How often a watch that allows bookmarks gets one.
const BOOKMARK_EVERY: Duration = Duration::from_secs(60);
/// How long before its timeout a watch gets its last bookmark.
const BOOKMARK_BEFORE_END: Duration = Duration::from_secs(2);

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
    crate::resource_version::check_watch(params)?;
    // Without sendInitialEvents, an unset or "0" resourceVersion starts with the current state.
    let send_initial = match params.get("sendInitialEvents") {
        Some(value) => value == "true",
        None => from == 0,
    };
    let bookmark_initial_end = params.get("sendInitialEvents") == Some("true");
    let bookmarks = params.get("allowWatchBookmarks") == Some("true");
    let timeout = params
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .map_or(DEFAULT_TIMEOUT, Duration::from_secs);

    let mut initial = Vec::new();
    let mut start = from;
    if from == 0 && !send_initial {
        start = registry.current_revision().await?;
    }
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
    // The task outlives the request's borrow: it owns a copy (sharing a custom resource's
    // schema, kept alive while the watch runs).
    let resource = target.resource.clone();
    let (sender, receiver) = mpsc::channel::<Bytes>(64);
    tokio::spawn(async move {
        let encode = |kind: &str, object: Value| -> Bytes {
            let object = match conversion {
                _ if kind == "ERROR" => object,
                Conversion::Table(version) if kind != "BOOKMARK" => {
                    crate::table::render(&resource, &[object], json!({}), version, include)
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
        // Events from the watch cache arrive encoded once for all watchers: only the envelope
        // is written per watcher.
        let frame = |event: WatchEvent| -> Bytes {
            if !matches!(conversion, Conversion::None) {
                return encode(event.kind, Value::clone(&event.object));
            }
            let mut line = Vec::with_capacity(event.encoded.len() + 32);
            line.extend_from_slice(b"{\"type\":\"");
            line.extend_from_slice(event.kind.as_bytes());
            line.extend_from_slice(b"\",\"object\":");
            line.extend_from_slice(&event.encoded);
            line.extend_from_slice(b"}\n");
            Bytes::from(line)
        };
        let bookmark = |revision: u64| {
            json!({
                "kind": resource.kind,
                "apiVersion": resource.group_version(),
                "metadata": {"resourceVersion": revision.to_string()},
            })
        };
        let started = tokio::time::Instant::now();
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        // Bookmarks, when asked for: shortly before the timeout ends the watch, and every
        // minute, each carrying the revision of the last event sent.
        let next_bookmark = |now: tokio::time::Instant| {
            let before_end = (started + timeout).checked_sub(BOOKMARK_BEFORE_END);
            match before_end {
                Some(at) if at > now => at.min(now + BOOKMARK_EVERY),
                _ => now + BOOKMARK_EVERY,
            }
        };
        let bookmark_timer = tokio::time::sleep_until(next_bookmark(started));
        tokio::pin!(bookmark_timer);
        let mut last_revision = start;
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
                _ = &mut bookmark_timer, if bookmarks => {
                    if sender.send(encode("BOOKMARK", bookmark(last_revision))).await.is_err() {
                        return;
                    }
                    let now = tokio::time::Instant::now();
                    bookmark_timer.as_mut().reset(next_bookmark(now));
                }
                next = events.next() => match next {
                    Some(Ok(event)) => {
                        last_revision = event.revision;
                        if sender.send(frame(event)).await.is_err() {
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

#[cfg(test)]
mod tests {
    use crate::test_support::{call, router};

    #[tokio::test]
    async fn bookmarks_come_before_the_timeout_with_the_last_revision() {
        let router = router();
        let namespaces = "/clusters/root/api/v1/namespaces";
        let (_, created) = call(&router, "POST", namespaces, r#"{"metadata":{"name":"a"}}"#).await;
        let created: serde_json::Value = serde_json::from_str(&created).unwrap();
        let rv = created["metadata"]["resourceVersion"].as_str().unwrap();

        let watch = format!("{namespaces}?watch=1&resourceVersion=0&timeoutSeconds=3");
        let (code, plain) = call(&router, "GET", &watch, "").await;
        assert_eq!(code, 200);
        assert!(!plain.contains("BOOKMARK"), "{plain}");

        let (_, lines) = call(
            &router,
            "GET",
            &format!("{watch}&allowWatchBookmarks=true"),
            "",
        )
        .await;
        let events: Vec<serde_json::Value> = lines
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        assert_eq!(events[0]["type"], "ADDED");
        let bookmark = events
            .iter()
            .find(|e| e["type"] == "BOOKMARK")
            .expect("a bookmark");
        assert_eq!(bookmark["object"]["kind"], "Namespace");
        assert_eq!(bookmark["object"]["metadata"]["resourceVersion"], rv);

        // A watch-list: the current state, then a bookmark marking the end of it.
        let (code, lines) = call(
            &router,
            "GET",
            &format!("{namespaces}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1"),
            "",
        )
        .await;
        assert_eq!(code, 200);
        let events: Vec<serde_json::Value> = lines
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        assert_eq!(events[0]["type"], "ADDED");
        assert_eq!(events[1]["type"], "BOOKMARK");
        assert_eq!(
            events[1]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
            "true"
        );
        let (code, _) = call(
            &router,
            "GET",
            &format!("{namespaces}?watch=1&sendInitialEvents=true"),
            "",
        )
        .await;
        assert_eq!(code, 422);
        // sendInitialEvents=false with no resourceVersion: only changes from now on.
        let (_, lines) = call(
            &router,
            "GET",
            &format!("{namespaces}?watch=1&sendInitialEvents=false&resourceVersionMatch=NotOlderThan&timeoutSeconds=1"),
            "",
        )
        .await;
        assert_eq!(lines, "");
    }
}
