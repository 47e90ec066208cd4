//! CustomResourceDefinition manifests for tests, as the YAML a user would write.
//!
//! Every CRD manifest starts with the same lines (apiVersion, kind, name, group, scope, names);
//! [`Crd`] writes those and each test gives only what is particular to its CRD: its versions
//! (schemas, subresources, printer columns, ...) and perhaps a conversion. The text is laid out as
//! a person would write it, so a test may still edit it with `str::replace`.
//!
//! For example, `Crd::namespaced("widgets", "Widget").singular("widget")` with
//! `.storage_version("v1", schema)` is `widgets.example.com` with one served storage version whose
//! `openAPIV3Schema` is `schema`; `.yaml()` writes it. (The unit tests below show whole manifests;
//! there is no doctest, to keep `cargo test` from building one more binary.)

/// A CRD manifest under construction; [`Crd::yaml`] writes it. The group is `example.com` unless
/// [`Crd::group`] says otherwise.
#[derive(Clone, Debug)]
pub struct Crd {
    group: String,
    plural: String,
    kind: String,
    scope: &'static str,
    singular: Option<String>,
    list_kind: Option<String>,
    short_names: Vec<String>,
    categories: Vec<String>,
    conversion: Option<String>,
    versions: Vec<String>,
}

impl Crd {
    /// A namespaced CRD `<plural>.example.com` of kind `kind`, with no versions yet.
    pub fn namespaced(plural: &str, kind: &str) -> Crd {
        Crd {
            group: "example.com".into(),
            plural: plural.into(),
            kind: kind.into(),
            scope: "Namespaced",
            singular: None,
            list_kind: None,
            short_names: Vec::new(),
            categories: Vec::new(),
            conversion: None,
            versions: Vec::new(),
        }
    }

    /// A cluster-scoped CRD `<plural>.example.com` of kind `kind`, with no versions yet.
    pub fn cluster_scoped(plural: &str, kind: &str) -> Crd {
        Crd {
            scope: "Cluster",
            ..Crd::namespaced(plural, kind)
        }
    }

    /// Serves the kind in API group `group` instead of `example.com`.
    pub fn group(mut self, group: &str) -> Crd {
        self.group = group.into();
        self
    }

    pub fn singular(mut self, singular: &str) -> Crd {
        self.singular = Some(singular.into());
        self
    }

    pub fn list_kind(mut self, list_kind: &str) -> Crd {
        self.list_kind = Some(list_kind.into());
        self
    }

    pub fn short_names(mut self, short_names: &[&str]) -> Crd {
        self.short_names = short_names.iter().map(|s| s.to_string()).collect();
        self
    }

    pub fn categories(mut self, categories: &[&str]) -> Crd {
        self.categories = categories.iter().map(|s| s.to_string()).collect();
        self
    }

    /// The `spec.conversion` block, as YAML at any indentation (`strategy: ...` and below).
    pub fn conversion(mut self, yaml: &str) -> Crd {
        self.conversion = Some(yaml.to_string());
        self
    }

    /// Adds one entry of `spec.versions`, as YAML at any indentation, starting with its
    /// `name: ...` line.
    pub fn version(mut self, yaml: &str) -> Crd {
        self.versions.push(yaml.to_string());
        self
    }

    /// Adds a served storage version `name` whose `openAPIV3Schema` is `schema` (YAML at any
    /// indentation), with nothing else.
    pub fn storage_version(self, name: &str, schema: &str) -> Crd {
        let version = format!(
            "name: {name}\nserved: true\nstorage: true\nschema:\n  openAPIV3Schema:\n{}",
            indent(schema, 4)
        );
        self.version(&version)
    }

    /// The CRD's object name, `<plural>.<group>`.
    pub fn name(&self) -> String {
        format!("{}.{}", self.plural, self.group)
    }

    /// The manifest.
    pub fn yaml(&self) -> String {
        let mut names = format!("plural: {}", self.plural);
        if let Some(singular) = &self.singular {
            names.push_str(&format!(", singular: {singular}"));
        }
        names.push_str(&format!(", kind: {}", self.kind));
        if let Some(list_kind) = &self.list_kind {
            names.push_str(&format!(", listKind: {list_kind}"));
        }
        if !self.short_names.is_empty() {
            names.push_str(&format!(", shortNames: [{}]", self.short_names.join(", ")));
        }
        if !self.categories.is_empty() {
            names.push_str(&format!(", categories: [{}]", self.categories.join(", ")));
        }
        let mut yaml = format!(
            "apiVersion: apiextensions.k8s.io/v1\n\
             kind: CustomResourceDefinition\n\
             metadata:\n  name: {name}\n\
             spec:\n  group: {group}\n  scope: {scope}\n  names: {{{names}}}\n",
            name = self.name(),
            group = self.group,
            scope = self.scope,
        );
        if let Some(conversion) = &self.conversion {
            yaml.push_str("  conversion:\n");
            yaml.push_str(&indent(conversion, 4));
        }
        yaml.push_str("  versions:\n");
        for version in &self.versions {
            // `  - ` before the first line, the others under it.
            let block = indent(version, 4);
            yaml.push_str("  - ");
            yaml.push_str(&block[4..]);
        }
        yaml
    }
}

/// `text` without its leading blank lines and common indentation, then indented by `spaces`;
/// every line ends with a newline.
fn indent(text: &str, spaces: usize) -> String {
    let lines: Vec<&str> = text
        .lines()
        .skip_while(|line| line.trim().is_empty())
        .collect();
    let lines = match lines.iter().rposition(|line| !line.trim().is_empty()) {
        Some(last) => &lines[..=last],
        None => &[][..],
    };
    let common = lines
        .iter()
        .filter(|line| !line.trim().is_empty())
        .map(|line| line.len() - line.trim_start().len())
        .min()
        .unwrap_or(0);
    let pad = " ".repeat(spaces);
    lines
        .iter()
        .map(|line| {
            if line.trim().is_empty() {
                "\n".to_string()
            } else {
                format!("{pad}{}\n", &line[common..])
            }
        })
        .collect()
}

/// A namespaced CRD `<plural>.example.com` (kind `kind`, version v1) whose `spec.size` has the
/// JSON type `size_type`: the same CRD shaped differently in different workspaces.
pub fn sized(plural: &str, kind: &str, size_type: &str) -> Crd {
    Crd::namespaced(plural, kind).storage_version(
        "v1",
        &format!(
            "
            type: object
            properties:
              spec:
                type: object
                properties:
                  size: {{type: {size_type}}}
            "
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_manifest_is_laid_out_as_written_by_hand() {
        let expected = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: things.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: things, kind: Thing}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: string}
";
        assert_eq!(sized("things", "Thing", "string").yaml(), expected);
    }

    #[test]
    fn every_part_has_its_place() {
        let crd = Crd::cluster_scoped("gadgets", "Gadget")
            .group("tools.example.org")
            .singular("gadget")
            .list_kind("GadgetList")
            .short_names(&["gd", "gad"])
            .categories(&["all"])
            .conversion(
                "
                strategy: Webhook
                webhook:
                  conversionReviewVersions: [v1]
                ",
            )
            .version("name: v1\nserved: false\nstorage: false\n\nschema: {}")
            .version(
                "
                  name: v2
                  served: true
                  storage: true
                ",
            );
        assert_eq!(crd.name(), "gadgets.tools.example.org");
        assert_eq!(
            crd.yaml(),
            "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.tools.example.org
spec:
  group: tools.example.org
  scope: Cluster
  names: {plural: gadgets, singular: gadget, kind: Gadget, listKind: GadgetList, shortNames: [gd, gad], categories: [all]}
  conversion:
    strategy: Webhook
    webhook:
      conversionReviewVersions: [v1]
  versions:
  - name: v1
    served: false
    storage: false

    schema: {}
  - name: v2
    served: true
    storage: true
"
        );
    }
}
