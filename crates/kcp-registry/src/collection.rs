//! Deleting a collection (`deletecollection`), as kube-apiserver's generic store does: list what
//! the selectors match, delete each item with the same semantics as a single delete (finalizers
//! only set a deletionTimestamp), and answer the list as it was before the deletes; and
//! emptying a collection pass after pass, as the controllers that finalize a namespace or a
//! logical cluster do ([`Registry::delete_content`]).

use std::borrow::Cow;
use std::collections::BTreeMap;

use futures::StreamExt;
use kcp_apimachinery::object;
use serde_json::Value;

use crate::delete_options::DeleteOptions;
use crate::error::RegistryError;
use crate::kinds::{self, Deletion};
use crate::list::{Filter, ListOptions};
use crate::store::{DeleteOutcome, Registry, Target, decode};

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
        self.count_finalizers(
            object["metadata"]["finalizers"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str),
        );
    }

    /// Counts an object that `finalizers` hold.
    fn count_finalizers<'a>(&mut self, finalizers: impl Iterator<Item = &'a str>) {
        self.objects += 1;
        for finalizer in finalizers {
            match self.finalizers.get_mut(finalizer) {
                Some(count) => *count += 1,
                None => {
                    self.finalizers.insert(finalizer.to_string(), 1);
                }
            }
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
        let names = listed
            .items
            .iter()
            .map(|item| object::str_at(item, &["metadata", "name"]));
        let held = self.delete_each(target, names, options).await?;
        Ok(DeletedCollection {
            items: listed.items,
            resource_version: listed.resource_version,
            held,
        })
    }

    /// Deletes every object of the collection `target` names, each with `options` as
    /// [`Registry::delete_with`] does, and tells what finalizers still hold: what a controller
    /// emptying a namespace or a logical cluster asks, pass after pass, until nothing is left.
    /// Only objects the delete changes are read whole: one already being deleted whose
    /// finalizers the delete leaves as they are is counted from the few fields of its JSON
    /// that say so. (With [`Registry::delete_collection`], each pass of an organization's
    /// deletion decoded its 1,000 deleting workspaces and read each once more to delete it
    /// again; at a million workspaces those passes took most of the server.)
    pub async fn delete_content(
        &self,
        target: Target<'_>,
        options: &DeleteOptions,
    ) -> Result<Held, RegistryError> {
        if target.is_wildcard()
            || options.has_preconditions()
            || kinds::rules(target.resource).deletion() != Deletion::Plain
        {
            return Ok(self.delete_collection(target, None, options).await?.held);
        }
        let mut held = Held::default();
        let mut changed = Vec::new();
        self.each_page(&target.collection_prefix(), |kv| {
            match serde_json::from_slice::<Pending>(&kv.value) {
                Ok(Pending { metadata }) => {
                    let finalizers: Vec<&str> = metadata.finalizers.iter().map(|f| &**f).collect();
                    if metadata.deletion_timestamp.is_some()
                        && options.finalizers_after(&finalizers).is_none()
                    {
                        held.count_finalizers(finalizers.into_iter());
                    } else {
                        changed.push(metadata.name.into_owned());
                    }
                }
                // Fields of other types than these (an older server's object): read whole.
                Err(_) => {
                    let object = decode(kv)?;
                    changed.push(object::str_at(&object, &["metadata", "name"]).to_string());
                }
            }
            Ok(())
        })
        .await?;
        let deleted = self
            .delete_each(target, changed.iter().map(String::as_str), options)
            .await?;
        held.add(deleted);
        Ok(held)
    }

    /// Deletes the objects `names` of `target`, a few at once, and tells what finalizers
    /// still hold of them.
    async fn delete_each<'n>(
        &self,
        target: Target<'_>,
        names: impl Iterator<Item = &'n str>,
        options: &DeleteOptions,
    ) -> Result<Held, RegistryError> {
        // The delete futures are built first: a stream mapping items through a borrowing closure
        // would not be `Send` for every lifetime, which an HTTP handler needs.
        let deletes: Vec<_> = names
            .map(|name| self.delete_with(target, name, options))
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
        Ok(held)
    }
}

/// What [`Registry::delete_content`] reads of a stored object.
#[derive(serde::Deserialize)]
struct Pending<'a> {
    #[serde(borrow)]
    metadata: PendingMetadata<'a>,
}

#[derive(serde::Deserialize)]
struct PendingMetadata<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(default, rename = "deletionTimestamp")]
    deletion_timestamp: Option<serde::de::IgnoredAny>,
    #[serde(default, borrow)]
    finalizers: Vec<Cow<'a, str>>,
}
