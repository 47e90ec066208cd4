//! ResourceQuota's object counts, as Kubernetes' `ResourceQuota` admission plugin and quota
//! controller keep them.
//!
//! A quota's `spec.hard` names what it limits: `count/<resource>` for a core resource,
//! `count/<resource>.<group>` for any other (custom resources included), or one of the older
//! names of core resources (`configmaps`, `secrets`, `services`, ...). The quota controller
//! writes `status.hard` (the limits) and `status.used` (what the namespace holds). A create
//! ([`Registry::admit_quota`]) is refused while a quota covering its resource has no usage
//! yet, or is full; otherwise it reserves its object in `status.used` first, through the
//! quota's revision, so that creates racing for the last place cannot both have it.
//! Resources other than object counts (`requests.cpu`, ...) are not served here: nothing kcp
//! serves consumes them, so they stay at zero.

use std::collections::BTreeMap;

use kcp_apis::builtin::Resource;
use serde_json::{Value, json};

use crate::error::RegistryError;
use crate::list::ListOptions;
use crate::store::{Registry, Target, decode};

/// How many times a create tries to reserve its place against concurrent writers.
const RESERVE_RETRIES: usize = 8;

/// Core resources whose count a quota may also limit by their plain name.
const LEGACY_NAMES: &[&str] = &[
    "configmaps",
    "persistentvolumeclaims",
    "pods",
    "replicationcontrollers",
    "resourcequotas",
    "secrets",
    "services",
];

/// The quota names that count objects of `resource`.
pub fn count_names(resource: &Resource) -> Vec<String> {
    if resource.group.is_empty() {
        let mut names = vec![format!("count/{}", resource.name)];
        if LEGACY_NAMES.contains(&&*resource.name) {
            names.push(resource.name.to_string());
        }
        names
    } else {
        vec![format!("count/{}.{}", resource.name, resource.group)]
    }
}

/// The `(group, plural)` whose objects a quota name counts, if it counts objects.
pub fn counted_by(name: &str) -> Option<(&str, &str)> {
    if let Some(counted) = name.strip_prefix("count/") {
        return Some(match counted.split_once('.') {
            Some((plural, group)) => (group, plural),
            None => ("", counted),
        });
    }
    LEGACY_NAMES.contains(&name).then_some(("", name))
}

/// A count as a quantity gives it (`"3"`, `"1k"`, `"2Ki"`, or a bare number), rounded up;
/// `None` for what is no count.
pub fn parse_count(quantity: &Value) -> Option<u64> {
    if let Some(number) = quantity.as_f64() {
        return (number.is_finite() && number >= 0.0).then(|| number.ceil() as u64);
    }
    let text = quantity.as_str()?.trim();
    let digits = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(digits);
    let scale: f64 = match suffix {
        "" => 1.0,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "Ki" => 1024.0,
        "Mi" => 1024.0 * 1024.0,
        "Gi" => 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    let value = number.parse::<f64>().ok()? * scale;
    (value.is_finite() && value >= 0.0).then(|| value.ceil() as u64)
}

/// `name=value` pairs sorted by name, joined by commas, as Kubernetes prints resource lists.
fn pretty(list: &BTreeMap<&str, String>) -> String {
    list.iter()
        .map(|(name, value)| format!("{name}={value}"))
        .collect::<Vec<_>>()
        .join(",")
}

impl Registry {
    /// Refuses the create of an object of `target` (named `name`) that a quota of its
    /// namespace has no place for, and reserves its place in the others' `status.used`.
    pub(crate) async fn admit_quota(
        &self,
        target: &Target<'_>,
        name: &str,
    ) -> Result<(), RegistryError> {
        let Some(namespace) = target.namespace.filter(|_| target.resource.namespaced) else {
            return Ok(());
        };
        if self.is_privileged() {
            return Ok(());
        }
        let counted = count_names(target.resource);
        let quotas = Target {
            cluster: target.cluster,
            resource: resource_quotas(),
            namespace: Some(namespace),
        };
        let listed = self.list(quotas, ListOptions::default()).await?.items;
        let mut pending: Vec<String> = listed
            .iter()
            .filter(|quota| {
                counted
                    .iter()
                    .any(|c| quota["spec"]["hard"].get(c).is_some())
            })
            .filter_map(|quota| quota["metadata"]["name"].as_str().map(str::to_string))
            .collect();
        // Every quota is checked before any place is taken (a create one quota refuses takes
        // no place in the others); a quota that changed meanwhile is checked again.
        for _ in 0..RESERVE_RETRIES {
            let mut reserved = Vec::new();
            for quota_name in &pending {
                let current = match self.read(&quotas, quota_name).await {
                    Ok(current) => current,
                    // Deleted meanwhile: it limits nothing any more.
                    Err(RegistryError::NotFound { .. }) => continue,
                    Err(error) => return Err(error),
                };
                let quota = decode(&current)?;
                let next = take_place(quota_name, quota, &counted)
                    .map_err(|message| target.forbidden(name, message))?;
                reserved.push((quota_name.clone(), next, current.mod_revision));
            }
            let mut changed = Vec::new();
            for (quota_name, next, revision) in reserved {
                match self.write_back(&quotas, &quota_name, next, revision).await {
                    Ok(_) | Err(RegistryError::NotFound { .. }) => {}
                    Err(RegistryError::Conflict { .. }) => changed.push(quota_name),
                    Err(error) => return Err(error),
                }
            }
            if changed.is_empty() {
                return Ok(());
            }
            pending = changed;
        }
        Err(RegistryError::Conflict {
            qualified_resource: target.qualified_resource(),
            name: name.to_string(),
            reason: "the namespace's quotas changed too often; please try again".to_string(),
        })
    }

    /// How many objects of `resource` the namespace `namespace` of `cluster` holds.
    pub async fn count_objects(
        &self,
        cluster: &str,
        resource: &Resource,
        namespace: &str,
    ) -> Result<u64, RegistryError> {
        let target = Target {
            cluster,
            resource,
            namespace: Some(namespace),
        };
        let page = self
            .list(
                target,
                ListOptions {
                    limit: 1,
                    ..ListOptions::default()
                },
            )
            .await?;
        Ok(page.items.len() as u64 + page.remaining_item_count.unwrap_or(0))
    }
}

/// `quota` with one more of each of `counted` it limits in `status.used`, or Kubernetes' refusal:
/// a limited resource without usage yet, or one already at its limit.
fn take_place(quota_name: &str, mut quota: Value, counted: &[String]) -> Result<Value, String> {
    let limited: Vec<&str> = counted
        .iter()
        .map(String::as_str)
        .filter(|c| quota["spec"]["hard"].get(*c).is_some())
        .collect();
    let unknown: Vec<&str> = limited
        .iter()
        .copied()
        .filter(|c| {
            quota["status"]["hard"].get(*c).is_none() || quota["status"]["used"].get(*c).is_none()
        })
        .collect();
    if !unknown.is_empty() {
        return Err(format!(
            "status unknown for quota: {quota_name}, resources: {}",
            unknown.join(",")
        ));
    }
    let (mut requested, mut used, mut hard) = (BTreeMap::new(), BTreeMap::new(), BTreeMap::new());
    for counted in limited {
        let now = parse_count(&quota["status"]["used"][counted]).unwrap_or(0);
        if let Some(limit) = parse_count(&quota["status"]["hard"][counted])
            && now + 1 > limit
        {
            requested.insert(counted, "1".to_string());
            used.insert(counted, now.to_string());
            hard.insert(counted, limit.to_string());
        }
        quota["status"]["used"][counted] = json!((now + 1).to_string());
    }
    if !requested.is_empty() {
        return Err(format!(
            "exceeded quota: {quota_name}, requested: {}, used: {}, limited: {}",
            pretty(&requested),
            pretty(&used),
            pretty(&hard)
        ));
    }
    crate::meta::take_resource_version(&mut quota);
    Ok(quota)
}

/// The ResourceQuota resource.
pub fn resource_quotas() -> &'static Resource {
    kcp_apis::builtin::core("resourcequotas")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quota_names_count_resources_as_kubernetes_names_them() {
        let configmaps = kcp_apis::builtin::core("configmaps");
        assert_eq!(count_names(configmaps), ["count/configmaps", "configmaps"]);
        assert_eq!(counted_by("count/configmaps"), Some(("", "configmaps")));
        assert_eq!(
            counted_by("count/widgets.example.com"),
            Some(("example.com", "widgets"))
        );
        assert_eq!(counted_by("secrets"), Some(("", "secrets")));
        assert_eq!(counted_by("requests.cpu"), None);
    }

    #[test]
    fn counts_read_as_quantities() {
        assert_eq!(parse_count(&json!("3")), Some(3));
        assert_eq!(parse_count(&json!("1k")), Some(1000));
        assert_eq!(parse_count(&json!("2Ki")), Some(2048));
        assert_eq!(parse_count(&json!("1500m")), Some(2));
        assert_eq!(parse_count(&json!("lots")), None);
        assert_eq!(parse_count(&json!(3)), Some(3));
        assert_eq!(parse_count(&json!(true)), None);
    }
}
