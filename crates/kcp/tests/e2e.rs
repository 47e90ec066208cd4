//! End-to-end tests: the real `kcp` binary on a free port with a temporary root directory, driven
//! by real clients (kubectl from PATH, and kube-rs). One test binary.
//!
//! Most tests share one server, each in a workspace of its own (`Kcp::shared`), which also
//! exercises the isolation between workspaces on every run. A test starts a server of its own
//! (`Kcp::start`) only when what it checks belongs to the process: start-up, restarts and
//! crashes; server flags (timeouts, limits, compaction, token files); the process's memory,
//! responsiveness or log; the root workspace's own tree and types; and wildcard requests, which
//! see every workspace of the server.

mod e2e {
    pub mod admission_policies;
    pub mod admission_webhooks;
    pub mod adversarial;
    pub mod api_sharing;
    pub mod audit;
    pub mod authorization;
    pub mod boundary;
    pub mod cert_manager;
    pub mod clusterrole_aggregation;
    pub mod compat;
    pub mod crash;
    pub mod crd_cel;
    pub mod crd_deletion;
    pub mod crd_printing;
    pub mod crd_puller;
    pub mod crd_schemas;
    pub mod crd_versions;
    pub mod crds;
    pub mod discovery;
    pub mod flowcontrol;
    pub mod garbage_collection;
    pub mod helm;
    pub mod isolation;
    pub mod kube_rs;
    pub mod kube_rs_crd;
    pub mod kubectl;
    pub mod limits;
    pub mod lists;
    pub mod multicluster_provider;
    pub mod namespace_defaults;
    pub mod namespaces;
    pub mod negotiation;
    pub mod openapi;
    pub mod outputs;
    pub mod patch;
    pub mod physical_clusters;
    pub mod python_client;
    pub mod resource_quota;
    pub mod resources;
    pub mod sdk;
    pub mod server_side_apply;
    pub mod service_accounts;
    pub mod start;
    pub mod support;
    pub mod tenant_matrix;
    pub mod validation;
    pub mod watch;
    pub mod webhooks;
    pub mod wildcard;
    pub mod workspace_plugin;
    pub mod workspaces;
}
