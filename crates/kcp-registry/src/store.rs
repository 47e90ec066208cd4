//! The registry: create, get, update and delete of any kind, with Kubernetes semantics. An
//! update or patch that changes nothing is not written (no new resourceVersion, no event).

use std::sync::Arc;

use bytes::Bytes;
use kcp_apimachinery::json::KeyOrder;
use kcp_apis::builtin::Resource;
use kcp_storage::keys::ResourceKeys;
use kcp_storage::{KeyValue, Storage, StorageError};
use serde_json::{Value, json};

use crate::admission::Phase;
use crate::custom::WebhookConverter;
use crate::custom::convert::Presentation;
use crate::custom::index::CustomResourceIndex;
use crate::delete_options::DeleteOptions;
use crate::error::{Cause, RegistryError};
use crate::generic::GenericStore;
use crate::kinds::{self, Deletion, Generation};
use crate::meta;
use crate::names;
use crate::strategy::Part;
use crate::validation;

/// How many times a server-side read-modify-write retries after losing a race.
pub(crate) const CONFLICT_RETRIES: usize = 5;
const MODIFIED: &str =
    "the object has been modified; please apply your changes to the latest version and try again";

/// Where a request points: a resource in a logical cluster, and a namespace for namespaced ones.
/// The resource is borrowed for the request from the handle its caller holds (a
/// [`kcp_apis::builtin::ResourceRef`] from [`Registry::resolve`], or a static built-in one).
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    pub cluster: &'a str,
    pub resource: &'a Resource,
    pub namespace: Option<&'a str>,
}

/// The cluster name of wildcard reads: every logical cluster at once (list and watch only).
pub const ALL_CLUSTERS: &str = "*";

impl Target<'_> {
    /// Whether the target is every logical cluster ([`ALL_CLUSTERS`]).
    pub fn is_wildcard(&self) -> bool {
        self.cluster == ALL_CLUSTERS
    }

    /// `filter`, narrowed to the target's namespace when that is not part of the key prefix
    /// (wildcard reads of one namespace in every cluster).
    pub(crate) fn narrow(&self, filter: Option<crate::Filter>) -> Option<crate::Filter> {
        let Some(namespace) = self
            .namespace
            .filter(|_| self.is_wildcard() && self.resource.namespaced)
        else {
            return filter;
        };
        let namespace = namespace.to_string();
        Some(match filter {
            None => Box::new(move |object: &Value| object["metadata"]["namespace"] == *namespace),
            Some(filter) => Box::new(move |object: &Value| {
                object["metadata"]["namespace"] == *namespace && filter(object)
            }),
        })
    }

    /// How this resource's stored objects order their keys: custom resources' sorted, as
    /// Kubernetes writes unstructured objects (system kinds' too), built-in kinds' in
    /// Kubernetes' struct order.
    pub(crate) fn key_order(&self) -> KeyOrder {
        if self.resource.custom().is_some() {
            KeyOrder::Sorted
        } else {
            KeyOrder::Kubernetes
        }
    }

    /// Whether objects are answered as stored: wildcard reads of custom resources, whose
    /// clusters may define them differently (kcp serves those as metadata only).
    pub(crate) fn as_stored(&self) -> bool {
        self.is_wildcard()
            && kcp_apis::system::find(
                &self.resource.group,
                &self.resource.version,
                &self.resource.name,
            )
            .is_none()
    }
    /// `configmaps` or `roles.rbac.authorization.k8s.io`, as error messages name resources.
    pub fn qualified_resource(&self) -> String {
        if self.resource.group.is_empty() {
            self.resource.name.to_string()
        } else {
            format!("{}.{}", self.resource.name, self.resource.group)
        }
    }

    fn keys(&self) -> ResourceKeys {
        resource_keys(self.resource)
    }

    pub(crate) fn key(&self, name: &str) -> Vec<u8> {
        self.keys().object(
            self.cluster,
            self.namespace.filter(|_| self.resource.namespaced),
            name,
        )
    }

    /// The storage prefix of the collection the target names.
    /// Every object of the resource, in every logical cluster.
    pub(crate) fn resource_prefix(&self) -> Vec<u8> {
        self.keys().all_clusters()
    }

    pub(crate) fn collection_prefix(&self) -> Vec<u8> {
        if self.is_wildcard() {
            return self.keys().all_clusters();
        }
        match self.namespace.filter(|_| self.resource.namespaced) {
            Some(namespace) => self.keys().namespace(self.cluster, namespace),
            None => self.keys().cluster(self.cluster),
        }
    }

    fn not_found(&self, name: &str) -> RegistryError {
        RegistryError::NotFound {
            qualified_resource: self.qualified_resource(),
            name: name.to_string(),
        }
    }

    pub(crate) fn conflict(&self, name: &str) -> RegistryError {
        RegistryError::Conflict {
            qualified_resource: self.qualified_resource(),
            name: name.to_string(),
            reason: MODIFIED.to_string(),
        }
    }

    /// 403 for the object `name` of the target, saying why.
    pub(crate) fn forbidden(&self, name: &str, message: String) -> RegistryError {
        RegistryError::Forbidden {
            qualified_resource: self.qualified_resource(),
            name: name.to_string(),
            message,
            causes: Vec::new(),
        }
    }

    pub(crate) fn invalid(&self, name: &str, causes: Vec<Cause>) -> RegistryError {
        RegistryError::Invalid {
            kind: self.resource.kind.to_string(),
            group: self.resource.group.to_string(),
            name: name.to_string(),
            causes,
        }
    }
}

/// What a delete did.
#[derive(Debug, Clone, PartialEq)]
pub enum DeleteOutcome {
    /// The object is gone; this was its last state.
    Deleted(Value),
    /// Finalizers hold the object; it now carries a deletionTimestamp.
    Pending(Value),
}

/// Resource semantics over one store, shared by every logical cluster.
#[derive(Clone)]
pub struct Registry {
    /// Keys, values and revisions: the last stage of every write (dry runs included).
    store: GenericStore,
    /// The part of objects that updates and patches change (the object or a subresource).
    part: Part,
    /// The custom resources each logical cluster serves.
    custom: Arc<CustomResourceIndex>,
    /// Asks conversion webhooks; without one, CRDs with webhook conversion fail to convert.
    converter: Option<Arc<dyn WebhookConverter>>,
    /// Who writes through this view, when admission needs to know (a workspace's owner).
    requester: Option<Arc<Requester>>,
    /// Issues and accepts service account tokens; without it none are.
    service_account_tokens: Option<Arc<crate::serviceaccounts::ServiceAccountTokens>>,
    /// What authenticating those tokens read, kept until their objects change.
    service_account_lookups: crate::serviceaccounts::Lookups,
    /// The manager writes are recorded under in managedFields (see `managed`).
    manager: Option<Arc<str>>,
    /// Objects of kcp's tenancy kinds decoded lately (see [`Registry::get_shared`]).
    decoded: Arc<crate::decoded::DecodedObjects>,
    /// Each logical cluster's admission webhooks, kept until their configurations change.
    admission_configurations: crate::admission::AdmissionConfigurations,
    /// Posts AdmissionReviews; without one, no admission webhook is called.
    webhook_caller: Option<Arc<dyn crate::admission::webhooks::WebhookCaller>>,
    /// Where admission leaves warnings and audit annotations for the request being served.
    notes: Option<Arc<crate::admission::webhooks::Notes>>,
}

/// The user a write is made for, as admission needs it: kcp records who created a workspace,
/// and asks the authorizer whether they may use its type.
#[derive(Clone)]
pub struct Requester {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: std::collections::BTreeMap<String, Vec<String>>,
    /// Asks the server's authorizer what the requester may do elsewhere.
    pub access: Arc<dyn AccessCheck>,
}

/// What admission asks the server's authorizer about the requester: may they do something
/// (verb `use` on a WorkspaceType, `escalate` on a role, `bind` a role), which rules do they
/// hold, which rules does a role grant.
pub trait AccessCheck: Send + Sync {
    /// May the requester do `verb` on the object `name` of `resource` in API group `group`, in
    /// `namespace` (empty: cluster-scoped) of logical cluster `cluster`?
    fn allowed<'a>(
        &'a self,
        at: Place<'a>,
        verb: &'a str,
        group: &'a str,
        resource: &'a str,
        name: &'a str,
    ) -> futures::future::BoxFuture<'a, Result<bool, RegistryError>>;

    /// [`AccessCheck::allowed`] by the roles and bindings of `cluster` alone, whether or not
    /// the requester may enter it (kcp's "deep" SubjectAccessReview: a user may bind an
    /// export of a workspace they cannot otherwise use).
    fn allowed_deep<'a>(
        &'a self,
        at: Place<'a>,
        verb: &'a str,
        group: &'a str,
        resource: &'a str,
        name: &'a str,
    ) -> futures::future::BoxFuture<'a, Result<bool, RegistryError>>;

    /// Every rule the requester holds in `namespace` of `cluster` (cluster-wide ones only when
    /// it is empty).
    fn rules_held<'a>(
        &'a self,
        at: Place<'a>,
    ) -> futures::future::BoxFuture<'a, Result<Vec<kcp_apimachinery::rbac::Rule>, RegistryError>>;

    /// The rules of the Role `name` of `namespace` (`kind` "Role") or of the ClusterRole
    /// `name` (bootstrap ones included) in `cluster`; `None` if there is none.
    #[allow(clippy::type_complexity)]
    fn role_rules<'a>(
        &'a self,
        at: Place<'a>,
        kind: &'a str,
        name: &'a str,
    ) -> futures::future::BoxFuture<
        'a,
        Result<Option<Vec<kcp_apimachinery::rbac::Rule>>, RegistryError>,
    >;
}

/// A namespace (empty: cluster-wide) of a logical cluster, where admission asks its questions.
#[derive(Debug, Clone, Copy)]
pub struct Place<'a> {
    pub cluster: &'a str,
    pub namespace: &'a str,
}

impl Registry {
    pub fn new(storage: Arc<dyn Storage>) -> Self {
        Registry {
            store: GenericStore::new(storage),
            part: Part::Whole,
            custom: Arc::default(),
            converter: None,
            requester: None,
            service_account_tokens: None,
            service_account_lookups: Default::default(),
            manager: None,
            decoded: Arc::default(),
            admission_configurations: Default::default(),
            webhook_caller: None,
            notes: None,
        }
    }

    /// The same registry with a watch cache of its own whose logs keep at most `events` events
    /// each (the server keeps 102,400, as kube-apiserver at most): for tests that overflow the
    /// window.
    pub fn with_watch_window(mut self, events: usize) -> Self {
        self.store = self
            .store
            .with_watch_cache(crate::watch_cache::WatchCache::keeping(events));
        self
    }

    /// Starts retiring the decoded objects nobody reads (see `decoded`): every
    /// `decoded::TURN_EVERY`, until the registry is dropped or the task aborted. Needs a tokio
    /// runtime.
    pub fn start_cache_aging(&self) -> tokio::task::JoinHandle<()> {
        let decoded = Arc::downgrade(&self.decoded);
        tokio::spawn(async move {
            let mut turns = tokio::time::interval(crate::decoded::TURN_EVERY);
            turns.tick().await;
            loop {
                turns.tick().await;
                match decoded.upgrade() {
                    Some(decoded) => decoded.turn(),
                    None => return,
                }
            }
        })
    }

    pub(crate) fn manager(&self) -> Option<&str> {
        self.manager.as_deref()
    }

    pub(crate) fn set_manager(&mut self, manager: Arc<str>) {
        self.manager = Some(manager);
    }

    /// The part of objects this view's updates change.
    pub(crate) fn part(&self) -> Part {
        self.part
    }

    pub(crate) fn service_account_lookups(&self) -> &crate::serviceaccounts::Lookups {
        &self.service_account_lookups
    }

    pub(crate) fn set_service_account_tokens(
        &mut self,
        tokens: Arc<crate::serviceaccounts::ServiceAccountTokens>,
    ) {
        self.service_account_tokens = Some(tokens);
    }

    /// The server's service account token issuer, if it issues any.
    pub fn service_account_tokens(&self) -> Option<&crate::serviceaccounts::ServiceAccountTokens> {
        self.service_account_tokens.as_deref()
    }

    /// The same registry writing for `requester` (see [`Requester`]).
    pub fn on_behalf_of(&self, requester: Requester) -> Registry {
        Registry {
            requester: Some(Arc::new(requester)),
            ..self.clone()
        }
    }

    pub(crate) fn requester(&self) -> Option<&Requester> {
        self.requester.as_deref()
    }

    /// The same registry converting custom resources through `converter` for CRDs with webhook
    /// conversion.
    pub fn with_webhook_converter(mut self, converter: Arc<dyn WebhookConverter>) -> Registry {
        self.converter = Some(converter);
        self
    }

    pub(crate) fn webhook_converter(&self) -> Option<&dyn WebhookConverter> {
        self.converter.as_deref()
    }

    /// The same registry calling admission webhooks through `caller`.
    pub fn with_webhook_caller(
        mut self,
        caller: Arc<dyn crate::admission::webhooks::WebhookCaller>,
    ) -> Registry {
        self.webhook_caller = Some(caller);
        self
    }

    pub(crate) fn webhook_caller(&self) -> Option<&dyn crate::admission::webhooks::WebhookCaller> {
        self.webhook_caller.as_deref()
    }

    pub(crate) fn admission_configurations(&self) -> &crate::admission::AdmissionConfigurations {
        &self.admission_configurations
    }

    /// The same registry leaving admission's warnings and audit annotations in `notes`.
    pub fn noting(&self, notes: Arc<crate::admission::webhooks::Notes>) -> Registry {
        Registry {
            notes: Some(notes),
            ..self.clone()
        }
    }

    pub(crate) fn notes(&self) -> Option<&crate::admission::webhooks::Notes> {
        self.notes.as_deref()
    }

    /// The notes this view leaves admission's findings in, if it has some.
    pub fn shared_notes(&self) -> Option<Arc<crate::admission::webhooks::Notes>> {
        self.notes.clone()
    }

    pub(crate) fn custom_index(&self) -> &CustomResourceIndex {
        &self.custom
    }

    pub(crate) fn is_dry_run(&self) -> bool {
        self.store.is_dry_run()
    }

    /// The same registry in dry-run mode: writes are checked and answered but never stored.
    pub fn dry_run(&self) -> Registry {
        Registry {
            store: self.store.dry_run(),
            ..self.clone()
        }
    }

    /// The same registry serving the subresource `name`: gets read the whole object, updates
    /// and patches change only the subresource's part (`status`: `.status`; `finalize`:
    /// `.spec.finalizers`). `None` for subresources the registry does not serve.
    pub fn subresource(&self, name: &str) -> Option<Registry> {
        Some(Registry {
            part: Part::of_subresource(name)?,
            ..self.clone()
        })
    }

    /// The same registry writing objects whole, status included, on create and update, and
    /// allowed to delete the namespaces users may not (`default`, ...): for the server's own
    /// controllers, e.g. when a logical cluster is deleted with everything in it.
    pub fn privileged(&self) -> Registry {
        Registry {
            part: Part::Everything,
            ..self.clone()
        }
    }

    pub(crate) fn is_privileged(&self) -> bool {
        self.part == Part::Everything
    }

    /// The generic store under this registry (its dry-run mode included).
    pub(crate) fn store(&self) -> &GenericStore {
        &self.store
    }

    /// The backend, for reads.
    pub(crate) fn storage(&self) -> &dyn Storage {
        self.store.storage()
    }

    /// Creates an object from a request body.
    pub async fn create(&self, target: Target<'_>, body: Value) -> Result<Value, RegistryError> {
        self.create_object(target, body, true).await
    }

    /// Creates an object; `track` records its manager's fields (an apply has recorded them).
    pub(crate) async fn create_object(
        &self,
        target: Target<'_>,
        body: Value,
        track: bool,
    ) -> Result<Value, RegistryError> {
        let mut object = normalize(&target, body)?;
        if meta::take_resource_version(&mut object).is_some() {
            return Err(RegistryError::BadRequest(
                "resourceVersion should not be set on objects to be created".into(),
            ));
        }
        if target.resource.custom.is_some() && self.crd_terminating(target.cluster, target.resource)
        {
            return Err(RegistryError::MethodNotAllowed(
                "create not allowed while custom resource definition is terminating".into(),
            ));
        }
        validation::prepare(target.resource, &mut object)?;
        let name = match meta::string(&object, "name").filter(|n| !n.is_empty()) {
            Some(name) => name.to_string(),
            None => match meta::string(&object, "generateName").filter(|n| !n.is_empty()) {
                Some(prefix) => names::generate(prefix),
                None => String::new(),
            },
        };
        let sent_name = meta::string(&object, "name")
            .unwrap_or_default()
            .to_string();
        if !name.is_empty() {
            meta::metadata_mut(&mut object).insert("name".into(), json!(name));
        }
        self.admit_create(Phase::Mutating, &target, &mut object, &sent_name)
            .await?;
        if let Some(requester) = self.requester() {
            kinds::rules(target.resource).record_requester(&mut object, requester);
        }
        if track {
            self.track_write(&target, None, &mut object);
        }
        let mut causes = validation::validate_create(target.resource, &object);
        validation::check_rules(target.resource, &object, None, &mut causes).await;
        if !causes.is_empty() {
            return Err(target.invalid(&name, causes));
        }
        let metadata = meta::metadata_mut(&mut object);
        metadata.insert("uid".into(), json!(meta::new_uid()));
        metadata.insert("creationTimestamp".into(), json!(meta::now()));
        metadata.remove("deletionTimestamp");
        metadata.remove("deletionGracePeriodSeconds");
        match kinds::rules(target.resource).generation(target.resource) {
            Generation::Untracked => metadata.remove("generation"),
            _ => metadata.insert("generation".into(), json!(1)),
        };
        kinds::rules(target.resource).prepare_create(target.resource, self.part, &mut object);
        // Validating admission sees the object as it will be stored (validating webhooks get
        // its uid and creation time); a quota's place is reserved only for a valid object.
        self.admit_create(Phase::Validating, &target, &mut object, &sent_name)
            .await?;
        meta::remove_cluster_annotation(&mut object);
        check_depth(&target, &object)?;
        let stored_form = self.encode_for_storage(&target, &object).await?;
        let kv = match self.store.create(&target.key(&name), stored_form).await {
            Err(StorageError::AlreadyExists { .. }) => {
                return Err(RegistryError::AlreadyExists {
                    qualified_resource: target.qualified_resource(),
                    name,
                });
            }
            other => other?,
        };
        meta::set_resource_version(&mut object, kv.mod_revision);
        self.observe_crd_write(&target, &object, false);
        meta::set_cluster_annotation(&mut object, target.cluster);
        crate::custom::convert::default_as_read(target.resource, &mut object);
        Ok(object)
    }

    /// `object` encoded as storage keeps it (custom resources at their storage version). Its two
    /// callers, `create` and `write_back` (every other write goes through one of them), hold the
    /// object to the nesting limit first ([`check_depth`]).
    async fn encode_for_storage(
        &self,
        target: &Target<'_>,
        object: &Value,
    ) -> Result<Bytes, RegistryError> {
        match target.resource.custom() {
            Some(custom)
                if object["apiVersion"].as_str()
                    != Some(&format!(
                        "{}/{}",
                        target.resource.group, custom.storage_version
                    )) =>
            {
                encode(&self.for_storage(target, object.clone()).await?)
            }
            _ => encode(object),
        }
    }

    /// Whether `object`, deeper than the write limit, is the object stored at `key` (stored
    /// that deep by an older server) with only its deletion state changed: a deletionTimestamp
    /// set, finalizers removed. Those writes are let through, so an object no server would
    /// store today can still be deleted and finalized; any other write to it must make it
    /// shallow. Asked only for objects over the limit.
    async fn deletion_step_of_deep_object(&self, key: &[u8], object: &Value) -> bool {
        let Ok(Some(kv)) = self.storage().get(key, 0).await.map(|got| got.kv) else {
            return false;
        };
        let Ok(stored) = decode(&kv) else {
            return false;
        };
        let finalizers = |v: &Value| {
            v["metadata"]["finalizers"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        };
        let (old_finalizers, new_finalizers) = (finalizers(&stored), finalizers(object));
        if !new_finalizers.iter().all(|f| old_finalizers.contains(f)) {
            return false;
        }
        let without_deletion_state = |v: &Value| {
            let mut v = v.clone();
            if let Some(metadata) = v.get_mut("metadata").and_then(Value::as_object_mut) {
                for field in [
                    "finalizers",
                    "deletionTimestamp",
                    "deletionGracePeriodSeconds",
                    "resourceVersion",
                ] {
                    metadata.remove(field);
                }
            }
            meta::remove_cluster_annotation(&mut v);
            v
        };
        without_deletion_state(&stored) == without_deletion_state(object)
    }

    /// Reads one object.
    pub async fn get(&self, target: Target<'_>, name: &str) -> Result<Value, RegistryError> {
        let kv = self.read(&target, name).await?;
        self.present(&target, decode(&kv)?).await
    }

    /// [`Registry::get`], shared: for the objects every request of a workspace reads again
    /// (its path's Workspaces, its LogicalCluster, WorkspaceTypes), an object's revision is
    /// decoded once (see `decoded`). Only for kinds whose reads depend on nothing but the
    /// stored bytes (built-in and kcp's own kinds, not custom resources, which a CRD change
    /// presents differently).
    pub async fn get_shared(
        &self,
        target: Target<'_>,
        name: &str,
    ) -> Result<Arc<Value>, RegistryError> {
        let kv = self.read(&target, name).await?;
        // Kept decoded under the key alone: only for kinds served at one version.
        let cacheable = target.resource.custom.is_none()
            || (kcp_apis::system::is_system(target.resource)
                && !kcp_apis::system::converts(target.resource));
        if cacheable && let Some(object) = self.decoded.get(&kv.key, kv.mod_revision) {
            return Ok(object);
        }
        let object = Arc::new(self.present(&target, decode(&kv)?).await?);
        if cacheable {
            self.decoded
                .insert(&kv.key, kv.mod_revision, Arc::clone(&object));
        }
        Ok(object)
    }

    /// One object as a GET answers it in JSON, straight from the stored bytes
    /// (`served_from_stored`: the same bytes as decoding and encoding again, without a
    /// `Value`). Custom resources that presenting would change ([`Presentation`]: converted,
    /// pruned or defaulted as they are read), and bytes only decoding reads, come back as the
    /// object.
    pub async fn get_json(
        &self,
        target: Target<'_>,
        name: &str,
    ) -> Result<Result<Vec<u8>, Value>, RegistryError> {
        let kv = self.read(&target, name).await?;
        if Presentation::of(target.resource).as_stored(&kv.value)
            && let Some(bytes) = json_answer(&kv, target.key_order())
        {
            return Ok(Ok(bytes));
        }
        Ok(Err(self.present(&target, decode(&kv)?).await?))
    }

    pub(crate) async fn read(
        &self,
        target: &Target<'_>,
        name: &str,
    ) -> Result<KeyValue, RegistryError> {
        self.storage()
            .get(&target.key(name), 0)
            .await?
            .kv
            .ok_or_else(|| target.not_found(name))
    }

    /// Replaces an object (PUT). A `resourceVersion` in the body must match the stored one.
    pub async fn update(
        &self,
        target: Target<'_>,
        name: &str,
        body: Value,
    ) -> Result<Value, RegistryError> {
        let mut object = normalize(&target, body)?;
        crate::managed::check_name_if_set(&object, name)?;
        meta::metadata_mut(&mut object).insert("name".into(), json!(name));
        let precondition = match meta::take_resource_version(&mut object) {
            Some(rv) => Some(rv.parse::<u64>().map_err(|_| {
                target.invalid(
                    name,
                    vec![Cause {
                        reason: "FieldValueInvalid",
                        field: "metadata.resourceVersion".into(),
                        message: format!("Invalid value: \"{rv}\": must be a non-negative integer"),
                    }],
                )
            })?),
            None => None,
        };
        validation::prepare(target.resource, &mut object)?;
        for _ in 0..CONFLICT_RETRIES {
            let current = self.read(&target, name).await?;
            if precondition.is_some_and(|rv| rv != current.mod_revision) {
                return Err(target.conflict(name));
            }
            let stored = self.present(&target, decode(&current)?).await?;
            let next = object.clone();
            let mut next = kinds::rules(target.resource).prepare_update(
                target.resource,
                self.part,
                &stored,
                next,
            );
            carry_server_fields(target.resource, &stored, &mut next);
            self.admit_update(Phase::Mutating, &target, name, &stored, &mut next)
                .await?;
            self.track_write(&target, Some(&stored), &mut next);
            check_update(&target, self.part, name, &next, &stored).await?;
            self.admit_update(Phase::Validating, &target, name, &stored, &mut next)
                .await?;
            if unchanged(target.resource, &stored, &next) {
                return Ok(stored);
            }
            match self
                .write_back(&target, name, next, current.mod_revision)
                .await
            {
                Err(RegistryError::Conflict { .. }) if precondition.is_none() => continue,
                other => return other,
            }
        }
        Err(target.conflict(name))
    }

    /// Applies `patch` to the current object and stores the result, retrying on lost races unless
    /// the patch itself pins a `resourceVersion`.
    pub async fn patch(
        &self,
        target: Target<'_>,
        name: &str,
        patch: &(dyn Fn(&Value) -> Result<Value, RegistryError> + Send + Sync),
    ) -> Result<Value, RegistryError> {
        let with_nothing = |current: &Value| patch(current).map(|patched| (patched, ()));
        Ok(self.patch_with(target, name, &with_nothing).await?.0)
    }

    /// [`Registry::patch`] with something the patch function found besides the object (what
    /// the caller will warn about): the one of the attempt whose result was stored (or found
    /// to change nothing) comes back with the object.
    pub async fn patch_with<T: Send>(
        &self,
        target: Target<'_>,
        name: &str,
        patch: &PatchWith<'_, T>,
    ) -> Result<(Value, T), RegistryError> {
        for _ in 0..CONFLICT_RETRIES {
            if let Some(done) = self
                .patch_once(&target, name, patch, Tracking::Update)
                .await?
            {
                return Ok(done);
            }
        }
        Err(target.conflict(name))
    }

    /// One attempt of a patch (or an apply, whose function records managedFields itself):
    /// `None` when the current object changed under it, to try again.
    pub(crate) async fn patch_once<T: Send>(
        &self,
        target: &Target<'_>,
        name: &str,
        patch: &PatchWith<'_, T>,
        tracking: Tracking,
    ) -> Result<Option<(Value, T)>, RegistryError> {
        let current = self.read(target, name).await?;
        let stored = self.present(target, decode(&current)?).await?;
        let (patched, found) = patch(&stored)?;
        let mut patched = normalize(target, patched)?;
        crate::managed::check_name_if_set(&patched, name)?;
        let pinned = meta::take_resource_version(&mut patched);
        let pinned = pinned.filter(|rv| *rv != current.mod_revision.to_string());
        if pinned.is_some() {
            return Err(target.conflict(name));
        }
        validation::prepare(target.resource, &mut patched)?;
        let applied_owners = match tracking {
            Tracking::Applied => patched["metadata"].get("managedFields").cloned(),
            Tracking::Update => None,
        };
        let mut patched = kinds::rules(target.resource).prepare_update(
            target.resource,
            self.part,
            &stored,
            patched,
        );
        carry_server_fields(target.resource, &stored, &mut patched);
        self.admit_update(Phase::Mutating, target, name, &stored, &mut patched)
            .await?;
        match tracking {
            Tracking::Update => self.track_write(target, Some(&stored), &mut patched),
            Tracking::Applied => {
                let metadata = meta::metadata_mut(&mut patched);
                match applied_owners {
                    Some(owners) => metadata.insert("managedFields".into(), owners),
                    None => metadata.remove("managedFields"),
                };
            }
        }
        check_update(target, self.part, name, &patched, &stored).await?;
        self.admit_update(Phase::Validating, target, name, &stored, &mut patched)
            .await?;
        if unchanged(target.resource, &stored, &patched) {
            return Ok(Some((stored, found)));
        }
        match self
            .write_back(target, name, patched, current.mod_revision)
            .await
        {
            Err(RegistryError::Conflict { .. }) => Ok(None),
            other => other.map(|object| Some((object, found))),
        }
    }

    /// Stores `object` over revision `expected`, or deletes it if it is being deleted and no
    /// finalizer is left.
    pub(crate) async fn write_back(
        &self,
        target: &Target<'_>,
        name: &str,
        mut object: Value,
        expected: u64,
    ) -> Result<Value, RegistryError> {
        let key = target.key(name);
        meta::remove_cluster_annotation(&mut object);
        // Whatever the write started from (a status write starts from the stored object as
        // read), the revision is the store's to give, never stored: stored bytes without it
        // are served as they are (`json_answer`).
        meta::take_resource_version(&mut object);
        let finished = kinds::rules(target.resource).deletion_finished(&object);
        let result = if finished {
            self.store.delete(&key, expected).await
        } else {
            if let Err(too_deep) = check_depth(target, &object)
                && !self.deletion_step_of_deep_object(&key, &object).await
            {
                return Err(too_deep);
            }
            let stored_form = self.encode_for_storage(target, &object).await?;
            self.store.update(&key, stored_form, expected).await
        };
        match result {
            Ok(kv) => {
                meta::set_resource_version(&mut object, kv.mod_revision);
                self.observe_crd_write(target, &object, finished);
                meta::set_cluster_annotation(&mut object, target.cluster);
                crate::custom::convert::default_as_read(target.resource, &mut object);
                Ok(object)
            }
            Err(StorageError::Conflict { .. }) => Err(target.conflict(name)),
            Err(StorageError::NotFound { .. }) => Err(target.not_found(name)),
            Err(other) => Err(other.into()),
        }
    }

    /// Deletes an object, or marks it for deletion while finalizers remain.
    pub async fn delete(
        &self,
        target: Target<'_>,
        name: &str,
    ) -> Result<DeleteOutcome, RegistryError> {
        self.delete_with(target, name, &DeleteOptions::default())
            .await
    }

    /// [`Registry::delete`] with options: a propagation policy and preconditions (namespaces
    /// and CRDs, which their own controllers empty, take only the preconditions).
    pub async fn delete_with(
        &self,
        target: Target<'_>,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<DeleteOutcome, RegistryError> {
        self.admit_delete(&target, name).await?;
        let deletion = kinds::rules(target.resource).deletion();
        if deletion != Deletion::Plain
            && (options.uid.is_some() || options.resource_version.is_some())
        {
            let current = self.read(&target, name).await?;
            if let Some(reason) =
                options.failed_precondition(&decode(&current)?, current.mod_revision)
            {
                return Err(RegistryError::Conflict {
                    qualified_resource: target.qualified_resource(),
                    name: name.to_string(),
                    reason,
                });
            }
        }
        match deletion {
            Deletion::NamespaceLifecycle => self.delete_namespace(target, name).await,
            Deletion::ServedResources => self.delete_crd(target, name).await,
            Deletion::Plain => self.delete_object(target, name, options).await,
        }
    }

    /// The generic delete: the propagation policy sets or clears the garbage collector's
    /// finalizers; finalizers set a deletionTimestamp (or, on an object already being deleted,
    /// only change), else the object goes.
    pub(crate) async fn delete_object(
        &self,
        target: Target<'_>,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<DeleteOutcome, RegistryError> {
        for _ in 0..CONFLICT_RETRIES {
            let current = self.read(&target, name).await?;
            let mut object = self.present(&target, decode(&current)?).await?;
            if let Some(reason) = options.failed_precondition(&object, current.mod_revision) {
                return Err(RegistryError::Conflict {
                    qualified_resource: target.qualified_resource(),
                    name: name.to_string(),
                    reason,
                });
            }
            let deleting = meta::string(&object, "deletionTimestamp").is_some();
            let finalizers = options.finalizers_for(&object);
            if deleting && finalizers.is_none() {
                return Ok(DeleteOutcome::Pending(object));
            }
            let metadata = meta::metadata_mut(&mut object);
            if let Some(finalizers) = finalizers {
                if finalizers.is_empty() {
                    metadata.remove("finalizers");
                } else {
                    metadata.insert("finalizers".into(), Value::Array(finalizers));
                }
            }
            if meta::has_finalizers(&object) || deleting {
                let metadata = meta::metadata_mut(&mut object);
                if !deleting {
                    metadata.insert("deletionTimestamp".into(), json!(meta::now()));
                    metadata.insert("deletionGracePeriodSeconds".into(), json!(0));
                }
                metadata.remove("resourceVersion");
                // An object being deleted whose last finalizer this delete cleared goes here.
                let finished = !meta::has_finalizers(&object);
                match self
                    .write_back(&target, name, object, current.mod_revision)
                    .await
                {
                    Ok(object) if finished => return Ok(DeleteOutcome::Deleted(object)),
                    Ok(object) => return Ok(DeleteOutcome::Pending(object)),
                    Err(RegistryError::Conflict { .. }) => continue,
                    Err(other) => return Err(other),
                }
            }
            match self
                .store
                .delete(&target.key(name), current.mod_revision)
                .await
            {
                Ok(kv) => {
                    meta::set_resource_version(&mut object, kv.mod_revision);
                    self.observe_crd_write(&target, &object, true);
                    return Ok(DeleteOutcome::Deleted(object));
                }
                Err(StorageError::Conflict { .. }) => continue,
                Err(StorageError::NotFound { .. }) => return Err(target.not_found(name)),
                Err(other) => return Err(other.into()),
            }
        }
        Err(target.conflict(name))
    }

    /// Creates the namespace `name` in `cluster` unless it exists (bootstrap of `default`).
    pub async fn ensure_namespace(&self, cluster: &str, name: &str) -> Result<(), RegistryError> {
        let target = Target {
            cluster,
            resource: namespaces(),
            namespace: None,
        };
        match self
            .create(target, json!({"metadata": {"name": name}}))
            .await
        {
            Ok(_) | Err(RegistryError::AlreadyExists { .. }) => Ok(()),
            Err(other) => Err(other),
        }
    }
}

/// How a write records field ownership.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tracking {
    /// The registry records what the write changed for its manager.
    Update,
    /// The write's function (server-side apply) recorded it.
    Applied,
}

/// A patch function that also reports something it found (see [`Registry::patch_with`]).
pub type PatchWith<'a, T> = dyn Fn(&Value) -> Result<(Value, T), RegistryError> + Send + Sync + 'a;

pub(crate) fn namespaces() -> &'static Resource {
    kcp_apis::builtin::core("namespaces")
}

/// Checks a request body against the target and fills in apiVersion, kind and namespace.
fn normalize(target: &Target<'_>, body: Value) -> Result<Value, RegistryError> {
    let Value::Object(_) = body else {
        return Err(RegistryError::BadRequest(
            "the body of the request must be a JSON object".into(),
        ));
    };
    let mut object = body;
    let expected_version = target.resource.group_version();
    match object.get("apiVersion").and_then(Value::as_str) {
        Some(version) if version != expected_version => {
            return Err(RegistryError::BadRequest(format!(
                "the API version in the data ({version}) does not match the expected API version ({expected_version})"
            )));
        }
        _ => {}
    }
    match object.get("kind").and_then(Value::as_str) {
        Some(kind) if kind != target.resource.kind => {
            return Err(RegistryError::BadRequest(format!(
                "the kind in the data ({kind}) does not match the expected kind ({})",
                target.resource.kind
            )));
        }
        _ => {}
    }
    object["apiVersion"] = json!(expected_version);
    object["kind"] = json!(target.resource.kind);
    let body_namespace = meta::string(&object, "namespace")
        .filter(|n| !n.is_empty())
        .map(str::to_string);
    let metadata = meta::metadata_mut(&mut object);
    if target.resource.namespaced {
        let namespace = target.namespace.unwrap_or_default();
        if body_namespace.as_deref().is_some_and(|n| n != namespace) {
            return Err(RegistryError::BadRequest(
                "the namespace of the provided object does not match the namespace sent on the request".into(),
            ));
        }
        metadata.insert("namespace".into(), json!(namespace));
    } else {
        metadata.remove("namespace");
    }
    Ok(object)
}

/// Fails with the 422 of `next` replacing `stored` if it breaks the kind's rules.
async fn check_update(
    target: &Target<'_>,
    part: Part,
    name: &str,
    next: &Value,
    stored: &Value,
) -> Result<(), RegistryError> {
    let mut causes = validation::validate_update(target.resource, part, next, stored);
    validation::check_rules(target.resource, next, Some(stored), &mut causes).await;
    if causes.is_empty() {
        Ok(())
    } else {
        Err(target.invalid(name, causes))
    }
}

/// Whether storing `next` over `stored` (as served: resourceVersion and `kcp.io/cluster` set)
/// would change nothing, as kube-apiserver's `GuaranteedUpdate` finds when the new bytes equal
/// the stored ones: then nothing is written, no watch event is sent, and the stored object is
/// the answer, with its resourceVersion. A write that finishes a deletion always goes through.
fn unchanged(resource: &Resource, stored: &Value, next: &Value) -> bool {
    if kinds::rules(resource).deletion_finished(next) {
        return false;
    }
    let comparable = |object: &Value| {
        let mut object = object.clone();
        if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            metadata.remove("resourceVersion");
        }
        meta::remove_cluster_annotation(&mut object);
        object
    };
    comparable(stored) == comparable(next)
}

/// Keeps the fields only the server sets (uid, creationTimestamp, deletion state) on an update.
/// Keeps the server-managed metadata of the stored object on its next version, and bumps
/// `generation` when a field the kind tracks changed.
fn carry_server_fields(resource: &Resource, stored: &Value, next: &mut Value) {
    let generation = match kinds::rules(resource).generation(resource) {
        Generation::Untracked => stored["metadata"].get("generation").cloned(),
        tracked => {
            let current = stored["metadata"]["generation"].as_i64().unwrap_or(1);
            // Stored by someone else, the generation may already be the largest there is.
            Some(json!(if spec_changed(tracked, stored, next) {
                current.saturating_add(1)
            } else {
                current
            }))
        }
    };
    let metadata = meta::metadata_mut(next);
    match generation {
        Some(generation) => metadata.insert("generation".into(), generation),
        None => metadata.remove("generation"),
    };
    for field in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
    ] {
        match stored["metadata"].get(field) {
            Some(value) => metadata.insert(field.into(), value.clone()),
            None => metadata.remove(field),
        };
    }
}

/// Whether a field that moves the generation changed between `stored` and `next`.
fn spec_changed(generation: Generation, stored: &Value, next: &Value) -> bool {
    match generation {
        Generation::Untracked => false,
        Generation::Fields(fields) => fields
            .iter()
            .any(|field| stored.get(field) != next.get(field)),
        Generation::AllButMetadata { status } => {
            let counts = |key: &String| {
                let ignored = matches!(key.as_str(), "apiVersion" | "kind" | "metadata")
                    || (status && key == "status");
                !ignored
            };
            let empty = serde_json::Map::new();
            let old = stored.as_object().unwrap_or(&empty);
            let new = next.as_object().unwrap_or(&empty);
            old.keys()
                .chain(new.keys())
                .filter(|key| counts(key))
                .any(|key| old.get(key) != new.get(key))
        }
    }
}

/// Refuses an object deeper than [`MAX_DEPTH`](kcp_apimachinery::json::MAX_DEPTH) before
/// anything is stored, for every write (create, update, patch, subresources, dry runs,
/// controllers' privileged writes): 400, as kube-apiserver answers a body its decoder cannot
/// read (patches meet the same limit earlier, with 422, when they are applied).
fn check_depth(target: &Target<'_>, object: &Value) -> Result<(), RegistryError> {
    use kcp_apimachinery::json::{MAX_DEPTH, depth_message, exceeds_depth};
    if exceeds_depth(object, MAX_DEPTH) {
        return Err(validation::decode_error(
            &target.resource.kind,
            &target.resource.version,
            &depth_message(),
        ));
    }
    Ok(())
}

/// An object's stored bytes: JSON in Kubernetes' key order (`kcp_apis::messages::to_json`),
/// so a GET can serve them as they are.
pub(crate) fn encode(object: &Value) -> Result<Bytes, RegistryError> {
    Ok(Bytes::from(kcp_apis::messages::to_json(object)))
}

/// Reads a stored object with the tolerant decoder: whatever depth an older server stored, it
/// reads (parts deeper than `MAX_READ_DEPTH` as their JSON text) and never exhausts the stack.
pub(crate) fn decode(kv: &KeyValue) -> Result<Value, RegistryError> {
    let mut object = kcp_apimachinery::json::decode_stored(&kv.value)
        .map_err(|e| RegistryError::Internal(format!("stored object is not JSON: {e}")))?;
    meta::set_resource_version(&mut object, kv.mod_revision);
    if let Some(cluster) = cluster_of_key(&kv.key) {
        meta::set_cluster_annotation(&mut object, cluster);
    }
    Ok(object)
}

/// A stored object's JSON as [`decode`] reads it (resourceVersion and the cluster annotation
/// added), made from the stored bytes, whose keys are in `order` (`served_from_stored_in`):
/// the bytes of [`decode`] encoded again, without decoding. `None` when the bytes must be
/// decoded (see there).
pub(crate) fn json_answer(kv: &KeyValue, order: KeyOrder) -> Option<Vec<u8>> {
    kcp_apimachinery::json::served_from_stored_in(
        order,
        &kv.value,
        kv.mod_revision,
        (meta::CLUSTER_ANNOTATION, cluster_of_key(&kv.key)?),
    )
}

/// [`json_answer`] for an item of a list of a built-in kind: without `kind` and `apiVersion`
/// (`listed_from_stored`).
pub(crate) fn listed_json_answer(kv: &KeyValue) -> Option<Vec<u8>> {
    kcp_apimachinery::json::listed_from_stored(
        &kv.value,
        kv.mod_revision,
        (meta::CLUSTER_ANNOTATION, cluster_of_key(&kv.key)?),
    )
}

/// The logical cluster a storage key names (`/registry/<group>/<resource>/<cluster>/...`).
pub(crate) fn cluster_of_key(key: &[u8]) -> Option<&str> {
    let key = std::str::from_utf8(key).ok()?.strip_prefix("/registry/")?;
    key.split('/').nth(2)
}

/// The key space of `resource`'s objects: under its APIExport's identity when it is bound
/// (`<resource>:<identity>`), so it never mixes with a local CRD's or another export's.
pub(crate) fn resource_keys(resource: &Resource) -> ResourceKeys {
    let identity = Some(resource.identity()).filter(|identity| !identity.is_empty());
    ResourceKeys::with_identity(&resource.group, &resource.name, identity)
}
