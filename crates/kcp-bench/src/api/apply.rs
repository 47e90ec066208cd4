//! Server-side apply cells of `kcp-bench api`:
//!
//! - applies (`application/apply-patch+yaml`) of a 50-field configmap, each changing one
//!   field, against JSON merge patches of the same document at the same concurrency, each
//!   worker on an object of its own. Target: apply ≥ 50% of merge patch.
//! - GETs of the 1 KiB configmap of the GET cells as created (with the managedFields a
//!   create records) against GETs of a copy whose managedFields were cleared, in sixteen
//!   windows (with, without, without, with, four times): kcp's CPU time per GET (from `/proc`),
//!   which the client sharing the cores does not blur as it does throughput, the median window
//!   of each side, so that one window a neighbour's load disturbed does not decide. Target:
//!   within 5%. The same for the 50-field configmap as applied, shown without a target: there
//!   the managedFields are a third of the bytes.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;
use http::{Method, StatusCode};
use http_body_util::Full;
use serde_json::{Map, Value, json};

use super::client::{Protocol, Target};
use super::{CLUSTER_PREFIX, NAMESPACE, load, verdict};

/// Apply throughput as a share of merge patch throughput, at least.
const APPLY_RATIO_TARGET: f64 = 0.5;
/// GETs of an object with managedFields as a share of GETs without, at least.
const GET_RATIO_TARGET: f64 = 0.95;

const APPLY: &str = "application/apply-patch+yaml";
const MERGE: &str = "application/merge-patch+json";

/// A configmap named `name` with 50 data fields, the first one carrying `n`.
fn document(name: &str, n: u64) -> String {
    let data: Map<String, Value> = (0..50)
        .map(|i| {
            let value = if i == 0 {
                format!("revision {n}")
            } else {
                format!("value of field {i}")
            };
            (format!("field{i:02}"), json!(value))
        })
        .collect();
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
        .to_string()
}

fn object_path(name: &str) -> String {
    format!("{CLUSTER_PREFIX}/api/v1/namespaces/{NAMESPACE}/configmaps/{name}")
}

/// Sends one PATCH of `content_type` with `body` and requires `expected`.
async fn patch_once(
    target: &Target,
    authorization: &str,
    name: &str,
    content_type: &str,
    body: String,
    expected: StatusCode,
) -> anyhow::Result<()> {
    let mut connection = target.connect(Protocol::Http1).await?;
    let request = connection
        .authorized(
            Method::PATCH,
            &format!("{}?fieldManager=bench", object_path(name)),
            authorization,
        )
        .header(http::header::CONTENT_TYPE, content_type)
        .body(Full::new(Bytes::from(body)))?;
    connection.expect(request, expected).await?;
    Ok(())
}

/// Creates a configmap from its JSON.
async fn create(target: &Target, authorization: &str, body: &str) -> anyhow::Result<()> {
    let mut connection = target.connect(Protocol::Http1).await?;
    let request = connection
        .authorized(
            Method::POST,
            &format!(
                "{CLUSTER_PREFIX}/api/v1/namespaces/{NAMESPACE}/configmaps?fieldManager=bench"
            ),
            authorization,
        )
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body.to_string())))?;
    connection.expect(request, StatusCode::CREATED).await?;
    Ok(())
}

/// Patches of `content_type` by each worker to its own object (`<prefix>-<worker>`).
fn patches(
    authorization: &Arc<String>,
    prefix: &'static str,
    content_type: &'static str,
) -> load::MakeRequest {
    let authorization = Arc::clone(authorization);
    Arc::new(move |connection, worker, n| {
        let name = format!("{prefix}-{worker}");
        connection
            .authorized(
                Method::PATCH,
                &format!("{}?fieldManager=bench", object_path(&name)),
                authorization.as_str(),
            )
            .header(http::header::ACCEPT, "application/json")
            .header(http::header::CONTENT_TYPE, content_type)
            .body(Full::new(Bytes::from(document(&name, n + 1))))
            .expect("a valid request")
    })
}

/// Measures the cells and adds their rows.
pub async fn run(
    target: &Target,
    authorization: &Arc<String>,
    concurrency: &[usize],
    duration: Duration,
    kcp_cpu_seconds: &dyn Fn() -> anyhow::Result<f64>,
    rows: &mut Vec<Vec<String>>,
) -> anyhow::Result<()> {
    for &workers in concurrency {
        let (apply_prefix, merge_prefix) = match workers {
            1 => ("bench-apply-1", "bench-merge-1"),
            _ => ("bench-apply-n", "bench-merge-n"),
        };
        for worker in 0..workers {
            let apply_name = format!("{apply_prefix}-{worker}");
            patch_once(
                target,
                authorization,
                &apply_name,
                APPLY,
                document(&apply_name, 0),
                StatusCode::CREATED,
            )
            .await
            .context("create the objects to apply")?;
            // The merge-patched objects start as the same apply made them.
            let merge_name = format!("{merge_prefix}-{worker}");
            patch_once(
                target,
                authorization,
                &merge_name,
                APPLY,
                document(&merge_name, 0),
                StatusCode::CREATED,
            )
            .await
            .context("create the objects to merge-patch")?;
        }
        let label = format!("apply of a 50-field configmap, {workers} conn");
        let on_apply = load::drive(
            target,
            Protocol::Http1,
            workers,
            duration,
            StatusCode::OK,
            patches(authorization, apply_prefix, APPLY),
        )
        .await
        .with_context(|| format!("{label}: applies"))?;
        let on_merge = load::drive(
            target,
            Protocol::Http1,
            workers,
            duration,
            StatusCode::OK,
            patches(authorization, merge_prefix, MERGE),
        )
        .await
        .with_context(|| format!("{label}: merge patches"))?;
        let ratio = on_apply.rate() / on_merge.rate();
        eprintln!(
            "{label}: {} | merge patch {}",
            on_apply.cell(),
            on_merge.cell()
        );
        rows.push(vec![
            label,
            on_apply.cell(),
            format!("merge patch: {}", on_merge.cell()),
            format!("{ratio:.2}x"),
            verdict(
                ratio >= APPLY_RATIO_TARGET,
                format!(">= {APPLY_RATIO_TARGET:.2}x"),
            ),
        ]);
    }

    // GETs with and without managedFields: the 1 KiB configmap as a create makes it, and the
    // 50-field one as applied.
    let cells = [
        ("1 KiB configmap", Some(GET_RATIO_TARGET)),
        ("50-field configmap", None),
    ];
    for (index, (what, target_ratio)) in cells.into_iter().enumerate() {
        let (managed, cleared) = (
            format!("bench-get-managed-{index}"),
            format!("bench-get-cleared-{index}"),
        );
        for name in [&managed, &cleared] {
            if index == 0 {
                create(target, authorization, &super::configmap_json(name, 1024)).await?;
            } else {
                let body = document(name, 0);
                patch_once(
                    target,
                    authorization,
                    name,
                    APPLY,
                    body,
                    StatusCode::CREATED,
                )
                .await?;
            }
        }
        patch_once(
            target,
            authorization,
            &cleared,
            MERGE,
            json!({"metadata": {"managedFields": [{}]}}).to_string(),
            StatusCode::OK,
        )
        .await
        .context("clear managedFields")?;
        let workers = 16;
        let label = format!("GET {what} with managedFields, {workers} conn");
        // With, without, without, with, four times (each window an eighth of the time): drift over
        // the run (the writes of the cells before settling) weighs on both sides alike, and
        // the median window of each side leaves out one a neighbour disturbed. kcp's CPU time
        // per GET is the figure the target is on; throughput here also carries the client's
        // share of the same cores.
        let window = duration / 8;
        let mut rates = [0.0f64; 2];
        let mut per_get: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
        let mut cells: [Option<crate::measure::Measured>; 2] = [None, None];
        for side in [0usize, 1, 1, 0].repeat(4) {
            let name = if side == 0 { &managed } else { &cleared };
            let before = kcp_cpu_seconds()?;
            let measured = load::drive(
                target,
                Protocol::Http1,
                workers,
                window,
                StatusCode::OK,
                load::gets(object_path(name), Arc::clone(authorization)),
            )
            .await
            .with_context(|| format!("{label}: {name}"))?;
            let cpu = kcp_cpu_seconds()? - before;
            per_get[side].push(cpu * 1e6 / measured.ops.max(1) as f64);
            rates[side] += measured.rate() / 8.0;
            cells[side] = Some(measured);
        }
        let [Some(with), Some(without)] = cells else {
            anyhow::bail!("{label}: no measurement");
        };
        let micros = |side: usize| {
            let mut windows = per_get[side].clone();
            windows.sort_by(f64::total_cmp);
            (windows[windows.len() / 2 - 1] + windows[windows.len() / 2]) / 2.0
        };
        // Throughput-like: how many GETs without managedFields cost the CPU of one with.
        let ratio = micros(1) / micros(0);
        let throughput = rates[0] / rates[1];
        eprintln!(
            "{label}: {} | without {} | kcp CPU per GET {:.1} µs vs {:.1} µs, throughput {throughput:.2}x",
            with.cell(),
            without.cell(),
            micros(0),
            micros(1)
        );
        rows.push(vec![
            format!("{label}, kcp CPU per GET"),
            format!("{:.1} µs ({})", micros(0), with.cell().trim()),
            format!("without managedFields: {:.1} µs", micros(1)),
            format!("{ratio:.2}x"),
            match target_ratio {
                Some(min) => verdict(ratio >= min, format!(">= {min:.2}x")),
                None => "(shown)".into(),
            },
        ]);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_document_has_fifty_fields_and_carries_its_revision() {
        let document: Value = serde_json::from_str(&document("x", 7)).unwrap();
        let data = document["data"].as_object().unwrap();
        assert_eq!(data.len(), 50);
        assert_eq!(data["field00"], "revision 7");
    }
}
