//! The TLS accept loop: one task per connection, TLS handshake inside it, HTTP/1.1 or HTTP/2 by
//! ALPN on the same port. A panic while answering becomes a 500 `Status`, never a dropped
//! process.
//!
//! No connection may hold the server forever, nor many of them starve everyone
//! ([`ServeOptions`]): open connections are bounded (beyond the bound the loop stops accepting
//! until one closes, so the kernel's backlog makes clients wait); the TLS handshake has a
//! deadline; HTTP/1.1 request headers must arrive within kube-apiserver's read-header timeout
//! (32 s, from the moment the server waits for a request, so it also ends idle keep-alive
//! connections); a connection with no request in flight for kube-apiserver's idle timeout (90 s)
//! is shut down gracefully, and dropped if it does not go; HTTP/2 allows kube-apiserver's 100
//! concurrent streams and pings its peer so dead ones go; TCP keep-alive probes as Go's servers
//! do (every 3 minutes) catch dead HTTP/1.1 peers.
//!
//! Owns: connections and their deadlines. Must not know what requests mean (that is the router).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::FutureExt;
use http::StatusCode;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;

use crate::limits::holding;
use crate::router::Router;
use crate::status::failure;

/// Concurrent streams on one HTTP/2 connection, as kube-apiserver.
const H2_MAX_CONCURRENT_STREAMS: u32 = 100;
/// The largest request header: HTTP/1.1 read buffer and HTTP/2 header list.
const MAX_HEADER_BYTES: usize = 64 * 1024;
/// The address a request came from (its connection's peer).
#[derive(Debug, Clone, Copy)]
pub struct PeerAddress(pub SocketAddr);

/// How often an HTTP/2 peer is pinged, and how long its answer may take.
const H2_PING_INTERVAL: Duration = Duration::from_secs(30);
const H2_PING_TIMEOUT: Duration = Duration::from_secs(20);
/// Go's (and so kube-apiserver's) TCP keep-alive period.
const TCP_KEEPALIVE: Duration = Duration::from_secs(180);
/// How long a connection told to go may take before it is dropped.
const CLOSE_GRACE: Duration = Duration::from_secs(5);
/// How often "connection limit reached" may be logged.
const LIMIT_LOG_EVERY: Duration = Duration::from_secs(60);
/// How long the loop pauses after a failed accept (e.g. out of file descriptors).
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(50);

/// Limits of the connection layer.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Time for the TLS handshake.
    pub tls_handshake_timeout: Duration,
    /// Time for an HTTP/1.1 request's headers, counted from when the server waits for them.
    pub read_header_timeout: Duration,
    /// Time a connection may stay open with no request in flight.
    pub idle_timeout: Duration,
    /// Open connections at most.
    pub max_connections: usize,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            tls_handshake_timeout: Duration::from_secs(10),
            read_header_timeout: Duration::from_secs(32),
            idle_timeout: Duration::from_secs(90),
            max_connections: 4096,
        }
    }
}

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
    options: ServeOptions,
) -> ServeHandle {
    let acceptor = TlsAcceptor::from(tls);
    let connections = Arc::new(Semaphore::new(
        options.max_connections.clamp(1, Semaphore::MAX_PERMITS),
    ));
    let http = Arc::new(http_builder(&options));
    let options = Arc::new(options);
    let accept_loop = tokio::spawn(async move {
        let mut limit_logged: Option<Instant> = None;
        loop {
            let place = match Arc::clone(&connections).try_acquire_owned() {
                Ok(place) => place,
                Err(_) => {
                    if limit_logged.is_none_or(|at| at.elapsed() >= LIMIT_LOG_EVERY) {
                        tracing::warn!(
                            max = options.max_connections,
                            "connection limit reached; waiting for connections to close"
                        );
                        limit_logged = Some(Instant::now());
                    }
                    match Arc::clone(&connections).acquire_owned().await {
                        Ok(place) => place,
                        Err(_) => return,
                    }
                }
            };
            let (stream, peer) = match listener.accept().await {
                Ok(accepted) => accepted,
                Err(error) => {
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                    continue;
                }
            };
            tokio::spawn(connection(
                stream,
                peer,
                place,
                acceptor.clone(),
                Arc::clone(&http),
                Arc::clone(&router),
                Arc::clone(&options),
            ));
        }
    });
    ServeHandle { accept_loop }
}

/// The HTTP settings of every connection; each picks one protocol by ALPN.
fn http_builder(options: &ServeOptions) -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(options.read_header_timeout)
        .max_buf_size(MAX_HEADER_BYTES);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(H2_MAX_CONCURRENT_STREAMS)
        .max_header_list_size(MAX_HEADER_BYTES as u32)
        .keep_alive_interval(H2_PING_INTERVAL)
        .keep_alive_timeout(H2_PING_TIMEOUT);
    builder
}

/// Serves one connection until it ends, times out or goes idle.
async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    _place: OwnedSemaphorePermit,
    acceptor: TlsAcceptor,
    http: Arc<auto::Builder<TokioExecutor>>,
    router: Arc<Router>,
    options: Arc<ServeOptions>,
) {
    let _ = stream.set_nodelay(true);
    let keepalive = socket2::TcpKeepalive::new()
        .with_time(TCP_KEEPALIVE)
        .with_interval(TCP_KEEPALIVE);
    let _ = socket2::SockRef::from(&stream).set_tcp_keepalive(&keepalive);
    let tls_stream =
        match tokio::time::timeout(options.tls_handshake_timeout, acceptor.accept(stream)).await {
            Ok(Ok(tls_stream)) => tls_stream,
            Ok(Err(error)) => {
                tracing::debug!(%peer, %error, "TLS handshake failed");
                return;
            }
            Err(_) => {
                tracing::debug!(%peer, "TLS handshake timed out");
                return;
            }
        };
    let h2 = tls_stream.get_ref().1.alpn_protocol() == Some(b"h2".as_slice());
    // A client certificate the handshake verified names the user of every request on it.
    let certificate_user = tls_stream
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|certificates| certificates.first())
        .and_then(|leaf| crate::authn::user_of_certificate(leaf.as_ref()))
        .map(crate::authn::ClientCertificateUser);
    let activity = Activity::new();
    let service = hyper::service::service_fn({
        let activity = Arc::clone(&activity);
        let certificate_user = certificate_user.clone();
        move |mut request: http::Request<Incoming>| {
            if let Some(user) = &certificate_user {
                request.extensions_mut().insert(user.clone());
            }
            request.extensions_mut().insert(PeerAddress(peer));
            let router = Arc::clone(&router);
            let busy = activity.begin();
            // Boxed: an HTTP/2 stream's task keeps room for the answering future as long as
            // the stream lives (a watch: for hours), though it is done once the head is sent.
            Box::pin(async move {
                let answered = AssertUnwindSafe(router.handle(request))
                    .catch_unwind()
                    .await;
                let response = answered.unwrap_or_else(|_| {
                    tracing::error!("request handler panicked");
                    failure(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        "InternalError",
                        "an internal error occurred",
                    )
                });
                // The request is in flight until its body is sent (watches for long).
                Ok::<_, Infallible>(response.map(|body| holding(body, busy)))
            })
        }
    });
    let builder = if h2 {
        http.as_ref().clone().http2_only()
    } else {
        http.as_ref().clone().http1_only()
    };
    let connection = builder.serve_connection(TokioIo::new(tls_stream), service);
    tokio::pin!(connection);
    let mut closing = false;
    loop {
        let allowed = if closing {
            CLOSE_GRACE
        } else {
            options.idle_timeout
        };
        let check_at = later(activity.idle_since().unwrap_or_else(Instant::now), allowed);
        tokio::select! {
            ended = connection.as_mut() => {
                if let Err(error) = ended {
                    tracing::debug!(%peer, %error, "connection ended with an error");
                }
                return;
            }
            _ = tokio::time::sleep_until(check_at) => {
                let idle_long_enough = activity
                    .idle_since()
                    .is_some_and(|since| later(since, allowed) <= Instant::now());
                if !idle_long_enough {
                    continue;
                }
                if closing {
                    tracing::debug!(%peer, "dropping a connection that did not close");
                    return;
                }
                tracing::debug!(%peer, "closing an idle connection");
                connection.as_mut().graceful_shutdown();
                closing = true;
                activity.restart_idle_clock();
            }
        }
    }
}

/// `at` plus `by`, or a year after `at` if that is beyond what an instant can hold.
fn later(at: Instant, by: Duration) -> Instant {
    at.checked_add(by)
        .or_else(|| at.checked_add(Duration::from_secs(365 * 24 * 3600)))
        .unwrap_or(at)
}

/// Requests in flight on one connection, and since when it has had none.
struct Activity {
    state: Mutex<(usize, Instant)>,
}

/// One request in flight on a connection, until dropped.
struct Busy(Arc<Activity>);

impl Activity {
    fn new() -> Arc<Activity> {
        Arc::new(Activity {
            state: Mutex::new((0, Instant::now())),
        })
    }

    fn begin(self: &Arc<Self>) -> Busy {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.0 = state.0.saturating_add(1);
        Busy(Arc::clone(self))
    }

    /// Since when no request has been in flight, if none is.
    fn idle_since(&self) -> Option<Instant> {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        (state.0 == 0).then_some(state.1)
    }

    fn restart_idle_clock(&self) {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).1 = Instant::now();
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let mut state = self.0.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.0 = state.0.saturating_sub(1);
        state.1 = Instant::now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_is_idle_only_without_requests_in_flight() {
        let activity = Activity::new();
        let opened = activity.idle_since().unwrap();
        let first = activity.begin();
        let second = activity.begin();
        assert_eq!(activity.idle_since(), None);
        drop(first);
        assert_eq!(activity.idle_since(), None);
        drop(second);
        let idle = activity.idle_since().unwrap();
        assert!(idle >= opened);
        activity.restart_idle_clock();
        assert!(activity.idle_since().unwrap() >= idle);
        // A response body holding the request keeps the connection busy until it is dropped.
        let body = holding(crate::status::full("x"), activity.begin());
        assert_eq!(activity.idle_since(), None);
        drop(body);
        assert!(activity.idle_since().is_some());
    }
}
