//! Table tests of label selector parsing, printing, matching and `LabelSelector` conversion,
//! restated from the Kubernetes semantics, plus property tests of the printed round trip.

use std::collections::{BTreeMap, HashMap};

use proptest::prelude::*;
use serde_json::json;

use super::*;

const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
const INTEGER_MSG: &str = "for 'Gt', 'Lt' operators, the value must be an integer";

fn set(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn parse_err(input: &str) -> String {
    match Selector::parse(input) {
        Ok(s) => panic!("{input:?} parsed as {s:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn parses_and_prints_canonically() {
    let cases = [
        ("", ""),
        ("   ", ""),
        ("x=a,y=b,z=c", "x=a,y=b,z=c"),
        ("z=c,y=b,x=a", "x=a,y=b,z=c"),
        ("x!=a,y=b", "x!=a,y=b"),
        ("x==a", "x==a"),
        ("x=", "x="),
        ("x= ", "x="),
        ("x=,z= ", "x=,z="),
        ("x= ,z= ", "x=,z="),
        ("x", "x"),
        ("!x", "!x"),
        (" ! x ", "!x"),
        ("y,x", "x,y"),
        ("x>1", "x>1"),
        ("x>1,z<5", "x>1,z<5"),
        ("x<007", "x<007"),
        ("x in (b,a,a)", "x in (a,b)"),
        ("  x  in  ( b , a )  ", "x in (a,b)"),
        ("x in(a)", "x in (a)"),
        ("x notin (a)", "x notin (a)"),
        ("x in ()", "x in ()"),
        ("x in (,)", "x in ()"),
        ("x in (,a)", "x in (,a)"),
        ("x in (a,)", "x in (,a)"),
        ("x in (a,,b)", "x in (,a,b)"),
        (
            "x in (foo,,baz),y,z notin ()",
            "x in (,baz,foo),y,z notin ()",
        ),
        (
            "in in (in),notin notin (notin)",
            "in in (in),notin notin (notin)",
        ),
        ("notin=in", "notin=in"),
        ("a!=x,a=y", "a=y,a!=x"),
        ("a=y,a!=x", "a=y,a!=x"),
        (
            "example.com/app=web,app.kubernetes.io/name in (kcp)",
            "app.kubernetes.io/name in (kcp),example.com/app=web",
        ),
        ("x=a\n,y\t=\tb\r", "x=a,y=b"),
        ("x=a\0garbage", "x=a"),
    ];
    for (input, want) in cases {
        let selector = Selector::parse(input).unwrap_or_else(|e| panic!("{input:?}: {e}"));
        assert_eq!(selector.to_string(), want, "{input:?}");
        assert_eq!(
            Selector::parse(want),
            Ok(selector.clone()),
            "{input:?} round trip"
        );
        assert_eq!(input.parse::<Selector>(), Ok(selector));
    }
}

#[test]
fn parsed_requirements_carry_operator_and_values() {
    let selector = Selector::parse("a in (y,x),b notin (z),c=1,d==2,e!=3,f>4,g<5,h,!i").unwrap();
    let got: Vec<(&str, Operator, Vec<&str>)> = selector
        .requirements()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r.key(),
                r.operator(),
                r.values().iter().map(String::as_str).collect(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("a", Operator::In, vec!["x", "y"]),
            ("b", Operator::NotIn, vec!["z"]),
            ("c", Operator::Equals, vec!["1"]),
            ("d", Operator::DoubleEquals, vec!["2"]),
            ("e", Operator::NotEquals, vec!["3"]),
            ("f", Operator::GreaterThan, vec!["4"]),
            ("g", Operator::LessThan, vec!["5"]),
            ("h", Operator::Exists, vec![]),
            ("i", Operator::DoesNotExist, vec![]),
        ]
    );
}

#[test]
fn parse_errors_match_kubernetes() {
    let ops = "in, notin, =, ==, !=, gt, lt";
    let cases: Vec<(&str, String)> = vec![
        ("x==a==b", "found '==', expected: ',' or 'end of string'".into()),
        ("!x=a", "found '=', expected: ',' or 'end of string'".into()),
        ("x=a b", "found 'b', expected: ',' or 'end of string'".into()),
        ("a,", "found '', expected: identifier after ','".into()),
        ("a,,b", "found ',', expected: identifier after ','".into()),
        (",a", "found ',', expected: !, identifier, or 'end of string'".into()),
        ("!=a", "found '!=', expected: !, identifier, or 'end of string'".into()),
        ("(", "found '(', expected: !, identifier, or 'end of string'".into()),
        ("!", "unable to parse requirement: found '', expected: identifier".into()),
        ("!!x", "unable to parse requirement: found '!', expected: identifier".into()),
        ("a b", format!("unable to parse requirement: found 'b', expected: {ops}")),
        ("x!y", format!("unable to parse requirement: found '!', expected: {ops}")),
        ("x (a)", format!("unable to parse requirement: found '(', expected: {ops}")),
        ("a in b", "unable to parse requirement: found 'b' expected: '('".into()),
        ("a in", "unable to parse requirement: found '' expected: '('".into()),
        ("a in (b c)", "unable to parse requirement: found 'c', expected: ',' or ')'".into()),
        ("a in (b", "unable to parse requirement: found '', expected: ',' or ')'".into()),
        ("a in (=)", "unable to parse requirement: found '=', expected: ',', ')' or identifier".into()),
        ("a in (", "unable to parse requirement: found '', expected: ',', ')' or identifier".into()),
        ("a in (b,=)", "unable to parse requirement: found '=', expected: ',', or identifier".into()),
        ("a in (,", "unable to parse requirement: found '', expected: ',', or identifier".into()),
        ("x=(", "unable to parse requirement: found '(', expected: identifier".into()),
        ("x=a||y=b", format!("unable to parse requirement: values[0][x]: Invalid value: \"a||y\": {LABEL_VALUE_MSG}")),
        ("x<a", format!("unable to parse requirement: values[0]: Invalid value: \"a\": {INTEGER_MSG}")),
        ("x>", format!("unable to parse requirement: values[0]: Invalid value: \"\": {INTEGER_MSG}")),
        ("x>99999999999999999999", format!("unable to parse requirement: values[0]: Invalid value: \"99999999999999999999\": {INTEGER_MSG}")),
        ("x>-1", format!("unable to parse requirement: values[0][x]: Invalid value: \"-1\": {LABEL_VALUE_MSG}")),
        ("x>a_", format!("unable to parse requirement: [values[0]: Invalid value: \"a_\": {INTEGER_MSG}, values[0][x]: Invalid value: \"a_\": {LABEL_VALUE_MSG}]")),
        // Values are validated after sorting, so "-b" is values[0].
        ("x in (a,-b)", format!("unable to parse requirement: values[0][x]: Invalid value: \"-b\": {LABEL_VALUE_MSG}")),
        ("x in (-a,-b)", format!("unable to parse requirement: [values[0][x]: Invalid value: \"-a\": {LABEL_VALUE_MSG}, values[1][x]: Invalid value: \"-b\": {LABEL_VALUE_MSG}]")),
        ("a/b/c", "unable to parse requirement: <nil>: Invalid value: \"a/b/c\": a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')".into()),
        ("/a", "unable to parse requirement: <nil>: Invalid value: \"/a\": prefix part must be non-empty".into()),
        ("-x=a", "unable to parse requirement: <nil>: Invalid value: \"-x\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')".into()),
    ];
    for (input, want) in cases {
        assert_eq!(parse_err(input), want, "{input:?}");
    }
    assert!(matches!(
        Selector::parse("a,"),
        Err(SelectorError::Syntax(_))
    ));
    assert!(matches!(
        Selector::parse("a b"),
        Err(SelectorError::Requirement(RequirementError::Syntax(_)))
    ));
    assert!(matches!(
        Selector::parse("a=-"),
        Err(SelectorError::Requirement(RequirementError::Invalid(_)))
    ));
}

#[test]
fn validation_edges() {
    let n63 = "n".repeat(63);
    let n64 = "n".repeat(64);
    let p253 = format!("{}.{}", "p".repeat(126), "q".repeat(126));
    let p254 = format!("{p253}q");
    assert!(Selector::parse(&format!("{n63}={n63}")).is_ok());
    assert!(Selector::parse(&format!("{p253}/{n63}")).is_ok());
    assert_eq!(
        parse_err(&format!("{n64}=a")),
        format!(
            "unable to parse requirement: <nil>: Invalid value: \"{n64}\": name part must be no more than 63 bytes"
        )
    );
    assert_eq!(
        parse_err(&format!("a={n64}")),
        format!(
            "unable to parse requirement: values[0][a]: Invalid value: \"{n64}\": must be no more than 63 bytes"
        )
    );
    assert_eq!(
        parse_err(&format!("{p254}/a")),
        format!(
            "unable to parse requirement: <nil>: Invalid value: \"{p254}/a\": prefix part must be no more than 253 bytes"
        )
    );
    for bad_key in ["Example.com/a", "ex_ample.com/a", "a..b/c", "a/", "a.b./c"] {
        assert!(Selector::parse(bad_key).is_err(), "{bad_key}");
    }
    for good in ["A_b.C-d", "a.b-c/D_e", "0/0", "x=A_b.9", "x in (Z)"] {
        assert!(Selector::parse(good).is_ok(), "{good}");
    }
}

#[test]
fn matches_every_operator() {
    type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], bool);
    let cases: &[Case] = &[
        ("", &[], true),
        ("", &[("x", "y")], true),
        ("x=y", &[("x", "y")], true),
        ("x=y", &[("x", "z")], false),
        ("x=y", &[], false),
        ("x==y", &[("x", "y")], true),
        ("x=", &[("x", "")], true),
        ("x=", &[], false),
        ("x!=y", &[("x", "z")], true),
        ("x!=y", &[], true),
        ("x!=y", &[("x", "y")], false),
        ("x in (a,b)", &[("x", "b")], true),
        ("x in (a,b)", &[("x", "c")], false),
        ("x in (a,b)", &[], false),
        ("x in ()", &[("x", "")], true),
        ("x notin (a,b)", &[("x", "c")], true),
        ("x notin (a,b)", &[], true),
        ("x notin (a,b)", &[("x", "a")], false),
        ("x", &[("x", "")], true),
        ("x", &[("y", "z")], false),
        ("!x", &[("y", "z")], true),
        ("!x", &[("x", "")], false),
        ("x>1", &[("x", "2")], true),
        ("x>1", &[("x", "1")], false),
        ("x>1", &[("x", "0")], false),
        ("x>1", &[("x", "a")], false),
        ("x>1", &[], false),
        ("x>1", &[("x", "+5")], true),
        ("x<1", &[("x", "0")], true),
        ("x<1", &[("x", "-3")], true),
        ("x<1", &[("x", "1")], false),
        ("x<1", &[("x", "99999999999999999999")], false),
        ("x=y,z=w", &[("x", "y"), ("z", "w")], true),
        ("x=y,z=w", &[("x", "w"), ("z", "w")], false),
        ("x!=y,z!=w", &[("x", "z"), ("z", "a")], true),
        ("x!=y,z!=w", &[("x", "z"), ("z", "w")], false),
        ("notin=in", &[("notin", "in")], true),
        (
            "foo=bar,foobar=bar,baz=blah",
            &[("foo", "bar"), ("baz", "blah")],
            false,
        ),
    ];
    for (selector, labels, want) in cases {
        let parsed = Selector::parse(selector).unwrap();
        let btree = set(labels);
        let hash: HashMap<String, String> = btree.clone().into_iter().collect();
        let json = json!(btree);
        assert_eq!(parsed.matches(&btree), *want, "{selector} vs {labels:?}");
        assert_eq!(
            parsed.matches(&hash),
            *want,
            "{selector} vs {labels:?} (HashMap)"
        );
        assert_eq!(
            parsed.matches(&json),
            *want,
            "{selector} vs {labels:?} (Value)"
        );
        assert_eq!(
            parsed.matches(json.as_object().unwrap()),
            *want,
            "{selector} vs {labels:?} (Map)"
        );
    }
}

#[test]
fn matches_json_label_maps() {
    let selector = Selector::parse("app=web,!gone").unwrap();
    let object = json!({"metadata": {"labels": {"app": "web", "gone": 1}}});
    // A non-string label value counts as absent.
    assert!(selector.matches(&object["metadata"]["labels"]));
    // Missing labels are an empty set.
    let bare = json!({"metadata": {}});
    assert!(
        Selector::parse("!app")
            .unwrap()
            .matches(&bare["metadata"]["labels"])
    );
    assert!(!selector.matches(&bare["metadata"]["labels"]));
    assert!(Selector::everything().matches(&bare["metadata"]["labels"]));
}

#[test]
fn everything_and_nothing() {
    let everything = Selector::everything();
    assert!(everything.is_empty());
    assert!(!everything.matches_nothing());
    assert!(everything.matches(&set(&[("x", "y")])));
    assert_eq!(everything, Selector::parse("").unwrap());
    assert_eq!(everything, Selector::default());
    assert_eq!(everything.requirements(), Some(&[][..]));

    let mut nothing = Selector::nothing();
    assert!(!nothing.is_empty());
    assert!(nothing.matches_nothing());
    assert!(!nothing.matches(&set(&[])));
    assert_eq!(nothing.to_string(), "");
    assert_eq!(nothing.requirements(), None);
    nothing.add(Requirement::new("x", Operator::Exists, Vec::<String>::new()).unwrap());
    assert!(nothing.matches_nothing());
}

#[test]
fn requirement_constructor() {
    let cases: Vec<(&str, Operator, Vec<&str>, Option<String>)> = vec![
        ("x", Operator::In, vec!["a"], None),
        ("x", Operator::In, vec![], Some("values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty".into())),
        ("x", Operator::NotIn, vec![], Some("values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty".into())),
        ("x", Operator::Equals, vec!["a", "b"], Some(r#"values: Invalid value: ["a","b"]: exact-match compatibility requires one single value"#.into())),
        ("x", Operator::DoubleEquals, vec![], Some("values: Invalid value: null: exact-match compatibility requires one single value".into())),
        ("x", Operator::NotEquals, vec![""], None),
        ("x", Operator::Exists, vec![], None),
        ("x", Operator::DoesNotExist, vec!["a"], Some(r#"values: Invalid value: ["a"]: values set must be empty for exists and does not exist"#.into())),
        ("x", Operator::GreaterThan, vec!["1"], None),
        ("x", Operator::LessThan, vec!["1", "2"], Some(r#"values: Invalid value: ["1","2"]: for 'Gt', 'Lt' operators, exactly one value is required"#.into())),
        ("x", Operator::GreaterThan, vec!["a"], Some(format!("values[0]: Invalid value: \"a\": {INTEGER_MSG}"))),
        ("x", Operator::Equals, vec!["a b"], Some(format!("values[0][x]: Invalid value: \"a b\": {LABEL_VALUE_MSG}"))),
        ("", Operator::Exists, vec![], Some("key: Invalid value: \"\": name part must be non-empty; name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')".into())),
        ("x/", Operator::Equals, vec!["-"], Some(format!("[key: Invalid value: \"x/\": name part must be non-empty; name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]'), values[0][x/]: Invalid value: \"-\": {LABEL_VALUE_MSG}]"))),
    ];
    for (key, operator, values, want) in cases {
        let got = Requirement::new(key, operator, values.clone()).map_err(|e| e.to_string());
        match want {
            None => assert!(got.is_ok(), "{key} {operator:?} {values:?}: {got:?}"),
            Some(want) => assert_eq!(got, Err(want), "{key} {operator:?} {values:?}"),
        }
    }
    let r = Requirement::new("x", Operator::In, ["b", "a", "b"]).unwrap();
    assert_eq!(r.values(), ["a", "b"]);
    assert_eq!(r.to_string(), "x in (a,b)");
}

#[test]
fn building_selectors() {
    let selector = Selector::from_set([("b", "2"), ("a", "1")]).unwrap();
    assert_eq!(selector.to_string(), "a=1,b=2");
    assert_eq!(
        Selector::from_set(Vec::<(String, String)>::new()),
        Ok(Selector::everything())
    );
    assert!(Selector::from_set([("a", "-")]).is_err());

    let mut selector = Selector::parse("b=1,d=2").unwrap();
    selector.add(Requirement::new("c", Operator::Exists, Vec::<String>::new()).unwrap());
    selector.add(Requirement::new("a", Operator::NotIn, ["x"]).unwrap());
    assert_eq!(selector.to_string(), "a notin (x),b=1,c,d=2");
    assert_eq!(selector, Selector::parse("d=2,c,b=1,a notin (x)").unwrap());
}

#[test]
fn exact_match_introspection() {
    let selector = Selector::parse("a=1,b==2,c in (3),d in (4,5),e!=6,f").unwrap();
    assert_eq!(selector.requires_exact_match("a"), Some("1"));
    assert_eq!(selector.requires_exact_match("b"), Some("2"));
    assert_eq!(selector.requires_exact_match("c"), Some("3"));
    assert_eq!(selector.requires_exact_match("d"), None);
    assert_eq!(selector.requires_exact_match("e"), None);
    assert_eq!(selector.requires_exact_match("f"), None);
    assert_eq!(selector.requires_exact_match("g"), None);
    assert_eq!(Selector::nothing().requires_exact_match("a"), None);
}

#[test]
fn converts_label_selectors() {
    let cases = [
        (json!({}), "", true),
        (json!({"matchLabels": {}, "matchExpressions": []}), "", true),
        (
            json!({"matchLabels": null, "matchExpressions": null}),
            "",
            true,
        ),
        (json!({"matchLabels": {"app": "web"}}), "app=web", false),
        (
            json!({"matchLabels": {"b": "2", "a": "1"}}),
            "a=1,b=2",
            false,
        ),
        (
            json!({"matchExpressions": [{"key": "t", "operator": "In", "values": ["b", "a"]}]}),
            "t in (a,b)",
            false,
        ),
        (
            json!({"matchExpressions": [{"key": "t", "operator": "NotIn", "values": ["a"]}]}),
            "t notin (a)",
            false,
        ),
        (
            json!({"matchExpressions": [{"key": "t", "operator": "Exists"}]}),
            "t",
            false,
        ),
        (
            json!({"matchExpressions": [{"key": "t", "operator": "DoesNotExist", "values": []}]}),
            "!t",
            false,
        ),
        (
            json!({"matchLabels": {"z": "1"}, "matchExpressions": [{"key": "a", "operator": "Exists"}], "unknown": true}),
            "a,z=1",
            false,
        ),
    ];
    for (input, want, empty) in cases {
        let selector =
            Selector::from_label_selector(&input).unwrap_or_else(|e| panic!("{input}: {e}"));
        assert_eq!(selector.to_string(), want, "{input}");
        assert_eq!(selector.is_empty(), empty, "{input}");
        assert_eq!(Selector::parse(want), Ok(selector));
    }
    let nothing = Selector::from_label_selector(&json!(null)).unwrap();
    assert!(nothing.matches_nothing());

    let selector = Selector::from_label_selector(&json!({
        "matchLabels": {"app": "web"},
        "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["fe", "be"]},
            {"key": "legacy", "operator": "DoesNotExist"}
        ]
    }))
    .unwrap();
    assert!(selector.matches(&set(&[("app", "web"), ("tier", "fe")])));
    assert!(!selector.matches(&set(&[("app", "web"), ("tier", "db")])));
    assert!(!selector.matches(&set(&[("app", "web"), ("tier", "fe"), ("legacy", "")])));
}

#[test]
fn label_selector_errors() {
    let name_regex = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
    let cases: Vec<(serde_json::Value, String)> = vec![
        (json!({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}), r#""Gt" is not a valid label selector operator"#.into()),
        (json!({"matchExpressions": [{"key": "a", "operator": "in", "values": ["1"]}]}), r#""in" is not a valid label selector operator"#.into()),
        (json!({"matchExpressions": [{"key": "a"}]}), r#""" is not a valid label selector operator"#.into()),
        (json!({"matchExpressions": [{"key": "a", "operator": "In"}]}), "values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty".into()),
        (json!({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": []}]}), "values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty".into()),
        (json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x", "y"]}]}), r#"values: Invalid value: ["x","y"]: values set must be empty for exists and does not exist"#.into()),
        (json!({"matchExpressions": [{"key": "a", "operator": "In", "values": ["ok", "-bad"]}]}), format!("values[1][a]: Invalid value: \"-bad\": {LABEL_VALUE_MSG}")),
        (json!({"matchExpressions": [{"operator": "Exists"}]}), format!("key: Invalid value: \"\": name part must be non-empty; {name_regex}")),
        (json!({"matchLabels": {"-a": "b"}}), format!("key: Invalid value: \"-a\": {name_regex}")),
        (json!({"matchLabels": {"a": "b c"}}), format!("values[0][a]: Invalid value: \"b c\": {LABEL_VALUE_MSG}")),
        (json!({"matchLabels": {"-a": "b c"}}), format!("[key: Invalid value: \"-a\": {name_regex}, values[0][-a]: Invalid value: \"b c\": {LABEL_VALUE_MSG}]")),
        (json!("app=web"), "labelSelector: must be an object".into()),
        (json!({"matchLabels": []}), "matchLabels: must be an object".into()),
        (json!({"matchLabels": {"a": 1}}), "matchLabels.a: must be a string".into()),
        (json!({"matchExpressions": {}}), "matchExpressions: must be an array".into()),
        (json!({"matchExpressions": [1]}), "matchExpressions[0]: must be an object".into()),
        (json!({"matchExpressions": [{"key": 1, "operator": "Exists"}]}), "matchExpressions[0].key: must be a string".into()),
        (json!({"matchExpressions": [{"key": "a", "operator": true}]}), "matchExpressions[0].operator: must be a string".into()),
        (json!({"matchExpressions": [{"key": "a", "operator": "In", "values": "x"}]}), "matchExpressions[0].values: must be an array".into()),
        (json!({"matchExpressions": [{"key": "a", "operator": "In", "values": ["x", 2]}]}), "matchExpressions[0].values[1]: must be a string".into()),
    ];
    for (input, want) in cases {
        let got = Selector::from_label_selector(&input).map_err(|e| e.to_string());
        assert_eq!(got, Err(want), "{input}");
    }
}

fn key_strategy() -> impl Strategy<Value = String> {
    let name = "[A-Za-z0-9]([-A-Za-z0-9_.]{0,6}[A-Za-z0-9])?";
    prop_oneof![
        name,
        (
            "[a-z0-9]([-a-z0-9]{0,4}[a-z0-9])?(\\.[a-z0-9]{1,4}){0,2}",
            name
        )
            .prop_map(|(p, n)| format!("{p}/{n}")),
        Just("in".to_owned()),
        Just("notin".to_owned()),
    ]
}

fn value_strategy() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("in".to_owned()),
        "[A-Za-z0-9]([-A-Za-z0-9_.]{0,6}[A-Za-z0-9])?",
    ]
}

fn requirement_strategy() -> impl Strategy<Value = Requirement> {
    let values = proptest::collection::vec(value_strategy(), 1..4);
    (key_strategy(), 0..9usize, values, 0..100_000i64).prop_map(|(key, op, values, n)| {
        let (operator, values) = match op {
            0 => (Operator::In, values),
            1 => (Operator::NotIn, values),
            2 => (Operator::Equals, values[..1].to_vec()),
            3 => (Operator::DoubleEquals, values[..1].to_vec()),
            4 => (Operator::NotEquals, values[..1].to_vec()),
            5 => (Operator::GreaterThan, vec![n.to_string()]),
            6 => (Operator::LessThan, vec![n.to_string()]),
            7 => (Operator::Exists, vec![]),
            _ => (Operator::DoesNotExist, vec![]),
        };
        Requirement::new(key, operator, values).expect("strategy builds valid requirements")
    })
}

proptest! {
    #[test]
    fn printed_selectors_parse_back(requirements in proptest::collection::vec(requirement_strategy(), 0..6)) {
        let selector = Selector::from_requirements(requirements);
        let printed = selector.to_string();
        prop_assert_eq!(Selector::parse(&printed), Ok(selector), "{}", printed);
    }

    #[test]
    fn any_accepted_string_round_trips(input in "[a-c0-9 =!(),<>_./-]{0,24}|([a-c ]|in|notin|[=!(),<>]){0,12}") {
        if let Ok(selector) = Selector::parse(&input) {
            let printed = selector.to_string();
            prop_assert_eq!(Selector::parse(&printed), Ok(selector), "{:?} printed as {:?}", input, printed);
        }
    }
}
