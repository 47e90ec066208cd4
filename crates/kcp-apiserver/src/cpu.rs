//! CPU-heavy steps of a request (decoding a large body, applying a patch) run where they cannot
//! hold up the server's other requests: on the server's multi-threaded runtime the worker
//! thread hands its other tasks to another thread while the step runs (`block_in_place`), so
//! health checks and small requests are answered meanwhile; on a current-thread runtime (unit
//! tests) the step runs inline.
//!
//! Must not know: what the step does.

use tokio::runtime::{Handle, RuntimeFlavor};

/// Bodies at least this large are decoded off the worker threads.
pub(crate) const LARGE_BODY: usize = 64 * 1024;

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
}
