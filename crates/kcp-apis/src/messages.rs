//! Kubernetes' own definitions of the built-in kinds' messages (`protobuf_types.json`, written
//! from the `generated.proto` files by `scripts/gen-proto-types`): each message's fields with
//! their tags, JSON names, labels and types, in Go struct order. Protobuf bodies are read by
//! them, and JSON is written in their order ([`to_json`]), as Kubernetes writes its typed
//! objects: `kind` and `apiVersion` first, then the struct's fields in order, map keys sorted.
//! Custom resources (unstructured in Kubernetes) keep sorted keys.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::OnceLock;

use serde_json::Value;
use serde_json::value::RawValue;

/// One field: tag, JSON name (JSONSchemaProps' `$ref`, `$schema` and `x-kubernetes-*` as JSON
/// spells them, not as `.proto` does), label (`optional`, `repeated`, `map`), type (a scalar or
/// a message's full name).
pub type Field = (u32, String, String, String);

/// The package of JSONSchemaProps and its unions.
pub const EXTENSIONS: &str = "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1";
/// The package of ObjectMeta, Time and Status.
pub const META: &str = "k8s.io.apimachinery.pkg.apis.meta.v1";
/// An embedded object of any kind.
const RAW_EXTENSION: &str = "k8s.io.apimachinery.pkg.runtime.RawExtension";

fn all() -> &'static HashMap<String, Vec<Field>> {
    static MESSAGES: OnceLock<HashMap<String, Vec<Field>>> = OnceLock::new();
    MESSAGES.get_or_init(|| {
        let mut messages: HashMap<String, Vec<Field>> =
            serde_json::from_str(include_str!("protobuf_types.json")).unwrap_or_default();
        for (name, fields) in &mut messages {
            for field in fields {
                let json = json_name(name, &field.1).into_owned();
                field.1 = json;
            }
        }
        messages
    })
}

/// The fields of the message `name`.
pub fn fields(name: &str) -> Option<&'static [Field]> {
    all().get(name).map(Vec::as_slice)
}

/// The message of a schema component name (`io.k8s.api.core.v1.ConfigMap` is
/// `k8s.io.api.core.v1.ConfigMap`), if Kubernetes defines one.
pub fn of_component(component: &str) -> Option<String> {
    let rest = component.strip_prefix("io.k8s.")?;
    let name = format!("k8s.io.{}", rest.replace('-', "_"));
    all().contains_key(&name).then_some(name)
}

/// The message of the built-in kind `kind` of `api_version` (a group kcp serves built-in
/// kinds of, or one of Kubernetes' workload groups; custom resources of other groups have
/// none).
pub fn of_kind(api_version: &str, kind: &str) -> Option<String> {
    if let Some(message) = of_meta_kind(Some(api_version), kind) {
        return Some(message);
    }
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let built_in = group.is_empty()
        || crate::builtin::RESOURCES.iter().any(|r| r.group == group)
        || matches!(
            group,
            "authentication.k8s.io"
                | "authorization.k8s.io"
                | "meta.k8s.io"
                | "apidiscovery.k8s.io"
                | "autoscaling"
                // Kubernetes' workload groups, served as CRDs once negotiated from physical
                // clusters: bodies of their kinds still come as Kubernetes' messages.
                | "apps"
                | "batch"
                | "policy"
                | "networking.k8s.io"
                | "discovery.k8s.io"
        );
    if !built_in {
        return None;
    }
    of_component(&crate::schema::builtin_component(group, version, kind))
}

/// The kinds of `meta.k8s.io` Kubernetes writes under its legacy group's version too (`v1`), or
/// with no `apiVersion` at all (`/api`'s APIVersions, `/api/v1`'s APIResourceList); of those,
/// the request options are also read under any group's version, as kube-apiserver reads
/// DeleteOptions bodies.
fn of_meta_kind(api_version: Option<&str>, kind: &str) -> Option<String> {
    let meta = matches!(
        api_version,
        None | Some("v1" | "meta.k8s.io/v1" | "meta.k8s.io/v1beta1")
    );
    let known = match kind {
        "Status"
        | "APIVersions"
        | "APIGroupList"
        | "APIGroup"
        | "APIResourceList"
        | "Table"
        | "PartialObjectMetadata"
        | "PartialObjectMetadataList"
        | "WatchEvent" => meta,
        "DeleteOptions" | "CreateOptions" | "UpdateOptions" | "PatchOptions" | "GetOptions"
        | "ListOptions" => true,
        _ => false,
    };
    known.then(|| format!("{META}.{kind}"))
}

/// The JSON name of a field: JSONSchemaProps' `$ref`, `$schema` and `x-kubernetes-*` are
/// spelled otherwise in `.proto`.
fn json_name<'a>(message: &str, proto: &'a str) -> Cow<'a, str> {
    if !message.ends_with(".JSONSchemaProps") || !message.starts_with(EXTENSIONS) {
        return Cow::Borrowed(proto);
    }
    match proto {
        "ref" => Cow::Borrowed("$ref"),
        "schema" => Cow::Borrowed("$schema"),
        other => match other.strip_prefix("xKubernetes") {
            Some(rest) => {
                let mut out = String::from("x-kubernetes");
                for c in rest.chars() {
                    if c.is_ascii_uppercase() {
                        out.push('-');
                        out.push(c.to_ascii_lowercase());
                    } else {
                        out.push(c);
                    }
                }
                Cow::Owned(out)
            }
            None => Cow::Borrowed(other),
        },
    }
}

/// Whether the JSON of message `name` is not an object of its fields (times, quantities, raw
/// JSON, unions), so its value is written as it is.
pub fn is_special(name: &str) -> bool {
    let Some((package, message)) = name.rsplit_once('.') else {
        return false;
    };
    matches!(
        (package, message),
        (META, "Time" | "MicroTime" | "Duration" | "FieldsV1")
            | ("k8s.io.apimachinery.pkg.api.resource", "Quantity")
            | ("k8s.io.apimachinery.pkg.util.intstr", "IntOrString")
            | ("k8s.io.apimachinery.pkg.runtime", "RawExtension")
            | (
                EXTENSIONS,
                "JSON"
                    | "JSONSchemaPropsOrArray"
                    | "JSONSchemaPropsOrBool"
                    | "JSONSchemaPropsOrStringArray"
            )
    ) || message == "ExtraValue"
}

/// `value` as JSON, keys in Kubernetes' order when it is an object or list of a built-in kind
/// (by its `apiVersion` and `kind`), else sorted as serde_json writes them.
pub fn to_json(value: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    write_typed(value, &mut out);
    out
}

/// `value` (an object without its `kind` and `apiVersion`, as a typed list's items are) in
/// the order of the message of `kind` in `api_version`.
pub fn to_json_as(value: &Value, api_version: &str, kind: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    write(value, of_kind(api_version, kind).as_deref(), &mut out);
    out
}

/// `value` in the order of the message its `apiVersion` and `kind` name, if any.
fn write_typed(value: &Value, out: &mut Vec<u8>) {
    let message = match value {
        Value::Object(fields) => match (
            fields.get("apiVersion").and_then(Value::as_str),
            fields.get("kind").and_then(Value::as_str),
        ) {
            (Some(api_version), Some(kind)) => of_kind(api_version, kind),
            (None, Some(kind)) => of_meta_kind(None, kind),
            _ => None,
        },
        _ => None,
    };
    write(value, message.as_deref(), out);
}

fn write(value: &Value, message: Option<&str>, out: &mut Vec<u8>) {
    let (Value::Object(object), Some(message)) = (value, message) else {
        write_plain(value, out);
        return;
    };
    // An embedded object (a Table row's, a watch event's) is written by its own kind.
    if message == RAW_EXTENSION {
        write_typed(value, out);
        return;
    }
    let Some(fields) = fields(message).filter(|_| !is_special(message)) else {
        write_plain(value, out);
        return;
    };
    out.push(b'{');
    let mut key = MemberKeys::default();
    let declares = |name: &str| fields.iter().any(|f| f.1 == name);
    // TypeMeta first where it is not a field of the message itself.
    for type_field in ["kind", "apiVersion"] {
        if let Some(v) = object.get(type_field)
            && !declares(type_field)
        {
            key.write(type_field, out);
            write_plain(v, out);
        }
    }
    for (_, name, label, kind) in fields {
        let Some(v) = object.get(name) else {
            continue;
        };
        key.write(name, out);
        let child = kind.contains('.').then_some(kind.as_str());
        match (label.as_str(), v) {
            ("repeated", Value::Array(items)) => {
                out.push(b'[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    write(item, child, out);
                }
                out.push(b']');
            }
            ("map", Value::Object(entries)) => {
                out.push(b'{');
                for (i, (k, item)) in entries.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    write_plain(&Value::String(k.clone()), out);
                    out.push(b':');
                    write(item, child, out);
                }
                out.push(b'}');
            }
            _ => write(v, child, out),
        }
    }
    // Anything the message does not declare (a newer field), sorted, after.
    for (name, v) in object {
        if !declares(name) && name != "kind" && name != "apiVersion" {
            key.write(name, out);
            write_plain(v, out);
        }
    }
    out.push(b'}');
}

/// Writes the keys of an object's members, with the commas between members.
#[derive(Default)]
struct MemberKeys {
    written: bool,
}

impl MemberKeys {
    fn write(&mut self, name: &str, out: &mut Vec<u8>) {
        if self.written {
            out.push(b',');
        }
        self.written = true;
        write_plain(&Value::String(name.to_string()), out);
        out.push(b':');
    }
}

/// The JSON text `raw` of an object of `message` (the name of a message, such as
/// [`OBJECT_META`]) written again in Kubernetes' order, as [`to_json`] writes a value of that
/// message, without decoding what needs no reordering (scalars, maps, raw fields). `None` if
/// `raw` is not JSON, or has an escape in a key of an object it reorders.
pub fn reordered(raw: &str, message: &str) -> Option<Vec<u8>> {
    let raw: &RawValue = serde_json::from_str(raw).ok()?;
    let mut out = Vec::with_capacity(raw.get().len());
    write_raw(raw, Some(message), &mut out)?;
    Some(out)
}

/// ObjectMeta's message.
pub const OBJECT_META: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta";

fn write_raw(raw: &RawValue, message: Option<&str>, out: &mut Vec<u8>) -> Option<()> {
    let text = raw.get();
    let fields = message
        .filter(|m| !is_special(m) && text.starts_with('{'))
        .and_then(fields);
    let Some(fields) = fields else {
        out.extend_from_slice(text.as_bytes());
        return Some(());
    };
    let object: Vec<(&str, &RawValue)> = borrowed_members(text)?;
    out.push(b'{');
    let mut key = MemberKeys::default();
    let get = |name: &str| object.iter().find(|(k, _)| *k == name).map(|(_, v)| *v);
    for (_, name, label, kind) in fields {
        let Some(value) = get(name) else {
            continue;
        };
        key.write(name, out);
        let child = kind.contains('.').then_some(kind.as_str());
        match label.as_str() {
            "repeated" if value.get().starts_with('[') => {
                let items: Vec<&RawValue> = serde_json::from_str(value.get()).ok()?;
                out.push(b'[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    write_raw(item, child, out)?;
                }
                out.push(b']');
            }
            "map" => out.extend_from_slice(value.get().as_bytes()),
            _ => write_raw(value, child, out)?,
        }
    }
    for (name, value) in &object {
        if !fields.iter().any(|f| f.1 == *name) {
            key.write(name, out);
            out.extend_from_slice(value.get().as_bytes());
        }
    }
    out.push(b'}');
    Some(())
}

/// The members of the JSON object `text`, keys borrowed (so none may hold an escape).
fn borrowed_members(text: &str) -> Option<Vec<(&str, &RawValue)>> {
    struct Members<'a>(Vec<(&'a str, &'a RawValue)>);
    impl<'de> serde::Deserialize<'de> for Members<'de> {
        fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            struct Visit;
            impl<'de> serde::de::Visitor<'de> for Visit {
                type Value = Members<'de>;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("an object")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(
                    self,
                    mut map: A,
                ) -> Result<Self::Value, A::Error> {
                    let mut members = Vec::new();
                    while let Some(entry) = map.next_entry::<&'de str, &'de RawValue>()? {
                        members.push(entry);
                    }
                    Ok(Members(members))
                }
            }
            deserializer.deserialize_map(Visit)
        }
    }
    serde_json::from_str::<Members<'_>>(text).ok().map(|m| m.0)
}

fn write_plain(value: &Value, out: &mut Vec<u8>) {
    // Writing JSON into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, value);
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn text(value: &Value) -> String {
        String::from_utf8(to_json(value)).unwrap()
    }

    #[test]
    fn built_in_kinds_come_out_in_kubernetes_order() {
        let configmap = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "data": {"b": "2", "a": "1"},
            "metadata": {"uid": "u", "name": "c", "resourceVersion": "5",
                         "annotations": {"z": "1", "a": "2"}, "namespace": "default",
                         "creationTimestamp": "2024-01-01T00:00:00Z"}
        });
        assert_eq!(
            text(&configmap),
            r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"c","namespace":"default","uid":"u","resourceVersion":"5","creationTimestamp":"2024-01-01T00:00:00Z","annotations":{"a":"2","z":"1"}},"data":{"a":"1","b":"2"}}"#
        );
        let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "r"},
            "rules": [{"resources": ["pods"], "apiGroups": [""], "verbs": ["get"]}]});
        assert_eq!(
            text(&role),
            r#"{"kind":"Role","apiVersion":"rbac.authorization.k8s.io/v1","metadata":{"name":"r"},"rules":[{"verbs":["get"],"apiGroups":[""],"resources":["pods"]}]}"#
        );
        // Lists: items typed by the list's message; fields of references in their own order.
        let list = json!({"apiVersion": "v1", "kind": "ConfigMapList",
            "metadata": {"resourceVersion": "9"},
            "items": [{"metadata": {"ownerReferences": [{"uid": "u", "name": "o",
                "kind": "K", "apiVersion": "v1"}], "name": "c"}}]});
        assert_eq!(
            text(&list),
            r#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"9"},"items":[{"metadata":{"name":"c","ownerReferences":[{"apiVersion":"v1","kind":"K","name":"o","uid":"u"}]}}]}"#
        );
    }

    #[test]
    fn server_built_documents_come_out_in_go_order() {
        let status = json!({"apiVersion": "v1", "kind": "Status", "code": 404, "reason": "NotFound",
            "message": "m", "status": "Failure", "metadata": {}, "details": {"name": "x", "kind": "k"}});
        assert_eq!(
            text(&status),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"m","reason":"NotFound","details":{"name":"x","kind":"k"},"code":404}"#
        );
        // Discovery: with no apiVersion too (`/api/v1`).
        let resources = json!({"kind": "APIResourceList", "groupVersion": "v1", "resources": [
            {"verbs": ["get"], "storageVersionHash": "h", "shortNames": ["cm"], "kind": "ConfigMap",
             "namespaced": true, "singularName": "configmap", "name": "configmaps"}]});
        assert_eq!(
            text(&resources),
            r#"{"kind":"APIResourceList","groupVersion":"v1","resources":[{"name":"configmaps","singularName":"configmap","namespaced":true,"kind":"ConfigMap","verbs":["get"],"shortNames":["cm"],"storageVersionHash":"h"}]}"#
        );
        // A Table, its rows' objects by their own kinds.
        let table = json!({"apiVersion": "meta.k8s.io/v1", "kind": "Table", "rows": [{"object": {
            "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
            "metadata": {"uid": "u", "name": "n"}}, "cells": ["n"]}],
            "columnDefinitions": [{"type": "string", "name": "Name", "priority": 0,
                "format": "name", "description": "d"}], "metadata": {}});
        assert_eq!(
            text(&table),
            r#"{"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":{},"columnDefinitions":[{"name":"Name","type":"string","format":"name","description":"d","priority":0}],"rows":[{"cells":["n"],"object":{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"n","uid":"u"}}}]}"#
        );
    }

    #[test]
    fn raw_objects_are_reordered_without_decoding_their_values() {
        let stored = r#"{"annotations":{"b":"1","a":"2"},"creationTimestamp":"t","managedFields":[{"time":"t","manager":"m","fieldsV1":{"f:z":{},"f:a":{}}}],"name":"n","uid":"u","zzz":1}"#;
        let written = reordered(stored, OBJECT_META).unwrap();
        assert_eq!(
            String::from_utf8(written).unwrap(),
            r#"{"name":"n","uid":"u","creationTimestamp":"t","annotations":{"b":"1","a":"2"},"managedFields":[{"manager":"m","time":"t","fieldsV1":{"f:z":{},"f:a":{}}}],"zzz":1}"#
        );
        assert_eq!(reordered("not json", OBJECT_META), None);
        assert_eq!(reordered(r#"{"n\u0061me":"x"}"#, OBJECT_META), None);
    }

    #[test]
    fn custom_resources_and_unknown_fields_stay_sorted() {
        let custom = json!({"apiVersion": "example.com/v1", "kind": "Widget",
                            "spec": {"b": 1, "a": 2}, "metadata": {"name": "w"}});
        assert_eq!(
            text(&custom),
            r#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"a":2,"b":1}}"#
        );
        let newer = json!({"apiVersion": "v1", "kind": "ConfigMap", "zeta": 1, "alpha": 2,
                           "metadata": {"name": "c"}});
        assert_eq!(
            text(&newer),
            r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"c"},"alpha":2,"zeta":1}"#
        );
        // A CRD's schema names ($ref, x-kubernetes-*) are JSON's in JSONSchemaProps.
        let props = fields(&format!("{EXTENSIONS}.JSONSchemaProps")).unwrap();
        for name in [
            "$ref",
            "$schema",
            "x-kubernetes-list-map-keys",
            "properties",
        ] {
            assert!(props.iter().any(|f| f.1 == name), "{name}");
        }
    }
}
