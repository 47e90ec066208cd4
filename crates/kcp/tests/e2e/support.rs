//! Running `kcp start` and kubectl from tests.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use kcp_testing::output::Lines;

/// Whether `name` (a bare name or `kind/name`) is an object the server gives every namespace:
/// the ConfigMap `kube-root-ca.crt` and the ServiceAccount `default`. They appear a moment after
/// their namespace, so tests about objects of their own leave them out of listings.
pub fn is_namespace_default(name: &str) -> bool {
    matches!(
        name.trim(),
        "kube-root-ca.crt" | "configmap/kube-root-ca.crt" | "serviceaccount/default"
    )
}

/// The lines of a listing (`-o name`, or a table whose rows begin with the name) without the
/// objects every namespace gets (see [`is_namespace_default`]), trimmed.
pub fn without_namespace_defaults(listing: &str) -> String {
    listing
        .lines()
        .filter(|line| !is_namespace_default(line.split_whitespace().next().unwrap_or_default()))
        .collect::<Vec<_>>()
        .join("\n")
        .trim()
        .to_string()
}

/// The cluster of requests across every workspace.
const WILDCARD: &str = "*";

/// `PATH` with the plugin binaries (`kubectl-ws`, `kubectl-kcp`, ...) first.
pub fn plugins_path() -> String {
    let bin = Path::new(env!("CARGO_BIN_EXE_kubectl-ws"))
        .parent()
        .unwrap();
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// kubectl with the plugins on PATH and `kubeconfig` (see [`Kcp::kubeconfig_in`]).
pub fn kubectl_with_plugins(kubeconfig: &Path, args: &[&str]) -> Output {
    Command::new("kubectl")
        .env("KUBECONFIG", kubeconfig)
        .env("PATH", plugins_path())
        .env_remove("KUBERNETES_MASTER")
        .args(args)
        .output()
        .expect("run kubectl")
}

/// Writes `text` to the file `name` in `dir` and returns its path.
pub fn write_file(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

/// A running `kcp start` process.
struct Server {
    child: Mutex<Option<Child>>,
    root: PathBuf,
    /// What the server logs after it said it is ready.
    log: Mutex<Lines>,
}

impl Server {
    /// Starts kcp on a free loopback port with `root` as its root directory and `args` added,
    /// and waits until it says it is ready to serve. A server `tied` to this process is killed
    /// when the test binary exits, even if nothing drops it.
    fn spawn(root: &Path, args: &[&str], tied: bool) -> Server {
        let mut command = Command::new(env!("CARGO_BIN_EXE_kcp"));
        command
            .arg("start")
            .arg("--root-directory")
            .arg(root)
            .args(["--secure-port", "0", "--bind-address", "127.0.0.1"])
            .args(args)
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = if tied {
            kcp_testing::process::spawn_tied_to_process(command)
        } else {
            command.spawn()
        }
        .expect("run kcp");
        let log = Lines::of(child.stdout.take().unwrap());
        let Some(line) = log.find_within(Duration::from_secs(60), "ready to serve") else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("kcp did not become ready");
        };
        assert!(
            line.contains("admin.kubeconfig"),
            "the ready line names the kubeconfig: {line}"
        );
        Server {
            child: Mutex::new(Some(child)),
            root: root.to_path_buf(),
            log: Mutex::new(log),
        }
    }

    /// The server shared by every test that does not need a server of its own; started by the
    /// first test that asks, killed when the test binary exits.
    fn shared() -> &'static Arc<Server> {
        static SHARED: OnceLock<Arc<Server>> = OnceLock::new();
        SHARED.get_or_init(|| {
            let parent = Path::new(env!("CARGO_TARGET_TMPDIR"));
            remove_stale_shared_roots(parent);
            let root = parent.join(format!("{SHARED_ROOT_PREFIX}{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&root);
            Arc::new(Server::spawn(&root, &[], true))
        })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.get_mut().unwrap().take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The shared server's root directory is `<prefix><pid of the test binary>` in Cargo's
/// temporary directory for integration tests.
const SHARED_ROOT_PREFIX: &str = "e2e-shared-kcp-";

/// Removes the root directories of shared servers whose test binary is no longer running.
fn remove_stale_shared_roots(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(SHARED_ROOT_PREFIX))
        else {
            continue;
        };
        if !Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// A test's view of a kcp server: its own server (killed on drop unless stopped), or a
/// workspace of its own on the server the tests share.
///
/// `kubectl`, `kubectl_ok` and `kube_client` reach the test's home logical cluster: `root` on a
/// server of its own, `root:<name>` on the shared one. `kubectl_in*` name a logical cluster.
pub struct Kcp {
    server: Arc<Server>,
    /// Whether this is a workspace on the shared server (which a test must not stop).
    shared: bool,
    pub root: PathBuf,
    home: String,
    kubeconfig: PathBuf,
}

impl Kcp {
    /// Starts a server of this test's own on a free loopback port with `root` as its root
    /// directory and `args` added, and waits until it says it is ready to serve. For tests that
    /// need the process itself: flags, restarts, crashes, its memory or its logs.
    pub fn start(root: &Path, args: &[&str]) -> Kcp {
        let server = Arc::new(Server::spawn(root, args, false));
        Kcp {
            root: root.to_path_buf(),
            kubeconfig: root.join("admin.kubeconfig"),
            server,
            shared: false,
            home: "root".to_string(),
        }
    }

    /// A workspace `root:<name>` of this test's own on the server the tests share, Ready, with
    /// a kubeconfig whose `root` context points into it. `name` must be unique among the tests.
    pub fn shared(name: &str) -> Kcp {
        let server = Arc::clone(Server::shared());
        let admin = Kcp {
            root: server.root.clone(),
            kubeconfig: server.root.join("admin.kubeconfig"),
            server: Arc::clone(&server),
            shared: true,
            home: "root".to_string(),
        };
        let home = admin.workspace(name);
        let tenants = server.root.join("tenants");
        std::fs::create_dir_all(&tenants).unwrap();
        let kubeconfig = tenants.join(format!("{name}.kubeconfig"));
        let text = std::fs::read_to_string(admin.kubeconfig()).unwrap();
        let pointed = text.replace("/clusters/root\"", &format!("/clusters/{home}\""));
        assert_ne!(pointed, text, "the admin kubeconfig has a root cluster");
        std::fs::write(&kubeconfig, pointed).unwrap();
        Kcp {
            kubeconfig,
            home,
            ..admin
        }
    }

    /// The logical cluster `kubectl` and `kube_client` reach: `root`, or this test's workspace
    /// on the shared server.
    pub fn home(&self) -> &str {
        &self.home
    }

    /// Waits until the server logs a line containing `needle` (one logged since the last wait);
    /// the test fails if it does not within `kcp_testing::wait::DEADLINE`.
    pub fn wait_for_log(&self, needle: &str) -> String {
        assert!(
            !self.shared,
            "the shared server's log mixes every test's lines"
        );
        self.server.log.lock().unwrap().find(needle)
    }

    /// The process id of the running server.
    pub fn pid(&self) -> u32 {
        let child = self.server.child.lock().unwrap();
        child.as_ref().expect("running").id()
    }

    /// The kubeconfig whose current context (`root`) points at [`Kcp::home`].
    pub fn kubeconfig(&self) -> PathBuf {
        self.kubeconfig.clone()
    }

    /// The server's URL without a cluster path (`https://127.0.0.1:<port>`), from the kubeconfig
    /// this start wrote.
    pub fn base_url(&self) -> String {
        let kubeconfig = std::fs::read_to_string(self.kubeconfig()).unwrap();
        let server = kubeconfig
            .lines()
            .find_map(|line| line.trim().strip_prefix("server: "))
            .expect("the kubeconfig names a server")
            .trim_matches('"');
        server
            .split("/clusters/")
            .next()
            .unwrap_or(server)
            .to_string()
    }

    /// The server's socket address.
    pub fn address(&self) -> std::net::SocketAddr {
        self.base_url()
            .trim_start_matches("https://")
            .parse()
            .expect("the server URL is https://<ip>:<port>")
    }

    /// Runs kubectl against this server with the admin kubeconfig.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        Command::new("kubectl")
            .env("KUBECONFIG", self.kubeconfig())
            .env_remove("KUBERNETES_MASTER")
            .args(args)
            .output()
            .expect("run kubectl (it must be on PATH)")
    }

    /// Runs kubectl against the logical cluster `cluster` (its `/clusters/<cluster>` URL); for
    /// `*`, as the shard admin (context `system:admin`), since only `system:masters` may read
    /// across workspaces, as in kcp.
    pub fn kubectl_in(&self, cluster: &str, args: &[&str]) -> Output {
        let server = format!("--server={}/clusters/{cluster}", self.base_url());
        let mut all = vec![server.as_str()];
        if cluster == WILDCARD {
            all.push("--context=system:admin");
        }
        all.extend_from_slice(args);
        self.kubectl(&all)
    }

    /// [`Kcp::kubectl_in`] requiring success; returns stdout.
    pub fn kubectl_in_ok(&self, cluster: &str, args: &[&str]) -> String {
        let output = self.kubectl_in(cluster, args);
        assert!(
            output.status.success(),
            "kubectl {args:?} in {cluster} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    }

    /// [`Kcp::kubectl_in`] requiring failure; returns stderr, trimmed.
    pub fn kubectl_in_err(&self, cluster: &str, args: &[&str]) -> String {
        let output = self.kubectl_in(cluster, args);
        assert!(
            !output.status.success(),
            "kubectl {args:?} in {cluster} should fail"
        );
        String::from_utf8_lossy(&output.stderr).trim().to_string()
    }

    /// Creates the workspace `name` in [`Kcp::home`], waits until it is Ready and returns its
    /// path (`<home>:<name>`), for tests that want another logical cluster.
    pub fn workspace(&self, name: &str) -> String {
        self.workspace_in(&self.home, name)
    }

    /// The logical cluster behind the workspace `path` (`<parent>:<name>`).
    pub fn logical_cluster(&self, path: &str) -> String {
        let (parent, name) = path.rsplit_once(':').expect("a workspace path");
        let workspace = format!("workspace/{name}");
        self.kubectl_in_ok(
            parent,
            &["get", &workspace, "-o", "jsonpath={.spec.cluster}"],
        )
    }

    /// Runs kubectl in `cluster` with the bearer token `token` instead of the admin's.
    pub fn kubectl_in_as(&self, token: &str, cluster: &str, args: &[&str]) -> Output {
        let token = format!("--token={token}");
        let mut all = vec![token.as_str()];
        all.extend_from_slice(args);
        self.kubectl_in(cluster, &all)
    }

    /// Creates the workspace `name` in the workspace `parent`, waits until it is Ready and
    /// returns its path (`<parent>:<name>`).
    pub fn workspace_in(&self, parent: &str, name: &str) -> String {
        // A file of its own: tests on servers of their own may use the same names at once.
        let manifest = tempfile::Builder::new()
            .prefix("kcp-e2e-workspace-")
            .suffix(".yaml")
            .tempfile()
            .unwrap();
        std::fs::write(
            manifest.path(),
            format!(
                "apiVersion: tenancy.kcp.io/v1alpha1\nkind: Workspace\nmetadata:\n  name: {name}\n"
            ),
        )
        .unwrap();
        let file = manifest.path().to_string_lossy().into_owned();
        self.kubectl_in_ok(parent, &["create", "-f", &file]);
        self.kubectl_in_ok(
            parent,
            &[
                "wait",
                "--for=jsonpath={.status.phase}=Ready",
                &format!("workspace/{name}"),
                "--timeout=10s",
            ],
        );
        format!("{parent}:{name}")
    }

    /// Waits until the CRD `name` of `cluster` is Established.
    pub fn wait_established(&self, cluster: &str, name: &str) {
        let crd = format!("crd/{name}");
        self.kubectl_in_ok(
            cluster,
            &["wait", "--for=condition=Established", &crd, "--timeout=10s"],
        );
    }

    /// A kube-rs client from the kubeconfig this start wrote (the port changes on every start).
    pub async fn kube_client(&self) -> kube::Client {
        self.kube_client_in(&self.home).await
    }

    /// A kube-rs client whose requests go to `/clusters/<cluster>` (a path, a name or `*`, the
    /// last as the shard admin, see [`Kcp::kubectl_in`]).
    pub async fn kube_client_in(&self, cluster: &str) -> kube::Client {
        kube::Client::try_from(self.kube_config_in(cluster).await).unwrap()
    }

    /// The kube-rs configuration of [`Kcp::kube_client_in`], for tests that make several
    /// clients (each its own connections).
    pub async fn kube_config_in(&self, cluster: &str) -> kube::Config {
        use kube::config::{KubeConfigOptions, Kubeconfig};
        let kubeconfig = Kubeconfig::read_from(self.kubeconfig()).unwrap();
        let options = KubeConfigOptions {
            context: (cluster == WILDCARD).then(|| "system:admin".to_string()),
            ..KubeConfigOptions::default()
        };
        let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
            .await
            .unwrap();
        config.cluster_url = format!("{}/clusters/{cluster}", self.base_url())
            .parse()
            .unwrap();
        config
    }

    /// Runs kubectl and requires success; returns stdout.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        let output = self.kubectl(args);
        assert!(
            output.status.success(),
            "kubectl {args:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    }

    /// `curl` of `path` with no credentials: the status code and the body.
    pub fn anonymous_get(&self, path: &str) -> (String, String) {
        self.anonymous_curl(path, &[])
    }

    /// A JSON `body` POSTed to `path` with no credentials: the status code and the body.
    pub fn anonymous_post(&self, path: &str, body: &str) -> (String, String) {
        let args = [
            "-X",
            "POST",
            "-H",
            "Content-Type: application/json",
            "--data",
            body,
        ];
        self.anonymous_curl(path, &args)
    }

    fn anonymous_curl(&self, path: &str, args: &[&str]) -> (String, String) {
        let output = Command::new("curl")
            .args(["-sS", "-o", "-", "-w", "\n%{http_code}"])
            .args(args)
            .arg("--cacert")
            .arg(self.root.join("ca.crt"))
            .arg(format!("{}{path}", self.base_url()))
            .output()
            .expect("run curl");
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
        (code.to_string(), body.to_string())
    }

    /// Runs kubectl and requires failure; returns stderr, trimmed.
    pub fn kubectl_err(&self, args: &[&str]) -> String {
        let output = self.kubectl(args);
        assert!(!output.status.success(), "kubectl {args:?} should fail");
        String::from_utf8_lossy(&output.stderr).trim().to_string()
    }

    /// A copy of the admin kubeconfig in `dir` whose current context points into `cluster`,
    /// with `token` instead of the admin's if given: for the plugins, which act on the current
    /// context's workspace.
    pub fn kubeconfig_in(&self, dir: &Path, cluster: &str, token: Option<&str>) -> PathBuf {
        let text = std::fs::read_to_string(self.server.root.join("admin.kubeconfig")).unwrap();
        let mut text = text.replace("/clusters/root\"", &format!("/clusters/{cluster}\""));
        if let Some(token) = token {
            let admin = kcp_testing::kubeconfig::admin_token(&self.server.root, "kcp-admin");
            text = text.replace(admin.trim(), token);
        }
        let path = dir.join(format!("{}.kubeconfig", cluster.replace(':', "_")));
        std::fs::write(&path, text).unwrap();
        path
    }

    /// The first URL of the APIExportEndpointSlice `slice` of `cluster`, once it lists one
    /// (some workspace binds its export).
    pub fn endpoint_url(&self, cluster: &str, slice: &str) -> String {
        let slice = format!("apiexportendpointslice/{slice}");
        kcp_testing::wait::until("the endpoint slice's URL", || {
            let url = self.kubectl_in_ok(
                cluster,
                &["get", &slice, "-o", "jsonpath={.status.endpoints[0].url}"],
            );
            (!url.is_empty()).then_some(url)
        })
    }

    /// Sends SIGTERM and requires a clean exit.
    pub fn stop(self) {
        assert!(!self.shared, "a test does not stop the shared server");
        let mut child = self.server.child.lock().unwrap().take().unwrap();
        // Our own child, not reaped yet: its pid is still its own.
        kcp_testing::signal::terminate(child.id()).expect("SIGTERM kcp");
        let status = child.wait().unwrap();
        assert!(status.success(), "kcp exited with {status}");
    }
}

/// A real Kubernetes cluster on loopback (etcd, kube-apiserver, kube-controller-manager,
/// kube-scheduler and kwok), run by `scripts/physical-cluster up` from the binaries
/// `scripts/test` builds; it stops when the test binary exits (`WATCH_PID`).
pub struct PhysicalCluster {
    pub dir: PathBuf,
    _runner: Mutex<Child>,
}

impl PhysicalCluster {
    /// The two clusters the tests share, `east` and `west`, started at once by the first test
    /// that asks.
    pub fn shared() -> &'static [PhysicalCluster; 2] {
        static SHARED: OnceLock<[PhysicalCluster; 2]> = OnceLock::new();
        SHARED.get_or_init(|| {
            let parent = Path::new(env!("CARGO_TARGET_TMPDIR"))
                .join(format!("e2e-physical-clusters-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&parent);
            let east = PhysicalCluster::spawn(&parent.join("east"));
            let west = PhysicalCluster::spawn(&parent.join("west"));
            [east.ready(), west.ready()]
        })
    }

    /// A cluster of the calling test's own in `dir` (made again from what `dir` holds, if a
    /// cluster ran there before), once it is ready.
    pub fn start(dir: &Path) -> PhysicalCluster {
        PhysicalCluster::spawn(dir).ready()
    }

    /// The pid of one of the cluster's processes (`kube-apiserver`, `etcd`, ...).
    pub fn pid_of(&self, process: &str) -> u32 {
        let pids = std::fs::read_to_string(self.dir.join("pids")).unwrap();
        pids.lines()
            .find_map(|line| line.strip_prefix(&format!("{process} ")))
            .and_then(|pid| pid.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {process} in {pids}"))
    }

    /// Stops the cluster (its runner stops every process) and waits for it.
    pub fn stop(&self) {
        let mut runner = self._runner.lock().unwrap();
        let _ = Command::new("kill").arg(runner.id().to_string()).status();
        let _ = runner.wait();
    }

    fn spawn(dir: &Path) -> PhysicalCluster {
        std::fs::create_dir_all(dir).unwrap();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/physical-cluster");
        let log = std::fs::File::create(dir.with_extension("log")).unwrap();
        let mut command = Command::new(script);
        // A restart keeps the cluster's address, so that kubeconfigs handed out stay good.
        if let Ok(port) = std::fs::read_to_string(dir.join("port")) {
            command.env("PORT", port.trim());
        }
        let runner = command
            .arg("up")
            .arg(dir)
            .env("WATCH_PID", std::process::id().to_string())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("run scripts/physical-cluster");
        PhysicalCluster {
            dir: dir.to_path_buf(),
            _runner: Mutex::new(runner),
        }
    }

    /// Waits until the cluster is usable (or its runner gave up, whose log is quoted).
    fn ready(self) -> PhysicalCluster {
        kcp_testing::wait::until_within(
            Duration::from_secs(180),
            &format!("the physical cluster {}", self.dir.display()),
            || {
                if let Ok(Some(status)) = self._runner.lock().unwrap().try_wait() {
                    let log =
                        std::fs::read_to_string(self.dir.with_extension("log")).unwrap_or_default();
                    panic!("scripts/physical-cluster up ended ({status}):\n{log}");
                }
                self.dir.join("ready").exists()
            },
        );
        self
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.join("kubeconfig")
    }

    /// The cluster's name (`east`, `west`).
    pub fn name(&self) -> String {
        self.dir.file_name().unwrap().to_string_lossy().into_owned()
    }

    /// kubectl against the cluster; panics unless it succeeds.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        let output = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(self.kubeconfig())
            .args(args)
            .output()
            .expect("run kubectl");
        assert!(
            output.status.success(),
            "kubectl {args:?} against {}: {}",
            self.name(),
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }
}
