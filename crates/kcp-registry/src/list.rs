//! Lists: pages of one storage snapshot, with Kubernetes continue tokens.
//!
//! A continue token carries the snapshot revision and the key to resume after (relative to the
//! collection prefix, so a token cannot reach outside its collection). A token whose revision was
//! compacted away answers 410 Expired, and the Status offers a token for the rest of the list at
//! the latest revision (`"rv": -1`), an inconsistent list, as kube-apiserver does. The token of
//! a page that reported `remainingItemCount` also carries that count, so the next page of the
//! same snapshot subtracts its own items instead of counting the rest of the collection again:
//! reading a collection page by page (as client-go's reflectors do) counts it once, not once
//! per page.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use kcp_storage::{KeyRange, RangeRequest, StorageError, prefix_end};
use serde_json::{Value, json};

use crate::custom::convert::Presentation;
use crate::error::RegistryError;
use crate::store::{Registry, Target, decode, json_answer, listed_json_answer};

/// What each JSON answer [`Registry::list_json`] gives stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonAnswer {
    /// An item of a list: a built-in kind's without its `kind` and `apiVersion` ([`as_list_item`]).
    ListItem,
    /// The object itself, as a GET or a watch event answers it.
    Object,
}

/// `object` as a list of `resource` holds it: an object of a built-in kind without its `kind`
/// and `apiVersion`, as Kubernetes writes the items of its typed lists (the list's own say
/// them); custom resources, unstructured there, keep theirs.
pub fn as_list_item(resource: &kcp_apis::builtin::Resource, object: &mut Value) {
    if resource.custom().is_none()
        && let Value::Object(fields) = object
    {
        fields.remove("kind");
        fields.remove("apiVersion");
    }
}

/// Decides whether an object belongs in a list (label and field selectors).
pub type Filter = Box<dyn Fn(&Value) -> bool + Send + Sync>;

/// How to list.
#[derive(Default)]
pub struct ListOptions {
    /// At most this many items (0: all).
    pub limit: usize,
    /// The `continue` value of the previous page.
    pub continue_token: Option<String>,
    /// Only objects it accepts; with a filter, `remainingItemCount` is not reported.
    pub filter: Option<Filter>,
    /// Read the snapshot at exactly this revision (0: the latest). Ignored with a continue
    /// token, which carries its own.
    pub revision: u64,
    /// Do not count the items after the page (no `remainingItemCount`): for readers that go
    /// through a whole collection page by page, which would otherwise count the rest of it on
    /// every page.
    pub skip_count: bool,
}

/// One page of a list: objects, or their JSON answers ([`Registry::list_json`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ListResult<T = Value> {
    pub items: Vec<T>,
    /// The snapshot revision every page of this list reads.
    pub resource_version: u64,
    pub continue_token: Option<String>,
    /// Items after this page, when known.
    pub remaining_item_count: Option<u64>,
}

fn invalid_token() -> RegistryError {
    RegistryError::BadRequest("continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)".into())
}

/// Where a continue token resumes.
#[derive(Debug, PartialEq)]
struct Resume {
    /// The snapshot's revision; 0 for the latest (a token offered past compaction).
    revision: u64,
    /// The last key of the page before, relative to the collection prefix.
    after: Vec<u8>,
    /// The items after the page before, if it counted them.
    remaining: Option<u64>,
}

/// A token resuming after `after` in the snapshot at `revision`; revision 0 (the latest) is
/// written `-1`, as kube-apiserver writes it.
fn encode_token(revision: u64, after: &[u8], remaining: Option<u64>) -> String {
    let rv = match revision {
        0 => json!(-1),
        revision => json!(revision),
    };
    let mut token =
        json!({"v": "meta.k8s.io/v1", "rv": rv, "start": String::from_utf8_lossy(after)});
    if let Some(remaining) = remaining {
        token["remaining"] = json!(remaining);
    }
    URL_SAFE_NO_PAD.encode(token.to_string())
}

fn decode_token(token: &str) -> Result<Resume, RegistryError> {
    let bytes = URL_SAFE_NO_PAD
        .decode(token.trim_end_matches('='))
        .map_err(|_| invalid_token())?;
    let value: Value = serde_json::from_slice(&bytes).map_err(|_| invalid_token())?;
    let revision = match value["rv"].as_i64() {
        Some(rv) if rv > 0 => rv.unsigned_abs(),
        Some(rv) if rv < 0 => 0,
        _ => return Err(invalid_token()),
    };
    let start = value["start"].as_str().ok_or_else(invalid_token)?;
    Ok(Resume {
        revision,
        after: start.as_bytes().to_vec(),
        remaining: value["remaining"].as_u64(),
    })
}

impl Registry {
    /// How many objects of `resource` are stored, in every logical cluster.
    pub async fn count_all(
        &self,
        resource: &kcp_apis::builtin::Resource,
    ) -> Result<u64, RegistryError> {
        let prefix = crate::store::resource_keys(resource).all_clusters();
        let page = self
            .storage()
            .range(RangeRequest::prefix(prefix).with_limit(1))
            .await?;
        Ok(page.count)
    }

    /// The latest revision of the store.
    pub async fn current_revision(&self) -> Result<u64, RegistryError> {
        Ok(self.storage().current_revision().await?)
    }

    /// One page of the collection `target` names.
    pub async fn list(
        &self,
        target: Target<'_>,
        mut options: ListOptions,
    ) -> Result<ListResult, RegistryError> {
        let filter = target.narrow(options.filter.take());
        let counted = filter.is_none() && !options.skip_count;
        let page = self
            .read_pages(&target, &options, counted, |kv| {
                let object = decode(kv)?;
                Ok(filter
                    .as_ref()
                    .is_none_or(|accept| accept(&object))
                    .then_some(object))
            })
            .await?;
        Ok(ListResult {
            items: self.present_listed(&target, page.items).await?,
            ..page
        })
    }

    /// The part of every object of the collection `target` names that `T` describes, decoded
    /// from the stored bytes with the rest skipped (`Registry::get_part` for a collection):
    /// for a controller that compares one field of every object with its own, where decoding
    /// them whole would cost their size many times over (CRDs, whose schemas are megabytes).
    /// An object whose fields do not have `T`'s types is an error.
    pub async fn list_parts<T: serde::de::DeserializeOwned>(
        &self,
        target: Target<'_>,
    ) -> Result<Vec<T>, RegistryError> {
        let page = self
            .read_pages(&target, &ListOptions::default(), false, |kv| {
                crate::summary::decode_part(&kv.value).map(Some)
            })
            .await?;
        Ok(page.items)
    }

    /// [`Registry::list`] with each object as its JSON answer, the bytes a GET of it answers
    /// ([`Registry::get_json`]), made from the stored bytes without decoding them where they
    /// allow ([`Presentation`]: custom resources, kcp's system kinds among them, where
    /// presenting them would change nothing); the others are decoded and presented together.
    /// `None` for collections whose objects are decoded to be listed: lists with a filter (or
    /// a namespace of every cluster) and wildcard lists of custom resources. `answers` says
    /// whether they are a list's items or the objects (a watch's initial events).
    pub async fn list_json(
        &self,
        target: Target<'_>,
        options: ListOptions,
        answers: JsonAnswer,
    ) -> Result<Option<ListResult<Vec<u8>>>, RegistryError> {
        if target.as_stored() || options.filter.is_some() || target.narrow(None).is_some() {
            return Ok(None);
        }
        let presentation = Presentation::of(target.resource);
        let counted = !options.skip_count;
        let order = target.key_order();
        // Items of built-in kinds are written without their kind, as Kubernetes lists them.
        let item = answers == JsonAnswer::ListItem;
        let built_in = item && target.resource.custom().is_none();
        let page = self
            .read_pages(&target, &options, counted, |kv| {
                let spliced = presentation
                    .as_stored(&kv.value)
                    .then(|| match built_in {
                        true => listed_json_answer(kv),
                        false => json_answer(kv, order),
                    })
                    .flatten();
                Ok(Some(match spliced {
                    Some(bytes) => Ok(bytes),
                    None => Err(decode(kv)?),
                }))
            })
            .await?;
        // The objects that read differently from how they are stored, presented together
        // (one conversion call for the page) and put back in their places.
        let mut items = page.items;
        let mut decoded = Vec::new();
        for item in &mut items {
            if let Err(object) = item {
                decoded.push(std::mem::take(object));
            }
        }
        if !decoded.is_empty() {
            let mut presented = self
                .present_all(target.resource, decoded)
                .await?
                .into_iter();
            for item in &mut items {
                if let Err(object) = item {
                    *object = presented.next().unwrap_or_default();
                }
            }
        }
        let items = items
            .into_iter()
            .map(|item| {
                item.unwrap_or_else(|mut object| match built_in {
                    true => {
                        as_list_item(target.resource, &mut object);
                        let resource = target.resource;
                        kcp_apis::messages::to_json_as(
                            &object,
                            &resource.group_version(),
                            &resource.kind,
                        )
                    }
                    false => kcp_apis::messages::to_json(&object),
                })
            })
            .collect();
        Ok(Some(ListResult {
            items,
            resource_version: page.resource_version,
            continue_token: page.continue_token,
            remaining_item_count: page.remaining_item_count,
        }))
    }

    /// Reads the collection from its start or continue token until `options.limit` key-values
    /// were taken by `take` (all, without a limit), in storage pages of one snapshot.
    /// `counted`: whether the page reports the items after it.
    async fn read_pages<T>(
        &self,
        target: &Target<'_>,
        options: &ListOptions,
        counted: bool,
        mut take: impl FnMut(&kcp_storage::KeyValue) -> Result<Option<T>, RegistryError>,
    ) -> Result<ListResult<T>, RegistryError> {
        let prefix = target.collection_prefix();
        let (mut revision, mut start, known, resumed_after) = match &options.continue_token {
            Some(token) => {
                let resume = decode_token(token)?;
                let mut start = prefix.clone();
                start.extend_from_slice(&resume.after);
                start.push(0);
                (resume.revision, start, resume.remaining, Some(resume.after))
            }
            None => (options.revision, prefix.clone(), None, None),
        };
        // The items after the page before, less those read since: no need to count them.
        let mut known = known.filter(|_| counted);
        let end = prefix_end(&prefix);
        let mut items = Vec::new();
        loop {
            let want = if options.limit == 0 {
                0
            } else {
                options.limit - items.len()
            };
            let request = RangeRequest {
                range: KeyRange {
                    start: start.clone(),
                    end: end.clone(),
                },
                limit: want,
                revision,
                skip_count: options.skip_count || known.is_some(),
            };
            let page = self
                .storage()
                .range(request)
                .await
                .map_err(|error| read_error(error, resumed_after.as_deref()))?;
            revision = page.revision;
            if let Some(known) = known.as_mut() {
                *known = known.saturating_sub(page.kvs.len() as u64);
            }
            let last_key = page.kvs.last().map(|kv| kv.key.to_vec());
            for kv in &page.kvs {
                if let Some(item) = take(kv)? {
                    items.push(item);
                }
            }
            let full = options.limit != 0 && items.len() >= options.limit;
            match last_key {
                Some(last) if page.more && full => {
                    let remaining = match known {
                        Some(known) => Some(known),
                        None => counted.then(|| page.count - page.kvs.len() as u64),
                    };
                    let token = encode_token(revision, &last[prefix.len()..], remaining);
                    return Ok(ListResult {
                        items,
                        resource_version: revision,
                        continue_token: Some(token),
                        remaining_item_count: remaining,
                    });
                }
                Some(mut last) if page.more => {
                    last.push(0);
                    start = last;
                }
                _ => {
                    return Ok(ListResult {
                        items,
                        resource_version: revision,
                        continue_token: None,
                        remaining_item_count: None,
                    });
                }
            }
        }
    }
}

/// A storage error as a list reports it: the snapshot of a continue token (resuming after
/// `resumed_after`) compacted away offers the rest of the list at the latest revision.
fn read_error(error: StorageError, resumed_after: Option<&[u8]>) -> RegistryError {
    match (error, resumed_after) {
        (StorageError::Compacted { .. }, Some(after)) => RegistryError::ContinueExpired {
            continue_token: encode_token(0, after, None),
        },
        (error, _) => error.into(),
    }
}

impl Registry {
    /// Listed objects as their version serves them (as stored for wildcard custom resources).
    async fn present_listed(
        &self,
        target: &Target<'_>,
        items: Vec<Value>,
    ) -> Result<Vec<Value>, RegistryError> {
        if target.as_stored() {
            return Ok(items);
        }
        self.present_all(target.resource, items).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_and_reject_garbage() {
        let token = encode_token(42, b"ns/name", None);
        let resume = Resume {
            revision: 42,
            after: b"ns/name".to_vec(),
            remaining: None,
        };
        assert_eq!(decode_token(&token).unwrap(), resume);
        let counted = encode_token(42, b"ns/name", Some(7));
        let resume = Resume {
            remaining: Some(7),
            ..resume
        };
        assert_eq!(decode_token(&counted).unwrap(), resume);
        assert!(decode_token("not base64!").is_err());
        let zero = URL_SAFE_NO_PAD.encode(r#"{"v":"meta.k8s.io/v1","rv":0,"start":"a"}"#);
        assert!(decode_token(&zero).is_err(), "revision 0 is no revision");
        assert!(decode_token(&URL_SAFE_NO_PAD.encode("{}")).is_err());
    }

    #[test]
    fn a_token_for_the_latest_revision_is_written_as_kube_apiserver_writes_it() {
        let token = encode_token(0, b"ns/name", Some(3));
        let decoded: Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(&token).unwrap()).unwrap();
        assert_eq!(decoded["rv"], -1);
        assert_eq!(
            decode_token(&token).unwrap().revision,
            0,
            "-1 reads the latest revision"
        );
    }

    #[test]
    fn a_compacted_snapshot_offers_the_rest_at_the_latest_revision_only_to_a_continued_list() {
        let compacted = || StorageError::Compacted {
            requested: 5,
            compacted: 9,
        };
        match read_error(compacted(), Some(b"ns/b")) {
            RegistryError::ContinueExpired { continue_token } => {
                let resume = decode_token(&continue_token).unwrap();
                assert_eq!((resume.revision, resume.after), (0, b"ns/b".to_vec()));
                assert_eq!(resume.remaining, None, "the rest is counted again");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            read_error(compacted(), None),
            RegistryError::Expired(_)
        ));
    }
}
