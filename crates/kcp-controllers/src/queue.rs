//! A work queue for a controller task, in the shape of client-go's: a key is queued at most
//! once, a key being processed that is added again is processed once more afterwards, keys can
//! come back after a delay, and failing keys back off exponentially. It is owned by one task,
//! so it needs no locks.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::time::Duration;

use tokio::time::Instant;

/// The first retry delay of a failing key; it doubles per failure up to [`MAX_BACKOFF`].
const BASE_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

pub(crate) struct WorkQueue<K> {
    ready: VecDeque<K>,
    queued: HashSet<K>,
    active: HashSet<K>,
    /// Added while active: queued again when done.
    dirty: HashSet<K>,
    delayed: BTreeMap<(Instant, u64), K>,
    sequence: u64,
    failures: HashMap<K, u32>,
}

impl<K: Clone + Eq + Hash> WorkQueue<K> {
    pub(crate) fn new() -> Self {
        WorkQueue {
            ready: VecDeque::new(),
            queued: HashSet::new(),
            active: HashSet::new(),
            dirty: HashSet::new(),
            delayed: BTreeMap::new(),
            sequence: 0,
            failures: HashMap::new(),
        }
    }

    /// Queues `key` now unless it is already queued.
    pub(crate) fn add(&mut self, key: K) {
        if self.active.contains(&key) {
            self.dirty.insert(key);
        } else if self.queued.insert(key.clone()) {
            self.ready.push_back(key);
        }
    }

    /// Queues `key` after `delay`.
    pub(crate) fn add_after(&mut self, key: K, delay: Duration) {
        self.sequence += 1;
        self.delayed
            .insert((Instant::now() + delay, self.sequence), key);
    }

    /// Queues `key` after its backoff, which doubles with each call until [`Self::forget`].
    pub(crate) fn add_rate_limited(&mut self, key: K) {
        let failures = self.failures.entry(key.clone()).or_insert(0);
        let delay = BASE_BACKOFF
            .saturating_mul(1 << (*failures).min(16))
            .min(MAX_BACKOFF);
        *failures += 1;
        self.add_after(key, delay);
    }

    /// Resets the backoff of `key`.
    pub(crate) fn forget(&mut self, key: &K) {
        self.failures.remove(key);
    }

    /// The next key to process, if one is due; it stays active until [`Self::done`].
    pub(crate) fn next(&mut self) -> Option<K> {
        let now = Instant::now();
        while let Some(entry) = self.delayed.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let key = entry.remove();
            self.add(key);
        }
        let key = self.ready.pop_front()?;
        self.queued.remove(&key);
        self.active.insert(key.clone());
        Some(key)
    }

    /// Marks `key` processed; it is queued again if it was added meanwhile.
    pub(crate) fn done(&mut self, key: &K) {
        self.active.remove(key);
        if self.dirty.remove(key) {
            self.add(key.clone());
        }
    }

    /// When the earliest delayed key falls due.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.delayed.keys().next().map(|(at, _)| *at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn keys_are_deduplicated_delayed_and_requeued_when_dirty() {
        let mut queue = WorkQueue::new();
        queue.add("a");
        queue.add("a");
        queue.add("b");
        assert_eq!(queue.next(), Some("a"));
        queue.add("a"); // while active
        assert_eq!(queue.next(), Some("b"));
        assert_eq!(queue.next(), None);
        queue.done(&"a");
        assert_eq!(queue.next(), Some("a"));
        queue.done(&"a");

        queue.add_after("c", Duration::from_secs(1));
        assert_eq!(queue.next(), None);
        assert!(queue.next_deadline().is_some());
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(queue.next(), Some("c"));
    }

    #[tokio::test(start_paused = true)]
    async fn failures_back_off_exponentially_until_forgotten() {
        let mut queue = WorkQueue::new();
        let start = Instant::now();
        queue.add_rate_limited("k");
        queue.add_rate_limited("k");
        let deadlines: Vec<_> = queue.delayed.keys().map(|(at, _)| *at - start).collect();
        assert_eq!(deadlines, [BASE_BACKOFF, BASE_BACKOFF * 2]);
        queue.forget(&"k");
        assert!(queue.failures.is_empty());
    }
}
