//! `/openapi/v2`: the Swagger 2.0 document of what a logical cluster serves, for clients that
//! still read it (kubectl's client-side validation and `explain` fallback, importers). Only
//! `definitions` are written (every schema of the cluster's OpenAPI v3 documents, converted:
//! `#/components/schemas/` references become `#/definitions/`, single-reference `allOf`
//! wrappers become references, int-or-string becomes `string` with format `int-or-string`,
//! `x-kubernetes-*` extensions are kept); `paths` is empty.
//!
//! JSON by default; protobuf (gnostic's `openapi_v2.Document`, the form kubectl asks for with
//! `application/com.github.proto-openapi.spec.v2@v1.0+protobuf`) when asked, labelled
//! `...spec.v2.v1.0+protobuf` as kube-apiserver labels it.

use std::collections::BTreeMap;

use bytes::Bytes;
use http::{HeaderMap, Response, StatusCode, header};
use prost::Message;
use serde_json::{Map, Value, json};

use crate::served::Served;
use crate::status::{Body, full};

/// The media types clients ask the protobuf form by (the first is what kubectl sends), and the
/// one the answer is labelled with (Go's media type parser refuses the `@`).
const PROTOBUF_ASKED: [&str; 2] = [
    "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
    "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
];
const PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// Answers `GET <prefix>/openapi/v2`.
pub fn serve(served: &Served, headers: &HeaderMap) -> Response<Body> {
    let document = document(served);
    let wants_protobuf = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| {
            accept
                .split(',')
                .any(|t| PROTOBUF_ASKED.iter().any(|p| t.trim().starts_with(p)))
        });
    let (content_type, bytes) = match wants_protobuf {
        true => (
            PROTOBUF,
            Bytes::from(proto::document(&document).encode_to_vec()),
        ),
        false => (
            "application/json",
            Bytes::from(serde_json::to_vec(&document).unwrap_or_default()),
        ),
    };
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, content_type)
        .body(full(bytes))
        .unwrap_or_else(|_| Response::new(full(Bytes::new())))
}

/// The Swagger 2.0 document (JSON) of what `served` serves.
pub fn document(served: &Served) -> Value {
    let mut definitions = BTreeMap::new();
    for schemas in crate::openapi::component_schemas(served) {
        for (name, schema) in schemas {
            definitions.entry(name).or_insert_with(|| to_v2(&schema));
        }
    }
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": crate::version::GIT_VERSION},
        "paths": {},
        "definitions": definitions,
    })
}

/// A v3 schema as v2 writes it.
fn to_v2(schema: &Value) -> Value {
    let Some(object) = schema.as_object() else {
        return schema.clone();
    };
    if let Some(reference) = object.get("$ref").and_then(Value::as_str) {
        return json!({"$ref": v2_reference(reference)});
    }
    let mut out = Map::new();
    // `allOf: [{$ref}]` (how v3 puts a description or default beside a reference): the ref.
    if let Some([only]) = object
        .get("allOf")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        && let Some(reference) = only.get("$ref").and_then(Value::as_str)
    {
        out.insert("$ref".into(), json!(v2_reference(reference)));
    }
    let int_or_string = object
        .get("x-kubernetes-int-or-string")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    for (key, value) in object {
        match key.as_str() {
            "allOf" | "anyOf" | "oneOf" | "not" | "nullable" | "$ref" => {}
            "properties" => {
                let properties: Map<String, Value> = value
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(name, property)| (name.clone(), to_v2(property)))
                    .collect();
                out.insert(key.clone(), Value::Object(properties));
            }
            "items" | "additionalProperties" if value.is_object() => {
                out.insert(key.clone(), to_v2(value));
            }
            _ => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    if int_or_string {
        out.insert("type".into(), json!("string"));
        out.insert("format".into(), json!("int-or-string"));
    }
    Value::Object(out)
}

fn v2_reference(reference: &str) -> String {
    match reference.strip_prefix("#/components/schemas/") {
        Some(name) => format!("#/definitions/{name}"),
        None => reference.to_string(),
    }
}

/// gnostic's `openapi_v2` messages, as far as the document uses them.
mod proto {
    use serde_json::Value;

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Document {
        #[prost(string, tag = "1")]
        pub swagger: String,
        #[prost(message, optional, tag = "2")]
        pub info: Option<Info>,
        #[prost(message, optional, tag = "8")]
        pub paths: Option<Paths>,
        #[prost(message, optional, tag = "9")]
        pub definitions: Option<Definitions>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Info {
        #[prost(string, tag = "1")]
        pub title: String,
        #[prost(string, tag = "2")]
        pub version: String,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Paths {}

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Definitions {
        #[prost(message, repeated, tag = "1")]
        pub additional_properties: Vec<NamedSchema>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct NamedSchema {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(message, optional, tag = "2")]
        pub value: Option<Schema>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Any {
        #[prost(string, tag = "2")]
        pub yaml: String,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct NamedAny {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(message, optional, tag = "2")]
        pub value: Option<Any>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct TypeItem {
        #[prost(string, repeated, tag = "1")]
        pub value: Vec<String>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ItemsItem {
        #[prost(message, repeated, tag = "1")]
        pub schema: Vec<Schema>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Properties {
        #[prost(message, repeated, tag = "1")]
        pub additional_properties: Vec<NamedSchema>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct AdditionalPropertiesItem {
        #[prost(message, optional, boxed, tag = "1")]
        pub schema: Option<Box<Schema>>,
        #[prost(bool, optional, tag = "2")]
        pub boolean: Option<bool>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Schema {
        #[prost(string, tag = "1")]
        pub r#ref: String,
        #[prost(string, tag = "2")]
        pub format: String,
        #[prost(string, tag = "3")]
        pub title: String,
        #[prost(string, tag = "4")]
        pub description: String,
        #[prost(message, optional, tag = "5")]
        pub default: Option<Any>,
        #[prost(double, tag = "7")]
        pub maximum: f64,
        #[prost(bool, tag = "8")]
        pub exclusive_maximum: bool,
        #[prost(double, tag = "9")]
        pub minimum: f64,
        #[prost(bool, tag = "10")]
        pub exclusive_minimum: bool,
        #[prost(int64, tag = "11")]
        pub max_length: i64,
        #[prost(int64, tag = "12")]
        pub min_length: i64,
        #[prost(string, tag = "13")]
        pub pattern: String,
        #[prost(int64, tag = "14")]
        pub max_items: i64,
        #[prost(int64, tag = "15")]
        pub min_items: i64,
        #[prost(bool, tag = "16")]
        pub unique_items: bool,
        #[prost(int64, tag = "17")]
        pub max_properties: i64,
        #[prost(int64, tag = "18")]
        pub min_properties: i64,
        #[prost(string, repeated, tag = "19")]
        pub required: Vec<String>,
        #[prost(message, repeated, tag = "20")]
        pub r#enum: Vec<Any>,
        #[prost(message, optional, boxed, tag = "21")]
        pub additional_properties: Option<Box<AdditionalPropertiesItem>>,
        #[prost(message, optional, tag = "22")]
        pub r#type: Option<TypeItem>,
        #[prost(message, optional, tag = "23")]
        pub items: Option<ItemsItem>,
        #[prost(message, optional, tag = "25")]
        pub properties: Option<Properties>,
        #[prost(message, optional, tag = "30")]
        pub example: Option<Any>,
        #[prost(message, repeated, tag = "31")]
        pub vendor_extension: Vec<NamedAny>,
    }

    /// A value as gnostic's `Any` carries it: YAML text (JSON is YAML).
    fn any(value: &Value) -> Any {
        Any {
            yaml: format!("{value}\n"),
        }
    }

    fn schema(value: &Value) -> Schema {
        let text = |key: &str| value[key].as_str().unwrap_or_default().to_string();
        let int = |key: &str| value[key].as_i64().unwrap_or_default();
        let float = |key: &str| value[key].as_f64().unwrap_or_default();
        let flag = |key: &str| value[key].as_bool().unwrap_or_default();
        let named = |map: &Value| -> Vec<NamedSchema> {
            map.as_object()
                .into_iter()
                .flatten()
                .map(|(name, s)| NamedSchema {
                    name: name.clone(),
                    value: Some(schema(s)),
                })
                .collect()
        };
        Schema {
            r#ref: text("$ref"),
            format: text("format"),
            title: text("title"),
            description: text("description"),
            default: value.get("default").map(any),
            maximum: float("maximum"),
            exclusive_maximum: flag("exclusiveMaximum"),
            minimum: float("minimum"),
            exclusive_minimum: flag("exclusiveMinimum"),
            max_length: int("maxLength"),
            min_length: int("minLength"),
            pattern: text("pattern"),
            max_items: int("maxItems"),
            min_items: int("minItems"),
            unique_items: flag("uniqueItems"),
            max_properties: int("maxProperties"),
            min_properties: int("minProperties"),
            required: value["required"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|r| r.as_str().map(str::to_string))
                .collect(),
            r#enum: value["enum"]
                .as_array()
                .into_iter()
                .flatten()
                .map(any)
                .collect(),
            additional_properties: match value.get("additionalProperties") {
                Some(Value::Bool(allowed)) => Some(Box::new(AdditionalPropertiesItem {
                    schema: None,
                    boolean: Some(*allowed),
                })),
                Some(s @ Value::Object(_)) => Some(Box::new(AdditionalPropertiesItem {
                    schema: Some(Box::new(schema(s))),
                    boolean: None,
                })),
                _ => None,
            },
            r#type: value["type"].as_str().map(|t| TypeItem {
                value: vec![t.to_string()],
            }),
            items: value
                .get("items")
                .filter(|i| i.is_object())
                .map(|i| ItemsItem {
                    schema: vec![schema(i)],
                }),
            properties: value
                .get("properties")
                .filter(|p| p.is_object())
                .map(|p| Properties {
                    additional_properties: named(p),
                }),
            example: value.get("example").map(any),
            vendor_extension: value
                .as_object()
                .into_iter()
                .flatten()
                .filter(|(key, _)| key.starts_with("x-"))
                .map(|(key, extension)| NamedAny {
                    name: key.clone(),
                    value: Some(any(extension)),
                })
                .collect(),
        }
    }

    /// The protobuf form of a Swagger 2.0 document (JSON).
    pub fn document(document: &Value) -> Document {
        let definitions = document["definitions"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(name, s)| NamedSchema {
                name: name.clone(),
                value: Some(schema(s)),
            })
            .collect();
        Document {
            swagger: "2.0".into(),
            info: Some(Info {
                title: document["info"]["title"]
                    .as_str()
                    .unwrap_or_default()
                    .into(),
                version: document["info"]["version"]
                    .as_str()
                    .unwrap_or_default()
                    .into(),
            }),
            paths: Some(Paths {}),
            definitions: Some(Definitions {
                additional_properties: definitions,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_convert_to_swagger_two() {
        let v3 = json!({
            "type": "object",
            "properties": {
                "metadata": {"allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}], "default": {}},
                "port": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
                "items": {"type": "array", "items": {"$ref": "#/components/schemas/X"}},
            },
            "x-kubernetes-group-version-kind": [{"group": "", "kind": "ConfigMap", "version": "v1"}],
        });
        let v2 = to_v2(&v3);
        assert_eq!(
            v2["properties"]["metadata"]["$ref"],
            "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
        );
        assert!(v2["properties"]["metadata"].get("allOf").is_none());
        assert_eq!(
            v2["properties"]["port"],
            json!({"x-kubernetes-int-or-string": true, "type": "string", "format": "int-or-string"})
        );
        assert_eq!(
            v2["properties"]["items"]["items"]["$ref"],
            "#/definitions/X"
        );
        let encoded = proto::document(
            &json!({"info": {"title": "t", "version": "v"}, "definitions": {"a": v2}}),
        );
        let definition = &encoded.definitions.as_ref().unwrap().additional_properties[0];
        let schema = definition.value.as_ref().unwrap();
        assert_eq!(schema.r#type.as_ref().unwrap().value, ["object"]);
        assert_eq!(
            schema.vendor_extension[0].name,
            "x-kubernetes-group-version-kind"
        );
        assert!(!encoded.encode_to_vec().is_empty());
    }

    #[test]
    fn the_document_holds_every_built_in_definition() {
        let document = document(&Served::builtin());
        let definitions = document["definitions"].as_object().unwrap();
        assert!(
            definitions.contains_key("io.k8s.api.core.v1.ConfigMap"),
            "{:?}",
            definitions.keys().take(5).collect::<Vec<_>>()
        );
        // Every reference points at a definition the document holds.
        fn references<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
            match value {
                Value::Object(map) => {
                    if let Some(Value::String(r)) = map.get("$ref") {
                        out.push(r);
                    }
                    map.values().for_each(|v| references(v, out));
                }
                Value::Array(items) => items.iter().for_each(|v| references(v, out)),
                _ => {}
            }
        }
        let mut all = Vec::new();
        references(&document, &mut all);
        for reference in all {
            let name = reference.strip_prefix("#/definitions/").unwrap();
            assert!(definitions.contains_key(name), "{reference}");
        }
    }
}
