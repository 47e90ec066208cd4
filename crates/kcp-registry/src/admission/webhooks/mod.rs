//! Admission webhooks, as kube-apiserver calls them, per logical cluster: the
//! Validating- and MutatingWebhookConfigurations of a workspace apply to the requests in it;
//! for a resource bound from an APIExport, those of the export's workspace apply instead (and
//! the consumer's own never do), as kcp does it.
//!
//! A write made for a user (a [`crate::store::Requester`]) calls the mutating webhooks that
//! match it at the end of the mutating phase, one after another, in the order of their
//! configurations' names: each answer's JSON patch is applied before the next is called, and
//! webhooks with `reinvocationPolicy: IfNeeded` are called once more when a later one changed
//! the object. The validating webhooks are called together near the end of the validating
//! phase, with the object as it will be stored (uid and creationTimestamp set). The server's
//! own writes call none.
//!
//! A webhook is called when a rule matches the operation, group, version, resource and
//! subresource and scope (`matching`), its namespace selector the namespace's labels, its
//! object selector the object's or the old object's labels, and every match condition is
//! true (CEL over `object`, `oldObject`, `request`; `authorizer` is not offered, so a
//! condition naming it fails and the failure policy decides). The object sent carries the
//! `kcp.io/cluster` annotation of the workspace it is written in, as kcp sends it.
//!
//! Failures read as kube-apiserver's: `admission webhook "X" denied the request: ...` with the
//! webhook's code and reason; `Internal error occurred: failed calling webhook "X": failed to
//! call webhook: Post "<url>?timeout=10s": ...` with `failurePolicy: Fail` (with `Ignore` the
//! request goes on). Warnings and audit annotations go to the request's [`Notes`].
//!
//! The HTTP call is not the registry's: a [`WebhookCaller`] the composition root provides posts
//! the review. Services named by `clientConfig.service` are resolved here, in the
//! configuration's workspace (`resolve`).

pub(crate) mod config;
pub(crate) mod matching;
mod resolve;
mod review;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use kcp_apimachinery::labels::Selector;
use kcp_apimachinery::schema::cel::{Evaluation, Outcome};
use serde_json::{Map, Value, json};

pub(crate) use config::CONDITION_VARIABLES;

use crate::error::RegistryError;
use crate::store::{Registry, Target};
use config::{Location, Webhook};
use matching::{Asked, matched_version};

/// Posts AdmissionReviews to webhooks over HTTPS.
pub trait WebhookCaller: Send + Sync {
    /// The JSON answer to `call`, or why there is none, worded after kube-apiserver's
    /// `Post "<url>": ` (`... context deadline exceeded` when the timeout passed).
    fn post<'a>(&'a self, call: WebhookCall<'a>) -> BoxFuture<'a, Result<Value, String>>;
}

/// One call of a webhook.
#[derive(Debug)]
pub struct WebhookCall<'a> {
    /// `https://...`, with kube-apiserver's `?timeout=<n>s`.
    pub url: String,
    /// PEM certificates to trust (the system's roots when absent).
    pub ca_bundle: Option<&'a [u8]>,
    /// The name the webhook's certificate must carry when not the URL's host.
    pub server_name: Option<String>,
    pub body: Vec<u8>,
    pub timeout: Duration,
}

/// What admission says about a request besides its verdict: warnings for the client and
/// annotations for the audit log. One per request, shared by the registry views serving it.
#[derive(Debug, Default)]
pub struct Notes {
    warnings: Mutex<Vec<String>>,
    annotations: Mutex<Vec<(String, String)>>,
}

impl Notes {
    pub(crate) fn warn(&self, warning: String) {
        self.warnings
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(warning);
    }

    pub(crate) fn annotate(&self, key: String, value: String) {
        self.annotations
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((key, value));
    }

    /// The warnings so far, taken.
    pub fn take_warnings(&self) -> Vec<String> {
        std::mem::take(&mut *self.warnings.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// The audit annotations so far.
    pub fn annotations(&self) -> Vec<(String, String)> {
        self.annotations
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// The admission operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Operation {
    Create,
    Update,
    Delete,
}

impl Operation {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
        }
    }

    fn options_kind(self) -> &'static str {
        match self {
            Operation::Create => "CreateOptions",
            Operation::Update => "UpdateOptions",
            Operation::Delete => "DeleteOptions",
        }
    }
}

/// A write as webhooks see it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Write<'a> {
    pub(crate) operation: Operation,
    pub(crate) target: &'a Target<'a>,
    pub(crate) name: &'a str,
    /// The stored object (updates, deletes).
    pub(crate) old: Option<&'a Value>,
}

/// Which phase calls: mutating or validating webhooks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Mutating,
    Validating,
}

impl Kind {
    fn audit_prefix(self) -> &'static str {
        match self {
            Kind::Mutating => "mutation.webhook.admission.k8s.io",
            Kind::Validating => "validating.webhook.admission.k8s.io",
        }
    }
}

/// One call of one webhook: which write, the workspace of its configuration, the version it
/// sees, and its place (round and index) for audit annotations.
struct Call<'a> {
    write: &'a Write<'a>,
    configured_in: &'a str,
    hook: &'a Webhook,
    version: &'a str,
    kind: Kind,
    round: u32,
    index: usize,
}

/// Why a webhook did not admit a request.
enum Failure {
    /// It could not be called, or answered nonsense: `failurePolicy` decides.
    Call(String),
    /// It refused.
    Refused(RegistryError),
}

impl Registry {
    /// The webhooks (of `kind`) that apply to `write`, with the version each sees it at; empty
    /// for the server's own writes and when no webhook caller is set.
    async fn webhooks_for(
        &self,
        write: &Write<'_>,
        object: Option<&Value>,
        kind: Kind,
    ) -> Result<(String, Vec<(Arc<Webhook>, String)>), RegistryError> {
        let target = write.target;
        let resource = target.resource;
        let Some(configured_in) = self
            .configured_in(target)
            .filter(|_| self.webhook_caller().is_some())
        else {
            return Ok((String::new(), Vec::new()));
        };
        let configurations = self
            .admission_configurations()
            .of(self, &configured_in)
            .await?;
        let hooks = match kind {
            Kind::Mutating => &configurations.mutating,
            Kind::Validating => &configurations.validating,
        };
        if hooks.is_empty() {
            return Ok((configured_in, Vec::new()));
        }
        let other_versions = other_versions(resource);
        let asked = self.asked(write, &other_versions);
        let namespace = asked.namespace;
        let mut namespace_labels: Option<Value> = None;
        let mut matched = Vec::new();
        for hook in hooks {
            let Some(version) = matched_version(hook, &asked) else {
                continue;
            };
            if !hook.namespace_selector.is_empty() && !namespace.is_empty() {
                if namespace_labels.is_none() {
                    namespace_labels = Some(self.namespace_labels(target, write, object).await?);
                }
                let labels = namespace_labels.as_ref().unwrap_or(&Value::Null);
                if !hook.namespace_selector.matches(labels) {
                    continue;
                }
            }
            if !selects(&hook.object_selector, object, write.old) {
                continue;
            }
            matched.push((Arc::clone(hook), version.to_string()));
        }
        Ok((configured_in, matched))
    }

    /// The logical cluster whose admission configuration (webhooks, policies) applies to
    /// writes of `target`: its own, or for a bound resource the export's; `None` for the
    /// server's own writes, which admission configurations do not concern.
    pub(crate) fn configured_in(&self, target: &Target<'_>) -> Option<String> {
        if self.requester().is_none() || self.is_privileged() {
            return None;
        }
        let resource = target.resource;
        match resource.custom().filter(|c| !c.identity.is_empty()) {
            Some(_) => self
                .bound_export(target.cluster, &resource.group, &resource.name)
                .map(|(cluster, _)| cluster),
            None => Some(target.cluster.to_string()),
        }
    }

    /// Calls the webhooks and policies that apply to deleting `name` (mutating webhooks for
    /// their verdict only), reading the object only when the cluster has some.
    pub(crate) async fn call_delete_webhooks(
        &self,
        target: &Target<'_>,
        name: &str,
    ) -> Result<(), RegistryError> {
        let Some(configured_in) = self.configured_in(target) else {
            return Ok(());
        };
        let configurations = self
            .admission_configurations()
            .of(self, &configured_in)
            .await?;
        if configurations.is_empty() {
            return Ok(());
        }
        let old = match self.get(*target, name).await {
            Ok(old) => old,
            // Deleting what is not there fails later with its own 404.
            Err(RegistryError::NotFound { .. }) => return Ok(()),
            Err(error) => return Err(error),
        };
        let write = Write {
            operation: Operation::Delete,
            target,
            name,
            old: Some(&old),
        };
        self.call_mutating_webhooks(&write, None).await?;
        self.call_policies(&write, None).await?;
        self.call_validating_webhooks(&write, None).await
    }

    /// `write` as rules see it.
    pub(crate) fn asked<'a>(
        &self,
        write: &'a Write<'a>,
        other_versions: &'a [String],
    ) -> Asked<'a> {
        let resource = write.target.resource;
        Asked {
            operation: write.operation.as_str(),
            group: &resource.group,
            version: &resource.version,
            resource: &resource.name,
            subresource: self.part().subresource_name(),
            namespace: self.request_namespace(write.target, write.name),
            other_versions,
            name: write.name,
        }
    }

    /// The namespace a write is in for selectors: its own for namespaced objects, the
    /// namespace's name for a Namespace, none otherwise.
    pub(crate) fn request_namespace<'a>(&self, target: &'a Target<'a>, name: &'a str) -> &'a str {
        let resource = target.resource;
        if is_namespace(resource) {
            return name;
        }
        match target.namespace {
            Some(namespace) if resource.namespaced => namespace,
            _ => "",
        }
    }

    /// The labels of the write's namespace (a Namespace's own, as written).
    pub(crate) async fn namespace_labels(
        &self,
        target: &Target<'_>,
        write: &Write<'_>,
        object: Option<&Value>,
    ) -> Result<Value, RegistryError> {
        if is_namespace(target.resource) {
            return Ok(own_labels(object, write.old));
        }
        let Some(namespace) = target.namespace else {
            return Ok(Value::Null);
        };
        Ok(self.namespace_object(target, namespace).await?["metadata"]["labels"].take())
    }

    /// The namespace `namespace` of the write's cluster (null when it does not exist).
    pub(crate) async fn namespace_object(
        &self,
        target: &Target<'_>,
        namespace: &str,
    ) -> Result<Value, RegistryError> {
        let namespaces = Target {
            cluster: target.cluster,
            resource: crate::store::namespaces(),
            namespace: None,
        };
        match self.get(namespaces, namespace).await {
            Ok(found) => Ok(found),
            Err(RegistryError::NotFound { .. }) => Ok(Value::Null),
            Err(error) => Err(error),
        }
    }

    /// Calls the mutating webhooks that apply to `write`, applying their patches to `object`
    /// (absent for deletes).
    pub(crate) async fn call_mutating_webhooks(
        &self,
        write: &Write<'_>,
        object: Option<&mut Value>,
    ) -> Result<(), RegistryError> {
        let (configured_in, hooks) = self
            .webhooks_for(write, object.as_deref(), Kind::Mutating)
            .await?;
        if hooks.is_empty() {
            return Ok(());
        }
        let mut none = Value::Null;
        let had_object = object.is_some();
        let object = object.unwrap_or(&mut none);
        // Which webhooks ran before the object last changed, for reinvocation.
        let mut last_change: Option<usize> = None;
        for (index, (hook, version)) in hooks.iter().enumerate() {
            let sent = had_object.then_some(&*object);
            let call = Call {
                write,
                configured_in: &configured_in,
                hook,
                version,
                kind: Kind::Mutating,
                round: 0,
                index,
            };
            let changed = self.call_one(&call, sent).await?;
            if let Some(changed) = changed.filter(|_| had_object) {
                *object = changed;
                last_change = Some(index);
            }
        }
        if let Some(last) = last_change {
            for (index, (hook, version)) in hooks.iter().enumerate().take(last) {
                if !hook.reinvoke {
                    continue;
                }
                let call = Call {
                    write,
                    configured_in: &configured_in,
                    hook,
                    version,
                    kind: Kind::Mutating,
                    round: 1,
                    index,
                };
                let changed = self.call_one(&call, Some(object)).await?;
                if let Some(changed) = changed {
                    *object = changed;
                }
            }
        }
        if had_object && last_change.is_some() {
            crate::validation::prepare(write.target.resource, object)?;
        }
        Ok(())
    }

    /// Calls the validating webhooks that apply to `write` (all at once); the first refusal,
    /// in their order, is the answer.
    pub(crate) async fn call_validating_webhooks(
        &self,
        write: &Write<'_>,
        object: Option<&Value>,
    ) -> Result<(), RegistryError> {
        let (configured_in, hooks) = self.webhooks_for(write, object, Kind::Validating).await?;
        if hooks.is_empty() {
            return Ok(());
        }
        let calls: Vec<Call<'_>> = hooks
            .iter()
            .enumerate()
            .map(|(index, (hook, version))| Call {
                write,
                configured_in: &configured_in,
                hook,
                version,
                kind: Kind::Validating,
                round: 0,
                index,
            })
            .collect();
        let answers = calls.iter().map(|call| self.call_one(call, object));
        for result in futures::future::join_all(answers).await {
            result?;
        }
        Ok(())
    }

    /// Calls `hook` once if its match conditions hold; a mutating webhook's patched object
    /// when it changed it.
    async fn call_one(
        &self,
        call: &Call<'_>,
        object: Option<&Value>,
    ) -> Result<Option<Value>, RegistryError> {
        let Call {
            hook,
            kind,
            round,
            index,
            ..
        } = *call;
        let failure = match self.try_call(call, object).await {
            Ok(changed) => return Ok(changed),
            Err(failure) => failure,
        };
        match failure {
            Failure::Refused(error) => Err(error),
            Failure::Call(reason) if hook.fail_open => {
                tracing::warn!(webhook = %hook.name, %reason, "failed calling webhook, failing open");
                if let Some(notes) = self.notes() {
                    notes.annotate(
                        format!(
                            "failed-open.{}/round_{round}_index_{index}",
                            kind.audit_prefix()
                        ),
                        hook.name.clone(),
                    );
                }
                Ok(None)
            }
            Failure::Call(reason) => Err(RegistryError::Refused {
                code: 500,
                reason: "InternalError".into(),
                message: format!(
                    "Internal error occurred: failed calling webhook {}: {reason}",
                    review::go_quote(&hook.name)
                ),
                details: Some(json!({"causes": [{"message": format!(
                    "failed calling webhook {}: {reason}",
                    review::go_quote(&hook.name)
                )}]})),
            }),
        }
    }

    async fn try_call(
        &self,
        call: &Call<'_>,
        object: Option<&Value>,
    ) -> Result<Option<Value>, Failure> {
        let Call {
            write,
            configured_in,
            hook,
            version,
            kind,
            round,
            index,
        } = *call;
        let Some(caller) = self.webhook_caller() else {
            return Ok(None);
        };
        let Some(review_version) = hook.review_version else {
            return Err(Failure::Call(
                "webhook does not accept known AdmissionReview versions (v1, v1beta1)".into(),
            ));
        };
        let request_version: &str = &write.target.resource.version;
        let sent_object = self.object_at(write, version, object).await?;
        let sent_old = self.object_at(write, version, write.old).await?;
        let request = self.admission_request(write, version, sent_object, sent_old);
        if !hook.conditions.is_empty() && !conditions_hold(hook, &request)? {
            return Ok(None);
        }
        if self.is_dry_run() && !hook.dry_run_safe {
            return Err(Failure::Refused(RegistryError::BadRequest(format!(
                "admission webhook {} does not support dry run",
                review::go_quote(&hook.name)
            ))));
        }
        let (url, server_name) = match &hook.location {
            Location::Url(url) => (url.clone(), None),
            Location::Service {
                namespace,
                name,
                path,
                port,
            } => {
                let shown = format!("https://{name}.{namespace}.svc:{port}{path}");
                match self
                    .resolve_service(configured_in, namespace, name, *port)
                    .await
                {
                    Ok(address) => (
                        format!("https://{address}{path}"),
                        Some(format!("{name}.{namespace}.svc")),
                    ),
                    Err(reason) => {
                        return Err(Failure::Call(format!(
                            "failed to call webhook: Post {}: {reason}",
                            review::go_quote(&with_timeout(&shown, hook.timeout))
                        )));
                    }
                }
            }
        };
        let uid = crate::meta::new_uid();
        let review_body = review::review(review_version, &uid, request);
        let body = serde_json::to_vec(&review_body).map_err(|e| Failure::Call(e.to_string()))?;
        let call = WebhookCall {
            url: with_timeout(&url, hook.timeout),
            ca_bundle: hook.ca_bundle.as_deref(),
            server_name,
            body,
            timeout: hook.timeout,
        };
        let answered = caller
            .post(call)
            .await
            .map_err(|e| Failure::Call(format!("failed to call webhook: {e}")))?;
        let answer = review::answer(review_version, &uid, kind == Kind::Mutating, &answered)
            .map_err(|e| Failure::Call(format!("received invalid webhook response: {e}")))?;
        if let Some(notes) = self.notes() {
            for warning in &answer.warnings {
                notes.warn(warning.clone());
            }
            for (key, value) in &answer.audit_annotations {
                notes.annotate(format!("{}/{key}", hook.name), value.clone());
            }
        }
        if !answer.allowed {
            return Err(Failure::Refused(refusal(&hook.name, &answer.status)));
        }
        let Some(patch) = answer.patch.filter(|_| kind == Kind::Mutating) else {
            self.note_mutation(hook, round, index, false);
            return Ok(None);
        };
        let Some(object) = object else {
            return Ok(None);
        };
        let base = self.object_at(write, version, Some(object)).await?;
        let patched = kcp_apimachinery::patch::json_patch(&base, &patch).map_err(|e| {
            Failure::Refused(RegistryError::Internal(format!(
                "Internal error occurred: {e}"
            )))
        })?;
        let mut patched = if version == request_version {
            patched
        } else {
            self.convert(write.target.resource, vec![patched], request_version)
                .await
                .map_err(Failure::Refused)?
                .pop()
                .unwrap_or(Value::Null)
        };
        crate::meta::remove_cluster_annotation(&mut patched);
        let changed = patched != *object;
        self.note_mutation(hook, round, index, changed);
        Ok(changed.then_some(patched))
    }

    /// `value` as sent to a webhook: at `version`, with the `kcp.io/cluster` annotation.
    async fn object_at(
        &self,
        write: &Write<'_>,
        version: &str,
        value: Option<&Value>,
    ) -> Result<Value, Failure> {
        self.admitted_object(write, version, value)
            .await
            .map_err(Failure::Call)
    }

    /// `value` as admission configurations see it: at `version` of its resource, with the
    /// `kcp.io/cluster` annotation of the write's cluster; null when there is none.
    pub(crate) async fn admitted_object(
        &self,
        write: &Write<'_>,
        version: &str,
        value: Option<&Value>,
    ) -> Result<Value, String> {
        let Some(value) = value else {
            return Ok(Value::Null);
        };
        let mut value = if version == write.target.resource.version.as_ref() as &str {
            value.clone()
        } else {
            self.convert(write.target.resource, vec![value.clone()], version)
                .await
                .ok()
                .and_then(|mut converted| converted.pop())
                .ok_or_else(|| {
                    "could not create admission objects: conversion failed".to_string()
                })?
        };
        crate::meta::set_cluster_annotation(&mut value, write.target.cluster);
        Ok(value)
    }

    fn note_mutation(&self, hook: &Webhook, round: u32, index: usize, mutated: bool) {
        if let Some(notes) = self.notes() {
            notes.annotate(
                format!("{}/round_{round}_index_{index}", Kind::Mutating.audit_prefix()),
                json!({"configuration": hook.configuration, "webhook": hook.name, "mutated": mutated})
                    .to_string(),
            );
        }
    }

    /// The AdmissionRequest of `write` (without its uid), the object at `version`.
    pub(crate) fn admission_request(
        &self,
        write: &Write<'_>,
        version: &str,
        object: Value,
        old: Value,
    ) -> Map<String, Value> {
        let resource = write.target.resource;
        let kind = json!({"group": resource.group, "version": version, "kind": resource.kind});
        let gvr = json!({"group": resource.group, "version": version, "resource": resource.name});
        let request_kind =
            json!({"group": resource.group, "version": resource.version, "kind": resource.kind});
        let request_resource = json!({"group": resource.group, "version": resource.version, "resource": resource.name});
        let mut request = Map::new();
        request.insert("kind".into(), kind);
        request.insert("resource".into(), gvr);
        let subresource = self.part().subresource_name();
        if !subresource.is_empty() {
            request.insert("subResource".into(), json!(subresource));
            request.insert("requestSubResource".into(), json!(subresource));
        }
        request.insert("requestKind".into(), request_kind);
        request.insert("requestResource".into(), request_resource);
        if !write.name.is_empty() {
            request.insert("name".into(), json!(write.name));
        }
        if let Some(namespace) = write.target.namespace.filter(|_| resource.namespaced) {
            request.insert("namespace".into(), json!(namespace));
        }
        request.insert("operation".into(), json!(write.operation.as_str()));
        if let Some(requester) = self.requester() {
            let mut user = Map::new();
            user.insert("username".into(), json!(requester.name));
            if !requester.uid.is_empty() {
                user.insert("uid".into(), json!(requester.uid));
            }
            if !requester.groups.is_empty() {
                user.insert("groups".into(), json!(requester.groups));
            }
            if !requester.extra.is_empty() {
                user.insert("extra".into(), json!(requester.extra));
            }
            request.insert("userInfo".into(), Value::Object(user));
        }
        request.insert("object".into(), object);
        request.insert("oldObject".into(), old);
        request.insert("dryRun".into(), json!(self.is_dry_run()));
        let mut options =
            json!({"kind": write.operation.options_kind(), "apiVersion": "meta.k8s.io/v1"});
        if self.is_dry_run() {
            options["dryRun"] = json!(["All"]);
        }
        if let Some(manager) = self
            .manager()
            .filter(|_| write.operation != Operation::Delete)
        {
            options["fieldManager"] = json!(manager);
        }
        request.insert("options".into(), options);
        request
    }
}

/// Whether `resource` is the core group's Namespaces (whose objects are their own namespace).
pub(crate) fn is_namespace(resource: &kcp_apis::builtin::Resource) -> bool {
    resource.group.is_empty() && resource.name == "namespaces"
}

/// A Namespace's own labels, as written (or as stored, for a delete).
pub(crate) fn own_labels(object: Option<&Value>, old: Option<&Value>) -> Value {
    object
        .or(old)
        .map(|o| o["metadata"]["labels"].clone())
        .unwrap_or(Value::Null)
}

/// The served versions of a custom resource (for `matchPolicy: Equivalent`).
pub(crate) fn other_versions(resource: &kcp_apis::builtin::Resource) -> Vec<String> {
    resource
        .custom()
        .map(|c| c.versions.clone())
        .unwrap_or_default()
}

/// Whether the object (or, for updates and deletes, the old object) is selected.
pub(crate) fn selects(selector: &Selector, object: Option<&Value>, old: Option<&Value>) -> bool {
    if selector.is_empty() {
        return true;
    }
    [object, old]
        .into_iter()
        .flatten()
        .filter(|o| !o.is_null())
        .any(|o| selector.matches(&o["metadata"]["labels"]))
}

/// Whether every match condition of `hook` is true for `request`; a condition that fails to
/// evaluate is a call failure (its failure policy decides).
fn conditions_hold(hook: &Webhook, request: &Map<String, Value>) -> Result<bool, Failure> {
    let mut evaluation = Evaluation::new();
    evaluation.bind("object", request.get("object").unwrap_or(&Value::Null));
    evaluation.bind(
        "oldObject",
        request.get("oldObject").unwrap_or(&Value::Null),
    );
    evaluation.bind("request", &Value::Object(request.clone()));
    let mut errors = Vec::new();
    for (name, expression) in &hook.conditions {
        let outcome = match expression {
            Ok(expression) => evaluation.run(expression),
            Err(error) => Outcome::Failed(error.clone()),
        };
        match outcome {
            Outcome::Bool(true) => {}
            Outcome::Bool(false) => return Ok(false),
            Outcome::Failed(e) | Outcome::Exceeded(e) => {
                errors.push(format!(
                    "error evaluating match condition {}: {e}",
                    review::go_quote(name)
                ));
            }
            Outcome::String(_) | Outcome::Other(_) => errors.push(format!(
                "error evaluating match condition {}: the expression did not return a bool",
                review::go_quote(name)
            )),
        }
    }
    match errors.is_empty() {
        true => Ok(true),
        false => Err(Failure::Call(format!(
            "failed to evaluate match conditions: {}",
            errors.join("; ")
        ))),
    }
}

/// `url` with kube-apiserver's `timeout` query parameter.
fn with_timeout(url: &str, timeout: Duration) -> String {
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}timeout={}s", timeout.as_secs())
}

/// A webhook's refusal as kube-apiserver words it (`ToStatusErr`).
fn refusal(name: &str, status: &Value) -> RegistryError {
    let denied_by = format!(
        "admission webhook {} denied the request",
        review::go_quote(name)
    );
    let message = status["message"].as_str().filter(|m| !m.is_empty());
    let reason = status["reason"].as_str().unwrap_or_default();
    let message = match (message, reason) {
        (Some(message), _) => format!("{denied_by}: {message}"),
        (None, reason) if !reason.is_empty() => format!("{denied_by}: {reason}"),
        _ => format!("{denied_by} without explanation"),
    };
    let code = status["code"]
        .as_u64()
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| *c >= 400)
        .unwrap_or(400);
    RegistryError::Refused {
        code,
        reason: reason.to_string(),
        message,
        details: status.get("details").cloned(),
    }
}
