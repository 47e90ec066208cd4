//! Plain-text tables for benchmark results.

/// The header of a table of figures against a baseline of the same run and a target.
pub fn figures_header() -> Vec<String> {
    ["figure", "kcp-rs", "baseline in this run", "target"]
        .map(String::from)
        .to_vec()
}

/// Renders rows as aligned columns, the first row being the header.
pub fn render(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for (i, row) in rows.iter().enumerate() {
        let cells: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(c, s)| format!("{s:<w$}", w = widths[c]))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
        if i == 0 {
            let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
            out.push_str(&rule.join("  "));
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn columns_are_aligned_under_a_rule() {
        let rows = vec![
            vec!["a".to_string(), "bb".to_string()],
            vec!["ccc".to_string(), "d".to_string()],
        ];
        assert_eq!(super::render(&rows), "a    bb\n---  --\nccc  d\n");
    }
}
