//! gzip response compression, as kube-apiserver does it: bodies over 128 KiB are compressed
//! (level 1, fast) when the client sent `Accept-Encoding: gzip`, which Go clients such as
//! kubectl do by default. Whole bodies are compressed at once; streamed ones marked
//! [`Compressible`] (lists) as they go, once their first 128 KiB have come. Watches are never
//! compressed.

use bytes::Bytes;
use flate2::Compression;
use flate2::write::GzEncoder;
use http::{HeaderMap, HeaderValue, Response, header};
use http_body::Body as _;
use http_body_util::BodyExt;
use std::io::Write;

use crate::status::{Body, full};

/// Bodies larger than this are compressed (kube-apiserver's `defaultGzipThresholdBytes`).
pub const GZIP_THRESHOLD_BYTES: u64 = 128 * 1024;

/// Whether the client accepts gzip (`Accept-Encoding: gzip`, not with `q=0`).
pub fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|token| {
            let mut parts = token.split(';');
            let coding = parts.next().unwrap_or_default().trim();
            let refused = parts.any(|p| {
                p.trim()
                    .strip_prefix("q=")
                    .and_then(|q| q.trim().parse::<f32>().ok())
                    == Some(0.0)
            });
            coding.eq_ignore_ascii_case("gzip") && !refused
        })
}

/// Marks a streamed response that may be compressed as it goes (a list, not a watch).
#[derive(Debug, Clone, Copy)]
pub struct Compressible;

/// Compresses the response if the client accepts gzip and the whole body is large enough.
pub async fn maybe_gzip(response: Response<Body>, accepts_gzip: bool) -> Response<Body> {
    if accepts_gzip
        && response.extensions().get::<Compressible>().is_some()
        && !response.headers().contains_key(header::CONTENT_ENCODING)
    {
        return gzip_stream(response).await;
    }
    let large = response
        .body()
        .size_hint()
        .exact()
        .is_some_and(|size| size > GZIP_THRESHOLD_BYTES);
    if !accepts_gzip || !large || response.headers().contains_key(header::CONTENT_ENCODING) {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let bytes: Bytes = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(never) => match never {},
    };
    let mut encoder = GzEncoder::new(Vec::with_capacity(bytes.len() / 4), Compression::new(1));
    let compressed = match encoder.write_all(&bytes).and_then(|()| encoder.finish()) {
        Ok(compressed) => compressed,
        Err(_) => return Response::from_parts(parts, full(bytes)),
    };
    mark_gzipped(&mut parts);
    Response::from_parts(parts, full(compressed))
}

/// The headers of a response whose body is gzip.
fn mark_gzipped(parts: &mut http::response::Parts) {
    parts
        .headers
        .insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    parts
        .headers
        .append(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    parts.headers.remove(header::CONTENT_LENGTH);
}

/// A streamed body compressed as it goes when it turns out larger than the threshold: its
/// first frames are read until they pass it (answered whole and uncompressed when the body ends
/// before), then everything is compressed, each frame flushed as it comes so that the client
/// reads at the pace of the stream.
async fn gzip_stream(response: Response<Body>) -> Response<Body> {
    let (mut parts, mut body) = response.into_parts();
    let mut head = Vec::new();
    loop {
        match body.frame().await {
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    head.extend_from_slice(&data);
                }
                if head.len() as u64 > GZIP_THRESHOLD_BYTES {
                    break;
                }
            }
            Some(Err(never)) => match never {},
            None => return Response::from_parts(parts, full(head)),
        }
    }
    mark_gzipped(&mut parts);
    let encoder = GzEncoder::new(Vec::new(), Compression::new(1));
    let state = Some((Some(Bytes::from(head)), body, encoder));
    let frames = futures::stream::unfold(state, |state| async move {
        let (head, mut body, mut encoder) = state?;
        let data = match head {
            Some(head) => Some(head),
            None => loop {
                match body.frame().await {
                    Some(Ok(frame)) => {
                        if let Ok(data) = frame.into_data() {
                            break Some(data);
                        }
                    }
                    Some(Err(never)) => match never {},
                    None => break None,
                }
            },
        };
        let out = match data {
            Some(data) => {
                if encoder
                    .write_all(&data)
                    .and_then(|()| encoder.flush())
                    .is_err()
                {
                    return None;
                }
                let out = std::mem::take(encoder.get_mut());
                Some((Bytes::from(out), Some((None, body, encoder))))
            }
            None => encoder.finish().ok().map(|out| (Bytes::from(out), None)),
        };
        out.map(|(bytes, next)| (Ok(hyper::body::Frame::data(bytes)), next))
    });
    Response::from_parts(
        parts,
        http_body_util::StreamBody::new(frames).boxed_unsync(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::read::GzDecoder;
    use std::io::Read;

    fn headers(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::ACCEPT_ENCODING,
            HeaderValue::from_str(value).unwrap(),
        );
        headers
    }

    #[test]
    fn gzip_must_be_offered() {
        assert!(accepts_gzip(&headers("gzip")));
        assert!(accepts_gzip(&headers("deflate, GZIP;q=0.5")));
        assert!(!accepts_gzip(&headers("gzip;q=0")));
        assert!(!accepts_gzip(&headers("br")));
        assert!(!accepts_gzip(&HeaderMap::new()));
    }

    async fn body(response: Response<Body>) -> Vec<u8> {
        response
            .into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .to_vec()
    }

    #[tokio::test]
    async fn only_large_bodies_are_compressed() {
        let small = Response::new(full(vec![b'a'; 1000]));
        let small = maybe_gzip(small, true).await;
        assert!(!small.headers().contains_key(header::CONTENT_ENCODING));

        let text = vec![b'x'; 200 * 1024];
        let not_offered = maybe_gzip(Response::new(full(text.clone())), false).await;
        assert_eq!(body(not_offered).await.len(), text.len());

        let large = maybe_gzip(Response::new(full(text.clone())), true).await;
        assert_eq!(large.headers()[header::CONTENT_ENCODING], "gzip");
        assert_eq!(large.headers()[header::VARY], "Accept-Encoding");
        let compressed = body(large).await;
        assert!(compressed.len() < text.len() / 10);
        let mut decoded = Vec::new();
        GzDecoder::new(&compressed[..])
            .read_to_end(&mut decoded)
            .unwrap();
        assert_eq!(decoded, text);
    }

    fn streamed(chunks: Vec<Vec<u8>>) -> Response<Body> {
        let frames = futures::stream::iter(
            chunks
                .into_iter()
                .map(|chunk| Ok(hyper::body::Frame::data(Bytes::from(chunk)))),
        );
        let mut response = Response::new(http_body_util::StreamBody::new(frames).boxed_unsync());
        response.extensions_mut().insert(Compressible);
        response
    }

    #[tokio::test]
    async fn streamed_bodies_are_compressed_as_they_go_once_large() {
        let small = maybe_gzip(streamed(vec![b"a".repeat(100), b"b".repeat(100)]), true).await;
        assert!(!small.headers().contains_key(header::CONTENT_ENCODING));
        assert_eq!(
            body(small).await,
            [b"a".repeat(100), b"b".repeat(100)].concat()
        );

        let chunks: Vec<Vec<u8>> = (0..40u8).map(|i| vec![b'a' + i % 26; 10_000]).collect();
        let large = maybe_gzip(streamed(chunks.clone()), true).await;
        assert_eq!(large.headers()[header::CONTENT_ENCODING], "gzip");
        let compressed = body(large).await;
        let mut decoded = Vec::new();
        GzDecoder::new(&compressed[..])
            .read_to_end(&mut decoded)
            .unwrap();
        assert_eq!(decoded, chunks.concat());

        // Not offered, or not marked (a watch): as it is.
        let plain = maybe_gzip(streamed(chunks.clone()), false).await;
        assert_eq!(body(plain).await, chunks.concat());
        let mut watch = streamed(chunks.clone());
        watch.extensions_mut().clear();
        let watch = maybe_gzip(watch, true).await;
        assert!(!watch.headers().contains_key(header::CONTENT_ENCODING));
    }
}
