//! The part of Kubernetes' JSONPath (`k8s.io/client-go/util/jsonpath`) that CRD printer columns
//! use: a path such as `.spec.replicas`, `.status.conditions[0].type` or `.items[*].name`,
//! evaluated with missing keys allowed (a missing field yields no value, not an error), and the
//! text form the JSONPath printer gives a value.
//!
//! Supported steps: `.name`, `['name']` / `["name"]`, `[n]` (negative counts from the end),
//! `[*]` and `.*` (every element or field value), `..name` (every `name` below), and filters
//! `[?(@.path)]` (elements where the path exists) and `[?(@.path <op> <literal>)]` with `==`,
//! `!=`, `<`, `<=`, `>`, `>=` against a quoted string, a number or a boolean (the most common
//! printer column there is: `.status.conditions[?(@.type=="Ready")].status`).

use serde_json::Value;

/// One step of a path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Field(String),
    Index(i64),
    Wildcard,
    /// `..name`: the field `name` of the value itself and of everything below it.
    Descend(String),
    /// `[?(@.path <op> literal)]`: the array's elements the condition holds for.
    Filter(Box<Filter>),
}

/// A filter's condition: a path from the element, and optionally a comparison.
#[derive(Debug, Clone, PartialEq)]
struct Filter {
    path: JsonPath,
    comparison: Option<(Op, Value)>,
}

impl Eq for Filter {}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Filter {
    fn parse(expression: &str) -> Option<Filter> {
        let expression = expression.trim();
        let relative = expression.strip_prefix('@')?;
        const OPS: [(&str, Op); 6] = [
            ("==", Op::Eq),
            ("!=", Op::Ne),
            ("<=", Op::Le),
            (">=", Op::Ge),
            ("<", Op::Lt),
            (">", Op::Gt),
        ];
        let found = OPS
            .iter()
            .filter_map(|(text, op)| relative.find(text).map(|at| (at, *text, *op)))
            .min_by_key(|(at, text, _)| (*at, std::cmp::Reverse(text.len())));
        let Some((at, text, op)) = found else {
            return Some(Filter {
                path: JsonPath::parse(relative).ok()?,
                comparison: None,
            });
        };
        let path = JsonPath::parse(relative[..at].trim()).ok()?;
        let literal = relative[at + text.len()..].trim();
        let value = match quoted(literal) {
            Some(string) => Value::String(string.to_string()),
            None => serde_json::from_str::<Value>(literal)
                .ok()
                .filter(|v| v.is_number() || v.is_boolean())?,
        };
        Some(Filter {
            path,
            comparison: Some((op, value)),
        })
    }

    /// Whether `element` passes.
    fn holds(&self, element: &Value) -> bool {
        let Some(found) = self.path.first(element) else {
            return false;
        };
        let Some((op, wanted)) = &self.comparison else {
            return true;
        };
        let order = match (found, wanted) {
            (Value::String(a), Value::String(b)) => Some(a.cmp(b)),
            (Value::Number(a), Value::Number(b)) => a
                .as_f64()
                .zip(b.as_f64())
                .and_then(|(a, b)| a.partial_cmp(&b)),
            (Value::Bool(a), Value::Bool(b)) => Some(a.cmp(b)),
            _ => None,
        };
        use std::cmp::Ordering::{Equal, Greater, Less};
        match (op, order) {
            (Op::Eq, Some(order)) => order == Equal,
            (Op::Ne, Some(order)) => order != Equal,
            (Op::Ne, None) => true,
            (Op::Lt, Some(order)) => order == Less,
            (Op::Le, Some(order)) => order != Greater,
            (Op::Gt, Some(order)) => order == Greater,
            (Op::Ge, Some(order)) => order != Less,
            _ => false,
        }
    }
}

/// A parsed path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonPath {
    steps: Vec<Step>,
}

/// Why a path does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unrecognized JSONPath {path:?}: {reason}")]
pub struct ParseError {
    pub path: String,
    pub reason: String,
}

impl JsonPath {
    /// Parses a path; surrounding braces (`{.spec.x}`) are accepted as the template form.
    pub fn parse(path: &str) -> Result<JsonPath, ParseError> {
        let error = |reason: &str| ParseError {
            path: path.to_string(),
            reason: reason.to_string(),
        };
        let text = path.trim();
        let text = match text.strip_prefix('{') {
            Some(inner) => inner.strip_suffix('}').ok_or_else(|| error("unclosed {"))?,
            None => text,
        };
        let chars: Vec<char> = text.chars().collect();
        let mut steps = Vec::new();
        let mut i = 0;
        // A leading `$` names the root, as in `$.spec`.
        if chars.first() == Some(&'$') {
            i = 1;
        }
        while i < chars.len() {
            match chars[i] {
                '.' if chars.get(i + 1) == Some(&'.') => {
                    let (name, next) = read_name(&chars, i + 2);
                    if name.is_empty() {
                        return Err(error("expected a field name after .."));
                    }
                    steps.push(Step::Descend(name));
                    i = next;
                }
                '.' => {
                    let (name, next) = read_name(&chars, i + 1);
                    match name.as_str() {
                        // `.` alone (the whole value) or a dot before a bracket.
                        "" => {}
                        "*" => steps.push(Step::Wildcard),
                        _ => steps.push(Step::Field(name)),
                    }
                    i = next;
                }
                '[' if chars.get(i + 1) == Some(&'?') => {
                    // The filter runs to the first `)]` outside quotes.
                    let mut quote: Option<char> = None;
                    let mut close = None;
                    for (at, c) in chars.iter().enumerate().skip(i + 2) {
                        match (quote, c) {
                            (Some(q), c) if *c == q => quote = None,
                            (Some(_), _) => {}
                            (None, '"' | '\'') => quote = Some(*c),
                            (None, ')') if chars.get(at + 1) == Some(&']') => {
                                close = Some(at);
                                break;
                            }
                            _ => {}
                        }
                    }
                    let close = close.ok_or_else(|| error("unterminated filter"))?;
                    let inner: String = chars[i + 2..close].iter().collect();
                    let inner = inner
                        .trim()
                        .strip_prefix('(')
                        .ok_or_else(|| error("a filter starts with ?("))?;
                    let filter = Filter::parse(inner)
                        .ok_or_else(|| error(&format!("invalid filter {inner:?}")))?;
                    steps.push(Step::Filter(Box::new(filter)));
                    i = close + 2;
                }
                '[' => {
                    let close = chars[i..]
                        .iter()
                        .position(|c| *c == ']')
                        .map(|p| i + p)
                        .ok_or_else(|| error("unterminated ["))?;
                    let inner: String = chars[i + 1..close].iter().collect();
                    let inner = inner.trim();
                    let step = if inner == "*" {
                        Step::Wildcard
                    } else if let Some(name) = quoted(inner) {
                        Step::Field(name.to_string())
                    } else {
                        Step::Index(
                            inner
                                .parse()
                                .map_err(|_| error(&format!("invalid array index {inner:?}")))?,
                        )
                    };
                    steps.push(step);
                    i = close + 1;
                }
                _ if i == 0 => {
                    // A bare first name (`spec.x`) reads as `.spec.x`.
                    let (name, next) = read_name(&chars, i);
                    steps.push(Step::Field(name));
                    i = next;
                }
                other => return Err(error(&format!("unexpected {other:?}"))),
            }
        }
        Ok(JsonPath { steps })
    }

    /// Every value the path reaches in `root`, in document order; none if a step is missing.
    pub fn find<'a>(&self, root: &'a Value) -> Vec<&'a Value> {
        let mut current = vec![root];
        for step in &self.steps {
            let mut next = Vec::new();
            for value in current {
                match step {
                    Step::Field(name) => next.extend(value.get(name.as_str())),
                    Step::Index(index) => {
                        if let Value::Array(items) = value {
                            let len = items.len() as i64;
                            let at = if *index < 0 { len + index } else { *index };
                            if (0..len).contains(&at) {
                                next.push(&items[at as usize]);
                            }
                        }
                    }
                    Step::Wildcard => match value {
                        Value::Array(items) => next.extend(items.iter()),
                        Value::Object(fields) => next.extend(fields.values()),
                        _ => {}
                    },
                    Step::Descend(name) => descend(value, name, &mut next),
                    Step::Filter(filter) => {
                        if let Value::Array(items) = value {
                            next.extend(items.iter().filter(|item| filter.holds(item)));
                        }
                    }
                }
            }
            current = next;
        }
        current
    }

    /// The first value the path reaches, if any.
    pub fn first<'a>(&self, root: &'a Value) -> Option<&'a Value> {
        self.find(root).into_iter().next()
    }

    /// The field names the path starts with, up to its first step of another kind: whatever the
    /// path reaches lies within the value at the end of them (the root when it starts
    /// otherwise), so a reader may skip everything outside it.
    pub fn leading_fields(&self) -> impl Iterator<Item = &str> {
        self.steps.iter().map_while(|step| match step {
            Step::Field(name) => Some(name.as_str()),
            _ => None,
        })
    }
}

fn descend<'a>(value: &'a Value, name: &str, found: &mut Vec<&'a Value>) {
    match value {
        Value::Object(fields) => {
            if let Some(hit) = fields.get(name) {
                found.push(hit);
            }
            for child in fields.values() {
                descend(child, name, found);
            }
        }
        Value::Array(items) => {
            for child in items {
                descend(child, name, found);
            }
        }
        _ => {}
    }
}

/// A field name: everything up to the next `.` or `[`.
fn read_name(chars: &[char], start: usize) -> (String, usize) {
    let end = chars[start..]
        .iter()
        .position(|c| *c == '.' || *c == '[')
        .map_or(chars.len(), |p| start + p);
    (chars[start..end].iter().collect(), end)
}

fn quoted(text: &str) -> Option<&str> {
    ['\'', '"']
        .iter()
        .find_map(|q| text.strip_prefix(*q).and_then(|rest| rest.strip_suffix(*q)))
}

/// A value as the JSONPath printer writes it: strings bare, numbers and booleans as Go's `%v`
/// prints them, objects and arrays as compact JSON, `null` as `null`.
pub fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => i.to_string(),
            (_, Some(u), _) => u.to_string(),
            (_, _, Some(f)) => go_float(f),
            _ => n.to_string(),
        },
        Value::Bool(b) => b.to_string(),
        Value::Null => "null".to_string(),
        Value::Array(_) | Value::Object(_) => value.to_string(),
    }
}

/// A float as Kubernetes prints a decoded JSON number: integral values were decoded as int64
/// and print plainly; others as Go's `%v` (shortest round-tripping digits, exponent form
/// `1.5e+06` when the exponent is below -4 or at least 6).
fn go_float(f: f64) -> String {
    if f.fract() == 0.0 && f.abs() < 9.2e18 {
        return format!("{}", f as i64);
    }
    // Rust's `{:e}` is the shortest round-tripping mantissa: `1.2345e6`.
    let scientific = format!("{f:e}");
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if (-4..6).contains(&exponent) {
        return format!("{f}");
    }
    let sign = if exponent < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exponent.abs())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn leading(path: &str) -> Vec<String> {
        let path = JsonPath::parse(path).unwrap();
        path.leading_fields().map(str::to_string).collect()
    }

    #[test]
    fn leading_fields_stop_at_the_first_step_that_is_not_a_field() {
        assert_eq!(leading(".spec.replicas"), ["spec", "replicas"]);
        assert_eq!(
            leading(".metadata.labels['a.b/c']"),
            ["metadata", "labels", "a.b/c"]
        );
        assert_eq!(
            leading(".status.conditions[0].type"),
            ["status", "conditions"]
        );
        assert_eq!(leading(".spec.*.name"), ["spec"]);
        assert_eq!(leading("..name"), Vec::<String>::new());
        assert_eq!(leading("{.spec.x}"), ["spec", "x"]);
    }

    fn find(path: &str, value: &Value) -> Vec<Value> {
        JsonPath::parse(path)
            .unwrap()
            .find(value)
            .into_iter()
            .cloned()
            .collect()
    }

    #[test]
    fn fields_indexes_and_wildcards() {
        let object = json!({
            "spec": {"replicas": 3, "items": [{"name": "a"}, {"name": "b"}], "x.y": 1},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}
        });
        assert_eq!(find(".spec.replicas", &object), [json!(3)]);
        assert_eq!(find("{.spec.replicas}", &object), [json!(3)]);
        assert_eq!(find("spec.replicas", &object), [json!(3)]);
        assert_eq!(find("$.spec.replicas", &object), [json!(3)]);
        assert_eq!(
            find(".status.conditions[0].type", &object),
            [json!("Ready")]
        );
        assert_eq!(find(".spec.items[-1].name", &object), [json!("b")]);
        assert_eq!(
            find(".spec.items[*].name", &object),
            [json!("a"), json!("b")]
        );
        assert_eq!(
            find(".spec.items.*.name", &object),
            [json!("a"), json!("b")]
        );
        assert_eq!(find(".spec['x.y']", &object), [json!(1)]);
        assert_eq!(find("..name", &object), [json!("a"), json!("b")]);
        assert_eq!(find(".", &object), std::slice::from_ref(&object));
    }

    #[test]
    fn filters_pick_the_elements_their_condition_holds_for() {
        let object = json!({"status": {"conditions": [
            {"type": "Synced", "status": "False", "age": 3},
            {"type": "Ready", "status": "True", "age": 7, "reason": "Up"},
        ]}});
        assert_eq!(
            find(r#".status.conditions[?(@.type=="Ready")].status"#, &object),
            vec![json!("True")]
        );
        assert_eq!(
            find(".status.conditions[?(@.type=='Synced')].status", &object),
            vec![json!("False")]
        );
        assert_eq!(
            find(r#"{.status.conditions[?(@.type!="Ready")].type}"#, &object),
            vec![json!("Synced")]
        );
        assert_eq!(
            find(".status.conditions[?(@.age > 5)].type", &object),
            vec![json!("Ready")]
        );
        assert_eq!(
            find(".status.conditions[?(@.reason)].type", &object),
            vec![json!("Ready")]
        );
        assert!(find(r#".status.conditions[?(@.type=="Gone")].status"#, &object).is_empty());
        // A `)]` inside the quoted literal does not end the filter.
        let odd = json!({"items": [{"name": "a)]b", "v": 1}]});
        assert_eq!(find(r#".items[?(@.name=="a)]b")].v"#, &odd), vec![json!(1)]);
        assert!(JsonPath::parse(".items[?(@.name==)]").is_err());
        assert!(JsonPath::parse(".items[?(@.name==\"x\"").is_err());
    }

    #[test]
    fn missing_steps_find_nothing() {
        let object = json!({"spec": {"items": [1]}});
        assert!(find(".spec.missing.deeper", &object).is_empty());
        assert!(find(".spec.items[3]", &object).is_empty());
        assert!(find(".spec[0]", &object).is_empty());
        assert!(find(".spec.items.name", &object).is_empty());
    }

    #[test]
    fn bad_paths_do_not_parse() {
        assert!(JsonPath::parse(".spec[0").is_err());
        assert!(JsonPath::parse(".spec[x]").is_err());
        assert!(JsonPath::parse("{.spec").is_err());
        assert!(JsonPath::parse("..").is_err());
    }

    #[test]
    fn values_print_as_the_jsonpath_printer_prints_them() {
        assert_eq!(text(&json!("red")), "red");
        assert_eq!(text(&json!(3)), "3");
        assert_eq!(text(&json!(2.0)), "2");
        assert_eq!(text(&json!(1.5)), "1.5");
        assert_eq!(text(&json!(1234567.5)), "1.2345675e+06");
        assert_eq!(text(&json!(0.00001)), "1e-05");
        assert_eq!(text(&json!(true)), "true");
        assert_eq!(text(&json!({"b": 1, "a": [1, 2]})), r#"{"a":[1,2],"b":1}"#);
    }
}
