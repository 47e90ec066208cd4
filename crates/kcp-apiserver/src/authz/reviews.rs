//! The review kinds, computed and never stored, as Kubernetes answers them: create-only, no
//! name needed, the answer the request with its `status` filled in.
//!
//! - `authorization.k8s.io/v1`: SelfSubjectAccessReview (may the caller ...?),
//!   SubjectAccessReview and LocalSubjectAccessReview (may this user ...?; the local one in the
//!   URL's namespace only), SelfSubjectRulesReview (what may the caller do in a namespace:
//!   `kubectl auth can-i --list`). Each is decided by the same chain as a request to the
//!   logical cluster the review was posted to.
//! - `authentication.k8s.io/v1`: SelfSubjectReview (`kubectl auth whoami`) and TokenReview
//!   (who a token is).

use kcp_apimachinery::object::{str_at, strings};
use kcp_apimachinery::rbac::{Rule, Target, UserInfo};
use kcp_registry::{Cause, RegistryError};
use serde_json::{Map, Value, json};

use super::{Authorizer, Decision};
use crate::authn::{TokenAuthenticator, User};
use crate::request_info::ResourceRequest;

/// Whether the resource is a review kind this module answers.
pub fn handles(request: &ResourceRequest) -> bool {
    matches!(
        (request.group.as_str(), request.resource.as_str()),
        (
            "authorization.k8s.io",
            "selfsubjectaccessreviews"
                | "subjectaccessreviews"
                | "localsubjectaccessreviews"
                | "selfsubjectrulesreviews"
        ) | (
            "authentication.k8s.io",
            "selfsubjectreviews" | "tokenreviews"
        )
    )
}

/// The answer to creating `review` (already decoded) at `request`, made by `user`.
pub async fn answer(
    authorizer: &Authorizer,
    authn: &TokenAuthenticator,
    registry: &kcp_registry::Registry,
    user: &User,
    request: &ResourceRequest,
    mut review: Value,
) -> Result<Value, RegistryError> {
    let cluster = request.cluster.as_deref().unwrap_or("root");
    let status = match request.resource.as_str() {
        "selfsubjectaccessreviews" => {
            let asker = user.info();
            access_status(
                authorizer,
                "SelfSubjectAccessReview",
                &asker,
                cluster,
                &review["spec"],
            )
            .await?
        }
        "subjectaccessreviews" | "localsubjectaccessreviews" => {
            let spec = &review["spec"];
            if request.resource == "localsubjectaccessreviews" {
                let namespace = request.namespace.as_deref().unwrap_or_default();
                let asked = str_at(spec, &["resourceAttributes", "namespace"]);
                if asked != namespace {
                    return Err(RegistryError::BadRequest(format!(
                        "spec.resourceAttributes.namespace must match namespace: {namespace}"
                    )));
                }
            }
            let mut extra = std::collections::BTreeMap::new();
            if let Some(given) = spec["extra"].as_object() {
                for (key, values) in given {
                    extra.insert(key.clone(), strings(values));
                }
            }
            let subject = UserInfo {
                name: str_at(spec, &["user"]).to_string(),
                groups: strings(&spec["groups"]),
                extra,
            };
            let kind = match request.resource.as_str() {
                "localsubjectaccessreviews" => "LocalSubjectAccessReview",
                _ => "SubjectAccessReview",
            };
            if subject.name.is_empty() && subject.groups.is_empty() {
                return Err(invalid(
                    kind,
                    "spec.user",
                    "Invalid value: \"\": at least one of user or group must be specified",
                ));
            }
            access_status(authorizer, kind, &subject, cluster, spec).await?
        }
        "selfsubjectrulesreviews" => {
            let namespace = str_at(&review["spec"], &["namespace"]).to_string();
            let rules = authorizer
                .rules_for(&user.info(), cluster, &namespace)
                .await?;
            rules_status(&rules)
        }
        "selfsubjectreviews" => json!({"userInfo": user_json(user)}),
        "tokenreviews" => {
            let token = str_at(&review["spec"], &["token"]);
            // Kubernetes' JSON leaves out `authenticated: false` and empty audiences.
            let found = match token.is_empty() {
                true => None,
                false => authn.user_of_token(registry, token).await?,
            };
            match found {
                Some(found) => {
                    let mut status = json!({"authenticated": true, "user": user_json(&found)});
                    if let Some(audiences) = review["spec"]["audiences"]
                        .as_array()
                        .filter(|a| !a.is_empty())
                    {
                        status["audiences"] = json!(audiences);
                    }
                    status
                }
                _ => json!({"user": {}}),
            }
        }
        _ => return Err(RegistryError::Internal("not a review".into())),
    };
    if let Some(object) = review.as_object_mut() {
        object.insert("status".into(), status);
        let metadata = object
            .entry("metadata")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(metadata) = metadata.as_object_mut() {
            metadata.insert("creationTimestamp".into(), Value::Null);
        }
    }
    Ok(review)
}

/// A `UserInfo` as Kubernetes writes it (empty uid and extra left out).
fn user_json(user: &User) -> Value {
    let mut info = json!({"username": user.name});
    if !user.uid.is_empty() {
        info["uid"] = json!(user.uid);
    }
    info["groups"] = json!(user.groups);
    if !user.extra.is_empty() {
        info["extra"] = json!(user.extra);
    }
    info
}

/// Kubernetes' 422 for a review of `kind` (reviews have no name).
fn invalid(kind: &str, field: &str, message: &str) -> RegistryError {
    RegistryError::Invalid {
        kind: kind.to_string(),
        group: "authorization.k8s.io".to_string(),
        name: String::new(),
        causes: vec![Cause {
            reason: "FieldValueInvalid",
            field: field.to_string(),
            message: message.to_string(),
        }],
    }
}

/// The status of an access review: decided as a request with the spec's attributes would be.
async fn access_status(
    authorizer: &Authorizer,
    kind: &str,
    subject: &UserInfo,
    cluster: &str,
    spec: &Value,
) -> Result<Value, RegistryError> {
    let resource = &spec["resourceAttributes"];
    let non_resource = &spec["nonResourceAttributes"];
    let (verb, target) = if resource.is_object() {
        (
            str_at(resource, &["verb"]),
            Target::Resource {
                api_group: str_at(resource, &["group"]),
                resource: str_at(resource, &["resource"]),
                subresource: str_at(resource, &["subresource"]),
                name: str_at(resource, &["name"]),
                namespace: str_at(resource, &["namespace"]),
            },
        )
    } else if non_resource.is_object() {
        (
            str_at(non_resource, &["verb"]),
            Target::NonResource {
                path: str_at(non_resource, &["path"]),
            },
        )
    } else {
        return Err(invalid(
            kind,
            "spec.resourceAttributes",
            "Invalid value: \"null\": exactly one of nonResourceAttributes or resourceAttributes must be specified",
        ));
    };
    Ok(
        match authorizer.decide(subject, cluster, verb, target).await? {
            Decision::Allow => json!({"allowed": true}),
            Decision::Deny(denial) => json!({"allowed": false, "reason": denial.reason}),
        },
    )
}

/// A rules review's status: the rules as `resourceRules` and `nonResourceRules`.
fn rules_status(rules: &[Rule]) -> Value {
    let mut resource_rules = Vec::new();
    let mut non_resource_rules = Vec::new();
    for rule in rules {
        if !rule.non_resource_urls.is_empty() {
            non_resource_rules.push(json!({
                "verbs": rule.verbs,
                "nonResourceURLs": rule.non_resource_urls,
            }));
        }
        if !rule.resources.is_empty() {
            let mut entry = json!({
                "verbs": rule.verbs,
                "apiGroups": rule.api_groups,
                "resources": rule.resources,
            });
            if !rule.resource_names.is_empty() {
                entry["resourceNames"] = json!(rule.resource_names);
            }
            resource_rules.push(entry);
        }
    }
    json!({
        "resourceRules": resource_rules,
        "nonResourceRules": non_resource_rules,
        "incomplete": false,
    })
}
