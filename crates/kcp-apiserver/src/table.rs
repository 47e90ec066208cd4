//! `meta.k8s.io Table` responses: what `kubectl get` prints. The columns and cells of each kind
//! come from the kind's rule set (`kcp_registry::kinds`) (custom resources: [`crate::custom_columns`]); `includeObject` decides what each row carries besides its
//! cells: nothing (`None`), a `PartialObjectMetadata` (`Metadata`, the default) or the whole
//! object (`Object`).

use jiff::Timestamp;
use kcp_apimachinery::json::{Projection, project};
use kcp_apis::builtin::Resource;
use serde_json::Value;

use crate::custom_columns::CustomColumns;
use crate::list_frame::ListFrame;
use crate::negotiation::{Encoding, IncludeObject, MetaVersion, document, partial_object_metadata};
use kcp_registry::kinds;

/// A Table of `objects` (list items or a single object) with `list_meta` as its ListMeta. Each
/// row takes what it carries from its object (moved, not copied) once its cells are read.
pub fn render(
    resource: &Resource,
    objects: Vec<Value>,
    list_meta: Value,
    version: MetaVersion,
    include: IncludeObject,
) -> Value {
    let now = Timestamp::now();
    let custom = resource.custom().map(CustomColumns::new);
    let kind = kinds::rules(resource);
    let rows: Vec<Value> = objects
        .into_iter()
        .map(|object| {
            let cells = match &custom {
                Some(columns) => columns.cells(&object, now),
                None => kind.cells(&object, now),
            };
            let carried = match include {
                IncludeObject::None => Value::Null,
                IncludeObject::Metadata => partial_object_metadata(object, version),
                IncludeObject::Object => object,
            };
            row(cells, carried)
        })
        .collect();
    let columns: Vec<Value> = match &custom {
        Some(columns) => columns.definitions(),
        None => kind.columns().iter().map(|c| c.to_json()).collect(),
    };
    table(columns, rows, list_meta, version)
}

fn row(cells: Vec<Value>, carried: Value) -> Value {
    let mut row = serde_json::Map::new();
    row.insert("cells".into(), Value::Array(cells));
    row.insert("object".into(), carried);
    Value::Object(row)
}

fn table(columns: Vec<Value>, rows: Vec<Value>, list_meta: Value, version: MetaVersion) -> Value {
    document(
        "Table",
        version.api_version(),
        [
            ("metadata", list_meta),
            ("columnDefinitions", Value::Array(columns)),
            ("rows", Value::Array(rows)),
        ],
    )
}

/// The JSON rows of a custom resource's Table made from its objects' JSON answers (what a GET
/// of each answers), without decoding them whole: the cells from the fields the printer
/// columns read ([`Projection`]), the row's object copied from the answer's bytes (its
/// metadata, or all of it). The bytes are those of [`render`]'s rows encoded as JSON: the row's
/// frame is taken from the encoding of a Table of one row whose cells and object are
/// placeholders.
pub struct JsonRows {
    columns: CustomColumns,
    projection: Projection,
    now: Timestamp,
    include: IncludeObject,
    /// A row up to its cells.
    opening: Vec<u8>,
    /// From after the cells up to what the row carries of its object.
    middle: Vec<u8>,
    /// After what the row carries.
    closing: Vec<u8>,
}

impl JsonRows {
    /// The rows of `resource`'s Table; `None` for a kind that is not a custom resource (the
    /// cells of built-in kinds may read any field).
    pub fn new(resource: &Resource, version: MetaVersion, include: IncludeObject) -> Option<Self> {
        let columns = CustomColumns::new(resource.custom()?);
        let projection = columns.projection();
        let (carried, placeholder): (Value, &[u8]) = match include {
            IncludeObject::None => (Value::Null, &b""[..]),
            IncludeObject::Metadata => (
                partial_object_metadata(Value::Null, version),
                &b"\"metadata\":{}"[..],
            ),
            IncludeObject::Object => (Value::Null, &b"\"object\":null"[..]),
        };
        let encode = |rows| {
            crate::status::json_bytes(&table(columns.definitions(), rows, Value::Null, version))
        };
        let frame = ListFrame::new(Encoding::Json, encode(Vec::new()))?;
        let one = encode(vec![row(Vec::new(), carried)]);
        let template = frame.items(&one)?;
        let cells_at = find(template, b"\"cells\":[]", 0)? + b"\"cells\":".len();
        let after_cells = cells_at + 2;
        let (middle_end, closing_start) = match include {
            IncludeObject::None => (template.len(), template.len()),
            _ => {
                let at = find(template, placeholder, after_cells)?;
                let value_at = at + placeholder.iter().position(|b| *b == b':')? + 1;
                (value_at, at + placeholder.len())
            }
        };
        Some(JsonRows {
            columns,
            projection,
            now: Timestamp::now(),
            include,
            opening: template[..cells_at].to_vec(),
            middle: template[after_cells..middle_end].to_vec(),
            closing: template[closing_start..].to_vec(),
        })
    }

    /// The row of each answer; `None` if one of them is not an object's JSON (the caller
    /// decodes them instead).
    pub fn rows(&self, answers: &[Vec<u8>]) -> Option<Vec<Vec<u8>>> {
        answers.iter().map(|answer| self.row(answer)).collect()
    }

    fn row(&self, answer: &[u8]) -> Option<Vec<u8>> {
        let (fields, metadata) = project(answer, &self.projection, "metadata")?;
        let cells = self.columns.cells(&fields, self.now);
        // The metadata as Kubernetes writes a PartialObjectMetadata's: in ObjectMeta's order,
        // where a custom resource's stored metadata has its keys sorted.
        let ordered;
        let carried: &[u8] = match (self.include, metadata) {
            (IncludeObject::None, _) => &b""[..],
            (IncludeObject::Metadata, None) => &b"{}"[..],
            (IncludeObject::Metadata, Some(raw)) => {
                ordered =
                    kcp_apis::messages::reordered(raw.get(), kcp_apis::messages::OBJECT_META)?;
                &ordered
            }
            (IncludeObject::Object, _) => answer,
        };
        let mut out = Vec::with_capacity(
            self.opening.len() + self.middle.len() + self.closing.len() + carried.len() + 64,
        );
        out.extend_from_slice(&self.opening);
        serde_json::to_writer(&mut out, &cells).ok()?;
        out.extend_from_slice(&self.middle);
        out.extend_from_slice(carried);
        out.extend_from_slice(&self.closing);
        Some(out)
    }
}

/// The objects of JSON answers whose rows [`JsonRows::rows`] could not make, decoded to be
/// rendered the usual way.
pub fn decoded(answers: &[Vec<u8>]) -> Result<Vec<Value>, kcp_registry::RegistryError> {
    answers
        .iter()
        .map(|answer| {
            kcp_apimachinery::json::decode_stored(answer).map_err(|error| {
                kcp_registry::RegistryError::Internal(format!("an object's answer: {error}"))
            })
        })
        .collect()
}

/// Where `needle` first occurs in `haystack` at or after `from`.
fn find(haystack: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    haystack
        .get(from..)?
        .windows(needle.len())
        .position(|window| window == needle)
        .map(|at| from + at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kcp_apis::builtin::RESOURCES;
    use serde_json::json;

    fn configmaps() -> &'static Resource {
        RESOURCES.iter().find(|r| r.name == "configmaps").unwrap()
    }

    fn cm() -> Value {
        json!({"kind": "ConfigMap", "apiVersion": "v1",
               "metadata": {"name": "a", "creationTimestamp": "2020-01-01T00:00:00Z"},
               "data": {"k": "v"}})
    }

    #[test]
    fn rows_carry_cells_and_metadata_by_default() {
        let table = render(
            configmaps(),
            vec![cm()],
            json!({"resourceVersion": "7"}),
            MetaVersion::V1,
            IncludeObject::Metadata,
        );
        assert_eq!(table["apiVersion"], "meta.k8s.io/v1");
        assert_eq!(table["columnDefinitions"][1]["name"], "Data");
        assert_eq!(table["rows"][0]["cells"][0], "a");
        assert_eq!(table["rows"][0]["cells"][1], 1);
        assert!(table["rows"][0]["cells"][2].as_str().unwrap().contains('y'));
        assert_eq!(table["rows"][0]["object"]["kind"], "PartialObjectMetadata");
        assert_eq!(table["rows"][0]["object"]["metadata"]["name"], "a");
        assert_eq!(table["metadata"]["resourceVersion"], "7");
    }

    fn gadgets() -> std::sync::Arc<Resource> {
        let resources = kcp_apis::custom::Interner::default().resources(&json!({
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "gadgets", "kind": "Gadget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "additionalPrinterColumns": [
                    {"name": "Color", "type": "string", "jsonPath": ".spec.color"},
                    {"name": "Size", "type": "integer", "jsonPath": ".spec.size", "priority": 1},
                    {"name": "Ready", "type": "string",
                     "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"},
                    {"name": "Tier", "type": "string", "jsonPath": ".metadata.labels['tier']"},
                    {"name": "Parts", "type": "string", "jsonPath": ".spec.parts[*].name"},
                    {"name": "Since", "type": "date", "jsonPath": ".status.since"},
                    {"name": "Unparsable", "type": "string", "jsonPath": ".spec[oops"},
                ]}]
        }));
        resources[0].clone()
    }

    fn gadget(i: usize) -> Value {
        let color = ["red", "green", "blue"][i % 3];
        let mut object = json!({
            "apiVersion": "example.com/v1", "kind": "Gadget",
            "metadata": {"name": format!("g{i}"), "namespace": "default",
                         "creationTimestamp": "2020-01-01T00:00:00Z",
                         "resourceVersion": (10 + i).to_string(),
                         "annotations": {"note": "quote \" and \u{1} and é"},
                         "managedFields": [{"manager": "m", "operation": "Update",
                                            "fieldsType": "FieldsV1",
                                            "fieldsV1": {"f:spec": {"f:color": {}}}}]},
            "spec": {"color": color, "size": i * 10 + 1,
                     "parts": [{"name": "a"}, {"name": format!("p{i}")}]},
            "status": {"conditions": [{"type": "Other", "status": "False"},
                                      {"type": "Ready", "status": "True"}],
                       "since": "2020-01-01T00:00:00Z"},
        });
        match i {
            0 => object["metadata"]["labels"] = json!({"tier": "gold"}),
            1 => object["spec"] = json!("not an object"),
            2 => object["status"] = Value::Null,
            3 => {
                object.as_object_mut().unwrap().remove("metadata");
            }
            _ => {}
        }
        object
    }

    /// The JSON of a Table of `objects` made from their answers, framed as `render`'s.
    fn from_answers(resource: &Resource, objects: &[Value], include: IncludeObject) -> String {
        let rows = JsonRows::new(resource, MetaVersion::V1, include).unwrap();
        let answers: Vec<Vec<u8>> = objects
            .iter()
            .map(|o| serde_json::to_vec(o).unwrap())
            .collect();
        let rows = rows.rows(&answers).unwrap();
        let empty = render(
            resource,
            Vec::new(),
            json!({"resourceVersion": "9"}),
            MetaVersion::V1,
            include,
        );
        let frame = ListFrame::new(Encoding::Json, crate::status::json_bytes(&empty)).unwrap();
        let mut out = frame.prefix.clone();
        for (i, row) in rows.iter().enumerate() {
            if i > 0 {
                out.extend_from_slice(frame.separator);
            }
            out.extend_from_slice(row);
        }
        out.extend_from_slice(&frame.suffix);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn rows_made_from_answers_are_the_rendered_rows_byte_for_byte() {
        let resource = gadgets();
        let objects: Vec<Value> = (0..6).map(gadget).collect();
        for include in [
            IncludeObject::Metadata,
            IncludeObject::None,
            IncludeObject::Object,
        ] {
            for count in [1, 6] {
                let objects = &objects[..count];
                let rendered = render(
                    &resource,
                    objects.to_vec(),
                    json!({"resourceVersion": "9"}),
                    MetaVersion::V1,
                    include,
                );
                let rendered = String::from_utf8(crate::status::json_bytes(&rendered)).unwrap();
                assert_eq!(
                    from_answers(&resource, objects, include),
                    rendered,
                    "{include:?}"
                );
            }
        }
    }

    #[test]
    fn rows_read_the_columns_fields_and_carry_the_metadata_as_stored() {
        let resource = gadgets();
        let table = from_answers(&resource, &[gadget(0)], IncludeObject::Metadata);
        let table: Value = serde_json::from_str(&table).unwrap();
        let cells = &table["rows"][0]["cells"];
        assert_eq!(cells[0], "g0");
        assert_eq!(cells[1], "red");
        assert_eq!(cells[2], 1);
        assert_eq!(cells[3], "True");
        assert_eq!(cells[4], "gold");
        assert_eq!(cells[5], "a");
        assert_eq!(cells[7], Value::Null);
        assert_eq!(
            table["rows"][0]["object"]["metadata"],
            gadget(0)["metadata"]
        );
    }

    #[test]
    fn rows_are_made_for_custom_resources_only_and_from_json_only() {
        assert!(JsonRows::new(configmaps(), MetaVersion::V1, IncludeObject::Metadata).is_none());
        let rows =
            JsonRows::new(&gadgets(), MetaVersion::V1beta1, IncludeObject::Metadata).unwrap();
        assert!(rows.rows(&[b"{}".to_vec()]).is_some());
        assert!(rows.rows(&[b"{}".to_vec(), b"{".to_vec()]).is_none());
        assert!(rows.rows(&[b"[]".to_vec()]).is_none());
        let objects = decoded(&[serde_json::to_vec(&gadget(4)).unwrap()]).unwrap();
        assert_eq!(objects, [gadget(4)]);
        assert!(decoded(&[b"{".to_vec()]).is_err());
    }

    #[test]
    fn include_object_none_and_object() {
        let none = render(
            configmaps(),
            vec![cm()],
            json!({}),
            MetaVersion::V1beta1,
            IncludeObject::None,
        );
        assert_eq!(none["apiVersion"], "meta.k8s.io/v1beta1");
        assert!(none["rows"][0]["object"].is_null());
        let whole = render(
            configmaps(),
            vec![cm()],
            json!({}),
            MetaVersion::V1,
            IncludeObject::Object,
        );
        assert_eq!(whole["rows"][0]["object"]["data"]["k"], "v");
    }
}
