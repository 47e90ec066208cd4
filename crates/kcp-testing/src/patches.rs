//! Hostile JSON patches (RFC 6902 documents, as text) that tests send to show the server refuses
//! them with a 4xx and stays up.

/// A JSON patch whose copies nest a value into its own deepest object: about 26,000 levels if
/// nothing stopped it (the patch is about 52 KB).
pub fn self_nesting_patch() -> String {
    let mut ops = vec![r#"{"op":"add","path":"/data2","value":{}}"#.to_string()];
    let mut depth = 1;
    while depth < 26_000 {
        ops.push(format!(
            r#"{{"op":"copy","from":"/data2","path":"/data2{}"}}"#,
            "/a".repeat(depth)
        ));
        depth *= 2;
    }
    format!("[{}]", ops.join(","))
}

/// A JSON patch of a few KB whose copies double one list again and again (2^40 elements if
/// nothing stopped it).
pub fn exponential_copy_patch() -> String {
    let mut ops = vec![r#"{"op":"add","path":"/d","value":["xxxxxxxxxxxxxxxx"]}"#.to_string()];
    for _ in 0..40 {
        ops.push(r#"{"op":"copy","from":"/d","path":"/e"}"#.into());
        ops.push(r#"{"op":"copy","from":"/e","path":"/d/-"}"#.into());
    }
    format!("[{}]", ops.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_patches_are_json_arrays_of_operations() {
        for patch in [self_nesting_patch(), exponential_copy_patch()] {
            let ops: Vec<serde_json::Value> = serde_json::from_str(&patch).unwrap();
            assert!(ops.iter().all(|op| op["op"].is_string()));
        }
        assert!(self_nesting_patch().len() > 50_000);
    }
}
