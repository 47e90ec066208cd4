//! Where a webhook's `clientConfig.service` is. kcp serves no Services of its own, and dials
//! `<name>.<namespace>.svc:<port>` as the host's DNS resolves it; so does this server. A
//! workspace that serves Services (a CRD of the core group, as physical clusters' APIs are
//! negotiated) resolves them itself: an `ExternalName` Service's name; else the first address
//! of the Service's Endpoints at the target port of the named port; else its cluster IP. The
//! certificate is verified for `<name>.<namespace>.svc` either way, as kube-apiserver does.

use serde_json::Value;

use crate::error::RegistryError;
use crate::store::{Registry, Target};

impl Registry {
    /// `host:port` to dial for the Service `namespace/name`'s `port`, or why there is none.
    pub(super) async fn resolve_service(
        &self,
        cluster: &str,
        namespace: &str,
        name: &str,
        port: u16,
    ) -> Result<String, String> {
        let Some(services) = self.resolve(cluster, "", "v1", "services").await else {
            return Ok(format!("{name}.{namespace}.svc:{port}"));
        };
        let endpoints = self.resolve(cluster, "", "v1", "endpoints").await;
        let service = self
            .read_named(cluster, Some(&services), namespace, name)
            .await?
            .ok_or_else(|| format!("service \"{name}\" not found"))?;
        let spec = &service["spec"];
        if spec["type"] == "ExternalName" {
            let host = spec["externalName"].as_str().unwrap_or_default();
            return Ok(host_port(host, port));
        }
        let service_port = spec["ports"]
            .as_array()
            .and_then(|ports| {
                ports
                    .iter()
                    .find(|p| p["port"].as_u64() == Some(port.into()))
            })
            .ok_or_else(|| format!("service {namespace}/{name} has no port {port}"))?;
        if let Some(endpoints) = self
            .read_named(cluster, endpoints.as_deref(), namespace, name)
            .await?
            && let Some(address) = endpoint_address(&endpoints, service_port)
        {
            return Ok(address);
        }
        match spec["clusterIP"]
            .as_str()
            .filter(|ip| !ip.is_empty() && *ip != "None")
        {
            Some(ip) => Ok(host_port(ip, port)),
            None => Err(format!("no endpoints available for service \"{name}\"")),
        }
    }
}

impl Registry {
    /// The object `namespace/name` of `resource` (none when it is not served).
    async fn read_named(
        &self,
        cluster: &str,
        resource: Option<&kcp_apis::builtin::Resource>,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Value>, String> {
        let Some(resource) = resource else {
            return Ok(None);
        };
        let target = Target {
            cluster,
            resource,
            namespace: Some(namespace),
        };
        match self.get(target, name).await {
            Ok(object) => Ok(Some(object)),
            Err(RegistryError::NotFound { .. }) => Ok(None),
            Err(error) => Err(error.to_string()),
        }
    }
}

fn host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// The first ready address of `endpoints` serving `service_port` (by its name, else its
/// target port, else its only port).
fn endpoint_address(endpoints: &Value, service_port: &Value) -> Option<String> {
    let port_name = service_port["name"].as_str().unwrap_or_default();
    endpoints["subsets"].as_array()?.iter().find_map(|subset| {
        let ports = subset["ports"].as_array()?;
        let port = ports
            .iter()
            .find(|p| !port_name.is_empty() && p["name"] == port_name)
            .or_else(|| {
                ports
                    .iter()
                    .find(|p| p["port"] == service_port["targetPort"])
            })
            .or_else(|| (ports.len() == 1).then(|| &ports[0]))?;
        let number = u16::try_from(port["port"].as_u64()?).ok()?;
        let address = subset["addresses"].as_array()?.first()?;
        Some(host_port(address["ip"].as_str()?, number))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn endpoints_serve_the_named_port() {
        let endpoints = json!({"subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "metrics", "port": 9090}, {"name": "https", "port": 8443}]}]});
        let port = json!({"name": "https", "port": 443, "targetPort": 8443});
        assert_eq!(
            endpoint_address(&endpoints, &port).unwrap(),
            "127.0.0.1:8443"
        );
        let unnamed =
            json!({"subsets": [{"addresses": [{"ip": "::1"}], "ports": [{"port": 9443}]}]});
        assert_eq!(
            endpoint_address(&unnamed, &json!({"port": 443})).unwrap(),
            "[::1]:9443"
        );
        assert!(endpoint_address(&json!({}), &port).is_none());
    }
}
