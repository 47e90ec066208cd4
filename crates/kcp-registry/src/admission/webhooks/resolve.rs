//! Where a webhook's `clientConfig.service` is, in the workspace of its configuration: an
//! `ExternalName` Service's name; else the first address of the Service's Endpoints at the
//! target port of the named port; else its cluster IP. (No proxy runs here: the Endpoints are
//! what a webhook registered in a workspace points at.) Its certificate is then verified for
//! `<name>.<namespace>.svc`, as kube-apiserver does.

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
        let read = |plural: &'static str| {
            let target = Target {
                cluster,
                resource: kcp_apis::builtin::core(plural),
                namespace: Some(namespace),
            };
            async move {
                match self.get(target, name).await {
                    Ok(object) => Ok(Some(object)),
                    Err(RegistryError::NotFound { .. }) => Ok(None),
                    Err(error) => Err(error.to_string()),
                }
            }
        };
        let service = read("services")
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
        if let Some(endpoints) = read("endpoints").await?
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
