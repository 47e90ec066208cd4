//! Compiled `pattern`s: each distinct pattern is compiled once per process and shared, since
//! compiling a regular expression costs far more than matching one. The cache holds at most
//! [`CAPACITY`] patterns and starts over when full.

use std::collections::HashMap;
use std::sync::{OnceLock, RwLock};

use regex::Regex;

const CAPACITY: usize = 4096;

type Cache = RwLock<HashMap<String, Option<Regex>>>;

/// The compiled `pattern`, or `None` if it is not a valid expression.
pub(crate) fn compiled(pattern: &str) -> Option<Regex> {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(Cache::default);
    if let Some(known) = cache.read().unwrap_or_else(|e| e.into_inner()).get(pattern) {
        return known.clone();
    }
    let regex = Regex::new(pattern).ok();
    let mut cache = cache.write().unwrap_or_else(|e| e.into_inner());
    if cache.len() >= CAPACITY {
        cache.clear();
    }
    cache.insert(pattern.to_string(), regex.clone());
    regex
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_compile_once_and_bad_ones_stay_bad() {
        assert!(compiled("^[a-z]+$").unwrap().is_match("abc"));
        assert!(compiled("^[a-z]+$").unwrap().is_match("xyz"));
        assert!(compiled("(").is_none());
        assert!(compiled("(").is_none());
    }
}
