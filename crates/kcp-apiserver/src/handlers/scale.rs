//! The `scale` subresource of custom resources, as apiextensions-apiserver's `ScaleREST` serves
//! it: an `autoscaling/v1 Scale` made from the custom resource (`spec.replicas` from the CRD's
//! `specReplicasPath`, `status.replicas` from `statusReplicasPath`, `status.selector` from
//! `labelSelectorPath`), and writes (PUT a Scale, or PATCH one with a JSON or merge patch) that
//! change only the custom resource's spec replicas, through the registry's patch (so conflicts
//! retry, the resourceVersion of the Scale is a precondition, the generation moves and the
//! custom resource's validation runs).

use http::StatusCode;
use kcp_apimachinery::json::json_type;
use kcp_apimachinery::patch::{self, PatchType};
use kcp_apimachinery::unstructured::{nested_int64, nested_string, set_nested_field};
use kcp_apis::custom::Scale;
use kcp_registry::RegistryError;
use serde_json::{Value, json};

use super::{patch_error, patch_type};
use crate::error::ApiError;
use crate::scope::RequestScope;
use crate::status::Body;

/// Marks a Scale made from a custom resource without spec replicas (apiextensions-apiserver's
/// "smallest int32"): a write must set them.
const UNSET_REPLICAS: i64 = i32::MIN as i64;

/// How a request changes the Scale.
enum Change {
    Replace(Value),
    Patch(PatchType, Value),
}

/// Serves the scope's verb (get, update or patch) on the scale of the custom resource `name`.
pub(super) async fn serve(
    scope: &RequestScope<'_>,
    scale: &Scale,
    name: &str,
) -> Result<http::Response<Body>, ApiError> {
    let (registry, target) = (&scope.registry, scope.target());
    let change = match scope.verb {
        "get" => {
            let object = registry.get(target, name).await?;
            let (found, replicas_found) =
                scale_of(&object, scale).map_err(RegistryError::Internal)?;
            if !replicas_found {
                return Err(RegistryError::Internal(format!(
                    "the spec replicas field {:?} does not exist",
                    scale.spec_replicas_path
                ))
                .into());
            }
            return scope.object(StatusCode::OK, found);
        }
        "update" => {
            let decoded = crate::body::decode_object(scope.content_type(), &scope.body, None)?;
            Change::Replace(decoded.value)
        }
        _ => {
            let patch_type = patch_type(scope.headers, target.resource)?;
            let document: Value = serde_json::from_slice(&scope.body)
                .map_err(|e| RegistryError::BadRequest(format!("error decoding patch: {e}")))?;
            Change::Patch(patch_type, document)
        }
    };
    let apply = |current: &Value| -> Result<Value, RegistryError> {
        // A custom resource whose fields at the scale paths have another type cannot be
        // scaled: the request is refused (kube-apiserver answers 500 on reads alike).
        let (mut old, replicas_found) =
            scale_of(current, scale).map_err(RegistryError::BadRequest)?;
        if !replicas_found {
            old["spec"]["replicas"] = json!(UNSET_REPLICAS);
        }
        let requested = match &change {
            Change::Replace(requested) => requested.clone(),
            Change::Patch(PatchType::Json, document) => {
                patch::json_patch(&old, document).map_err(patch_error)?
            }
            Change::Patch(_, document) => {
                patch::merge_patch(&old, document).map_err(patch_error)?
            }
        };
        let (replicas, resource_version) = read_scale(&requested)?;
        if replicas == UNSET_REPLICAS {
            return Err(RegistryError::BadRequest(format!(
                "the spec replicas field {:?} cannot be empty",
                scale.spec_replicas_path
            )));
        }
        let mut next = current.clone();
        set_nested_field(&mut next, &scale.spec_replicas_path, json!(replicas))
            .map_err(RegistryError::Internal)?;
        if let Some(rv) = resource_version {
            // The client's resourceVersion is a precondition on the custom resource.
            next["metadata"]["resourceVersion"] = json!(rv);
        }
        Ok(next)
    };
    let updated = registry.patch(target, name, &apply).await?;
    let (answer, _) = scale_of(&updated, scale).map_err(RegistryError::BadRequest)?;
    scope.object(StatusCode::OK, answer)
}

/// The Scale of a custom resource, and whether it has spec replicas at all (absent counts
/// are 0).
fn scale_of(object: &Value, scale: &Scale) -> Result<(Value, bool), String> {
    let spec_replicas = nested_int64(object, &scale.spec_replicas_path)?;
    let status_replicas = nested_int64(object, &scale.status_replicas_path)?.unwrap_or(0);
    let selector = match &scale.label_selector_path {
        Some(path) if !path.is_empty() => nested_string(object, path)?.unwrap_or_default(),
        _ => "",
    };
    let metadata = &object["metadata"];
    let mut meta = json!({
        "name": metadata["name"],
        "uid": metadata["uid"],
        "resourceVersion": metadata["resourceVersion"],
        "creationTimestamp": metadata["creationTimestamp"],
    });
    if let Some(namespace) = metadata.get("namespace") {
        meta["namespace"] = namespace.clone();
    }
    let mut status = json!({"replicas": status_replicas as i32});
    if !selector.is_empty() {
        status["selector"] = json!(selector);
    }
    // `spec.replicas` is omitted when 0, `status.replicas` never (as autoscaling/v1 encodes).
    let mut spec = json!({});
    if let Some(replicas) = spec_replicas.filter(|r| *r != 0) {
        spec["replicas"] = json!(replicas as i32);
    }
    let answer = json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": meta,
        "spec": spec,
        "status": status,
    });
    Ok((answer, spec_replicas.is_some()))
}

/// The spec replicas and resourceVersion of a requested Scale, decoded as kube-apiserver
/// decodes an `autoscaling/v1 Scale` (absent replicas are 0; anything but an int32 is refused).
fn read_scale(requested: &Value) -> Result<(i64, Option<String>), RegistryError> {
    let cannot_handle = |detail: String| {
        RegistryError::BadRequest(format!(
            "Scale in version \"v1\" cannot be handled as a Scale: {detail}"
        ))
    };
    if !requested.is_object() {
        return Err(cannot_handle(format!(
            "json: cannot unmarshal {} into Go value of type v1.Scale",
            json_type(requested)
        )));
    }
    let kind = requested["kind"].as_str().unwrap_or_default();
    let api_version = requested["apiVersion"].as_str().unwrap_or_default();
    if (!kind.is_empty() && kind != "Scale")
        || (!api_version.is_empty() && api_version != "autoscaling/v1")
    {
        return Err(RegistryError::BadRequest(format!(
            "no kind \"{kind}\" is registered for version \"{api_version}\""
        )));
    }
    let replicas = match requested.get("spec").and_then(|spec| spec.get("replicas")) {
        None | Some(Value::Null) => 0,
        Some(Value::Number(n))
            if n.as_i64()
                .is_some_and(|r| (i64::from(i32::MIN)..=i64::from(i32::MAX)).contains(&r)) =>
        {
            n.as_i64().unwrap_or_default()
        }
        Some(other) => {
            let what = match other {
                Value::Number(n) => format!("number {n}"),
                other => json_type(other).to_string(),
            };
            return Err(cannot_handle(format!(
                "json: cannot unmarshal {what} into Go struct field ScaleSpec.spec.replicas of type int32"
            )));
        }
    };
    let resource_version = requested["metadata"]["resourceVersion"]
        .as_str()
        .filter(|rv| !rv.is_empty())
        .map(str::to_string);
    Ok((replicas, resource_version))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(selector: Option<&str>) -> Scale {
        Scale {
            spec_replicas_path: ".spec.replicas".into(),
            status_replicas_path: ".status.replicas".into(),
            label_selector_path: selector.map(str::to_string),
        }
    }

    #[test]
    fn a_scale_carries_the_custom_resources_counts_and_identity() {
        let object = json!({
            "metadata": {"name": "w", "namespace": "ns", "uid": "u", "resourceVersion": "7",
                         "creationTimestamp": "2024-01-01T00:00:00Z"},
            "spec": {"replicas": 3},
            "status": {"replicas": 2, "selector": "app=w"}
        });
        let (scale, found) = scale_of(&object, &paths(Some(".status.selector"))).unwrap();
        assert!(found);
        assert_eq!(
            scale,
            json!({
                "kind": "Scale", "apiVersion": "autoscaling/v1",
                "metadata": {"name": "w", "namespace": "ns", "uid": "u", "resourceVersion": "7",
                             "creationTimestamp": "2024-01-01T00:00:00Z"},
                "spec": {"replicas": 3},
                "status": {"replicas": 2, "selector": "app=w"}
            })
        );
        let (scale, found) = scale_of(&json!({"metadata": {"name": "w"}}), &paths(None)).unwrap();
        assert!(!found);
        assert_eq!(scale["spec"], json!({}));
        assert_eq!(scale["status"], json!({"replicas": 0}));
        let bad = scale_of(&json!({"spec": {"replicas": "3"}}), &paths(None)).unwrap_err();
        assert_eq!(
            bad,
            ".spec.replicas accessor error: 3 is of the type string, expected int64"
        );
    }

    #[test]
    fn requested_scales_decode_as_kube_decodes_them() {
        assert_eq!(
            read_scale(&json!({"spec": {"replicas": 5}, "metadata": {"resourceVersion": "9"}}))
                .unwrap(),
            (5, Some("9".to_string()))
        );
        assert_eq!(read_scale(&json!({})).unwrap(), (0, None));
        let error = read_scale(&json!({"spec": {"replicas": "5"}})).unwrap_err();
        assert_eq!(
            error.to_string(),
            "Scale in version \"v1\" cannot be handled as a Scale: json: cannot unmarshal string into Go struct field ScaleSpec.spec.replicas of type int32"
        );
        let error = read_scale(&json!({"spec": {"replicas": 3000000000u64}})).unwrap_err();
        assert!(error.to_string().contains("number 3000000000"), "{error}");
        let error =
            read_scale(&json!({"kind": "Widget", "apiVersion": "example.com/v1"})).unwrap_err();
        assert_eq!(
            error.to_string(),
            "no kind \"Widget\" is registered for version \"example.com/v1\""
        );
    }
}

#[cfg(test)]
mod served {
    use serde_json::{Value, json};

    use crate::test_support::{call, ensure_namespace, establish_crd, router};

    const WIDGETS: &str = "/clusters/root/apis/example.com/v1/namespaces/default/widgets";

    async fn widgets() -> crate::router::Router {
        let router = router();
        let crd = json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {
                "group": "example.com",
                "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                "versions": [{
                    "name": "v1", "served": true, "storage": true,
                    "subresources": {"status": {}, "scale": {
                        "specReplicasPath": ".spec.replicas",
                        "statusReplicasPath": ".status.replicas"}},
                    "schema": {"openAPIV3Schema": {"type": "object",
                        "x-kubernetes-preserve-unknown-fields": true}}
                }]
            }
        });
        establish_crd(&router, "root", &crd).await;
        ensure_namespace(&router, "root", "default").await;
        router
    }

    async fn create(router: &crate::router::Router, name: &str, spec: Value) {
        let widget = json!({"apiVersion": "example.com/v1", "kind": "Widget",
                            "metadata": {"name": name}, "spec": spec});
        let (code, body) = call(router, "POST", WIDGETS, &widget.to_string()).await;
        assert_eq!(code, 201, "{body}");
    }

    async fn patch(
        router: &crate::router::Router,
        path: &str,
        content_type: &str,
        body: &str,
    ) -> (u16, String) {
        let request = http::Request::builder()
            .method("PATCH")
            .uri(path)
            .header(http::header::AUTHORIZATION, "Bearer t")
            .header(http::header::CONTENT_TYPE, content_type)
            .body(http_body_util::Full::new(bytes::Bytes::from(
                body.to_string(),
            )))
            .unwrap();
        let response = router.handle(request).await;
        let code = response.status().as_u16();
        use http_body_util::BodyExt;
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        (code, String::from_utf8_lossy(&bytes).into_owned())
    }

    #[tokio::test]
    async fn get_put_and_patch_the_scale() {
        let router = widgets().await;
        create(&router, "w", json!({"replicas": 2, "color": "red"})).await;
        let scale_path = format!("{WIDGETS}/w/scale");
        let (code, body) = call(&router, "GET", &scale_path, "").await;
        assert_eq!(code, 200, "{body}");
        let scale: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(scale["kind"], "Scale");
        assert_eq!(scale["spec"]["replicas"], 2);
        assert_eq!(scale["status"]["replicas"], 0);

        let (code, body) = patch(
            &router,
            &scale_path,
            "application/merge-patch+json",
            r#"{"spec":{"replicas":4}}"#,
        )
        .await;
        assert_eq!(code, 200, "{body}");
        assert_eq!(
            serde_json::from_str::<Value>(&body).unwrap()["spec"]["replicas"],
            4
        );
        let (_, body) = call(&router, "GET", &format!("{WIDGETS}/w"), "").await;
        let widget: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(widget["spec"], json!({"replicas": 4, "color": "red"}));
        assert_eq!(widget["metadata"]["generation"], 2);

        let (code, body) = patch(
            &router,
            &scale_path,
            "application/strategic-merge-patch+json",
            r#"{"spec":{"replicas":4}}"#,
        )
        .await;
        assert_eq!(code, 415, "{body}");

        let put = json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
                         "metadata": {"name": "w"}, "spec": {"replicas": -1}});
        let (code, body) = call(&router, "PUT", &scale_path, &put.to_string()).await;
        assert_eq!(code, 422, "{body}");
        assert!(body.contains(r#"Widget.example.com \"w\" is invalid: .spec.replicas: Invalid value: -1: should be a non-negative integer"#), "{body}");

        let (code, body) = call(&router, "DELETE", &scale_path, "").await;
        assert_eq!(code, 405, "{body}");
    }

    #[tokio::test]
    async fn a_custom_resource_without_spec_replicas() {
        let router = widgets().await;
        create(&router, "empty", json!({})).await;
        let scale_path = format!("{WIDGETS}/empty/scale");
        let (code, body) = call(&router, "GET", &scale_path, "").await;
        assert_eq!(code, 500, "{body}");
        assert!(
            body.contains(r#"the spec replicas field \".spec.replicas\" does not exist"#),
            "{body}"
        );
        let (code, body) = patch(
            &router,
            &scale_path,
            "application/merge-patch+json",
            r#"{"metadata":{"labels":{"a":"b"}}}"#,
        )
        .await;
        assert_eq!(code, 400, "{body}");
        assert!(
            body.contains(r#"the spec replicas field \".spec.replicas\" cannot be empty"#),
            "{body}"
        );
        let (code, body) = patch(
            &router,
            &scale_path,
            "application/merge-patch+json",
            r#"{"spec":{"replicas":1}}"#,
        )
        .await;
        assert_eq!(code, 200, "{body}");
    }

    #[tokio::test]
    async fn discovery_names_the_scale_kind() {
        let router = widgets().await;
        let (code, body) = call(&router, "GET", "/clusters/root/apis/example.com/v1", "").await;
        assert_eq!(code, 200, "{body}");
        let list: Value = serde_json::from_str(&body).unwrap();
        let scale = list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == "widgets/scale")
            .unwrap();
        assert_eq!(
            (
                scale["group"].as_str(),
                scale["version"].as_str(),
                scale["kind"].as_str()
            ),
            (Some("autoscaling"), Some("v1"), Some("Scale"))
        );
        let status = list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == "widgets/status")
            .unwrap();
        assert!(status.get("group").is_none());
        assert_eq!(status["kind"], "Widget");
    }
}
