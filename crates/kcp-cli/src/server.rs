//! Talking to kcp: a kube-rs client for one workspace URL (with the current context's
//! credentials and CA), and the few requests the plugins make.

use kube::config::KubeConfigOptions;
use serde_json::Value;

use crate::kubeconfig::KubeconfigFile;

/// The path of the Workspace collection in a workspace.
pub const WORKSPACES: &str = "/apis/tenancy.kcp.io/v1alpha1/workspaces";

/// How a request ended when the server answered.
pub enum Answer {
    Ok(Value),
    /// A `Status` with this code and message.
    Failed {
        code: u16,
        message: String,
    },
}

/// A client for the workspace at `server`.
pub async fn client(file: &KubeconfigFile, server: &str) -> anyhow::Result<kube::Client> {
    let mut config =
        kube::Config::from_custom_kubeconfig(file.config.clone(), &KubeConfigOptions::default())
            .await?;
    config.cluster_url = server.parse()?;
    Ok(kube::Client::try_from(config)?)
}

/// Sends one request; a `Status` answer is an [`Answer::Failed`], transport errors are errors.
pub async fn send(
    client: &kube::Client,
    method: http::Method,
    path: &str,
    body: Option<&Value>,
) -> anyhow::Result<Answer> {
    let mut request = http::Request::builder().method(method).uri(path);
    if body.is_some() {
        request = request.header(http::header::CONTENT_TYPE, "application/json");
    }
    let body = body
        .map(serde_json::to_vec)
        .transpose()?
        .unwrap_or_default();
    match client.request::<Value>(request.body(body)?).await {
        Ok(value) => Ok(Answer::Ok(value)),
        Err(kube::Error::Api(status)) => Ok(Answer::Failed {
            code: status.code,
            message: status.message.clone(),
        }),
        Err(other) => Err(other.into()),
    }
}

/// The text of a failed answer, as the plugin reports it.
pub fn failure(answer: Answer) -> anyhow::Error {
    match answer {
        Answer::Ok(_) => anyhow::anyhow!("unexpected answer"),
        Answer::Failed { message, .. } => anyhow::anyhow!(message),
    }
}
