//! The CRD of the churn benchmark: a cluster-scoped `Churn` whose schema has as many documented
//! object fields as it takes to reach the wanted size (each with a string, a bounded integer, a
//! boolean and a bounded list), and three CEL rules. Each revision differs only in the root
//! schema's description, so every update is a distinct spec of the same size.

use serde_json::{Map, Value, json};

pub const GROUP: &str = "churn.bench.kcp.io";
pub const PLURAL: &str = "churns";
pub const NAME: &str = "churns.churn.bench.kcp.io";

/// The documentation every field carries (what makes real CRDs big).
const DOC: &str = "Describes one part of the benchmark object in the words a generated \
    Kubernetes API reference would use: what the field holds, which values it accepts, how \
    the controller reacts to changes, and what the defaults are when it is left unset.";

/// The schema of field `i`.
fn field(i: usize) -> Value {
    json!({
        "type": "object",
        "description": format!("Field {i}. {DOC}"),
        "properties": {
            "name": {"type": "string", "maxLength": 63, "description": format!("The name of part {i}. {DOC}")},
            "count": {"type": "integer", "minimum": 0, "maximum": 1000, "description": format!("How many of part {i}.")},
            "enabled": {"type": "boolean", "description": format!("Whether part {i} is on.")},
            "tags": {"type": "array", "maxItems": 16, "items": {"type": "string", "maxLength": 32}},
        },
    })
}

/// Enough fields for the CRD to weigh about `size` bytes as JSON.
pub fn fields_for(size: usize) -> usize {
    let one = field(0).to_string().len() + 12;
    size.div_ceil(one).max(3)
}

/// The CRD with `fields` fields at `revision`.
pub fn crd(fields: usize, revision: u64) -> Value {
    let properties: Map<String, Value> = (0..fields)
        .map(|i| (format!("field{i:04}"), field(i)))
        .collect();
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": NAME},
        "spec": {
            "group": GROUP,
            "scope": "Cluster",
            "names": {"plural": PLURAL, "singular": "churn", "kind": "Churn"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "description": format!("Churn, revision {revision}."),
                    "properties": {"spec": {
                        "type": "object",
                        "properties": properties,
                        "x-kubernetes-validations": [
                            {"rule": "!has(self.field0000) || !has(self.field0000.count) || self.field0000.count <= 500",
                             "message": "field0000.count must not exceed 500"},
                            {"rule": "!has(self.field0001) || !has(self.field0001.name) || self.field0001.name != 'forbidden'"},
                            {"rule": "!has(self.field0002) || !has(self.field0002.tags) || self.field0002.tags.size() <= 8"},
                        ],
                    }},
                }},
            }],
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_crd_weighs_what_was_asked_and_revisions_differ() {
        let size = 300 * 1024;
        let fields = fields_for(size);
        let text = crd(fields, 1).to_string();
        assert!(
            text.len() >= size && text.len() < size + size / 20,
            "{}",
            text.len()
        );
        assert_ne!(crd(fields, 1), crd(fields, 2));
        assert_eq!(crd(fields, 2).to_string().len(), text.len());
        let spec = &crd(fields, 1)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
            ["spec"];
        assert_eq!(spec["properties"].as_object().unwrap().len(), fields);
        assert_eq!(
            spec["x-kubernetes-validations"].as_array().unwrap().len(),
            3
        );
    }
}
