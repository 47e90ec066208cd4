//! Closed-loop load: `concurrency` workers, each on its own kept-alive connection, send one
//! request after another until the time is up. Connections are opened before the clock starts,
//! so TLS handshakes are not measured.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::Full;

use super::client::{Connection, Protocol, Target};
use crate::measure::{Measured, collect, new_histogram};

/// Makes the `n`th request of worker `worker` for `connection`.
pub type MakeRequest = Arc<dyn Fn(&Connection, usize, u64) -> Request<Full<Bytes>> + Send + Sync>;

/// GETs of `path` as JSON with the bearer `authorization`, the same request every time.
pub fn gets(path: String, authorization: Arc<String>) -> MakeRequest {
    Arc::new(move |connection, _, _| {
        connection
            .authorized(http::Method::GET, &path, authorization.as_str())
            .header(http::header::ACCEPT, "application/json")
            .body(Full::new(Bytes::new()))
            .expect("a valid request")
    })
}

/// Runs the load against `target` and requires `expected` for every answer.
pub async fn drive(
    target: &Target,
    protocol: Protocol,
    concurrency: usize,
    duration: Duration,
    expected: StatusCode,
    make: MakeRequest,
) -> anyhow::Result<Measured> {
    let mut connections = Vec::with_capacity(concurrency);
    for _ in 0..concurrency {
        connections.push(target.connect(protocol).await?);
    }
    let start = Instant::now();
    let deadline = start + duration;
    let tasks = connections
        .into_iter()
        .enumerate()
        .map(|(worker, mut connection)| {
            let make = Arc::clone(&make);
            tokio::spawn(async move {
                let mut latency = new_histogram();
                let mut n = 0u64;
                while Instant::now() < deadline {
                    let request = make(&connection, worker, n);
                    let began = Instant::now();
                    connection.expect(request, expected).await?;
                    latency.saturating_record(began.elapsed().as_micros() as u64);
                    n += 1;
                }
                anyhow::Ok((n, latency))
            })
        })
        .collect();
    collect(tasks, start).await
}
