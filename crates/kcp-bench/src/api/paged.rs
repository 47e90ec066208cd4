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
/// the page after the continue token of the one before, as client-go's reflectors do. `took`
/// counts the requests only: each page is counted (decoded) between them and then dropped, so
/// the benchmark holds one page at a time, not the collection (gigabytes at a million
/// workspaces).
pub(crate) async fn paged(
    target: &Target,
    authorization: &str,
    path: &str,
) -> anyhow::Result<Paged> {
    let mut connection = target.connect(Protocol::Http1).await?;
    let mut read = Paged {
        took: Duration::ZERO,
        bytes: 0,
        items: 0,
    };
    let mut token: Option<String> = None;
    loop {
        let query = match &token {
            Some(token) => format!("{path}?limit={PAGE_LIMIT}&continue={token}"),
            None => format!("{path}?limit={PAGE_LIMIT}"),
        };
        let began = Instant::now();
        let request = connection
            .authorized(Method::GET, &query, authorization)
            .header(http::header::ACCEPT, "application/json")
            .body(Full::new(Bytes::new()))?;
        let (status, body) = connection.stream(request).await?;
        anyhow::ensure!(status == StatusCode::OK, "GET {query}: {status}");
        let body = body.collect().await?.to_bytes();
        read.took += began.elapsed();
        let page: serde_json::Value = serde_json::from_slice(&body).context("a page is JSON")?;
        read.items += page["items"].as_array().map_or(0, Vec::len);
        read.bytes += body.len();
        token = page["metadata"]["continue"]
            .as_str()
            .filter(|token| !token.is_empty())
            .map(str::to_string);
        if token.is_none() {
            return Ok(read);
        }
    }
}
