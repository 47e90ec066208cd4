//! API sharing's controllers, each one task for every logical cluster ([`crate::driver`]):
//!
//! - `export`: an APIExport's identity (the Secret `kcp-system/<export>` made when absent,
//!   `status.identityHash` the SHA-256 of its key, condition `IdentityValid`) and its
//!   APIExportEndpointSlice (same name, owned by the export, unless the export is annotated
//!   `apiexports.apis.kcp.io/skip-endpointslice`).
//! - `endpoints`: an APIExportEndpointSlice's `status.endpoints`: this server's virtual
//!   workspace URL of the export once some APIBinding binds it.
//! - `binding`: an APIBinding: its export resolved, naming conflicts found, then
//!   `boundResources` and phase Bound; the registry serves the bound resources
//!   (`kcp_registry::apis::bound`). Deleting a binding deletes its bound objects first.

mod binding;
mod endpoints;
mod export;

use kcp_apis::builtin::Resource;
use kcp_registry::{Registry, Target};

use crate::Context;
use crate::driver::{Controller, Key, Listing, WORKERS};

pub(crate) use binding::bind_default;
pub use binding::run as run_bindings;
pub use endpoints::run as run_endpoint_slices;
pub use export::run as run_exports;

fn cluster_scoped<'a>(cluster: &'a str, resource: &'static Resource) -> Target<'a> {
    Target {
        cluster,
        resource,
        namespace: None,
    }
}

fn exports(cluster: &str) -> Target<'_> {
    cluster_scoped(cluster, kcp_apis::system::api_exports())
}

fn bindings(cluster: &str) -> Target<'_> {
    cluster_scoped(cluster, kcp_apis::system::api_bindings())
}

fn schemas(cluster: &str) -> Target<'_> {
    cluster_scoped(cluster, kcp_apis::system::api_resource_schemas())
}

fn slices(cluster: &str) -> Target<'_> {
    cluster_scoped(cluster, kcp_apis::system::api_export_endpoint_slices())
}

/// The logical cluster an export reference's `path` names from `cluster` (empty: `cluster`).
async fn export_cluster(
    registry: &Registry,
    cluster: &str,
    path: &str,
) -> Result<String, kcp_registry::RegistryError> {
    match path {
        "" => Ok(cluster.to_string()),
        path => registry.resolve_path(path).await,
    }
}

/// Runs a controller of `resource` reconciled by `reconcile`, listing everything, for the
/// events `wants` accepts.
async fn run_simple(
    registry: Registry,
    context: Context,
    name: &'static str,
    (resource, wants): (&'static Resource, fn(&serde_json::Value) -> bool),
    reconcile: fn(Registry, Key) -> crate::driver::Reconciled,
    also: Vec<crate::driver::Also>,
) {
    Controller {
        name,
        resource,
        wants,
        listed: Listing::Summaries(|_| true),
        deletions: true,
        reconcile,
        workers: WORKERS,
        also,
    }
    .run(registry, context)
    .await
}
