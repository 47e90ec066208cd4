//! The etcd backend's integration tests against real etcd processes, built as one test binary
//! (one link step): the shared conformance suite, several endpoints, TLS with client
//! certificates, and watches across etcd crashes. Helpers the modules share are in `support`.

mod conformance;
mod endpoints;
mod support;
mod tls;
mod watch_reconnect;
