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
