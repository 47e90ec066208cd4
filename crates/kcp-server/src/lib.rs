//! The composition root of kcp: turns [`Options`] into a running [`Server`].
//!
//! It owns what lives in the root directory (certificates, the admin tokens, `admin.kubeconfig`,
//! the embedded store), the choice of storage backend (the only crate that names one), the
//! process's limits (file descriptors, from which the connection limit follows; the users of
//! `--token-auth-file`), and the order of start-up. It must not know HTTP details (that is `kcp-apiserver`) or storage
//! internals (the backends).

mod admin;
mod compactor;
mod kubeconfig;
mod options;
mod pki;
mod service_account;
mod store;
mod token_file;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use kcp_apiserver::authn::TokenAuthenticator;
use kcp_apiserver::authn::webhook::TokenWebhook;
use kcp_apiserver::authz::webhook::AuthorizationWebhook;
use kcp_apiserver::limits::LimitConfig;
use kcp_apiserver::router::Router;
use kcp_apiserver::webhook_client::Endpoint;
use kcp_apiserver::{ServeHandle, ServeOptions, serve};
use kcp_controllers::Controllers;
use kcp_registry::{CrdFollower, Registry};

/// The router, with the authorization webhook the options name.
fn router(
    options: &Options,
    authn: TokenAuthenticator,
    registry: Registry,
) -> anyhow::Result<Router> {
    let router = Router::new(authn, registry);
    let router = match auditor(options)? {
        Some(auditor) => router.with_auditor(auditor),
        None => router,
    };
    let Some(path) = &options.authorization_webhook_config_file else {
        return Ok(router);
    };
    let endpoint = Endpoint::from_kubeconfig_file(path).map_err(anyhow::Error::msg)?;
    let webhook = AuthorizationWebhook::new(endpoint, &options.authorization_webhook_version)
        .map_err(anyhow::Error::msg)?;
    Ok(router.with_authorization_webhook(webhook))
}

/// The audit policy and backends the options ask for (none without a policy file).
fn auditor(options: &Options) -> anyhow::Result<Option<kcp_apiserver::audit::Auditor>> {
    use kcp_apiserver::audit::{Auditor, policy::Policy, sink};
    let Some(policy_file) = &options.audit_policy_file else {
        return Ok(None);
    };
    let policy = Policy::from_file(policy_file).map_err(anyhow::Error::msg)?;
    let log = options
        .audit_log_path
        .as_ref()
        .map(|path| sink::LogOptions {
            path: path.clone(),
            max_size_mb: options.audit_log_maxsize,
            max_backups: options.audit_log_maxbackup,
            max_age_days: options.audit_log_maxage,
        });
    let webhook = match &options.audit_webhook_config_file {
        Some(path) => Some(sink::WebhookOptions {
            endpoint: Endpoint::from_kubeconfig_file(path).map_err(anyhow::Error::msg)?,
            batch_max_size: options.audit_webhook_batch_max_size,
            batch_max_wait: options.audit_webhook_batch_max_wait,
            timeout: std::time::Duration::from_secs(30),
        }),
        None => None,
    };
    if log.is_none() && webhook.is_none() {
        return Ok(None);
    }
    let metrics = sink::AuditMetrics::default();
    let sink = sink::Sink::start(log, webhook, metrics.clone()).map_err(anyhow::Error::msg)?;
    Ok(Some(Auditor::new(policy, sink, metrics)))
}

/// The logical cluster that exists from the first start.
const ROOT_CLUSTER: &str = "root";

pub use options::{ExtraMetrics, Options};
pub use store::Store;

/// A started server.
pub struct Server {
    /// The address it listens on (the real port when `--secure-port 0` was given).
    pub address: SocketAddr,
    /// The admin kubeconfig it wrote.
    pub kubeconfig: PathBuf,
    serving: ServeHandle,
    controllers: Controllers,
    crd_follower: CrdFollower,
    compactor: Option<tokio::task::JoinHandle<()>>,
    cache_aging: tokio::task::JoinHandle<()>,
    store: Store,
    registry: Registry,
}

impl Server {
    /// Prepares the root directory, opens storage, and starts serving.
    pub async fn start(options: Options) -> anyhow::Result<Server> {
        let root = &options.root_directory;
        let serve_options = serve_options(&options)?;
        create_private_dir(root)?;
        let store = Store::open(&options).await?;
        let revision = store.storage().current_revision().await?;
        tracing::info!(revision, "storage ready");
        let pki = pki::load_or_create(root, &options.bind_address)?;
        let registry = Registry::new(store.storage())
            .with_webhook_converter(Arc::new(
                kcp_apiserver::conversion_webhook::HttpsConversionWebhooks::default(),
            ))
            .with_webhook_caller(Arc::new(
                kcp_apiserver::admission_webhook::HttpsAdmissionWebhooks::default(),
            ))
            .with_service_account_tokens(Arc::new(service_account::tokens(&options, &pki.ca_pem)?));
        let client_ca = match &options.client_ca_file {
            Some(path) => Some(
                std::fs::read(path)
                    .with_context(|| format!("read the client CA file {}", path.display()))?,
            ),
            None => None,
        };
        let kubeconfig = root.join("admin.kubeconfig");
        let admin_tokens = admin::load_or_create(root, &kubeconfig)?;
        let mut authn = TokenAuthenticator::default().with_anonymous(options.anonymous_auth);
        admin_tokens.register(&mut authn);
        if let Some(path) = &options.authentication_token_webhook_config_file {
            let endpoint = Endpoint::from_kubeconfig_file(path).map_err(anyhow::Error::msg)?;
            let webhook = TokenWebhook::new(
                endpoint,
                &options.authentication_token_webhook_version,
                options.api_audiences.clone(),
                options.authentication_token_webhook_cache_ttl,
            )
            .map_err(anyhow::Error::msg)?;
            authn = authn.with_webhook(webhook);
        }
        if let Some(path) = &options.token_auth_file {
            for (token, user) in token_file::load(path)? {
                authn.add(kcp_apiserver::authn::token_digest(&token), user);
            }
        }
        let limits = LimitConfig {
            max_readonly: options.max_requests_inflight,
            max_mutating: options.max_mutating_requests_inflight,
            max_watches_per_user: options.max_watches_per_user,
            request_timeout: options.request_timeout,
        };

        let listener = tokio::net::TcpListener::bind((options.bind_address, options.secure_port))
            .await
            .with_context(|| {
                format!("listen on {}:{}", options.bind_address, options.secure_port)
            })?;
        let address = listener.local_addr()?;
        kubeconfig::write(
            &kubeconfig,
            &kubeconfig::server_base(address),
            &pki.ca_pem,
            &admin_tokens,
        )?;
        registry
            .bootstrap_root(&format!(
                "{}/clusters/{ROOT_CLUSTER}",
                kubeconfig::server_base(address)
            ))
            .await
            .context("bootstrap the root workspace")?;
        let crd_follower = registry.start_crd_follower();
        let controllers = Controllers::start(registry.clone());
        let compactor = compactor::start(store.storage(), options.etcd_compaction_interval);
        let cache_aging = registry.start_cache_aging();
        let serving = serve(
            listener,
            Arc::new(pki.server_config(client_ca.as_deref())?),
            Arc::new(
                router(&options, authn, registry.clone())?
                    .with_limits(limits)
                    .with_metrics(|metrics| {
                        controllers.metrics().register(metrics);
                        if let Some(extra) = &options.extra_metrics {
                            (extra.0)(metrics);
                        }
                    }),
            ),
            serve_options,
        );
        tracing::info!(
            "ready to serve on https://{address}; use it with KUBECONFIG={}",
            kubeconfig.display()
        );
        Ok(Server {
            address,
            kubeconfig,
            serving,
            controllers,
            crd_follower,
            compactor,
            cache_aging,
            store,
            registry,
        })
    }

    /// Resolves once some workspace holds an object of kcp's kind `plural` of `group/version`
    /// (a Cluster, `cluster.example.dev/v1alpha1` `clusters`, for `kcp start`, which runs the
    /// cluster-controller only from then on, so that a server without physical clusters pays
    /// nothing for it). Read from storage: one list, then a watch of that kind.
    pub async fn first_object(
        &self,
        group: &str,
        version: &str,
        plural: &str,
    ) -> anyhow::Result<()> {
        let resource = self
            .registry
            .serves_anywhere(group, version, plural)
            .with_context(|| format!("no such kind: {plural}.{group}/{version}"))?;
        loop {
            let everything: kcp_registry::Filter = Box::new(|_| true);
            let (objects, revision) = self
                .registry
                .list_all_clusters(&resource, &everything)
                .await?;
            if !objects.is_empty() {
                return Ok(());
            }
            let mut events = std::pin::pin!(
                self.registry
                    .watch_all_clusters(&resource, revision)
                    .await?
            );
            while let Some(event) = futures::StreamExt::next(&mut events).await {
                match event {
                    Ok(event) if event.event.kind != "DELETED" => return Ok(()),
                    Ok(_) => {}
                    // A broken watch: list again.
                    Err(_) => break,
                }
            }
        }
    }

    /// Stops serving and the controllers, then closes storage.
    pub async fn shutdown(self) {
        self.serving.shutdown();
        self.controllers.shutdown().await;
        self.crd_follower.stop().await;
        if let Some(compactor) = self.compactor {
            compactor.abort();
        }
        self.cache_aging.abort();
        self.store.close().await;
    }
}

/// The connection limits of `options`; the connection bound follows from the file descriptor
/// limit unless `--max-connections` gives one.
fn serve_options(options: &Options) -> anyhow::Result<ServeOptions> {
    for (flag, value) in [
        ("--tls-handshake-timeout", options.tls_handshake_timeout),
        ("--read-header-timeout", options.read_header_timeout),
        ("--idle-connection-timeout", options.idle_connection_timeout),
    ] {
        anyhow::ensure!(
            !value.is_zero() && value <= MAX_CONNECTION_TIMEOUT,
            "{flag} must be positive and at most a day"
        );
    }
    let max_connections = match options.max_connections {
        0 => connections_for(raise_fd_limit()),
        given => given,
    };
    tracing::info!(max_connections, "connection limit");
    Ok(ServeOptions {
        tls_handshake_timeout: options.tls_handshake_timeout,
        read_header_timeout: options.read_header_timeout,
        idle_timeout: options.idle_connection_timeout,
        max_connections,
    })
}

/// The longest connection timeout the hidden flags accept.
const MAX_CONNECTION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// More connections than this are not allowed however many file descriptors there are: each
/// costs memory too.
const MAX_CONNECTIONS: u64 = 65_536;

/// How many client connections `fd_limit` file descriptors allow: an eighth of them (at least
/// 64) stay for storage, etcd clients and everything else.
fn connections_for(fd_limit: u64) -> usize {
    let reserved = (fd_limit / 8).max(64);
    let connections = fd_limit.saturating_sub(reserved).clamp(1, MAX_CONNECTIONS);
    usize::try_from(connections).unwrap_or(1)
}

/// Raises the soft limit on open files to the hard one, as Go programs (kube-apiserver) do at
/// start, and returns the soft limit in force.
fn raise_fd_limit() -> u64 {
    let Ok(limit) = open_files_limit(None) else {
        return 1024;
    };
    if limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: limit.rlim_max,
            rlim_max: limit.rlim_max,
        };
        if let Ok(raised) = open_files_limit(Some(raised)) {
            return raised.rlim_cur;
        }
    }
    limit.rlim_cur
}

/// The process's limit on open files (`RLIMIT_NOFILE`), after setting it to `new` if given.
/// The crate's only `unsafe` code: the system calls behind it have no safe wrapper in std.
#[allow(unsafe_code)]
fn open_files_limit(new: Option<libc::rlimit>) -> std::io::Result<libc::rlimit> {
    if let Some(new) = new {
        // SAFETY: setrlimit(2) only reads the one rlimit struct it is given, which lives on our
        // stack for the whole call; RLIMIT_NOFILE is a valid resource.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &new) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit(2) only writes one rlimit struct into the one we own and pass by a
    // unique reference; RLIMIT_NOFILE is a valid resource.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(limit)
}

/// Creates `dir` (and parents) readable by the owner only.
fn create_private_dir(dir: &std::path::Path) -> anyhow::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("create root directory {}", dir.display()))
}

/// Writes `contents` to `path` readable by the owner only, replacing it atomically.
fn write_private(path: &std::path::Path, contents: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let temporary = path.with_extension("tmp");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&temporary)
        .with_context(|| format!("write {}", temporary.display()))?;
    file.write_all(contents)?;
    file.sync_all()?;
    std::fs::rename(&temporary, path).with_context(|| format!("write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Options {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            options: Options,
        }
        let all = std::iter::once("kcp").chain(args.iter().copied());
        <Cli as clap::Parser>::try_parse_from(all).unwrap().options
    }

    #[test]
    fn the_boundary_defaults_are_kube_apiservers() {
        let options = parse(&[]);
        assert_eq!(options.request_timeout, std::time::Duration::from_secs(60));
        assert_eq!(options.max_requests_inflight, 400);
        assert_eq!(options.max_mutating_requests_inflight, 200);
        assert_eq!(options.token_auth_file, None);
        let serve = serve_options(&parse(&["--max-connections", "7"])).unwrap();
        assert_eq!(
            serve.tls_handshake_timeout,
            std::time::Duration::from_secs(10)
        );
        assert_eq!(
            serve.read_header_timeout,
            std::time::Duration::from_secs(32)
        );
        assert_eq!(serve.idle_timeout, std::time::Duration::from_secs(90));
        assert_eq!(serve.max_connections, 7);
        let options = parse(&[
            "--request-timeout",
            "2m30s",
            "--max-requests-inflight",
            "0",
            "--token-auth-file",
            "/tokens.csv",
        ]);
        assert_eq!(options.request_timeout, std::time::Duration::from_secs(150));
        assert_eq!(options.max_requests_inflight, 0);
        assert_eq!(
            options.token_auth_file.as_deref(),
            Some(std::path::Path::new("/tokens.csv"))
        );
    }

    #[test]
    fn connection_timeouts_must_be_positive_and_bounded() {
        for args in [
            ["--tls-handshake-timeout", "0"],
            ["--read-header-timeout", "0"],
            ["--idle-connection-timeout", "25h"],
        ] {
            let error = serve_options(&parse(&args)).unwrap_err();
            assert!(error.to_string().contains(args[0]), "{error}");
        }
    }

    #[test]
    fn connections_leave_file_descriptors_for_the_rest() {
        assert_eq!(connections_for(1024), 896);
        assert_eq!(connections_for(20_000), 17_500);
        assert_eq!(connections_for(256), 192);
        assert_eq!(connections_for(10), 1);
        assert_eq!(connections_for(u64::MAX), 65_536);
    }

    #[test]
    fn the_fd_limit_is_raised_to_the_hard_limit() {
        let soft = raise_fd_limit();
        let limit = open_files_limit(None).unwrap();
        assert_eq!(limit.rlim_cur, soft);
        // Linux always lets a process raise its soft limit up to the hard one.
        #[cfg(target_os = "linux")]
        assert_eq!(limit.rlim_cur, limit.rlim_max);
    }
}
