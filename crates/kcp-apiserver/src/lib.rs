//! The HTTP side of kcp: the only crate that knows HTTP.
//!
//! It owns the TLS accept loop and its connection limits ([`serve`]), bearer-token authentication
//! ([`authn`]), authorization per logical cluster ([`authz`]), requests in flight and their
//! timeout ([`limits`]), the request router ([`router`]) and the responses every Kubernetes
//! client expects from any server (`/version`, the health checks, `Status` errors).
//!
//! It must not know which storage backend runs underneath, where certificates and tokens are kept
//! on disk, or how the process is configured: the composition root (`kcp-server`) hands it a
//! rustls configuration, the accepted tokens and a bound listener.

pub mod admission_webhook;
pub mod aggregated_discovery;
pub mod audit;
pub mod authn;
pub mod authz;
pub mod body;
mod compression;
pub mod conversion_webhook;
mod cpu;
mod custom_columns;
pub mod discovery;
pub mod error;
mod field_validation;
mod handlers;
pub mod limits;
mod list_frame;
pub mod metrics;
pub mod mount;
mod negotiation;
pub mod openapi;
pub mod openapi_v2;
mod paged;
pub mod protobuf;
mod protobuf_generic;
pub mod request_info;
mod resource_version;
pub mod router;
mod scope;
mod serve;
pub mod status;
mod subresource;
mod table;
#[cfg(test)]
mod test_support;
pub mod version;
pub mod virtual_workspaces;
mod watch;
pub mod webhook_client;
mod wildcard;
mod workspaces;
mod yaml;

pub use serve::{ServeHandle, ServeOptions, serve};
