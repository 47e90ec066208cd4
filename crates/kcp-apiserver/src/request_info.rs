//! What a request is about, read from its method, path and query, as kube-apiserver's
//! `RequestInfoFactory` reads it: the logical cluster, API group and version, namespace, resource,
//! name, subresource and verb. The cluster segment is percent-decoded, as Go's `URL.Path` is
//! (kcp reads the cluster from it), so `%00` is the byte NUL and `r%6Fot` is `root`; whether it
//! is a valid path is checked where it is resolved ([`crate::workspaces`]). Pure: no IO, no
//! knowledge of which resources exist.

use http::Method;

/// A parsed request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestInfo {
    /// A request for a resource (or collection) under `/api` or `/apis`.
    Resource(ResourceRequest),
    /// Anything else: discovery roots, `/version`, health checks, OpenAPI.
    NonResource {
        cluster: Option<String>,
        path: String,
        verb: String,
    },
}

/// A resource request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResourceRequest {
    /// The logical cluster from `/clusters/<name>`, if the path had one.
    pub cluster: Option<String>,
    /// "" for the legacy core group.
    pub group: String,
    pub version: String,
    pub namespace: Option<String>,
    pub resource: String,
    pub name: Option<String>,
    pub subresource: Option<String>,
    /// get, list, watch, create, update, patch, delete or deletecollection.
    pub verb: String,
    /// Which objects the request may see, when a view narrows it (a virtual workspace's
    /// claimed resources, its bindings); never set from the request itself.
    pub restrict: Option<Restriction>,
}

/// A predicate on objects (as read, with their `kcp.io/cluster` annotation) that a view
/// narrows its requests by, applied with the request's own selectors.
#[derive(Clone)]
pub struct Restriction(pub std::sync::Arc<dyn Fn(&serde_json::Value) -> bool + Send + Sync>);

impl Restriction {
    pub fn allows(&self, object: &serde_json::Value) -> bool {
        (self.0)(object)
    }
}

impl std::fmt::Debug for Restriction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Restriction")
    }
}

impl PartialEq for Restriction {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Restriction {}

/// Parses a request line. `query` is the raw query string without `?`.
pub fn parse(method: &Method, path: &str, query: Option<&str>) -> RequestInfo {
    let (cluster, rest) = crate::router::split_cluster(path);
    let cluster = cluster.map(percent_decode);
    // As Go's `URL.Path`: escapes are decoded before the path is split, so an object named
    // `a b` is `/…/a%20b`.
    let rest = percent_decode(rest);
    let rest = rest.as_str();
    let non_resource = |cluster: Option<String>| RequestInfo::NonResource {
        cluster,
        path: rest.to_string(),
        verb: method.as_str().to_ascii_lowercase(),
    };
    let parts: Vec<&str> = rest
        .trim_matches('/')
        .split('/')
        .filter(|p| !p.is_empty())
        .collect();
    let (group, version, mut parts) = match parts.as_slice() {
        ["api", version, rest @ ..] => (String::new(), version.to_string(), rest.to_vec()),
        ["apis", group, version, rest @ ..] => {
            (group.to_string(), version.to_string(), rest.to_vec())
        }
        _ => return non_resource(cluster),
    };
    if parts.is_empty() {
        return non_resource(cluster);
    }
    let mut legacy_watch = false;
    if parts[0] == "watch" {
        legacy_watch = true;
        parts.remove(0);
        if parts.is_empty() {
            return non_resource(cluster);
        }
    }
    let mut namespace = None;
    if parts[0] == "namespaces" && parts.len() > 1 {
        namespace = Some(parts[1].to_string());
        // `/namespaces/<ns>` is the namespace object itself, and so are its subresources
        // `/namespaces/<ns>/status` and `/finalize`; `/namespaces/<ns>/x` is inside it.
        if parts.len() > 2 && !matches!(parts[2], "status" | "finalize") {
            parts.drain(..2);
        }
    }
    let resource = parts[0].to_string();
    let name = parts.get(1).map(|s| s.to_string());
    let subresource = (parts.len() > 2).then(|| parts[2..].join("/"));

    let watch_param = query.is_some_and(|q| {
        q.split('&')
            .find_map(|pair| match pair.split_once('=').unwrap_or((pair, "")) {
                ("watch", value) => Some(query_bool(value)),
                _ => None,
            })
            .unwrap_or(false)
    });
    let verb = match *method {
        Method::GET | Method::HEAD if legacy_watch || (watch_param && subresource.is_none()) => {
            "watch"
        }
        Method::GET | Method::HEAD if name.is_none() => "list",
        Method::GET | Method::HEAD => "get",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE if name.is_none() => "deletecollection",
        Method::DELETE => "delete",
        _ => return non_resource(cluster),
    };
    RequestInfo::Resource(ResourceRequest {
        cluster,
        group,
        version,
        namespace,
        resource,
        name,
        subresource,
        verb: verb.to_string(),
        restrict: None,
    })
}

/// `segment` with its `%XX` escapes decoded (an invalid escape stays as it is). Bytes that are
/// not UTF-8 leave the segment undecoded: it is no valid cluster path either way.
fn percent_decode(segment: &str) -> String {
    let hex = |b: u8| (b as char).to_digit(16);
    let bytes = segment.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escape = (bytes[i] == b'%')
            .then(|| Some((hex(*bytes.get(i + 1)?)?, hex(*bytes.get(i + 2)?)?)))
            .flatten();
        match escape {
            Some((high, low)) => {
                // Two hex digits: at most 255.
                decoded.push(u8::try_from(high * 16 + low).unwrap_or(b'%'));
                i += 3;
            }
            None => {
                decoded.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8(decoded).unwrap_or_else(|_| segment.to_string())
}

/// A boolean query parameter's value as Kubernetes reads it: `0` and `false` (in any case)
/// are false, anything else is true (`True`, as the Python client sends, `1`, even empty).
pub fn query_bool(value: &str) -> bool {
    value != "0" && !value.eq_ignore_ascii_case("false")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(method: Method, path: &str, query: Option<&str>) -> ResourceRequest {
        match parse(&method, path, query) {
            RequestInfo::Resource(r) => r,
            other => panic!("{path}: expected a resource request, got {other:?}"),
        }
    }

    #[test]
    fn namespaced_objects_collections_and_subresources() {
        let r = resource(
            Method::GET,
            "/clusters/root:org/api/v1/namespaces/ns/configmaps/cm",
            None,
        );
        assert_eq!(r.cluster.as_deref(), Some("root:org"));
        assert_eq!((r.group.as_str(), r.version.as_str()), ("", "v1"));
        assert_eq!(r.namespace.as_deref(), Some("ns"));
        assert_eq!(
            (r.resource.as_str(), r.name.as_deref(), r.verb.as_str()),
            ("configmaps", Some("cm"), "get")
        );

        let r = resource(Method::GET, "/apis/apps/v1/namespaces/ns/deployments", None);
        assert_eq!(
            (r.group.as_str(), r.resource.as_str(), r.verb.as_str()),
            ("apps", "deployments", "list")
        );
        assert_eq!(r.cluster, None);

        let r = resource(
            Method::PUT,
            "/apis/apps/v1/namespaces/ns/deployments/d/scale",
            None,
        );
        assert_eq!(
            (r.subresource.as_deref(), r.verb.as_str()),
            (Some("scale"), "update")
        );
    }

    #[test]
    fn escaped_segments_are_decoded_before_the_path_is_split() {
        let r = resource(
            Method::GET,
            "/clusters/root/api/v1/namespaces/ns/events/a%20b",
            None,
        );
        assert_eq!(r.name.as_deref(), Some("a b"));
        let r = resource(Method::GET, "/api/v1/namespaces/n%73/configmaps", None);
        assert_eq!(r.namespace.as_deref(), Some("ns"));
    }

    #[test]
    fn the_namespace_object_itself_and_its_subresources() {
        let r = resource(Method::GET, "/api/v1/namespaces/ns", None);
        assert_eq!(
            (
                r.resource.as_str(),
                r.name.as_deref(),
                r.namespace.as_deref()
            ),
            ("namespaces", Some("ns"), Some("ns"))
        );
        let r = resource(Method::PUT, "/api/v1/namespaces/ns/finalize", None);
        assert_eq!(
            (r.resource.as_str(), r.name.as_deref()),
            ("namespaces", Some("ns"))
        );
        // `/namespaces/ns/finalize` is the namespaced resource "finalize" in the Go parser too;
        // handlers map it back to the namespace's subresource.
        let r = resource(Method::GET, "/api/v1/namespaces", None);
        assert_eq!(
            (r.resource.as_str(), r.verb.as_str(), r.namespace.as_deref()),
            ("namespaces", "list", None)
        );
    }

    #[test]
    fn verbs_follow_method_name_and_watch() {
        let cases = [
            (
                Method::GET,
                "/api/v1/configmaps",
                Some("watch=true&resourceVersion=5"),
                "watch",
            ),
            (Method::GET, "/api/v1/configmaps", Some("watch=1"), "watch"),
            // As the Python client writes booleans, and anything Kubernetes reads as true.
            (
                Method::GET,
                "/api/v1/configmaps",
                Some("watch=True"),
                "watch",
            ),
            (
                Method::GET,
                "/api/v1/configmaps",
                Some("watch=yes"),
                "watch",
            ),
            (
                Method::GET,
                "/api/v1/configmaps",
                Some("watch=false"),
                "list",
            ),
            (
                Method::GET,
                "/api/v1/configmaps",
                Some("watch=FALSE"),
                "list",
            ),
            (Method::GET, "/api/v1/configmaps", Some("watch=0"), "list"),
            (
                Method::GET,
                "/api/v1/watch/namespaces/ns/configmaps",
                None,
                "watch",
            ),
            (
                Method::POST,
                "/api/v1/namespaces/ns/configmaps",
                None,
                "create",
            ),
            (
                Method::PATCH,
                "/api/v1/namespaces/ns/configmaps/a",
                None,
                "patch",
            ),
            (
                Method::DELETE,
                "/api/v1/namespaces/ns/configmaps/a",
                None,
                "delete",
            ),
            (
                Method::DELETE,
                "/api/v1/namespaces/ns/configmaps",
                None,
                "deletecollection",
            ),
        ];
        for (method, path, query, verb) in cases {
            assert_eq!(
                resource(method.clone(), path, query).verb,
                verb,
                "{method} {path} {query:?}"
            );
        }
    }

    #[test]
    fn the_cluster_segment_is_percent_decoded() {
        let cluster = |path: &str| resource(Method::GET, path, None).cluster;
        assert_eq!(
            cluster("/clusters/r%6Fot/api/v1/configmaps").as_deref(),
            Some("root")
        );
        assert_eq!(
            cluster("/clusters/%00/api/v1/configmaps").as_deref(),
            Some("\0")
        );
        assert_eq!(
            cluster("/clusters/%2a/api/v1/configmaps").as_deref(),
            Some("*")
        );
        assert_eq!(
            cluster("/clusters/a%zz%4/api/v1/configmaps").as_deref(),
            Some("a%zz%4")
        );
        assert_eq!(
            cluster("/clusters/%ff/api/v1/configmaps").as_deref(),
            Some("%ff")
        );
        assert_eq!(cluster("/clusters//api/v1/configmaps").as_deref(), Some(""));
    }

    #[test]
    fn discovery_and_other_paths_are_not_resources() {
        for path in [
            "/api",
            "/api/v1",
            "/apis",
            "/apis/apps/v1",
            "/version",
            "/openapi/v3",
            "/clusters/root/apis",
        ] {
            assert!(
                matches!(
                    parse(&Method::GET, path, None),
                    RequestInfo::NonResource { .. }
                ),
                "{path}"
            );
        }
        match parse(&Method::GET, "/clusters/root:a/api", None) {
            RequestInfo::NonResource {
                cluster,
                path,
                verb,
            } => {
                assert_eq!(
                    (cluster.as_deref(), path.as_str(), verb.as_str()),
                    (Some("root:a"), "/api", "get")
                );
            }
            other => panic!("{other:?}"),
        }
    }
}
