use serde_json::json;

use super::*;

fn field(name: &str) -> PathElement {
    PathElement::Field(name.into())
}

#[test]
fn elements_round_trip_through_their_keys() {
    let elements = [
        field("metadata"),
        PathElement::key([
            ("port".to_string(), json!(80)),
            ("name".to_string(), json!("http")),
        ]),
        PathElement::Value(json!("x")),
        PathElement::Value(json!(3)),
        PathElement::Index(2),
    ];
    let keys: Vec<String> = elements.iter().map(PathElement::to_key).collect();
    assert_eq!(
        keys,
        [
            "f:metadata",
            r#"k:{"name":"http","port":80}"#,
            r#"v:"x""#,
            "v:3",
            "i:2"
        ]
    );
    for (element, key) in elements.iter().zip(&keys) {
        assert_eq!(&PathElement::from_key(key).unwrap(), element);
    }
    assert!(PathElement::from_key("x:1").is_err());
    assert!(PathElement::from_key("k:[1]").is_err());
    assert!(PathElement::from_key("i:one").is_err());
}

#[test]
fn elements_order_fields_keys_values_indexes() {
    let mut elements = [
        PathElement::Index(0),
        PathElement::Value(json!("a")),
        PathElement::key([("name".to_string(), json!("b"))]),
        field("z"),
        PathElement::key([("name".to_string(), json!("a"))]),
        field("a"),
        PathElement::Value(json!(1)),
    ];
    elements.sort();
    let keys: Vec<String> = elements.iter().map(PathElement::to_key).collect();
    assert_eq!(
        keys,
        [
            "f:a",
            "f:z",
            r#"k:{"name":"a"}"#,
            r#"k:{"name":"b"}"#,
            "v:1",
            r#"v:"a""#,
            "i:0"
        ]
    );
}

/// What `kubectl create deployment` records for itself, in part.
fn deployment_fields() -> Value {
    json!({
        "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
        "f:spec": {
            "f:replicas": {},
            "f:template": {"f:spec": {"f:containers": {
                r#"k:{"name":"nginx"}"#: {".": {}, "f:image": {}, "f:name": {}},
            }}},
        },
    })
}

#[test]
fn fields_v1_parses_members_and_children_and_writes_them_back() {
    let set = Set::from_fields_v1(&deployment_fields()).unwrap();
    let labels = [field("metadata"), field("labels")];
    assert!(set.has(&labels));
    assert!(set.has(&[field("metadata"), field("labels"), field("app")]));
    assert!(!set.has(&[field("metadata")]));
    let container = PathElement::key([("name".to_string(), json!("nginx"))]);
    let containers = [
        field("spec"),
        field("template"),
        field("spec"),
        field("containers"),
    ];
    let mut item = containers.to_vec();
    item.push(container);
    assert!(set.has(&item));
    assert!(!set.has(&containers));
    assert_eq!(set.to_fields_v1(), deployment_fields());
    // labels, app, replicas, the container, its image and name.
    assert_eq!(set.paths().len(), 6);
    assert!(Set::from_fields_v1(&json!({"f:a": 1})).is_err());
    assert!(Set::from_fields_v1(&json!([])).is_err());
}

#[test]
fn union_difference_and_intersection_work_on_paths() {
    let mut mine = Set::new();
    mine.insert(&[field("data"), field("a")]);
    mine.insert(&[field("data"), field("b")]);
    let mut theirs = Set::new();
    theirs.insert(&[field("data"), field("b")]);
    theirs.insert(&[field("data"), field("c")]);
    theirs.insert(&[field("metadata"), field("labels"), field("x")]);

    let both = mine.intersection(&theirs);
    assert_eq!(both.to_fields_v1(), json!({"f:data": {"f:b": {}}}));
    let only_mine = mine.difference(&theirs);
    assert_eq!(only_mine.to_fields_v1(), json!({"f:data": {"f:a": {}}}));
    let all = mine.union(&theirs);
    assert_eq!(
        all.to_fields_v1(),
        json!({"f:data": {"f:a": {}, "f:b": {}, "f:c": {}}, "f:metadata": {"f:labels": {"f:x": {}}}})
    );
    assert!(mine.difference(&all).is_empty());
    assert!(!all.is_empty());
    assert!(Set::new().is_empty());
}
