//! `/openapi/v2`: the Swagger 2.0 document of what a logical cluster serves, for clients that
//! still read it (kubectl's client-side validation and `explain` fallback, code generators,
//! importers), made from the cluster's OpenAPI v3 documents:
//!
//! - `definitions`: every schema, converted (`#/components/schemas/` references become
//!   `#/definitions/`, single-reference `allOf` wrappers become references, int-or-string becomes
//!   `string` with format `int-or-string`, `x-kubernetes-*` extensions are kept). A custom
//!   resource's schema is also reduced as kube-apiserver reduces CRD schemas for v2
//!   ([`structural_v2`]): what v2 cannot say is dropped rather than said wrongly, so that
//!   validating against it (kubectl does, for a `List` of objects) never refuses what the
//!   server accepts.
//! - `paths`: every operation of every resource, as in v3: its description, parameters (the
//!   request body as a `body` parameter), media types, response schema, `operationId`, tags,
//!   `x-kubernetes-action` and `x-kubernetes-group-version-kind`.
//!
//! JSON by default; protobuf (gnostic's `openapi_v2.Document`, the form kubectl asks for with
//! `application/com.github.proto-openapi.spec.v2@v1.0+protobuf`) when asked, labelled
//! `...spec.v2.v1.0+protobuf` as kube-apiserver labels it.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use bytes::Bytes;
use http::{HeaderMap, Response, StatusCode, header};
use prost::Message;
use serde_json::{Map, Value, json};

use crate::status::{Body, full};
use kcp_registry::ServedResources;

/// The media types clients ask the protobuf form by (the first is what kubectl sends), and the
/// one the answer is labelled with (Go's media type parser refuses the `@`).
const PROTOBUF_ASKED: [&str; 2] = [
    "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
    "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
];
const PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// What every operation answers in (watch streams besides, for lists).
const PRODUCES: [&str; 3] = [
    "application/json",
    "application/yaml",
    "application/vnd.kubernetes.protobuf",
];
const STREAMS: [&str; 2] = [
    "application/json;stream=watch",
    "application/vnd.kubernetes.protobuf;stream=watch",
];

/// Answers `GET <prefix>/openapi/v2`.
pub fn serve(served: &ServedResources, headers: &HeaderMap) -> Response<Body> {
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

/// Swagger 2.0 `definitions` and `paths`.
type Parts = (BTreeMap<String, Value>, BTreeMap<String, Value>);

/// The Swagger 2.0 document (JSON) of what `served` serves: the built-in group versions'
/// parts, converted once, then those of its custom resources.
pub fn document(served: &ServedResources) -> Value {
    static BUILTIN: OnceLock<Parts> = OnceLock::new();
    let mut parts = BUILTIN
        .get_or_init(|| {
            let mut parts = Parts::default();
            for v3 in crate::openapi::builtin_v3_documents() {
                add(&mut parts, v3, false);
            }
            parts
        })
        .clone();
    for v3 in crate::openapi::custom_v3_documents(served) {
        add(&mut parts, v3, true);
    }
    let (definitions, paths) = parts;
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": crate::version::GIT_VERSION},
        "paths": paths,
        "definitions": definitions,
    })
}

/// Adds the schemas and paths of the v3 document `v3` to `parts`, where not there already;
/// a custom resource's schema as kube-apiserver reduces a CRD's for v2.
fn add((definitions, paths): &mut Parts, mut v3: Value, custom: bool) {
    if let Value::Object(schemas) = v3["components"]["schemas"].take() {
        for (name, schema) in schemas {
            definitions.entry(name).or_insert_with(|| match custom {
                true => to_v2(&structural_v2(schema)),
                false => to_v2(&schema),
            });
        }
    }
    if let Value::Object(v3_paths) = v3["paths"].take() {
        for (path, item) in v3_paths {
            paths.entry(path).or_insert_with(|| path_item(&item));
        }
    }
}

/// A v3 path item as v2 writes it: its parameters and operations.
fn path_item(item: &Value) -> Value {
    let mut out = Map::new();
    for (key, value) in item.as_object().into_iter().flatten() {
        match key.as_str() {
            "parameters" => {
                out.insert(key.clone(), parameters(value));
            }
            "get" | "put" | "post" | "delete" | "patch" | "head" | "options" => {
                out.insert(key.clone(), operation(key, value));
            }
            _ => {}
        }
    }
    Value::Object(out)
}

/// A v3 operation as v2 writes it: the request body becomes a `body` parameter, the media
/// types go to `consumes` and `produces`, the response's schema moves up.
fn operation(method: &str, op: &Value) -> Value {
    let mut out = Map::new();
    for key in ["description", "operationId", "tags"] {
        if let Some(value) = op.get(key) {
            out.insert(key.into(), value.clone());
        }
    }
    let consumes: Vec<String> = match op["requestBody"]["content"].as_object() {
        Some(content) if method == "patch" => content.keys().cloned().collect(),
        _ => vec!["*/*".into()],
    };
    out.insert("consumes".into(), json!(consumes));
    let mut produces: Vec<&str> = PRODUCES.to_vec();
    if op["x-kubernetes-action"] == "list" {
        produces.extend(STREAMS);
    }
    out.insert("produces".into(), json!(produces));
    out.insert("schemes".into(), json!(["https"]));
    let mut params = match parameters(&op["parameters"]) {
        Value::Array(params) => params,
        _ => Vec::new(),
    };
    if let Some(content) = op["requestBody"]["content"].as_object()
        && let Some(media) = content.values().next()
    {
        let mut body = json!({"name": "body", "in": "body", "schema": to_v2(&media["schema"])});
        if op["requestBody"]["required"] == true {
            body["required"] = json!(true);
        }
        params.insert(0, body);
    }
    out.insert("parameters".into(), Value::Array(params));
    let mut responses = Map::new();
    for (code, response) in op["responses"].as_object().into_iter().flatten() {
        let mut v2 = json!({"description": response["description"]});
        if let Some(schema) = response["content"]
            .as_object()
            .and_then(|content| content.values().next())
            .map(|media| &media["schema"])
        {
            v2["schema"] = to_v2(schema);
        }
        responses.insert(code.clone(), v2);
    }
    out.insert("responses".into(), Value::Object(responses));
    for (key, value) in op.as_object().into_iter().flatten() {
        if key.starts_with("x-") {
            out.insert(key.clone(), value.clone());
        }
    }
    Value::Object(out)
}

/// v3 parameters as v2 writes them: the schema's type and flags on the parameter itself.
fn parameters(params: &Value) -> Value {
    let converted = params.as_array().into_iter().flatten().map(|param| {
        let mut out = Map::new();
        for key in ["name", "in", "description", "required"] {
            if let Some(value) = param.get(key) {
                out.insert(key.into(), value.clone());
            }
        }
        for (key, value) in param["schema"].as_object().into_iter().flatten() {
            out.insert(key.clone(), value.clone());
        }
        Value::Object(out)
    });
    Value::Array(converted.collect())
}

/// A custom resource's v3 schema reduced as kube-apiserver reduces CRD schemas for OpenAPI v2
/// (`ToStructuralOpenAPIV2`): no `allOf`/`anyOf`/`oneOf`/`not`; a nullable value loses its
/// type, items and properties and is no longer required; a value that keeps unknown fields
/// loses its items and properties, and an object's type; an array left without items loses
/// its type. kubectl's v2 validation then checks nothing the server would not.
fn structural_v2(schema: Value) -> Value {
    let Value::Object(mut object) = schema else {
        return schema;
    };
    for junctor in ["anyOf", "oneOf", "not"] {
        object.remove(junctor);
    }
    // A reference put beside a description (metadata's) is no junctor: [`to_v2`] makes it the
    // reference.
    let wraps_reference = matches!(
        object.get("allOf").and_then(Value::as_array).map(Vec::as_slice),
        Some([only]) if only.get("$ref").is_some()
    );
    if !wraps_reference {
        object.remove("allOf");
    }
    let flag = |object: &Map<String, Value>, key: &str| object.get(key) == Some(&json!(true));
    if flag(&object, "nullable") {
        object.remove("type");
        object.remove("nullable");
        object.remove("items");
        object.remove("properties");
    }
    let preserves = flag(&object, "x-kubernetes-preserve-unknown-fields");
    if preserves {
        object.remove("items");
        object.remove("properties");
    }
    let kind = object.get("type").and_then(Value::as_str);
    if (kind == Some("array") && !object.contains_key("items"))
        || (preserves && kind == Some("object"))
    {
        object.remove("type");
    }
    let nullable = |schema: &Value| schema.get("nullable") == Some(&json!(true));
    let mut optional: Vec<String> = object
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter(|(_, property)| nullable(property))
        .map(|(name, _)| name.clone())
        .collect();
    if object.get("additionalProperties").is_some_and(nullable) {
        object.remove("required");
        optional.clear();
    }
    if let Some(Value::Array(required)) = object.get_mut("required") {
        required.retain(|name| {
            !name
                .as_str()
                .is_some_and(|n| optional.iter().any(|o| o == n))
        });
        if required.is_empty() {
            object.remove("required");
        }
    }
    if let Some(Value::Object(properties)) = object.get_mut("properties") {
        for property in properties.values_mut() {
            *property = structural_v2(property.take());
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(child) = object.get_mut(key).filter(|child| child.is_object()) {
            *child = structural_v2(child.take());
        }
    }
    Value::Object(object)
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
    pub struct Paths {
        #[prost(message, repeated, tag = "2")]
        pub path: Vec<NamedPathItem>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct NamedPathItem {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(message, optional, tag = "2")]
        pub value: Option<PathItem>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct PathItem {
        #[prost(message, optional, tag = "2")]
        pub get: Option<Operation>,
        #[prost(message, optional, tag = "3")]
        pub put: Option<Operation>,
        #[prost(message, optional, tag = "4")]
        pub post: Option<Operation>,
        #[prost(message, optional, tag = "5")]
        pub delete: Option<Operation>,
        #[prost(message, optional, tag = "8")]
        pub patch: Option<Operation>,
        #[prost(message, repeated, tag = "9")]
        pub parameters: Vec<ParametersItem>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Operation {
        #[prost(string, repeated, tag = "1")]
        pub tags: Vec<String>,
        #[prost(string, tag = "3")]
        pub description: String,
        #[prost(string, tag = "5")]
        pub operation_id: String,
        #[prost(string, repeated, tag = "6")]
        pub produces: Vec<String>,
        #[prost(string, repeated, tag = "7")]
        pub consumes: Vec<String>,
        #[prost(message, repeated, tag = "8")]
        pub parameters: Vec<ParametersItem>,
        #[prost(message, optional, tag = "9")]
        pub responses: Option<Responses>,
        #[prost(string, repeated, tag = "10")]
        pub schemes: Vec<String>,
        #[prost(message, repeated, tag = "13")]
        pub vendor_extension: Vec<NamedAny>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ParametersItem {
        #[prost(message, optional, tag = "1")]
        pub parameter: Option<Parameter>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Parameter {
        #[prost(oneof = "ParameterKind", tags = "1, 2")]
        pub kind: Option<ParameterKind>,
    }

    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum ParameterKind {
        #[prost(message, tag = "1")]
        Body(Box<BodyParameter>),
        #[prost(message, tag = "2")]
        NonBody(NonBodyParameter),
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct BodyParameter {
        #[prost(string, tag = "1")]
        pub description: String,
        #[prost(string, tag = "2")]
        pub name: String,
        #[prost(string, tag = "3")]
        pub r#in: String,
        #[prost(bool, tag = "4")]
        pub required: bool,
        #[prost(message, optional, tag = "5")]
        pub schema: Option<Schema>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct NonBodyParameter {
        #[prost(oneof = "NonBodyKind", tags = "3, 4")]
        pub kind: Option<NonBodyKind>,
    }

    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum NonBodyKind {
        #[prost(message, tag = "3")]
        Query(QueryParameter),
        #[prost(message, tag = "4")]
        Path(PathParameter),
    }

    /// gnostic's `QueryParameterSubSchema`, as far as the document uses it.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct QueryParameter {
        #[prost(bool, tag = "1")]
        pub required: bool,
        #[prost(string, tag = "2")]
        pub r#in: String,
        #[prost(string, tag = "3")]
        pub description: String,
        #[prost(string, tag = "4")]
        pub name: String,
        #[prost(string, tag = "6")]
        pub r#type: String,
        #[prost(bool, tag = "20")]
        pub unique_items: bool,
    }

    /// gnostic's `PathParameterSubSchema`, as far as the document uses it.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct PathParameter {
        #[prost(bool, tag = "1")]
        pub required: bool,
        #[prost(string, tag = "2")]
        pub r#in: String,
        #[prost(string, tag = "3")]
        pub description: String,
        #[prost(string, tag = "4")]
        pub name: String,
        #[prost(string, tag = "5")]
        pub r#type: String,
        #[prost(bool, tag = "19")]
        pub unique_items: bool,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Responses {
        #[prost(message, repeated, tag = "1")]
        pub response_code: Vec<NamedResponseValue>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct NamedResponseValue {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(message, optional, tag = "2")]
        pub value: Option<ResponseValue>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ResponseValue {
        #[prost(message, optional, tag = "1")]
        pub response: Option<ResponseMessage>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ResponseMessage {
        #[prost(string, tag = "1")]
        pub description: String,
        #[prost(message, optional, tag = "2")]
        pub schema: Option<SchemaItem>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct SchemaItem {
        #[prost(message, optional, tag = "1")]
        pub schema: Option<Schema>,
    }

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
            required: strings(&value["required"]),
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
            vendor_extension: extensions(value),
        }
    }

    fn strings(value: &Value) -> Vec<String> {
        value
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(str::to_string))
            .collect()
    }

    fn extensions(value: &Value) -> Vec<NamedAny> {
        value
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(key, _)| key.starts_with("x-"))
            .map(|(key, extension)| NamedAny {
                name: key.clone(),
                value: Some(any(extension)),
            })
            .collect()
    }

    fn parameter(value: &Value) -> ParametersItem {
        let text = |key: &str| value[key].as_str().unwrap_or_default().to_string();
        let flag = |key: &str| value[key].as_bool().unwrap_or_default();
        let kind = match value["in"].as_str() {
            Some("body") => ParameterKind::Body(Box::new(BodyParameter {
                description: text("description"),
                name: text("name"),
                r#in: text("in"),
                required: flag("required"),
                schema: value.get("schema").map(schema),
            })),
            Some("path") => ParameterKind::NonBody(NonBodyParameter {
                kind: Some(NonBodyKind::Path(PathParameter {
                    required: flag("required"),
                    r#in: text("in"),
                    description: text("description"),
                    name: text("name"),
                    r#type: text("type"),
                    unique_items: flag("uniqueItems"),
                })),
            }),
            _ => ParameterKind::NonBody(NonBodyParameter {
                kind: Some(NonBodyKind::Query(QueryParameter {
                    required: flag("required"),
                    r#in: text("in"),
                    description: text("description"),
                    name: text("name"),
                    r#type: text("type"),
                    unique_items: flag("uniqueItems"),
                })),
            }),
        };
        ParametersItem {
            parameter: Some(Parameter { kind: Some(kind) }),
        }
    }

    fn parameters(value: &Value) -> Vec<ParametersItem> {
        value
            .as_array()
            .into_iter()
            .flatten()
            .map(parameter)
            .collect()
    }

    fn operation(value: &Value) -> Operation {
        let responses = value["responses"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(code, response)| NamedResponseValue {
                name: code.clone(),
                value: Some(ResponseValue {
                    response: Some(ResponseMessage {
                        description: response["description"]
                            .as_str()
                            .unwrap_or_default()
                            .to_string(),
                        schema: response.get("schema").map(|s| SchemaItem {
                            schema: Some(schema(s)),
                        }),
                    }),
                }),
            })
            .collect();
        Operation {
            tags: strings(&value["tags"]),
            description: value["description"].as_str().unwrap_or_default().into(),
            operation_id: value["operationId"].as_str().unwrap_or_default().into(),
            produces: strings(&value["produces"]),
            consumes: strings(&value["consumes"]),
            parameters: parameters(&value["parameters"]),
            responses: Some(Responses {
                response_code: responses,
            }),
            schemes: strings(&value["schemes"]),
            vendor_extension: extensions(value),
        }
    }

    fn path_item(value: &Value) -> PathItem {
        let op = |method: &str| value.get(method).map(operation);
        PathItem {
            get: op("get"),
            put: op("put"),
            post: op("post"),
            delete: op("delete"),
            patch: op("patch"),
            parameters: parameters(&value["parameters"]),
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
            paths: Some(Paths {
                path: document["paths"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(name, item)| NamedPathItem {
                        name: name.clone(),
                        value: Some(path_item(item)),
                    })
                    .collect(),
            }),
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
    fn custom_schemas_lose_what_v2_cannot_say() {
        let v3 = json!({
            "type": "object",
            "required": ["spec", "maybe"],
            "properties": {
                "metadata": {"allOf": [{"$ref": "#/components/schemas/M"}], "description": "m"},
                "spec": {
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": true,
                    "properties": {"a": {"type": "string"}},
                },
                "maybe": {"type": "object", "nullable": true, "properties": {"b": {"type": "string"}}},
                "list": {"type": "array", "x-kubernetes-preserve-unknown-fields": true, "items": {"type": "string"}},
                "either": {"type": "string", "oneOf": [{"pattern": "a"}, {"pattern": "b"}]},
            },
        });
        let v2 = to_v2(&structural_v2(v3));
        assert_eq!(v2["required"], json!(["spec"]));
        assert_eq!(v2["properties"]["metadata"]["$ref"], "#/definitions/M");
        assert_eq!(
            v2["properties"]["spec"],
            json!({"x-kubernetes-preserve-unknown-fields": true})
        );
        assert_eq!(v2["properties"]["maybe"], json!({}));
        assert_eq!(
            v2["properties"]["list"],
            json!({"x-kubernetes-preserve-unknown-fields": true})
        );
        assert_eq!(v2["properties"]["either"], json!({"type": "string"}));
    }

    #[test]
    fn paths_carry_operations_with_their_parameters_and_bodies() {
        let document = document(&ServedResources::builtin());
        let path = &document["paths"]["/api/v1/namespaces/{namespace}/configmaps"];
        let list = &path["get"];
        assert_eq!(
            list["description"],
            "list or watch objects of kind ConfigMap"
        );
        assert_eq!(list["operationId"], "listCoreV1NamespacedConfigMap");
        assert_eq!(
            list["responses"]["200"]["schema"]["$ref"],
            "#/definitions/io.k8s.api.core.v1.ConfigMapList"
        );
        assert!(
            list["produces"]
                .as_array()
                .unwrap()
                .contains(&json!("application/json;stream=watch"))
        );
        let watch = list["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "watch")
            .unwrap();
        assert_eq!(watch["in"], "query");
        assert!(
            watch["description"]
                .as_str()
                .unwrap()
                .starts_with("Watch for changes to the described resources")
        );
        let create = &path["post"];
        assert_eq!(create["parameters"][0]["in"], "body");
        assert_eq!(
            create["parameters"][0]["schema"]["$ref"],
            "#/definitions/io.k8s.api.core.v1.ConfigMap"
        );
        assert_eq!(
            create["x-kubernetes-group-version-kind"]["kind"],
            "ConfigMap"
        );
        assert_eq!(path["parameters"][0]["name"], "namespace");
        assert_eq!(path["parameters"][0]["type"], "string");
        let patch = &document["paths"]["/api/v1/namespaces/{namespace}/configmaps/{name}"]["patch"];
        assert!(
            patch["consumes"]
                .as_array()
                .unwrap()
                .contains(&json!("application/merge-patch+json"))
        );
        // The protobuf form carries them too.
        let encoded = proto::document(&document);
        let paths = &encoded.paths.as_ref().unwrap().path;
        let configmaps = paths
            .iter()
            .find(|p| p.name == "/api/v1/namespaces/{namespace}/configmaps")
            .unwrap();
        let get = configmaps.value.as_ref().unwrap().get.as_ref().unwrap();
        assert_eq!(get.operation_id, "listCoreV1NamespacedConfigMap");
        assert!(!get.parameters.is_empty());
    }

    #[test]
    fn the_document_holds_every_built_in_definition() {
        let document = document(&ServedResources::builtin());
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
