//! Watch responses: JSON lines (`{"type": ..., "object": ...}`) streamed for as long as the client
//! stays, over HTTP/1.1 chunked or HTTP/2 data frames.
//!
//! `resourceVersion` unset or "0" starts with a synthetic ADDED event per existing object, as
//! kube-apiserver does; `sendInitialEvents=true` ends those with a BOOKMARK carrying the
//! `k8s.io/initial-events-end` annotation. Those initial events are read from storage a page at
//! a time ([`crate::paged::Pages`] of one snapshot) and sent as the client takes them, so a
//! watcher that does not read holds one page, never the whole collection. A
//! start storage has not reached yet waits for it (as kube-apiserver's watch cache does, up to
//! 3 s), then ends with an ERROR event holding the 504 "Too large resource version" `Status`; a
//! start too old for storage ends with an ERROR event holding a 410. `timeoutSeconds` ends the
//! stream. `allowWatchBookmarks=true` adds BOOKMARK events (every minute and 2 s before the
//! timeout) carrying the last revision sent. Event objects are converted as negotiated: one-row
//! Tables, or PartialObjectMetadata (bookmarks too).
//!
//! The response body is the watch itself ([`WatchStream`]): no task and no queue per watch, it
//! works only when the client takes the next frame, and goes when the client does. An idle
//! watch costs its state, a few hundred bytes, besides its HTTP/2 stream.

use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use http::{StatusCode, header};
use http_body_util::{BodyExt, StreamBody};
use kcp_apis::builtin::ResourceRef;
use kcp_registry::{JsonAnswer, Registry, RegistryError, Target, WatchEvent};
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::error::registry_status;
use crate::handlers::selector_filter;
use crate::negotiation::{Conversion, IncludeObject, partial_object_metadata};
use crate::paged::{Item, Pages};
use crate::scope::Params;
use crate::status::Body;

/// Longest watch when the client gives no timeout (kube-apiserver picks 30-60 minutes).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);
/// How often a watch that allows bookmarks gets one.
const BOOKMARK_EVERY: Duration = Duration::from_secs(60);
/// How long before its timeout a watch gets its last bookmark.
const BOOKMARK_BEFORE_END: Duration = Duration::from_secs(2);

/// How long the watch may last: `timeoutSeconds` (an int64, as kube-apiserver parses it; zero
/// or negative: the default), or the default.
fn watch_timeout(params: &Params) -> Result<Duration, RegistryError> {
    let Some(text) = params.get("timeoutSeconds") else {
        return Ok(DEFAULT_TIMEOUT);
    };
    let seconds: i64 = text
        .parse()
        .map_err(|_| RegistryError::BadRequest(format!("invalid timeoutSeconds: {text:?}")))?;
    Ok(match u64::try_from(seconds) {
        Ok(seconds) if seconds > 0 => Duration::from_secs(seconds),
        _ => DEFAULT_TIMEOUT,
    })
}

pub async fn serve(
    registry: &Registry,
    target: Target<'_>,
    resource: &ResourceRef,
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
        Some(value) => crate::request_info::query_bool(value),
        None => from == 0,
    };
    let flag = |name| {
        params
            .get(name)
            .is_some_and(crate::request_info::query_bool)
    };
    let bookmark_initial_end = flag("sendInitialEvents");
    let bookmarks = flag("allowWatchBookmarks");
    let timeout = watch_timeout(params)?;

    // Once the request is understood, failures are ERROR events, as kube-apiserver sends them.
    let mut failure = None;
    if from > 0
        && let Err(error) = crate::resource_version::wait_for_revision(registry, from).await
    {
        failure = Some(registry_status(&error).1);
    }
    let mut initial = None;
    let mut start = from;
    if failure.is_none() {
        if send_initial {
            // Plain JSON events carry each object's JSON answer, made from its stored bytes
            // where the collection allows (the live events' bytes are made the same way).
            let answers = match conversion {
                Conversion::None => {
                    Pages::first_json(registry, target, params, 0, JsonAnswer::Object).await?
                }
                _ => None,
            };
            let pages = match answers {
                Some((pages, first)) => pages.with_first_json(first),
                None => {
                    let (pages, first) = Pages::first(registry, target, params, 0).await?;
                    pages.with_first(first)
                }
            };
            start = pages.revision();
            initial = Some(pages);
        } else if from == 0 {
            start = registry.current_revision().await?;
        }
    }
    let events = match failure {
        Some(_) => None,
        None => match registry
            .watch(target, start, selector_filter(params, target.resource)?)
            .await
        {
            Ok(events) => Some(events),
            Err(RegistryError::Expired(_)) => {
                failure = Some(too_old(from));
                None
            }
            Err(other) => return Err(other),
        },
    };
    let started = Instant::now();
    // A timeout past what a clock can count never ends the watch by itself.
    let end = started.checked_add(timeout);
    let stream = WatchStream {
        resource: resource.clone(),
        from,
        conversion,
        include,
        initial: initial.map(Box::new),
        initial_end: bookmark_initial_end.then_some(start),
        events,
        failure,
        end,
        deadline: Box::pin(tokio::time::sleep_until(end.unwrap_or(started))),
        bookmark: bookmarks
            .then(|| Box::pin(tokio::time::sleep_until(next_bookmark(end, started)))),
        last_revision: start,
        done: false,
    };
    // The body is the watch itself: polled as the client takes frames, dropped when it goes.
    let frames = futures::stream::unfold(stream, |mut stream| async move {
        let frame = stream.next_frame().await?;
        Some((Ok(hyper::body::Frame::data(frame)), stream))
    });
    let body = StreamBody::new(frames).boxed_unsync();
    Ok(http::Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::CACHE_CONTROL, "no-cache, private")
        .body(body)
        .unwrap_or_else(|_| http::Response::new(crate::status::full(Bytes::new()))))
}

/// When the next bookmark is due: shortly before the timeout ends the watch, and every
/// minute.
fn next_bookmark(end: Option<Instant>, now: Instant) -> Instant {
    let every = now.checked_add(BOOKMARK_EVERY).unwrap_or(now);
    match end.and_then(|end| end.checked_sub(BOOKMARK_BEFORE_END)) {
        Some(at) if at > now => at.min(every),
        _ => every,
    }
}

/// What a waiting watch woke up for.
enum Woke {
    Deadline,
    Bookmark,
    Event(Option<Result<WatchEvent, RegistryError>>),
}

/// A watch response's state: what it still has to send. It lives in the response body and
/// works only when the client takes frames (no task, no queue of its own), so an idle watch
/// costs its state and nothing else.
struct WatchStream {
    /// Shared with the registry (static for built-in kinds).
    resource: ResourceRef,
    /// The revision the client asked to start from.
    from: u64,
    conversion: Conversion,
    include: IncludeObject,
    /// The initial events still to send (boxed: gone once they are sent).
    initial: Option<Box<Pages>>,
    /// The revision of the bookmark that ends the initial events, when one was asked for.
    initial_end: Option<u64>,
    events: Option<BoxStream<'static, Result<WatchEvent, RegistryError>>>,
    /// The ERROR event's Status of a watch that cannot start.
    failure: Option<Value>,
    end: Option<Instant>,
    deadline: Pin<Box<tokio::time::Sleep>>,
    bookmark: Option<Pin<Box<tokio::time::Sleep>>>,
    last_revision: u64,
    done: bool,
}

impl WatchStream {
    /// The next frame to send; `None` when the watch is over.
    async fn next_frame(&mut self) -> Option<Bytes> {
        if self.done {
            return None;
        }
        if let Some(initial) = &mut self.initial {
            match initial.next_item().await {
                Some(Ok(Item::Object(object))) => return Some(self.encode("ADDED", object)),
                Some(Ok(Item::Json(answer))) => return Some(frame("ADDED", &answer)),
                Some(Err(error)) => {
                    self.done = true;
                    return Some(self.encode("ERROR", registry_status(&error).1));
                }
                None => self.initial = None,
            }
        }
        if let Some(revision) = self.initial_end.take() {
            let bookmark = json!({
                "kind": self.resource.kind,
                "apiVersion": self.resource.group_version(),
                "metadata": {"resourceVersion": revision.to_string(), "annotations": {"k8s.io/initial-events-end": "true"}},
            });
            return Some(self.encode("BOOKMARK", bookmark));
        }
        let Some(events) = &mut self.events else {
            self.done = true;
            return self
                .failure
                .take()
                .map(|status| self.encode("ERROR", status));
        };
        let woke = {
            let (deadline, timer) = (self.deadline.as_mut(), &mut self.bookmark);
            let ticking = timer.is_some();
            let bookmark = async {
                match timer {
                    Some(timer) => timer.as_mut().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = deadline, if self.end.is_some() => Woke::Deadline,
                _ = bookmark, if ticking => Woke::Bookmark,
                next = events.next() => Woke::Event(next),
            }
        };
        match woke {
            Woke::Deadline => {
                self.done = true;
                None
            }
            Woke::Bookmark => {
                let now = Instant::now();
                if let Some(timer) = &mut self.bookmark {
                    timer.as_mut().reset(next_bookmark(self.end, now));
                }
                let bookmark = json!({
                    "kind": self.resource.kind,
                    "apiVersion": self.resource.group_version(),
                    "metadata": {"resourceVersion": self.last_revision.to_string()},
                });
                Some(self.encode("BOOKMARK", bookmark))
            }
            Woke::Event(Some(Ok(event))) => {
                self.last_revision = event.revision;
                match self.frame(event) {
                    Ok(frame) => Some(frame),
                    Err(error) => {
                        tracing::warn!(%error, "watch ended by an event that does not decode");
                        self.done = true;
                        Some(self.encode("ERROR", registry_status(&error).1))
                    }
                }
            }
            Woke::Event(Some(Err(error))) => {
                if !matches!(error, RegistryError::Expired(_)) {
                    tracing::warn!(%error, "watch ended by a storage error");
                }
                self.done = true;
                Some(self.encode("ERROR", ending_status(&error, self.from)))
            }
            Woke::Event(None) => {
                self.done = true;
                None
            }
        }
    }

    /// One event line, its object converted as negotiated.
    fn encode(&self, kind: &str, object: Value) -> Bytes {
        let object = match self.conversion {
            _ if kind == "ERROR" => object,
            Conversion::Table(version) if kind != "BOOKMARK" => crate::table::render(
                &self.resource,
                vec![object],
                json!({}),
                version,
                self.include,
            ),
            Conversion::PartialObjectMetadata(version) => partial_object_metadata(object, version),
            _ => object,
        };
        let mut line = format!("{{\"type\":{},\"object\":", json!(kind)).into_bytes();
        line.extend(kcp_apis::messages::to_json(&object));
        line.extend_from_slice(b"}\n");
        Bytes::from(line)
    }

    /// An event from the watch cache, encoded once for all watchers: only the envelope is
    /// written per watcher. Only a conversion decodes the object.
    fn frame(&self, event: WatchEvent) -> Result<Bytes, RegistryError> {
        if !matches!(self.conversion, Conversion::None) {
            return Ok(self.encode(event.kind, Value::clone(&*event.object()?)));
        }
        Ok(frame(event.kind, &event.encoded))
    }
}

/// One event line of plain JSON around `object`, the object's JSON.
fn frame(kind: &str, object: &[u8]) -> Bytes {
    let mut line = Vec::with_capacity(object.len() + 32);
    line.extend_from_slice(b"{\"type\":\"");
    line.extend_from_slice(kind.as_bytes());
    line.extend_from_slice(b"\",\"object\":");
    line.extend_from_slice(object);
    line.extend_from_slice(b"}\n");
    Bytes::from(line)
}

/// The Status of an ERROR event for a start revision storage no longer has.
/// The Status of the ERROR event that ends a watch whose storage failed, as kube-apiserver
/// sends it: 410 Expired (the client lists again) when the watch fell out of the window, the
/// error's own Status (500 InternalError for most) otherwise, never a silent end.
fn ending_status(error: &RegistryError, from: u64) -> Value {
    match error {
        RegistryError::Expired(_) => too_old(from),
        other => registry_status(other).1,
    }
}

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

    #[test]
    fn a_failed_storage_watch_ends_with_an_error_event_status() {
        use kcp_registry::RegistryError;
        let expired = super::ending_status(&RegistryError::Expired("gone".into()), 7);
        assert_eq!(expired["code"], 410);
        assert_eq!(expired["reason"], "Expired");
        assert_eq!(expired["message"], "too old resource version: 7");
        let broken = super::ending_status(&RegistryError::Internal("disk".into()), 7);
        assert_eq!(broken["code"], 500);
        assert_eq!(broken["reason"], "InternalError");
        assert_eq!(broken["status"], "Failure");
    }

    // Paused time: the watch timeouts and waits pass as soon as nothing else can run.
    #[tokio::test(start_paused = true)]
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

    /// The first `count` lines of a watch, read as they come; the stream is then dropped.
    async fn first_lines(
        router: &crate::router::Router,
        path: &str,
        count: usize,
    ) -> (u16, Vec<serde_json::Value>) {
        use http_body_util::BodyExt;
        let request = http::Request::get(path)
            .header(http::header::AUTHORIZATION, "Bearer t")
            .body(http_body_util::Full::new(bytes::Bytes::new()))
            .unwrap();
        let response = router.handle(request).await;
        let code = response.status().as_u16();
        let mut body = response.into_body();
        let mut text = Vec::new();
        let mut lines = Vec::new();
        while lines.len() < count {
            let Some(frame) = body.frame().await else {
                break;
            };
            text.extend_from_slice(frame.unwrap().data_ref().unwrap());
            while let Some(end) = text.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = text.drain(..=end).collect();
                lines.push(serde_json::from_slice(&line).unwrap());
            }
        }
        (code, lines)
    }

    #[tokio::test]
    async fn huge_timeouts_neither_panic_nor_end_the_watch() {
        let router = router();
        let namespaces = "/clusters/root/api/v1/namespaces";
        call(&router, "POST", namespaces, r#"{"metadata":{"name":"a"}}"#).await;
        let watch = format!("{namespaces}?watch=1&timeoutSeconds={}", i64::MAX);
        let (code, events) = first_lines(&router, &watch, 1).await;
        assert_eq!(code, 200);
        assert_eq!(events.len(), 1, "the watch task must survive its timeout");
        assert_eq!(events[0]["type"], "ADDED");
        // Past int64 is refused as kube-apiserver refuses what it cannot parse.
        let (code, body) = call(
            &router,
            "GET",
            &format!("{namespaces}?watch=1&timeoutSeconds=18446744073709551615"),
            "",
        )
        .await;
        assert_eq!(code, 400, "{body}");
        // Zero and negative timeouts are the default: the watch stays.
        let (code, events) = first_lines(
            &router,
            &format!("{namespaces}?watch=1&timeoutSeconds=-5"),
            1,
        )
        .await;
        assert_eq!((code, events.len()), (200, 1));
    }

    #[tokio::test(start_paused = true)]
    async fn watches_from_a_future_revision_end_with_too_large_resource_version() {
        let router = router();
        let namespaces = "/clusters/root/api/v1/namespaces";
        let (_, created) = call(&router, "POST", namespaces, r#"{"metadata":{"name":"a"}}"#).await;
        let created: serde_json::Value = serde_json::from_str(&created).unwrap();
        let rv: u64 = created["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        let future = rv + 1000;
        let (code, lines) = call(
            &router,
            "GET",
            &format!("{namespaces}?watch=1&resourceVersion={future}"),
            "",
        )
        .await;
        assert_eq!(code, 200);
        let event: serde_json::Value = serde_json::from_str(lines.trim()).unwrap();
        assert_eq!(event["type"], "ERROR", "{lines}");
        assert_eq!(event["object"]["code"], 504);
        assert_eq!(event["object"]["reason"], "Timeout");
        assert_eq!(
            event["object"]["message"],
            format!("Too large resource version: {future}, current: {rv}")
        );
        assert_eq!(
            event["object"]["details"]["causes"][0]["reason"],
            "ResourceVersionTooLarge"
        );
    }

    // Paused time: the watch timeouts and waits pass as soon as nothing else can run.
    #[tokio::test(start_paused = true)]
    async fn initial_events_come_in_pages_of_one_snapshot() {
        let router = router();
        let namespaces = "/clusters/root/api/v1/namespaces";
        let total = crate::paged::PAGE * 2 + 7;
        for i in 0..total {
            let body = format!(
                r#"{{"metadata":{{"name":"n{i:04}","labels":{{"odd":"{}"}}}}}}"#,
                i % 2
            );
            let (code, _) = call(&router, "POST", namespaces, &body).await;
            assert_eq!(code, 201);
        }
        let (code, lines) = call(
            &router,
            "GET",
            &format!("{namespaces}?watch=1&timeoutSeconds=1"),
            "",
        )
        .await;
        assert_eq!(code, 200);
        let names: Vec<String> = lines
            .lines()
            .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
            .inspect(|event| assert_eq!(event["type"], "ADDED"))
            .map(|event| {
                event["object"]["metadata"]["name"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        let expected: Vec<String> = (0..total).map(|i| format!("n{i:04}")).collect();
        assert_eq!(names, expected);
        // Each event carries, byte for byte, what a GET of its object answers.
        for at in [0, total - 1] {
            let (_, got) = call(&router, "GET", &format!("{namespaces}/n{at:04}"), "").await;
            let line = lines.lines().nth(at).unwrap();
            assert_eq!(
                line,
                format!(r#"{{"type":"ADDED","object":{}}}"#, got.trim_end())
            );
        }
        // With a selector, pages are filtered and still complete.
        let (_, lines) = call(
            &router,
            "GET",
            &format!("{namespaces}?watch=1&timeoutSeconds=1&labelSelector=odd%3D1"),
            "",
        )
        .await;
        assert_eq!(lines.lines().count(), total / 2);
    }
}
