//! The flags of `kcp start`, named as kcp and kube-apiserver name them. Limits of the request
//! boundary that kube-apiserver does not expose as flags are hidden flags, for tests.

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
    #[arg(long, default_value = "5m", value_parser = kcp_apimachinery::duration::parse)]
    pub etcd_compaction_interval: std::time::Duration,
    /// A CSV file of bearer tokens, as kube-apiserver's: `token,user,uid,"group1,group2"` per
    /// line (the groups column is optional). These users are accepted besides the admin.
    #[arg(long)]
    pub token_auth_file: Option<PathBuf>,
    /// PEM CA certificates: a client certificate one of them signed authenticates its
    /// requests, the subject's common name as the user and its organizations as the groups.
    #[arg(long)]
    pub client_ca_file: Option<PathBuf>,
    /// Requests without credentials are `system:anonymous` (group `system:unauthenticated`)
    /// for authorization to decide, as kube-apiserver's default; `false`: they get 401.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub anonymous_auth: bool,
    /// A kubeconfig-format file naming a webhook asked (with TokenReviews) about bearer tokens
    /// nothing else accepts.
    #[arg(long)]
    pub authentication_token_webhook_config_file: Option<PathBuf>,
    /// The TokenReview version sent to the token webhook (v1 or v1beta1).
    #[arg(long, default_value = "v1beta1")]
    pub authentication_token_webhook_version: String,
    /// How long the token webhook's accepted tokens are remembered.
    #[arg(long, default_value = "2m", value_parser = kcp_apimachinery::duration::parse)]
    pub authentication_token_webhook_cache_ttl: std::time::Duration,
    /// A kubeconfig-format file naming a webhook asked (with SubjectAccessReviews) about
    /// requests RBAC does not allow.
    #[arg(long)]
    pub authorization_webhook_config_file: Option<PathBuf>,
    /// The SubjectAccessReview version sent to the authorization webhook (v1 or v1beta1).
    #[arg(long, default_value = "v1beta1")]
    pub authorization_webhook_version: String,
    /// The audit policy (`audit.k8s.io/v1` Policy); without it nothing is audited.
    #[arg(long)]
    pub audit_policy_file: Option<PathBuf>,
    /// Where audit events are written, one JSON line each (`-`: standard output).
    #[arg(long)]
    pub audit_log_path: Option<PathBuf>,
    /// Megabytes the audit log grows to before it is rotated (0: never).
    #[arg(long, default_value_t = 0)]
    pub audit_log_maxsize: u64,
    /// Rotated audit logs kept at most (0: all).
    #[arg(long, default_value_t = 0)]
    pub audit_log_maxbackup: usize,
    /// Days a rotated audit log is kept at most (0: forever).
    #[arg(long, default_value_t = 0)]
    pub audit_log_maxage: u64,
    /// A kubeconfig-format file naming a webhook audit events are posted to, in batches.
    #[arg(long)]
    pub audit_webhook_config_file: Option<PathBuf>,
    /// Events per batch posted to the audit webhook at most.
    #[arg(long, default_value_t = 400)]
    pub audit_webhook_batch_max_size: usize,
    /// How long events wait for their batch to fill before it is posted.
    #[arg(long, default_value = "30s", value_parser = kcp_apimachinery::duration::parse)]
    pub audit_webhook_batch_max_wait: std::time::Duration,
    /// The PEM PKCS#8 ECDSA P-256 private key that signs service account tokens; without it,
    /// one made at the first start and kept as `service-account.key` in the root directory.
    #[arg(long)]
    pub service_account_signing_key_file: Option<PathBuf>,
    /// Further PEM public keys (EC or RSA) whose service account tokens are accepted.
    #[arg(long)]
    pub service_account_key_file: Vec<PathBuf>,
    /// The issuer of service account tokens (repeatable: the first signs, all are accepted).
    #[arg(long, default_value = "https://kcp.default.svc")]
    pub service_account_issuer: Vec<String>,
    /// The audiences service account tokens must name one of; the first issuer if none.
    #[arg(long, value_delimiter = ',')]
    pub api_audiences: Vec<String>,
    /// The longest lifetime a TokenRequest gets (0: as asked).
    #[arg(long, default_value = "0s", value_parser = kcp_apimachinery::duration::parse)]
    pub service_account_max_token_expiration: std::time::Duration,
    /// Time a non-long-running request may take before it is answered 504 (0: no limit).
    #[arg(long, default_value = "1m0s", value_parser = kcp_apimachinery::duration::parse)]
    pub request_timeout: std::time::Duration,
    /// Read-only requests in flight at most (0: no limit); one user may hold a quarter of them.
    #[arg(long, default_value_t = kcp_apiserver::limits::DEFAULT_MAX_READONLY)]
    pub max_requests_inflight: usize,
    /// Mutating requests in flight at most (0: no limit); one user may hold a quarter of them.
    #[arg(long, default_value_t = kcp_apiserver::limits::DEFAULT_MAX_MUTATING)]
    pub max_mutating_requests_inflight: usize,
    /// Open watches per user at most (0: no limit).
    #[arg(long, hide = true, default_value_t = kcp_apiserver::limits::DEFAULT_MAX_WATCHES_PER_USER)]
    pub max_watches_per_user: usize,
    /// Time for a client's TLS handshake.
    #[arg(long, hide = true, default_value = "10s", value_parser = kcp_apimachinery::duration::parse)]
    pub tls_handshake_timeout: std::time::Duration,
    /// Time for an HTTP/1.1 request's headers (kube-apiserver's ReadHeaderTimeout).
    #[arg(long, hide = true, default_value = "32s", value_parser = kcp_apimachinery::duration::parse)]
    pub read_header_timeout: std::time::Duration,
    /// Time a connection may stay open with no request (kube-apiserver's IdleTimeout).
    #[arg(long, hide = true, default_value = "90s", value_parser = kcp_apimachinery::duration::parse)]
    pub idle_connection_timeout: std::time::Duration,
    /// Open connections at most (0: from the process's file descriptor limit).
    #[arg(long, hide = true, default_value_t = 0)]
    pub max_connections: usize,
    /// Not a flag: what the server's own threads (the embedded store's writer) call when they
    /// run out of work, for the binary's allocator to collect their freed memory there (or
    /// give up the thread's pages: mimalloc's `mi_thread_done`).
    #[arg(skip)]
    pub on_thread_idle: Option<fn()>,
    /// More metrics for `/metrics`, registered before the server serves (the physical-cluster
    /// layer's, which `kcp start` runs beside the server).
    #[arg(skip)]
    pub extra_metrics: Option<ExtraMetrics>,
}

/// What adds metrics to the server's registry.
#[derive(Clone)]
pub struct ExtraMetrics(
    pub std::sync::Arc<dyn Fn(&mut prometheus_client::registry::Registry) + Send + Sync>,
);

impl std::fmt::Debug for ExtraMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ExtraMetrics")
    }
}
