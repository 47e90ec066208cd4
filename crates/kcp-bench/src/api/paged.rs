//! A collection read as client-go's reflectors and kube-rs' watcher read it: pages of
//! [`PAGE_LIMIT`], each asking for the page after the continue token of the one before.

use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use http::{Method, StatusCode};
use http_body_util::{BodyExt, Full};

use crate::api::client::{Protocol, Target};

/// Objects per page when a collection is paged (client-go's reflectors' page size).
pub(crate) const PAGE_LIMIT: usize = 500;

/// A collection read in pages.
pub(crate) struct Paged {
    pub took: Duration,
    pub bytes: usize,
    pub items: usize,
}

/// Reads the collection at `path` in pages of [`PAGE_LIMIT`] on one connection, each asking for
/// the page after the continue token of the one before, as client-go's reflectors do.
pub(crate) async fn paged(
    target: &Target,
    authorization: &str,
    path: &str,
) -> anyhow::Result<Paged> {
    let mut connection = target.connect(Protocol::Http1).await?;
    let mut pages = Vec::new();
    let mut token: Option<String> = None;
    let began = Instant::now();
    loop {
        let query = match &token {
            Some(token) => format!("{path}?limit={PAGE_LIMIT}&continue={token}"),
            None => format!("{path}?limit={PAGE_LIMIT}"),
        };
        let request = connection
            .request(Method::GET, &query)
            .header(http::header::AUTHORIZATION, authorization)
            .header(http::header::ACCEPT, "application/json")
            .body(Full::new(Bytes::new()))?;
        let (status, body) = connection.stream(request).await?;
        anyhow::ensure!(status == StatusCode::OK, "GET {query}: {status}");
        let body = body.collect().await?.to_bytes();
        // The ListMeta comes before the items (after them in lists whose keys are sorted):
        // the token is found without decoding the page.
        let tail = body.len().saturating_sub(2048);
        token =
            continue_token(&body[..body.len().min(2048)]).or_else(|| continue_token(&body[tail..]));
        pages.push(body);
        if token.is_none() {
            break;
        }
    }
    let took = began.elapsed();
    let mut items = 0;
    for page in &pages {
        let page: serde_json::Value = serde_json::from_slice(page).context("a page is JSON")?;
        items += page["items"].as_array().map_or(0, Vec::len);
    }
    Ok(Paged {
        took,
        bytes: pages.iter().map(Bytes::len).sum(),
        items,
    })
}

/// The `continue` value in this part of a JSON list, if any.
fn continue_token(head: &[u8]) -> Option<String> {
    let marker = b"\"continue\":\"";
    let at = head.windows(marker.len()).position(|w| w == marker)? + marker.len();
    let length = head[at..].iter().position(|&b| b == b'"')?;
    let token = std::str::from_utf8(&head[at..at + length]).ok()?;
    (!token.is_empty()).then(|| token.to_string())
}

#[cfg(test)]
mod tests {
    use super::continue_token;

    #[test]
    fn the_continue_token_is_found_where_the_list_meta_is() {
        let head = br#"{"kind":"ConfigMapList","metadata":{"resourceVersion":"7","continue":"abc"},"items":["#;
        assert_eq!(continue_token(head).as_deref(), Some("abc"));
        let tail =
            br#"}],"kind":"WorkspaceList","metadata":{"continue":"xyz","resourceVersion":"7"}}"#;
        assert_eq!(continue_token(tail).as_deref(), Some("xyz"));
        let last = br#"{"metadata":{"resourceVersion":"7"},"items":[]}"#;
        assert_eq!(continue_token(last), None);
        assert_eq!(continue_token(br#""continue":"""#), None);
    }
}
