//! The Python Kubernetes client (the `kubernetes` package, in the virtual environment the test
//! command makes under `target/python-client`) against kcp: `tests/python/client_basics.py`
//! checks typed CRUD, patches, conflicts, a watch and custom resources;
//! `tests/python/server_side_apply.py` the dynamic client's `server_side_apply`. Each prints
//! `ok`.

use std::path::PathBuf;
use std::process::Command;

use super::support::Kcp;

/// The Python with the client installed: `KCP_TEST_PYTHON` (set by `scripts/test`), else the
/// environment `scripts/test` makes. No Python client is a failure, not a skip.
fn python() -> PathBuf {
    if let Ok(path) = std::env::var("KCP_TEST_PYTHON") {
        return PathBuf::from(path);
    }
    let made =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/python-client/bin/python");
    assert!(
        made.exists(),
        "the Python Kubernetes client is not installed: run scripts/test (which installs it \
         into target/python-client) or set KCP_TEST_PYTHON"
    );
    made
}

/// Runs `tests/python/<script>` against a workspace of the shared server; it must print `ok`.
fn run(workspace: &str, script: &str) {
    let kcp = Kcp::shared(workspace);
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/python")
        .join(script);
    let output = Command::new(python())
        .arg(&script)
        .arg(kcp.kubeconfig())
        .output()
        .expect("run the Python client");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.trim() == "ok",
        "stdout: {stdout}\nstderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn the_python_client_creates_reads_patches_watches_and_serves_custom_resources() {
    run("python-client", "client_basics.py");
}

#[test]
fn the_python_client_applies_server_side() {
    run("python-ssa", "server_side_apply.py");
}
