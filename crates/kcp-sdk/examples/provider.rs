//! The provider controller ([`kcp_sdk::examples::provider`]) as a program: marks every object of
//! an exported resource seen, in every workspace bound to the export, through the export's
//! virtual workspace.
//!
//! ```sh
//! KUBECONFIG=.kcp/admin.kubeconfig cargo run -p kcp-sdk --example provider -- \
//!     root:provider widgets example.io/v1/widgets
//! ```

use kube::api::ApiResource;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [workspace, slice, resource] = args.as_slice() else {
        anyhow::bail!(
            "usage: provider <export's workspace> <endpoint slice> <group>/<version>/<plural>"
        );
    };
    let [group, version, plural] = resource.split('/').collect::<Vec<_>>()[..] else {
        anyhow::bail!("the resource is <group>/<version>/<plural>, not {resource:?}");
    };
    let config = kcp_sdk::ClusterConfig::infer().await?;
    let url = config
        .endpoints(workspace, slice)
        .await?
        .into_iter()
        .next()
        .ok_or_else(|| {
            anyhow::anyhow!("no workspace binds the export yet: the slice lists no URL")
        })?;
    let resource = ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: format!("{group}/{version}"),
        kind: String::new(),
        plural: plural.into(),
    };
    let stop = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    kcp_sdk::examples::provider::run(config.at(&url), resource, stop).await
}
