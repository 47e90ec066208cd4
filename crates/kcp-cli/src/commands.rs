//! The plugin commands: `use` (and its shorthands), `current`, `tree` and `create`, each a
//! few requests and a kubeconfig edit, as kcp's plugin does them.

use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use http::Method;
use kcp_apimachinery::object::str_at;
use serde_json::{Value, json};

use crate::kubeconfig::KubeconfigFile;
use crate::output::{self, Tree};
use crate::paths::{self, ClusterUrl};
use crate::server::{self, Answer, WORKSPACES};

/// How long `create` waits for a new workspace to become Ready.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
const READY_POLL: Duration = Duration::from_millis(100);

fn current_url(file: &KubeconfigFile) -> anyhow::Result<ClusterUrl> {
    let server = file.current_server()?;
    paths::parse_cluster_url(&server)
        .ok_or_else(|| anyhow!("current URL {server:?} does not point to a workspace"))
}

fn print_current(server: &str, short: bool, ty: Option<(&str, &str)>) {
    if let Some(line) = output::current_workspace(server, short, ty) {
        println!("{line}");
    }
}

/// `(path, name)` of a Workspace's type.
fn workspace_type(workspace: &Value) -> (String, String) {
    (
        str_at(workspace, &["spec", "type", "path"]).to_string(),
        str_at(workspace, &["spec", "type", "name"]).to_string(),
    )
}

/// The path of the user's home workspace (`GET root/workspaces/~`).
async fn home_path(file: &KubeconfigFile, url: &ClusterUrl) -> anyhow::Result<String> {
    let client = server::client(file, &url.with_path("root")).await?;
    let home = match server::send(&client, Method::GET, &format!("{WORKSPACES}/~"), None).await? {
        Answer::Ok(home) => home,
        failed => return Err(server::failure(failed)),
    };
    let home_url = str_at(&home, &["spec", "URL"]);
    paths::parse_cluster_url(home_url)
        .map(|u| u.path)
        .ok_or_else(|| anyhow!("invalid home workspace URL {home_url:?}"))
}

/// `kubectl ws [use] <name>`: moves the kubeconfig to another workspace.
pub async fn use_workspace(
    file: &mut KubeconfigFile,
    typed: Option<&str>,
    short: bool,
) -> anyhow::Result<()> {
    let home_dir = std::env::var("HOME").ok();
    let (mut name, note) = paths::normalise(typed.unwrap_or_default(), home_dir.as_deref());
    if let (Some(note), false) = (note, short) {
        eprintln!("{note}");
    }
    let went_home = name.is_empty();
    if went_home {
        name = "~".into();
    }
    file.current_context()?;
    match name.as_str() {
        "-" => {
            let server = file.swap()?;
            file.save()?;
            print_current(&server, short, None);
            return Ok(());
        }
        "." => {
            print_current(&file.current_server()?, short, None);
            return Ok(());
        }
        ":" => {
            let url = current_url(file)?;
            let root = url.path.split(':').next().unwrap_or("root").to_string();
            let server = url.with_path(&root);
            file.enter(&server)?;
            file.save()?;
            print_current(&server, short, None);
            return Ok(());
        }
        _ => {}
    }
    let url = current_url(file)?;
    if name == "~" || name.starts_with("~:") {
        let home = home_path(file, &url).await?;
        name = format!(":{home}{}", &name[1..]);
    }
    let path = paths::resolve(&url.path, &name)?;
    let target = url.with_path(&path);

    // The workspace must answer discovery; its Workspace in the parent gives its type.
    let client = server::client(file, &target).await?;
    match server::send(&client, Method::GET, "/api", None).await? {
        Answer::Ok(_) => {}
        Answer::Failed { code: 403, .. } => bail!("access to workspace {path:?} denied"),
        Answer::Failed { code: 404, .. } => bail!("workspace {path:?} not found"),
        failed => return Err(server::failure(failed)),
    }
    let ty = if path == "root" {
        Some((String::new(), "root".to_string()))
    } else if let Some(parent) = paths::parent(&path) {
        let client = server::client(file, &url.with_path(parent)).await?;
        let own = format!("{WORKSPACES}/{}", paths::base_name(&path));
        match server::send(&client, Method::GET, &own, None).await? {
            Answer::Ok(workspace) => Some(workspace_type(&workspace)),
            Answer::Failed { .. } => None,
        }
    } else {
        None
    };
    file.enter(&target)?;
    file.save()?;
    print_current(
        &target,
        short,
        ty.as_ref().map(|(p, n)| (p.as_str(), n.as_str())),
    );
    if went_home && !short {
        eprintln!(
            "Note: 'kubectl ws' now matches 'cd' semantics: go to home workspace. 'kubectl ws -' to go back. 'kubectl ws .' to print current workspace."
        );
    }
    Ok(())
}

/// `kubectl ws current` / `kubectl ws .`.
pub fn current(file: &KubeconfigFile, short: bool) -> anyhow::Result<()> {
    print_current(&file.current_server()?, short, None);
    Ok(())
}

/// The workspaces under `path`, recursively.
fn subtree<'a>(
    file: &'a KubeconfigFile,
    url: &'a ClusterUrl,
    path: String,
    label: String,
    full: bool,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = anyhow::Result<Tree>> + 'a>> {
    Box::pin(async move {
        let client = server::client(file, &url.with_path(&path)).await?;
        let children = match server::send(&client, Method::GET, WORKSPACES, None).await? {
            Answer::Ok(list) => list["items"].as_array().cloned().unwrap_or_default(),
            Answer::Failed { .. } => Vec::new(),
        };
        let mut tree = Tree {
            label,
            children: Vec::new(),
        };
        for child in children {
            let Some(name) = child["metadata"]["name"].as_str() else {
                continue;
            };
            let child_path = format!("{path}:{name}");
            let label = if full {
                child_path.clone()
            } else {
                name.to_string()
            };
            tree.children
                .push(subtree(file, url, child_path, label, full).await?);
        }
        Ok(tree)
    })
}

/// `kubectl ws tree`: the workspaces under the current one.
pub async fn tree(file: &KubeconfigFile, full: bool) -> anyhow::Result<()> {
    let server = file.current_server()?;
    let Some(url) = paths::parse_cluster_url(&server) else {
        println!("current context URL {server:?} does not point directly to a kcp workspace");
        return Ok(());
    };
    let label = if full {
        url.path.clone()
    } else {
        paths::base_name(&url.path).to_string()
    };
    let tree = subtree(file, &url, url.path.clone(), label, full).await?;
    println!("{}", tree.render());
    Ok(())
}

/// What `create` is asked for.
pub struct CreateOptions {
    pub name: String,
    /// `[path:]name` of the type.
    pub type_name: Option<String>,
    pub enter: bool,
    pub ignore_existing: bool,
}

/// `kubectl create-workspace` / `kubectl ws create`.
pub async fn create(file: &mut KubeconfigFile, options: CreateOptions) -> anyhow::Result<()> {
    let url = current_url(file)?;
    let requested_type = options
        .type_name
        .as_deref()
        .map(|t| match t.rsplit_once(':') {
            Some((path, name)) => (path.to_string(), name.to_lowercase()),
            None => (String::new(), t.to_lowercase()),
        });
    if options.ignore_existing
        && requested_type
            .as_ref()
            .is_some_and(|(path, _)| path != "root" && !path.starts_with("root:"))
    {
        bail!("--ignore-existing must not be used with non-absolute type path");
    }
    let mut workspace = json!({
        "apiVersion": "tenancy.kcp.io/v1alpha1",
        "kind": "Workspace",
        "metadata": {"name": options.name},
    });
    if let Some((path, name)) = &requested_type {
        workspace["spec"] = json!({"type": {"name": name}});
        if !path.is_empty() {
            workspace["spec"]["type"]["path"] = json!(path);
        }
    }
    let client = server::client(file, &url.with_path(&url.path)).await?;
    let own = format!("{WORKSPACES}/{}", options.name);
    let (mut workspace, existed) =
        match server::send(&client, Method::POST, WORKSPACES, Some(&workspace)).await? {
            Answer::Ok(created) => (created, false),
            Answer::Failed { code: 409, .. } if options.ignore_existing => {
                match server::send(&client, Method::GET, &own, None).await? {
                    Answer::Ok(found) => (found, true),
                    failed => return Err(server::failure(failed)),
                }
            }
            failed => return Err(server::failure(failed)),
        };
    let (path, name) = workspace_type(&workspace);
    let reference = format!(
        "Workspace {:?} (type {})",
        options.name,
        output::type_name(&path, &name)
    );
    let ready = |w: &Value| w["status"]["phase"] == "Ready";
    if existed {
        if let Some((want_path, want_name)) = &requested_type
            && (*want_name != name || *want_path != path)
        {
            bail!(
                "workspace {:?} cannot be created with type {}, it already exists with different type {}",
                options.name,
                output::type_name(want_path, want_name),
                output::type_name(&path, &name)
            );
        }
        if ready(&workspace) {
            println!("{reference} already exists.");
        } else {
            println!("{reference} already exists. Waiting for it to be ready...");
        }
    } else if !ready(&workspace) {
        println!("{reference} created. Waiting for it to be ready...");
    }
    let deadline = Instant::now() + READY_TIMEOUT;
    while !ready(&workspace) {
        if Instant::now() > deadline {
            bail!("{reference} created but is not ready to use");
        }
        tokio::time::sleep(READY_POLL).await;
        workspace = match server::send(&client, Method::GET, &own, None).await? {
            Answer::Ok(found) => found,
            failed => return Err(server::failure(failed)),
        };
    }
    println!("{reference} is ready to use.");
    if options.enter {
        let target = format!(":{}:{}", url.path, options.name);
        use_workspace(file, Some(&target), false)
            .await
            .context("entering the new workspace")?;
    }
    Ok(())
}
