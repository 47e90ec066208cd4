//! `/version`: what the server reports. kubectl 1.32's dispatcher picks its client build from
//! `minor`, so it stays "32" until we track a newer Kubernetes.

use serde_json::{Value, json};

/// The Kubernetes version whose API this server implements.
pub const KUBERNETES_MAJOR: &str = "1";
pub const KUBERNETES_MINOR: &str = "32";
pub const GIT_VERSION: &str = concat!("v1.32.0+kcp-rs-", env!("CARGO_PKG_VERSION"));

/// The `/version` document.
pub fn info() -> Value {
    json!({
        "major": KUBERNETES_MAJOR,
        "minor": KUBERNETES_MINOR,
        "gitVersion": GIT_VERSION,
        "gitCommit": "",
        "gitTreeState": "",
        "buildDate": "1970-01-01T00:00:00Z",
        "goVersion": "",
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, go_arch()),
    })
}

/// [`info`] as JSON in the order of Kubernetes' `version.Info` (it has no kind to be ordered
/// by), with the final newline kube-apiserver writes.
pub fn json() -> Vec<u8> {
    let info = info();
    let mut out = String::from("{");
    for (i, field) in FIELDS.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&format!("{}:{}", json!(field), info[field]));
    }
    out.push_str("}\n");
    out.into_bytes()
}

/// `version.Info`'s fields, in its order.
const FIELDS: [&str; 9] = [
    "major",
    "minor",
    "gitVersion",
    "gitCommit",
    "gitTreeState",
    "buildDate",
    "goVersion",
    "compiler",
    "platform",
];

/// The architecture in Go's spelling, which clients print.
fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}
