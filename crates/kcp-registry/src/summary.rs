//! What a controller's start-up list needs of each object: which object it is and where it
//! is in its life, read from the stored bytes without building the rest of it.
//!
//! A controller lists its resource across every logical cluster when it starts, to queue what
//! needs a reconcile: at a million workspaces that is millions of objects. Decoding each one
//! whole (a `serde_json::Value`, every map and string allocated) cost most of the start-up
//! CPU, and a list that kept the decoded objects held gigabytes. A [`Summary`] borrows its
//! strings from the stored bytes and skips everything else.

use std::borrow::Cow;

use kcp_apis::builtin::Resource;
use serde::Deserialize;

use crate::error::RegistryError;
use crate::store::{Registry, Target};
use crate::wildcard::cluster_of;

/// An object's identity and the parts of it that say whether it needs a look: whether it is
/// being deleted, its `status.phase`, its top-level `type` (Secrets).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Summary<'a> {
    pub namespace: Cow<'a, str>,
    pub name: Cow<'a, str>,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    pub phase: Option<Cow<'a, str>>,
    pub type_: Option<Cow<'a, str>>,
}

#[derive(Deserialize, Default)]
struct Stored<'a> {
    #[serde(default, borrow)]
    metadata: StoredMetadata<'a>,
    #[serde(default, borrow)]
    status: Option<StoredStatus<'a>>,
    #[serde(default, borrow, rename = "type")]
    type_: Option<Cow<'a, str>>,
}

#[derive(Deserialize, Default)]
struct StoredMetadata<'a> {
    #[serde(default, borrow)]
    namespace: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(default, rename = "deletionTimestamp")]
    deletion_timestamp: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize, Default)]
struct StoredStatus<'a> {
    #[serde(default, borrow)]
    phase: Option<Cow<'a, str>>,
}

impl<'a> Summary<'a> {
    /// The summary of a stored object. Objects too deep for the parser's recursion limit, or
    /// whose fields have other types than the summary's, are decoded whole and read from that.
    pub fn of_stored(bytes: &'a [u8]) -> Result<Summary<'a>, RegistryError> {
        match serde_json::from_slice::<Stored<'a>>(bytes) {
            Ok(stored) => Ok(stored.into()),
            Err(_) => {
                let object = kcp_apimachinery::json::decode_stored(bytes).map_err(|e| {
                    RegistryError::Internal(format!("stored object is not JSON: {e}"))
                })?;
                Ok(Summary::of_value(&object).into_owned())
            }
        }
    }

    /// The summary of a decoded object.
    pub fn of_value(object: &'a serde_json::Value) -> Summary<'a> {
        let text = |value: &'a serde_json::Value| value.as_str().map(Cow::Borrowed);
        let metadata = &object["metadata"];
        Summary {
            namespace: text(&metadata["namespace"]).unwrap_or_default(),
            name: text(&metadata["name"]).unwrap_or_default(),
            deleting: !metadata["deletionTimestamp"].is_null(),
            phase: text(&object["status"]["phase"]),
            type_: text(&object["type"]),
        }
    }

    /// The summary, owning its strings.
    pub fn into_owned(self) -> Summary<'static> {
        let own = |text: Cow<'_, str>| Cow::Owned(text.into_owned());
        Summary {
            namespace: own(self.namespace),
            name: own(self.name),
            deleting: self.deleting,
            phase: self.phase.map(own),
            type_: self.type_.map(own),
        }
    }
}

impl<'a> From<Stored<'a>> for Summary<'a> {
    fn from(stored: Stored<'a>) -> Self {
        Summary {
            namespace: stored.metadata.namespace.unwrap_or_default(),
            name: stored.metadata.name.unwrap_or_default(),
            deleting: stored.metadata.deletion_timestamp.is_some(),
            phase: stored.status.and_then(|status| status.phase),
            type_: stored.type_,
        }
    }
}

impl Registry {
    /// The [`Summary`] of one object: what a controller reads to tell whether an object exists
    /// and is being deleted, without decoding all of it.
    pub async fn summary(
        &self,
        target: Target<'_>,
        name: &str,
    ) -> Result<Summary<'static>, RegistryError> {
        let kv = self.read(&target, name).await?;
        Ok(Summary::of_stored(&kv.value)?.into_owned())
    }

    /// The part of one object that `T` describes, decoded from the stored bytes with the rest
    /// skipped: for a controller that checks one field of every object. An object whose
    /// fields do not have `T`'s types is an error (read it whole instead).
    pub async fn get_part<T: serde::de::DeserializeOwned>(
        &self,
        target: Target<'_>,
        name: &str,
    ) -> Result<T, RegistryError> {
        let kv = self.read(&target, name).await?;
        decode_part(&kv.value)
    }

    /// Hands the [`Summary`] of every object of `resource` in every logical cluster, with its
    /// cluster, to `take`, read page by page from one snapshot; returns that snapshot's
    /// revision (to watch from). Nothing of the objects outlives its page.
    pub async fn summarize_all_clusters(
        &self,
        resource: &Resource,
        mut take: impl FnMut(&str, &Summary<'_>),
    ) -> Result<u64, RegistryError> {
        let prefix = crate::store::resource_keys(resource).all_clusters();
        self.each_page(&prefix, |kv| {
            if let Some(cluster) = cluster_of(&prefix, &kv.key) {
                take(cluster, &Summary::of_stored(&kv.value)?);
            }
            Ok(())
        })
        .await
    }
}

/// The part of a stored object that `T` describes, the rest skipped; fields of other types
/// than `T`'s are an error.
pub(crate) fn decode_part<T: serde::de::DeserializeOwned>(
    stored: &[u8],
) -> Result<T, RegistryError> {
    serde_json::from_slice(stored)
        .map_err(|e| RegistryError::Internal(format!("stored object is not as expected: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn summary_of(object: &serde_json::Value) -> Summary<'static> {
        let bytes = object.to_string().into_bytes();
        let summary = Summary::of_stored(&bytes).expect("a summary").into_owned();
        assert_eq!(summary, Summary::of_value(object), "{object}");
        summary
    }

    #[test]
    fn a_summary_reads_identity_deletion_phase_and_type() {
        let summary = summary_of(&json!({
            "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
            "metadata": {"name": "t\u{e9}\\\"x", "namespace": "ns", "deletionTimestamp": "2026-01-01T00:00:00Z",
                "managedFields": [{"manager": "m", "fieldsV1": {"f:data": {}}}]},
            "data": {"token": "abc"}, "status": {"phase": "Terminating", "conditions": []},
        }));
        assert_eq!(summary.name, "t\u{e9}\\\"x");
        assert_eq!(summary.namespace, "ns");
        assert!(summary.deleting);
        assert_eq!(summary.phase.as_deref(), Some("Terminating"));
        assert_eq!(
            summary.type_.as_deref(),
            Some("kubernetes.io/service-account-token")
        );

        let bare = summary_of(&json!({"metadata": {"name": "a"}}));
        assert_eq!(bare.namespace, "");
        assert!(!bare.deleting);
        assert_eq!((bare.phase, bare.type_), (None, None));
        summary_of(&json!({}));
    }

    #[test]
    fn objects_of_any_depth_or_with_odd_fields_are_summarized() {
        // Deeper than the parser's recursion limit, in a field the summary skips.
        let mut deep = json!("leaf");
        for _ in 0..200 {
            deep = json!([deep]);
        }
        let summary = summary_of(&json!({
            "metadata": {"name": "deep", "deletionTimestamp": null}, "spec": deep,
        }));
        assert_eq!(summary.name, "deep");
        assert!(!summary.deleting);
        // A phase that is not a string: read from the whole object.
        let odd = summary_of(&json!({"metadata": {"name": "odd"}, "status": {"phase": 3}}));
        assert_eq!(odd.phase, None);
        assert!(Summary::of_stored(b"not json").is_err());
    }

    #[tokio::test]
    async fn a_part_of_a_stored_object_is_read_alone() {
        #[derive(serde::Deserialize, Debug, PartialEq)]
        struct Part {
            data: std::collections::BTreeMap<String, String>,
        }
        let registry = Registry::new(std::sync::Arc::new(kcp_storage::MemoryStorage::new()));
        let namespaces = Target {
            cluster: "c",
            resource: kcp_apis::builtin::core("namespaces"),
            namespace: None,
        };
        registry
            .create(namespaces, json!({"metadata": {"name": "ns"}}))
            .await
            .unwrap();
        let config_maps = Target {
            cluster: "c",
            resource: kcp_apis::builtin::core("configmaps"),
            namespace: Some("ns"),
        };
        registry
            .create(
                config_maps,
                json!({"metadata": {"name": "cm", "labels": {"a": "b"}}, "data": {"k": "v"}}),
            )
            .await
            .unwrap();
        let part: Part = registry.get_part(config_maps, "cm").await.unwrap();
        assert_eq!(part.data, [("k".to_string(), "v".to_string())].into());
        let summary = registry.summary(config_maps, "cm").await.unwrap();
        assert_eq!(
            (summary.namespace, summary.name),
            ("ns".into(), "cm".into())
        );
        let missing = registry.get_part::<Part>(config_maps, "gone").await;
        assert!(matches!(missing, Err(RegistryError::NotFound { .. })));
        // Fields of other types than the part's are an error, not a guess.
        let wrong = registry.get_part::<DataAsList>(config_maps, "cm").await;
        assert!(matches!(wrong, Err(RegistryError::Internal(_))));
    }

    #[derive(serde::Deserialize, Debug)]
    struct DataAsList {
        #[allow(dead_code)]
        data: Vec<String>,
    }
}
