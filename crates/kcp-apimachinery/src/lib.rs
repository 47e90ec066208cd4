//! Pure Kubernetes API machinery shared by the server, the registry and the clients.
//!
//! Owns the nesting limit of stored objects and the decoders that enforce or tolerate it
//! ([`json`]), label selectors ([`labels`]) and field selectors ([`fields`]) (their string grammar,
//! validation, canonical printing and matching), patches ([`patch`]: JSON, merge, strategic)
//! the JSONPath subset CRD printer columns use ([`jsonpath`]), field reads by path and writes that
//! never panic ([`object`]), nested-field accessors with Go's errors ([`unstructured`]), the DNS
//! name rules ([`dns`]), flag durations ([`duration`]) and RBAC's evaluation of rules and bindings ([`rbac`]), with error texts
//! kept close to `k8s.io/apimachinery` so clients see the messages they expect.
//!
//! Must not know: IO of any kind, clocks, HTTP, storage, or which fields a given kind supports in
//! a field selector (callers check [`fields::Selector::requirements`] against their own list).

pub mod dns;
pub mod duration;
pub mod fieldpath;
pub mod fields;
pub mod json;
pub mod jsonpath;
pub mod labels;
pub mod managedfields;
pub mod object;
pub mod patch;
pub mod rbac;
pub mod schema;
pub mod unstructured;
