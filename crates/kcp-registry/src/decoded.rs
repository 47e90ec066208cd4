//! Decoded objects the server reads over and over, kept by storage key and revision.
//!
//! Resolving `/clusters/root:org:team`, admitting a Workspace and scheduling it read the same
//! few objects for every request: the organization's Workspace and LogicalCluster, the
//! WorkspaceTypes. Decoding them (and presenting kcp's kinds through their schemas) was about a
//! tenth of the server's CPU while workspaces were created. A read still goes to storage for
//! the object's current bytes and revision, so nothing here can be stale: only the decoding of
//! a revision already decoded is skipped (a revision is never reused for other bytes of a key).
//!
//! Bounded by entry count in two generations: a lookup finds an entry in either, a new entry
//! goes into the current one, and when that is full the older generation is dropped. Objects
//! read once (a leaf workspace) pass through without pushing out the hot ones for long.
//!
//! And bounded by time: [`DecodedObjects::turn`], every [`TURN_EVERY`] (see
//! `Registry::start_cache_aging`), retires the current generation whatever its size, so an entry
//! nobody reads for two turns goes. Without it, the objects of workspaces deleted long ago (up
//! to two generations of decoded objects, megabytes) stayed until as many others were read.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

/// Entries in each generation.
const GENERATION: usize = 1024;

/// How often the current generation is retired even when not full.
pub(crate) const TURN_EVERY: Duration = Duration::from_secs(30);

#[derive(Default)]
pub(crate) struct DecodedObjects(Mutex<Generations>);

#[derive(Default)]
struct Generations {
    current: HashMap<Vec<u8>, (u64, Arc<Value>)>,
    previous: HashMap<Vec<u8>, (u64, Arc<Value>)>,
}

impl DecodedObjects {
    /// The object decoded from `key` at `revision`, if kept.
    pub(crate) fn get(&self, key: &[u8], revision: u64) -> Option<Arc<Value>> {
        let mut generations = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((kept, object)) = generations.current.get(key) {
            return (*kept == revision).then(|| Arc::clone(object));
        }
        let (kept, object) = generations.previous.remove(key)?;
        if kept != revision {
            return None;
        }
        generations.keep(key.to_vec(), revision, Arc::clone(&object));
        Some(object)
    }

    /// Keeps what `key` decoded to at `revision`.
    pub(crate) fn insert(&self, key: &[u8], revision: u64, object: Arc<Value>) {
        let mut generations = self.0.lock().unwrap_or_else(|e| e.into_inner());
        generations.keep(key.to_vec(), revision, object);
    }

    /// Retires the current generation and drops the one before it: what was not read since the
    /// last turn goes. An entry read again moves back into the current generation.
    pub(crate) fn turn(&self) {
        let mut generations = self.0.lock().unwrap_or_else(|e| e.into_inner());
        generations.previous = std::mem::take(&mut generations.current);
    }
}

impl Generations {
    fn keep(&mut self, key: Vec<u8>, revision: u64, object: Arc<Value>) {
        if self.current.len() >= GENERATION && !self.current.contains_key(&key) {
            self.previous = std::mem::take(&mut self.current);
        }
        self.current.insert(key, (revision, object));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_the_same_revision_hits() {
        let kept = DecodedObjects::default();
        kept.insert(b"k", 5, Arc::new(json!({"v": 5})));
        assert_eq!(*kept.get(b"k", 5).unwrap(), json!({"v": 5}));
        assert!(kept.get(b"k", 6).is_none());
        assert!(kept.get(b"other", 5).is_none());
        kept.insert(b"k", 6, Arc::new(json!({"v": 6})));
        assert_eq!(*kept.get(b"k", 6).unwrap(), json!({"v": 6}));
        assert!(kept.get(b"k", 5).is_none());
    }

    #[test]
    fn hot_entries_survive_a_stream_of_cold_ones() {
        let kept = DecodedObjects::default();
        kept.insert(b"hot", 1, Arc::new(json!(1)));
        for i in 0..10 * GENERATION {
            kept.insert(format!("cold-{i}").as_bytes(), 1, Arc::new(json!(i)));
            // Read as often as a hot object is: it moves back into the current generation.
            if i % (GENERATION / 2) == 0 {
                assert!(kept.get(b"hot", 1).is_some(), "lost after {i}");
            }
        }
        let generations = kept.0.lock().unwrap();
        assert!(generations.current.len() <= GENERATION);
        assert!(generations.previous.len() <= GENERATION);
    }

    #[test]
    fn entries_unread_for_two_turns_go_and_read_ones_stay() {
        let kept = DecodedObjects::default();
        kept.insert(b"read", 1, Arc::new(json!("read")));
        kept.insert(b"deleted", 1, Arc::new(json!("deleted")));
        kept.turn();
        assert!(kept.get(b"read", 1).is_some());
        kept.turn();
        assert!(kept.get(b"read", 1).is_some());
        assert!(kept.get(b"deleted", 1).is_none());
        let generations = kept.0.lock().unwrap();
        assert_eq!(generations.current.len() + generations.previous.len(), 1);
    }
}
