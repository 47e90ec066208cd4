//! Waiting for a condition by polling it.
//!
//! Tests that wait for something the system does in the background (a controller, a watch, a
//! server starting) poll for it until a deadline instead of sleeping for a fixed time: a passing
//! test goes on as soon as the condition holds, and a slow machine gets more time before the
//! test fails. The deadline is generous ([`DEADLINE`]) because it only matters when the test is
//! going to fail anyway.
//!
//! A check answers one of:
//! - `bool`: done when `true`;
//! - `Option<T>`: done with the value when `Some`;
//! - `Result<T, E>`: done with the value when `Ok`; the last `Err` is quoted if time runs out,
//!   which says what was seen instead.
//!
//! [`until`] blocks the calling thread between polls, for tests that are not async;
//! [`until_async`] sleeps on tokio's clock, so a test on paused time does not wait in real time.

use std::fmt::Display;
use std::time::Duration;

/// How long a wait may take before the test fails.
pub const DEADLINE: Duration = Duration::from_secs(60);
/// How long to sleep between two checks.
pub const POLL: Duration = Duration::from_millis(25);

/// What a check answers: done (with a value), or not yet (perhaps with what it saw).
pub trait Check {
    /// What the wait returns once the check is done.
    type Done;
    /// `Ok` when done, else a description of what was seen, if the check has one.
    fn outcome(self) -> Result<Self::Done, Option<String>>;
}

impl Check for bool {
    type Done = ();
    fn outcome(self) -> Result<(), Option<String>> {
        if self { Ok(()) } else { Err(None) }
    }
}

impl<T> Check for Option<T> {
    type Done = T;
    fn outcome(self) -> Result<T, Option<String>> {
        self.ok_or(None)
    }
}

impl<T, E: Display> Check for Result<T, E> {
    type Done = T;
    fn outcome(self) -> Result<T, Option<String>> {
        self.map_err(|seen| Some(seen.to_string()))
    }
}

/// Calls `check` until it is done and returns its value, sleeping [`POLL`] on this thread between
/// calls; panics, naming `what` and the last thing seen, once [`DEADLINE`] has passed.
pub fn until<C: Check>(what: &str, check: impl FnMut() -> C) -> C::Done {
    until_within(DEADLINE, what, check)
}

/// [`until`] with another deadline.
pub fn until_within<C: Check>(
    deadline: Duration,
    what: &str,
    mut check: impl FnMut() -> C,
) -> C::Done {
    let end = std::time::Instant::now() + deadline;
    loop {
        let seen = match check().outcome() {
            Ok(done) => return done,
            Err(seen) => seen,
        };
        if std::time::Instant::now() >= end {
            timed_out(deadline, what, seen);
        }
        std::thread::sleep(POLL);
    }
}

/// Calls `check` until it is done and returns its value, sleeping [`POLL`] on tokio's clock
/// between calls; panics, naming `what` and the last thing seen, once [`DEADLINE`] has passed on
/// that clock.
pub async fn until_async<C: Check>(what: &str, check: impl AsyncFnMut() -> C) -> C::Done {
    until_async_within(DEADLINE, what, check).await
}

/// [`until_async`] with another deadline.
pub async fn until_async_within<C: Check>(
    deadline: Duration,
    what: &str,
    mut check: impl AsyncFnMut() -> C,
) -> C::Done {
    let end = tokio::time::Instant::now() + deadline;
    loop {
        let seen = match check().await.outcome() {
            Ok(done) => return done,
            Err(seen) => seen,
        };
        if tokio::time::Instant::now() >= end {
            timed_out(deadline, what, seen);
        }
        tokio::time::sleep(POLL).await;
    }
}

fn timed_out(deadline: Duration, what: &str, seen: Option<String>) -> ! {
    match seen {
        Some(seen) => {
            panic!("timed out after {deadline:?} waiting until {what}; last seen: {seen}")
        }
        None => panic!("timed out after {deadline:?} waiting until {what}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn returns_as_soon_as_the_check_is_done() {
        let mut calls = 0;
        let value = until("the third call", || {
            calls += 1;
            (calls == 3).then_some(calls * 10)
        });
        assert_eq!((value, calls), (30, 3));
        until("true", || true);
        assert_eq!(until("ok", || Ok::<_, String>("done")), "done");
    }

    #[test]
    fn a_timeout_names_what_was_awaited_and_the_last_thing_seen() {
        let panic = std::panic::catch_unwind(|| {
            until_within(Duration::from_millis(60), "the answer", || {
                Err::<(), _>("still 41")
            })
        })
        .unwrap_err();
        let message = panic.downcast_ref::<String>().unwrap();
        assert!(message.contains("waiting until the answer"), "{message}");
        assert!(message.ends_with("last seen: still 41"), "{message}");
    }

    #[tokio::test(start_paused = true)]
    async fn async_waits_run_on_tokios_clock() {
        let started = tokio::time::Instant::now();
        let mut calls = 0;
        until_async("the fifth call", async || {
            calls += 1;
            calls == 5
        })
        .await;
        assert_eq!(started.elapsed(), POLL * 4);
    }
}
