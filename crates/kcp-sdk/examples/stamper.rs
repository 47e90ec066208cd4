//! The stamper controller ([`kcp_sdk::examples::stamper`]) as a program: stamps every
//! ConfigMap labelled `sdk.kcp.io/stamp=true` in every workspace of the kcp server `KUBECONFIG`
//! names; with several replicas, one at a time.
//!
//! ```sh
//! KUBECONFIG=.kcp/admin.kubeconfig cargo run -p kcp-sdk --example stamper -- replica-1 \
//!     --context system:admin
//! ```

use kube::config::{KubeConfigOptions, Kubeconfig};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let mut args = std::env::args().skip(1);
    let mut replica = "stamper".to_string();
    let mut context = None;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--context" => context = args.next(),
            _ => replica = arg,
        }
    }
    let config = match context {
        Some(context) => {
            let options = KubeConfigOptions {
                context: Some(context),
                ..KubeConfigOptions::default()
            };
            kube::Config::from_custom_kubeconfig(Kubeconfig::read()?, &options).await?
        }
        None => kube::Config::infer().await?,
    };
    let stop = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let lease = std::time::Duration::from_secs(15);
    kcp_sdk::examples::stamper::run(kcp_sdk::ClusterConfig::new(config), &replica, lease, stop)
        .await
}
