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
            let mut phases: HashMap<(String, String), bool> = HashMap::new();
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
                let ready = phases.values().filter(|ready| **ready).count();
                report.send_replace(Seen {
                    existing: phases.len(),
                    ready,
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

    pub fn stop(self) {
        self.task.abort();
    }
}

/// Applies one watch event line to `phases` (keyed by logical cluster and name).
fn apply(phases: &mut HashMap<(String, String), bool>, line: &[u8]) -> anyhow::Result<()> {
    let line = line.trim_ascii();
    if line.is_empty() {
        return Ok(());
    }
    let event: serde_json::Value = serde_json::from_slice(line).context("a watch event")?;
    let object = &event["object"];
    let key = (
        object["metadata"]["annotations"]["kcp.io/cluster"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    );
    match event["type"].as_str() {
        Some("ADDED" | "MODIFIED") => {
            phases.insert(key, object["status"]["phase"] == "Ready");
        }
        Some("DELETED") => {
            phases.remove(&key);
        }
        Some("ERROR") => bail!("the workspace watch failed: {object}"),
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_count_existing_and_ready_workspaces() {
        let mut phases = HashMap::new();
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
        assert_eq!(phases.len(), 2);
        assert_eq!(phases.values().filter(|r| **r).count(), 2);
        apply(&mut phases, event("DELETED", "x", "a", "Ready").as_bytes()).unwrap();
        assert_eq!(phases.len(), 1);
        assert!(apply(&mut phases, b"\n").is_ok());
    }
}
