//! The kcp kubectl plugins, as kcp ships them: `kubectl ws` (move between workspaces, show the
//! current one, draw the tree, create), `kubectl create-workspace`, and `kubectl kcp`, whose
//! `workspace` (`ws`) command is `kubectl ws`, whose `crd snapshot` writes a CRD as an
//! APIResourceSchema ([`snapshot`]) and whose `bind apiexport` binds an export ([`bind`]). The binaries live in the `kcp` package and call
//! [`ws_main`], [`create_workspace_main`] and [`kcp_main`].
//!
//! - [`paths`]: workspace path arithmetic (`..`, `:absolute`, server URLs);
//! - [`kubeconfig`]: the `workspace.kcp.io/current` and `/previous` contexts;
//! - `server`: requests through kube-rs with the current context's credentials;
//! - `output`: kcp's messages and tree drawing; `commands`: the commands themselves.
//!
//! It knows the server only through HTTP (kube-rs), never its crates.

pub mod bind;
pub mod cluster;
pub mod cluster_controller;
mod commands;
pub mod compat;
pub mod kubeconfig;
mod metrics_server;
mod output;
pub mod paths;
mod server;
pub mod snapshot;
pub mod splitter;
pub mod syncer;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};

use crate::commands::CreateOptions;
use crate::kubeconfig::KubeconfigFile;

#[derive(Parser)]
#[command(
    name = "kubectl ws",
    about = "Manages kcp workspaces: `kubectl ws <name>` enters one (relative, `:absolute`, `..`, `-`, `~`)",
    args_conflicts_with_subcommands = true
)]
struct WsCli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Option<WsCommand>,
    /// The workspace to enter: a name, a relative path, `:root:a`, `..`, `-`, `~`, `.`.
    name: Option<String>,
}

#[derive(Args)]
struct Global {
    /// The kubeconfig to use and edit (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long, global = true)]
    kubeconfig: Option<PathBuf>,
    /// Print only the workspace path.
    #[arg(long, global = true)]
    short: bool,
}

#[derive(Subcommand)]
enum WsCommand {
    /// Enter a workspace.
    #[command(alias = "cd")]
    Use { name: Option<String> },
    /// Print the current workspace.
    Current,
    /// Draw the tree of workspaces under the current one.
    Tree {
        /// Show full workspace paths.
        #[arg(short, long)]
        full: bool,
    },
    /// Create a workspace in the current one.
    Create(CreateArgs),
}

#[derive(Args)]
struct CreateArgs {
    /// The new workspace's name.
    name: String,
    /// Its type, `[path:]name` (by default the parent type's default child type).
    #[arg(long = "type")]
    type_name: Option<String>,
    /// Enter it once it is ready.
    #[arg(long)]
    enter: bool,
    /// Do not fail if it already exists.
    #[arg(long)]
    ignore_existing: bool,
}

impl From<CreateArgs> for CreateOptions {
    fn from(args: CreateArgs) -> Self {
        CreateOptions {
            name: args.name,
            type_name: args.type_name,
            enter: args.enter,
            ignore_existing: args.ignore_existing,
        }
    }
}

#[derive(Parser)]
#[command(name = "kubectl create-workspace", about = "Creates a kcp workspace")]
struct CreateWorkspaceCli {
    #[command(flatten)]
    global: Global,
    #[command(flatten)]
    create: CreateArgs,
}

#[derive(Parser)]
#[command(name = "kubectl kcp crd", about = "CRD related operations")]
struct CrdCli {
    #[command(subcommand)]
    command: CrdCommand,
}

#[derive(Subcommand)]
enum CrdCommand {
    /// Snapshot a CRD and convert it to an APIResourceSchema.
    Snapshot {
        /// Path to a file containing the CRD to convert to an APIResourceSchema, or - for stdin.
        #[arg(short = 'f', long = "filename")]
        filename: String,
        /// Prefix to use for the APIResourceSchema's name, before <resource>.<group>.
        #[arg(long)]
        prefix: String,
        /// Output format. Valid values are 'json' and 'yaml'.
        #[arg(short = 'o', long = "output", default_value = "yaml", value_parser = ["json", "yaml"])]
        output: String,
    },
    /// Check that a new CRD's schema accepts everything an old one's does.
    Compat(CompatArgs),
    /// Pull CRDs of the current cluster's resources (`deployments.apps`, `pods`, ...).
    Pull(PullArgs),
}

/// `crd-puller`'s arguments.
#[derive(clap::Args)]
struct PullArgs {
    /// The kubeconfig to use (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Output format: YAML documents, or one JSON `List`.
    #[arg(short = 'o', long = "output", default_value = "yaml", value_parser = ["json", "yaml"])]
    output: String,
    /// The resources, as `plural[.group]` (`pods`, `deployments.apps`, `widgets.example.com`).
    #[arg(required = true)]
    resources: Vec<String>,
}

#[derive(Parser)]
#[command(
    name = "crd-puller",
    about = "Writes CRDs of a cluster's resources from its discovery and OpenAPI"
)]
struct PullCli {
    #[command(flatten)]
    args: PullArgs,
}

/// `crd-puller`: the CRDs as YAML documents.
fn pull(args: PullArgs) -> ExitCode {
    finish(block_on(async move {
        let file = KubeconfigFile::load(kubeconfig::locate(args.kubeconfig.as_deref())?)?;
        let client = server::client(&file, &file.current_server()?).await?;
        let crds = kcp_physical::puller::pull(&client, &args.resources).await?;
        if args.output == "json" {
            let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": crds});
            println!("{}", serde_json::to_string_pretty(&list)?);
            return Ok(());
        }
        for crd in crds {
            print!("---\n{}", serde_saphyr::to_string(&crd)?);
        }
        Ok(())
    }))
}

/// The `crd-puller` binary.
pub fn puller_main() -> ExitCode {
    pull(PullCli::parse().args)
}

/// `compat`'s arguments.
#[derive(clap::Args)]
struct CompatArgs {
    /// Write the least common denominator of both schemas (the old CRD, narrowed).
    #[arg(long)]
    lcd: bool,
    /// The version of the old CRD to compare (default: its storage version).
    #[arg(long)]
    old_version: Option<String>,
    /// The version of the new CRD to compare (default: its storage version).
    #[arg(long)]
    new_version: Option<String>,
    /// The old CRD (YAML or JSON).
    old: String,
    /// The new CRD (YAML or JSON).
    new: String,
}

#[derive(Parser)]
#[command(
    name = "compat",
    about = "Checks that a new CRD's schema accepts everything an old one's does"
)]
struct CompatCli {
    #[command(flatten)]
    args: CompatArgs,
}

/// `compat`: prints the incompatibilities (failing) or the LCD.
fn compat(args: CompatArgs) -> ExitCode {
    let read =
        |path: &str| std::fs::read_to_string(path).with_context(|| format!("error opening {path}"));
    let answer = read(&args.old).and_then(|old| {
        let new = read(&args.new)?;
        compat::compat(
            &old,
            &new,
            args.lcd,
            args.old_version.as_deref(),
            args.new_version.as_deref(),
        )
    });
    match answer {
        Ok(answer) if answer.compatible => {
            print!("{}", answer.text);
            ExitCode::SUCCESS
        }
        Ok(answer) => {
            eprint!("{}", answer.text);
            ExitCode::FAILURE
        }
        Err(error) => finish(Err(error)),
    }
}

/// The `compat` binary.
pub fn compat_main() -> ExitCode {
    compat(CompatCli::parse().args)
}

fn crd(cli: CrdCli) -> ExitCode {
    let (filename, prefix, output) = match cli.command {
        CrdCommand::Snapshot {
            filename,
            prefix,
            output,
        } => (filename, prefix, output),
        CrdCommand::Compat(args) => return compat(args),
        CrdCommand::Pull(args) => return pull(args),
    };
    finish(snapshot_file(&filename, &prefix, &output))
}

fn snapshot_file(filename: &str, prefix: &str, output: &str) -> anyhow::Result<()> {
    let text = if filename == "-" {
        std::io::read_to_string(std::io::stdin()).context("reading standard input")?
    } else {
        std::fs::read_to_string(filename).with_context(|| format!("error opening {filename}"))?
    };
    print!("{}", snapshot::snapshot_text(&text, prefix, output)?);
    Ok(())
}

fn load(global: &Global) -> anyhow::Result<KubeconfigFile> {
    KubeconfigFile::load(kubeconfig::locate(global.kubeconfig.as_deref())?)
}

async fn run_ws(cli: WsCli) -> anyhow::Result<()> {
    let mut file = load(&cli.global)?;
    let short = cli.global.short;
    match cli.command {
        None => commands::use_workspace(&mut file, cli.name.as_deref(), short).await,
        Some(WsCommand::Use { name }) => {
            commands::use_workspace(&mut file, name.as_deref(), short).await
        }
        Some(WsCommand::Current) => commands::current(&file, short),
        Some(WsCommand::Tree { full }) => commands::tree(&file, full).await,
        Some(WsCommand::Create(args)) => commands::create(&mut file, args.into()).await,
    }
}

fn finish(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("Error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Resolves on SIGINT or SIGTERM: when the long-running commands (`cluster-controller`,
/// `syncer`, `deployment-splitter`) stop.
fn shutdown_signal() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    Ok(async move {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = terminate.recv() => {}
        }
    })
}

fn block_on(work: impl std::future::Future<Output = anyhow::Result<()>>) -> anyhow::Result<()> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(work)
}

/// `kubectl ws` with these arguments (the first is the program name).
pub fn ws(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    let cli = WsCli::parse_from(args);
    finish(block_on(run_ws(cli)))
}

/// The `kubectl-ws` binary.
pub fn ws_main() -> ExitCode {
    ws(std::env::args_os())
}

/// The `kubectl-create-workspace` binary.
pub fn create_workspace_main() -> ExitCode {
    let cli = CreateWorkspaceCli::parse();
    finish(block_on(async move {
        let mut file = load(&cli.global)?;
        commands::create(&mut file, cli.create.into()).await
    }))
}

/// The `kubectl-kcp` binary: `kubectl kcp workspace|ws|workspaces ...` is `kubectl ws ...`.
pub fn kcp_main() -> ExitCode {
    let mut args: Vec<OsString> = std::env::args_os().collect();
    match args.get(1).and_then(|a| a.to_str()) {
        Some("workspace" | "workspaces" | "ws") => {
            args.remove(1);
            ws(args)
        }
        Some("create-workspace") => {
            args.remove(1);
            let cli = CreateWorkspaceCli::parse_from(args);
            finish(block_on(async move {
                let mut file = load(&cli.global)?;
                commands::create(&mut file, cli.create.into()).await
            }))
        }
        Some("crd") => {
            args.remove(1);
            let cli = CrdCli::parse_from(args);
            crd(cli)
        }
        Some("bind") => {
            args.remove(1);
            let cli = bind::BindCli::parse_from(args);
            finish(block_on(async move {
                let file = KubeconfigFile::load(kubeconfig::locate(cli.kubeconfig.as_deref())?)?;
                let bind::BindCommand::ApiExport(args) = cli.command;
                bind::bind(&file, args).await
            }))
        }
        Some("cluster") => {
            args.remove(1);
            let cli = cluster::ClusterCli::parse_from(args);
            finish(block_on(async move {
                let file = KubeconfigFile::load(kubeconfig::locate(cli.kubeconfig.as_deref())?)?;
                cluster::run(&file, cli.command).await
            }))
        }
        _ => {
            eprintln!(
                "kubectl kcp: kcp's kubectl plugin\n\nCommands:\n  workspace (ws)     manage workspaces, as `kubectl ws`\n  create-workspace   create a workspace, as `kubectl create-workspace`\n  crd snapshot       convert a CRD to an APIResourceSchema\n  crd compat         check that a new CRD accepts everything an old one does\n  crd pull           write CRDs of the current cluster's resources\n  bind apiexport     bind an APIExport into the current workspace\n  cluster cordon|uncordon|drain\n                     take a physical cluster out of placement, or put it back"
            );
            ExitCode::FAILURE
        }
    }
}
