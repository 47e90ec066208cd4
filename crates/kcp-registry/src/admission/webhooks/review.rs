//! The AdmissionReview sent to a webhook and what its answer may say, checked as
//! kube-apiserver checks it (`expected response.uid=...`, a validating webhook may not
//! patch, a patch needs its type) before anything of it is used.

use base64::Engine;
use serde_json::{Map, Value, json};

/// What a webhook answered, once checked.
#[derive(Debug, Default)]
pub(crate) struct Answer {
    pub(crate) allowed: bool,
    /// A JSON patch (RFC 6902), decoded.
    pub(crate) patch: Option<Value>,
    /// `response.status` when it refuses.
    pub(crate) status: Value,
    pub(crate) warnings: Vec<String>,
    pub(crate) audit_annotations: Vec<(String, String)>,
}

/// The review of `request` (an AdmissionRequest without its uid) at `version`.
pub(crate) fn review(version: &str, uid: &str, mut request: Map<String, Value>) -> Value {
    request.insert("uid".into(), json!(uid));
    json!({
        "apiVersion": format!("admission.k8s.io/{version}"),
        "kind": "AdmissionReview",
        "request": request,
    })
}

/// Checks the review a webhook answered with.
pub(crate) fn answer(
    version: &str,
    uid: &str,
    mutating: bool,
    review: &Value,
) -> Result<Answer, String> {
    let response = review
        .get("response")
        .filter(|r| r.is_object())
        .ok_or("webhook response was absent")?;
    let has_patch = response["patch"].as_str().is_some_and(|p| !p.is_empty());
    let patch_type = response.get("patchType").filter(|t| !t.is_null());
    if version == "v1" {
        let answered_uid = response["uid"].as_str().unwrap_or_default();
        if answered_uid != uid {
            return Err(format!(
                "expected response.uid={}, got {}",
                go_quote(uid),
                go_quote(answered_uid)
            ));
        }
        let (api_version, kind) = (
            review["apiVersion"].as_str().unwrap_or_default(),
            review["kind"].as_str().unwrap_or_default(),
        );
        if api_version != "admission.k8s.io/v1" || kind != "AdmissionReview" {
            return Err(format!(
                "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {}",
                gvk_string(api_version, kind)
            ));
        }
        if mutating {
            match (has_patch, patch_type) {
                (true, None) => {
                    return Err("webhook returned response.patch but not response.patchType".into());
                }
                (false, Some(_)) => {
                    return Err("webhook returned response.patchType but not response.patch".into());
                }
                (true, Some(t)) if t.as_str() != Some("JSONPatch") => {
                    return Err(format!(
                        "webhook returned invalid response.patchType of {}",
                        go_quote(t.as_str().unwrap_or_default())
                    ));
                }
                _ => {}
            }
        } else if has_patch {
            return Err("validating webhook may not return response.patch".into());
        } else if patch_type.is_some() {
            return Err("validating webhook may not return response.patchType".into());
        }
    }
    let patch = match response["patch"]
        .as_str()
        .filter(|p| mutating && !p.is_empty())
    {
        None => None,
        Some(encoded) => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .map_err(|e| format!("illegal base64 data in response.patch: {e}"))?;
            Some(
                serde_json::from_slice(&bytes)
                    .map_err(|e| format!("response.patch is not a JSON patch: {e}"))?,
            )
        }
    };
    let warnings = response["warnings"]
        .as_array()
        .map(|w| {
            w.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let audit_annotations = response["auditAnnotations"]
        .as_object()
        .map(|a| {
            a.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default();
    Ok(Answer {
        allowed: response["allowed"].as_bool().unwrap_or(false),
        patch,
        status: response.get("status").cloned().unwrap_or(Value::Null),
        warnings,
        audit_annotations,
    })
}

/// Go's `schema.GroupVersionKind.String()` of what was answered.
fn gvk_string(api_version: &str, kind: &str) -> String {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    format!("{group}/{version}, Kind={kind}")
}

pub(crate) fn go_quote(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v1(response: Value) -> Value {
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})
    }

    #[test]
    fn answers_are_checked_as_kube_apiserver_checks_them() {
        let patch = base64::engine::general_purpose::STANDARD
            .encode(br#"[{"op":"add","path":"/x","value":1}]"#);
        let ok = answer("v1", "u", true, &v1(json!({"uid": "u", "allowed": true, "patch": patch, "patchType": "JSONPatch", "warnings": ["careful"]}))).unwrap();
        assert!(ok.allowed);
        assert_eq!(ok.patch.unwrap()[0]["op"], "add");
        assert_eq!(ok.warnings, ["careful"]);
        let wrong_uid =
            answer("v1", "u", false, &v1(json!({"uid": "x", "allowed": true}))).unwrap_err();
        assert_eq!(wrong_uid, r#"expected response.uid="u", got "x""#);
        let untyped = answer(
            "v1",
            "u",
            true,
            &v1(json!({"uid": "u", "allowed": true, "patch": patch})),
        )
        .unwrap_err();
        assert_eq!(
            untyped,
            "webhook returned response.patch but not response.patchType"
        );
        let validating = answer(
            "v1",
            "u",
            false,
            &v1(json!({"uid": "u", "allowed": true, "patch": patch, "patchType": "JSONPatch"})),
        )
        .unwrap_err();
        assert_eq!(
            validating,
            "validating webhook may not return response.patch"
        );
        assert_eq!(
            answer("v1", "u", false, &json!({})).unwrap_err(),
            "webhook response was absent"
        );
        // v1beta1 answers are taken as they come.
        let beta = answer(
            "v1beta1",
            "u",
            true,
            &json!({"response": {"allowed": false, "patch": patch}}),
        )
        .unwrap();
        assert!(!beta.allowed && beta.patch.is_some());
    }
}
