//! The embedded backend's integration tests, built as one test binary (one link step): the
//! shared conformance suite, durability under SIGKILL, and what survives a close and reopen.

mod conformance;
mod crash;
mod reopen;
