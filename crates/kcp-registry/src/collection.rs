//! Deleting a collection (`deletecollection`), as kube-apiserver's generic store does: list what
//! the selectors match, delete each item with the same semantics as a single delete (finalizers
//! only set a deletionTimestamp), and answer the list as it was before the deletes.

use std::collections::BTreeMap;

use futures::StreamExt;
use kcp_apimachinery::object;
use serde_json::Value;

use crate::delete_options::DeleteOptions;
use crate::error::RegistryError;
use crate::list::{Filter, ListOptions};
use crate::store::{DeleteOutcome, Registry, Target};

/// How many deletes of one collection run at once.
const PARALLEL_DELETES: usize = 16;

/// What a collection delete did.
#[derive(Debug, Clone, PartialEq)]
pub struct DeletedCollection {
    /// The matching objects as listed before they were deleted.
    pub items: Vec<Value>,
    /// The revision of that list.
    pub resource_version: u64,
    /// Those finalizers still hold (they now carry a deletionTimestamp), and which finalizers.
    pub held: Held,
}

/// What finalizers hold of objects that were deleted: how many objects, and how many of them
/// each finalizer holds (what a terminating namespace's conditions report).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Held {
    pub objects: usize,
    pub finalizers: BTreeMap<String, usize>,
}

impl Held {
    /// Counts `object`, which finalizers hold.
    pub(crate) fn count(&mut self, object: &Value) {
        self.objects += 1;
        for finalizer in object["metadata"]["finalizers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            *self.finalizers.entry(finalizer.to_string()).or_default() += 1;
        }
    }

    /// Adds what `other` holds.
    pub fn add(&mut self, other: Held) {
        self.objects += other.objects;
        for (finalizer, count) in other.finalizers {
            *self.finalizers.entry(finalizer).or_default() += count;
        }
    }
}

impl Registry {
    /// Deletes every object of the collection `target` names that `filter` accepts, each with
    /// `options`.
    pub async fn delete_collection(
        &self,
        target: Target<'_>,
        filter: Option<Filter>,
        options: &DeleteOptions,
    ) -> Result<DeletedCollection, RegistryError> {
        let listed = self
            .list(
                target,
                ListOptions {
                    filter,
                    ..ListOptions::default()
                },
            )
            .await?;
        // The delete futures are built first: a stream mapping items through a borrowing closure
        // would not be `Send` for every lifetime, which an HTTP handler needs.
        let deletes: Vec<_> = listed
            .items
            .iter()
            .map(|item| {
                let name = object::str_at(item, &["metadata", "name"]);
                self.delete_with(target, name, options)
            })
            .collect();
        // Each outcome is counted and dropped as it comes: kept, they doubled what a pass over
        // a big collection held (1,000 deleting workspaces of an organization, a hundred
        // organizations at once).
        let mut outcomes = futures::stream::iter(deletes).buffer_unordered(PARALLEL_DELETES);
        let mut held = Held::default();
        while let Some(outcome) = outcomes.next().await {
            match outcome {
                Ok(DeleteOutcome::Pending(object)) => held.count(&object),
                Ok(DeleteOutcome::Deleted(_)) | Err(RegistryError::NotFound { .. }) => {}
                Err(other) => return Err(other),
            }
        }
        drop(outcomes);
        Ok(DeletedCollection {
            items: listed.items,
            resource_version: listed.resource_version,
            held,
        })
    }
}
