//! Parsing one rule (or `messageExpression`) safely: the limits Kubernetes' CEL parser has
//! (100,000 code points, 250 levels of recursion), checked by a cheap scan of the text before
//! the recursive parser sees it, and the constructs this interpreter cannot evaluate (struct
//! literals such as `Foo{a: 1}`) refused after it. Errors read like cel-go's
//! (`ERROR: <input>:-1:0: max recursion depth exceeded`).
//!
//! The parser itself recurses once per nesting level of the text (and the tree it returns
//! once per left-nested operator), so the scan bounds both: brackets and `?` nest, and a chain
//! of binary operators, `.field` selections, calls and indexes deepens the tree by one per link
//! (`&&` and `||` chains are balanced by the parser and do not count). Callers still run the
//! parser on a thread with a generous stack (see `super::with_stack`).

use std::panic::{AssertUnwindSafe, catch_unwind};

use kube_cel::cel::common::ast::{EntryExpr, Expr, IdedExpr};
use kube_cel::cel::parser::Parser;

/// cel-go's default limit on the code points of an expression.
pub(super) const MAX_CODE_POINTS: usize = 100_000;

/// cel-go's default limit on the parser's recursion.
pub(super) const MAX_RECURSION_DEPTH: usize = 250;

/// A parsed expression, or the error report Kubernetes shows after `compilation failed: `.
pub(super) fn parse(source: &str) -> Result<IdedExpr, String> {
    let code_points = source.chars().count();
    if code_points > MAX_CODE_POINTS {
        return Err(no_location(&format!(
            "expression code point size exceeds limit: size: {code_points}, limit {MAX_CODE_POINTS}"
        )));
    }
    let depth = nesting(source);
    if depth.brackets > MAX_RECURSION_DEPTH {
        return Err(no_location(&format!(
            "expression recursion limit exceeded: {MAX_RECURSION_DEPTH}"
        )));
    }
    if depth.tree > MAX_RECURSION_DEPTH {
        return Err(no_location("max recursion depth exceeded"));
    }
    let parsed = catch_unwind(AssertUnwindSafe(|| {
        // The listener limit counts nested `expr` rules, which the scan above already bounds.
        let limit = u16::try_from(MAX_RECURSION_DEPTH).unwrap_or(u16::MAX);
        Parser::new().max_recursion_depth(limit).parse(source)
    }));
    let expression = match parsed {
        Ok(Ok(expression)) => expression,
        Ok(Err(errors)) => return Err(errors.to_string()),
        Err(_) => {
            return Err(format!(
                "ERROR: <input>:1:1: Syntax error: cannot parse {source:?}"
            ));
        }
    };
    if let Some(problem) = unsupported(&expression) {
        return Err(at_name(source, &problem));
    }
    Ok(expression)
}

fn no_location(message: &str) -> String {
    format!("ERROR: <input>:-1:0: {message}")
}

/// What cel-go's checker says of a construct this interpreter cannot evaluate, at the `{` after
/// the type name, with cel-go's snippet of the line under it.
fn at_name(source: &str, problem: &Unsupported) -> String {
    let (offset, message) = match problem {
        Unsupported::Struct(name) => {
            let start = source.find(name.as_str()).unwrap_or(0);
            let brace = source[start..].find('{').map_or(start, |b| start + b);
            (
                brace,
                format!("undeclared reference to '{name}' (in container '')"),
            )
        }
        Unsupported::Unspecified => (0, "unsupported expression".to_string()),
    };
    report_at(source, offset, &message)
}

/// cel-go's checker on a field the operand's type does not declare, at the `.` before it.
pub(super) fn undefined_field(source: &str, field: &str) -> String {
    let offset = field_selection(source, field).unwrap_or(0);
    report_at(source, offset, &format!("undefined field '{field}'"))
}

/// The offset of the first `.field` outside string literals (not followed by more of a name).
fn field_selection(source: &str, field: &str) -> Option<usize> {
    let bytes = source.as_bytes();
    let needle = format!(".{field}");
    let mut quote: Option<u8> = None;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match quote {
            Some(_) if b == b'\\' => i += 1,
            Some(q) if b == q => quote = None,
            Some(_) => {}
            None if b == b'"' || b == b'\'' => quote = Some(b),
            None if source[i..].starts_with(&needle) => {
                let after = bytes.get(i + needle.len());
                if !after.is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_') {
                    return Some(i);
                }
            }
            None => {}
        }
        i += 1;
    }
    None
}

/// An error report as cel-go writes it: position, message, and the line with a caret.
fn report_at(source: &str, offset: usize, message: &str) -> String {
    let before = &source[..offset];
    let line_start = before.rfind('\n').map_or(0, |n| n + 1);
    let line = before.matches('\n').count() + 1;
    let column = before[line_start..].chars().count();
    let text = source[line_start..].split('\n').next().unwrap_or("");
    format!(
        "ERROR: <input>:{line}:{}: {message}\n | {text}\n | {}^",
        column + 1,
        ".".repeat(column)
    )
}

enum Unsupported {
    Struct(String),
    Unspecified,
}

/// The first struct literal (or unset node) in `expression`: the interpreter has no types to
/// build them from (it would panic), and cel-go's checker refuses them as undeclared.
fn unsupported(expression: &IdedExpr) -> Option<Unsupported> {
    let mut pending = vec![expression];
    while let Some(e) = pending.pop() {
        match &e.expr {
            Expr::Struct(structure) => {
                return Some(Unsupported::Struct(structure.type_name.clone()));
            }
            Expr::Unspecified => return Some(Unsupported::Unspecified),
            Expr::Literal(_) | Expr::Ident(_) => {}
            Expr::Select(select) => pending.push(&select.operand),
            Expr::Call(call) => {
                pending.extend(call.target.as_deref());
                pending.extend(&call.args);
            }
            Expr::List(list) => pending.extend(&list.elements),
            Expr::Map(map) => {
                for entry in &map.entries {
                    match &entry.expr {
                        EntryExpr::MapEntry(entry) => {
                            pending.push(&entry.key);
                            pending.push(&entry.value);
                        }
                        EntryExpr::StructField(_) => return Some(Unsupported::Unspecified),
                    }
                }
            }
            Expr::Comprehension(c) => pending.extend([
                &c.iter_range,
                &c.accu_init,
                &c.loop_cond,
                &c.loop_step,
                &c.result,
            ]),
        }
    }
    None
}

/// How deep the parser would go: the deepest bracket nesting, and a bound on the depth of the
/// parse tree (each bracket group counts one, plus its longest chain of left-nesting links,
/// plus its deepest inner group).
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Nesting {
    pub(super) brackets: usize,
    pub(super) tree: usize,
}

/// One open bracket group while scanning.
#[derive(Default)]
struct Group {
    /// Links in the current comma-, colon- or `&&`/`||`-separated segment.
    chain: usize,
    /// `?` seen in the current comma-separated segment: ternaries nest to the right.
    ternary: usize,
    /// The longest segment so far.
    longest: usize,
    /// The deepest inner group.
    inner: usize,
}

impl Group {
    fn end_segment(&mut self, keep_ternary: bool) {
        self.longest = self.longest.max(self.chain + self.ternary);
        self.chain = 0;
        if !keep_ternary {
            self.ternary = 0;
        }
    }

    fn depth(mut self) -> usize {
        self.end_segment(false);
        1 + self.longest + self.inner
    }
}

/// Scans `source` for [`Nesting`], skipping string and bytes literals and comments.
pub(super) fn nesting(source: &str) -> Nesting {
    let bytes = source.as_bytes();
    let mut groups = vec![Group::default()];
    let mut deepest = 0;
    // Whether the previous token ends an operand (then `-` is binary, `[` an index, `.` a
    // selection, `(` a call).
    let mut after_operand = false;
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        match c {
            b' ' | b'\t' | b'\n' | b'\r' | b'\x0c' => {
                i += 1;
                continue;
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'"' | b'\'' => {
                i = skip_string(bytes, i, false);
                after_operand = true;
                continue;
            }
            b'r' | b'R' | b'b' | b'B' if starts_string(bytes, i) => {
                let mut raw = false;
                while matches!(bytes[i], b'r' | b'R' | b'b' | b'B') {
                    raw |= matches!(bytes[i], b'r' | b'R');
                    i += 1;
                }
                i = skip_string(bytes, i, raw);
                after_operand = true;
                continue;
            }
            b'0'..=b'9' => {
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'.') {
                    // `1.e5`-style exponents with signs
                    if matches!(bytes[i], b'e' | b'E')
                        && matches!(bytes.get(i + 1), Some(b'+' | b'-'))
                    {
                        i += 1;
                    }
                    i += 1;
                }
                after_operand = true;
                continue;
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let start = i;
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                if &bytes[start..i] == b"in" && after_operand {
                    link(&mut groups);
                    after_operand = false;
                } else {
                    after_operand = true;
                }
                continue;
            }
            b'(' | b'[' | b'{' => {
                if after_operand && c != b'{' {
                    link(&mut groups);
                }
                groups.push(Group::default());
                deepest = deepest.max(groups.len() - 1);
                after_operand = false;
            }
            b')' | b']' | b'}' => {
                if groups.len() > 1
                    && let Some(group) = groups.pop()
                {
                    let depth = group.depth();
                    if let Some(parent) = groups.last_mut() {
                        parent.inner = parent.inner.max(depth);
                    }
                }
                after_operand = true;
            }
            b',' => {
                if let Some(group) = groups.last_mut() {
                    group.end_segment(false);
                }
                after_operand = false;
            }
            b':' => {
                if let Some(group) = groups.last_mut() {
                    group.end_segment(true);
                }
                after_operand = false;
            }
            b'?' => {
                if let Some(group) = groups.last_mut() {
                    group.ternary += 1;
                }
                after_operand = false;
            }
            b'&' | b'|' => {
                if let Some(group) = groups.last_mut() {
                    group.end_segment(true);
                }
                after_operand = false;
            }
            b'.' => {
                if after_operand {
                    link(&mut groups);
                }
                after_operand = false;
            }
            b'-' | b'!' => {
                if after_operand && c == b'-' {
                    link(&mut groups);
                }
                after_operand = false;
            }
            b'+' | b'*' | b'/' | b'%' | b'<' | b'>' | b'=' => {
                link(&mut groups);
                // Two-character operators (`<=`, `==`, `!=` handled by `!` above) are one link.
                if matches!(bytes.get(i + 1), Some(b'=')) {
                    i += 1;
                }
                after_operand = false;
            }
            _ => after_operand = false,
        }
        i += 1;
    }
    let mut tree = 0;
    while let Some(group) = groups.pop() {
        let depth = group.depth();
        match groups.last_mut() {
            Some(parent) => parent.inner = parent.inner.max(depth),
            None => tree = depth,
        }
    }
    Nesting {
        brackets: deepest,
        tree,
    }
}

fn link(groups: &mut [Group]) {
    if let Some(group) = groups.last_mut() {
        group.chain += 1;
    }
}

/// Whether a string literal with prefixes (`r'..'`, `b"..."`, `rb'..'`) starts at `i`.
fn starts_string(bytes: &[u8], i: usize) -> bool {
    let mut j = i;
    while j < bytes.len() && j < i + 2 && matches!(bytes[j], b'r' | b'R' | b'b' | b'B') {
        j += 1;
    }
    // Only a prefix when it is not the end of a longer identifier.
    let starts_word = i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
    starts_word && matches!(bytes.get(j), Some(b'"' | b'\''))
}

/// The index after the string literal whose opening quote is at `i` (triple quotes included).
fn skip_string(bytes: &[u8], i: usize, raw: bool) -> usize {
    let quote = bytes[i];
    let triple = bytes.get(i + 1) == Some(&quote) && bytes.get(i + 2) == Some(&quote);
    let mut j = if triple { i + 3 } else { i + 1 };
    while j < bytes.len() {
        let c = bytes[j];
        if c == b'\\' && !raw {
            j += 2;
            continue;
        }
        if c == quote {
            if !triple {
                return j + 1;
            }
            if bytes.get(j + 1) == Some(&quote) && bytes.get(j + 2) == Some(&quote) {
                return j + 3;
            }
        }
        if c == b'\n' && !triple {
            return j;
        }
        j += 1;
    }
    bytes.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(source: &str) -> usize {
        nesting(source).tree
    }

    #[test]
    fn chains_and_groups_deepen_the_tree() {
        assert_eq!(tree("self.a < self.b"), 4);
        assert_eq!(tree("1 + 1 + 1"), 3);
        // && and || chains are balanced by the parser.
        assert_eq!(tree("a && b && c && d || e"), 1);
        assert_eq!(
            nesting("((1))"),
            Nesting {
                brackets: 2,
                tree: 3
            }
        );
        assert_eq!(tree("f(1 + 1, 2 + 2 + 2)"), 5);
        assert_eq!(tree("a ? b : c ? d : e"), 3);
        // Operators inside strings and comments do not count.
        assert_eq!(tree("'a + b + c' == \"(((\" // + + +\n"), 2);
        assert_eq!(tree("r'\\' + '''x'''"), 2);
    }

    #[test]
    fn limits_are_refused_with_cel_go_messages() {
        let deep = format!("{}1{}", "(".repeat(300), ")".repeat(300));
        assert_eq!(
            parse(&deep).unwrap_err(),
            "ERROR: <input>:-1:0: expression recursion limit exceeded: 250"
        );
        let long_chain = format!("1{}", " + 1".repeat(5000));
        assert_eq!(
            parse(&long_chain).unwrap_err(),
            "ERROR: <input>:-1:0: max recursion depth exceeded"
        );
        let huge = format!("'{}' == ''", "x".repeat(MAX_CODE_POINTS));
        assert_eq!(
            parse(&huge).unwrap_err(),
            "ERROR: <input>:-1:0: expression code point size exceeds limit: size: 100008, limit 100000"
        );
        assert!(parse(&format!("1{}", " + 1".repeat(200))).is_ok());
    }

    #[test]
    fn struct_literals_are_refused() {
        assert_eq!(
            parse("self.a == 1 && Foo{a: 1} == self").unwrap_err(),
            "ERROR: <input>:1:19: undeclared reference to 'Foo' (in container '')\n | self.a == 1 && Foo{a: 1} == self\n | ..................^"
        );
    }
}
