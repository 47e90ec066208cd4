//! Content negotiation: which representation a client gets, decided from its `Accept` header the
//! way kube-apiserver decides it.
//!
//! The first acceptable media range wins (ranges sorted by `q`, exact types before wildcards).
//! A range is acceptable when its type can be produced (JSON; YAML except for watches;
//! `application/vnd.kubernetes.protobuf` is answered in JSON, which clients decode by the
//! response's Content-Type) and its `as`/`g`/`v` parameters, if any, name a conversion the server
//! offers: `Table` (JSON or YAML only), `PartialObjectMetadata` or `PartialObjectMetadataList` in
//! `meta.k8s.io/v1` or `v1beta1`. No acceptable range answers 406 `NotAcceptable`.
//!
//! The conversions themselves ([`render_object`], [`render_list`]) also live here.

use http::{HeaderMap, StatusCode, header};
use kcp_apis::builtin::Resource;
use kcp_registry::RegistryError;
use serde_json::{Value, json};

use crate::scope::Params;
use crate::status::{Body, failure};

/// The media types kube-apiserver lists in its 406 message.
pub const ACCEPTED_MEDIA_TYPES: &str =
    "application/json, application/yaml, application/vnd.kubernetes.protobuf";

/// How the response body is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Json,
    Yaml,
}

/// Which `meta.k8s.io` version a conversion was asked in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetaVersion {
    V1,
    V1beta1,
}

impl MetaVersion {
    pub fn api_version(self) -> &'static str {
        match self {
            MetaVersion::V1 => "meta.k8s.io/v1",
            MetaVersion::V1beta1 => "meta.k8s.io/v1beta1",
        }
    }
}

/// The object the client asked for instead of the resource itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conversion {
    None,
    Table(MetaVersion),
    PartialObjectMetadata(MetaVersion),
    PartialObjectMetadataList(MetaVersion),
}

/// The outcome of negotiation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Negotiated {
    pub encoding: Encoding,
    pub conversion: Conversion,
}

/// What a resource request answers with; decides which conversions fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Object,
    List,
    Watch,
}

/// One media range of an `Accept` header.
#[derive(Debug, Clone, PartialEq)]
struct MediaRange {
    kind: String,
    subtype: String,
    params: Vec<(String, String)>,
    q: f32,
}

impl MediaRange {
    fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The media ranges of all `Accept` headers, most preferred first; `q=0` ranges are dropped.
fn media_ranges(headers: &HeaderMap) -> Vec<MediaRange> {
    let mut ranges: Vec<MediaRange> = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(parse_range)
        .filter(|r| r.q > 0.0)
        .collect();
    // Stable: equal ranges keep the client's order.
    ranges.sort_by(|a, b| {
        b.q.total_cmp(&a.q)
            .then((a.kind == "*").cmp(&(b.kind == "*")))
            .then((a.subtype == "*").cmp(&(b.subtype == "*")))
    });
    ranges
}

fn parse_range(text: &str) -> Option<MediaRange> {
    let mut parts = text.split(';');
    let media = parts.next()?.trim().to_ascii_lowercase();
    let (kind, subtype) = media.split_once('/')?;
    if kind.is_empty() || subtype.is_empty() {
        return None;
    }
    let mut q = 1.0;
    let mut params = Vec::new();
    for param in parts {
        let Some((key, value)) = param.split_once('=') else {
            continue;
        };
        let key = key.trim().to_ascii_lowercase();
        let value = value.trim().trim_matches('"').to_string();
        if key == "q" {
            q = value.parse().unwrap_or(0.0);
        } else {
            params.push((key, value));
        }
    }
    Some(MediaRange {
        kind: kind.trim().to_string(),
        subtype: subtype.trim().to_string(),
        params,
        q,
    })
}

/// Whether the request has no usable `Accept` header (then JSON is the answer).
fn accepts_anything(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .all(|v| v.trim().is_empty())
}

/// What this range asks of a resource endpoint, if the server can produce it.
fn acceptable(range: &MediaRange, answer: Answer) -> Option<Negotiated> {
    let (encoding, protobuf) = match (range.kind.as_str(), range.subtype.as_str()) {
        ("application", "json") | ("application", "*") | ("*", "*") => (Encoding::Json, false),
        ("application", "yaml") if answer != Answer::Watch => (Encoding::Yaml, false),
        ("application", "vnd.kubernetes.protobuf") => (Encoding::Json, true),
        _ => return None,
    };
    if range
        .param("stream")
        .is_some_and(|s| !s.is_empty() && s != "watch")
    {
        return None;
    }
    let (kind, group, version) = (range.param("as"), range.param("g"), range.param("v"));
    if kind.is_none() && group.is_none() && version.is_none() {
        return Some(Negotiated {
            encoding,
            conversion: Conversion::None,
        });
    }
    let version = match (group, version) {
        (Some("meta.k8s.io"), Some("v1")) => MetaVersion::V1,
        (Some("meta.k8s.io"), Some("v1beta1")) => MetaVersion::V1beta1,
        _ => return None,
    };
    let conversion = match kind? {
        "Table" if !protobuf => Conversion::Table(version),
        "PartialObjectMetadata" => Conversion::PartialObjectMetadata(version),
        "PartialObjectMetadataList" => Conversion::PartialObjectMetadataList(version),
        _ => return None,
    };
    Some(Negotiated {
        encoding,
        conversion,
    })
}

/// Why a request cannot be answered in any representation the client accepts: a 406.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotAcceptable(pub String);

impl NotAcceptable {
    /// The 406 `NotAcceptable` Status.
    pub fn into_response(self) -> http::Response<Body> {
        failure(StatusCode::NOT_ACCEPTABLE, "NotAcceptable", &self.0)
    }
}

/// The representation for a resource request, or why there is none.
pub fn negotiate(headers: &HeaderMap, answer: Answer) -> Result<Negotiated, NotAcceptable> {
    if accepts_anything(headers) {
        return Ok(Negotiated {
            encoding: Encoding::Json,
            conversion: Conversion::None,
        });
    }
    media_ranges(headers)
        .iter()
        .find_map(|range| acceptable(range, answer))
        .ok_or_else(|| {
            NotAcceptable(format!(
                "only the following media types are accepted: {ACCEPTED_MEDIA_TYPES}"
            ))
        })
}

/// The `apidiscovery.k8s.io` version (`v2` or `v2beta1`) of the aggregated discovery document
/// the client prefers on `/api` and `/apis`; `None`: the legacy documents.
pub fn aggregated_discovery_version(headers: &HeaderMap) -> Option<&'static str> {
    for range in media_ranges(headers) {
        let json = matches!(
            (range.kind.as_str(), range.subtype.as_str()),
            ("application", "json") | ("application", "*") | ("*", "*")
        );
        if !json {
            continue;
        }
        match (range.param("as"), range.param("g"), range.param("v")) {
            (Some("APIGroupDiscoveryList"), Some("apidiscovery.k8s.io"), Some("v2")) => {
                return Some("v2");
            }
            (Some("APIGroupDiscoveryList"), Some("apidiscovery.k8s.io"), Some("v2beta1")) => {
                return Some("v2beta1");
            }
            (None, None, None) => return None,
            _ => {}
        }
    }
    None
}

/// Go's `%T` of the internal type kube-apiserver would hold, for its 406 messages.
fn internal_type(resource: &Resource, list: bool) -> String {
    let package = match resource.group.split('.').next().unwrap_or_default() {
        "" | "events" => "core",
        first => first,
    };
    let suffix = if list { "List" } else { "" };
    format!("*{package}.{}{suffix}", resource.kind)
}

/// Checks that the conversion fits what the request answers with, as kube-apiserver does
/// (PartialObjectMetadata for one object, PartialObjectMetadataList for a list).
pub fn check_fits(
    negotiated: &Negotiated,
    resource: &Resource,
    answer: Answer,
) -> Result<(), NotAcceptable> {
    match (negotiated.conversion, answer) {
        (Conversion::PartialObjectMetadata(_), Answer::List) => Err(NotAcceptable(format!(
            "you requested PartialObjectMetadata, but the requested object is a list ({})",
            internal_type(resource, true)
        ))),
        (Conversion::PartialObjectMetadataList(_), Answer::Object | Answer::Watch) => {
            Err(NotAcceptable(format!(
                "you requested PartialObjectMetadataList, but the requested object is not a list ({})",
                internal_type(resource, false)
            )))
        }
        _ => Ok(()),
    }
}

/// `includeObject` of a Table request: what each row carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncludeObject {
    None,
    Metadata,
    Object,
}

impl IncludeObject {
    pub fn from_params(params: &Params) -> Result<Self, RegistryError> {
        match params.get("includeObject") {
            None | Some("Metadata") => Ok(IncludeObject::Metadata),
            Some("None") => Ok(IncludeObject::None),
            Some("Object") => Ok(IncludeObject::Object),
            Some(other) => Err(RegistryError::BadRequest(format!(
                "unrecognized includeObject value: {other:?}"
            ))),
        }
    }
}

/// An object as `PartialObjectMetadata` of `version` (its metadata moved, not copied).
pub fn partial_object_metadata(mut object: Value, version: MetaVersion) -> Value {
    let metadata = object
        .get_mut("metadata")
        .map(Value::take)
        .unwrap_or_else(|| json!({}));
    document(
        "PartialObjectMetadata",
        version.api_version(),
        [("metadata", metadata)],
    )
}

/// An object of `kind` and `api_version` with these fields, moved in. (`json!` would copy each
/// value through the serializer: lists and Tables of thousands of objects paid for it.)
pub(crate) fn document<const N: usize>(
    kind: &str,
    api_version: impl Into<String>,
    fields: [(&str, Value); N],
) -> Value {
    let mut object = serde_json::Map::new();
    object.insert("kind".into(), Value::String(kind.into()));
    object.insert("apiVersion".into(), Value::String(api_version.into()));
    for (name, value) in fields {
        object.insert(name.into(), value);
    }
    Value::Object(object)
}

/// One object (get, create, update, patch, a watch event) as the client asked for it.
pub fn render_object(
    conversion: Conversion,
    resource: &Resource,
    params: &Params,
    object: Value,
) -> Result<Value, RegistryError> {
    Ok(match conversion {
        Conversion::None | Conversion::PartialObjectMetadataList(_) => object,
        Conversion::PartialObjectMetadata(version) => partial_object_metadata(object, version),
        Conversion::Table(version) => {
            let mut list_meta = json!({});
            if let Some(rv) = object["metadata"]["resourceVersion"].as_str() {
                list_meta["resourceVersion"] = json!(rv);
            }
            let include = IncludeObject::from_params(params)?;
            crate::table::render(resource, vec![object], list_meta, version, include)
        }
    })
}

/// A list result as the client asked for it; `list_meta` is the ListMeta (resourceVersion,
/// continue, remainingItemCount).
pub fn render_list(
    conversion: Conversion,
    resource: &Resource,
    params: &Params,
    items: Vec<Value>,
    list_meta: Value,
) -> Result<Value, RegistryError> {
    Ok(match conversion {
        Conversion::None | Conversion::PartialObjectMetadata(_) => {
            let mut items = items;
            if conversion == Conversion::None {
                for item in &mut items {
                    kcp_registry::as_list_item(resource, item);
                }
            }
            document(
                &format!("{}List", resource.kind),
                resource.group_version(),
                [("metadata", list_meta), ("items", Value::Array(items))],
            )
        }
        Conversion::PartialObjectMetadataList(version) => {
            let items: Vec<Value> = items
                .into_iter()
                .map(|item| partial_object_metadata(item, version))
                .collect();
            document(
                "PartialObjectMetadataList",
                version.api_version(),
                [("metadata", list_meta), ("items", Value::Array(items))],
            )
        }
        Conversion::Table(version) => {
            let include = IncludeObject::from_params(params)?;
            crate::table::render(resource, items, list_meta, version, include)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn accept(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, HeaderValue::from_str(value).unwrap());
        headers
    }

    fn conversion(value: &str, answer: Answer) -> Conversion {
        negotiate(&accept(value), answer).unwrap().conversion
    }

    #[test]
    fn kubectl_table_accept_asks_for_a_v1_table() {
        let kubectl = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(
            conversion(kubectl, Answer::List),
            Conversion::Table(MetaVersion::V1)
        );
        assert_eq!(
            conversion(
                "application/json;as=Table;v=v1beta1;g=meta.k8s.io",
                Answer::List
            ),
            Conversion::Table(MetaVersion::V1beta1)
        );
    }

    #[test]
    fn metadata_clients_get_partial_object_metadata() {
        let metadata_client = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
        let negotiated = negotiate(&accept(metadata_client), Answer::List).unwrap();
        assert_eq!(
            negotiated.conversion,
            Conversion::PartialObjectMetadataList(MetaVersion::V1)
        );
        assert_eq!(negotiated.encoding, Encoding::Json);
    }

    #[test]
    fn unknown_conversions_fall_through_to_the_next_range_or_406() {
        assert_eq!(
            conversion(
                "application/json;as=Widget;g=meta.k8s.io;v=v1,application/json",
                Answer::Object
            ),
            Conversion::None
        );
        for refused in [
            "application/json;as=Widget;g=meta.k8s.io;v=v1",
            "application/json;as=Table;g=example.com;v=v1",
            "application/json;as=Table",
            "text/html",
            "application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1",
        ] {
            let refusal = negotiate(&accept(refused), Answer::List).unwrap_err();
            assert_eq!(
                refusal.0,
                "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf"
            );
            let response = refusal.into_response();
            assert_eq!(response.status(), StatusCode::NOT_ACCEPTABLE, "{refused}");
        }
    }

    #[test]
    fn yaml_is_offered_except_for_watches() {
        let yaml = accept("application/yaml");
        assert_eq!(
            negotiate(&yaml, Answer::Object).unwrap().encoding,
            Encoding::Yaml
        );
        assert!(negotiate(&yaml, Answer::Watch).is_err());
        assert_eq!(
            negotiate(&accept("application/yaml, application/json"), Answer::Watch)
                .unwrap()
                .encoding,
            Encoding::Json
        );
    }

    #[test]
    fn quality_and_wildcards_order_the_ranges() {
        assert_eq!(
            negotiate(
                &accept("application/json;q=0.5, application/yaml"),
                Answer::Object
            )
            .unwrap()
            .encoding,
            Encoding::Yaml
        );
        assert_eq!(
            negotiate(&accept("*/*, application/yaml"), Answer::Object)
                .unwrap()
                .encoding,
            Encoding::Yaml
        );
        assert_eq!(
            negotiate(&HeaderMap::new(), Answer::Object)
                .unwrap()
                .encoding,
            Encoding::Json
        );
    }

    #[test]
    fn kubectl_prefers_aggregated_discovery_v2() {
        let kubectl = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
        assert_eq!(aggregated_discovery_version(&accept(kubectl)), Some("v2"));
        let kubectl_1_27 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
        assert_eq!(
            aggregated_discovery_version(&accept(kubectl_1_27)),
            Some("v2beta1")
        );
        assert_eq!(
            aggregated_discovery_version(&accept("application/json, */*")),
            None
        );
        assert_eq!(aggregated_discovery_version(&HeaderMap::new()), None);
    }

    #[test]
    fn conversions_must_fit_the_answer() {
        let cm = kcp_apis::builtin::RESOURCES
            .iter()
            .find(|r| r.name == "configmaps")
            .unwrap();
        let single = Negotiated {
            encoding: Encoding::Json,
            conversion: Conversion::PartialObjectMetadata(MetaVersion::V1),
        };
        assert!(check_fits(&single, cm, Answer::Object).is_ok());
        assert!(check_fits(&single, cm, Answer::Watch).is_ok());
        let refused = check_fits(&single, cm, Answer::List).unwrap_err();
        assert_eq!(
            refused.0,
            "you requested PartialObjectMetadata, but the requested object is a list (*core.ConfigMapList)"
        );
        assert_eq!(internal_type(cm, true), "*core.ConfigMapList");
    }

    #[test]
    fn lists_become_partial_object_metadata_lists() {
        let cm = kcp_apis::builtin::RESOURCES
            .iter()
            .find(|r| r.name == "configmaps")
            .unwrap();
        let params = Params::parse(None);
        let list = render_list(
            Conversion::PartialObjectMetadataList(MetaVersion::V1),
            cm,
            &params,
            vec![json!({"kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "v"}})],
            json!({"resourceVersion": "5"}),
        )
        .unwrap();
        assert_eq!(list["kind"], "PartialObjectMetadataList");
        assert_eq!(list["metadata"]["resourceVersion"], "5");
        assert_eq!(list["items"][0]["kind"], "PartialObjectMetadata");
        assert_eq!(list["items"][0]["apiVersion"], "meta.k8s.io/v1");
        assert_eq!(list["items"][0]["metadata"]["name"], "a");
        assert!(list["items"][0].get("data").is_none());
        let bad = Params::parse(Some("includeObject=Everything"));
        assert!(
            render_list(
                Conversion::Table(MetaVersion::V1),
                cm,
                &bad,
                vec![],
                json!({})
            )
            .is_err()
        );
    }
}
