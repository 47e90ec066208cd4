//! `--token-auth-file`: kube-apiserver's static token file. A CSV file (as Go's `encoding/csv`
//! reads it: quoted fields with `""` for a quote, blank lines skipped, spaces kept) whose records
//! are `token,user name,uid[,"group1,group2"]`. Records with an empty token are skipped; a token
//! given twice names the user of its last record, as kube-apiserver.

use std::collections::HashMap;
use std::path::Path;

use anyhow::Context;
use kcp_apiserver::authn::User;

/// The tokens of the file at `path` and the users they name.
pub fn load(path: &Path) -> anyhow::Result<Vec<(String, User)>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("read the token file {}", path.display()))?;
    parse(&text, &path.display().to_string()).map_err(anyhow::Error::msg)
}

fn parse(text: &str, path: &str) -> Result<Vec<(String, User)>, String> {
    let mut users: Vec<(String, User)> = Vec::new();
    let mut positions: HashMap<String, usize> = HashMap::new();
    for (record_number, record) in records(text)?.into_iter().enumerate() {
        if record.len() < 3 {
            return Err(format!(
                "token file '{path}' must have at least 3 columns (token, user name, user uid), found {}",
                record.len()
            ));
        }
        let mut fields = record.into_iter();
        let token = fields.next().unwrap_or_default();
        let name = fields.next().unwrap_or_default();
        let uid = fields.next().unwrap_or_default();
        let groups = fields
            .next()
            .map(|groups| groups.split(',').map(str::to_string).collect())
            .unwrap_or_default();
        if token.is_empty() {
            tracing::warn!(
                "empty token has been found in token file '{path}', record number '{}'",
                record_number + 1
            );
            continue;
        }
        let user = User {
            name,
            uid,
            groups,
            ..User::default()
        };
        match positions.get(&token) {
            Some(&existing) => {
                tracing::warn!(
                    "duplicate token has been found in token file '{path}', record number '{}'",
                    record_number + 1
                );
                if let Some(entry) = users.get_mut(existing) {
                    entry.1 = user;
                }
            }
            None => {
                positions.insert(token.clone(), users.len());
                users.push((token, user));
            }
        }
    }
    Ok(users)
}

/// The records of a CSV text, as Go's `encoding/csv` reads them with a variable number of
/// fields per record.
fn records(text: &str) -> Result<Vec<Vec<String>>, String> {
    let text = text.replace("\r\n", "\n");
    let mut records = Vec::new();
    let mut chars = text.chars().peekable();
    let mut line = 1usize;
    while chars.peek().is_some() {
        // Blank lines are no records.
        if chars.peek() == Some(&'\n') {
            chars.next();
            line += 1;
            continue;
        }
        let record_line = line;
        let mut record = Vec::new();
        loop {
            let mut field = String::new();
            if chars.peek() == Some(&'"') {
                chars.next();
                loop {
                    match chars.next() {
                        Some('"') if chars.peek() == Some(&'"') => {
                            chars.next();
                            field.push('"');
                        }
                        Some('"') => break,
                        Some(c) => {
                            if c == '\n' {
                                line += 1;
                            }
                            field.push(c);
                        }
                        None => {
                            return Err(format!(
                                "parse error on line {record_line}: extraneous or missing \" in quoted-field"
                            ));
                        }
                    }
                }
                if !matches!(chars.peek(), None | Some(',') | Some('\n')) {
                    return Err(format!(
                        "parse error on line {line}: extraneous or missing \" in quoted-field"
                    ));
                }
            } else {
                while let Some(&c) = chars.peek() {
                    match c {
                        ',' | '\n' => break,
                        '"' => {
                            return Err(format!(
                                "parse error on line {line}: bare \" in non-quoted-field"
                            ));
                        }
                        _ => {
                            field.push(c);
                            chars.next();
                        }
                    }
                }
            }
            record.push(field);
            match chars.next() {
                Some(',') => continue,
                Some('\n') => {
                    line += 1;
                    break;
                }
                _ => break,
            }
        }
        records.push(record);
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(name: &str, uid: &str, groups: &[&str]) -> User {
        User {
            name: name.into(),
            uid: uid.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            ..User::default()
        }
    }

    #[test]
    fn records_name_users_and_groups() {
        let text = "t1,alice,1,\"dev,ops\"\n\nt2,bob,2\r\nt3,carol,3,solo\n";
        assert_eq!(
            parse(text, "f").unwrap(),
            vec![
                ("t1".to_string(), user("alice", "1", &["dev", "ops"])),
                ("t2".to_string(), user("bob", "2", &[])),
                ("t3".to_string(), user("carol", "3", &["solo"])),
            ]
        );
    }

    #[test]
    fn empty_tokens_are_skipped_and_the_last_duplicate_wins() {
        let text = ",nobody,0\nt,first,1\nt,second,2\n";
        assert_eq!(
            parse(text, "f").unwrap(),
            vec![("t".to_string(), user("second", "2", &[]))]
        );
    }

    #[test]
    fn quoting_is_csv() {
        assert_eq!(
            records("\"a\"\"b\",\"c,d\",\"line\nbreak\"\nx,,y").unwrap(),
            vec![
                vec!["a\"b".to_string(), "c,d".into(), "line\nbreak".into()],
                vec!["x".to_string(), "".into(), "y".into()],
            ]
        );
        // Spaces are part of the field, as in Go's reader.
        assert_eq!(
            records("a, b").unwrap(),
            vec![vec!["a".to_string(), " b".into()]]
        );
        assert!(records("a\"b,c").unwrap_err().contains("bare \""));
        assert!(records("\"ab\"c,d").unwrap_err().contains("extraneous"));
        assert!(records("\"open").unwrap_err().contains("extraneous"));
    }

    #[test]
    fn short_records_are_refused_with_kube_apiservers_message() {
        assert_eq!(
            parse("tok,user\n", "/etc/tokens.csv").unwrap_err(),
            "token file '/etc/tokens.csv' must have at least 3 columns (token, user name, user uid), found 2"
        );
    }

    #[test]
    fn a_missing_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let error = load(&dir.path().join("none.csv")).unwrap_err();
        assert!(format!("{error:#}").contains("token file"), "{error:#}");
    }
}
