//! kcp's admission plugins for API sharing (its `apiresourceschema` and `apibinding` plugins),
//! run in the validating phase ([`crate::admission::Plugin::ApiSharing`]):
//!
//! - An APIResourceSchema is validated as the CRD it serves like, and its spec never changes
//!   (403, as kcp refuses both).
//! - Creating an APIBinding, or pointing one at another export, needs verb `bind` on the
//!   APIExport in the export's logical cluster; refused with kcp's one message whether the
//!   export exists or not, so that a refusal does not tell which workspaces exist.

use serde_json::Value;

use crate::error::{Cause, RegistryError};
use crate::store::{Place, Registry, Target};

fn is(target: &Target<'_>, plural: &str) -> bool {
    target.resource.group == kcp_apis::system::APIS_GROUP && target.resource.name == plural
}

fn forbidden(target: &Target<'_>, name: &str, message: String) -> RegistryError {
    RegistryError::Forbidden {
        qualified_resource: target.qualified_resource(),
        name: name.to_string(),
        message,
        causes: Vec::new(),
    }
}

/// `[first, second]`: a list of field errors as Go prints it.
fn listed(causes: &[Cause]) -> String {
    let texts: Vec<String> = causes
        .iter()
        .map(|c| match c.field.is_empty() {
            true => c.message.clone(),
            false => format!("{}: {}", c.field, c.message),
        })
        .collect();
    format!("[{}]", texts.join(", "))
}

impl Registry {
    /// Admits a new object of an API sharing kind.
    pub(crate) async fn admit_api_sharing_create(
        &self,
        target: &Target<'_>,
        object: &Value,
    ) -> Result<(), RegistryError> {
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        if is(target, "apiresourceschemas") {
            let crd = super::schemas::as_crd(object);
            let crds = crate::custom::index::crds();
            let mut errs = Vec::new();
            crate::kinds::rules(crds).validate_create(crds, &crd, &mut errs);
            // The CRD's name is made from the spec: its rule says nothing of the schema.
            errs.retain(|cause| cause.field != "metadata.name");
            if !errs.is_empty() {
                return Err(forbidden(target, name, listed(&errs)));
            }
        }
        if is(target, "apibindings") && !self.is_privileged() {
            self.require_bind(target, name, object, "create").await?;
        }
        Ok(())
    }

    /// Admits `next` replacing `stored`, of an API sharing kind.
    pub(crate) async fn admit_api_sharing_update(
        &self,
        target: &Target<'_>,
        name: &str,
        stored: &Value,
        next: &Value,
    ) -> Result<(), RegistryError> {
        if is(target, "apiresourceschemas") && next["spec"] != stored["spec"] {
            return Err(forbidden(
                target,
                name,
                "[spec: Invalid value: \"object\": is immutable]".into(),
            ));
        }
        if is(target, "apibindings")
            && !self.is_privileged()
            && next["spec"]["reference"] != stored["spec"]["reference"]
        {
            self.require_bind(target, name, next, "update").await?;
        }
        Ok(())
    }

    /// Fails unless the requester may `bind` the export `binding` references.
    async fn require_bind(
        &self,
        target: &Target<'_>,
        name: &str,
        binding: &Value,
        action: &str,
    ) -> Result<(), RegistryError> {
        let export = &binding["spec"]["reference"]["export"];
        let path = export["path"].as_str().unwrap_or_default();
        let export_name = export["name"].as_str().unwrap_or_default();
        let shown = match path {
            "" => export_name.to_string(),
            path => format!("{path}:{export_name}"),
        };
        let refused = || {
            forbidden(
                target,
                name,
                format!("unable to {action} APIBinding: no permission to bind to export {shown}"),
            )
        };
        // Writes for nobody in particular (the server's own, tests of the registry) and
        // system:masters skip the check, as they skip RBAC's.
        let Some(requester) = self.requester() else {
            return Ok(());
        };
        if requester.groups.iter().any(|g| g == "system:masters") {
            return Ok(());
        }
        let cluster = match path {
            "" => target.cluster.to_string(),
            path => self.resolve_path(path).await.map_err(|_| refused())?,
        };
        let place = Place {
            cluster: &cluster,
            namespace: "",
        };
        let allowed = requester
            .access
            .allowed_deep(
                place,
                "bind",
                kcp_apis::system::APIS_GROUP,
                "apiexports",
                export_name,
            )
            .await?;
        match allowed {
            true => Ok(()),
            false => Err(refused()),
        }
    }
}
