//! Fuzz targets over what a client can send to kcp, each a function of `&[u8]` that panics when
//! a property fails: request bodies (JSON, YAML, protobuf, as the API server decodes them),
//! patches (JSON, merge, strategic; the input is `document NUL patch`), label and field
//! selectors, stored bytes read back, and scripts of writes through the whole API server on an
//! in-memory store ([`registry_writes`]). [`TARGETS`] lists them for the stable runner
//! ([`runner`], run by `cargo test -p kcp-fuzz`) and the cargo-fuzz targets in `fuzz/` call
//! the same functions.
//!
//! Properties checked everywhere: no panic, errors are errors; whatever would be stored is
//! within [`MAX_DEPTH`] and reads back equal through the storage decoder; a parsed selector's
//! string form parses to the same selector.
//!
//! Must not know: persistent storage backends (scripts run on the in-memory store), HTTP
//! serving (requests go to the API server's router in process, not over a socket).

pub mod registry_writes;
pub mod runner;

use std::collections::BTreeMap;

use kcp_apimachinery::json::{
    KeyOrder, MAX_DEPTH, MAX_READ_DEPTH, decode_stored, depth, exceeds_depth, served_from_stored_in,
};
use kcp_apimachinery::patch::{self, PatchError};
use kcp_apimachinery::{fields, labels, object};
use kcp_apis::builtin;
use kcp_apiserver::body;
use kcp_registry::kinds;
use serde_json::{Value, json};

/// One fuzz target: its name (also its corpus folder), its function, and tokens the runner's
/// mutations insert.
pub struct Target {
    pub name: &'static str,
    pub run: fn(&[u8]),
    pub dictionary: &'static [&'static str],
}

const JSON_TOKENS: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    "\"",
    ":",
    ",",
    "null",
    "true",
    "-0.0",
    "1e309",
    "\\u0000",
    "\\ud800",
    "\"metadata\":",
    "\"name\":",
    "\"a\":",
    "{\"a\":",
    "[[[[",
];
const YAML_TOKENS: &[&str] = &[
    ": ",
    "- ",
    "\n  ",
    "&a ",
    "*a",
    "<<: ",
    "{",
    "[",
    "!!binary ",
    "---\n",
    "? ",
    "|\n  ",
    "on",
    "~",
    "'",
    "\"",
];
const PATCH_TOKENS: &[&str] = &[
    "{\"op\":\"add\",\"path\":\"/a\",\"value\":{}}",
    "{\"op\":\"copy\",\"from\":\"/a\",\"path\":\"/a/a\"}",
    "{\"op\":\"move\",\"from\":\"/a\",\"path\":\"/b/a\"}",
    "{\"op\":\"test\",\"path\":\"\",\"value\":{}}",
    "{\"op\":\"remove\",\"path\":\"/a/0\"}",
    "/-",
    "/0",
    "~1",
    "~0",
    "\"$patch\":\"delete\"",
    "\"$patch\":\"replace\"",
    "\"$retainKeys\":[",
    "\"$setElementOrder/finalizers\":[",
    "\"$deleteFromPrimitiveList/finalizers\":[",
    "\"finalizers\":[",
    "\"ownerReferences\":[{\"uid\":\"1\"}]",
    "null",
    "\u{0}",
    "[",
    "{",
];
const SELECTOR_TOKENS: &[&str] = &[
    "=",
    "==",
    "!=",
    " in ",
    " notin ",
    "(",
    ")",
    ",",
    "!",
    "a",
    "b.c/d",
    "x",
    "\\",
    "\\,",
    "metadata.name",
    "spec.x",
    "",
    " ",
];

/// Every target, for the runner and the cargo-fuzz binaries.
pub const TARGETS: &[Target] = &[
    Target {
        name: "json_body",
        run: json_body,
        dictionary: JSON_TOKENS,
    },
    Target {
        name: "yaml_body",
        run: yaml_body,
        dictionary: YAML_TOKENS,
    },
    Target {
        name: "protobuf_body",
        run: protobuf_body,
        dictionary: &[
            "k8s\u{0}",
            "\n",
            "\u{12}",
            "\u{1a}",
            "\u{2}v1",
            "\u{9}ConfigMap",
        ],
    },
    Target {
        name: "json_patch",
        run: json_patch,
        dictionary: PATCH_TOKENS,
    },
    Target {
        name: "merge_patch",
        run: merge_patch,
        dictionary: PATCH_TOKENS,
    },
    Target {
        name: "strategic_patch",
        run: strategic_patch,
        dictionary: PATCH_TOKENS,
    },
    Target {
        name: "label_selector",
        run: label_selector,
        dictionary: SELECTOR_TOKENS,
    },
    Target {
        name: "field_selector",
        run: field_selector,
        dictionary: SELECTOR_TOKENS,
    },
    Target {
        name: "stored_object",
        run: stored_object,
        dictionary: JSON_TOKENS,
    },
    Target {
        name: "registry_writes",
        run: registry_writes,
        dictionary: registry_writes::TOKENS,
    },
];

/// The target called `name`.
pub fn target(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|target| target.name == name)
}

/// What may be stored obeys the limit and reads back as it was written.
fn assert_storable(value: &Value) {
    assert!(
        !exceeds_depth(value, MAX_DEPTH),
        "a value deeper than {MAX_DEPTH} levels was accepted"
    );
    let bytes = serde_json::to_vec(value).expect("accepted values encode");
    let read = decode_stored(&bytes).expect("encoded values read back");
    assert_eq!(&read, value, "a value changed through storage");
}

fn object_body(content_type: &str, data: &[u8]) {
    if let Ok(decoded) = body::decode_object(Some(content_type), data, None) {
        assert_storable(&decoded.value);
        // Duplicates are reported once each, within sigs.k8s.io/json's cap.
        let mut seen = decoded.duplicates.clone();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), decoded.duplicates.len());
        assert!(decoded.duplicates.len() <= kcp_apimachinery::json::MAX_DUPLICATES);
    }
}

/// A JSON request body, as create and update decode it.
pub fn json_body(data: &[u8]) {
    object_body("application/json", data);
}

/// A YAML request body.
pub fn yaml_body(data: &[u8]) {
    object_body("application/yaml", data);
}

/// A protobuf request body (`k8s\0` + `runtime.Unknown`).
pub fn protobuf_body(data: &[u8]) {
    object_body("application/vnd.kubernetes.protobuf", data);
}

/// `document NUL patch`: the stored object (read as storage reads it) and the patch document
/// (decoded as the API server decodes it). Without a NUL the document is `{}`.
fn split(data: &[u8]) -> Option<(Value, Value)> {
    let (document, patch) = match data.iter().position(|&b| b == 0) {
        Some(at) => (decode_stored(&data[..at]).ok()?, &data[at + 1..]),
        None => (json!({}), data),
    };
    let patch = body::decode_patch(patch).ok()?.value;
    Some((document, patch))
}

fn check_patched(result: Result<Value, PatchError>) {
    match result {
        Ok(patched) => assert_storable(&patched),
        Err(PatchError::Malformed(message))
        | Err(PatchError::NotApplicable(message))
        | Err(PatchError::TooLarge(message)) => assert!(!message.is_empty()),
    }
}

/// A JSON patch (RFC 6902) applied to a stored object.
pub fn json_patch(data: &[u8]) {
    if let Some((document, patch)) = split(data) {
        let result = patch::json_patch(&document, &patch);
        if let Some(operations) = patch.as_array()
            && operations.len() > patch::MAX_JSON_PATCH_OPERATIONS
            && operations.iter().all(Value::is_object)
        {
            assert!(matches!(result, Err(PatchError::TooLarge(_))));
        }
        check_patched(result);
    }
}

/// A JSON merge patch (RFC 7386) applied to a stored object.
pub fn merge_patch(data: &[u8]) {
    if let Some((document, patch)) = split(data) {
        check_patched(patch::merge_patch(&document, &patch));
    }
}

/// A strategic merge patch with the list rules of the document's kind, as the API server
/// applies it.
pub fn strategic_patch(data: &[u8]) {
    if let Some((document, patch)) = split(data) {
        let kind = document
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("ServiceAccount");
        let rules = builtin::RESOURCES
            .iter()
            .find(|r| r.kind == kind)
            .map_or(&kinds::Plain as &dyn kinds::Kind, kinds::rules);
        let strategies = |path: &[&str]| rules.list_strategy(path);
        check_patched(patch::strategic::apply(&document, &patch, &strategies));
    }
}

fn label_sets() -> Vec<BTreeMap<String, String>> {
    let set = |pairs: &[(&str, &str)]| {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    vec![
        set(&[]),
        set(&[("a", "b")]),
        set(&[("a", ""), ("x", "1"), ("b.c/d", "e")]),
    ]
}

/// A label selector's string form, and the same bytes as a `LabelSelector` object.
pub fn label_selector(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(selector) = labels::Selector::parse(text) {
        for set in label_sets() {
            let _ = selector.matches(&set);
        }
        let _ = selector.matches(&json!({"a": "b", "n": 1}));
        let printed = selector.to_string();
        let reparsed = labels::Selector::parse(&printed)
            .unwrap_or_else(|e| panic!("{printed:?} (printed from {text:?}) does not parse: {e}"));
        assert_eq!(reparsed, selector, "{text:?} printed as {printed:?}");
    }
    if let Ok(decoded) = body::decode_object(Some("application/json"), data, None)
        && let Ok(selector) = labels::Selector::from_label_selector(&decoded.value)
    {
        for set in label_sets() {
            let _ = selector.matches(&set);
        }
        let _ = selector.to_string();
    }
}

/// A field selector: parsed, matched against a few objects, printed and parsed again.
pub fn field_selector(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(selector) = fields::Selector::parse(text) else {
        return;
    };
    let objects = [
        json!({}),
        json!({"metadata": {"name": "a", "namespace": "b"}, "spec": {"x": "1"}}),
    ];
    for object in &objects {
        let _ = selector.matches(|field| object::at_dotted(object, field).and_then(Value::as_str));
    }
    let printed = selector.to_string();
    let reparsed = fields::Selector::parse(&printed)
        .unwrap_or_else(|e| panic!("{printed:?} (printed from {text:?}) does not parse: {e}"));
    assert_eq!(reparsed, selector, "{text:?} printed as {printed:?}");
}

/// Bytes read back from storage: any depth reads (deep parts folded), nothing else panics;
/// a GET answered from bytes that decode says what decoding them would, in either key order
/// the store keeps; bytes with sorted keys that are exactly what encoding their value writes
/// (a custom resource as stored) are served exactly as encoding the answer would write it.
pub fn stored_object(data: &[u8]) {
    if let Ok(value) = decode_stored(data) {
        assert!(depth(&value) <= MAX_READ_DEPTH);
        let again = decode_stored(&serde_json::to_vec(&value).expect("read values encode"))
            .expect("read values read again");
        assert_eq!(again, value);
    }
    // (Bytes that do not decode are no object to serve either way: decoding answers 500.)
    for order in [KeyOrder::Kubernetes, KeyOrder::Sorted] {
        let (Some(served), Ok(mut expected)) = (
            served_from_stored_in(order, data, 7, ("kcp.io/cluster", "root")),
            decode_stored(data),
        ) else {
            continue;
        };
        let canonical = serde_json::to_vec(&expected).is_ok_and(|written| written == data);
        expected["metadata"]["resourceVersion"] = json!("7");
        expected["metadata"]["annotations"]["kcp.io/cluster"] = json!("root");
        if order == KeyOrder::Sorted && canonical {
            let written = serde_json::to_vec(&expected).expect("values encode");
            assert_eq!(
                String::from_utf8_lossy(&served),
                String::from_utf8_lossy(&written),
                "sorted bytes served otherwise than encoded"
            );
        }
        let served = decode_stored(&served).expect("served bytes are JSON");
        assert_eq!(served, expected, "{order:?}");
    }
}

/// A script of writes through the API server on an in-memory store (see [`registry_writes`]).
pub fn registry_writes(data: &[u8]) {
    registry_writes::run(data);
}
