//! The shared storage conformance suite on the embedded backend.

use kcp_storage_redb::RedbStorage;

kcp_storage::storage_conformance_tests!(async {
    let dir = tempfile::tempdir().unwrap();
    let store = RedbStorage::open(&dir.path().join("kcp.redb")).unwrap();
    (store, dir)
});
