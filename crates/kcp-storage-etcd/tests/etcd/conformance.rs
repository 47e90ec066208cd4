//! The shared storage conformance suite against a real etcd: every case starts its own etcd
//! process, so cases cannot see each other's keys or revisions.

use kcp_storage_etcd::EtcdStorage;
use kcp_testing::etcd::EtcdProcess;

kcp_storage::storage_conformance_tests!(async {
    let etcd = EtcdProcess::start().await;
    let store = EtcdStorage::connect(etcd.config()).await.unwrap();
    (store, etcd)
});
