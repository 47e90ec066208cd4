//! One `PolicyRule` and whether it allows a request.

use serde_json::Value;

use super::{Attributes, Target};
use crate::object::strings;

/// A `PolicyRule`: `verbs`, `apiGroups`, `resources`, `resourceNames`, `nonResourceURLs`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Rule {
    pub verbs: Vec<String>,
    pub api_groups: Vec<String>,
    pub resources: Vec<String>,
    pub resource_names: Vec<String>,
    pub non_resource_urls: Vec<String>,
}

const ALL: &str = "*";

impl Rule {
    /// The rule a `PolicyRule` object states (missing lists are empty).
    pub fn from_json(rule: &Value) -> Rule {
        Rule {
            verbs: strings(&rule["verbs"]),
            api_groups: strings(&rule["apiGroups"]),
            resources: strings(&rule["resources"]),
            resource_names: strings(&rule["resourceNames"]),
            non_resource_urls: strings(&rule["nonResourceURLs"]),
        }
    }

    /// The rules of a Role or ClusterRole object (its `rules`).
    pub fn all_of(role: &Value) -> Vec<Rule> {
        role["rules"]
            .as_array()
            .map(|rules| rules.iter().map(Rule::from_json).collect())
            .unwrap_or_default()
    }

    /// Whether this rule allows the request.
    pub fn allows(&self, attributes: &Attributes<'_>) -> bool {
        if !matches(&self.verbs, attributes.verb) {
            return false;
        }
        match attributes.target {
            Target::Resource {
                api_group,
                resource,
                subresource,
                name,
                ..
            } => {
                matches(&self.api_groups, api_group)
                    && self.matches_resource(resource, subresource)
                    && (self.resource_names.is_empty()
                        || self.resource_names.iter().any(|n| n == name))
            }
            Target::NonResource { path } => self.non_resource_urls.iter().any(|url| {
                url == ALL
                    || url == path
                    || url
                        .strip_suffix('*')
                        .is_some_and(|prefix| path.starts_with(prefix))
            }),
        }
    }

    /// `resource` and `resource/subresource` as named, `*` for everything, `*/subresource`
    /// for that subresource of every resource.
    fn matches_resource(&self, resource: &str, subresource: &str) -> bool {
        self.resources.iter().any(|rule| {
            if rule == ALL {
                return true;
            }
            if subresource.is_empty() {
                return rule == resource;
            }
            match rule.split_once('/') {
                Some((named, sub)) => sub == subresource && (named == resource || named == ALL),
                None => false,
            }
        })
    }
}

/// Whether `list` holds `*` or `item`.
fn matches(list: &[String], item: &str) -> bool {
    list.iter().any(|entry| entry == ALL || entry == item)
}

/// The rules of `wanted` that `held` does not cover, as Kubernetes' escalation check finds
/// them: each rule is broken down into single verbs on single resources (and names) or paths,
/// and each of those must be allowed by a held rule, wildcards only by wildcards. The missing
/// ones come back merged by resource, verbs gathered.
pub fn uncovered(held: &[Rule], wanted: &[Rule]) -> Vec<Rule> {
    let user = super::UserInfo {
        name: String::new(),
        groups: Vec::new(),
        ..Default::default()
    };
    let mut missing: Vec<Rule> = Vec::new();
    let mut note = |rule: Rule| match missing.iter_mut().find(|m| {
        m.api_groups == rule.api_groups
            && m.resources == rule.resources
            && m.resource_names == rule.resource_names
            && m.non_resource_urls == rule.non_resource_urls
    }) {
        Some(existing) => {
            for verb in rule.verbs {
                if !existing.verbs.contains(&verb) {
                    existing.verbs.push(verb);
                }
            }
        }
        None => missing.push(rule),
    };
    for rule in wanted {
        for verb in &rule.verbs {
            for url in &rule.non_resource_urls {
                let attributes = Attributes {
                    user: &user,
                    verb,
                    target: Target::NonResource { path: url },
                };
                if !held.iter().any(|h| h.allows(&attributes)) {
                    note(Rule {
                        verbs: vec![verb.clone()],
                        non_resource_urls: vec![url.clone()],
                        ..Rule::default()
                    });
                }
            }
            for group in &rule.api_groups {
                for resource in &rule.resources {
                    let (named, sub) = resource.split_once('/').unwrap_or((resource, ""));
                    let names: Vec<&str> = match rule.resource_names.is_empty() {
                        true => vec![""],
                        false => rule.resource_names.iter().map(String::as_str).collect(),
                    };
                    for name in names {
                        let attributes = Attributes {
                            user: &user,
                            verb,
                            target: Target::Resource {
                                api_group: group,
                                resource: named,
                                subresource: sub,
                                name,
                                namespace: "",
                            },
                        };
                        if !held.iter().any(|h| h.allows(&attributes)) {
                            note(Rule {
                                verbs: vec![verb.clone()],
                                api_groups: vec![group.clone()],
                                resources: vec![resource.clone()],
                                resource_names: match name {
                                    "" => Vec::new(),
                                    name => vec![name.to_string()],
                                },
                                non_resource_urls: Vec::new(),
                            });
                        }
                    }
                }
            }
        }
    }
    missing
}

impl Rule {
    /// The rule as Kubernetes prints it in escalation errors:
    /// `{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}`, empty fields left out.
    pub fn compact(&self) -> String {
        let list = |items: &[String]| {
            let quoted: Vec<String> = items.iter().map(|i| format!("{i:?}")).collect();
            format!("[{}]", quoted.join(" "))
        };
        let mut fields = Vec::new();
        for (name, items) in [
            ("APIGroups", &self.api_groups),
            ("Resources", &self.resources),
            ("ResourceNames", &self.resource_names),
            ("NonResourceURLs", &self.non_resource_urls),
            ("Verbs", &self.verbs),
        ] {
            if !items.is_empty() || (name == "APIGroups" && !self.resources.is_empty()) {
                fields.push(format!("{name}:{}", list(items)));
            }
        }
        format!("{{{}}}", fields.join(", "))
    }
}
