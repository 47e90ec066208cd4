//! `compat [--lcd] [--old-version V] [--new-version V] OLD NEW` (also `kubectl kcp crd compat`):
//! whether every object valid under a version of the old CRD is valid under the new CRD's, by
//! kcp's schema negotiation rules (`kcp_apimachinery::schema::compat`). It prints each
//! incompatibility with its field path and fails, or says the new CRD is compatible; with
//! `--lcd` it writes the old CRD narrowed to the least common denominator of both schemas.
//! A version is the one named, else the CRD's storage version.

use anyhow::{Context, bail};
use kcp_apimachinery::schema::compat::compare;
use serde_json::Value;

/// The field path incompatibilities are reported under.
const SCHEMA_PATH: &str = "schema.openAPIV3Schema";

/// What `compat` prints, and whether the CRDs are compatible.
pub struct Answer {
    pub text: String,
    pub compatible: bool,
}

/// Reads one CRD from YAML (or JSON) text.
fn crd(text: &str, what: &str) -> anyhow::Result<Value> {
    // JSON (`kubectl get crd -o json`) is read as JSON: a YAML reader takes several times as long.
    let documents: Vec<Value> = match text.trim_start().starts_with('{') {
        true => {
            vec![serde_json::from_str(text).with_context(|| format!("reading the {what} CRD"))?]
        }
        false => {
            serde_saphyr::from_multiple(text).with_context(|| format!("reading the {what} CRD"))?
        }
    };
    let mut crds = documents.into_iter().filter(|d| !d.is_null());
    let Some(crd) = crds.next() else {
        bail!("the {what} file holds no CRD");
    };
    if crd["kind"] != "CustomResourceDefinition" {
        bail!(
            "the {what} file holds a {}, not a CustomResourceDefinition",
            crd["kind"].as_str().unwrap_or("(no kind)")
        );
    }
    if crds.next().is_some() {
        bail!("the {what} file holds more than one object");
    }
    Ok(crd)
}

/// The index of version `wanted` (else the storage version) of `crd`.
fn version(crd: &Value, wanted: Option<&str>, what: &str) -> anyhow::Result<usize> {
    let versions = crd["spec"]["versions"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let found = match wanted {
        Some(name) => versions.iter().position(|v| v["name"] == name),
        None => versions
            .iter()
            .position(|v| v["storage"] == true)
            .or((versions.len() == 1).then_some(0)),
    };
    found.with_context(|| match wanted {
        Some(name) => format!("the {what} CRD has no version {name}"),
        None => format!("the {what} CRD has no storage version"),
    })
}

/// Compares the CRDs in `old_text` and `new_text`.
pub fn compat(
    old_text: &str,
    new_text: &str,
    lcd: bool,
    old_version: Option<&str>,
    new_version: Option<&str>,
) -> anyhow::Result<Answer> {
    // Reading YAML is most of the work: both files at once.
    let (old, new) = std::thread::scope(|scope| {
        let old = scope.spawn(|| crd(old_text, "old"));
        let new = crd(new_text, "new");
        (old.join(), new)
    });
    let mut old = old.map_err(|_| anyhow::anyhow!("reading the old CRD failed"))??;
    let new = new?;
    let (old_index, new_index) = (
        version(&old, old_version, "old")?,
        version(&new, new_version, "new")?,
    );
    let schema = |crd: &Value, index: usize| {
        crd["spec"]["versions"][index]["schema"]["openAPIV3Schema"].clone()
    };
    let (old_schema, new_schema) = (schema(&old, old_index), schema(&new, new_index));
    match compare(SCHEMA_PATH, &old_schema, &new_schema, lcd) {
        Ok(narrowed) if lcd => {
            old["spec"]["versions"][old_index]["schema"]["openAPIV3Schema"] = narrowed;
            Ok(Answer {
                text: serde_saphyr::to_string(&old)?,
                compatible: true,
            })
        }
        Ok(_) => Ok(Answer {
            text: "The new CRD is compatible with the old one.\n".into(),
            compatible: true,
        }),
        Err(incompatibilities) => {
            let mut text = String::new();
            for incompatibility in incompatibilities {
                text.push_str(&format!("{incompatibility}\n"));
            }
            Ok(Answer {
                text,
                compatible: false,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn widget(version: &str, properties: &str) -> String {
        format!(
            "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: widgets.example.com}}
spec:
  group: example.com
  scope: Namespaced
  names: {{plural: widgets, kind: Widget}}
  versions:
  - name: {version}
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties: {properties}
"
        )
    }

    #[test]
    fn incompatibilities_are_listed_and_the_lcd_written() {
        let old = widget("v1", "{a: {type: string}, b: {type: integer}}");
        let new = widget("v1", "{a: {type: string}, c: {type: boolean}}");
        let answer = compat(&old, &new, false, None, None).unwrap();
        assert!(!answer.compatible);
        assert_eq!(
            answer.text,
            "schema.openAPIV3Schema.properties: Invalid value: [\"b\"]: properties have been removed in an incompatible way\n"
        );
        let narrowed = compat(&old, &new, true, None, None).unwrap();
        assert!(narrowed.compatible);
        let crd: Value = serde_saphyr::from_str(&narrowed.text).unwrap();
        let properties = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"];
        assert!(properties.get("a").is_some() && properties.get("b").is_none());
        let same = compat(&old, &old, false, None, None).unwrap();
        assert!(same.compatible);
        assert!(compat(&old, &widget("v2", "{}"), false, None, Some("v1")).is_err());
        assert!(
            compat(
                &old,
                &widget("v2", "{a: {type: string}, b: {type: integer}}"),
                false,
                None,
                Some("v2")
            )
            .unwrap()
            .compatible
        );
    }
}
