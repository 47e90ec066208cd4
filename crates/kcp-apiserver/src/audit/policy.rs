//! The audit policy (`--audit-policy-file`, `audit.k8s.io/v1` Policy): the first rule that
//! matches a request gives its level (None, Metadata, Request, RequestResponse) and the stages
//! not to write; a request no rule matches is not audited. Rules match as kube-apiserver's
//! do: by users, user groups, verbs, resources (group, resources with `*`, `*/sub` and
//! `res/*`, resource names), namespaces, and non-resource URLs (a trailing `*` is a prefix).

use std::path::Path;

use serde_json::Value;

/// How much of a request is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    None,
    Metadata,
    Request,
    RequestResponse,
}

impl Level {
    fn parse(text: &str) -> Option<Level> {
        Some(match text {
            "None" => Level::None,
            "Metadata" => Level::Metadata,
            "Request" => Level::Request,
            "RequestResponse" => Level::RequestResponse,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Level::None => "None",
            Level::Metadata => "Metadata",
            Level::Request => "Request",
            Level::RequestResponse => "RequestResponse",
        }
    }
}

/// The stages of an audited request.
pub const STAGES: &[&str] = &[
    "RequestReceived",
    "ResponseStarted",
    "ResponseComplete",
    "Panic",
];

#[derive(Debug, Default)]
struct GroupResources {
    group: String,
    resources: Vec<String>,
    names: Vec<String>,
}

#[derive(Debug)]
struct Rule {
    level: Level,
    users: Vec<String>,
    groups: Vec<String>,
    verbs: Vec<String>,
    resources: Vec<GroupResources>,
    namespaces: Vec<String>,
    non_resource_urls: Vec<String>,
    omit_stages: Vec<String>,
    omit_managed_fields: Option<bool>,
}

/// The audit policy.
#[derive(Debug)]
pub struct Policy {
    rules: Vec<Rule>,
    omit_stages: Vec<String>,
    omit_managed_fields: bool,
}

/// What a rule decides about a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub level: Level,
    pub omit_stages: Vec<String>,
    pub omit_managed_fields: bool,
}

/// A request as the policy sees it.
#[derive(Debug, Default)]
pub struct Attributes<'a> {
    pub user: &'a str,
    pub groups: &'a [String],
    pub verb: &'a str,
    /// `None` for non-resource requests.
    pub resource: Option<ResourceAttributes<'a>>,
    pub path: &'a str,
}

#[derive(Debug, Default)]
pub struct ResourceAttributes<'a> {
    pub group: &'a str,
    pub resource: &'a str,
    pub subresource: &'a str,
    pub namespace: &'a str,
    pub name: &'a str,
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

impl Policy {
    /// Reads a policy file (YAML or JSON).
    pub fn from_file(path: &Path) -> Result<Policy, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("read the audit policy file {}: {e}", path.display()))?;
        let value: Value = serde_saphyr::from_str(&text)
            .map_err(|e| format!("the audit policy file {}: {e}", path.display()))?;
        Policy::from_value(&value)
            .map_err(|e| format!("the audit policy file {}: {e}", path.display()))
    }

    /// A policy from its JSON form.
    pub fn from_value(value: &Value) -> Result<Policy, String> {
        let kind = value["kind"].as_str().unwrap_or_default();
        if kind != "Policy" {
            return Err(format!("kind {kind:?} is not an audit Policy"));
        }
        let mut rules = Vec::new();
        for (i, rule) in value["rules"].as_array().into_iter().flatten().enumerate() {
            let level = rule["level"]
                .as_str()
                .and_then(Level::parse)
                .ok_or_else(|| {
                    format!("rules[{i}].level: must be None, Metadata, Request or RequestResponse")
                })?;
            let resources = rule["resources"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|r| GroupResources {
                    group: r["group"].as_str().unwrap_or_default().to_string(),
                    resources: strings(&r["resources"]),
                    names: strings(&r["resourceNames"]),
                })
                .collect();
            let omit_stages = strings(&rule["omitStages"]);
            if let Some(stage) = omit_stages.iter().find(|s| !STAGES.contains(&s.as_str())) {
                return Err(format!("rules[{i}].omitStages: unknown stage {stage:?}"));
            }
            rules.push(Rule {
                level,
                users: strings(&rule["users"]),
                groups: strings(&rule["userGroups"]),
                verbs: strings(&rule["verbs"]),
                resources,
                namespaces: strings(&rule["namespaces"]),
                non_resource_urls: strings(&rule["nonResourceURLs"]),
                omit_stages,
                omit_managed_fields: rule["omitManagedFields"].as_bool(),
            });
        }
        Ok(Policy {
            rules,
            omit_stages: strings(&value["omitStages"]),
            omit_managed_fields: value["omitManagedFields"].as_bool().unwrap_or(false),
        })
    }

    /// The decision of the first rule matching `request` (level None when none does).
    pub fn decide(&self, request: &Attributes<'_>) -> Decision {
        match self.rules.iter().find(|rule| rule.matches(request)) {
            Some(rule) => {
                let mut omit_stages = self.omit_stages.clone();
                omit_stages.extend(rule.omit_stages.iter().cloned());
                Decision {
                    level: rule.level,
                    omit_stages,
                    omit_managed_fields: rule
                        .omit_managed_fields
                        .unwrap_or(self.omit_managed_fields),
                }
            }
            None => Decision {
                level: Level::None,
                omit_stages: Vec::new(),
                omit_managed_fields: false,
            },
        }
    }
}

impl Rule {
    fn matches(&self, request: &Attributes<'_>) -> bool {
        if !self.users.is_empty() && !self.users.iter().any(|u| u == request.user) {
            return false;
        }
        if !self.groups.is_empty() && !request.groups.iter().any(|g| self.groups.contains(g)) {
            return false;
        }
        if !self.verbs.is_empty() && !self.verbs.iter().any(|v| v == request.verb) {
            return false;
        }
        if self.resources.is_empty() && self.non_resource_urls.is_empty() {
            return match &request.resource {
                Some(resource) => {
                    self.namespaces.is_empty()
                        || self.namespaces.iter().any(|n| n == resource.namespace)
                }
                None => true,
            };
        }
        match &request.resource {
            Some(resource) => {
                if !self.namespaces.is_empty()
                    && !self.namespaces.iter().any(|n| n == resource.namespace)
                {
                    return false;
                }
                self.resources.iter().any(|gr| gr.matches(resource))
            }
            None => self
                .non_resource_urls
                .iter()
                .any(|url| match url.strip_suffix('*') {
                    Some(prefix) => request.path.starts_with(prefix),
                    None => request.path == url,
                }),
        }
    }
}

impl GroupResources {
    fn matches(&self, request: &ResourceAttributes<'_>) -> bool {
        if self.group != request.group {
            return false;
        }
        if self.resources.is_empty() {
            return true;
        }
        if !self.names.is_empty() && !self.names.iter().any(|n| n == request.name) {
            return false;
        }
        let combined = match request.subresource {
            "" => request.resource.to_string(),
            sub => format!("{}/{sub}", request.resource),
        };
        self.resources.iter().any(|res| {
            res == "*"
                || *res == combined
                || res.strip_prefix("*/").is_some_and(|sub| {
                    !request.subresource.is_empty() && sub == request.subresource
                })
                || res
                    .strip_suffix("/*")
                    .is_some_and(|r| r == request.resource)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn resource<'a>(
        group: &'a str,
        resource: &'a str,
        sub: &'a str,
        namespace: &'a str,
    ) -> Option<ResourceAttributes<'a>> {
        Some(ResourceAttributes {
            group,
            resource,
            subresource: sub,
            namespace,
            name: "x",
        })
    }

    #[test]
    fn the_first_matching_rule_decides() {
        let policy = Policy::from_value(&json!({
            "apiVersion": "audit.k8s.io/v1", "kind": "Policy",
            "omitStages": ["RequestReceived"],
            "rules": [
                {"level": "None", "users": ["system:kube-proxy"]},
                {"level": "None", "nonResourceURLs": ["/healthz*", "/version"]},
                {"level": "RequestResponse", "resources": [{"group": "", "resources": ["secrets", "pods/*"]}], "namespaces": ["prod"]},
                {"level": "Request", "verbs": ["create", "update"], "resources": [{"group": "apps"}]},
                {"level": "Metadata", "userGroups": ["admins"], "omitStages": ["ResponseStarted"]},
            ],
        }))
        .unwrap();
        let groups = vec!["admins".to_string()];
        let mut asked = Attributes {
            user: "alice",
            groups: &groups,
            verb: "get",
            resource: resource("", "secrets", "", "prod"),
            path: "",
        };
        assert_eq!(policy.decide(&asked).level, Level::RequestResponse);
        asked.resource = resource("", "pods", "log", "prod");
        assert_eq!(policy.decide(&asked).level, Level::RequestResponse);
        asked.resource = resource("", "secrets", "", "dev");
        let decision = policy.decide(&asked);
        assert_eq!(decision.level, Level::Metadata);
        assert_eq!(decision.omit_stages, ["RequestReceived", "ResponseStarted"]);
        asked.resource = resource("apps", "deployments", "", "dev");
        asked.verb = "create";
        assert_eq!(policy.decide(&asked).level, Level::Request);
        asked.resource = None;
        asked.path = "/healthz/ready";
        assert_eq!(policy.decide(&asked).level, Level::None);
        asked.user = "system:kube-proxy";
        asked.path = "/apis";
        assert_eq!(policy.decide(&asked).level, Level::None);
        let nobody = Attributes {
            user: "bob",
            groups: &[],
            verb: "get",
            resource: None,
            path: "/apis",
        };
        assert_eq!(policy.decide(&nobody).level, Level::None);
        assert!(
            Policy::from_value(&json!({"kind": "Policy", "rules": [{"level": "Loud"}]})).is_err()
        );
    }
}
