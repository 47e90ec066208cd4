//! Running `kcp start` and kubectl from tests.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use kcp_testing::output::Lines;

/// Writes `text` to the file `name` in `dir` and returns its path.
pub fn write_file(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

/// A running `kcp start`, killed on drop unless stopped.
pub struct Kcp {
    child: Option<Child>,
    pub root: PathBuf,
    /// What the server logs after it said it is ready.
    log: Mutex<Lines>,
}

impl Kcp {
    /// Starts kcp on a free loopback port with `root` as its root directory and `args` added,
    /// and waits until it says it is ready to serve.
    pub fn start(root: &Path, args: &[&str]) -> Kcp {
        let mut child = Command::new(env!("CARGO_BIN_EXE_kcp"))
            .arg("start")
            .arg("--root-directory")
            .arg(root)
            .args(["--secure-port", "0", "--bind-address", "127.0.0.1"])
            .args(args)
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
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
        Kcp {
            child: Some(child),
            root: root.to_path_buf(),
            log: Mutex::new(log),
        }
    }

    /// Waits until the server logs a line containing `needle` (one logged since the last wait);
    /// the test fails if it does not within `kcp_testing::wait::DEADLINE`.
    pub fn wait_for_log(&self, needle: &str) -> String {
        self.log.lock().unwrap().find(needle)
    }

    /// The process id of the running server.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.root.join("admin.kubeconfig")
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

    /// Runs kubectl against the logical cluster `cluster` (its `/clusters/<cluster>` URL).
    pub fn kubectl_in(&self, cluster: &str, args: &[&str]) -> Output {
        let server = format!("--server={}/clusters/{cluster}", self.base_url());
        let mut all = vec![server.as_str()];
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

    /// Creates the workspace `name` in root, waits until it is Ready and returns its path
    /// (`root:<name>`), for tests that want a logical cluster of their own.
    pub fn workspace(&self, name: &str) -> String {
        let path =
            std::env::temp_dir().join(format!("kcp-e2e-ws-{}-{name}.yaml", std::process::id()));
        std::fs::write(
            &path,
            format!(
                "apiVersion: tenancy.kcp.io/v1alpha1\nkind: Workspace\nmetadata:\n  name: {name}\n"
            ),
        )
        .unwrap();
        let file = path.to_string_lossy().into_owned();
        self.kubectl_in_ok("root", &["create", "-f", &file]);
        let _ = std::fs::remove_file(&path);
        self.kubectl_in_ok(
            "root",
            &[
                "wait",
                "--for=jsonpath={.status.phase}=Ready",
                &format!("workspace/{name}"),
                "--timeout=10s",
            ],
        );
        format!("root:{name}")
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
        self.kube_client_in("root").await
    }

    /// A kube-rs client whose requests go to `/clusters/<cluster>` (a path, a name or `*`).
    pub async fn kube_client_in(&self, cluster: &str) -> kube::Client {
        kube::Client::try_from(self.kube_config_in(cluster).await).unwrap()
    }

    /// The kube-rs configuration of [`Kcp::kube_client_in`], for tests that make several
    /// clients (each its own connections).
    pub async fn kube_config_in(&self, cluster: &str) -> kube::Config {
        use kube::config::{KubeConfigOptions, Kubeconfig};
        let kubeconfig = Kubeconfig::read_from(self.kubeconfig()).unwrap();
        let mut config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
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

    /// Sends SIGTERM and requires a clean exit.
    pub fn stop(mut self) {
        let mut child = self.child.take().unwrap();
        // Our own child, not reaped yet: its pid is still its own.
        kcp_testing::signal::terminate(child.id()).expect("SIGTERM kcp");
        let status = child.wait().unwrap();
        assert!(status.success(), "kcp exited with {status}");
    }
}

impl Drop for Kcp {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
