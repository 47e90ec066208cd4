//! Leader election on a coordination.k8s.io Lease, as client-go's leaderelection does it: the
//! holder renews the lease every third of its duration; another replica takes it once it has
//! not been renewed for its whole duration.

use std::future::Future;
use std::pin::pin;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};

/// Elects one holder of the Lease `name` in a namespace of one logical cluster.
pub struct LeaderElector {
    api: Api<Lease>,
    name: String,
    identity: String,
    duration: Duration,
}

impl LeaderElector {
    /// The replica `identity` (unique per replica) competing for the Lease `name` of
    /// `namespace`, through `client` (a logical cluster's, see [`crate::ClusterConfig::client`]).
    pub fn new(client: kube::Client, namespace: &str, name: &str, identity: &str) -> Self {
        LeaderElector {
            api: Api::namespaced(client, namespace),
            name: name.to_string(),
            identity: identity.to_string(),
            duration: Duration::from_secs(15),
        }
    }

    /// A lease not renewed for `duration` may be taken (default 15 s).
    pub fn with_lease_duration(mut self, duration: Duration) -> Self {
        self.duration = duration;
        self
    }

    /// Takes the lease if it is free, expired or ours, and renews it; answers whether this
    /// replica holds it now. A lost race (409) is no error: someone else holds it.
    pub async fn try_acquire_or_renew(&self) -> Result<bool, kube::Error> {
        let now = Timestamp::now();
        let seconds = i32::try_from(self.duration.as_secs())
            .unwrap_or(i32::MAX)
            .max(1);
        let current = self.api.get_opt(&self.name).await?;
        let Some(mut lease) = current else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.name.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.identity.clone()),
                    lease_duration_seconds: Some(seconds),
                    acquire_time: Some(MicroTime(now)),
                    renew_time: Some(MicroTime(now)),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            return conflict_is_false(self.api.create(&PostParams::default(), &lease).await);
        };
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        let ours = spec.holder_identity.as_deref() == Some(self.identity.as_str());
        let renewed = spec.renew_time.as_ref().map(|t| t.0);
        let held_for = spec
            .lease_duration_seconds
            .map_or(self.duration, |s| Duration::from_secs(s.max(0) as u64));
        let expired =
            renewed.is_none_or(|at| now.duration_since(at).unsigned_abs() >= held_for && now > at);
        if !ours && !expired {
            return Ok(false);
        }
        if !ours {
            spec.holder_identity = Some(self.identity.clone());
            spec.acquire_time = Some(MicroTime(now));
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
        spec.lease_duration_seconds = Some(seconds);
        spec.renew_time = Some(MicroTime(now));
        // The update carries the resourceVersion read: a replica that raced us gets a 409.
        conflict_is_false(
            self.api
                .replace(&self.name, &PostParams::default(), &lease)
                .await,
        )
    }

    /// Waits until this replica holds the lease, then runs `work` while renewing it; answers
    /// `Some` with what `work` answered, or `None` when the lease was lost first (the work is
    /// then dropped, as client-go's `OnStoppedLeading` stops a controller).
    pub async fn run<F: Future>(&self, work: F) -> Option<F::Output> {
        let retry = self.duration / 3;
        loop {
            match self.try_acquire_or_renew().await {
                Ok(true) => break,
                Ok(false) => {}
                Err(error) => tracing::info!(%error, lease = %self.name, "acquiring the lease"),
            }
            tokio::time::sleep(retry).await;
        }
        tracing::info!(lease = %self.name, identity = %self.identity, "leading");
        let mut work = pin!(work);
        let mut last_renewed = tokio::time::Instant::now();
        loop {
            tokio::select! {
                output = &mut work => return Some(output),
                _ = tokio::time::sleep(retry) => {
                    match self.try_acquire_or_renew().await {
                        Ok(true) => last_renewed = tokio::time::Instant::now(),
                        Ok(false) => return None,
                        Err(error) => {
                            tracing::info!(%error, lease = %self.name, "renewing the lease");
                            if last_renewed.elapsed() >= self.duration {
                                return None;
                            }
                        }
                    }
                }
            }
        }
    }
}

fn conflict_is_false<T>(result: Result<T, kube::Error>) -> Result<bool, kube::Error> {
    match result {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
        Err(error) => Err(error),
    }
}
