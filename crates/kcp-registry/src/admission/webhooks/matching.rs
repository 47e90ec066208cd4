//! Which webhooks a request calls, as kube-apiserver decides: a rule matching the operation,
//! group, version, resource (with its subresource) and scope; with `matchPolicy: Equivalent`,
//! another served version of the same resource (the object is then sent at that version);
//! then the namespace and object selectors. Match conditions come last (`super`).

use super::config::{Rule, Webhook};

/// What a request is, as rules see it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Asked<'a> {
    pub(crate) operation: &'a str,
    pub(crate) group: &'a str,
    pub(crate) version: &'a str,
    pub(crate) resource: &'a str,
    pub(crate) subresource: &'a str,
    /// The request's namespace ("" for cluster-scoped objects).
    pub(crate) namespace: &'a str,
    /// Other served versions of the resource (custom resources), for `Equivalent`.
    pub(crate) other_versions: &'a [String],
    /// The object's name ("" when the server generates it).
    pub(crate) name: &'a str,
}

fn listed(list: &[String], value: &str) -> bool {
    list.iter().any(|v| v == "*" || v == value)
}

fn resource_listed(rule: &Rule, resource: &str, subresource: &str) -> bool {
    rule.resources.iter().any(|entry| {
        let (res, sub) = entry.split_once('/').unwrap_or((entry.as_str(), ""));
        (res == "*" || res == resource) && (sub == "*" || sub == subresource)
    })
}

fn scope_matches(rule: &Rule, asked: &Asked<'_>) -> bool {
    let namespace_object = asked.group.is_empty() && asked.resource == "namespaces";
    match rule.scope.as_str() {
        "Namespaced" => !namespace_object && !asked.namespace.is_empty(),
        "Cluster" => namespace_object || asked.namespace.is_empty(),
        _ => true,
    }
}

fn rule_matches(rule: &Rule, asked: &Asked<'_>, version: &str) -> bool {
    (rule.resource_names.is_empty() || rule.resource_names.iter().any(|n| n == asked.name))
        && listed(&rule.operations, asked.operation)
        && listed(&rule.groups, asked.group)
        && listed(&rule.versions, version)
        && resource_listed(rule, asked.resource, asked.subresource)
        && scope_matches(rule, asked)
}

/// The version at which `hook` sees the request, if one of its rules matches it: the
/// request's own, else (`Equivalent`) the first other served version a rule names.
pub(crate) fn matched_version<'a>(hook: &Webhook, asked: &Asked<'a>) -> Option<&'a str> {
    rules_match(&hook.rules, hook.equivalent, asked)
}

/// [`matched_version`] for any list of rules.
pub(crate) fn rules_match<'a>(
    rules: &[Rule],
    equivalent: bool,
    asked: &Asked<'a>,
) -> Option<&'a str> {
    if rules.iter().any(|r| rule_matches(r, asked, asked.version)) {
        return Some(asked.version);
    }
    if !equivalent {
        return None;
    }
    asked
        .other_versions
        .iter()
        .filter(|v| *v != asked.version)
        .find(|v| rules.iter().any(|r| rule_matches(r, asked, v)))
        .map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(operations: &[&str], resources: &[&str], versions: &[&str], scope: &str) -> Rule {
        let owned = |l: &[&str]| l.iter().map(|s| s.to_string()).collect();
        Rule {
            operations: owned(operations),
            groups: vec!["*".into()],
            versions: owned(versions),
            resources: owned(resources),
            scope: scope.into(),
            resource_names: Vec::new(),
        }
    }

    fn asked<'a>(resource: &'a str, subresource: &'a str, namespace: &'a str) -> Asked<'a> {
        Asked {
            operation: "CREATE",
            group: "",
            version: "v1",
            resource,
            subresource,
            namespace,
            other_versions: &[],
            name: "x",
        }
    }

    #[test]
    fn resources_and_subresources_match_as_in_kubernetes() {
        let cases = [
            ("pods", "", "pods", true),
            ("pods", "status", "pods", false),
            ("pods", "status", "pods/status", true),
            ("pods", "status", "pods/*", true),
            ("pods", "", "pods/*", true),
            ("pods", "status", "*", false),
            ("pods", "status", "*/*", true),
            ("pods", "status", "*/status", true),
            ("configmaps", "", "*", true),
        ];
        for (resource, sub, entry, want) in cases {
            let r = rule(&["*"], &[entry], &["*"], "*");
            assert_eq!(
                rule_matches(&r, &asked(resource, sub, "ns"), "v1"),
                want,
                "{resource}/{sub} vs {entry}"
            );
        }
    }

    #[test]
    fn scopes_and_operations() {
        let namespaced = rule(&["CREATE"], &["*"], &["v1"], "Namespaced");
        let cluster = rule(&["CREATE", "UPDATE"], &["*"], &["v1"], "Cluster");
        assert!(rule_matches(
            &namespaced,
            &asked("configmaps", "", "a"),
            "v1"
        ));
        assert!(!rule_matches(
            &namespaced,
            &asked("namespaces", "", "a"),
            "v1"
        ));
        assert!(rule_matches(&cluster, &asked("namespaces", "", "a"), "v1"));
        assert!(!rule_matches(&cluster, &asked("configmaps", "", "a"), "v1"));
        let mut delete = asked("configmaps", "", "a");
        delete.operation = "DELETE";
        assert!(!rule_matches(&namespaced, &delete, "v1"));
        assert!(!rule_matches(
            &namespaced,
            &asked("configmaps", "", "a"),
            "v2"
        ));
    }
}
