//! The flags of `kcp start`, named as kcp and kube-apiserver name them.

use std::net::IpAddr;
use std::path::PathBuf;

/// Options of `kcp start`.
#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    /// Directory for the embedded store, certificates and the admin kubeconfig.
    #[arg(long, default_value = ".kcp")]
    pub root_directory: PathBuf,
    /// The port to serve HTTPS on (0: any free port).
    #[arg(long, default_value_t = 6443)]
    pub secure_port: u16,
    /// The address to listen on; also the host written into admin.kubeconfig unless unspecified.
    #[arg(long, default_value = "0.0.0.0")]
    pub bind_address: IpAddr,
    /// Comma-separated etcd URLs; without it, the embedded store under the root directory.
    #[arg(long, value_delimiter = ',')]
    pub etcd_servers: Vec<String>,
    /// CA bundle that verifies etcd's serving certificate.
    #[arg(long)]
    pub etcd_cafile: Option<PathBuf>,
    /// Client certificate for etcd.
    #[arg(long, requires = "etcd_keyfile")]
    pub etcd_certfile: Option<PathBuf>,
    /// Client key for etcd.
    #[arg(long, requires = "etcd_certfile")]
    pub etcd_keyfile: Option<PathBuf>,
    /// How often storage history older than one interval is compacted away (0: never), for the
    /// embedded store as for etcd.
    #[arg(long, default_value = "5m", value_parser = crate::compactor::parse_duration)]
    pub etcd_compaction_interval: std::time::Duration,
}
