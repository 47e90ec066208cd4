//! Impersonation (`kubectl --as`, `--as-group`, `--as-uid`), as kube-apiserver does it: the
//! `Impersonate-User`, `Impersonate-Group` (repeated), `Impersonate-Uid` and
//! `Impersonate-Extra-<key>` headers make the request act as another user, if the caller may
//! `impersonate` each of them in the request's logical cluster: `users` (or `serviceaccounts`
//! for `system:serviceaccount:<ns>:<name>`) and `groups` in the core group, `uids` and
//! `userextras/<key>` in `authentication.k8s.io`. The impersonated user is in
//! `system:authenticated` (and a service account in its groups when none are given).

use http::HeaderMap;
use kcp_apimachinery::rbac::Target;
use kcp_registry::RegistryError;

use super::{Authorizer, Decision};
use crate::authn::{AUTHENTICATED, User};

/// Who a request asks to act as.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Impersonation {
    pub user: String,
    pub groups: Vec<String>,
    pub uid: Option<String>,
    pub extras: Vec<(String, String)>,
}

/// The impersonation the headers ask for, if any; a group, uid or extra without a user is a
/// 400, as in Kubernetes.
pub fn requested(headers: &HeaderMap) -> Result<Option<Impersonation>, RegistryError> {
    let text = |value: &http::HeaderValue| String::from_utf8_lossy(value.as_bytes()).into_owned();
    let user = headers.get("impersonate-user").map(text);
    let groups: Vec<String> = headers
        .get_all("impersonate-group")
        .iter()
        .map(text)
        .collect();
    let uid = headers.get("impersonate-uid").map(text);
    let extras: Vec<(String, String)> = headers
        .iter()
        .filter_map(|(name, value)| {
            let key = name.as_str().strip_prefix("impersonate-extra-")?;
            Some((unescape(key), text(value)))
        })
        .collect();
    match user {
        Some(user) => Ok(Some(Impersonation {
            user,
            groups,
            uid,
            extras,
        })),
        None if groups.is_empty() && uid.is_none() && extras.is_empty() => Ok(None),
        None => Err(RegistryError::BadRequest(
            "requested impersonation of groups, uid or extras without impersonating a user".into(),
        )),
    }
}

/// `%XX` escapes in an extra's key, as clients send them.
fn unescape(key: &str) -> String {
    form_urlencoded::parse(format!("k={key}").as_bytes())
        .next()
        .map(|(_, value)| value.into_owned())
        .unwrap_or_else(|| key.to_string())
}

/// Why impersonation is refused: the attributes that were not allowed, for the 403.
pub struct Refused {
    pub resource: String,
    pub name: String,
    pub message: String,
}

impl Authorizer {
    /// The user `caller` acts as, if they may impersonate every part of `wanted` in `cluster`.
    pub async fn impersonate(
        &self,
        caller: &User,
        cluster: &str,
        wanted: &Impersonation,
    ) -> Result<Result<User, Refused>, RegistryError> {
        let subject = caller.info();
        let service_account = wanted
            .user
            .strip_prefix("system:serviceaccount:")
            .and_then(|rest| rest.split_once(':'));
        let mut checks: Vec<(&str, String, String, String)> = Vec::new();
        match service_account {
            Some((namespace, name)) => checks.push((
                "",
                "serviceaccounts".into(),
                name.to_string(),
                namespace.to_string(),
            )),
            None => checks.push(("", "users".into(), wanted.user.clone(), String::new())),
        }
        for group in &wanted.groups {
            checks.push(("", "groups".into(), group.clone(), String::new()));
        }
        if let Some(uid) = &wanted.uid {
            checks.push((
                "authentication.k8s.io",
                "uids".into(),
                uid.clone(),
                String::new(),
            ));
        }
        for (key, value) in &wanted.extras {
            checks.push((
                "authentication.k8s.io",
                format!("userextras/{key}"),
                value.clone(),
                String::new(),
            ));
        }
        for (group, resource, name, namespace) in &checks {
            let (resource, subresource) = resource.split_once('/').unwrap_or((resource, ""));
            let target = Target::Resource {
                api_group: group,
                resource,
                subresource,
                name,
                namespace,
            };
            if let Decision::Deny(denial) = self
                .decide(&subject, cluster, "impersonate", target)
                .await?
            {
                let resource = match group.is_empty() {
                    true => resource.to_string(),
                    false => format!("{resource}.{group}"),
                };
                return Ok(Err(Refused {
                    resource,
                    name: name.clone(),
                    message: denial.message,
                }));
            }
        }
        let mut groups = wanted.groups.clone();
        if let Some((namespace, _)) = service_account
            && groups.is_empty()
        {
            groups.push("system:serviceaccounts".into());
            groups.push(format!("system:serviceaccounts:{namespace}"));
        }
        if wanted.user != "system:anonymous" && !groups.iter().any(|g| g == AUTHENTICATED) {
            groups.push(AUTHENTICATED.into());
        }
        let mut extra = std::collections::BTreeMap::<String, Vec<String>>::new();
        for (key, value) in &wanted.extras {
            extra.entry(key.clone()).or_default().push(value.clone());
        }
        Ok(Ok(User {
            name: wanted.user.clone(),
            uid: wanted.uid.clone().unwrap_or_default(),
            groups,
            extra,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, http::HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn the_headers_name_user_groups_uid_and_extras() {
        assert_eq!(requested(&HeaderMap::new()).unwrap(), None);
        let wanted = requested(&headers(&[
            ("impersonate-user", "bob"),
            ("impersonate-group", "a"),
            ("impersonate-group", "b"),
            ("impersonate-uid", "u-1"),
            ("impersonate-extra-scopes%2Fone", "x"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(wanted.user, "bob");
        assert_eq!(wanted.groups, ["a", "b"]);
        assert_eq!(wanted.uid.as_deref(), Some("u-1"));
        assert_eq!(wanted.extras, [("scopes/one".to_string(), "x".to_string())]);
        // Groups without a user: Kubernetes' 400.
        assert!(matches!(
            requested(&headers(&[("impersonate-group", "a")])),
            Err(RegistryError::BadRequest(_))
        ));
    }
}
