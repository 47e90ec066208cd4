//! CPU-heavy steps of a request (decoding a large body, patching a large object) run where
//! they cannot hold up the server's other requests: on the server's multi-threaded runtime the
//! worker thread hands its other tasks to another thread while the step runs
//! (`block_in_place`), so health checks and small requests are answered meanwhile; on a
//! current-thread runtime (unit tests) the step runs inline. Small steps run inline: for them
//! the handover costs more than the step (a small merge patch took 0.34-0.50 ms with it,
//! 0.24-0.28 ms without, one client sending them one after another).
//!
//! Must not know: what the step does.

use tokio::runtime::{Handle, RuntimeFlavor};

/// Bodies at least this large are decoded off the worker threads.
pub(crate) const LARGE_BODY: usize = 64 * 1024;

/// Objects holding at least this many values (fields, items and scalars: about 25 KiB of
/// JSON) are patched and applied off the worker threads.
pub(crate) const LARGE_OBJECT_VALUES: usize = 1024;

/// Runs `step` as [`heavy`] does when `large`, else right here.
pub(crate) fn heavy_if<T>(large: bool, step: impl FnOnce() -> T) -> T {
    match large {
        true => heavy(step),
        false => step(),
    }
}

/// Runs `step`, letting the runtime's other tasks move to another thread meanwhile.
pub(crate) fn heavy<T>(step: impl FnOnce() -> T) -> T {
    match Handle::try_current() {
        Ok(runtime) if runtime.runtime_flavor() == RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(step)
        }
        _ => step(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_inline_without_a_runtime() {
        assert_eq!(heavy(|| 1 + 1), 2);
    }

    #[tokio::test]
    async fn runs_inline_on_a_current_thread_runtime() {
        assert_eq!(heavy(|| 2 + 2), 4);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn other_tasks_go_on_while_a_heavy_step_runs() {
        use std::sync::mpsc::channel;
        use std::time::Duration;
        let (started, step_started) = channel();
        let (go, wait_for_go) = channel::<()>();
        // The only worker runs the heavy step, which waits for a task spawned after it began.
        let step = tokio::spawn(async move {
            heavy(|| {
                started.send(()).unwrap();
                wait_for_go.recv_timeout(Duration::from_secs(10)).is_ok()
            })
        });
        step_started.recv_timeout(Duration::from_secs(10)).unwrap();
        let other = tokio::spawn(async move { go.send(()).unwrap() });
        assert!(
            step.await.unwrap(),
            "the other task ran while the step blocked"
        );
        other.await.unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_small_step_keeps_its_thread_and_other_tasks_wait() {
        use std::sync::mpsc::channel;
        use std::time::Duration;
        let (ran, other_ran) = channel();
        let step = tokio::spawn(async move {
            // Spawned from the only worker, the other task waits for it: a step run inline
            // does not see it run.
            let other = tokio::spawn(async move { ran.send(()).unwrap() });
            let seen = heavy_if(false, || {
                other_ran.recv_timeout(Duration::from_millis(300)).is_ok()
            });
            other.await.unwrap();
            (
                seen,
                other_ran.recv_timeout(Duration::from_secs(10)).is_ok(),
            )
        });
        assert_eq!(
            step.await.unwrap(),
            (false, true),
            "the other task ran only after the step"
        );
    }
}
