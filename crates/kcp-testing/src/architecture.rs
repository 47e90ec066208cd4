//! The dependency rules of `ARCHITECTURE.md`, checked against every `crates/*/Cargo.toml`.
//!
//! [`ALLOWED`] says which workspace crates each crate may depend on; anything else is a new edge
//! between crates, which is an architecture change: update `ARCHITECTURE.md` and this table in
//! the same commit. Test targets (`[dev-dependencies]`) may also use the test tooling and the
//! in-memory store ([`TESTS_MAY_ALSO_USE`]). A crate the table does not know fails the test too.
//!
//! The manifests are read line by line (the `toml` crate is not among the locked dependencies):
//! section headers, and entries whose key, or `package = "..."`, names a workspace crate.

use std::collections::BTreeMap;
use std::path::Path;

/// Which workspace crates each crate's library and binaries may depend on.
const ALLOWED: &[(&str, &[&str])] = &[
    // Pure machinery: no other kcp crate.
    ("kcp-apimachinery", &[]),
    // The trait and the in-memory reference: no other kcp crate.
    ("kcp-storage", &[]),
    ("kcp-apis", &["kcp-apimachinery"]),
    // Backends depend only on the trait.
    ("kcp-storage-redb", &["kcp-storage"]),
    ("kcp-storage-etcd", &["kcp-storage"]),
    // Resource semantics over the trait; never a backend, never HTTP.
    (
        "kcp-registry",
        &["kcp-storage", "kcp-apimachinery", "kcp-apis"],
    ),
    // The only crate that knows HTTP; no storage crate.
    (
        "kcp-apiserver",
        &["kcp-registry", "kcp-apimachinery", "kcp-apis"],
    ),
    // In-process controllers call the registry (until a cluster-aware client exists).
    (
        "kcp-controllers",
        &["kcp-registry", "kcp-apis", "kcp-apimachinery"],
    ),
    // The composition root: the only server crate that names a backend.
    (
        "kcp-server",
        &[
            "kcp-apimachinery",
            "kcp-apiserver",
            "kcp-controllers",
            "kcp-registry",
            "kcp-storage",
            "kcp-storage-redb",
            "kcp-storage-etcd",
        ],
    ),
    // The kubectl plugins speak HTTP through kube-rs only (and check names with the pure
    // machinery); the multi-cluster layer's commands are its entry points.
    ("kcp-cli", &["kcp-apimachinery", "kcp-physical", "kcp-sdk"]),
    // The multi-cluster layer: a client of kcp and of physical clusters on the SDK.
    ("kcp-physical", &["kcp-apimachinery", "kcp-sdk"]),
    ("kcp", &["kcp-server", "kcp-cli"]),
    // The SDK for controllers across workspaces is a client: kube-rs, no kcp crate.
    ("kcp-sdk", &[]),
    // Tooling.
    (
        "kcp-fuzz",
        &[
            "kcp-apiserver",
            "kcp-registry",
            "kcp-storage",
            "kcp-apimachinery",
            "kcp-apis",
        ],
    ),
    (
        "kcp-bench",
        &[
            "kcp-storage",
            "kcp-storage-redb",
            "kcp-storage-etcd",
            "kcp-testing",
        ],
    ),
    ("kcp-testing", &["kcp-storage-etcd"]),
];

/// What any crate's test targets may use besides what the crate itself may: the test tooling,
/// the in-memory store (and the conformance suite) of `kcp-storage`, and the SDK (a client the
/// end-to-end tests drive the server with).
const TESTS_MAY_ALSO_USE: &[&str] = &["kcp-testing", "kcp-storage", "kcp-sdk"];

/// One dependency of a crate on another workspace crate, as its manifest declares it.
#[derive(Debug, PartialEq)]
struct Edge {
    from: String,
    to: String,
    /// The manifest section, e.g. `dependencies` or `dev-dependencies`.
    section: String,
}

impl Edge {
    fn for_tests_only(&self) -> bool {
        self.section.ends_with("dev-dependencies")
    }
}

/// The package name and the dependencies on crates named in `workspace` that `manifest` declares.
fn read_manifest(manifest: &str, workspace: &[String]) -> (String, Vec<Edge>) {
    let mut name = None;
    let mut section = String::new();
    let mut deps = Vec::new();
    for line in manifest.lines() {
        let line = line.split('#').next().unwrap_or_default().trim();
        if let Some(header) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = header.trim().to_string();
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim();
        if section == "package" && key == "name" {
            name = Some(value.trim().trim_matches('"').to_string());
        }
        // `[dependencies]`, `[dev-dependencies]`, `[build-dependencies]`, and their
        // `[target.'cfg(...)'.*]` forms.
        if !section.ends_with("dependencies") {
            continue;
        }
        // `kcp-x.workspace = true`, `kcp-x = { ... }`, or a rename with `package = "kcp-x"`.
        let mut dep = key.split('.').next().unwrap_or_default().trim().to_string();
        if let Some(renamed) = value.split("package").nth(1) {
            let renamed = renamed.trim_start_matches([' ', '=']);
            if let Some(package) = renamed.strip_prefix('"').and_then(|r| r.split('"').next()) {
                dep = package.to_string();
            }
        }
        if workspace.contains(&dep) {
            deps.push((dep, section.clone()));
        }
    }
    let name = name.expect("every manifest names its package");
    let edges = deps
        .into_iter()
        .map(|(to, section)| Edge {
            from: name.clone(),
            to,
            section,
        })
        .collect();
    (name, edges)
}

/// What is wrong with `edges` by the rules, one message per offending edge or unknown crate.
fn violations(crates: &[String], edges: &[Edge]) -> Vec<String> {
    let allowed: BTreeMap<&str, &[&str]> = ALLOWED.iter().copied().collect();
    let mut found = Vec::new();
    for name in crates {
        if !allowed.contains_key(name.as_str()) {
            found.push(format!(
                "crate {name} is not in the dependency table: add it to ARCHITECTURE.md and to \
                 ALLOWED in {}",
                file!()
            ));
        }
    }
    for edge in edges {
        let Some(may) = allowed.get(edge.from.as_str()) else {
            continue;
        };
        let ok = edge.to == edge.from
            || may.contains(&edge.to.as_str())
            || (edge.for_tests_only() && TESTS_MAY_ALSO_USE.contains(&edge.to.as_str()));
        if !ok {
            let mut permitted: Vec<&str> = may.to_vec();
            if edge.for_tests_only() {
                permitted.extend(TESTS_MAY_ALSO_USE);
            }
            let permitted = if permitted.is_empty() {
                "no other kcp crate".to_string()
            } else {
                permitted.join(", ")
            };
            found.push(format!(
                "{} -> {} (in [{}]) is not an allowed edge; {} may depend on: {permitted} \
                 (see ARCHITECTURE.md)",
                edge.from, edge.to, edge.section, edge.from
            ));
        }
    }
    found
}

#[test]
fn crates_depend_only_as_the_architecture_allows() {
    let crates_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut manifests = Vec::new();
    for entry in std::fs::read_dir(&crates_dir).unwrap() {
        let path = entry.unwrap().path().join("Cargo.toml");
        if path.is_file() {
            manifests.push(std::fs::read_to_string(&path).unwrap());
        }
    }
    // Package names first (directory names need not match), then their edges.
    let names: Vec<String> = manifests.iter().map(|m| read_manifest(m, &[]).0).collect();
    assert!(
        names.len() >= ALLOWED.len(),
        "found only {names:?} under {}",
        crates_dir.display()
    );
    let edges: Vec<Edge> = manifests
        .iter()
        .flat_map(|m| read_manifest(m, &names).1)
        .collect();
    assert!(
        edges
            .iter()
            .any(|e| e.from == "kcp" && e.to == "kcp-server"),
        "the manifest reader found no edges: {edges:?}"
    );
    let found = violations(&names, &edges);
    assert!(
        found.is_empty(),
        "crate dependencies break the rules of ARCHITECTURE.md:\n{}",
        found.join("\n")
    );
}

#[test]
fn offending_edges_are_named() {
    let workspace: Vec<String> = [
        "kcp-storage",
        "kcp-storage-redb",
        "kcp-apiserver",
        "kcp-new",
    ]
    .map(String::from)
    .to_vec();
    let (name, edges) = read_manifest(
        r#"
[package]
name = "kcp-storage-redb"   # the backend

[dependencies]
kcp-storage.workspace = true
http = { package = "kcp-apiserver", path = "../kcp-apiserver" }
redb.workspace = true

[dev-dependencies]
kcp-storage = { workspace = true, features = ["conformance"] }
"#,
        &workspace,
    );
    assert_eq!(name, "kcp-storage-redb");
    assert_eq!(
        edges
            .iter()
            .map(|e| (e.to.as_str(), e.section.as_str()))
            .collect::<Vec<_>>(),
        [
            ("kcp-storage", "dependencies"),
            ("kcp-apiserver", "dependencies"),
            ("kcp-storage", "dev-dependencies"),
        ]
    );
    let found = violations(&["kcp-storage-redb".into(), "kcp-new".into()], &edges);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(found[0].starts_with("crate kcp-new is not in the dependency table"));
    assert_eq!(
        found[1],
        "kcp-storage-redb -> kcp-apiserver (in [dependencies]) is not an allowed edge; \
         kcp-storage-redb may depend on: kcp-storage (see ARCHITECTURE.md)"
    );
    // The test tooling is for tests only.
    let tooling = Edge {
        from: "kcp-apimachinery".into(),
        to: "kcp-testing".into(),
        section: "dependencies".into(),
    };
    assert_eq!(
        violations(&[], &[tooling]),
        [
            "kcp-apimachinery -> kcp-testing (in [dependencies]) is not an allowed edge; \
          kcp-apimachinery may depend on: no other kcp crate (see ARCHITECTURE.md)"
        ]
    );
}
