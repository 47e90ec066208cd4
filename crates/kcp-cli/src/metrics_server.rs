//! `/metrics` of the long-running binaries (`syncer --metrics-bind-address`): the registry
//! rendered in the Prometheus text format over plain HTTP/1.1, every other path a 404.

use std::net::SocketAddr;
use std::sync::Arc;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use prometheus_client::registry::Registry;

/// Serves `metrics` at `address`, if given, until the answer is dropped; says where on
/// standard error.
pub async fn serve_physical(
    address: Option<SocketAddr>,
    metrics: &kcp_physical::metrics::Metrics,
) -> anyhow::Result<Option<kcp_physical::AbortOnDrop>> {
    let Some(address) = address else {
        return Ok(None);
    };
    let mut registry = Registry::default();
    metrics.register(&mut registry);
    let (bound, task) = serve(address, registry).await?;
    eprintln!("serving metrics on http://{bound}/metrics");
    Ok(Some(kcp_physical::AbortOnDrop(task)))
}

/// Serves `registry` at `http://<address>/metrics` until dropped; returns the address bound
/// (port 0 picks one).
pub async fn serve(
    address: SocketAddr,
    registry: Registry,
) -> anyhow::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind(address).await?;
    let bound = listener.local_addr()?;
    let registry = Arc::new(registry);
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let registry = registry.clone();
            tokio::spawn(async move {
                let service = service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                    let registry = registry.clone();
                    async move {
                        let mut text = String::new();
                        let found = request.uri().path() == "/metrics"
                            && prometheus_client::encoding::text::encode(&mut text, &registry)
                                .is_ok();
                        match found {
                            true => hyper::Response::builder()
                                .header(
                                    http::header::CONTENT_TYPE,
                                    "text/plain; version=0.0.4; charset=utf-8",
                                )
                                .body(Full::new(Bytes::from(text))),
                            false => hyper::Response::builder()
                                .status(http::StatusCode::NOT_FOUND)
                                .body(Full::new(Bytes::from_static(b"404 page not found\n"))),
                        }
                    }
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok((bound, task))
}
