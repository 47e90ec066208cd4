//! The revision rules every locally committing backend applies the same way.

use crate::{Result, Revision, StorageError};

/// The revision a read asked for: 0 means `current`; newer than `current` is a future revision,
/// older than `compacted` is gone.
pub fn resolve_read_revision(
    requested: Revision,
    current: Revision,
    compacted: Revision,
) -> Result<Revision> {
    match requested {
        0 => Ok(current),
        r if r > current => Err(StorageError::FutureRevision {
            requested: r,
            current,
        }),
        r if r < compacted => Err(StorageError::Compacted {
            requested: r,
            compacted,
        }),
        r => Ok(r),
    }
}

/// Whether history may be compacted at `requested`: it must be newer than the last compaction and
/// not newer than the current revision.
pub fn check_compaction(requested: Revision, current: Revision, compacted: Revision) -> Result<()> {
    if requested <= compacted {
        return Err(StorageError::Compacted {
            requested,
            compacted,
        });
    }
    if requested > current {
        return Err(StorageError::FutureRevision { requested, current });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_resolve_zero_and_reject_future_and_compacted_revisions() {
        assert_eq!(resolve_read_revision(0, 9, 3).unwrap(), 9);
        assert_eq!(resolve_read_revision(3, 9, 3).unwrap(), 3);
        assert!(matches!(
            resolve_read_revision(10, 9, 3),
            Err(StorageError::FutureRevision { .. })
        ));
        assert!(matches!(
            resolve_read_revision(2, 9, 3),
            Err(StorageError::Compacted { .. })
        ));
    }

    #[test]
    fn compaction_moves_forward_only_up_to_the_current_revision() {
        assert!(check_compaction(9, 9, 3).is_ok());
        assert!(matches!(
            check_compaction(3, 9, 3),
            Err(StorageError::Compacted { .. })
        ));
        assert!(matches!(
            check_compaction(10, 9, 3),
            Err(StorageError::FutureRevision { .. })
        ));
    }
}
