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
    /// Starts the watch (its first events are the workspaces that exist now). A watch the server
    /// closes without an error is resumed from the last revision seen, as an informer does
    /// (kube-apiserver closes watchers that fall behind); an ERROR event ends it.
    pub async fn start(target: &Target, authorization: &str) -> anyhow::Result<Follower> {
        let first = open(target, authorization, Resume::Start).await?;
        let (report, seen) = watch::channel(Seen::default());
        let target = target.clone();
        let authorization = authorization.to_string();
        let task = tokio::spawn(async move {
            let mut phases = Phases::default();
            let mut stream = first;
            let mut relisting = false;
            for resumed in 0.. {
                let ended = read(&mut stream, &mut phases, &report, relisting).await?;
                if resumed == MAX_RESUMES {
                    bail!("the server closed the watch {MAX_RESUMES} times");
                }
                relisting = ended == Ended::Expired;
                stream = if relisting {
                    // Fell behind the server's window: list again (as initial events), and
                    // report nothing until the listing is complete.
                    phases = Phases::default();
                    open(&target, &authorization, Resume::Relist).await?
                } else {
                    let from = phases.revision.clone();
                    open(&target, &authorization, Resume::From(&from)).await?
                };
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
                let why = match (&mut self.task).await {
                    Ok(Ok(())) => "without an error".to_string(),
                    Ok(Err(error)) => format!("{error:#}"),
                    Err(error) => error.to_string(),
                };
                bail!("the wildcard watch of workspaces ended: {why}");
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

/// How often a watch the server closed is resumed before the benchmark gives up.
const MAX_RESUMES: usize = 100;

/// One watch request's connection and response body.
struct WatchStream {
    _connection: crate::api::client::Connection,
    body: hyper::body::Incoming,
}

/// Where an (re)opened watch starts.
enum Resume<'a> {
    /// With every workspace that exists now, as ADDED events.
    Start,
    /// After this revision.
    From(&'a str),
    /// With every workspace that exists now, then a bookmark marking the listing's end.
    Relist,
}

/// How a watch response ended.
#[derive(Debug, PartialEq, Eq)]
enum Ended {
    /// The server closed it: resume from the last revision.
    Closed,
    /// 410 Expired: list again.
    Expired,
}

/// Opens the wildcard watch.
async fn open(
    target: &Target,
    authorization: &str,
    resume: Resume<'_>,
) -> anyhow::Result<WatchStream> {
    let mut connection = target.connect(Protocol::Http1).await?;
    let mut uri =
        "/clusters/*/apis/tenancy.kcp.io/v1alpha1/workspaces?watch=true&timeoutSeconds=3600"
            .to_string();
    match resume {
        Resume::Start => {}
        Resume::From(revision) => {
            uri.push_str("&resourceVersion=");
            uri.push_str(revision);
        }
        Resume::Relist => uri.push_str(
            "&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true",
        ),
    }
    let request = connection
        .authorized(Method::GET, &uri, authorization)
        .header(http::header::ACCEPT, "application/json")
        .body(Full::new(Bytes::new()))?;
    let (status, body) = connection.stream(request).await?;
    if status != StatusCode::OK {
        bail!("the wildcard watch of workspaces answered {status}");
    }
    Ok(WatchStream {
        _connection: connection,
        body,
    })
}

/// Applies the events of `stream` until the server ends it, reporting the counts after each read
/// (while `relisting`, only once the listing is complete).
async fn read(
    stream: &mut WatchStream,
    phases: &mut Phases,
    report: &watch::Sender<Seen>,
    mut relisting: bool,
) -> anyhow::Result<Ended> {
    let mut buffer = BytesMut::new();
    while let Some(frame) = stream.body.frame().await {
        let Ok(data) = frame?.into_data() else {
            continue;
        };
        buffer.extend_from_slice(&data);
        while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
            let line = buffer.split_to(end + 1);
            match apply(phases, line.chunk())? {
                Applied::Event => {}
                Applied::Listed => relisting = false,
                Applied::Expired => return Ok(Ended::Expired),
            }
        }
        if !relisting {
            report.send_replace(Seen {
                existing: phases.ready.len(),
                ready: phases.ready_count,
            });
        }
    }
    Ok(Ended::Closed)
}

/// Whether each workspace (by logical cluster and name) is Ready, and how many are: counted as
/// events come, since a count over the map after every read would cost the client more than
/// the server's work at a million workspaces.
#[derive(Default)]
struct Phases {
    ready: HashMap<(String, String), bool>,
    ready_count: usize,
    /// The resourceVersion of the last event, to resume from.
    revision: String,
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
    #[serde(rename = "resourceVersion")]
    resource_version: String,
    annotations: Annotations,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct Annotations {
    #[serde(rename = "kcp.io/cluster")]
    cluster: String,
    #[serde(rename = "k8s.io/initial-events-end")]
    initial_events_end: String,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct Status {
    phase: String,
}

/// What one watch event line was.
#[derive(Debug, PartialEq, Eq)]
enum Applied {
    Event,
    /// The bookmark ending the initial events.
    Listed,
    /// An ERROR event with code 410.
    Expired,
}

/// Applies one watch event line to `phases`.
fn apply(phases: &mut Phases, line: &[u8]) -> anyhow::Result<Applied> {
    let line = line.trim_ascii();
    if line.is_empty() {
        return Ok(Applied::Event);
    }
    if line.starts_with(br#"{"type":"ERROR""#) {
        let error: serde_json::Value = serde_json::from_slice(line).context("a watch error")?;
        if error["object"]["code"] == 410 {
            return Ok(Applied::Expired);
        }
        bail!("the workspace watch failed: {}", error["object"]);
    }
    let event: WatchEvent = serde_json::from_slice(line).context("a watch event")?;
    let metadata = event.object.metadata;
    if !metadata.resource_version.is_empty() {
        phases.revision = metadata.resource_version;
    }
    let key = (metadata.annotations.cluster, metadata.name);
    match event.kind.as_str() {
        "ADDED" | "MODIFIED" => phases.set(key, Some(event.object.status.phase == "Ready")),
        "DELETED" => phases.set(key, None),
        "BOOKMARK" if metadata.annotations.initial_events_end == "true" => {
            return Ok(Applied::Listed);
        }
        _ => {}
    }
    Ok(Applied::Event)
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

    #[test]
    fn errors_and_bookmarks_tell_how_to_go_on() {
        let mut phases = Phases::default();
        let expired = br#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 5","reason":"Expired","code":410}}"#;
        assert_eq!(apply(&mut phases, expired).unwrap(), Applied::Expired);
        let other = br#"{"type":"ERROR","object":{"kind":"Status","status":"Failure","code":500}}"#;
        assert!(apply(&mut phases, other).is_err());
        let end = br#"{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"42","annotations":{"k8s.io/initial-events-end":"true"}}}}"#;
        assert_eq!(apply(&mut phases, end).unwrap(), Applied::Listed);
        assert_eq!(phases.revision, "42");
        let plain = br#"{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"43"}}}"#;
        assert_eq!(apply(&mut phases, plain).unwrap(), Applied::Event);
        assert_eq!(phases.revision, "43");
        assert!(phases.ready.is_empty());
    }
}
