//! Resolution of workspace paths as the tree grows: a GET through `/clusters/<path>` (each
//! segment of the path resolved by the server) beside the same GET through
//! `/clusters/<logical cluster name>` (no resolution), taken once when the first level of the
//! tree is Ready and again when every workspace is, on the same workspace.
//!
//! The request is one a user's kubectl sends all the time, the workspace's `default`
//! namespace, over one kept-alive HTTP/1.1 connection; the two ways alternate, so both see
//! the same machine.

use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use http::{Method, StatusCode};
use http_body_util::Full;

use super::WORKSPACES_PATH;
use super::tree::Planned;
use crate::api::client::{Connection, Protocol, Target};
use crate::measure::median;

/// GETs of each kind per measurement; the median is reported.
const RUNS: usize = 300;

/// What is asked through both ways.
const REQUEST: &str = "/api/v1/namespaces/default";

/// One workspace reached both ways.
pub struct Probe {
    /// Its path, `root:org-0`.
    pub path: String,
    /// Its logical cluster's name (`spec.cluster`).
    pub cluster: String,
}

/// The median GET through the path and through the cluster's name.
#[derive(Clone, Copy)]
pub struct Resolution {
    pub by_path: Duration,
    pub by_name: Duration,
}

impl Resolution {
    /// How much longer the GET took through the path than through the name.
    pub fn path_over_name(&self) -> f64 {
        self.by_path.as_secs_f64() / self.by_name.as_secs_f64()
    }
}

impl Probe {
    /// The workspace `planned`, once its logical cluster is known.
    pub async fn of(
        target: &Target,
        authorization: &str,
        planned: &Planned,
    ) -> anyhow::Result<Probe> {
        let mut connection = target.connect(Protocol::Http1).await?;
        let path = format!(
            "/clusters/{}{WORKSPACES_PATH}/{}",
            planned.parent, planned.name
        );
        let answer = get(&mut connection, authorization, &path).await?;
        let workspace: serde_json::Value = serde_json::from_slice(&answer)?;
        let cluster = workspace["spec"]["cluster"]
            .as_str()
            .filter(|name| !name.is_empty())
            .with_context(|| format!("{} has no spec.cluster", planned.path()))?;
        Ok(Probe {
            path: planned.path(),
            cluster: cluster.to_string(),
        })
    }

    /// Times the GET both ways, alternating.
    pub async fn measure(
        &self,
        target: &Target,
        authorization: &str,
    ) -> anyhow::Result<Resolution> {
        let mut connection = target.connect(Protocol::Http1).await?;
        let by_path = format!("/clusters/{}{REQUEST}", self.path);
        let by_name = format!("/clusters/{}{REQUEST}", self.cluster);
        let (mut path_times, mut name_times) = (Vec::new(), Vec::new());
        for _ in 0..RUNS {
            for (uri, times) in [(&by_path, &mut path_times), (&by_name, &mut name_times)] {
                let began = Instant::now();
                get(&mut connection, authorization, uri).await?;
                times.push(began.elapsed());
            }
        }
        Ok(Resolution {
            by_path: median(path_times),
            by_name: median(name_times),
        })
    }
}

async fn get(connection: &mut Connection, authorization: &str, uri: &str) -> anyhow::Result<Bytes> {
    let request = connection
        .authorized(Method::GET, uri, authorization)
        .body(Full::new(Bytes::new()))?;
    Ok(connection.expect(request, StatusCode::OK).await?.body)
}
