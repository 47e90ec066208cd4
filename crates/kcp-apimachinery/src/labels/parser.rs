//! The string grammar of label selectors: a lexer and a recursive-descent parser that follow
//! `k8s.io/apimachinery/pkg/labels` token for token, so the same inputs are accepted and the same
//! error texts come out.
//!
//! ```text
//! selector    ::= "" | requirement ( "," requirement )*
//! requirement ::= [ "!" ] KEY [ set-op "(" values ")" | exact-op VALUE ]
//! set-op      ::= "in" | "notin"
//! exact-op    ::= "=" | "==" | "!=" | ">" | "<"
//! values      ::= VALUE? ( "," VALUE? )*          (empty values are allowed: "(,a)", "()")
//! ```
//!
//! Whitespace (space, tab, CR, LF) separates tokens. An identifier is any run of bytes that are
//! neither whitespace nor one of `=!(),<>`; `in` and `notin` are keywords only where an operator
//! is expected, so `in in (in)` is valid. A missing exact value is the empty value (`k=`). Like
//! Go's lexer, a NUL byte ends the input. Values of one requirement are sorted and de-duplicated
//! before validation, so error paths (`values[i][key]`) index that sorted list, as in Kubernetes.
//!
//! Must not know: matching, `LabelSelector` objects, anything outside the string.

use super::error::{FieldError, FieldErrors, RequirementError, SelectorError};
use super::{Operator, Requirement, validation};

/// The operators that may follow a key, as listed in Kubernetes' "expected:" messages.
const BINARY_OPERATORS: &str = "in, notin, =, ==, !=, gt, lt";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    EndOfString,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

#[derive(Debug, Clone, Copy)]
struct Item<'a> {
    token: Token,
    literal: &'a str,
}

/// Where the parser is: after a key an `in`/`notin` literal is an operator; everywhere else it is
/// an ordinary identifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Context {
    KeyAndOperator,
    Values,
}

fn is_whitespace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special(b: u8) -> bool {
    matches!(b, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

/// Splits the input into tokens, ending with exactly one `EndOfString`.
fn lex(input: &str) -> Vec<Item<'_>> {
    let bytes = input.as_bytes();
    // Go's lexer reads a 0 byte as "end of input"; a NUL inside the string stops it there too.
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    let mut items = Vec::new();
    let mut pos = 0;
    loop {
        while pos < end && is_whitespace(bytes[pos]) {
            pos += 1;
        }
        if pos >= end {
            items.push(Item {
                token: Token::EndOfString,
                literal: "",
            });
            return items;
        }
        let start = pos;
        let token = if is_special(bytes[pos]) {
            // Longest match among the operator spellings: only "!=" and "==" have two bytes.
            let two = pos + 1 < end && bytes[pos + 1] == b'=';
            let (token, len) = match bytes[pos] {
                b'!' if two => (Token::NotEquals, 2),
                b'=' if two => (Token::DoubleEquals, 2),
                b'!' => (Token::DoesNotExist, 1),
                b'=' => (Token::Equals, 1),
                b'(' => (Token::OpenPar, 1),
                b')' => (Token::ClosedPar, 1),
                b',' => (Token::Comma, 1),
                b'>' => (Token::GreaterThan, 1),
                _ => (Token::LessThan, 1),
            };
            pos += len;
            token
        } else {
            while pos < end && !is_special(bytes[pos]) && !is_whitespace(bytes[pos]) {
                pos += 1;
            }
            match &input[start..pos] {
                "in" => Token::In,
                "notin" => Token::NotIn,
                _ => Token::Identifier,
            }
        };
        items.push(Item {
            token,
            literal: &input[start..pos],
        });
    }
}

struct Parser<'a> {
    items: Vec<Item<'a>>,
    position: usize,
}

type ReqResult<T> = Result<T, RequirementError>;

fn syntax(message: String) -> RequirementError {
    RequirementError::Syntax(message)
}

/// Parses a selector string into its requirements, in input order.
pub(super) fn parse(input: &str) -> Result<Vec<Requirement>, SelectorError> {
    let mut parser = Parser {
        items: lex(input),
        position: 0,
    };
    parser.parse()
}

impl<'a> Parser<'a> {
    fn item(&self, context: Context) -> (Token, &'a str) {
        // `lex` always ends with EndOfString; reading past it keeps returning it.
        let item = self.items[self.position.min(self.items.len() - 1)];
        let token = match (context, item.token) {
            (Context::Values, Token::In | Token::NotIn) => Token::Identifier,
            (_, token) => token,
        };
        (token, item.literal)
    }

    fn lookahead(&self, context: Context) -> (Token, &'a str) {
        self.item(context)
    }

    fn consume(&mut self, context: Context) -> (Token, &'a str) {
        let item = self.item(context);
        self.position += 1;
        item
    }

    fn parse(&mut self) -> Result<Vec<Requirement>, SelectorError> {
        let mut requirements = Vec::new();
        loop {
            let (token, literal) = self.lookahead(Context::Values);
            match token {
                Token::Identifier | Token::DoesNotExist => {
                    let requirement = self
                        .parse_requirement()
                        .map_err(SelectorError::Requirement)?;
                    requirements.push(requirement);
                    let (token, literal) = self.consume(Context::Values);
                    match token {
                        Token::EndOfString => return Ok(requirements),
                        Token::Comma => {
                            let (next, next_literal) = self.lookahead(Context::Values);
                            if next != Token::Identifier && next != Token::DoesNotExist {
                                return Err(SelectorError::Syntax(format!(
                                    "found '{next_literal}', expected: identifier after ','"
                                )));
                            }
                        }
                        _ => {
                            return Err(SelectorError::Syntax(format!(
                                "found '{literal}', expected: ',' or 'end of string'"
                            )));
                        }
                    }
                }
                Token::EndOfString => return Ok(requirements),
                _ => {
                    return Err(SelectorError::Syntax(format!(
                        "found '{literal}', expected: !, identifier, or 'end of string'"
                    )));
                }
            }
        }
    }

    fn parse_requirement(&mut self) -> ReqResult<Requirement> {
        let (key, inferred) = self.parse_key_and_infer_operator()?;
        if let Some(operator) = inferred {
            return build(key, operator, Vec::new());
        }
        let operator = self.parse_operator()?;
        let values = match operator {
            Operator::In | Operator::NotIn => self.parse_values()?,
            _ => vec![self.parse_exact_value()?],
        };
        build(key, operator, values)
    }

    /// Reads `[!] KEY` and validates the key; the operator is known already for `!k` and for a
    /// bare `k` followed by `,` or the end.
    fn parse_key_and_infer_operator(&mut self) -> ReqResult<(&'a str, Option<Operator>)> {
        let mut operator = None;
        let (mut token, mut literal) = self.consume(Context::Values);
        if token == Token::DoesNotExist {
            operator = Some(Operator::DoesNotExist);
            (token, literal) = self.consume(Context::Values);
        }
        if token != Token::Identifier {
            return Err(syntax(format!("found '{literal}', expected: identifier")));
        }
        let errs = validation::label_key_errors(literal);
        if !errs.is_empty() {
            // Kubernetes parses with a nil field path, which prints as "<nil>".
            return Err(RequirementError::Invalid(FieldErrors(vec![
                FieldError::string("<nil>", literal, errs.join("; ")),
            ])));
        }
        let (next, _) = self.lookahead(Context::Values);
        if operator.is_none() && matches!(next, Token::EndOfString | Token::Comma) {
            operator = Some(Operator::Exists);
        }
        Ok((literal, operator))
    }

    fn parse_operator(&mut self) -> ReqResult<Operator> {
        let (token, literal) = self.consume(Context::KeyAndOperator);
        Ok(match token {
            Token::In => Operator::In,
            Token::NotIn => Operator::NotIn,
            Token::Equals => Operator::Equals,
            Token::DoubleEquals => Operator::DoubleEquals,
            Token::NotEquals => Operator::NotEquals,
            Token::GreaterThan => Operator::GreaterThan,
            Token::LessThan => Operator::LessThan,
            _ => {
                return Err(syntax(format!(
                    "found '{literal}', expected: {BINARY_OPERATORS}"
                )));
            }
        })
    }

    /// Reads `( [VALUE] { , [VALUE] } )`; every empty slot is the empty value.
    fn parse_values(&mut self) -> ReqResult<Vec<String>> {
        let (token, literal) = self.consume(Context::Values);
        if token != Token::OpenPar {
            return Err(syntax(format!("found '{literal}' expected: '('")));
        }
        let (token, literal) = self.lookahead(Context::Values);
        match token {
            Token::Identifier | Token::Comma => {
                let values = self.parse_identifiers_list()?;
                let (token, _) = self.consume(Context::Values);
                if token != Token::ClosedPar {
                    return Err(syntax(format!("found '{literal}', expected: ')'")));
                }
                Ok(values)
            }
            Token::ClosedPar => {
                self.consume(Context::Values);
                Ok(vec![String::new()])
            }
            _ => Err(syntax(format!(
                "found '{literal}', expected: ',', ')' or identifier"
            ))),
        }
    }

    /// Reads the inside of a value list, stopping before the closing parenthesis.
    fn parse_identifiers_list(&mut self) -> ReqResult<Vec<String>> {
        let mut values: Vec<String> = Vec::new();
        loop {
            let (token, literal) = self.consume(Context::Values);
            match token {
                Token::Identifier => {
                    values.push(literal.to_owned());
                    let (next, next_literal) = self.lookahead(Context::Values);
                    match next {
                        Token::Comma => continue,
                        Token::ClosedPar => return Ok(values),
                        _ => {
                            return Err(syntax(format!(
                                "found '{next_literal}', expected: ',' or ')'"
                            )));
                        }
                    }
                }
                Token::Comma => {
                    // A comma with nothing before it ("(,"), after it (",)") or between two
                    // commas (",,") stands for the empty value.
                    if values.is_empty() {
                        values.push(String::new());
                    }
                    match self.lookahead(Context::Values).0 {
                        Token::ClosedPar => {
                            values.push(String::new());
                            return Ok(values);
                        }
                        Token::Comma => values.push(String::new()),
                        _ => {}
                    }
                }
                _ => {
                    return Err(syntax(format!(
                        "found '{literal}', expected: ',', or identifier"
                    )));
                }
            }
        }
    }

    /// Reads the single value of an exact-match or Gt/Lt requirement; none means "".
    fn parse_exact_value(&mut self) -> ReqResult<String> {
        let (token, _) = self.lookahead(Context::Values);
        if matches!(token, Token::EndOfString | Token::Comma) {
            return Ok(String::new());
        }
        let (token, literal) = self.consume(Context::Values);
        if token == Token::Identifier {
            Ok(literal.to_owned())
        } else {
            Err(syntax(format!("found '{literal}', expected: identifier")))
        }
    }
}

/// Kubernetes collects parsed values into a sorted set before validating them.
fn build(key: &str, operator: Operator, mut values: Vec<String>) -> ReqResult<Requirement> {
    values.sort();
    values.dedup();
    Requirement::build(key.to_owned(), operator, values).map_err(RequirementError::Invalid)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(input: &str) -> Vec<(Token, &str)> {
        lex(input).iter().map(|i| (i.token, i.literal)).collect()
    }

    #[test]
    fn lexes_every_token() {
        use Token::*;
        let cases: &[(&str, &[(Token, &str)])] = &[
            ("", &[(EndOfString, "")]),
            (" \t\r\n", &[(EndOfString, "")]),
            ("x", &[(Identifier, "x"), (EndOfString, "")]),
            ("in", &[(In, "in"), (EndOfString, "")]),
            ("notin", &[(NotIn, "notin"), (EndOfString, "")]),
            ("inx", &[(Identifier, "inx"), (EndOfString, "")]),
            ("=", &[(Equals, "="), (EndOfString, "")]),
            ("==", &[(DoubleEquals, "=="), (EndOfString, "")]),
            ("!=", &[(NotEquals, "!="), (EndOfString, "")]),
            ("!", &[(DoesNotExist, "!"), (EndOfString, "")]),
            (">", &[(GreaterThan, ">"), (EndOfString, "")]),
            ("<", &[(LessThan, "<"), (EndOfString, "")]),
            ("(", &[(OpenPar, "("), (EndOfString, "")]),
            (")", &[(ClosedPar, ")"), (EndOfString, "")]),
            (",", &[(Comma, ","), (EndOfString, "")]),
            (
                "===",
                &[(DoubleEquals, "=="), (Equals, "="), (EndOfString, "")],
            ),
            (
                "!==",
                &[(NotEquals, "!="), (Equals, "="), (EndOfString, "")],
            ),
            (
                "!!",
                &[(DoesNotExist, "!"), (DoesNotExist, "!"), (EndOfString, "")],
            ),
            (
                "=>",
                &[(Equals, "="), (GreaterThan, ">"), (EndOfString, "")],
            ),
            (
                "key in(a,b)",
                &[
                    (Identifier, "key"),
                    (In, "in"),
                    (OpenPar, "("),
                    (Identifier, "a"),
                    (Comma, ","),
                    (Identifier, "b"),
                    (ClosedPar, ")"),
                    (EndOfString, ""),
                ],
            ),
            ("a\0=b", &[(Identifier, "a"), (EndOfString, "")]),
            (
                "ü=ö",
                &[
                    (Identifier, "ü"),
                    (Equals, "="),
                    (Identifier, "ö"),
                    (EndOfString, ""),
                ],
            ),
        ];
        for (input, want) in cases {
            assert_eq!(tokens(input), *want, "{input:?}");
        }
    }

    #[test]
    fn keywords_are_identifiers_where_values_are_expected() {
        let mut parser = Parser {
            items: lex("in notin"),
            position: 0,
        };
        assert_eq!(parser.lookahead(Context::KeyAndOperator).0, Token::In);
        assert_eq!(parser.consume(Context::Values).0, Token::Identifier);
        assert_eq!(parser.consume(Context::KeyAndOperator).0, Token::NotIn);
        assert_eq!(parser.consume(Context::Values).0, Token::EndOfString);
        // Reading past the end stays at the end instead of panicking.
        assert_eq!(parser.consume(Context::Values).0, Token::EndOfString);
    }

    #[test]
    fn operator_errors_list_binary_operators() {
        for (input, found) in [("!", "!"), ("exists", "exists"), ("(", "(")] {
            let mut parser = Parser {
                items: lex(input),
                position: 0,
            };
            assert_eq!(
                parser.parse_operator(),
                Err(syntax(format!(
                    "found '{found}', expected: in, notin, =, ==, !=, gt, lt"
                )))
            );
        }
    }
}
