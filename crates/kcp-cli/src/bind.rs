//! `kubectl kcp bind apiexport <path>:<export>`: creates an APIBinding to an export in the
//! current workspace and waits until it is Bound, with kcp's flags and messages. Accepted and
//! rejected permission claims are written as kcp's plugin writes them (every verb, all
//! objects).

use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use clap::{Args, Parser, Subcommand};
use http::Method;
use serde_json::{Value, json};

use crate::kubeconfig::KubeconfigFile;
use crate::paths;
use crate::server::{self, Answer};

const BINDINGS: &str = "/apis/apis.kcp.io/v1alpha2/apibindings";

#[derive(Parser)]
#[command(
    name = "kubectl kcp bind",
    about = "Bind different types into the current workspace"
)]
pub struct BindCli {
    /// The kubeconfig to use (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long, global = true)]
    pub kubeconfig: Option<std::path::PathBuf>,
    #[command(subcommand)]
    pub command: BindCommand,
}

#[derive(Subcommand)]
pub enum BindCommand {
    /// Bind to an APIExport: `<path>:<apiexport>`.
    #[command(name = "apiexport")]
    ApiExport(BindArgs),
}

#[derive(Args)]
pub struct BindArgs {
    /// The APIExport, `<full>:<path>:<to>:<apiexport>`.
    reference: String,
    /// Name of the APIBinding to create.
    #[arg(long)]
    name: Option<String>,
    /// Duration to wait for APIBinding to be created successfully.
    #[arg(long, default_value = "30s")]
    timeout: String,
    /// List of accepted permission claims for the APIBinding. Format: resource.group
    #[arg(long = "accept-permission-claim", value_delimiter = ',')]
    accept: Vec<String>,
    /// List of rejected permission claims for the APIBinding. Format: resource.group
    #[arg(long = "reject-permission-claim", value_delimiter = ',')]
    reject: Vec<String>,
    /// Accept all permission claims from the APIExport.
    #[arg(long = "accept-all-permission-claims")]
    accept_all: bool,
    /// Reject all permission claims from the APIExport.
    #[arg(long = "reject-all-permission-claims")]
    reject_all: bool,
}

/// A Go duration as the flag takes it (`500ms`, `30s`, `2m`, `1h`).
fn duration(text: &str) -> anyhow::Result<Duration> {
    let split = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number
        .parse()
        .with_context(|| format!("invalid duration {text:?}"))?;
    let seconds = match unit {
        "ms" => number / 1000.0,
        "s" | "" => number,
        "m" => number * 60.0,
        "h" => number * 3600.0,
        _ => bail!("invalid duration {text:?}"),
    };
    Ok(Duration::from_secs_f64(seconds))
}

/// `resource.group` (group `core` is the core group) as an accepted or rejected claim.
fn claim(text: &str, state: &str) -> anyhow::Result<Value> {
    let Some((resource, group)) = text.split_once('.') else {
        bail!("invalid permission claim {text:?}");
    };
    let group = if group == "core" { "" } else { group };
    Ok(claim_of(group, resource, state))
}

fn claim_of(group: &str, resource: &str, state: &str) -> Value {
    json!({
        "group": group, "resource": resource, "verbs": ["*"],
        "selector": {"matchAll": true}, "state": state,
    })
}

/// Checks the flags as kcp's plugin does, before anything is sent.
fn check(args: &BindArgs) -> anyhow::Result<()> {
    let conflicts = [
        (
            args.accept_all && args.reject_all,
            "cannot use both --accept-all-permission-claims and --reject-all-permission-claims",
        ),
        (
            args.accept_all && !args.accept.is_empty(),
            "cannot use --accept-all-permission-claims with --accept-permission-claim",
        ),
        (
            args.accept_all && !args.reject.is_empty(),
            "cannot use --accept-all-permission-claims together with --reject-permission-claim",
        ),
        (
            args.reject_all && !args.reject.is_empty(),
            "cannot use --reject-all-permission-claims with --reject-permission-claim",
        ),
        (
            args.reject_all && !args.accept.is_empty(),
            "cannot use --reject-all-permission-claims together with --accept-permission-claim",
        ),
    ];
    if let Some((_, message)) = conflicts.iter().find(|(conflict, _)| *conflict) {
        bail!("{message}");
    }
    let path = args.reference.rsplit_once(':').map(|(path, _)| path);
    if !path.is_some_and(paths::valid_path) {
        bail!(
            "fully qualified reference to workspace where APIExport exists is required. The format is `<logical-cluster-name>:<apiexport>` or `<full>:<path>:<to>:<apiexport>`"
        );
    }
    for accepted in &args.accept {
        if args.reject.contains(accepted) {
            bail!(
                "accepted permission claim {accepted} conflicts with rejected permission claim {accepted}"
            );
        }
    }
    Ok(())
}

/// `kubectl kcp bind apiexport`.
pub async fn bind(file: &KubeconfigFile, args: BindArgs) -> anyhow::Result<()> {
    check(&args)?;
    let timeout = duration(&args.timeout)?;
    let (path, export) = args
        .reference
        .rsplit_once(':')
        .expect("checked: a path and a name");
    let mut claims = Vec::new();
    for accepted in &args.accept {
        claims.push(claim(accepted, "Accepted").context("invalid accepted permission claims")?);
    }
    for rejected in &args.reject {
        claims.push(claim(rejected, "Rejected").context("invalid rejected permission claims")?);
    }
    let server = file.current_server()?;
    let url = paths::parse_cluster_url(&server)
        .ok_or_else(|| anyhow!("current URL {server:?} does not point to workspace"))?;
    if args.accept_all || args.reject_all {
        let state = if args.accept_all {
            "Accepted"
        } else {
            "Rejected"
        };
        let client = server::client(file, &url.with_path(path)).await?;
        let exports = format!("/apis/apis.kcp.io/v1alpha2/apiexports/{export}");
        let found = match server::send(&client, Method::GET, &exports, None).await? {
            Answer::Ok(found) => found,
            failed => {
                return Err(server::failure(failed))
                    .with_context(|| format!("failed to get APIExport {export:?}"));
            }
        };
        for c in found["spec"]["permissionClaims"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let text = |field: &str| c[field].as_str().unwrap_or_default().to_string();
            claims.push(claim_of(&text("group"), &text("resource"), state));
        }
    }
    let name = args.name.clone().unwrap_or_else(|| export.to_string());
    let mut binding = json!({
        "apiVersion": "apis.kcp.io/v1alpha2",
        "kind": "APIBinding",
        "metadata": {"name": name},
        "spec": {"reference": {"export": {"path": path, "name": export}}},
    });
    if !claims.is_empty() {
        binding["spec"]["permissionClaims"] = Value::Array(claims);
    }
    let client = server::client(file, &url.with_path(&url.path)).await?;
    let mut binding = match server::send(&client, Method::POST, BINDINGS, Some(&binding)).await? {
        Answer::Ok(created) => created,
        failed => return Err(server::failure(failed)).context("failed to create APIBinding"),
    };
    println!("apibinding {name} created. Waiting to successfully bind ...");
    let deadline = Instant::now() + timeout;
    let own = format!("{BINDINGS}/{name}");
    while binding["status"]["phase"] != "Bound" {
        if Instant::now() > deadline {
            bail!("could not bind {name}: context deadline exceeded");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        binding = match server::send(&client, Method::GET, &own, None).await? {
            Answer::Ok(found) => found,
            failed => {
                return Err(server::failure(failed))
                    .with_context(|| format!("could not bind {name}"));
            }
        };
    }
    println!("{name} created and bound.");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(reference: &str) -> BindArgs {
        BindArgs {
            reference: reference.into(),
            name: None,
            timeout: "30s".into(),
            accept: Vec::new(),
            reject: Vec::new(),
            accept_all: false,
            reject_all: false,
        }
    }

    #[test]
    fn the_export_needs_a_workspace_path() {
        assert!(check(&args("root:provider:widgets")).is_ok());
        let error = check(&args("widgets")).unwrap_err().to_string();
        assert!(error.starts_with("fully qualified reference"), "{error}");
        let mut both = args("root:w");
        both.accept_all = true;
        both.reject_all = true;
        assert!(check(&both).is_err());
    }

    #[test]
    fn claims_are_resource_dot_group() {
        assert_eq!(
            claim("configmaps.core", "Accepted").unwrap(),
            json!({"group": "", "resource": "configmaps", "verbs": ["*"],
                   "selector": {"matchAll": true}, "state": "Accepted"})
        );
        assert_eq!(
            claim("widgets.example.io", "Rejected").unwrap()["group"],
            "example.io"
        );
        assert!(claim("configmaps", "Accepted").is_err());
        assert_eq!(duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(duration("2m").unwrap(), Duration::from_secs(120));
    }
}
