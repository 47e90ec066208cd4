//! Leader election on a coordination.k8s.io Lease, as client-go's leaderelection does it: the
//! holder renews the lease every third of its duration and stops leading when it could not for
//! two thirds of it (client-go's renew deadline); another replica takes it once it has seen the
//! lease unchanged for its whole duration, by its own clock.

use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

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
    /// The lease record last seen (holder and renew time) and when, on this replica's clock:
    /// expiry is judged by how long the record has not changed here, never by comparing the
    /// holder's clock with ours.
    observed: Mutex<Option<Observed>>,
}

/// A lease record as last seen: its holder, its renew time, and when it was first seen so.
struct Observed {
    holder: Option<String>,
    renewed: Option<MicroTime>,
    since: Instant,
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
            observed: Mutex::new(None),
        }
    }

    /// A lease not renewed for `duration` may be taken (default 15 s). The holder renews every
    /// third of it, and stops leading once it has not renewed for two thirds of it.
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
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        let ours = holder.as_deref() == Some(self.identity.as_str());
        let held_for = spec
            .lease_duration_seconds
            .map_or(self.duration, |s| Duration::from_secs(s.max(0) as u64));
        let unchanged_for = self.unchanged_for(holder.clone(), spec.renew_time.clone());
        if !ours && holder.is_some() && unchanged_for < held_for {
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

    /// How long, on this replica's clock, the lease has shown this holder and renew time.
    fn unchanged_for(&self, holder: Option<String>, renewed: Option<MicroTime>) -> Duration {
        let mut observed = self.observed.lock().unwrap_or_else(|e| e.into_inner());
        match observed.as_ref() {
            Some(seen) if seen.holder == holder && seen.renewed == renewed => seen.since.elapsed(),
            _ => {
                *observed = Some(Observed {
                    holder,
                    renewed,
                    since: Instant::now(),
                });
                Duration::ZERO
            }
        }
    }

    /// Waits until this replica holds the lease, then runs `work` while renewing it; answers
    /// `Some` with what `work` answered, or `None` when the lease was lost first: another
    /// replica took it, or no renewal succeeded for two thirds of its duration (the work is
    /// then dropped, as client-go's `OnStoppedLeading` stops a controller).
    pub async fn run<F: Future>(&self, work: F) -> Option<F::Output> {
        let retry = self.duration / 3;
        loop {
            match tokio::time::timeout(retry, self.try_acquire_or_renew()).await {
                Ok(Ok(true)) => break,
                Ok(Ok(false)) => {}
                Ok(Err(error)) => tracing::info!(%error, lease = %self.name, "acquiring the lease"),
                Err(_) => tracing::info!(lease = %self.name, "acquiring the lease timed out"),
            }
            tokio::time::sleep(retry).await;
        }
        tracing::info!(lease = %self.name, identity = %self.identity, "leading");
        let renewing = async {
            let deadline = self.duration * 2 / 3;
            let mut renewed = Instant::now();
            loop {
                tokio::time::sleep(retry).await;
                match tokio::time::timeout(retry, self.try_acquire_or_renew()).await {
                    Ok(Ok(true)) => renewed = Instant::now(),
                    Ok(Ok(false)) => return,
                    Ok(Err(error)) => tracing::info!(%error, lease = %self.name, "renewing"),
                    Err(_) => tracing::info!(lease = %self.name, "renewing timed out"),
                }
                if renewed.elapsed() >= deadline {
                    return;
                }
            }
        };
        // The work goes on while a renewal is under way.
        tokio::select! {
            output = work => Some(output),
            () = renewing => None,
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
