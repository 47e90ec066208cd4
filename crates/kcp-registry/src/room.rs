//! Room given back: a map, set or queue keyed by logical cluster or object grows with a burst
//! (a hundred thousand workspaces created or deleted) and, left alone, keeps the room of its
//! largest size forever, long after its entries are gone. Collections that can hold one entry
//! per workspace call [`GiveBackRoom::give_back_room`] after they remove entries: when one
//! holds less than a quarter of its room, it shrinks to twice its length (so that a collection
//! that shrinks and grows again does not shrink on every removal).

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::{BuildHasher, Hash};

/// Collections smaller than this keep their room: not worth the reallocation.
const KEPT_ROOM: usize = 1024;

/// Shrinks a collection holding less than a quarter of its room.
pub trait GiveBackRoom {
    fn give_back_room(&mut self);
}

fn sparse(len: usize, capacity: usize) -> bool {
    capacity > KEPT_ROOM && len < capacity / 4
}

impl<K: Eq + Hash, V, S: BuildHasher> GiveBackRoom for HashMap<K, V, S> {
    fn give_back_room(&mut self) {
        if sparse(self.len(), self.capacity()) {
            self.shrink_to(self.len() * 2);
        }
    }
}

impl<K: Eq + Hash, S: BuildHasher> GiveBackRoom for HashSet<K, S> {
    fn give_back_room(&mut self) {
        if sparse(self.len(), self.capacity()) {
            self.shrink_to(self.len() * 2);
        }
    }
}

impl<T> GiveBackRoom for VecDeque<T> {
    fn give_back_room(&mut self) {
        if sparse(self.len(), self.capacity()) {
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
        assert!(map.capacity() <= KEPT_ROOM, "map keeps {}", map.capacity());
        assert!(set.capacity() <= KEPT_ROOM, "set keeps {}", set.capacity());
        assert!(
            queue.capacity() <= KEPT_ROOM,
            "queue keeps {}",
            queue.capacity()
        );
        assert_eq!((map.len(), set.len(), queue.len()), (10, 10, 10));

        let mut small: HashMap<u32, u32> = (0..500).map(|i| (i, i)).collect();
        small.retain(|k, _| *k < 5);
        small.give_back_room();
        assert!(small.capacity() >= 500, "a small map shrank");
    }
}
