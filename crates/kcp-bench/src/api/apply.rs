//! Server-side apply cells of `kcp-bench api`:
//!
//! - applies (`application/apply-patch+yaml`) of a 50-field configmap, each changing one
//!   field, against JSON merge patches of the same document at the same concurrency, each
//!   worker on an object of its own. Target: apply ≥ 50% of merge patch.
//! - GETs of that configmap as applied (with its managedFields) against GETs of the same
//!   object after its managedFields were cleared. Target: within 5%.

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
        .request(
            Method::PATCH,
            &format!("{}?fieldManager=bench", object_path(name)),
        )
        .header(http::header::AUTHORIZATION, authorization)
        .header(http::header::CONTENT_TYPE, content_type)
        .body(Full::new(Bytes::from(body)))?;
    connection.expect(request, expected).await?;
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
            .request(
                Method::PATCH,
                &format!("{}?fieldManager=bench", object_path(&name)),
            )
            .header(http::header::AUTHORIZATION, authorization.as_str())
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

    // GETs with and without managedFields, of the same 50-field object.
    let (managed, cleared) = ("bench-get-managed", "bench-get-cleared");
    for name in [managed, cleared] {
        patch_once(
            target,
            authorization,
            name,
            APPLY,
            document(name, 0),
            StatusCode::CREATED,
        )
        .await?;
    }
    patch_once(
        target,
        authorization,
        cleared,
        MERGE,
        json!({"metadata": {"managedFields": [{}]}}).to_string(),
        StatusCode::OK,
    )
    .await
    .context("clear managedFields")?;
    let gets = |name: &str| -> load::MakeRequest {
        let (path, authorization) = (object_path(name), Arc::clone(authorization));
        Arc::new(move |connection, _, _| {
            connection
                .request(Method::GET, &path)
                .header(http::header::AUTHORIZATION, authorization.as_str())
                .header(http::header::ACCEPT, "application/json")
                .body(Full::new(Bytes::new()))
                .expect("a valid request")
        })
    };
    let workers = 16;
    let label = format!("GET 50-field configmap with managedFields, {workers} conn");
    let with = load::drive(
        target,
        Protocol::Http1,
        workers,
        duration,
        StatusCode::OK,
        gets(managed),
    )
    .await
    .with_context(|| format!("{label}: with"))?;
    let without = load::drive(
        target,
        Protocol::Http1,
        workers,
        duration,
        StatusCode::OK,
        gets(cleared),
    )
    .await
    .with_context(|| format!("{label}: without"))?;
    let ratio = with.rate() / without.rate();
    eprintln!("{label}: {} | without {}", with.cell(), without.cell());
    rows.push(vec![
        label,
        with.cell(),
        format!("without managedFields: {}", without.cell()),
        format!("{ratio:.2}x"),
        verdict(
            ratio >= GET_RATIO_TARGET,
            format!(">= {GET_RATIO_TARGET:.2}x"),
        ),
    ]);
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
