//! [`EtcdStorage`]: the [`Storage`] trait on etcd's KV service.
//!
//! Storage revisions are etcd revisions, unchanged (a fresh etcd is at revision 1). Reads at
//! revision 0 read the current revision; reads at a given revision report that revision, as the
//! trait asks, although etcd's header names its current one. This module owns that translation
//! and the filling-in of revision errors; it must not know connections (see `client`) or how a
//! watch stream resumes (see `watch`).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use kcp_storage::{
    GetResponse, OpResult, RangeRequest, RangeResponse, Result, Revision, Storage, StorageError,
    Txn, TxnResponse, WatchRequest, WatchStream,
};
use tokio::time::Instant;
use tonic::Status;

use crate::client::Client;
use crate::config::EtcdConfig;
use crate::convert::{Keys, from_wire, header_revision, to_wire};
use crate::error::{Failure, classify};
use crate::proto;

/// How long to wait for etcd to report its compacted revision after a revision error.
const COMPACTED_PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// Pause between connection attempts in [`EtcdStorage::connect`].
const CONNECT_RETRY: Duration = Duration::from_millis(100);

/// A [`Storage`] on an etcd v3 cluster. Cloning shares the connections.
#[derive(Clone)]
pub struct EtcdStorage {
    pub(crate) shared: Arc<Shared>,
}

/// What the storage and its watch streams share.
pub(crate) struct Shared {
    pub(crate) client: Client,
    pub(crate) keys: Keys,
}

impl EtcdStorage {
    /// Connects to the cluster and waits until a member answers a read, for at most
    /// `config.connect_timeout`. Fails with [`StorageError::Unavailable`] if none does and with
    /// [`StorageError::InvalidRequest`] for a configuration that cannot work.
    pub async fn connect(config: EtcdConfig) -> Result<EtcdStorage> {
        config.validate()?;
        let storage = EtcdStorage {
            shared: Arc::new(Shared {
                client: Client::new(&config)?,
                keys: Keys::new(config.key_prefix.clone()),
            }),
        };
        let deadline = Instant::now() + config.connect_timeout;
        let unavailable = |cause: String| {
            StorageError::Unavailable(format!(
                "no etcd endpoint of {:?} answered within {:?}: {cause}",
                config.endpoints, config.connect_timeout
            ))
        };
        let mut last_cause = "timed out".to_string();
        loop {
            match tokio::time::timeout_at(deadline, storage.shared.current_revision()).await {
                Ok(Ok(_)) => return Ok(storage),
                Ok(Err(StorageError::Unavailable(cause))) => {
                    if Instant::now() + CONNECT_RETRY >= deadline {
                        return Err(unavailable(cause));
                    }
                    last_cause = cause;
                    tokio::time::sleep(CONNECT_RETRY).await;
                }
                Ok(Err(other)) => return Err(other),
                Err(_) => return Err(unavailable(last_cause)),
            }
        }
    }
}

impl Shared {
    /// etcd's current revision: the header revision of a linearizable read.
    pub(crate) async fn current_revision(&self) -> Result<Revision> {
        let response = self
            .client
            .range(current_revision_request(0))
            .await
            .map_err(|s| crate::error::to_storage_error(&s))?;
        Ok(header_revision(response.header.as_ref()))
    }

    /// Fails with [`StorageError::Compacted`] if history at `revision` is gone. A future revision
    /// passes: a watch from there simply waits.
    pub(crate) async fn check_not_compacted(&self, revision: Revision) -> Result<()> {
        match self.client.range(current_revision_request(revision)).await {
            Ok(_) => Ok(()),
            Err(status) => match classify(&status) {
                Failure::FutureRevision => Ok(()),
                _ => Err(self.revision_error(status, revision).await),
            },
        }
    }

    /// The storage error for a failed call that asked for `requested`, with the compacted or
    /// current revision looked up for revision errors.
    pub(crate) async fn revision_error(&self, status: Status, requested: Revision) -> StorageError {
        match classify(&status) {
            Failure::Compacted => StorageError::Compacted {
                requested,
                compacted: self.compacted_revision().await,
            },
            Failure::FutureRevision => StorageError::FutureRevision {
                requested,
                // 0 if the follow-up read fails too.
                current: self.current_revision().await.unwrap_or(0),
            },
            Failure::Other(error) => error,
        }
    }

    /// etcd's compacted revision, or 0 if it cannot be learned in time.
    ///
    /// etcd has no call that reports it (in 3.4), but cancels a watch that starts before it and
    /// names it in `compact_revision`. So this opens a watch from revision 1, which is canceled
    /// whenever the compacted revision is 2 or more. It is only called after etcd reported a
    /// revision as compacted: for reads and watches that revision is at least 1 and below the
    /// compacted one, so the probe answers; only a `compact` that fails because etcd was
    /// compacted at exactly revision 1 gets 0.
    pub(crate) async fn compacted_revision(&self) -> Revision {
        let probe = async {
            let create = proto::WatchCreateRequest {
                key: vec![0],
                start_revision: 1,
                ..Default::default()
            };
            let mut watch = self.client.watch(create).await.ok()?;
            loop {
                let response = watch.responses.message().await.ok()??;
                if response.compact_revision > 0 {
                    return Some(from_wire(response.compact_revision));
                }
                if response.canceled {
                    return None;
                }
            }
        };
        tokio::time::timeout(COMPACTED_PROBE_TIMEOUT, probe)
            .await
            .ok()
            .flatten()
            .unwrap_or(0)
    }

    async fn range_at(&self, request: proto::RangeRequest) -> Result<proto::RangeResponse> {
        let requested = from_wire(request.revision);
        match self.client.range(request).await {
            Ok(response) => Ok(response),
            Err(status) => Err(self.revision_error(status, requested).await),
        }
    }
}

/// A cheap read that only reports the header: the count of the single key `[0]` at `revision`.
fn current_revision_request(revision: Revision) -> proto::RangeRequest {
    proto::RangeRequest {
        key: vec![0],
        revision: to_wire(revision),
        count_only: true,
        ..Default::default()
    }
}

/// The revision a read was served at: the requested one, or etcd's current one for 0.
fn served_at(requested: Revision, response: &proto::RangeResponse) -> Revision {
    match requested {
        0 => header_revision(response.header.as_ref()),
        revision => revision,
    }
}

#[async_trait]
impl Storage for EtcdStorage {
    async fn get(&self, key: &[u8], revision: Revision) -> Result<GetResponse> {
        let shared = &self.shared;
        let response = shared
            .range_at(proto::RangeRequest {
                key: shared.keys.key(key),
                revision: to_wire(revision),
                ..Default::default()
            })
            .await?;
        Ok(GetResponse {
            revision: served_at(revision, &response),
            kv: response
                .kvs
                .into_iter()
                .next()
                .map(|kv| shared.keys.key_value(kv)),
        })
    }

    async fn range(&self, request: RangeRequest) -> Result<RangeResponse> {
        let shared = &self.shared;
        let (key, range_end) = shared.keys.range(&request.range);
        let response = shared
            .range_at(proto::RangeRequest {
                key,
                range_end,
                limit: i64::try_from(request.limit).unwrap_or(i64::MAX),
                revision: to_wire(request.revision),
                ..Default::default()
            })
            .await?;
        Ok(RangeResponse {
            revision: served_at(request.revision, &response),
            more: response.more,
            count: from_wire(response.count),
            kvs: response
                .kvs
                .into_iter()
                .map(|kv| shared.keys.key_value(kv))
                .collect(),
        })
    }

    async fn txn(&self, txn: Txn) -> Result<TxnResponse> {
        txn.validate()?;
        let shared = &self.shared;
        let request = proto::TxnRequest {
            compare: txn
                .compares
                .iter()
                .map(|c| shared.keys.compare(c))
                .collect(),
            success: txn.success.iter().map(|op| shared.keys.op(op)).collect(),
            failure: txn.failure.iter().map(|op| shared.keys.op(op)).collect(),
        };
        let response = shared
            .client
            .txn(request)
            .await
            .map_err(|s| crate::error::to_storage_error(&s))?;
        let ops = if response.succeeded {
            &txn.success
        } else {
            &txn.failure
        };
        if response.responses.len() != ops.len() {
            return Err(StorageError::Internal(format!(
                "etcd answered a transaction branch of {} operations with {} results",
                ops.len(),
                response.responses.len()
            )));
        }
        let mut results = Vec::with_capacity(ops.len());
        for (op, result) in ops.iter().zip(response.responses) {
            let result = match (op, result.response) {
                (kcp_storage::Op::Get(_), Some(proto::Response::ResponseRange(r))) => {
                    OpResult::Get(r.kvs.into_iter().next().map(|kv| shared.keys.key_value(kv)))
                }
                (kcp_storage::Op::Put { .. }, Some(proto::Response::ResponsePut(r))) => {
                    OpResult::Put {
                        prev: r.prev_kv.map(|kv| shared.keys.key_value(kv)),
                    }
                }
                (kcp_storage::Op::Delete(_), Some(proto::Response::ResponseDeleteRange(r))) => {
                    OpResult::Delete {
                        prev: r
                            .prev_kvs
                            .into_iter()
                            .next()
                            .map(|kv| shared.keys.key_value(kv)),
                    }
                }
                (op, other) => {
                    return Err(StorageError::Internal(format!(
                        "etcd answered {op:?} in a transaction with {other:?}"
                    )));
                }
            };
            results.push(result);
        }
        Ok(TxnResponse {
            succeeded: response.succeeded,
            revision: header_revision(response.header.as_ref()),
            results,
        })
    }

    async fn watch(&self, request: WatchRequest) -> Result<WatchStream> {
        crate::watch::watch(Arc::clone(&self.shared), request).await
    }

    /// Compacts etcd's whole key space (the key prefix does not limit compaction). The call
    /// returns once etcd has recorded the compaction: reads before `revision` fail from then on,
    /// while the space is reclaimed in the background.
    async fn compact(&self, revision: Revision) -> Result<()> {
        let request = proto::CompactionRequest {
            revision: to_wire(revision),
            physical: false,
        };
        match self.shared.client.compact(request).await {
            Ok(_) => Ok(()),
            Err(status) => Err(self.shared.revision_error(status, revision).await),
        }
    }

    async fn current_revision(&self) -> Result<Revision> {
        self.shared.current_revision().await
    }
}
