//! The Table columns of a custom resource, as apiextensions-apiserver's table convertor makes
//! them: `Name`, then the CRD version's `additionalPrinterColumns` (or, when it declares none,
//! `Age` from `.metadata.creationTimestamp`). Each cell is the first value its JSONPath reaches,
//! typed by the column (`integer`, `number`, `boolean`, `date` as an age, `string` as the
//! JSONPath printer writes it); a missing value is `null`. Every column is sent with its
//! priority; kubectl shows priority > 0 columns only with `-o wide`.

use jiff::Timestamp;
use kcp_apimachinery::json::Projection;
use kcp_apimachinery::jsonpath::{self, JsonPath};
use kcp_apis::custom::{CustomResource, PrinterColumn};
use serde_json::{Value, json};

use kcp_registry::kinds::printing::human_duration;

const NAME_DESCRIPTION: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated.";
const CREATION_TIMESTAMP_DESCRIPTION: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.";

/// The printer columns of one custom resource version, paths parsed once per Table.
pub struct CustomColumns {
    columns: Vec<(PrinterColumn, Option<JsonPath>)>,
}

impl CustomColumns {
    pub fn new(custom: &CustomResource) -> CustomColumns {
        let declared = if custom.printer_columns.is_empty() {
            vec![PrinterColumn {
                name: "Age".into(),
                type_: "date".into(),
                format: String::new(),
                description: CREATION_TIMESTAMP_DESCRIPTION.into(),
                priority: 0,
                json_path: ".metadata.creationTimestamp".into(),
            }]
        } else {
            custom.printer_columns.clone()
        };
        CustomColumns {
            columns: declared
                .into_iter()
                .map(|column| {
                    let path = JsonPath::parse(&column.json_path).ok();
                    (column, path)
                })
                .collect(),
        }
    }

    /// The column definitions: `Name` first.
    pub fn definitions(&self) -> Vec<Value> {
        let mut definitions = vec![json!({
            "name": "Name",
            "type": "string",
            "format": "name",
            "description": NAME_DESCRIPTION,
            "priority": 0,
        })];
        definitions.extend(self.columns.iter().map(|(column, _)| {
            let description = if column.description.is_empty() {
                format!(
                    "Custom resource definition column (in JSONPath format): {}",
                    column.json_path
                )
            } else {
                column.description.clone()
            };
            json!({
                "name": column.name,
                "type": column.type_,
                "format": column.format,
                "description": description,
                "priority": column.priority,
            })
        }));
        definitions
    }

    /// The fields [`CustomColumns::cells`] reads: the name, and where each column's path
    /// leads before its first step that is not a field name.
    pub fn projection(&self) -> Projection {
        let mut projection = Projection::default();
        projection.include(["metadata", "name"]);
        for path in self.columns.iter().filter_map(|(_, path)| path.as_ref()) {
            projection.include(path.leading_fields());
        }
        projection
    }

    /// The cells of one object's row, ages measured to `now`.
    pub fn cells(&self, object: &Value, now: Timestamp) -> Vec<Value> {
        let mut cells = vec![json!(
            object["metadata"]["name"].as_str().unwrap_or_default()
        )];
        cells.extend(self.columns.iter().map(|(column, path)| {
            match path.as_ref().and_then(|p| p.first(object)) {
                Some(value) => cell(&column.type_, value, now),
                None => Value::Null,
            }
        }));
        cells
    }
}

/// A found value as a cell of a column of type `kind`; `null` when the value does not fit.
fn cell(kind: &str, value: &Value, now: Timestamp) -> Value {
    match (kind, value) {
        (_, Value::Null) => Value::Null,
        ("string", value) => json!(jsonpath::text(value)),
        ("integer", Value::Number(n)) => match n.as_i64() {
            Some(i) => json!(i),
            None => n.as_f64().map_or(Value::Null, |f| json!(f as i64)),
        },
        ("number", Value::Number(n)) => n.as_f64().map_or(Value::Null, |f| json!(f)),
        ("boolean", Value::Bool(b)) => json!(b),
        ("date", Value::String(text)) => match text.parse::<Timestamp>() {
            Ok(then) => json!(human_duration(now.as_second() - then.as_second())),
            Err(_) => json!("<invalid>"),
        },
        _ => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use kcp_apis::custom::Interner;

    use super::*;

    fn widget(columns: Value) -> std::sync::Arc<CustomResource> {
        let resources = Interner::default().resources(&json!({
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                          "additionalPrinterColumns": columns}]
        }));
        resources[0].custom.clone().unwrap()
    }

    fn now() -> Timestamp {
        "2024-01-01T01:00:00Z".parse().unwrap()
    }

    #[test]
    fn without_declared_columns_name_and_age() {
        let columns = CustomColumns::new(&widget(json!(null)));
        let definitions = columns.definitions();
        assert_eq!(definitions.len(), 2);
        assert_eq!(definitions[0]["name"], "Name");
        assert_eq!(definitions[0]["format"], "name");
        assert_eq!(definitions[1]["name"], "Age");
        assert_eq!(definitions[1]["type"], "date");
        let object =
            json!({"metadata": {"name": "w", "creationTimestamp": "2024-01-01T00:00:00Z"}});
        assert_eq!(columns.cells(&object, now()), [json!("w"), json!("60m")]);
    }

    #[test]
    fn declared_columns_replace_age_and_type_their_cells() {
        let columns = CustomColumns::new(&widget(json!([
            {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
            {"name": "Ratio", "type": "number", "jsonPath": ".spec.ratio"},
            {"name": "Ready", "type": "boolean", "jsonPath": ".status.ready"},
            {"name": "Color", "type": "string", "jsonPath": ".spec.color", "priority": 1,
             "description": "the colour"},
            {"name": "First", "type": "string", "jsonPath": ".spec.items[*].name"},
            {"name": "Second", "type": "string", "jsonPath": ".spec.items[1].name"},
            {"name": "Items", "type": "string", "jsonPath": ".spec.items"},
            {"name": "Since", "type": "date", "jsonPath": ".status.since"},
            {"name": "Bad", "type": "date", "jsonPath": ".status.bad"},
            {"name": "Missing", "type": "string", "jsonPath": ".spec.nothing"},
            {"name": "Mistyped", "type": "integer", "jsonPath": ".spec.color"},
        ])));
        let definitions = columns.definitions();
        let names: Vec<&str> = definitions
            .iter()
            .map(|d| d["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "Name", "Replicas", "Ratio", "Ready", "Color", "First", "Second", "Items", "Since",
                "Bad", "Missing", "Mistyped"
            ]
        );
        assert_eq!(definitions[4]["priority"], 1);
        assert_eq!(definitions[4]["description"], "the colour");
        assert_eq!(
            definitions[1]["description"],
            "Custom resource definition column (in JSONPath format): .spec.replicas"
        );
        let object = json!({
            "metadata": {"name": "w"},
            "spec": {"replicas": 3, "ratio": 1, "color": "red",
                     "items": [{"name": "a"}, {"name": "b"}]},
            "status": {"ready": true, "since": "2024-01-01T00:30:00Z", "bad": "yesterday"}
        });
        assert_eq!(
            columns.cells(&object, now()),
            [
                json!("w"),
                json!(3),
                json!(1.0),
                json!(true),
                json!("red"),
                json!("a"),
                json!("b"),
                json!(r#"[{"name":"a"},{"name":"b"}]"#),
                json!("30m"),
                json!("<invalid>"),
                Value::Null,
                Value::Null,
            ]
        );
    }
}
