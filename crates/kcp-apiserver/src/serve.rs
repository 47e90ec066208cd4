//! The TLS accept loop: one task per connection, TLS handshake inside it, HTTP/1.1 or HTTP/2
//! (ALPN) on the same port. A panic while answering becomes a 500 `Status`, never a dropped
//! process.

use std::convert::Infallible;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;
use http::StatusCode;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::router::Router;
use crate::status::failure;

/// A running server; dropping it does not stop it, [`ServeHandle::shutdown`] does.
pub struct ServeHandle {
    accept_loop: tokio::task::JoinHandle<()>,
}

impl ServeHandle {
    /// Stops accepting connections.
    pub fn shutdown(self) {
        self.accept_loop.abort();
    }
}

/// Serves `router` over TLS on `listener`. The TLS configuration should offer `h2` and
/// `http/1.1` through ALPN.
pub fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    router: Arc<Router>,
) -> ServeHandle {
    let acceptor = TlsAcceptor::from(tls);
    let accept_loop = tokio::spawn(async move {
        loop {
            let (stream, peer) = match listener.accept().await {
                Ok(accepted) => accepted,
                Err(error) => {
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            let acceptor = acceptor.clone();
            let router = Arc::clone(&router);
            tokio::spawn(async move {
                let tls_stream = match acceptor.accept(stream).await {
                    Ok(tls_stream) => tls_stream,
                    Err(error) => {
                        tracing::debug!(%peer, %error, "TLS handshake failed");
                        return;
                    }
                };
                let service =
                    hyper::service::service_fn(move |request: http::Request<Incoming>| {
                        let router = Arc::clone(&router);
                        async move {
                            let answered = AssertUnwindSafe(router.handle(request))
                                .catch_unwind()
                                .await;
                            Ok::<_, Infallible>(answered.unwrap_or_else(|_| {
                                tracing::error!("request handler panicked");
                                failure(
                                    StatusCode::INTERNAL_SERVER_ERROR,
                                    "InternalError",
                                    "an internal error occurred",
                                )
                            }))
                        }
                    });
                let builder = auto::Builder::new(TokioExecutor::new());
                if let Err(error) = builder
                    .serve_connection_with_upgrades(TokioIo::new(tls_stream), service)
                    .await
                {
                    tracing::debug!(%peer, %error, "connection ended with an error");
                }
            });
        }
    });
    ServeHandle { accept_loop }
}
