//! `meta.k8s.io Table` responses: what `kubectl get` prints. The columns and cells of each kind
//! come from the kind's rule set (`kcp_registry::kinds`) (custom resources: [`crate::custom_columns`]); `includeObject` decides what each row carries besides its
//! cells: nothing (`None`), a `PartialObjectMetadata` (`Metadata`, the default) or the whole
//! object (`Object`).

use kcp_apis::builtin::Resource;
use serde_json::Value;

use crate::custom_columns::CustomColumns;
use crate::negotiation::{IncludeObject, MetaVersion, document, partial_object_metadata};
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
    let now = jiff::Timestamp::now();
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
            let mut row = serde_json::Map::new();
            row.insert("cells".into(), Value::Array(cells));
            row.insert("object".into(), carried);
            Value::Object(row)
        })
        .collect();
    let columns: Vec<Value> = match &custom {
        Some(columns) => columns.definitions(),
        None => kind.columns().iter().map(|c| c.to_json()).collect(),
    };
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
