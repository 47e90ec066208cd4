//! `list`: one page of a resource (in a namespace, a logical cluster or all of them) from one
//! storage snapshot, filtered by label and field selectors, as the client asked for it. Without
//! a `limit`, the whole collection, streamed ([`super::list_stream`]). A page in plain JSON
//! without selectors is made of its objects' stored bytes, as the streamed list and a GET are,
//! without decoding them where they allow (what client-go's informers ask for, 500 at a time);
//! so is a JSON Table of a custom resource without selectors (what `kubectl get` asks for),
//! its rows made from those bytes ([`JsonRows`]).

use http::StatusCode;
use kcp_apimachinery::{fields, labels};
use kcp_apis::builtin::Resource;
use kcp_registry::{JsonAnswer, ListOptions, ListResult, RegistryError, kinds};
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::negotiation::{self, Conversion, Encoding, IncludeObject};
use crate::scope::{Params, RequestScope};
use crate::status::{Body, encoded_json, json_bytes};
use crate::table::JsonRows;

pub(super) async fn serve(scope: &RequestScope<'_>) -> Result<http::Response<Body>, ApiError> {
    let params = &scope.params;
    let read_at = crate::resource_version::for_list(params)?;
    let revision = read_at.revision(&scope.registry).await?;
    let filter = selector_filter(params, scope.resource)?;
    let limit = match params.get("limit") {
        Some(limit) => limit
            .parse::<usize>()
            .map_err(|_| RegistryError::BadRequest(format!("invalid limit: {limit}")))?,
        None => 0,
    };
    if limit == 0 {
        return super::list_stream::serve(scope, revision).await;
    }
    let too_old = |error: RegistryError| match error {
        RegistryError::Expired(_) if revision != 0 => {
            RegistryError::Expired("The resourceVersion for the provided list is too old.".into())
        }
        other => other,
    };
    let options = |filter| ListOptions {
        limit,
        continue_token: params.get("continue").map(str::to_string),
        filter,
        revision,
        skip_count: false,
    };
    let conversion = scope.negotiated.conversion;
    let json = scope.negotiated.encoding == Encoding::Json && filter.is_none();
    let rows = match conversion {
        Conversion::Table(version) if json => {
            JsonRows::new(scope.resource, version, IncludeObject::from_params(params)?)
        }
        _ => None,
    };
    if json && (conversion == Conversion::None || rows.is_some()) {
        let listed = scope
            .registry
            .list_json(scope.target(), options(None), JsonAnswer::ListItem);
        if let Some(page) = listed.await.map_err(too_old)? {
            let metadata = list_meta(&page);
            let items = match rows.map(|rows| rows.rows(&page.items)) {
                None => page.items,
                Some(Some(rows)) => rows,
                Some(None) => {
                    let objects = crate::table::decoded(&page.items)?;
                    let list = negotiation::render_list(
                        conversion,
                        scope.resource,
                        params,
                        objects,
                        metadata,
                    )?;
                    return Ok(scope.document(StatusCode::OK, &list));
                }
            };
            let empty =
                negotiation::render_list(conversion, scope.resource, params, Vec::new(), metadata)?;
            let body = super::list_stream::joined_json(json_bytes(&empty), &items)
                .ok_or_else(|| RegistryError::Internal("a list has no items to fill".into()))?;
            return Ok(encoded_json(StatusCode::OK, body));
        }
    }
    let result = scope
        .registry
        .list(scope.target(), options(filter))
        .await
        .map_err(too_old)?;
    let metadata = list_meta(&result);
    let list = negotiation::render_list(
        scope.negotiated.conversion,
        scope.resource,
        params,
        result.items,
        metadata,
    )?;
    Ok(scope.document(StatusCode::OK, &list))
}

/// The ListMeta of a page: its snapshot, and where the next page starts.
fn list_meta<T>(page: &ListResult<T>) -> Value {
    let mut metadata = json!({"resourceVersion": page.resource_version.to_string()});
    if let Some(token) = &page.continue_token {
        metadata["continue"] = json!(token);
    }
    if let Some(remaining) = page.remaining_item_count {
        metadata["remainingItemCount"] = json!(remaining);
    }
    metadata
}

/// The label and field selectors of a list or watch as one filter, if any was given.
pub(crate) fn selector_filter(
    params: &Params,
    resource: &Resource,
) -> Result<Option<kcp_registry::Filter>, RegistryError> {
    let label_selector =
        match params.get("labelSelector") {
            Some(s) => Some(labels::Selector::parse(s).map_err(|e| {
                RegistryError::BadRequest(format!("unable to parse requirement: {e}"))
            })?),
            None => None,
        };
    let field_selector = match params.get("fieldSelector") {
        Some(s) => {
            Some(fields::Selector::parse(s).map_err(|e| RegistryError::BadRequest(e.to_string()))?)
        }
        None => None,
    };
    if let Some(selector) = &field_selector {
        for requirement in selector.requirements() {
            if !kinds::selectable(resource, requirement.field()) {
                return Err(RegistryError::BadRequest(format!(
                    "field label not supported: {}",
                    requirement.field()
                )));
            }
        }
    }
    let restrict = params.restrict.clone();
    if label_selector.is_none() && field_selector.is_none() && restrict.is_none() {
        return Ok(None);
    }
    let kind = kinds::rules(resource);
    Ok(Some(Box::new(move |object: &Value| {
        label_selector
            .as_ref()
            .is_none_or(|s| s.matches(&object["metadata"]["labels"]))
            && field_selector
                .as_ref()
                .is_none_or(|s| s.matches(|field| kind.field_value(object, field)))
            && restrict.as_ref().is_none_or(|r| r.allows(object))
    })))
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use crate::test_support::{call, ensure_namespace, establish_crd, get_accepting, router};

    const GADGETS: &str = "/clusters/root/apis/example.com/v1/namespaces/default/gadgets";
    const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";

    /// A Table's rows: its JSON from `"rows":[` on.
    fn rows(body: &str) -> &str {
        &body[body.find("\"rows\":[").expect("a Table's rows")..]
    }

    async fn gadgets() -> crate::router::Router {
        let router = router();
        let crd = json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "gadgets.example.com"},
            "spec": {
                "group": "example.com",
                "scope": "Namespaced",
                "names": {"plural": "gadgets", "kind": "Gadget", "listKind": "GadgetList"},
                "versions": [{
                    "name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object",
                        "x-kubernetes-preserve-unknown-fields": true}},
                    "additionalPrinterColumns": [
                        {"name": "Color", "type": "string", "jsonPath": ".spec.color"},
                        {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                        {"name": "Tier", "type": "string",
                         "jsonPath": ".metadata.labels['tier']"},
                        {"name": "Parts", "type": "string", "jsonPath": ".spec.parts[*].name"},
                    ]
                }]
            }
        });
        establish_crd(&router, "root", &crd).await;
        ensure_namespace(&router, "root", "default").await;
        for i in 0..7 {
            let color = ["red", "green"][i % 2];
            let mut gadget = json!({
                "apiVersion": "example.com/v1", "kind": "Gadget",
                "metadata": {"name": format!("g{i}"), "annotations": {"a": "\"é\u{1}"}},
                "spec": {"color": color, "size": i,
                         "parts": [{"name": format!("p{i}")}]},
            });
            if i % 3 == 0 {
                gadget["metadata"]["labels"] = json!({"tier": "gold"});
            }
            let (code, body) = call(&router, "POST", GADGETS, &gadget.to_string()).await;
            assert_eq!(code, 201, "{body}");
        }
        router
    }

    #[tokio::test]
    async fn tables_made_from_stored_bytes_are_the_tables_of_decoded_objects() {
        let router = gadgets().await;
        for include in [
            "",
            "&includeObject=None",
            "&includeObject=Object",
            "&includeObject=Metadata",
        ] {
            // In pages, as kubectl asks (500 at a time); a selector that every object passes
            // has the objects decoded.
            let mut next = String::new();
            let mut pages = 0;
            loop {
                let query = format!("{GADGETS}?limit=3{include}{next}");
                let (code, fast) = get_accepting(&router, &query, TABLE).await;
                assert_eq!(code, 200, "{fast}");
                let decoded_query = format!("{query}&labelSelector=%21absent");
                let (code, decoded) = get_accepting(&router, &decoded_query, TABLE).await;
                assert_eq!(code, 200, "{decoded}");
                assert_eq!(rows(&fast), rows(&decoded), "{query}");
                pages += 1;
                let fast: Value = serde_json::from_str(&fast).unwrap();
                match fast["metadata"]["continue"].as_str() {
                    Some(token) => next = format!("&continue={token}"),
                    None => break,
                }
            }
            assert_eq!(pages, 3, "{include}");
            // Whole (a list without a limit is streamed).
            let query = format!("{GADGETS}?{include}");
            let (_, fast) = get_accepting(&router, &query, TABLE).await;
            let (_, decoded) =
                get_accepting(&router, &format!("{query}&labelSelector=%21absent"), TABLE).await;
            assert_eq!(rows(&fast), rows(&decoded), "{query}");
            assert_eq!(fast.matches("\"cells\":").count(), 7, "{fast}");
        }
        let (_, table) = get_accepting(&router, &format!("{GADGETS}?limit=1"), TABLE).await;
        let table: Value = serde_json::from_str(&table).unwrap();
        assert_eq!(
            table["rows"][0]["cells"],
            json!(["g0", "red", 0, "gold", "p0"])
        );
        assert_eq!(table["rows"][0]["object"]["kind"], "PartialObjectMetadata");
        assert_eq!(
            table["rows"][0]["object"]["metadata"]["annotations"]["a"],
            "\"é\u{1}"
        );
    }
}
