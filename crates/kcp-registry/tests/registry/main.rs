//! The registry's integration tests, all on the in-memory store, built as one test binary (one
//! link step) with one module per area. Helpers several areas need are in `support`.

mod cluster_annotation;
mod conversion;
mod custom_resources;
mod namespaces;
mod nesting;
mod registry;
mod support;
mod tenancy;
