//! The custom resource of the create benchmark: a namespaced `Sample` whose spec has 30 fields
//! of the usual kinds (bounded integers, strings with lengths and patterns, enums, booleans)
//! and 3 CEL rules, installed in the benchmarked logical cluster before the run.

use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use http::{Method, StatusCode};
use http_body_util::Full;
use serde_json::{Map, Value, json};

use super::client::{Protocol, Target};

pub const PLURAL_PATH: &str = "/apis/bench.kcp.io/v1/namespaces/default/samples";

/// The schema of field `i` (1-based) of the spec.
fn field_schema(i: usize) -> Value {
    match i % 5 {
        0 => json!({"type": "integer", "minimum": 0, "maximum": 1_000_000}),
        1 => json!({"type": "string", "maxLength": 64}),
        2 => json!({"type": "string", "pattern": "^[a-z][a-z0-9-]*$", "maxLength": 63}),
        3 => json!({"type": "string", "enum": ["small", "medium", "large"]}),
        _ => json!({"type": "boolean"}),
    }
}

/// A value of field `i` that the schema accepts.
fn field_value(i: usize, n: u64) -> Value {
    match i % 5 {
        0 => json!(i as u64 * 10 + n % 7),
        1 => json!(format!("value number {i}")),
        2 => json!(format!("name-{i}")),
        3 => json!("medium"),
        _ => json!(i.is_multiple_of(2)),
    }
}

/// The CRD, as JSON.
pub fn crd() -> Value {
    let properties: Map<String, Value> = (1..=30)
        .map(|i| (format!("f{i:02}"), field_schema(i)))
        .collect();
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "samples.bench.kcp.io"},
        "spec": {
            "group": "bench.kcp.io",
            "scope": "Namespaced",
            "names": {"plural": "samples", "singular": "sample", "kind": "Sample"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {"spec": {
                        "type": "object",
                        "properties": properties,
                        "x-kubernetes-validations": [
                            {"rule": "self.f05 <= self.f10", "message": "f05 must not exceed f10"},
                            {"rule": "self.f01.size() < 64"},
                            {"rule": "!has(self.f03) || self.f03 != 'forbidden'"},
                        ],
                    }},
                }},
            }],
        },
    })
}

/// A Sample named `name` with every field set.
pub fn sample_json(name: &str, n: u64) -> String {
    let spec: Map<String, Value> = (1..=30)
        .map(|i| (format!("f{i:02}"), field_value(i, n)))
        .collect();
    json!({
        "apiVersion": "bench.kcp.io/v1",
        "kind": "Sample",
        "metadata": {"name": name},
        "spec": spec,
    })
    .to_string()
}

/// Creates the CRD under `prefix` and waits until a Sample can be created.
pub async fn install(target: &Target, authorization: &str, prefix: &str) -> anyhow::Result<()> {
    let mut connection = target.connect(Protocol::Http1).await?;
    let create = connection
        .authorized(
            Method::POST,
            &format!("{prefix}/apis/apiextensions.k8s.io/v1/customresourcedefinitions"),
            authorization,
        )
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(crd().to_string())))?;
    connection
        .expect(create, StatusCode::CREATED)
        .await
        .context("create the benchmark CRD")?;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let probe = connection
            .authorized(
                Method::POST,
                &format!("{prefix}{PLURAL_PATH}"),
                authorization,
            )
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(sample_json("bench-probe", 0))))?;
        match connection.expect(probe, StatusCode::CREATED).await {
            Ok(_) => return Ok(()),
            Err(error) if Instant::now() > deadline => {
                return Err(error.context("the benchmark CRD is not served"));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_fill_all_thirty_fields() {
        let sample: Value = serde_json::from_str(&sample_json("s", 1)).unwrap();
        assert_eq!(sample["spec"].as_object().unwrap().len(), 30);
        let crd = crd();
        let spec = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
        assert_eq!(spec["properties"].as_object().unwrap().len(), 30);
        assert_eq!(
            spec["x-kubernetes-validations"].as_array().unwrap().len(),
            3
        );
    }
}
