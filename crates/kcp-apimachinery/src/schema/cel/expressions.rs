//! CEL expressions outside schemas: admission webhooks' `matchConditions` and, later,
//! admission policies. An [`Expression`] is parsed once within Kubernetes' size and nesting
//! limits and instrumented like a validation rule (without a schema every value counts as
//! large, so the meter measures them all); an [`Evaluation`] binds the request's variables
//! (`object`, `oldObject`, `request`, ...) from JSON and runs expressions against them,
//! charging one budget shared by all of them.

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, OnceLock};

use kube_cel::KubeCelExt;
use kube_cel::cel::{Context, Value as CelValue};
use serde_json::Value;

use super::estimate::Estimate;
use super::evaluate::{evaluation_error, usable_message};
use super::instrument::{Instrumented, instrument_with};
use super::meter::{self, COST_LIMIT_EXCEEDED, Exceeded, PER_CALL_LIMIT, RUNTIME_BUDGET, metered};
use super::syntax::parse;

/// One expression, compiled once and shared.
#[derive(Clone)]
pub struct Expression {
    source: Arc<str>,
    runnable: Arc<Instrumented>,
}

impl std::fmt::Debug for Expression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Expression").field(&self.source).finish()
    }
}

/// How running an expression ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Bool(bool),
    String(String),
    /// Some other value (its CEL type's name).
    Other(String),
    /// It failed, with cel-go's words (`no such key: x evaluating rule: <expression>`).
    Failed(String),
    /// The per-call limit or the request's budget ran out.
    Exceeded(String),
}

impl Expression {
    /// `source` parsed for variables `variables`, or why it does not compile.
    pub fn compile(source: &str, variables: &[&str]) -> Result<Expression, String> {
        let expression = parse(source)?;
        let runnable = instrument_with(&expression, &Estimate::default(), variables);
        Ok(Expression {
            source: source.into(),
            runnable: Arc::new(runnable),
        })
    }

    /// Its source text.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Whether it names the variable `name` (an identifier not selected from something else,
    /// outside string literals): variables it does not name need not be bound.
    pub fn mentions(&self, name: &str) -> bool {
        let bytes = self.source.as_bytes();
        let mut i = 0;
        let mut quote: Option<u8> = None;
        while i < bytes.len() {
            let c = bytes[i];
            if let Some(q) = quote {
                if c == b'\\' {
                    i += 2;
                    continue;
                }
                if c == q {
                    quote = None;
                }
                i += 1;
                continue;
            }
            if c == b'"' || c == b'\'' {
                quote = Some(c);
                i += 1;
                continue;
            }
            if c.is_ascii_alphabetic() || c == b'_' {
                let start = i;
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                let selected = bytes[..start]
                    .iter()
                    .rev()
                    .find(|b| !b.is_ascii_whitespace())
                    .is_some_and(|b| *b == b'.');
                if !selected && &self.source[start..i] == name {
                    return true;
                }
                continue;
            }
            i += 1;
        }
        false
    }
}

/// What a type checker finds in `source` when each variable of `typed` holds objects of the
/// given structural schema (a resource's root): cel-go's `undefined field` report of the
/// first field no schema declares, or `None`. Variables not listed are not checked.
pub fn undefined_field(source: &str, typed: &[(&str, &Value)]) -> Option<String> {
    let expression = parse(source).ok()?;
    let typed: Vec<(&str, super::types::Ty)> = typed
        .iter()
        .filter_map(|(name, schema)| Some((*name, super::types::Ty::of(schema, true)?)))
        .collect();
    let estimate =
        super::estimate::estimate_with(&expression, &super::types::Ty::unknown(), &typed);
    estimate
        .undefined_field
        .map(|field| super::syntax::undefined_field(source, &field))
}

/// CEL's standard functions, Kubernetes' libraries and the meter's, built once.
fn functions() -> &'static Context<'static> {
    static FUNCTIONS: OnceLock<Context<'static>> = OnceLock::new();
    FUNCTIONS.get_or_init(|| {
        let mut functions = Context::default().with_all();
        meter::register(&mut functions);
        functions
    })
}

/// Variables bound for one request, and what is left of its cost budget.
pub struct Evaluation {
    scope: Context<'static>,
    remaining: u64,
    /// Values of `variables.<name>` defined so far.
    defined: std::collections::HashMap<String, CelValue>,
}

impl Default for Evaluation {
    fn default() -> Self {
        Evaluation::new()
    }
}

impl Evaluation {
    /// No variables yet, Kubernetes' runtime budget per request.
    pub fn new() -> Evaluation {
        Evaluation {
            scope: Context::Child {
                parent: functions(),
                variables: BTreeMap::new(),
                resolver: None,
            },
            remaining: RUNTIME_BUDGET,
            defined: std::collections::HashMap::new(),
        }
    }

    /// Binds `name` to `value` (JSON null is CEL null).
    pub fn bind(&mut self, name: &str, value: &Value) {
        if let Context::Child { variables, .. } = &mut self.scope {
            variables.insert(name.to_string(), super::values::plain(value));
        }
    }

    /// Runs `expression` and binds its value as `<map>.<name>` (admission policies'
    /// `variables.<name>`), whatever its type; `None` when it ran, else why not (the name
    /// stays unbound, so expressions using it fail).
    pub fn define(&mut self, map: &str, name: &str, expression: &Expression) -> Option<Outcome> {
        let value = match self.resolve(expression) {
            Ok(value) => value,
            Err(outcome) => return Some(outcome),
        };
        self.defined.insert(name.to_string(), value);
        let entries: std::collections::HashMap<String, CelValue> = self.defined.clone();
        let Ok(boxed) = CelValue::from(entries).try_into() else {
            return Some(Outcome::Failed(format!(
                "the value of {name} cannot be bound"
            )));
        };
        if let Context::Child { variables, .. } = &mut self.scope {
            variables.insert(map.to_string(), boxed);
        }
        None
    }

    /// Runs `expression` (on the calling thread; it is bounded by the per-call limit).
    pub fn run(&mut self, expression: &Expression) -> Outcome {
        match self.resolve(expression) {
            Ok(CelValue::Bool(b)) => Outcome::Bool(b),
            Ok(value @ CelValue::String(_)) => Outcome::String(
                usable_message(value.clone()).unwrap_or_else(|| match value {
                    CelValue::String(s) => s.to_string(),
                    _ => String::new(),
                }),
            ),
            Ok(other) => Outcome::Other(format!("{:?}", other.type_of())),
            Err(outcome) => outcome,
        }
    }

    /// The value of `expression`, or how running it ended otherwise.
    fn resolve(&mut self, expression: &Expression) -> Result<CelValue, Outcome> {
        let scope = &self.scope;
        let program = &expression.runnable;
        let run = metered(PER_CALL_LIMIT, self.remaining, program.base, || {
            catch_unwind(AssertUnwindSafe(|| {
                CelValue::resolve(&program.expression, scope)
            }))
        });
        self.remaining = self.remaining.saturating_sub(run.used);
        match (run.exceeded, run.value) {
            (Some(Exceeded::PerCall), _) => Err(Outcome::Exceeded(format!(
                "operation cancelled: actual cost limit exceeded evaluating rule: {}",
                expression.source
            ))),
            (Some(Exceeded::Budget), _) | (None, None) => Err(Outcome::Exceeded(format!(
                "validation failed due to running out of cost budget, no further validation rules will be run ({COST_LIMIT_EXCEEDED})"
            ))),
            (None, Some(Err(_))) => Err(Outcome::Failed(format!(
                "internal error: the interpreter failed evaluating rule: {}",
                expression.source
            ))),
            (None, Some(Ok(Err(error)))) => Err(Outcome::Failed(evaluation_error(
                &error,
                &expression.source,
            ))),
            (None, Some(Ok(Ok(value)))) => Ok(value),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn expressions_see_their_variables() {
        let names = ["object", "oldObject", "request"];
        let mut evaluation = Evaluation::new();
        evaluation.bind(
            "object",
            &json!({"metadata": {"name": "a", "labels": {"x": "1"}}}),
        );
        evaluation.bind("oldObject", &Value::Null);
        evaluation.bind("request", &json!({"operation": "CREATE", "dryRun": false}));
        let run =
            |e: &mut Evaluation, source: &str| e.run(&Expression::compile(source, &names).unwrap());
        assert_eq!(
            run(&mut evaluation, "object.metadata.name == 'a'"),
            Outcome::Bool(true)
        );
        assert_eq!(
            run(&mut evaluation, "oldObject == null"),
            Outcome::Bool(true)
        );
        assert_eq!(
            run(
                &mut evaluation,
                "request.operation != 'CREATE' || !request.dryRun"
            ),
            Outcome::Bool(true)
        );
        assert_eq!(
            run(&mut evaluation, "'x' in object.metadata.labels"),
            Outcome::Bool(true)
        );
        assert!(matches!(
            run(&mut evaluation, "object.spec.x"),
            Outcome::Failed(m) if m.contains("no such key: spec")
        ));
        assert!(Expression::compile("object.", &names).is_err());
    }

    #[test]
    fn variables_keep_any_type() {
        let names = ["object", "variables"];
        let mut evaluation = Evaluation::new();
        evaluation.bind(
            "object",
            &json!({"spec": {"replicas": 3, "tags": ["a", "b"]}}),
        );
        let define = |source: &str| Expression::compile(source, &names).unwrap();
        assert_eq!(
            evaluation.define("variables", "replicas", &define("object.spec.replicas")),
            None
        );
        assert_eq!(
            evaluation.define("variables", "tags", &define("object.spec.tags")),
            None
        );
        assert!(
            evaluation
                .define("variables", "broken", &define("object.nope"))
                .is_some()
        );
        let check = Expression::compile(
            "variables.replicas == 3 && size(variables.tags) == 2",
            &names,
        )
        .unwrap();
        assert_eq!(evaluation.run(&check), Outcome::Bool(true));
        let missing = Expression::compile("variables.broken == 1", &names).unwrap();
        assert!(matches!(evaluation.run(&missing), Outcome::Failed(_)));
    }

    #[test]
    fn mentions_finds_variables_not_fields_or_strings() {
        let e = Expression::compile(
            "object.spec.request == 'params' && oldObject.x.object == 1",
            &["object", "oldObject", "request", "params"],
        )
        .unwrap();
        assert!(e.mentions("object"));
        assert!(e.mentions("oldObject"));
        assert!(!e.mentions("request"));
        assert!(!e.mentions("params"));
    }

    #[test]
    fn undefined_fields_are_found_against_the_schema() {
        let schema = json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {"replicas": {"type": "integer"}}},
        }});
        assert_eq!(
            undefined_field("object.spec.replicas > 1", &[("object", &schema)]),
            None
        );
        let found = undefined_field("object.spec.replica > 1", &[("object", &schema)]).unwrap();
        assert!(found.contains("undefined field 'replica'"), "{found}");
        assert_eq!(
            undefined_field("params.anything", &[("object", &schema)]),
            None
        );
    }

    #[test]
    fn a_costly_expression_is_stopped() {
        let names = ["object"];
        let mut evaluation = Evaluation::new();
        evaluation.bind("object", &json!({"items": (0..2000).collect::<Vec<_>>()}));
        let costly = Expression::compile(
            "object.items.all(x, object.items.all(y, object.items.all(z, x + y + z >= 0)))",
            &names,
        )
        .unwrap();
        assert!(matches!(evaluation.run(&costly), Outcome::Exceeded(_)));
    }
}
