//! The controller's work queue: each key at most once in line and at most once in progress (a
//! key added while in progress goes back in line when it is done), keys due later, and
//! failures retried after a delay that doubles per failure.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::time::Duration;

use tokio::time::Instant;

const FIRST_RETRY: Duration = Duration::from_millis(50);
const LONGEST_RETRY: Duration = Duration::from_secs(60);

/// Keys to reconcile (what [`crate::Controller`] runs on; controllers whose keys are not one
/// watched object's, such as one per group of objects, use it directly).
pub struct Queue<K: Ord> {
    line: VecDeque<K>,
    in_line: HashSet<K>,
    in_progress: HashSet<K>,
    /// Added while in progress.
    again: HashSet<K>,
    later: BTreeSet<(Instant, K)>,
    /// When each key in `later` is due: one time per key, the earliest asked for.
    due: HashMap<K, Instant>,
    failures: HashMap<K, u32>,
}

impl<K: Clone + Eq + Hash + Ord> Default for Queue<K> {
    fn default() -> Self {
        Queue::new()
    }
}

impl<K: Clone + Eq + Hash + Ord> Queue<K> {
    /// An empty queue.
    pub fn new() -> Self {
        Queue {
            line: VecDeque::new(),
            in_line: HashSet::new(),
            in_progress: HashSet::new(),
            again: HashSet::new(),
            later: BTreeSet::new(),
            due: HashMap::new(),
            failures: HashMap::new(),
        }
    }

    /// Queues `key` now (again once it is done, if it is in progress).
    pub fn add(&mut self, key: K) {
        if self.in_progress.contains(&key) {
            self.again.insert(key);
        } else if self.in_line.insert(key.clone()) {
            self.line.push_back(key);
        }
    }

    /// Queues `key` after `delay`, unless it is due sooner already.
    pub fn add_after(&mut self, key: K, delay: Duration) {
        let at = Instant::now() + delay;
        if let Some(due) = self.due.get(&key) {
            if *due <= at {
                return;
            }
            self.later.remove(&(*due, key.clone()));
        }
        self.due.insert(key.clone(), at);
        self.later.insert((at, key));
    }

    /// Retries `key` after a delay that doubles with each failure since it last succeeded.
    pub fn retry(&mut self, key: K) {
        let failures = self.failures.entry(key.clone()).or_insert(0);
        let delay = FIRST_RETRY
            .saturating_mul(1 << (*failures).min(20))
            .min(LONGEST_RETRY);
        *failures += 1;
        self.add_after(key, delay);
    }

    /// `key` succeeded (or its object is gone): its next failure retries quickly again.
    pub fn succeeded(&mut self, key: &K) {
        self.failures.remove(key);
    }

    /// The next key due, now in progress until [`Queue::done`].
    pub fn pop(&mut self) -> Option<K> {
        let now = Instant::now();
        while let Some((at, _)) = self.later.first() {
            if *at > now {
                break;
            }
            if let Some((_, key)) = self.later.pop_first() {
                self.due.remove(&key);
                self.add(key);
            }
        }
        let key = self.line.pop_front()?;
        self.in_line.remove(&key);
        self.in_progress.insert(key.clone());
        Some(key)
    }

    /// `key` is no longer in progress.
    pub fn done(&mut self, key: &K) {
        self.in_progress.remove(key);
        if self.again.remove(key) {
            self.add(key.clone());
        }
    }

    /// When the earliest key due later is due.
    pub fn next_due(&self) -> Option<Instant> {
        self.later.first().map(|(at, _)| *at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_key_is_in_progress_once_and_failures_back_off() {
        let mut queue = Queue::new();
        queue.add("a");
        queue.add("a");
        assert_eq!(queue.pop(), Some("a"));
        assert_eq!(queue.pop(), None);
        queue.add("a"); // while in progress: not handed out twice
        assert_eq!(queue.pop(), None);
        queue.done(&"a");
        assert_eq!(queue.pop(), Some("a"));
        queue.retry("a");
        queue.done(&"a");
        assert_eq!(queue.pop(), None);
        tokio::time::advance(FIRST_RETRY).await;
        assert_eq!(queue.pop(), Some("a"));
        queue.retry("a");
        queue.done(&"a");
        tokio::time::advance(FIRST_RETRY).await;
        assert_eq!(queue.pop(), None, "the second retry waits twice as long");
        tokio::time::advance(FIRST_RETRY).await;
        assert_eq!(queue.pop(), Some("a"));
        queue.done(&"a");
        // One time per key: the earliest.
        queue.add_after("b", Duration::from_secs(60));
        queue.add_after("b", Duration::from_secs(1));
        queue.add_after("b", Duration::from_secs(30));
        assert_eq!(queue.later.len(), 1);
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(queue.pop(), Some("b"));
    }
}
