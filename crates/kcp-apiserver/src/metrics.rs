//! `/metrics` in the Prometheus text format, with kube-apiserver's metric names:
//! `apiserver_request_total{verb,group,resource,code}`,
//! `apiserver_request_duration_seconds{verb,group,resource}` and
//! `apiserver_storage_objects{resource}` (counted when scraped, across all logical clusters).
//!
//! One registry per server (no global), so several servers in one process stay apart.
//!
//! Every label comes from a bounded set, so no client can grow the metrics (kube-apiserver's
//! CVE-2020-8552): the verb is one of kube's known verbs or `other`; group and resource are
//! whatever the caller resolved to a served resource (the router passes empty ones for
//! unauthenticated requests and for resources nothing serves); the code is the answer's.

use std::time::Duration;

use kcp_apis::builtin::RESOURCES;
use kcp_registry::Registry;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

/// The verbs kube-apiserver reports in its request metrics; any other is `other`.
const KNOWN_VERBS: &[&str] = &[
    "APPLY",
    "CONNECT",
    "CREATE",
    "DELETE",
    "DELETECOLLECTION",
    "GET",
    "LIST",
    "PATCH",
    "POST",
    "PROXY",
    "PUT",
    "UPDATE",
    "WATCH",
    "WATCHLIST",
];

/// The metrics label of `verb`: upper case if kube-apiserver knows it, else `other`.
pub fn verb_label(verb: &str) -> &'static str {
    KNOWN_VERBS
        .iter()
        .find(|known| known.eq_ignore_ascii_case(verb))
        .copied()
        .unwrap_or("other")
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    verb: String,
    group: String,
    resource: String,
    code: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LatencyLabels {
    verb: String,
    group: String,
    resource: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ObjectLabels {
    resource: String,
}

/// The request metrics of one server.
pub struct Metrics {
    registry: prometheus_client::registry::Registry,
    requests: Family<RequestLabels, Counter>,
    latency: Family<LatencyLabels, Histogram>,
    objects: Family<ObjectLabels, Gauge>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = prometheus_client::registry::Registry::default();
        let requests = Family::<RequestLabels, Counter>::default();
        let latency = Family::<LatencyLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.0005, 2.0, 16))
        });
        let objects = Family::<ObjectLabels, Gauge>::default();
        registry.register(
            "apiserver_request",
            "Requests by verb, group, resource and HTTP code",
            requests.clone(),
        );
        registry.register(
            "apiserver_request_duration_seconds",
            "Request latency by verb, group and resource",
            latency.clone(),
        );
        registry.register(
            "apiserver_storage_objects",
            "Stored objects by resource",
            objects.clone(),
        );
        Metrics {
            registry,
            requests,
            latency,
            objects,
        }
    }

    /// The registry the metrics render from, to add other components' metrics to (the
    /// controllers' work queues).
    pub fn registry_mut(&mut self) -> &mut prometheus_client::registry::Registry {
        &mut self.registry
    }

    /// Records one answered request. `group` and `resource` must come from a bounded set (see
    /// the module documentation); `verb` is cleaned here.
    pub fn observe(&self, verb: &str, group: &str, resource: &str, code: u16, elapsed: Duration) {
        let (verb, group, resource) = (
            verb_label(verb).to_string(),
            group.to_string(),
            resource.to_string(),
        );
        self.requests
            .get_or_create(&RequestLabels {
                verb: verb.clone(),
                group: group.clone(),
                resource: resource.clone(),
                code: code.to_string(),
            })
            .inc();
        self.latency
            .get_or_create(&LatencyLabels {
                verb,
                group,
                resource,
            })
            .observe(elapsed.as_secs_f64());
    }

    /// Counts stored objects and renders every metric.
    pub async fn render(&self, registry: &Registry) -> String {
        for resource in RESOURCES {
            if let Ok(count) = registry.count_all(resource).await {
                let name = resource.name.to_string();
                let name = if resource.group.is_empty() {
                    name
                } else {
                    format!("{name}.{}", resource.group)
                };
                self.objects
                    .get_or_create(&ObjectLabels { resource: name })
                    .set(count as i64);
            }
        }
        let mut text = String::new();
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_verbs_are_other() {
        assert_eq!(verb_label("get"), "GET");
        assert_eq!(verb_label("deletecollection"), "DELETECOLLECTION");
        assert_eq!(verb_label("WATCH"), "WATCH");
        assert_eq!(verb_label("head"), "other");
        assert_eq!(verb_label("options"), "other");
        assert_eq!(verb_label("x-made-up-method-1234"), "other");
        assert_eq!(verb_label(""), "other");
    }
}
