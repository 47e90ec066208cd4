//! Follows every workspace of every logical cluster through one wildcard watch
//! (`/clusters/*/apis/tenancy.kcp.io/v1alpha1/workspaces?watch=true`) and keeps two counts the
//! benchmark waits on: workspaces that exist, and those of them that are Ready.

use std::collections::HashMap;

use anyhow::{Context, bail};
use bytes::{Buf, Bytes, BytesMut};
use http::{Method, StatusCode};
use http_body_util::{BodyExt, Full};
use tokio::sync::watch;

use crate::api::client::{Protocol, Target};

/// What the watch has seen so far.
#[derive(Debug, Clone, Default)]
pub struct Seen {
    pub existing: usize,
    pub ready: usize,
}

/// A running wildcard watch of workspaces.
pub struct Follower {
    seen: watch::Receiver<Seen>,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl Follower {
    /// Starts the watch (its first events are the workspaces that exist now).
    pub async fn start(target: &Target, authorization: &str) -> anyhow::Result<Follower> {
        let mut connection = target.connect(Protocol::Http1).await?;
        let request = connection
            .request(
                Method::GET,
                "/clusters/*/apis/tenancy.kcp.io/v1alpha1/workspaces?watch=true&timeoutSeconds=3600",
            )
            .header(http::header::AUTHORIZATION, authorization)
            .header(http::header::ACCEPT, "application/json")
            .body(Full::new(Bytes::new()))?;
        let (status, mut body) = connection.stream(request).await?;
        if status != StatusCode::OK {
            bail!("the wildcard watch of workspaces answered {status}");
        }
        let (report, seen) = watch::channel(Seen::default());
        let task = tokio::spawn(async move {
            let _connection = connection;
            let mut phases = Phases::default();
            let mut buffer = BytesMut::new();
            while let Some(frame) = body.frame().await {
                let Ok(data) = frame?.into_data() else {
                    continue;
                };
                buffer.extend_from_slice(&data);
                while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
                    let line = buffer.split_to(end + 1);
                    apply(&mut phases, line.chunk())?;
                }
                report.send_replace(Seen {
                    existing: phases.ready.len(),
                    ready: phases.ready_count,
                });
            }
            anyhow::Ok(())
        });
        Ok(Follower { seen, task })
    }

    /// Waits until `done` holds for what the watch has seen.
    pub async fn wait(&mut self, done: impl Fn(&Seen) -> bool) -> anyhow::Result<Seen> {
        loop {
            let now = self.seen.borrow_and_update().clone();
            if done(&now) {
                return Ok(now);
            }
            if self.seen.changed().await.is_err() {
                bail!("the wildcard watch of workspaces ended");
            }
        }
    }

    /// What the watch has seen, now (for progress reports).
    pub fn watcher(&self) -> watch::Receiver<Seen> {
        self.seen.clone()
    }

    pub fn stop(self) {
        self.task.abort();
    }
}

/// Whether each workspace (by logical cluster and name) is Ready, and how many are: counted as
/// events come, since a count over the map after every read would cost the client more than
/// the server's work at a million workspaces.
#[derive(Default)]
struct Phases {
    ready: HashMap<(String, String), bool>,
    ready_count: usize,
}

impl Phases {
    fn set(&mut self, key: (String, String), ready: Option<bool>) {
        let before = match ready {
            Some(ready) => self.ready.insert(key, ready),
            None => self.ready.remove(&key),
        };
        self.ready_count -= usize::from(before == Some(true));
        self.ready_count += usize::from(ready == Some(true));
    }
}

/// The parts of a watch event the counts need (the rest is skipped, not built).
#[derive(serde::Deserialize)]
struct WatchEvent {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    object: Workspace,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct Workspace {
    metadata: Metadata,
    status: Status,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct Metadata {
    name: String,
    annotations: Annotations,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct Annotations {
    #[serde(rename = "kcp.io/cluster")]
    cluster: String,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct Status {
    phase: String,
}

/// Applies one watch event line to `phases`.
fn apply(phases: &mut Phases, line: &[u8]) -> anyhow::Result<()> {
    let line = line.trim_ascii();
    if line.is_empty() {
        return Ok(());
    }
    let event: WatchEvent = serde_json::from_slice(line).context("a watch event")?;
    let metadata = event.object.metadata;
    let key = (metadata.annotations.cluster, metadata.name);
    match event.kind.as_str() {
        "ADDED" | "MODIFIED" => phases.set(key, Some(event.object.status.phase == "Ready")),
        "DELETED" => phases.set(key, None),
        "ERROR" => bail!(
            "the workspace watch failed: {}",
            String::from_utf8_lossy(line)
        ),
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_count_existing_and_ready_workspaces() {
        let mut phases = Phases::default();
        let event = |kind: &str, cluster: &str, name: &str, phase: &str| {
            format!(
                r#"{{"type":"{kind}","object":{{"metadata":{{"name":"{name}","annotations":{{"kcp.io/cluster":"{cluster}"}}}},"status":{{"phase":"{phase}"}}}}}}"#
            )
        };
        apply(
            &mut phases,
            event("ADDED", "root", "a", "Scheduling").as_bytes(),
        )
        .unwrap();
        apply(&mut phases, event("ADDED", "x", "a", "Ready").as_bytes()).unwrap();
        apply(
            &mut phases,
            event("MODIFIED", "root", "a", "Ready").as_bytes(),
        )
        .unwrap();
        assert_eq!(phases.ready.len(), 2);
        assert_eq!(phases.ready_count, 2);
        apply(&mut phases, event("DELETED", "x", "a", "Ready").as_bytes()).unwrap();
        assert_eq!(phases.ready.len(), 1);
        assert_eq!(phases.ready_count, 1);
        assert!(apply(&mut phases, b"\n").is_ok());
    }
}
