//! gRPC connections to the etcd members and the raw KV and Watch calls over them.
//!
//! Every member gets two lazily connected HTTP/2 connections: one for unary KV calls and one for
//! watch streams, so a watcher that stops reading (and so holds its flow-control window) can
//! never stall reads and writes. Calls go to a preferred member; when it cannot be reached the
//! next one is tried and becomes preferred. A call that may already have reached a member
//! (anything but a failure to connect) is only repeated elsewhere if it is idempotent.
//!
//! This module owns transport, failover and timeouts. It must not know the `kcp_storage` types,
//! key prefixes or what the calls mean; errors leave it as gRPC statuses.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use kcp_storage::StorageError;
use tonic::client::Grpc;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};
use tonic::{Status, Streaming};
use tonic_prost::ProstCodec;

use crate::config::EtcdConfig;
use crate::error::{describe, is_unavailable, never_sent};
use crate::proto;

/// Longest TCP (and TLS) connect attempt to one member.
const MAX_CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// HTTP/2 pings keep idle-looking watch connections alive and detect dead peers. etcd's default
/// keepalive policy rejects pings more often than every 5 seconds.
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);
const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(10);
/// Flow-control windows: large enough for 1.5 MiB values with their previous values in one watch
/// response to stream without many round trips.
const STREAM_WINDOW: u32 = 8 * 1024 * 1024;
const CONNECTION_WINDOW: u32 = 32 * 1024 * 1024;

/// The connections to the members of one etcd cluster.
pub(crate) struct Client {
    members: Vec<Member>,
    preferred: AtomicUsize,
    request_timeout: Duration,
}

struct Member {
    url: String,
    kv: Channel,
    watch: Channel,
}

/// An open watch stream carrying exactly one created watch.
pub(crate) struct WatchConnection {
    /// Kept so the request side of the stream stays open for as long as the watch is read.
    _requests: futures::channel::mpsc::Sender<proto::WatchRequest>,
    pub(crate) responses: Streaming<proto::WatchResponse>,
    /// URL of the member serving the watch, for logs.
    pub(crate) member: String,
}

impl Client {
    /// Builds the (not yet connected) channels for every endpoint of `config`.
    pub(crate) fn new(config: &EtcdConfig) -> Result<Self, StorageError> {
        let tls = match &config.tls {
            None => None,
            Some(tls) => {
                let mut tls_config =
                    ClientTlsConfig::new().ca_certificate(Certificate::from_pem(&tls.ca_pem));
                if let (Some(cert), Some(key)) = (&tls.client_cert_pem, &tls.client_key_pem) {
                    tls_config = tls_config.identity(Identity::from_pem(cert, key));
                }
                Some(tls_config)
            }
        };
        let connect_timeout = config.connect_timeout.min(MAX_CONNECT_TIMEOUT);
        let mut members = Vec::with_capacity(config.endpoints.len());
        for url in &config.endpoints {
            let mut endpoint = Endpoint::from_shared(url.clone())
                .map_err(|e| {
                    StorageError::InvalidRequest(format!("invalid etcd endpoint {url}: {e}"))
                })?
                .connect_timeout(connect_timeout)
                .tcp_nodelay(true)
                .http2_keep_alive_interval(KEEPALIVE_INTERVAL)
                .keep_alive_timeout(KEEPALIVE_TIMEOUT)
                .keep_alive_while_idle(false)
                .initial_stream_window_size(STREAM_WINDOW)
                .initial_connection_window_size(CONNECTION_WINDOW);
            if let Some(tls) = &tls {
                endpoint = endpoint.tls_config(tls.clone()).map_err(|e| {
                    StorageError::InvalidRequest(format!("invalid TLS setup for {url}: {e}"))
                })?;
            }
            members.push(Member {
                url: url.clone(),
                kv: endpoint.connect_lazy(),
                watch: endpoint.connect_lazy(),
            });
        }
        Ok(Client {
            members,
            preferred: AtomicUsize::new(0),
            request_timeout: config.request_timeout,
        })
    }

    pub(crate) async fn range(
        &self,
        request: proto::RangeRequest,
    ) -> Result<proto::RangeResponse, Status> {
        self.unary(proto::paths::RANGE, request, true).await
    }

    pub(crate) async fn txn(
        &self,
        request: proto::TxnRequest,
    ) -> Result<proto::TxnResponse, Status> {
        self.unary(proto::paths::TXN, request, false).await
    }

    pub(crate) async fn compact(
        &self,
        request: proto::CompactionRequest,
    ) -> Result<proto::CompactionResponse, Status> {
        self.unary(proto::paths::COMPACT, request, false).await
    }

    /// Opens a watch stream, sends `create` and waits for etcd to confirm the watch. Members are
    /// tried in turn, starting with the preferred one.
    pub(crate) async fn watch(
        &self,
        create: proto::WatchCreateRequest,
    ) -> Result<WatchConnection, Status> {
        let mut last_error = None;
        for index in self.member_order() {
            let member = &self.members[index];
            let attempt = open_watch(member.watch.clone(), create.clone());
            let result = match tokio::time::timeout(self.request_timeout, attempt).await {
                Ok(result) => result,
                Err(_) => Err(Status::deadline_exceeded(format!(
                    "etcd member {} did not confirm a watch within {:?}",
                    member.url, self.request_timeout
                ))),
            };
            match result {
                Ok((requests, responses)) => {
                    self.prefer(index);
                    return Ok(WatchConnection {
                        _requests: requests,
                        responses,
                        member: member.url.clone(),
                    });
                }
                Err(status) if is_unavailable(&status) => {
                    tracing::debug!(member = %member.url, error = %describe(&status), "watch failed on etcd member");
                    last_error = Some(status);
                }
                Err(status) => return Err(status),
            }
        }
        Err(last_error.unwrap_or_else(|| Status::unavailable("no etcd endpoints")))
    }

    /// Sends one unary call, moving on to the next member when the current one cannot be reached
    /// (or, for idempotent calls, is unavailable in any way).
    async fn unary<Req, Resp>(
        &self,
        path: &'static str,
        request: Req,
        idempotent: bool,
    ) -> Result<Resp, Status>
    where
        Req: prost::Message + Clone + Send + Sync + 'static,
        Resp: prost::Message + Default + Send + Sync + 'static,
    {
        let mut last_error = None;
        for index in self.member_order() {
            let member = &self.members[index];
            let call = unary_call::<Req, Resp>(member.kv.clone(), path, request.clone());
            let result = match tokio::time::timeout(self.request_timeout, call).await {
                Ok(result) => result,
                // Not retried: the request may have been applied.
                Err(_) => {
                    return Err(Status::deadline_exceeded(format!(
                        "etcd member {} did not answer {path} within {:?}",
                        member.url, self.request_timeout
                    )));
                }
            };
            match result {
                Ok(response) => {
                    self.prefer(index);
                    return Ok(response);
                }
                Err(status) if never_sent(&status) || (idempotent && is_unavailable(&status)) => {
                    tracing::debug!(member = %member.url, error = %describe(&status), "{path} failed on etcd member");
                    last_error = Some(status);
                }
                Err(status) => return Err(status),
            }
        }
        Err(last_error.unwrap_or_else(|| Status::unavailable("no etcd endpoints")))
    }

    /// Member indexes starting with the preferred one.
    fn member_order(&self) -> impl Iterator<Item = usize> + use<> {
        let count = self.members.len();
        let first = self.preferred.load(Ordering::Relaxed);
        (0..count).map(move |offset| (first + offset) % count)
    }

    fn prefer(&self, index: usize) {
        self.preferred.store(index, Ordering::Relaxed);
    }
}

fn grpc(channel: Channel) -> Grpc<Channel> {
    // etcd sends up to 2 GiB per message; values are capped by its --max-request-bytes.
    Grpc::new(channel)
        .max_decoding_message_size(usize::MAX)
        .max_encoding_message_size(usize::MAX)
}

async fn unary_call<Req, Resp>(
    channel: Channel,
    path: &'static str,
    request: Req,
) -> Result<Resp, Status>
where
    Req: prost::Message + Send + Sync + 'static,
    Resp: prost::Message + Default + Send + Sync + 'static,
{
    let mut grpc = grpc(channel);
    grpc.ready()
        .await
        .map_err(|e| Status::from_error(Box::new(e)))?;
    let codec = ProstCodec::<Req, Resp>::default();
    let response = grpc
        .unary(
            tonic::Request::new(request),
            PathAndQuery::from_static(path),
            codec,
        )
        .await?;
    Ok(response.into_inner())
}

type OpenWatch = (
    futures::channel::mpsc::Sender<proto::WatchRequest>,
    Streaming<proto::WatchResponse>,
);

async fn open_watch(
    channel: Channel,
    create: proto::WatchCreateRequest,
) -> Result<OpenWatch, Status> {
    let (mut requests, outbound) = futures::channel::mpsc::channel(1);
    requests
        .try_send(proto::WatchRequest {
            request_union: Some(proto::RequestUnion::CreateRequest(create)),
        })
        .map_err(|e| Status::internal(format!("cannot queue watch create request: {e}")))?;
    let mut grpc = grpc(channel);
    grpc.ready()
        .await
        .map_err(|e| Status::from_error(Box::new(e)))?;
    let codec = ProstCodec::<proto::WatchRequest, proto::WatchResponse>::default();
    let mut responses = grpc
        .streaming(
            tonic::Request::new(outbound),
            PathAndQuery::from_static(proto::paths::WATCH),
            codec,
        )
        .await?
        .into_inner();
    loop {
        match responses.message().await? {
            Some(response) if response.created => {
                if response.canceled {
                    return Err(Status::invalid_argument(format!(
                        "etcd refused the watch: {}",
                        response.cancel_reason
                    )));
                }
                return Ok((requests, responses));
            }
            // Nothing else can come before the confirmation of the only watch on the stream.
            Some(_) => continue,
            None => {
                return Err(Status::unavailable(
                    "etcd closed the watch stream before confirming the watch",
                ));
            }
        }
    }
}
