//! Lists without a limit, streamed: the collection is read a page at a time from one snapshot
//! ([`crate::paged::Pages`]) and each page is encoded onto the response as the client takes the
//! one before, so the server holds a page, not the collection, however long it is, and a
//! client that reads slowly holds the server back instead of growing its memory.
//!
//! The bytes are the ones the whole list would have been encoded as. Every format (JSON, YAML;
//! the list, a Table, a PartialObjectMetadataList) writes the items of a list one after the
//! other within an unchanging frame, so [`ListFrame`] takes the frame from the encoding of the
//! list without items, and each page's items from the encoding of the list holding that page.
//! A list that fits in its first page is answered whole, as before.

use bytes::Bytes;
use futures::StreamExt;
use http::{StatusCode, header};
use http_body_util::{BodyExt, StreamBody};
use kcp_registry::{JsonAnswer, RegistryError};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::compression::Compressible;
use crate::error::ApiError;
use crate::list_frame::ListFrame;
use crate::negotiation::{Conversion, Encoding, IncludeObject, render_list};
use crate::paged::Pages;
use crate::scope::{Params, RequestScope};
use crate::status::Body;
use crate::table::JsonRows;

/// Encoded pages queued for the client beyond the one being sent.
const PAGES_QUEUED: usize = 2;

/// The list at `revision` (0: the latest), streamed when it is longer than a page.
pub(super) async fn serve(
    scope: &RequestScope<'_>,
    revision: u64,
) -> Result<http::Response<Body>, ApiError> {
    let too_old = |error: RegistryError| match error {
        RegistryError::Expired(_) if revision != 0 => {
            RegistryError::Expired("The resourceVersion for the provided list is too old.".into())
        }
        other => other,
    };
    let encoding = scope.negotiated.encoding;
    let mut render = Renderer {
        conversion: scope.negotiated.conversion,
        encoding,
        resource: scope.resource.clone(),
        params: scope.params.clone(),
        list_meta: Value::Null,
        rows: None,
    };
    if let (Conversion::Table(version), Encoding::Json) = (render.conversion, encoding) {
        let include = IncludeObject::from_params(&scope.params)?;
        render.rows = JsonRows::new(scope.resource, version, include);
    }
    // Plain JSON without selectors: each object's answer straight from its
    // stored bytes, as a GET of it answers (no decoding); a JSON Table's rows made from them.
    let plain = matches!(render.conversion, Conversion::None) && encoding == Encoding::Json;
    let json_pages = match plain || render.rows.is_some() {
        true => Pages::first_json(
            &scope.registry,
            scope.target(),
            &scope.params,
            revision,
            JsonAnswer::ListItem,
        )
        .await
        .map_err(too_old)?,
        false => None,
    };
    let (mut pages, first) = match json_pages {
        Some((pages, first)) => (pages, Page::Json(first)),
        None => {
            let (pages, first) =
                Pages::first(&scope.registry, scope.target(), &scope.params, revision)
                    .await
                    .map_err(too_old)?;
            (pages, Page::Objects(first))
        }
    };
    let json = matches!(first, Page::Json(_));
    render.list_meta = json!({"resourceVersion": pages.revision().to_string()});
    let frame = ListFrame::new(encoding, render.bytes(Vec::new())?)
        .ok_or_else(|| internal("the list has no items to stream"))?;
    let first = render.items(&frame, first, false)?;
    let Some(second) = next_page(&mut pages, json).await else {
        // One page: the whole list at once.
        let mut whole = frame.prefix;
        whole.extend_from_slice(&first);
        whole.extend_from_slice(&frame.suffix);
        return Ok(match encoding {
            Encoding::Json => crate::status::encoded_json(StatusCode::OK, whole),
            Encoding::Yaml => typed(http::Response::new(crate::status::full(whole)), encoding),
        });
    };
    let second = second?;

    let (sender, receiver) = mpsc::channel::<Bytes>(PAGES_QUEUED);
    tokio::spawn(async move {
        let mut written = !first.is_empty();
        let mut opening = frame.prefix.clone();
        opening.extend_from_slice(&first);
        if sender.send(Bytes::from(opening)).await.is_err() {
            return;
        }
        let mut next = Some(Ok(second));
        while let Some(page) = next.take() {
            let chunk = match page.and_then(|page| render.items(&frame, page, written)) {
                Ok(chunk) => chunk,
                Err(error) => {
                    // The response ends unfinished (not a list a client can decode), rather
                    // than finished without the rest of the collection.
                    tracing::warn!(%error, "a streamed list ended early");
                    return;
                }
            };
            if !chunk.is_empty() {
                written = true;
                if sender.send(Bytes::from(chunk)).await.is_err() {
                    return;
                }
            }
            next = next_page(&mut pages, json).await;
        }
        let _ = sender.send(Bytes::from(frame.suffix)).await;
    });
    let frames = tokio_stream::wrappers::ReceiverStream::new(receiver)
        .map(|bytes| Ok(hyper::body::Frame::data(bytes)));
    let mut response = typed(
        http::Response::new(StreamBody::new(frames).boxed_unsync()),
        encoding,
    );
    response.extensions_mut().insert(Compressible);
    Ok(response)
}

/// The JSON list of these JSON answers, framed as `empty`, the JSON of the list without items;
/// `None` if `empty` is not a list.
pub(super) fn joined_json(empty: Vec<u8>, answers: &[Vec<u8>]) -> Option<Vec<u8>> {
    let frame = ListFrame::new(Encoding::Json, empty)?;
    let size = frame.prefix.len() + joined_size(answers) + frame.suffix.len();
    let mut body = Vec::with_capacity(size);
    body.extend_from_slice(&frame.prefix);
    join(&mut body, b"", frame.separator, answers);
    body.extend_from_slice(&frame.suffix);
    Some(body)
}

/// Appends `answers` to `out`, the first led by `lead`, the others by `separator`.
fn join(out: &mut Vec<u8>, lead: &[u8], separator: &[u8], answers: &[Vec<u8>]) {
    for (i, answer) in answers.iter().enumerate() {
        out.extend_from_slice(if i == 0 { lead } else { separator });
        out.extend_from_slice(answer);
    }
}

/// Room for `answers` joined by one-byte separators.
fn joined_size(answers: &[Vec<u8>]) -> usize {
    answers.iter().map(|a| a.len() + 1).sum()
}

/// The response with the content type of `encoding`.
fn typed(mut response: http::Response<Body>, encoding: Encoding) -> http::Response<Body> {
    let content_type = match encoding {
        Encoding::Json => "application/json",
        Encoding::Yaml => "application/yaml",
    };
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static(content_type),
    );
    response
}

/// A page as read: objects to render, or their JSON answers.
enum Page {
    Objects(Vec<Value>),
    Json(Vec<Vec<u8>>),
}

/// The page after the last, read as the first was (`json`: as JSON answers); `None` after the
/// last.
async fn next_page(pages: &mut Pages, json: bool) -> Option<Result<Page, RegistryError>> {
    if json {
        Some(pages.next_json_page().await?.map(Page::Json))
    } else {
        Some(pages.next_page().await?.map(Page::Objects))
    }
}

fn internal(message: &str) -> ApiError {
    RegistryError::Internal(format!("streaming a list: {message}")).into()
}

/// How a page of the list is rendered and encoded, owned by the task that streams it.
struct Renderer {
    conversion: Conversion,
    encoding: Encoding,
    resource: kcp_apis::builtin::ResourceRef,
    params: Params,
    list_meta: Value,
    /// A Table's rows, made from the objects' answers (pages read as answers).
    rows: Option<JsonRows>,
}

impl Renderer {
    /// The list of these items as the client asked for it.
    fn list(&self, items: Vec<Value>) -> Result<Value, RegistryError> {
        render_list(
            self.conversion,
            &self.resource,
            &self.params,
            items,
            self.list_meta.clone(),
        )
    }

    /// The encoded items of a page, without the list's frame (nothing for no items); after
    /// items already written (`after_items`), led by the separator.
    fn items(
        &self,
        frame: &ListFrame,
        page: Page,
        after_items: bool,
    ) -> Result<Vec<u8>, RegistryError> {
        let lead = if after_items { frame.separator } else { b"" };
        let items = match page {
            Page::Objects(items) if items.is_empty() => return Ok(Vec::new()),
            Page::Objects(items) => items,
            Page::Json(answers) if answers.is_empty() => return Ok(Vec::new()),
            Page::Json(answers) => {
                let joined = match &self.rows {
                    None => Ok(answers),
                    Some(rows) => rows.rows(&answers).ok_or(answers),
                };
                match joined {
                    Ok(items) => {
                        let mut out = Vec::with_capacity(joined_size(&items) + lead.len());
                        join(&mut out, lead, frame.separator, &items);
                        return Ok(out);
                    }
                    // Rows that could not be made from the answers: their objects rendered.
                    Err(answers) => crate::table::decoded(&answers)?,
                }
            }
        };
        let encoded = self.bytes(items)?;
        let inner = frame.items(&encoded).ok_or_else(|| {
            RegistryError::Internal("streaming a list: a page is not framed as the list".into())
        })?;
        let mut out = Vec::with_capacity(lead.len() + inner.len());
        out.extend_from_slice(lead);
        out.extend_from_slice(inner);
        Ok(out)
    }

    /// [`Renderer::list`], encoded.
    fn bytes(&self, items: Vec<Value>) -> Result<Vec<u8>, RegistryError> {
        let list = self.list(items)?;
        match self.encoding {
            Encoding::Json => Ok(crate::status::json_bytes(&list)),
            Encoding::Yaml => crate::yaml::encode(&list)
                .map(String::into_bytes)
                .ok_or_else(|| RegistryError::Internal("a list page has no YAML form".into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use kcp_apis::builtin::RESOURCES;

    use super::*;
    use crate::negotiation::MetaVersion;

    fn renderer(conversion: Conversion, encoding: Encoding, resource: &str) -> Renderer {
        Renderer {
            conversion,
            encoding,
            resource: RESOURCES
                .iter()
                .find(|r| r.name == resource)
                .unwrap()
                .into(),
            params: Params::parse(Some("includeObject=Object")),
            list_meta: json!({"resourceVersion": "42"}),
            rows: None,
        }
    }

    fn object(i: usize) -> Value {
        json!({
            "kind": "ConfigMap", "apiVersion": "v1",
            "metadata": {"name": format!("c{i}"), "namespace": "default",
                         "creationTimestamp": "2020-01-01T00:00:00Z",
                         "labels": {"n": i.to_string()}, "annotations": {}},
            "data": {"a": "line one\nline two\n", "b": "", "c": "- not a list", "d": "true"},
            "binaryData": {},
            "nested": [[], {}, [1, [2, {"x": null}]], "é\u{1}"],
        })
    }

    /// The list of `count` objects encoded at once, and streamed in pages of `page`.
    fn whole_and_streamed(render: &Renderer, count: usize, page: usize) -> (Vec<u8>, Vec<u8>) {
        let objects: Vec<Value> = (0..count).map(object).collect();
        let whole = render.bytes(objects.clone()).unwrap();
        let frame = ListFrame::new(render.encoding, render.bytes(Vec::new()).unwrap()).unwrap();
        let mut streamed = frame.prefix.clone();
        let mut written = false;
        for chunk in objects.chunks(page) {
            // Pages a selector emptied stream nothing.
            for items in [Vec::new(), chunk.to_vec()] {
                let bytes = render.items(&frame, Page::Objects(items), written).unwrap();
                if !bytes.is_empty() {
                    streamed.extend_from_slice(&bytes);
                    written = true;
                }
            }
        }
        streamed.extend_from_slice(&frame.suffix);
        (whole, streamed)
    }

    #[test]
    fn streamed_pages_are_the_whole_list_byte_for_byte() {
        let conversions = [
            Conversion::None,
            Conversion::Table(MetaVersion::V1),
            Conversion::PartialObjectMetadataList(MetaVersion::V1),
        ];
        for conversion in conversions {
            for encoding in [Encoding::Json, Encoding::Yaml] {
                for resource in ["configmaps", "namespaces"] {
                    let render = renderer(conversion, encoding, resource);
                    for (count, page) in [(1, 1), (2, 1), (7, 3), (10, 5), (10, 100)] {
                        let (whole, streamed) = whole_and_streamed(&render, count, page);
                        assert_eq!(
                            String::from_utf8_lossy(&streamed),
                            String::from_utf8_lossy(&whole),
                            "{conversion:?} {encoding:?} {resource} {count}/{page}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn json_answers_are_joined_and_led_by_the_separator_after_items() {
        let render = renderer(Conversion::None, Encoding::Json, "configmaps");
        let frame = ListFrame::new(Encoding::Json, render.bytes(Vec::new()).unwrap()).unwrap();
        let page = || Page::Json(vec![b"{\"a\":1}".to_vec(), b"{}".to_vec()]);
        let first = render.items(&frame, page(), false).unwrap();
        assert_eq!(first, b"{\"a\":1},{}");
        let later = render.items(&frame, page(), true).unwrap();
        assert_eq!(later, b",{\"a\":1},{}");
        assert!(
            render
                .items(&frame, Page::Json(Vec::new()), true)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn a_page_outside_the_frame_is_refused() {
        let render = renderer(Conversion::None, Encoding::Json, "configmaps");
        let frame = ListFrame::new(Encoding::Json, render.bytes(Vec::new()).unwrap()).unwrap();
        assert!(frame.items(b"{}").is_none());
        assert!(ListFrame::new(Encoding::Json, b"{\"kind\":\"X\"}".to_vec()).is_none());
    }
}
