//! Admission by requests in flight, and the time a request may take.
//!
//! As kube-apiserver's max-in-flight filter: read-only requests (`get`, `list`) and mutating ones
//! (every other verb) draw from two pools (`--max-requests-inflight` 400,
//! `--max-mutating-requests-inflight` 200); a request that finds its pool full is answered 429
//! with `Retry-After: 1` and kube's message "Too many requests, please try again later.".
//! Long-running requests (watches) are not counted in the pools.
//!
//! Unlike plain max-in-flight, the pools are shared between identities (authenticated users): no
//! one identity may hold more than a quarter of a pool, so one tenant flooding the server still
//! leaves room for everyone else (kube-apiserver gets there with API Priority and Fairness).
//! Watches are bounded per identity instead ([`DEFAULT_MAX_WATCHES_PER_USER`]). Members of
//! `system:masters` are exempt, as kube-apiserver exempts them.
//!
//! Non-long-running requests get [`LimitConfig::request_timeout`] (`--request-timeout`, 60 s) to
//! produce their answer; past it they are cancelled, which frees their slot, and answered 504
//! with kube's `Timeout` Status. For watches the same deadline bounds the time until the response
//! starts (the request body included), not the stream.
//!
//! Owns: the pools, the per-identity shares, the 429 and 504 answers. Must not know how requests
//! are routed or authenticated (the router passes the identity and the verb).

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body::{Body as HttpBody, Frame, SizeHint};
use http_body_util::BodyExt;
use serde_json::json;

use crate::negotiation::Encoding;
use crate::status::{Body, encoded};

/// kube-apiserver's `--max-requests-inflight` default.
pub const DEFAULT_MAX_READONLY: usize = 400;
/// kube-apiserver's `--max-mutating-requests-inflight` default.
pub const DEFAULT_MAX_MUTATING: usize = 200;
/// Open watches one identity may hold.
pub const DEFAULT_MAX_WATCHES_PER_USER: usize = 1000;
/// kube-apiserver's `--request-timeout` default.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// One identity may hold at most this fraction (1/n) of a pool.
const SHARE_DIVISOR: usize = 4;
/// Users in this group are never limited, as in kube-apiserver.
pub const EXEMPT_GROUP: &str = "system:masters";

/// The 429 message of kube-apiserver's max-in-flight filter.
pub const TOO_MANY_REQUESTS: &str = "Too many requests, please try again later.";
/// The 504 message of kube-apiserver's timeout filter.
pub const TIMEOUT: &str = "Timeout: request did not complete within the allotted timeout";

/// How many requests may be in flight, and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitConfig {
    /// Read-only requests in flight (0: no limit).
    pub max_readonly: usize,
    /// Mutating requests in flight (0: no limit).
    pub max_mutating: usize,
    /// Open watches per identity (0: no limit).
    pub max_watches_per_user: usize,
    /// Time a non-long-running request may take (zero: no limit).
    pub request_timeout: Duration,
}

impl Default for LimitConfig {
    fn default() -> Self {
        LimitConfig {
            max_readonly: DEFAULT_MAX_READONLY,
            max_mutating: DEFAULT_MAX_MUTATING,
            max_watches_per_user: DEFAULT_MAX_WATCHES_PER_USER,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
        }
    }
}

/// Which pool a request draws from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    ReadOnly,
    Mutating,
    /// Long-running: bounded per identity, not in the pools.
    Watch,
}

impl Class {
    /// The class of a request by its verb (for non-resource requests, the lowercased method).
    pub fn of(verb: &str) -> Class {
        match verb {
            "watch" => Class::Watch,
            "get" | "list" => Class::ReadOnly,
            _ => Class::Mutating,
        }
    }

    fn index(self) -> usize {
        match self {
            Class::ReadOnly => 0,
            Class::Mutating => 1,
            Class::Watch => 2,
        }
    }
}

/// Why a request was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejected {
    /// Its pool is full.
    PoolFull,
    /// Its identity holds its whole share already.
    ShareUsed,
}

#[derive(Debug, Default)]
struct Pool {
    total: usize,
    by_identity: HashMap<String, usize>,
}

/// The in-flight pools of one server.
#[derive(Debug)]
pub struct Limits {
    config: LimitConfig,
    pools: Mutex<[Pool; 3]>,
}

/// A place in a pool, given back when dropped.
#[derive(Debug)]
pub struct Permit {
    limits: Arc<Limits>,
    class: Class,
    identity: String,
}

impl Limits {
    pub fn new(config: LimitConfig) -> Arc<Limits> {
        Arc::new(Limits {
            config,
            pools: Mutex::new(Default::default()),
        })
    }

    pub fn config(&self) -> &LimitConfig {
        &self.config
    }

    /// The pool size and the most one identity may hold (`None`: no limit).
    fn caps(&self, class: Class) -> (Option<usize>, Option<usize>) {
        let pool = |size: usize| {
            (size > 0).then_some(size).map(|size| {
                let share = (size / SHARE_DIVISOR).max(1);
                (size, share)
            })
        };
        match class {
            Class::ReadOnly => pool(self.config.max_readonly).unzip(),
            Class::Mutating => pool(self.config.max_mutating).unzip(),
            Class::Watch => (
                None,
                (self.config.max_watches_per_user > 0).then_some(self.config.max_watches_per_user),
            ),
        }
    }

    /// Takes a place for `identity` in the pool of `class`, if there is one.
    pub fn admit(self: &Arc<Self>, class: Class, identity: &str) -> Result<Permit, Rejected> {
        let (pool_cap, share_cap) = self.caps(class);
        let mut pools = self.pools.lock().unwrap_or_else(PoisonError::into_inner);
        let pool = &mut pools[class.index()];
        if pool_cap.is_some_and(|cap| pool.total >= cap) {
            return Err(Rejected::PoolFull);
        }
        let held = pool.by_identity.get(identity).copied().unwrap_or(0);
        if share_cap.is_some_and(|cap| held >= cap) {
            return Err(Rejected::ShareUsed);
        }
        pool.total = pool.total.saturating_add(1);
        pool.by_identity
            .insert(identity.to_string(), held.saturating_add(1));
        Ok(Permit {
            limits: Arc::clone(self),
            class,
            identity: identity.to_string(),
        })
    }

    /// Requests of `class` in flight.
    pub fn in_flight(&self, class: Class) -> usize {
        self.pools.lock().unwrap_or_else(PoisonError::into_inner)[class.index()].total
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        let mut pools = self
            .limits
            .pools
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let pool = &mut pools[self.class.index()];
        pool.total = pool.total.saturating_sub(1);
        if let Some(held) = pool.by_identity.get_mut(&self.identity) {
            *held = held.saturating_sub(1);
            if *held == 0 {
                pool.by_identity.remove(&self.identity);
            }
        }
    }
}

/// Whether a user with `groups` is exempt from the limits.
pub fn exempt(groups: &[String]) -> bool {
    groups.iter().any(|group| group == EXEMPT_GROUP)
}

/// kube-apiserver's 429 for a request that was not admitted, as a `Status`.
pub fn too_many_requests(encoding: Encoding) -> Response<Body> {
    let mut response = encoded(
        encoding,
        StatusCode::TOO_MANY_REQUESTS,
        &json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": TOO_MANY_REQUESTS,
            "reason": "TooManyRequests",
            "details": {"retryAfterSeconds": 1},
            "code": 429,
        }),
    );
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

/// kube-apiserver's 504 for a request that ran out of time.
pub fn timed_out(encoding: Encoding) -> Response<Body> {
    encoded(
        encoding,
        StatusCode::GATEWAY_TIMEOUT,
        &json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": TIMEOUT,
            "reason": "Timeout",
            "details": {},
            "code": 504,
        }),
    )
}

/// `body`, keeping `held` alive until the body is dropped (sent or abandoned).
pub(crate) fn holding<T: Send + 'static>(body: Body, held: T) -> Body {
    Holding { body, _held: held }.boxed_unsync()
}

struct Holding<T> {
    body: Body,
    _held: T,
}

impl<T: Send + 'static> HttpBody for Holding<T> {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        // `Body` is boxed and `held` is never polled, so nothing here needs to stay pinned.
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl<T> Unpin for Holding<T> {}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(readonly: usize, mutating: usize, watches: usize) -> Arc<Limits> {
        Limits::new(LimitConfig {
            max_readonly: readonly,
            max_mutating: mutating,
            max_watches_per_user: watches,
            request_timeout: Duration::from_secs(1),
        })
    }

    #[test]
    fn verbs_pick_the_pool_as_kube_apiserver() {
        assert_eq!(Class::of("get"), Class::ReadOnly);
        assert_eq!(Class::of("list"), Class::ReadOnly);
        assert_eq!(Class::of("watch"), Class::Watch);
        for verb in [
            "create",
            "update",
            "patch",
            "delete",
            "deletecollection",
            "post",
            "head",
        ] {
            assert_eq!(Class::of(verb), Class::Mutating, "{verb}");
        }
    }

    #[test]
    fn one_identity_gets_at_most_a_quarter_of_a_pool() {
        let limits = limits(8, 4, 0);
        let first: Vec<_> = (0..2)
            .map(|_| limits.admit(Class::ReadOnly, "flooder").unwrap())
            .collect();
        assert_eq!(
            limits.admit(Class::ReadOnly, "flooder").unwrap_err(),
            Rejected::ShareUsed
        );
        // Others still get in, and the mutating pool is separate.
        let others: Vec<_> = ["a", "a", "b", "b", "c", "c"]
            .iter()
            .map(|who| limits.admit(Class::ReadOnly, who).unwrap())
            .collect();
        assert_eq!(
            limits.admit(Class::ReadOnly, "d").unwrap_err(),
            Rejected::PoolFull
        );
        let write = limits.admit(Class::Mutating, "flooder").unwrap();
        assert_eq!(
            limits.admit(Class::Mutating, "flooder").unwrap_err(),
            Rejected::ShareUsed
        );
        assert_eq!(limits.in_flight(Class::ReadOnly), 8);
        drop(first);
        drop(others);
        drop(write);
        assert_eq!(limits.in_flight(Class::ReadOnly), 0);
        assert_eq!(limits.in_flight(Class::Mutating), 0);
        // Places come back, and identities that hold nothing are forgotten.
        assert!(limits.pools.lock().unwrap()[0].by_identity.is_empty());
        let _again = limits.admit(Class::ReadOnly, "flooder").unwrap();
    }

    #[test]
    fn tiny_pools_still_admit_one_per_identity() {
        let limits = limits(1, 1, 0);
        let held = limits.admit(Class::Mutating, "a").unwrap();
        assert_eq!(
            limits.admit(Class::Mutating, "b").unwrap_err(),
            Rejected::PoolFull
        );
        drop(held);
        assert!(limits.admit(Class::Mutating, "b").is_ok());
    }

    #[test]
    fn zero_means_no_limit() {
        let limits = limits(0, 0, 0);
        let held: Vec<_> = (0..1000)
            .flat_map(|_| {
                [
                    limits.admit(Class::ReadOnly, "a").unwrap(),
                    limits.admit(Class::Mutating, "a").unwrap(),
                    limits.admit(Class::Watch, "a").unwrap(),
                ]
            })
            .collect();
        assert_eq!(held.len(), 3000);
    }

    #[test]
    fn watches_are_bounded_per_identity_only() {
        let limits = limits(1, 1, 3);
        let watches: Vec<_> = (0..3)
            .map(|_| limits.admit(Class::Watch, "w").unwrap())
            .collect();
        assert_eq!(
            limits.admit(Class::Watch, "w").unwrap_err(),
            Rejected::ShareUsed
        );
        assert!(limits.admit(Class::Watch, "other").is_ok());
        // Watches take nothing from the read-only pool.
        assert!(limits.admit(Class::ReadOnly, "w").is_ok());
        drop(watches);
        assert!(limits.admit(Class::Watch, "w").is_ok());
    }

    #[test]
    fn system_masters_are_exempt() {
        assert!(exempt(&["a".into(), "system:masters".into()]));
        assert!(!exempt(&["system:authenticated".into()]));
        assert!(!exempt(&[]));
    }

    #[tokio::test]
    async fn the_answers_are_kube_apiservers() {
        let response = too_many_requests(Encoding::Json);
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(response.headers()[header::RETRY_AFTER], "1");
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let status: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(status["message"], TOO_MANY_REQUESTS);
        assert_eq!(status["reason"], "TooManyRequests");
        assert_eq!(status["details"]["retryAfterSeconds"], 1);

        let response = timed_out(Encoding::Json);
        assert_eq!(response.status(), StatusCode::GATEWAY_TIMEOUT);
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let status: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            status["message"],
            "Timeout: request did not complete within the allotted timeout"
        );
        assert_eq!(status["reason"], "Timeout");
        assert_eq!(status["code"], 504);
    }

    #[tokio::test]
    async fn a_held_value_lives_as_long_as_the_body() {
        let limits = limits(0, 0, 5);
        let permit = limits.admit(Class::Watch, "w").unwrap();
        let body = holding(crate::status::full("data"), permit);
        assert_eq!(limits.pools.lock().unwrap()[2].total, 1);
        let bytes = body.collect().await.unwrap().to_bytes();
        assert_eq!(bytes, "data");
        assert_eq!(limits.pools.lock().unwrap()[2].total, 0);
    }
}
