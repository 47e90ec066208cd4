//! Reading what a child process printed, mostly kubectl: its stdout when it had to succeed, its
//! stderr when it had to fail, JSON text parsed with a message that quotes it, and [`Lines`]: the
//! lines of a process still running, as it prints them (a watch, a server's log).

use std::io::{BufRead, BufReader, Read};
use std::process::Output;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use crate::wait::DEADLINE;

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

/// The lines of a stream (a child's stdout or stderr), read on a thread of their own as they
/// come, so a test can wait for the next one or for one that says something.
pub struct Lines {
    received: Receiver<String>,
}

impl Lines {
    /// Starts reading `stream` line by line; the thread ends with the stream.
    pub fn of(stream: impl Read + Send + 'static) -> Lines {
        let (lines, received) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                if lines.send(line).is_err() {
                    break;
                }
            }
        });
        Lines { received }
    }

    /// The next line, if one comes within `timeout` (`None` too when the stream has ended).
    pub fn next_within(&self, timeout: Duration) -> Option<String> {
        self.received.recv_timeout(timeout).ok()
    }

    /// The next line; the test fails, naming `what` it should have been, if none comes within
    /// [`DEADLINE`] or the stream ends first.
    pub fn next(&self, what: &str) -> String {
        match self.received.recv_timeout(DEADLINE) {
            Ok(line) => line,
            Err(RecvTimeoutError::Timeout) => panic!("no line within {DEADLINE:?}: {what}"),
            Err(RecvTimeoutError::Disconnected) => panic!("the stream ended before {what}"),
        }
    }

    /// Skips lines until one contains `needle` and returns it; `None` if none does within
    /// `timeout` or before the stream ends.
    pub fn find_within(&self, timeout: Duration, needle: &str) -> Option<String> {
        let end = Instant::now() + timeout;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.received.recv_timeout(left) {
                Ok(line) if line.contains(needle) => return Some(line),
                Ok(_) => {}
                Err(_) => return None,
            }
        }
    }

    /// [`Lines::find_within`] [`DEADLINE`]; the test fails if no line contains `needle`.
    pub fn find(&self, needle: &str) -> String {
        self.find_within(DEADLINE, needle)
            .unwrap_or_else(|| panic!("no line containing {needle:?} within {DEADLINE:?}"))
    }

    /// Every line left, once the stream has ended (this waits for its end).
    pub fn rest(&self) -> Vec<String> {
        self.received.iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use std::process::{Command, Stdio};

    use super::*;

    #[test]
    fn lines_come_as_printed_and_can_be_searched() {
        let mut child = Command::new("sh")
            .args(["-c", "echo one; echo two; echo three; echo four"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = Lines::of(child.stdout.take().unwrap());
        assert_eq!(lines.next("the first line"), "one");
        assert_eq!(lines.find("hre"), "three");
        assert_eq!(lines.rest(), ["four"]);
        assert_eq!(lines.next_within(Duration::from_millis(10)), None);
        child.wait().unwrap();
    }

    #[test]
    fn outputs_are_read_as_success_or_failure_requires() {
        let ok = Command::new("sh")
            .args(["-c", "echo out"])
            .output()
            .unwrap();
        assert_eq!(stdout(&ok), "out\n");
        let failed = Command::new("sh")
            .args(["-c", "echo ' bad ' >&2; exit 3"])
            .output()
            .unwrap();
        assert_eq!(stderr(&failed), "bad");
        assert_eq!(json(r#"{"a": 1}"#)["a"], 1);
    }
}
