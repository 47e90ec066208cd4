//! What the plugins print, in kcp's words.

use crate::paths::parse_cluster_url;

/// `(path, name)` of a workspace type, printed `path:name` (or `name` without a path).
pub fn type_name(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}:{name}")
    }
}

/// The line saying where the kubeconfig now points (nothing for `--short` outside a workspace).
pub fn current_workspace(server: &str, short: bool, ty: Option<(&str, &str)>) -> Option<String> {
    let Some(url) = parse_cluster_url(server) else {
        return (!short).then(|| format!("Current workspace is the URL {server:?}."));
    };
    if short {
        return Some(url.path);
    }
    let mut message = format!("Current workspace is '{}'", url.path);
    if let Some((path, name)) = ty {
        message.push_str(&format!(" (type {})", type_name(path, name)));
    }
    Some(message + ".")
}

/// A tree as kcp's plugin draws it (the `treeprint` layout).
pub struct Tree {
    pub label: String,
    pub children: Vec<Tree>,
}

impl Tree {
    /// The drawing: `.` and then this tree as its one branch.
    pub fn render(&self) -> String {
        let mut out = String::from(".\n");
        self.render_into(&mut out, "", true);
        out
    }

    fn render_into(&self, out: &mut String, indent: &str, last: bool) {
        out.push_str(indent);
        out.push_str(if last { "└── " } else { "├── " });
        out.push_str(&self.label);
        out.push('\n');
        let deeper = format!("{indent}{}", if last { "    " } else { "│   " });
        for (i, child) in self.children.iter().enumerate() {
            child.render_into(out, &deeper, i + 1 == self.children.len());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn current_workspace_lines() {
        assert_eq!(
            current_workspace(
                "https://h/clusters/root:a",
                false,
                Some(("root", "organization"))
            )
            .unwrap(),
            "Current workspace is 'root:a' (type root:organization)."
        );
        assert_eq!(
            current_workspace("https://h/clusters/root", false, Some(("", "root"))).unwrap(),
            "Current workspace is 'root' (type root)."
        );
        assert_eq!(
            current_workspace("https://h/clusters/root:a", true, None).unwrap(),
            "root:a"
        );
        assert_eq!(
            current_workspace("https://h", false, None).unwrap(),
            "Current workspace is the URL \"https://h\"."
        );
        assert_eq!(current_workspace("https://h", true, None), None);
    }

    #[test]
    fn trees_draw_like_treeprint() {
        let leaf = |label: &str| Tree {
            label: label.into(),
            children: vec![],
        };
        let tree = Tree {
            label: "root".into(),
            children: vec![
                Tree {
                    label: "a".into(),
                    children: vec![leaf("x")],
                },
                leaf("b"),
            ],
        };
        assert_eq!(
            tree.render(),
            ".\n└── root\n    ├── a\n    │   └── x\n    └── b\n"
        );
    }
}
