//! Room given back: a map, set or queue keyed by logical cluster or object grows with a burst
//! (a hundred thousand workspaces created or deleted) and, left alone, keeps the room of its
//! largest size forever, long after its entries are gone. Collections that can hold one entry
//! per workspace call [`GiveBackRoom::give_back_room`] after they remove entries: when one
//! holds less than a quarter of its room, it shrinks to twice its length (so that a collection
//! that shrinks and grows again does not shrink on every removal). Room is counted in bytes: a
//! controller's queue keyed by (logical cluster, namespace, name) holds about 80 bytes a key,
//! so a room of a thousand keys is worth giving back where one of a thousand numbers is not.
//! An emptied collection keeps no more than [`KEPT_WHEN_EMPTY_BYTES`]: a controller's queue is
//! empty between bursts, and the table it kept from the last one (5-20 KiB) held the allocator's
//! page it sat in (64 KiB, or 512 KiB for blocks over 10 KiB) long after the burst's other
//! blocks there were freed.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::{BuildHasher, Hash};
use std::mem::size_of;

/// Collections whose room takes at most this many bytes keep it: not worth the reallocation.
const KEPT_BYTES: usize = 16 * 1024;

/// An empty collection keeps its room up to this many bytes (a few keys' worth), so that one
/// taking a key now and then does not allocate its table again every time.
const KEPT_WHEN_EMPTY_BYTES: usize = 1024;

/// Shrinks a collection holding less than a quarter of its room, and frees an empty one's.
pub trait GiveBackRoom {
    fn give_back_room(&mut self);
}

/// Whether a collection of `len` entries in room for `capacity`, each taking `entry_bytes`,
/// should shrink.
fn sparse(len: usize, capacity: usize, entry_bytes: usize) -> bool {
    let room = capacity.saturating_mul(entry_bytes);
    match len {
        0 => room > KEPT_WHEN_EMPTY_BYTES,
        _ => room > KEPT_BYTES && len < capacity / 4,
    }
}

/// The bytes of room one entry of a hash table takes: the entry and its control byte.
const fn table_entry<T>() -> usize {
    size_of::<T>() + 1
}

impl<K: Eq + Hash, V, S: BuildHasher> GiveBackRoom for HashMap<K, V, S> {
    fn give_back_room(&mut self) {
        if sparse(self.len(), self.capacity(), table_entry::<(K, V)>()) {
            self.shrink_to(self.len() * 2);
        }
    }
}

impl<K: Eq + Hash, S: BuildHasher> GiveBackRoom for HashSet<K, S> {
    fn give_back_room(&mut self) {
        if sparse(self.len(), self.capacity(), table_entry::<K>()) {
            self.shrink_to(self.len() * 2);
        }
    }
}

impl<T> GiveBackRoom for VecDeque<T> {
    fn give_back_room(&mut self) {
        if sparse(self.len(), self.capacity(), size_of::<T>().max(1)) {
            self.shrink_to(self.len() * 2);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_collection_emptied_after_a_burst_gives_its_room_back_and_a_small_one_keeps_it() {
        let mut map: HashMap<u32, u32> = (0..100_000).map(|i| (i, i)).collect();
        let mut set: HashSet<u32> = (0..100_000).collect();
        let mut queue: VecDeque<u32> = (0..100_000).collect();
        for i in 0..99_990 {
            map.remove(&i);
            map.give_back_room();
            set.remove(&i);
            set.give_back_room();
            queue.pop_front();
            queue.give_back_room();
        }
        assert!(
            map.capacity() * table_entry::<(u32, u32)>() <= KEPT_BYTES,
            "map keeps {}",
            map.capacity()
        );
        assert!(
            set.capacity() * table_entry::<u32>() <= KEPT_BYTES,
            "set keeps {}",
            set.capacity()
        );
        assert!(
            queue.capacity() * size_of::<u32>() <= KEPT_BYTES,
            "queue keeps {}",
            queue.capacity()
        );
        assert_eq!((map.len(), set.len(), queue.len()), (10, 10, 10));

        let mut small: HashMap<u32, u32> = (0..500).map(|i| (i, i)).collect();
        small.retain(|k, _| *k < 5);
        small.give_back_room();
        assert!(small.capacity() >= 500, "a small map shrank");
    }

    /// A key as large as a controller's (logical cluster, namespace, name).
    type Key = [u8; 80];

    fn key(i: u32) -> Key {
        let mut key = [0; 80];
        key[..4].copy_from_slice(&i.to_le_bytes());
        key
    }

    #[test]
    fn an_emptied_collection_frees_its_room_unless_it_is_a_few_keys_worth() {
        // A controller queue's set after a burst of a hundred keys: about 10 KiB of table.
        let mut set: HashSet<Key> = (0..100).map(key).collect();
        let mut map: HashMap<u32, Key> = (0..100).map(|i| (i, key(i))).collect();
        let mut queue: VecDeque<Key> = (0..100).map(key).collect();
        for i in 0..100 {
            set.remove(&key(i));
            set.give_back_room();
            map.remove(&i);
            map.give_back_room();
            queue.pop_front();
            queue.give_back_room();
        }
        assert_eq!(
            (set.capacity(), map.capacity(), queue.capacity()),
            (0, 0, 0)
        );

        let mut few: HashSet<u32> = (0..3).collect();
        let room = few.capacity();
        few.clear();
        few.give_back_room();
        assert_eq!(
            few.capacity(),
            room,
            "an empty set of a few numbers gave its room back"
        );
    }

    #[test]
    fn a_thousand_large_keys_are_worth_giving_back() {
        // A room of a thousand controller keys is about 80 KiB.
        let mut set: HashSet<Key> = (0..1_000).map(key).collect();
        for i in 0..1_000 {
            set.remove(&key(i));
            set.give_back_room();
        }
        assert!(
            set.capacity() * table_entry::<Key>() <= KEPT_BYTES,
            "an emptied set of large keys keeps {} of them",
            set.capacity()
        );
    }
}
