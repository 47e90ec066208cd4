//! End-to-end tests: the real `kcp` binary on a free port with a temporary root directory, driven
//! by real clients (kubectl from PATH, and kube-rs). One test binary; every test starts its own server.

mod e2e {
    pub mod adversarial;
    pub mod boundary;
    pub mod crash;
    pub mod crd_cel;
    pub mod crd_deletion;
    pub mod crd_printing;
    pub mod crd_schemas;
    pub mod crd_versions;
    pub mod crds;
    pub mod flowcontrol;
    pub mod isolation;
    pub mod kube_rs;
    pub mod kube_rs_crd;
    pub mod kubectl;
    pub mod limits;
    pub mod namespaces;
    pub mod negotiation;
    pub mod openapi;
    pub mod outputs;
    pub mod patch;
    pub mod resources;
    pub mod start;
    pub mod support;
    pub mod validation;
    pub mod watch;
    pub mod wildcard;
    pub mod workspace_plugin;
    pub mod workspaces;
}
