//! Turns gRPC statuses from etcd (or from the transport below it) into storage errors.
//!
//! This module owns the classification only. It must not call etcd: filling in the revisions of
//! [`StorageError::Compacted`] and [`StorageError::FutureRevision`] needs more requests and is
//! done by the caller, which knows the requested revision.

use std::error::Error as _;

use kcp_storage::StorageError;
use tonic::{Code, Status};

/// What a failed etcd call means for the storage layer.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The requested revision is older than etcd's compacted revision.
    Compacted,
    /// The requested revision is newer than etcd's current revision.
    FutureRevision,
    /// Anything else, already typed.
    Other(StorageError),
}

/// Classifies a status. etcd reports both revision errors with code `OutOfRange`; the message
/// tells them apart ("mvcc: required revision has been compacted" / "... is a future revision").
pub(crate) fn classify(status: &Status) -> Failure {
    let message = status.message();
    if message.contains("required revision has been compacted") {
        return Failure::Compacted;
    }
    if message.contains("future revision") {
        return Failure::FutureRevision;
    }
    Failure::Other(to_storage_error(status))
}

/// The storage error for a status that is not a revision error.
pub(crate) fn to_storage_error(status: &Status) -> StorageError {
    let text = describe(status);
    if is_unavailable(status) {
        return StorageError::Unavailable(text);
    }
    match status.code() {
        Code::InvalidArgument | Code::FailedPrecondition | Code::OutOfRange => {
            StorageError::InvalidRequest(text)
        }
        _ => StorageError::Internal(text),
    }
}

/// True when retrying the call, possibly on another member, may succeed: the member or the
/// connection to it is unavailable, or the call did not finish in time.
pub(crate) fn is_unavailable(status: &Status) -> bool {
    match status.code() {
        Code::Unavailable | Code::DeadlineExceeded | Code::Cancelled | Code::Aborted => true,
        // A status that carries a source error was made on this side of the connection, from a
        // transport failure (reset, broken pipe, HTTP/2 protocol error), not sent by etcd.
        Code::Unknown | Code::Internal => status.source().is_some(),
        _ => false,
    }
}

/// True when the call failed while connecting, so the request never reached a server and can be
/// sent to another member even if it is not idempotent.
pub(crate) fn never_sent(status: &Status) -> bool {
    let mut source = status.source();
    while let Some(error) = source {
        if error.downcast_ref::<tonic::ConnectError>().is_some() {
            return true;
        }
        source = error.source();
    }
    false
}

/// The status message with the root cause of a transport failure, for error texts and logs.
pub(crate) fn describe(status: &Status) -> String {
    let mut text = format!("{:?}: {}", status.code(), status.message());
    let mut source = status.source();
    let mut depth = 0;
    while let Some(error) = source {
        let cause = error.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
        source = error.source();
        depth += 1;
        if depth > 8 {
            break;
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revision_errors_are_recognized_by_message() {
        let compacted =
            Status::out_of_range("etcdserver: mvcc: required revision has been compacted");
        assert!(matches!(classify(&compacted), Failure::Compacted));
        let future =
            Status::out_of_range("etcdserver: mvcc: required revision is a future revision");
        assert!(matches!(classify(&future), Failure::FutureRevision));
    }

    #[test]
    fn codes_map_to_storage_errors() {
        let duplicate = Status::invalid_argument("etcdserver: duplicate key given in txn request");
        assert!(matches!(
            classify(&duplicate),
            Failure::Other(StorageError::InvalidRequest(_))
        ));
        let no_leader = Status::unavailable("etcdserver: no leader");
        assert!(matches!(
            classify(&no_leader),
            Failure::Other(StorageError::Unavailable(_))
        ));
        let denied = Status::permission_denied("etcdserver: permission denied");
        assert!(matches!(
            classify(&denied),
            Failure::Other(StorageError::Internal(_))
        ));
        assert!(!never_sent(&no_leader));
    }
}
