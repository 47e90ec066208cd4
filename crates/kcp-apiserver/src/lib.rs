//! The HTTP side of kcp: the only crate that knows HTTP.
//!
//! It owns the TLS accept loop ([`serve`]), bearer-token authentication ([`authn`]), the request
//! router ([`router`]) and the responses every Kubernetes client expects from any server
//! (`/version`, the health checks, `Status` errors).
//!
//! It must not know which storage backend runs underneath, where certificates and tokens are kept
//! on disk, or how the process is configured: the composition root (`kcp-server`) hands it a
//! rustls configuration, the accepted tokens and a bound listener.

pub mod authn;
mod delete_collection;
pub mod discovery;
mod handlers;
pub mod metrics;
pub mod protobuf;
pub mod request_info;
pub mod router;
mod serve;
pub mod status;
mod subresource;
mod table;
pub mod version;
mod watch;

pub use serve::{ServeHandle, serve};
