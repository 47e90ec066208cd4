//! The kubeconfig the plugins read and edit, as kcp's plugin edits it: the current workspace is
//! the cluster and context `workspace.kcp.io/current` (a copy of the current context's cluster
//! with the workspace's URL as server, and the current context's user), the one before it is
//! kept as `workspace.kcp.io/previous`, and `current-context` points at the current one.
//! Everything else in the file is left as it was.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, anyhow};
use kube::config::{Context, Kubeconfig, NamedCluster, NamedContext};

/// The context and cluster of the current workspace.
pub const CURRENT: &str = "workspace.kcp.io/current";
/// The context and cluster of the workspace used before it.
pub const PREVIOUS: &str = "workspace.kcp.io/previous";

/// A kubeconfig file, loaded for editing.
pub struct KubeconfigFile {
    pub path: PathBuf,
    pub config: Kubeconfig,
}

/// Which file to use: `--kubeconfig`, else the first of `$KUBECONFIG`, else `~/.kube/config`.
pub fn locate(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(path) = explicit {
        return Ok(path.to_path_buf());
    }
    if let Some(list) = std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty())
        && let Some(first) = std::env::split_paths(&list).next()
    {
        return Ok(first);
    }
    let home = std::env::var_os("HOME").ok_or_else(|| anyhow!("no kubeconfig: set KUBECONFIG"))?;
    Ok(PathBuf::from(home).join(".kube").join("config"))
}

impl KubeconfigFile {
    pub fn load(path: PathBuf) -> anyhow::Result<KubeconfigFile> {
        let config = Kubeconfig::read_from(&path)
            .with_context(|| format!("reading kubeconfig {}", path.display()))?;
        Ok(KubeconfigFile { path, config })
    }

    pub fn save(&self) -> anyhow::Result<()> {
        let text = serde_saphyr::to_string(&self.config).context("encoding the kubeconfig")?;
        std::fs::write(&self.path, text)
            .with_context(|| format!("writing kubeconfig {}", self.path.display()))
    }

    fn context(&self, name: &str) -> Option<&Context> {
        self.config
            .contexts
            .iter()
            .find(|c| c.name == name)
            .and_then(|c| c.context.as_ref())
    }

    fn cluster(&self, name: &str) -> Option<&NamedCluster> {
        self.config.clusters.iter().find(|c| c.name == name)
    }

    /// The name of the current context.
    pub fn current_context_name(&self) -> anyhow::Result<&str> {
        self.config
            .current_context
            .as_deref()
            .ok_or_else(|| anyhow!("current \"\" context not found"))
    }

    /// The current context.
    pub fn current_context(&self) -> anyhow::Result<Context> {
        let name = self.current_context_name()?;
        self.context(name)
            .cloned()
            .ok_or_else(|| anyhow!("current {name:?} context not found"))
    }

    /// The server URL of the current context.
    pub fn current_server(&self) -> anyhow::Result<String> {
        let context = self.current_context()?;
        self.cluster(&context.cluster)
            .and_then(|c| c.cluster.as_ref())
            .and_then(|c| c.server.clone())
            .ok_or_else(|| anyhow!("cluster {:?} not found in kubeconfig", context.cluster))
    }

    fn put_cluster(&mut self, named: NamedCluster) {
        self.config.clusters.retain(|c| c.name != named.name);
        self.config.clusters.push(named);
    }

    fn put_context(&mut self, name: &str, context: Context) {
        self.config.contexts.retain(|c| c.name != name);
        self.config.contexts.push(NamedContext {
            name: name.to_string(),
            context: Some(context),
            ..NamedContext::default()
        });
    }

    /// Makes `server` the current workspace, keeping the current one as the previous.
    pub fn enter(&mut self, server: &str) -> anyhow::Result<()> {
        let mut current = self.current_context()?;
        let old_cluster = self
            .cluster(&current.cluster)
            .cloned()
            .ok_or_else(|| anyhow!("cluster {:?} not found in kubeconfig", current.cluster))?;
        let mut new_cluster = old_cluster.clone();
        new_cluster.name = CURRENT.to_string();
        if let Some(cluster) = new_cluster.cluster.as_mut() {
            cluster.server = Some(server.to_string());
        }
        let mut new_context = current.clone();
        new_context.cluster = CURRENT.to_string();
        if current.cluster == CURRENT {
            current.cluster = PREVIOUS.to_string();
            self.put_cluster(NamedCluster {
                name: PREVIOUS.to_string(),
                ..old_cluster
            });
        }
        self.put_cluster(new_cluster);
        self.put_context(CURRENT, new_context);
        self.put_context(PREVIOUS, current);
        self.config.current_context = Some(CURRENT.to_string());
        Ok(())
    }

    /// Swaps the current and the previous workspace (`kubectl ws -`); answers the new server.
    pub fn swap(&mut self) -> anyhow::Result<String> {
        let mut current = self.current_context()?;
        let mut previous = self
            .context(PREVIOUS)
            .cloned()
            .ok_or_else(|| anyhow!("no previous workspace found in kubeconfig"))?;
        let current_cluster = self.cluster(&current.cluster).cloned();
        let previous_cluster = self.cluster(&previous.cluster).cloned();
        if current.cluster == CURRENT {
            let cluster = current_cluster
                .ok_or_else(|| anyhow!("cluster {:?} not found in kubeconfig", current.cluster))?;
            current.cluster = PREVIOUS.to_string();
            self.put_cluster(NamedCluster {
                name: PREVIOUS.to_string(),
                ..cluster
            });
        }
        if previous.cluster == PREVIOUS {
            let cluster = previous_cluster
                .ok_or_else(|| anyhow!("cluster {:?} not found in kubeconfig", previous.cluster))?;
            previous.cluster = CURRENT.to_string();
            self.put_cluster(NamedCluster {
                name: CURRENT.to_string(),
                ..cluster
            });
        }
        self.put_context(CURRENT, previous);
        self.put_context(PREVIOUS, current);
        self.config.current_context = Some(CURRENT.to_string());
        self.current_server()
    }
}

/// The kube-rs configuration of `context` (else the current one) of the kubeconfig at `path`.
pub async fn kube_config(path: &Path, context: Option<String>) -> anyhow::Result<kube::Config> {
    let file = KubeconfigFile::load(path.to_path_buf())?;
    let options = kube::config::KubeConfigOptions {
        context,
        ..kube::config::KubeConfigOptions::default()
    };
    Ok(kube::Config::from_custom_kubeconfig(file.config, &options).await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    const START: &str = r#"apiVersion: v1
kind: Config
clusters:
- name: root
  cluster:
    server: "https://h:1/clusters/root"
    certificate-authority-data: "Q0E="
- name: base
  cluster:
    server: "https://h:1"
contexts:
- name: root
  context:
    cluster: root
    user: admin
current-context: root
users:
- name: admin
  user:
    token: "secret"
"#;

    fn file() -> (tempfile::TempDir, KubeconfigFile) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config");
        std::fs::write(&path, START).unwrap();
        let file = KubeconfigFile::load(path).unwrap();
        (dir, file)
    }

    #[test]
    fn entering_keeps_the_previous_and_the_rest() {
        let (_dir, mut file) = file();
        file.enter("https://h:1/clusters/root:a").unwrap();
        file.save().unwrap();
        let mut file = KubeconfigFile::load(file.path.clone()).unwrap();
        assert_eq!(file.current_context_name().unwrap(), CURRENT);
        assert_eq!(
            file.current_server().unwrap(),
            "https://h:1/clusters/root:a"
        );
        assert_eq!(file.context(PREVIOUS).unwrap().cluster, "root");
        assert_eq!(
            file.current_context().unwrap().user.as_deref(),
            Some("admin")
        );
        let ca = file.cluster(CURRENT).unwrap().cluster.as_ref().unwrap();
        assert_eq!(ca.certificate_authority_data.as_deref(), Some("Q0E="));
        assert!(file.cluster("base").is_some());
        let text = std::fs::read_to_string(&file.path).unwrap();
        assert!(text.contains("secret"), "the token is kept: {text}");

        file.enter("https://h:1/clusters/root:a:b").unwrap();
        assert_eq!(file.context(PREVIOUS).unwrap().cluster, PREVIOUS);
        assert_eq!(
            file.cluster(PREVIOUS)
                .unwrap()
                .cluster
                .as_ref()
                .unwrap()
                .server
                .as_deref(),
            Some("https://h:1/clusters/root:a")
        );
        assert_eq!(file.swap().unwrap(), "https://h:1/clusters/root:a");
        assert_eq!(file.swap().unwrap(), "https://h:1/clusters/root:a:b");
    }

    #[test]
    fn swapping_needs_a_previous_workspace() {
        let (_dir, mut file) = file();
        assert_eq!(
            file.swap().unwrap_err().to_string(),
            "no previous workspace found in kubeconfig"
        );
    }
}
