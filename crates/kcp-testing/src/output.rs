//! Reading what a finished child process printed, mostly kubectl: its stdout when it had to
//! succeed, its stderr when it had to fail, and JSON text parsed with a message that quotes it.

use std::process::Output;

/// The stdout of `output`, which must be a success (else the test fails, quoting stderr).
pub fn stdout(output: &Output) -> String {
    assert!(
        output.status.success(),
        "expected success, got {}: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The stderr of `output` without surrounding whitespace; `output` must be a failure (else the
/// test fails, quoting stdout).
pub fn stderr(output: &Output) -> String {
    assert!(
        !output.status.success(),
        "expected a failure, got success: {}",
        String::from_utf8_lossy(&output.stdout)
    );
    String::from_utf8_lossy(&output.stderr).trim().to_string()
}

/// `text` parsed as JSON; the test fails quoting the text if it is not JSON.
pub fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}
