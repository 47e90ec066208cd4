//! gzip response compression, as kube-apiserver does it: whole (not streamed) bodies over
//! 128 KiB are compressed (level 1, fast) when the client sent `Accept-Encoding: gzip`, which Go
//! clients such as kubectl do by default. Watches are never compressed.

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

/// Compresses the response if the client accepts gzip and the whole body is large enough.
pub async fn maybe_gzip(response: Response<Body>, accepts_gzip: bool) -> Response<Body> {
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
    parts
        .headers
        .insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    parts
        .headers
        .append(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, full(compressed))
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
}
