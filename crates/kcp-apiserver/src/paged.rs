//! A collection read page by page from one storage snapshot, for answers that stream it: lists
//! without a limit and a watch's initial events. One page is in memory at a time; the next is
//! read (with the continue token of the last, so from the same snapshot) only once the answer
//! has taken the one before. Remaining items are never counted (`skip_count`), so each page
//! costs the same however long the collection is.

use std::collections::VecDeque;

use kcp_apis::builtin::Resource;
use kcp_registry::{JsonAnswer, ListOptions, Registry, RegistryError, Target};
use serde_json::Value;

use crate::handlers::selector_filter;
use crate::scope::Params;

/// Objects read from storage at once.
pub(crate) const PAGE: usize = 500;

/// The pages of a collection still to read.
pub(crate) struct Pages {
    registry: Registry,
    cluster: String,
    namespace: Option<String>,
    resource: Resource,
    params: Params,
    continue_token: Option<String>,
    /// Objects of the current page not yet taken by [`Pages::next`].
    page: VecDeque<Value>,
    /// JSON answers of the current page not yet taken by [`Pages::next_item`], once
    /// [`Pages::with_first_json`] made these pages of JSON answers.
    answers: Option<VecDeque<Vec<u8>>>,
    /// What the JSON answers stand for: a list's items or the objects.
    answers_as: JsonAnswer,
    revision: u64,
}

/// An object of a collection as [`Pages::next_item`] gives it.
pub(crate) enum Item {
    Object(Value),
    /// Its JSON answer ([`Registry::list_json`]).
    Json(Vec<u8>),
}

impl Pages {
    /// Nothing read yet: the first page is at `revision` (0: the latest).
    fn new(registry: &Registry, target: Target<'_>, params: &Params, revision: u64) -> Pages {
        Pages {
            registry: registry.clone(),
            cluster: target.cluster.to_string(),
            namespace: target.namespace.map(str::to_string),
            resource: target.resource.clone(),
            params: params.clone(),
            continue_token: None,
            page: VecDeque::new(),
            answers: None,
            answers_as: JsonAnswer::Object,
            revision,
        }
    }

    /// Reads the first page at `revision` (0: the latest); the rest follow from the same
    /// snapshot, whose revision [`Pages::revision`] answers.
    pub(crate) async fn first(
        registry: &Registry,
        target: Target<'_>,
        params: &Params,
        revision: u64,
    ) -> Result<(Pages, Vec<Value>), RegistryError> {
        let mut pages = Pages::new(registry, target, params, revision);
        let first = pages.read(None).await?;
        Ok((pages, first))
    }

    /// The revision of the snapshot every page reads.
    pub(crate) fn revision(&self) -> u64 {
        self.revision
    }

    /// The next page; `None` after the last.
    pub(crate) async fn next_page(&mut self) -> Option<Result<Vec<Value>, RegistryError>> {
        let token = self.continue_token.take()?;
        Some(self.read(Some(token)).await)
    }

    /// The next object, reading the next page when this one is taken; `None` after the last.
    pub(crate) async fn next(&mut self) -> Option<Result<Value, RegistryError>> {
        loop {
            if let Some(object) = self.page.pop_front() {
                return Some(Ok(object));
            }
            match self.next_page().await? {
                Ok(page) => self.page = page.into(),
                Err(error) => return Some(Err(error)),
            }
        }
    }

    /// [`Pages::first`] with each object as its JSON answer ([`Registry::list_json`]) as
    /// `answers` says (a list's items, or the objects); `None` for collections read as objects
    /// (custom resources, selectors).
    pub(crate) async fn first_json(
        registry: &Registry,
        target: Target<'_>,
        params: &Params,
        revision: u64,
        answers: JsonAnswer,
    ) -> Result<Option<(Pages, Vec<Vec<u8>>)>, RegistryError> {
        if selector_filter(params, target.resource)?.is_some() {
            return Ok(None);
        }
        let mut pages = Pages::new(registry, target, params, revision);
        pages.answers_as = answers;
        Ok(pages.read_json(None).await?.map(|first| (pages, first)))
    }

    /// The next page of JSON answers (after [`Pages::first_json`]); `None` after the last.
    pub(crate) async fn next_json_page(&mut self) -> Option<Result<Vec<Vec<u8>>, RegistryError>> {
        let token = self.continue_token.take()?;
        match self.read_json(Some(token)).await {
            Ok(Some(page)) => Some(Ok(page)),
            Ok(None) => Some(Err(RegistryError::Internal(
                "a collection listed as JSON no longer is".into(),
            ))),
            Err(error) => Some(Err(error)),
        }
    }

    fn options(&self, continue_token: Option<String>) -> ListOptions {
        ListOptions {
            limit: PAGE,
            continue_token,
            filter: None,
            revision: self.revision,
            skip_count: true,
        }
    }

    async fn read_json(
        &mut self,
        continue_token: Option<String>,
    ) -> Result<Option<Vec<Vec<u8>>>, RegistryError> {
        let target = Target {
            cluster: &self.cluster,
            resource: &self.resource,
            namespace: self.namespace.as_deref(),
        };
        let options = self.options(continue_token);
        let Some(listed) = self
            .registry
            .list_json(target, options, self.answers_as)
            .await?
        else {
            return Ok(None);
        };
        self.continue_token = listed.continue_token;
        self.revision = listed.resource_version;
        Ok(Some(listed.items))
    }

    /// Reads the page after `continue_token` (the first without one).
    async fn read(&mut self, continue_token: Option<String>) -> Result<Vec<Value>, RegistryError> {
        let target = Target {
            cluster: &self.cluster,
            resource: &self.resource,
            namespace: self.namespace.as_deref(),
        };
        let options = ListOptions {
            filter: selector_filter(&self.params, &self.resource)?,
            ..self.options(continue_token)
        };
        let listed = self.registry.list(target, options).await?;
        self.continue_token = listed.continue_token;
        self.revision = listed.resource_version;
        Ok(listed.items)
    }

    /// Hands the first page back to be taken object by object with [`Pages::next`].
    pub(crate) fn with_first(mut self, first: Vec<Value>) -> Pages {
        self.page = first.into();
        self
    }

    /// Hands the first page of JSON answers ([`Pages::first_json`]) back to be taken answer by
    /// answer with [`Pages::next_item`].
    pub(crate) fn with_first_json(mut self, first: Vec<Vec<u8>>) -> Pages {
        self.answers = Some(first.into());
        self
    }

    /// The next object, as a JSON answer for pages of them ([`Pages::with_first_json`]), else
    /// decoded ([`Pages::next`]); `None` after the last.
    pub(crate) async fn next_item(&mut self) -> Option<Result<Item, RegistryError>> {
        if self.answers.is_none() {
            return Some(self.next().await?.map(Item::Object));
        }
        loop {
            if let Some(answer) = self.answers.as_mut()?.pop_front() {
                return Some(Ok(Item::Json(answer)));
            }
            match self.next_json_page().await? {
                Ok(page) => self.answers = Some(page.into()),
                Err(error) => return Some(Err(error)),
            }
        }
    }
}
