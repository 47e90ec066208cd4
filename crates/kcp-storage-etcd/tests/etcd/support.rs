//! Helpers the etcd tests share.

pub use kcp_storage::conformance::{assert_no_event, next_event};

/// `s` as the bytes of a key or value.
pub fn bytes(s: &str) -> bytes::Bytes {
    bytes::Bytes::copy_from_slice(s.as_bytes())
}
