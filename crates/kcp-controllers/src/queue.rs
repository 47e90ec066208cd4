//! A work queue for a controller task, in the shape of client-go's: a key is queued at most
//! once, a key being processed that is added again is processed once more afterwards, keys can
//! come back after a delay, and failing keys back off exponentially. Unlike client-go's, a key
//! that is backing off stays put until its backoff ends, however often it is added meanwhile
//! (its own failed reconcile's writes, other events, a fresh list): a reconcile that keeps
//! failing runs at the backoff's pace, never at the pace of the events it causes. It is owned
//! by one task, so it needs no locks.
//!
//! A key can also wait for events: [`WorkQueue::add_after_events`] queues it once that many
//! [`WorkQueue::nudge`]s came for it, or after a delay, whichever is first (a logical cluster
//! whose deletion waits for its 1,000 nested workspaces to go looks again when half of them
//! went, not at every one).
//!
//! Keys whose objects can likely finish go first ([`WorkQueue::nudge_first`]: a Workspace whose
//! LogicalCluster is gone): behind half a million keys queued by a mass deletion, a workspace
//! that only had its finalizer left waited minutes, and removals came in waves.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::time::Duration;

use kcp_registry::room::GiveBackRoom;

use crate::metrics::QueueMetrics;
use tokio::time::Instant;

/// The first retry delay of a failing key; it doubles per failure up to [`MAX_BACKOFF`].
const BASE_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

pub(crate) struct WorkQueue<K> {
    ready: VecDeque<K>,
    /// Keys served before `ready`. A key may be in both (moved ahead after it was queued):
    /// the first one taken is the key, the other is skipped (it is no longer in `queued`).
    first: VecDeque<K>,
    /// The keys in `first`: each at most once, however many events move it ahead while it
    /// waits (an organization's LogicalCluster, for each of its 1,000 workspaces that goes).
    ahead: HashSet<K>,
    queued: HashSet<K>,
    active: HashSet<K>,
    /// Added while active: queued again when done.
    dirty: HashSet<K>,
    delayed: BTreeMap<(Instant, u64), K>,
    /// Each delayed key's entry in `delayed`: one per key, the earliest asked for (a reconcile
    /// that asks to come back after a while does not add a timer per run).
    due: HashMap<K, (Instant, u64)>,
    sequence: u64,
    failures: HashMap<K, u32>,
    /// Keys waiting out a backoff, with the sequence number of their retry in `delayed`.
    backing_off: HashMap<K, u64>,
    /// Keys waiting for this many more nudges (and for their entry in `delayed`).
    awaiting: HashMap<K, usize>,
    metrics: Option<QueueMetrics>,
}

impl<K: Clone + Eq + Hash> WorkQueue<K> {
    pub(crate) fn new() -> Self {
        WorkQueue {
            ready: VecDeque::new(),
            first: VecDeque::new(),
            ahead: HashSet::new(),
            queued: HashSet::new(),
            active: HashSet::new(),
            dirty: HashSet::new(),
            delayed: BTreeMap::new(),
            due: HashMap::new(),
            sequence: 0,
            failures: HashMap::new(),
            backing_off: HashMap::new(),
            awaiting: HashMap::new(),
            metrics: None,
        }
    }

    /// The queue, reporting its depth, adds and retries to `metrics`.
    pub(crate) fn with_metrics(mut self, metrics: QueueMetrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    fn report_depth(&self) {
        if let Some(metrics) = &self.metrics {
            metrics.depth.set(self.queued.len() as i64);
        }
    }

    /// Queues `key` now unless it is already queued, or backing off (its retry comes when the
    /// backoff ends).
    pub(crate) fn add(&mut self, key: K) {
        self.queue(key, false);
    }

    /// [`Self::add`], ahead of the keys queued by `add` (moved ahead if queued already).
    fn add_first(&mut self, key: K) {
        self.queue(key, true);
    }

    fn queue(&mut self, key: K, first: bool) {
        if self.backing_off.contains_key(&key) {
            return;
        }
        if self.active.contains(&key) {
            self.dirty.insert(key);
            return;
        }
        let new = self.queued.insert(key.clone());
        if first {
            if self.ahead.insert(key.clone()) {
                self.first.push_back(key);
            }
        } else if new {
            self.ready.push_back(key);
        }
        if new {
            if let Some(metrics) = &self.metrics {
                metrics.adds.inc();
            }
            self.report_depth();
        }
    }

    /// Queues `key` after `delay`, unless it is due sooner already; answers the sequence
    /// number of its entry.
    pub(crate) fn add_after(&mut self, key: K, delay: Duration) -> u64 {
        let at = Instant::now() + delay;
        if let Some(&(due, sequence)) = self.due.get(&key) {
            if due <= at {
                return sequence;
            }
            self.delayed.remove(&(due, sequence));
        }
        self.sequence += 1;
        if let Some(backoff) = self.backing_off.get_mut(&key) {
            // Its retry comes sooner now: the backoff ends with it.
            *backoff = self.sequence;
        }
        self.delayed.insert((at, self.sequence), key.clone());
        self.due.insert(key, (at, self.sequence));
        self.sequence
    }

    /// Queues `key` once `events` nudges came for it, or after `at_most`, whichever is first.
    pub(crate) fn add_after_events(&mut self, key: K, events: usize, at_most: Duration) {
        if events == 0 {
            self.add(key);
            return;
        }
        self.add_after(key.clone(), at_most);
        self.awaiting.insert(key, events);
    }

    /// An event for `key`: it counts towards what the key awaits ([`Self::add_after_events`]);
    /// a key that awaits nothing is queued now.
    pub(crate) fn nudge(&mut self, key: K) {
        if self.counted(&key) {
            self.add(key);
        }
    }

    /// [`Self::nudge`] for an event after which the key can likely finish (what it waited
    /// for is gone): queued ahead of the others.
    pub(crate) fn nudge_first(&mut self, key: K) {
        if self.counted(&key) {
            self.add_first(key);
        }
    }

    /// Counts an event for `key`: whether the key awaits no more.
    fn counted(&mut self, key: &K) -> bool {
        if let Some(left) = self.awaiting.get_mut(key) {
            *left = left.saturating_sub(1);
            if *left > 0 {
                return false;
            }
            self.awaiting.remove(key);
            self.awaiting.give_back_room();
        }
        true
    }

    /// Queues `key` after its backoff, which doubles with each call until [`Self::forget`];
    /// until then, adding the key does nothing. Call it before [`Self::done`], so that an add
    /// while the failed reconcile ran does not retry at once either.
    pub(crate) fn add_rate_limited(&mut self, key: K) {
        let failures = self.failures.entry(key.clone()).or_insert(0);
        let delay = BASE_BACKOFF
            .saturating_mul(1 << (*failures).min(16))
            .min(MAX_BACKOFF);
        *failures = failures.saturating_add(1);
        if let Some(metrics) = &self.metrics {
            metrics.retries.inc();
        }
        self.dirty.remove(&key);
        self.dirty.give_back_room();
        let sequence = self.add_after(key.clone(), delay);
        self.backing_off.insert(key, sequence);
    }

    /// Resets the backoff of `key`.
    pub(crate) fn forget(&mut self, key: &K) {
        self.failures.remove(key);
        self.failures.give_back_room();
    }

    /// The next key to process, if one is due; it stays active until [`Self::done`].
    pub(crate) fn next(&mut self) -> Option<K> {
        let now = Instant::now();
        while let Some(entry) = self.delayed.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let sequence = entry.key().1;
            let key = entry.remove();
            self.due.remove(&key);
            self.due.give_back_room();
            if self.backing_off.get(&key) == Some(&sequence) {
                self.backing_off.remove(&key);
                self.backing_off.give_back_room();
            }
            self.add(key);
        }
        let key = loop {
            let key = match self.first.pop_front() {
                Some(key) => {
                    self.first.give_back_room();
                    self.ahead.remove(&key);
                    self.ahead.give_back_room();
                    key
                }
                None => {
                    let key = self.ready.pop_front()?;
                    self.ready.give_back_room();
                    key
                }
            };
            if self.queued.remove(&key) {
                break key;
            }
        };
        self.queued.give_back_room();
        self.report_depth();
        // Processed now: what it waited for is looked at now, and the reconcile says what it
        // waits for next.
        if self.awaiting.remove(&key).is_some() {
            self.awaiting.give_back_room();
        }
        if let Some(entry) = self.due.remove(&key) {
            self.delayed.remove(&entry);
            self.due.give_back_room();
        }
        self.active.insert(key.clone());
        Some(key)
    }

    /// Marks `key` processed; it is queued again if it was added meanwhile.
    pub(crate) fn done(&mut self, key: &K) {
        self.active.remove(key);
        self.active.give_back_room();
        if self.dirty.remove(key) {
            self.dirty.give_back_room();
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
    async fn a_key_awaiting_events_comes_back_after_as_many_nudges_or_its_delay() {
        let mut queue = WorkQueue::new();
        queue.add_after_events("k", 3, Duration::from_secs(10));
        queue.nudge("k");
        queue.nudge("k");
        assert_eq!(queue.next(), None);
        queue.nudge("k");
        assert_eq!(queue.next(), Some("k"));
        // Taken: its timer is gone, and it awaits nothing more.
        assert_eq!(queue.next_deadline(), None);
        queue.done(&"k");
        queue.nudge("k");
        assert_eq!(queue.next(), Some("k"));
        queue.done(&"k");

        // Too few nudges: the delay brings it back, once.
        queue.add_after_events("k", 3, Duration::from_secs(10));
        queue.nudge("k");
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(queue.next(), Some("k"));
        queue.done(&"k");
        assert_eq!(queue.next(), None);
        assert_eq!(queue.next_deadline(), None);
        // Nothing awaited any more: a nudge queues it at once.
        queue.nudge("k");
        assert_eq!(queue.next(), Some("k"));
    }

    #[tokio::test(start_paused = true)]
    async fn keys_nudged_first_go_ahead_once() {
        let mut queue = WorkQueue::new();
        queue.add("a");
        queue.add("b");
        queue.add("c");
        queue.nudge_first("c");
        queue.nudge_first("d");
        // Moved ahead by many events while it waits, a key is ahead once.
        queue.nudge_first("d");
        queue.nudge_first("d");
        assert_eq!(queue.first.len(), 2);
        let order: Vec<_> = std::iter::from_fn(|| queue.next()).collect();
        assert_eq!(order, ["c", "d", "a", "b"]);
        assert!(queue.ahead.is_empty());
        // Awaiting events, a first nudge counts like any other.
        queue.add_after_events("e", 2, Duration::from_secs(10));
        queue.nudge_first("e");
        assert_eq!(queue.next(), None);
        queue.nudge_first("e");
        assert_eq!(queue.next(), Some("e"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_taken_early_drops_its_timer() {
        let mut queue = WorkQueue::new();
        queue.add_after("k", Duration::from_secs(5));
        queue.add("k");
        assert_eq!(queue.next(), Some("k"));
        queue.done(&"k");
        tokio::time::advance(Duration::from_secs(5)).await;
        assert_eq!(queue.next(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn adding_a_key_that_backs_off_does_not_cut_its_backoff_short() {
        let mut queue = WorkQueue::new();
        queue.add("k");
        assert_eq!(queue.next(), Some("k"));
        queue.add("k"); // an event caused by the reconcile that is about to fail
        queue.add_rate_limited("k");
        queue.done(&"k");
        assert_eq!(queue.next(), None);
        queue.add("k");
        assert_eq!(queue.next(), None);
        tokio::time::advance(BASE_BACKOFF / 2).await;
        queue.add("k");
        assert_eq!(queue.next(), None);
        tokio::time::advance(BASE_BACKOFF / 2).await;
        assert_eq!(queue.next(), Some("k"));
        queue.add("k"); // while active again: once more afterwards
        queue.forget(&"k");
        queue.done(&"k");
        assert_eq!(queue.next(), Some("k"));
    }

    #[tokio::test(start_paused = true)]
    async fn failures_back_off_exponentially_until_forgotten() {
        let mut queue = WorkQueue::new();
        let start = Instant::now();
        queue.add_rate_limited("k");
        queue.add_rate_limited("k");
        // One entry per key, the earliest; every failure counts.
        let deadlines: Vec<_> = queue.delayed.keys().map(|(at, _)| *at - start).collect();
        assert_eq!(deadlines, [BASE_BACKOFF]);
        assert_eq!(queue.failures[&"k"], 2);
        tokio::time::advance(BASE_BACKOFF).await;
        assert_eq!(queue.next(), Some("k"));
        queue.add_rate_limited("k");
        queue.done(&"k");
        let now = Instant::now();
        let deadlines: Vec<_> = queue.delayed.keys().map(|(at, _)| *at - now).collect();
        assert_eq!(deadlines, [BASE_BACKOFF * 4]);
        queue.forget(&"k");
        assert!(queue.failures.is_empty());
    }
}
