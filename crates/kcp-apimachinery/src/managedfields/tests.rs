use serde_json::{Value, json};

use super::*;

const NOW: &str = "2026-01-01T00:00:00Z";
const LATER: &str = "2026-01-01T00:01:00Z";

fn manager<'a>(schema: Schema<'a>, now: &str) -> FieldManager<'a> {
    FieldManager {
        schema,
        api_version: "v1".into(),
        subresource: "",
        ignored: &[],
        now: now.into(),
    }
}

fn fields_of(object: &Value, name: &str) -> Value {
    object["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["manager"] == name)
        .map(|e| e["fieldsV1"].clone())
        .unwrap_or(Value::Null)
}

/// ConfigMap's schema, as far as these tests need it.
fn configmap_schema() -> &'static Value {
    static SCHEMA: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    SCHEMA.get_or_init(|| {
        json!({"type": "object", "properties": {
            "apiVersion": {"type": "string"}, "kind": {"type": "string"},
            "metadata": {"type": "object", "properties": {
                "name": {"type": "string"},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "annotations": {"type": "object", "additionalProperties": {"type": "string"}}}},
            "data": {"type": "object", "additionalProperties": {"type": "string"}}}})
    })
}

fn cm() -> Schema<'static> {
    Schema::new(configmap_schema(), &NoReferences)
}

fn configmap(data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "n"}, "data": data})
}

/// A custom resource schema with a list-map by `name` and an atomic map.
fn widget_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": {
                "type": "object",
                "properties": {
                    "replicas": {"type": "integer"},
                    "color": {"type": "string"},
                    "ports": {
                        "type": "array",
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["name"],
                        "items": {"type": "object", "required": ["name"], "properties": {
                            "name": {"type": "string"}, "port": {"type": "integer"}}}
                    },
                    "tags": {"type": "array", "x-kubernetes-list-type": "set",
                             "items": {"type": "string"}},
                    "selector": {"type": "object", "x-kubernetes-map-type": "atomic",
                                 "additionalProperties": {"type": "string"}}
                }
            }
        }
    })
}

#[test]
fn creates_record_added_maps_with_a_dot_and_strip_metadata() {
    let fm = manager(cm(), NOW);
    let mut object = configmap(json!({"a": "1"}));
    object["metadata"]["labels"] = json!({"app": "x"});
    fm.update(None, &mut object, "kubectl-create");
    let entry = &object["metadata"]["managedFields"][0];
    assert_eq!(entry["manager"], "kubectl-create");
    assert_eq!(entry["operation"], "Update");
    assert_eq!(entry["apiVersion"], "v1");
    assert_eq!(entry["time"], NOW);
    assert_eq!(entry["fieldsType"], "FieldsV1");
    assert_eq!(
        entry["fieldsV1"],
        json!({"f:data": {".": {}, "f:a": {}},
               "f:metadata": {"f:labels": {".": {}, "f:app": {}}}})
    );
}

#[test]
fn updates_take_changed_fields_from_other_owners() {
    let fm = manager(cm(), NOW);
    let mut live = configmap(json!({"a": "1", "b": "2"}));
    fm.update(None, &mut live, "one");
    let mut new = configmap(json!({"a": "changed", "b": "2"}));
    manager(cm(), LATER).update(Some(&live), &mut new, "two");
    assert_eq!(
        fields_of(&new, "one"),
        json!({"f:data": {".": {}, "f:b": {}}})
    );
    assert_eq!(fields_of(&new, "two"), json!({"f:data": {"f:a": {}}}));
    // Sorted by time: "one" first.
    assert_eq!(new["metadata"]["managedFields"][1]["time"], LATER);
}

#[test]
fn updates_of_untracked_objects_stay_untracked_and_reset_clears() {
    let fm = manager(cm(), NOW);
    let live = configmap(json!({"a": "1"}));
    let mut new = configmap(json!({"a": "2"}));
    fm.update(Some(&live), &mut new, "m");
    assert!(new["metadata"].get("managedFields").is_none());

    let mut live = configmap(json!({"a": "1"}));
    fm.update(None, &mut live, "m");
    let mut cleared = configmap(json!({"a": "1"}));
    cleared["metadata"]["managedFields"] = json!([{}]);
    fm.update(Some(&live), &mut cleared, "m");
    assert!(cleared["metadata"].get("managedFields").is_none());

    // Undecodable managedFields in the request: the live ones are kept.
    let mut garbage = configmap(json!({"a": "1"}));
    garbage["metadata"]["managedFields"] = json!([{"manager": "x", "fieldsV1": {"x": 1}}]);
    fm.update(Some(&live), &mut garbage, "m");
    assert_eq!(
        garbage["metadata"]["managedFields"],
        live["metadata"]["managedFields"]
    );
}

#[test]
fn apply_conflicts_name_the_owner_and_force_takes_over() {
    let fm = manager(cm(), NOW);
    let mut live = configmap(json!({"a": "1"}));
    fm.update(None, &mut live, "kubectl-create");
    let config = configmap(json!({"a": "2"}));
    let Err(ApplyError::Conflicts { message, causes }) =
        fm.apply(Some(&live), &config, "applier", false)
    else {
        panic!("expected a conflict");
    };
    assert_eq!(
        message,
        format!(
            "Apply failed with 1 conflict: conflict with \"kubectl-create\" using v1 at {NOW}: .data.a"
        )
    );
    assert_eq!(causes[0].field, ".data.a");
    assert_eq!(
        causes[0].message,
        format!("conflict with \"kubectl-create\" using v1 at {NOW}")
    );
    let forced = fm.apply(Some(&live), &config, "applier", true).unwrap();
    assert_eq!(forced["data"]["a"], "2");
    assert_eq!(
        fields_of(&forced, "applier"),
        json!({"f:data": {"f:a": {}}})
    );
    // The old owner keeps only the map itself.
    assert_eq!(fields_of(&forced, "kubectl-create"), json!({"f:data": {}}));
    // Equal values are shared, not conflicts.
    let same = configmap(json!({"a": "1"}));
    let shared = fm.apply(Some(&live), &same, "applier", false).unwrap();
    assert_eq!(
        fields_of(&shared, "applier"),
        json!({"f:data": {"f:a": {}}})
    );
    assert_eq!(
        fields_of(&shared, "kubectl-create"),
        fields_of(&live, "kubectl-create")
    );
}

#[test]
fn two_appliers_share_an_object_and_dropped_fields_go() {
    let fm = manager(cm(), NOW);
    let first = fm
        .apply(None, &configmap(json!({"a": "1", "b": "1"})), "one", false)
        .unwrap();
    let second = fm
        .apply(Some(&first), &configmap(json!({"c": "1"})), "two", false)
        .unwrap();
    assert_eq!(second["data"], json!({"a": "1", "b": "1", "c": "1"}));
    // "one" stops sending b: it goes; c (owned by "two") stays.
    let third = fm
        .apply(Some(&second), &configmap(json!({"a": "1"})), "one", false)
        .unwrap();
    assert_eq!(third["data"], json!({"a": "1", "c": "1"}));
    // A field both own stays until both drop it.
    let shared = fm
        .apply(
            Some(&third),
            &configmap(json!({"a": "1", "c": "1"})),
            "one",
            false,
        )
        .unwrap();
    let dropped = fm
        .apply(Some(&shared), &configmap(json!({"a": "1"})), "one", false)
        .unwrap();
    assert_eq!(dropped["data"], json!({"a": "1", "c": "1"}));
}

#[test]
fn list_maps_merge_by_key_sets_by_value_and_atomic_maps_whole() {
    let schema_value = widget_schema();
    let schema = Schema::new(&schema_value, &NoReferences);
    let fm = manager(schema, NOW);
    let widget = |spec: Value| json!({"apiVersion": "v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": spec});
    let first = fm
        .apply(
            None,
            &widget(
                json!({"ports": [{"name": "http", "port": 80}], "tags": ["a"],
                           "selector": {"x": "1"}}),
            ),
            "one",
            false,
        )
        .unwrap();
    assert_eq!(
        fields_of(&first, "one"),
        json!({"f:spec": {
            "f:ports": {"k:{\"name\":\"http\"}": {".": {}, "f:name": {}, "f:port": {}}},
            "f:selector": {},
            "f:tags": {"v:\"a\"": {}}
        }})
    );
    let second = fm
        .apply(
            Some(&first),
            &widget(json!({"ports": [{"name": "https", "port": 443}], "tags": ["b"]})),
            "two",
            false,
        )
        .unwrap();
    assert_eq!(
        second["spec"]["ports"],
        json!([{"name": "http", "port": 80}, {"name": "https", "port": 443}])
    );
    assert_eq!(second["spec"]["tags"], json!(["a", "b"]));
    // An atomic map is one field: another value conflicts.
    let err = fm
        .apply(
            Some(&second),
            &widget(json!({"selector": {"y": "2"}})),
            "two",
            false,
        )
        .unwrap_err();
    let ApplyError::Conflicts { causes, .. } = err else {
        panic!("expected a conflict")
    };
    assert_eq!(causes[0].field, ".spec.selector");
    // A port item changed by another applier conflicts by its key.
    let err = fm
        .apply(
            Some(&second),
            &widget(json!({"ports": [{"name": "http", "port": 8080}]})),
            "two",
            false,
        )
        .unwrap_err();
    let ApplyError::Conflicts { message, .. } = err else {
        panic!("expected a conflict")
    };
    assert!(
        message.ends_with(".spec.ports[name=\"http\"].port"),
        "{message}"
    );
    // Duplicate keys in a configuration are refused.
    let err = fm
        .apply(
            Some(&second),
            &widget(json!({"ports": [{"name": "x"}, {"name": "x"}]})),
            "two",
            false,
        )
        .unwrap_err();
    assert!(
        matches!(err, ApplyError::BadRequest(m) if m.contains("duplicate entries for key [name=\"x\"]"))
    );
}

#[test]
fn applying_managed_fields_is_refused() {
    let fm = manager(cm(), NOW);
    let mut config = configmap(json!({}));
    config["metadata"]["managedFields"] = json!([]);
    assert_eq!(
        fm.apply(None, &config, "m", false),
        Err(ApplyError::BadRequest(
            "metadata.managedFields must be nil".into()
        ))
    );
}

#[test]
fn first_apply_to_an_untracked_object_meets_before_first_apply() {
    let fm = manager(cm(), NOW);
    let live = configmap(json!({"a": "1"}));
    let err = fm
        .apply(Some(&live), &configmap(json!({"a": "2"})), "m", false)
        .unwrap_err();
    let ApplyError::Conflicts { message, .. } = err else {
        panic!("expected a conflict")
    };
    assert!(message.contains("conflict with \"before-first-apply\" using v1"));
}

#[test]
fn kubectl_moves_from_client_side_apply_without_conflicts() {
    let fm = manager(cm(), NOW);
    let last = configmap(json!({"a": "1"}));
    let mut live = configmap(json!({"a": "1"}));
    live["metadata"]["annotations"] = json!({LAST_APPLIED_ANNOTATION: last.to_string()});
    fm.update(None, &mut live, "kubectl-client-side-apply");
    let config = configmap(json!({"a": "2"}));
    let applied = fm
        .apply(Some(&live), &config, KUBECTL_MANAGER, false)
        .unwrap();
    assert_eq!(applied["data"]["a"], "2");
    assert_eq!(
        fields_of(&applied, "kubectl"),
        json!({"f:data": {"f:a": {}}})
    );
    // The annotation follows the applied configuration.
    let annotation: Value = serde_json::from_str(
        applied["metadata"]["annotations"][LAST_APPLIED_ANNOTATION]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(annotation["data"]["a"], "2");
    // Another manager gets no such pass.
    assert!(fm.apply(Some(&live), &config, "other", false).is_err());
}

#[test]
fn ignored_fields_are_neither_owned_nor_conflicting() {
    let mut fm = manager(cm(), NOW);
    fm.ignored = &["status"];
    let mut live = json!({"apiVersion": "v1", "kind": "X", "metadata": {"name": "x"},
                          "spec": {"a": 1}, "status": {"s": 1}});
    fm.update(None, &mut live, "creator");
    assert_eq!(
        fields_of(&live, "creator"),
        json!({"f:spec": {".": {}, "f:a": {}}})
    );
    let config = json!({"apiVersion": "v1", "kind": "X", "metadata": {"name": "x"},
                        "status": {"s": 2}});
    let applied = fm.apply(Some(&live), &config, "m", false).unwrap();
    assert_eq!(fields_of(&applied, "m"), Value::Null);
}

#[test]
fn a_field_dropped_as_a_whole_keeps_what_is_still_owned_inside() {
    let fm = manager(cm(), NOW);
    let live = fm
        .apply(None, &configmap(json!({"a": "1", "b": "1"})), "m", false)
        .unwrap();
    // The applier's entry claims the map itself too (as kubectl's managedFields upgrade
    // writes it), then applies only `a`.
    let mut owners = entries::of(&live);
    owners[0]
        .fields
        .insert(&[PathElement::Field("data".into())]);
    let mut rewritten = live.clone();
    entries::set(&mut rewritten, &owners);
    let applied = fm
        .apply(Some(&rewritten), &configmap(json!({"a": "1"})), "m", false)
        .unwrap();
    assert_eq!(applied["data"], json!({"a": "1"}));
}

#[test]
fn many_owners_cost_no_more_than_their_number() {
    // 50,000 updaters and 50,000 appliers: decoding, tracking and capping stay near-linear
    // (a quadratic step would take minutes here).
    let mut items = Vec::new();
    for i in 0..50_000 {
        items.push(json!({"manager": format!("u{i}"), "operation": "Update",
            "apiVersion": "v1", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:data": {format!("f:k{i}"): {}}}}));
        items.push(json!({"manager": format!("a{i}"), "operation": "Apply",
            "apiVersion": "v1", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:data": {format!("f:k{i}"): {}}}}));
    }
    let started = std::time::Instant::now();
    let fm = manager(cm(), NOW);
    let live = configmap(json!({"k0": "x"}));
    let mut new = configmap(json!({"k0": "y"}));
    new["metadata"]["managedFields"] = Value::Array(items);
    fm.update(Some(&live), &mut new, "writer");
    let owners = entries::of(&new);
    let updaters = owners
        .iter()
        .filter(|e| e.operation == entries::Operation::Update)
        .count();
    assert!(updaters <= entries::MAX_UPDATE_MANAGERS, "{updaters}");
    assert!(owners.iter().any(|e| e.manager == "ancient-changes"));
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
}
