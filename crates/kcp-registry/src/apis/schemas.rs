//! APIResourceSchemas: CRD specs that an APIExport exports. A schema's spec is a CRD's but
//! for each version's `schema`, which is the `openAPIV3Schema` itself, and `nameValidation`.

use serde_json::{Map, Value, json};

/// The CRD spec an APIResourceSchema's `spec` serves like.
pub fn crd_spec(schema_spec: &Value) -> Value {
    let mut spec = schema_spec.as_object().cloned().unwrap_or_default();
    spec.remove("nameValidation");
    // As a CRD's defaults set it.
    spec.entry("conversion")
        .or_insert_with(|| json!({"strategy": "None"}));
    if let Some(Value::Array(versions)) = spec.get_mut("versions") {
        for version in versions.iter_mut().filter_map(Value::as_object_mut) {
            if let Some(schema) = version.remove("schema") {
                version.insert("schema".into(), json!({ "openAPIV3Schema": schema }));
            }
        }
    }
    Value::Object(spec)
}

/// A CRD object for an APIResourceSchema, as the CRD rules validate it (named
/// `<plural>.<group>`, Established by nobody).
pub fn as_crd(schema: &Value) -> Value {
    let spec = crd_spec(&schema["spec"]);
    let name = format!(
        "{}.{}",
        spec["names"]["plural"].as_str().unwrap_or_default(),
        spec["group"].as_str().unwrap_or_default()
    );
    let mut metadata = Map::new();
    metadata.insert("name".into(), json!(name));
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": metadata,
        "spec": spec,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schema_serves_as_a_crd_spec() {
        let spec = json!({
            "group": "example.io", "scope": "Namespaced", "nameValidation": "DNS1123Subdomain",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                          "schema": {"type": "object"}}]
        });
        let crd = crd_spec(&spec);
        assert_eq!(
            crd["versions"][0]["schema"],
            json!({"openAPIV3Schema": {"type": "object"}})
        );
        assert!(crd.get("nameValidation").is_none());
        assert_eq!(crd["conversion"], json!({"strategy": "None"}));
        assert_eq!(
            as_crd(&json!({"spec": spec}))["metadata"]["name"],
            "widgets.example.io"
        );
    }
}
