//! Names and establishment of one CRD, as Kubernetes' naming controller does it: every name
//! kind (plural, singular, short names, kind, list kind) is accepted unless another CRD of the
//! same group in the same logical cluster has already accepted it. A CRD whose names are all
//! accepted is Established (and stays so).
//!
//! The other CRDs are read for their names only ([`Named`], `Registry::list_parts`), and the
//! CRD settled is read whole: decoding every CRD of the cluster whole, schemas and all, on
//! every reconcile made the server's peak 1.4 GiB while 168 real-world CRDs were created in one
//! workspace, one after the other (`kcp-bench crd-corpus`).

use kcp_apimachinery::object::{strings, text};
use kcp_registry::{Registry, RegistryError, Target};
use serde::Deserialize;
use serde_json::{Value, json};

use super::crds;
use crate::conditions::{self, Condition};
use crate::driver::Outcome;

/// The names the others already hold: resource names (plurals, singulars and short names share
/// one namespace) and kinds (kinds and list kinds share another).
#[derive(Default)]
struct Taken {
    resources: Vec<String>,
    kinds: Vec<String>,
}

/// What this controller reads of every CRD of a cluster: its name, group, deletion, accepted
/// names and conditions.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Named {
    metadata: NamedMeta,
    spec: NamedSpec,
    status: Value,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct NamedMeta {
    name: String,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct NamedSpec {
    group: String,
}

/// What [`Named`] reads of `status` (its accepted names and conditions; a schema may be
/// megabytes, a status is not).
impl Named {
    fn accepted_names(&self) -> &Value {
        &self.status["acceptedNames"]
    }

    fn names_accepted(&self) -> bool {
        kcp_registry::custom::status_condition_true(&self.status, "NamesAccepted")
    }
}

impl Taken {
    fn of<'a>(others: impl IntoIterator<Item = &'a Value>) -> Taken {
        let mut taken = Taken::default();
        for names in others {
            for field in ["plural", "singular"] {
                taken.resources.push(text(names, field).to_string());
            }
            taken.resources.extend(strings(&names["shortNames"]));
            for field in ["kind", "listKind"] {
                taken.kinds.push(text(names, field).to_string());
            }
        }
        taken.resources.retain(|name| !name.is_empty());
        taken.kinds.retain(|name| !name.is_empty());
        taken
    }
}

/// The accepted names of `crd` given the names the other CRDs hold, and the NamesAccepted
/// condition (reason and message of the first conflict, if any).
fn accept(crd: &Value, taken: &Taken) -> (Value, Condition<'static>) {
    let requested = &crd["spec"]["names"];
    let old = &crd["status"]["acceptedNames"];
    let mut accepted = json!({});
    // Every name is checked; as in Kubernetes the last conflict found names the condition.
    let mut conflict: Option<(&'static str, String)> = None;
    let in_use = |name: &str| format!("{name:?} is already in use");
    for (field, reason, pool) in [
        ("plural", "PluralConflict", &taken.resources),
        ("singular", "SingularConflict", &taken.resources),
    ] {
        let name = text(requested, field);
        if !name.is_empty() && pool.iter().any(|used| used == name) {
            conflict = Some((reason, in_use(name)));
            accepted[field] = old[field].clone();
        } else {
            accepted[field] = json!(name);
        }
    }
    let short_names = strings(&requested["shortNames"]);
    match short_names.iter().find(|s| taken.resources.contains(s)) {
        Some(used) => {
            conflict = Some(("ShortNamesConflict", in_use(used)));
            accepted["shortNames"] = old["shortNames"].clone();
        }
        None if !short_names.is_empty() => accepted["shortNames"] = json!(short_names),
        None => {}
    }
    for (field, reason) in [("kind", "KindConflict"), ("listKind", "ListKindConflict")] {
        let name = text(requested, field);
        if !name.is_empty() && taken.kinds.iter().any(|used| used == name) {
            conflict = Some((reason, in_use(name)));
            accepted[field] = old[field].clone();
        } else {
            accepted[field] = json!(name);
        }
    }
    if let Some(categories) = requested.get("categories") {
        accepted["categories"] = categories.clone();
    }
    if let Some(fields) = accepted.as_object_mut() {
        fields.retain(|_, v| !v.is_null() && v != "");
    }
    let condition = match conflict {
        None => Condition {
            kind: "NamesAccepted",
            status: true,
            reason: "NoConflicts",
            message: "no conflicts found".into(),
        },
        Some((reason, message)) => Condition {
            kind: "NamesAccepted",
            status: false,
            reason,
            message,
        },
    };
    (accepted, condition)
}

fn target(cluster: &str) -> Target<'_> {
    Target {
        cluster,
        resource: crds(),
        namespace: None,
    }
}

/// Accepts the names of the CRD `name` of `cluster` and establishes it; when it is gone, gives
/// the CRDs of the cluster that are still waiting for names another chance.
pub async fn reconcile(
    registry: &Registry,
    cluster: &str,
    name: &str,
) -> Result<Outcome, RegistryError> {
    let all: Vec<Named> = registry.list_parts(target(cluster)).await?;
    let waiting: Vec<&str> = match all.iter().any(|c| c.metadata.name == name) {
        true => vec![name],
        false => all
            .iter()
            .filter(|c| !c.names_accepted())
            .map(|c| c.metadata.name.as_str())
            .collect(),
    };
    for name in waiting {
        let crd = match registry.get(target(cluster), name).await {
            Ok(crd) => crd,
            Err(RegistryError::NotFound { .. }) => continue,
            Err(other) => return Err(other),
        };
        settle(registry, cluster, &crd, &all).await?;
    }
    Ok(Outcome::Finished)
}

/// Writes the accepted names and conditions of `crd` if they changed, given the names of
/// `all` the CRDs of its cluster.
async fn settle(
    registry: &Registry,
    cluster: &str,
    crd: &Value,
    all: &[Named],
) -> Result<(), RegistryError> {
    if crd["metadata"].get("deletionTimestamp").is_some() {
        return Ok(());
    }
    let name = text(&crd["metadata"], "name");
    let group = text(&crd["spec"], "group");
    // Names an APIBinding of the cluster binds are taken too (kcp: a CRD made after a
    // binding of its resource is not established).
    let bound: Vec<Value> = registry
        .bound_resources(cluster)
        .iter()
        .filter(|r| r.group == group)
        .map(|r| {
            json!({
                "plural": &*r.name, "singular": &*r.singular, "kind": &*r.kind,
                "shortNames": r.short_names.iter().map(|s| &**s).collect::<Vec<_>>(),
                "listKind": r.custom().map(|c| c.list_kind.as_str()).unwrap_or_default(),
            })
        })
        .collect();
    let others = all
        .iter()
        .filter(|c| c.metadata.name != name && c.spec.group == group)
        .map(Named::accepted_names)
        .chain(&bound);
    let (accepted, names_condition) = accept(crd, &Taken::of(others));
    let names_ok = names_condition.status;
    let mut status = crd["status"].as_object().cloned().unwrap_or_default();
    status.insert("acceptedNames".into(), accepted);
    conditions::set(&mut status, names_condition);
    let established = kcp_registry::custom::condition_true(crd, "Established");
    if names_ok {
        conditions::set(
            &mut status,
            Condition {
                kind: "Established",
                status: true,
                reason: "InitialNamesAccepted",
                message: "the initial names have been accepted".into(),
            },
        );
    } else if !established {
        conditions::set(
            &mut status,
            Condition {
                kind: "Established",
                status: false,
                reason: "NotAccepted",
                message: "not all names are accepted".into(),
            },
        );
    }
    let status = Value::Object(status);
    if status == crd["status"] {
        return Ok(());
    }
    let mut next = crd.clone();
    if let Some(fields) = next.as_object_mut() {
        fields.insert("status".into(), status);
    }
    let Some(status_registry) = registry.subresource("status") else {
        return Ok(());
    };
    match status_registry.update(target(cluster), name, next).await {
        Ok(_) | Err(RegistryError::NotFound { .. }) => Ok(()),
        Err(other) => Err(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd(plural: &str, kind: &str, short: &[&str]) -> Value {
        json!({
            "metadata": {"name": format!("{plural}.example.com")},
            "spec": {"group": "example.com", "names": {
                "plural": plural, "singular": plural.trim_end_matches('s'), "kind": kind,
                "listKind": format!("{kind}List"), "shortNames": short}},
        })
    }

    fn accepted(crd: &Value) -> Value {
        let mut crd = crd.clone();
        crd["status"]["acceptedNames"] = crd["spec"]["names"].clone();
        crd
    }

    #[test]
    fn free_names_are_accepted() {
        let (names, condition) = accept(&crd("widgets", "Widget", &["wd"]), &Taken::default());
        assert!(condition.status);
        assert_eq!(condition.reason, "NoConflicts");
        assert_eq!(names["plural"], "widgets");
        assert_eq!(names["shortNames"], json!(["wd"]));
        assert_eq!(names["listKind"], "WidgetList");
    }

    #[test]
    fn names_held_by_another_crd_conflict() {
        let others = [accepted(&crd("widgets", "Widget", &["wd"]))];
        let taken = Taken::of(others.iter().map(|c| &c["status"]["acceptedNames"]));
        let (_, condition) = accept(&crd("gadgets", "Widget", &[]), &taken);
        assert!(!condition.status);
        // Kind and list kind both clash; the last one found names the condition.
        assert_eq!(condition.reason, "ListKindConflict");
        assert_eq!(condition.message, "\"WidgetList\" is already in use");
        let (_, condition) = accept(&crd("gadgets", "Gadget", &["widget"]), &taken);
        assert_eq!(condition.reason, "ShortNamesConflict");
        let (names, condition) = accept(&crd("gadgets", "Gadget", &["wd"]), &taken);
        assert_eq!(condition.reason, "ShortNamesConflict");
        assert_eq!(names["plural"], "gadgets");
        assert!(names.get("shortNames").is_none());
    }
}
