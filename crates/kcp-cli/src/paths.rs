//! Workspace path arithmetic, as the kcp plugin does it: paths are `:`-separated DNS labels
//! (`root:org:team`); a leading `:` makes a path absolute, `..` goes up, `.` stays, `/` is read
//! as `:`; server URLs carry the path after `/clusters/`.

use anyhow::{Context, bail};
use kcp_apimachinery::dns::is_dns1123_label;

/// A server URL split at `/clusters/`: the base URL and the workspace path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterUrl {
    pub base: String,
    pub path: String,
}

impl ClusterUrl {
    /// The URL of the workspace at `path` on the same server.
    pub fn with_path(&self, path: &str) -> String {
        format!("{}/clusters/{path}", self.base)
    }
}

/// Splits a server URL `https://host:port[/prefix]/clusters/<path>`; `None` when it does not
/// point at a workspace.
pub fn parse_cluster_url(server: &str) -> Option<ClusterUrl> {
    let (base, path) = server.split_once("/clusters/")?;
    let path = path.trim_end_matches('/');
    valid_path(path).then(|| ClusterUrl {
        base: base.to_string(),
        path: path.to_string(),
    })
}

/// Whether `path` is a workspace path (`system:` names included).
pub fn valid_path(path: &str) -> bool {
    let path = path.strip_prefix("system:").unwrap_or(path);
    !path.is_empty() && path.split(':').all(is_dns1123_label)
}

/// The parent of `path`, if it has one.
pub fn parent(path: &str) -> Option<&str> {
    path.rsplit_once(':').map(|(parent, _)| parent)
}

/// The last segment of `path`.
pub fn base_name(path: &str) -> &str {
    path.rsplit_once(':').map_or(path, |(_, name)| name)
}

/// The absolute path `name` names when the current workspace is `current`: absolute with a
/// leading `:`, else relative; `.` and `..` resolved. Errors as kcp's plugin words them.
pub fn resolve(current: &str, name: &str) -> anyhow::Result<String> {
    let joined = match name.strip_prefix(':') {
        Some(absolute) => absolute.to_string(),
        None if current.is_empty() => name.to_string(),
        None => format!("{current}:{name}"),
    };
    let mut segments: Vec<&str> = Vec::new();
    for part in joined.split(':') {
        match part {
            "." => {}
            ".." => {
                segments
                    .pop()
                    .context("cannot go up from root")
                    .map(|_| ())?;
            }
            other => segments.push(other),
        }
    }
    if segments.is_empty() {
        bail!("cannot go up from root");
    }
    let path = segments.join(":");
    if !valid_path(&path) {
        bail!("invalid workspace path: {name}");
    }
    Ok(path)
}

/// What the user typed, normalised as kcp's plugin does: a home directory the shell expanded
/// from `~` becomes `~` again, `/` becomes `:`, and a legacy absolute `root:...` gets its `:`
/// (with a note to print).
pub fn normalise(name: &str, home_dir: Option<&str>) -> (String, Option<&'static str>) {
    let mut name = name.to_string();
    if let Some(home) = home_dir.filter(|h| !h.is_empty())
        && let Some(rest) = name.strip_prefix(home)
    {
        name = format!("~{rest}");
    }
    let name = name.replace('/', ":");
    if name == "root" || name.starts_with("root:") {
        return (
            format!(":{name}"),
            Some(
                "Note: Using 'root:' to define an absolute path is no longer supported. Instead, use ':root' to specify an absolute path.",
            ),
        );
    }
    (name, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_urls_split_at_clusters() {
        assert_eq!(
            parse_cluster_url("https://h:6443/clusters/root:org"),
            Some(ClusterUrl {
                base: "https://h:6443".into(),
                path: "root:org".into()
            })
        );
        assert_eq!(parse_cluster_url("https://h:6443"), None);
        assert_eq!(parse_cluster_url("https://h:6443/clusters/*"), None);
        assert_eq!(
            parse_cluster_url("https://h/clusters/system:admin")
                .unwrap()
                .path,
            "system:admin"
        );
    }

    #[test]
    fn relative_absolute_and_dots() {
        assert_eq!(resolve("root:org", "team").unwrap(), "root:org:team");
        assert_eq!(resolve("root:org", "..").unwrap(), "root");
        assert_eq!(resolve("root:org:team", "..:..").unwrap(), "root");
        assert_eq!(resolve("root:org", ":root:b").unwrap(), "root:b");
        assert_eq!(resolve("root:org", "../other").ok(), None);
        assert_eq!(resolve("root:org", "..:other").unwrap(), "root:other");
        assert_eq!(resolve("root", ".").unwrap(), "root");
        assert_eq!(
            resolve("root", "..").unwrap_err().to_string(),
            "cannot go up from root"
        );
        assert_eq!(
            resolve("root", "Bad").unwrap_err().to_string(),
            "invalid workspace path: Bad"
        );
    }

    #[test]
    fn typed_names_are_normalised() {
        assert_eq!(normalise("a/b", None).0, "a:b");
        assert_eq!(normalise("/home/me", Some("/home/me")).0, "~");
        assert_eq!(normalise("/home/me/x", Some("/home/me")).0, "~:x");
        let (legacy, note) = normalise("root:org", None);
        assert_eq!(legacy, ":root:org");
        assert!(note.is_some());
        assert_eq!(base_name("root:org"), "org");
        assert_eq!(parent("root:org"), Some("root"));
        assert_eq!(parent("root"), None);
    }
}
