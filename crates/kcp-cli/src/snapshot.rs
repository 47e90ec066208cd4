//! `kubectl kcp crd snapshot -f FILE --prefix PREFIX [-o yaml|json]`: each CustomResourceDefinition
//! of a file (or `-`, standard input) written as the APIResourceSchema an APIExport names, as
//! kcp's plugin converts them: named `<prefix>.<crd name>`, the CRD's group, names and scope,
//! its conversion (webhooks by URL only), and per version its name, served and storage flags,
//! deprecation, schema, subresources and printer columns. The CRD is read with
//! apiextensions' defaults first (singular and list kind from the kind, conversion `None`).

use anyhow::{Context, bail};
use serde_json::{Map, Value, json};

/// The APIResourceSchema of `crd`, named `<prefix>.<crd name>`.
pub fn snapshot(crd: &Value, prefix: &str) -> anyhow::Result<Value> {
    let crd_name = crd["metadata"]["name"].as_str().unwrap_or_default();
    let name = format!("{prefix}.{crd_name}");
    if let Some(problem) = dns_subdomain_problem(&name) {
        bail!("metadata.name: Invalid value: {name:?}: {problem}");
    }
    let spec = &crd["spec"];
    let versions = spec["versions"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let conversion = match spec.get("conversion").filter(|c| !c.is_null()) {
        Some(conversion) => conversion_of(conversion)?,
        // apiextensions' default; kcp refuses several versions without a strategy, which a
        // defaulted CRD always has.
        None => json!({"strategy": "None"}),
    };
    let mut names = spec["names"].as_object().cloned().unwrap_or_default();
    let kind = names
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let unset = |names: &Map<String, Value>, key: &str| {
        names
            .get(key)
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
    };
    if unset(&names, "singular") {
        names.insert("singular".into(), json!(kind.to_lowercase()));
    }
    if unset(&names, "listKind") {
        names.insert("listKind".into(), json!(format!("{kind}List")));
    }
    let versions: Vec<Value> = versions.iter().map(version_of).collect();
    Ok(json!({
        "apiVersion": "apis.kcp.io/v1alpha1",
        "kind": "APIResourceSchema",
        "metadata": {"creationTimestamp": null, "name": name},
        "spec": {
            "conversion": conversion,
            "group": spec["group"],
            "names": names,
            "scope": spec["scope"],
            "versions": versions,
        }
    }))
}

fn conversion_of(conversion: &Value) -> anyhow::Result<Value> {
    let strategy = conversion["strategy"].as_str().unwrap_or("None");
    let mut out = json!({"strategy": strategy});
    if strategy == "Webhook" {
        let webhook = &conversion["webhook"];
        let mut converted = Map::new();
        converted.insert(
            "conversionReviewVersions".into(),
            webhook["conversionReviewVersions"].clone(),
        );
        if let Some(config) = webhook.get("clientConfig").filter(|c| !c.is_null()) {
            if config.get("service").is_some_and(|s| !s.is_null()) {
                bail!("webhooks that refer to services are not supported, please use URL instead");
            }
            let Some(url) = config["url"].as_str() else {
                bail!("webhooks URL must be set");
            };
            let mut client = Map::new();
            client.insert("url".into(), json!(url));
            if let Some(ca) = config.get("caBundle").filter(|c| !c.is_null()) {
                client.insert("caBundle".into(), ca.clone());
            }
            converted.insert("clientConfig".into(), Value::Object(client));
        }
        out["webhook"] = Value::Object(converted);
    }
    Ok(out)
}

fn version_of(version: &Value) -> Value {
    let mut out = Map::new();
    out.insert("name".into(), version["name"].clone());
    out.insert(
        "served".into(),
        json!(version["served"].as_bool().unwrap_or(false)),
    );
    out.insert(
        "storage".into(),
        json!(version["storage"].as_bool().unwrap_or(false)),
    );
    if version["deprecated"].as_bool() == Some(true) {
        out.insert("deprecated".into(), json!(true));
    }
    if let Some(warning) = version.get("deprecationWarning").filter(|w| !w.is_null()) {
        out.insert("deprecationWarning".into(), warning.clone());
    }
    out.insert(
        "schema".into(),
        version["schema"]["openAPIV3Schema"].clone(),
    );
    out.insert(
        "subresources".into(),
        version
            .get("subresources")
            .filter(|s| s.is_object())
            .cloned()
            .unwrap_or(json!({})),
    );
    if let Some(columns) = version["additionalPrinterColumns"]
        .as_array()
        .filter(|c| !c.is_empty())
    {
        out.insert(
            "additionalPrinterColumns".into(),
            Value::Array(columns.clone()),
        );
    }
    Value::Object(out)
}

/// Why `name` is not a DNS-1123 subdomain, in Kubernetes' words.
fn dns_subdomain_problem(name: &str) -> Option<&'static str> {
    if name.len() > 253 {
        return Some("must be no more than 253 characters");
    }
    let label_ok = |label: &str| {
        !label.is_empty()
            && label
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !label.starts_with('-')
            && !label.ends_with('-')
    };
    if name.split('.').all(label_ok) {
        return None;
    }
    Some(
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
    )
}

/// The snapshots of every CRD in `text` (YAML documents or JSON), written in `output` (`yaml`
/// or `json`), each followed by `---` as kcp's plugin writes them.
pub fn snapshot_text(text: &str, prefix: &str, output: &str) -> anyhow::Result<String> {
    let documents: Vec<Value> =
        serde_saphyr::from_multiple(text).context("reading the CRDs as YAML")?;
    let mut out = String::new();
    for document in documents.iter().filter(|d| !d.is_null()) {
        if document["kind"] != "CustomResourceDefinition" {
            bail!(
                "unexpected type for CRD {}",
                document["kind"].as_str().unwrap_or("(no kind)")
            );
        }
        let schema =
            snapshot(document, prefix).with_context(|| "error converting CRD".to_string())?;
        match output {
            "json" => out.push_str(&serde_json::to_string(&schema)?),
            _ => out.push_str(&serde_saphyr::to_string(&schema)?),
        }
        out.push_str("\n---\n");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, kind: Widget, shortNames: [wd]}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, properties: {size: {type: integer, default: 1}}}
    subresources: {status: {}}
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
  - name: v1beta1
    served: true
    storage: false
    deprecated: true
    schema:
      openAPIV3Schema: {type: object}
"#;

    #[test]
    fn a_crd_becomes_the_schema_kcp_writes() {
        let text = snapshot_text(CRD, "today", "yaml").unwrap();
        assert!(text.ends_with("\n---\n"), "{text}");
        let documents: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
        let schema = &documents[0];
        assert_eq!(schema["apiVersion"], "apis.kcp.io/v1alpha1");
        assert_eq!(schema["kind"], "APIResourceSchema");
        assert_eq!(schema["metadata"]["name"], "today.widgets.example.com");
        let spec = &schema["spec"];
        assert_eq!(spec["group"], "example.com");
        assert_eq!(spec["scope"], "Namespaced");
        assert_eq!(
            spec["names"],
            json!({"plural": "widgets", "kind": "Widget", "shortNames": ["wd"],
                   "singular": "widget", "listKind": "WidgetList"})
        );
        assert_eq!(spec["conversion"], json!({"strategy": "None"}));
        let v1 = &spec["versions"][0];
        assert_eq!(
            v1["schema"]["properties"]["spec"]["properties"]["size"]["default"],
            1
        );
        assert_eq!(v1["subresources"], json!({"status": {}}));
        assert_eq!(v1["additionalPrinterColumns"][0]["jsonPath"], ".spec.size");
        let v1beta1 = &spec["versions"][1];
        assert_eq!(
            (&v1beta1["deprecated"], &v1beta1["subresources"]),
            (&json!(true), &json!({}))
        );
        assert!(v1beta1.get("additionalPrinterColumns").is_none());
        let json_text = snapshot_text(CRD, "today", "json").unwrap();
        let first = json_text.split("\n---\n").next().unwrap();
        assert_eq!(serde_json::from_str::<Value>(first).unwrap(), *schema);
    }

    #[test]
    fn what_kcp_refuses_is_refused_with_its_words() {
        let error = snapshot_text(CRD, "Today", "yaml").unwrap_err();
        assert!(
            format!("{error:#}").contains(r#"metadata.name: Invalid value: "Today.widgets.example.com": a lowercase RFC 1123 subdomain"#),
            "{error:#}"
        );
        let by_service = CRD.replace(
            "  versions:\n",
            "  conversion:\n    strategy: Webhook\n    webhook:\n      conversionReviewVersions: [v1]\n      clientConfig: {service: {name: s, namespace: n}}\n  versions:\n",
        );
        let error = snapshot_text(&by_service, "today", "yaml").unwrap_err();
        assert!(
            format!("{error:#}").contains(
                "webhooks that refer to services are not supported, please use URL instead"
            ),
            "{error:#}"
        );
        let by_url =
            by_service.replace("{service: {name: s, namespace: n}}", "{url: \"https://x\"}");
        let text = snapshot_text(&by_url, "today", "json").unwrap();
        let schema: Value = serde_json::from_str(text.split("\n---\n").next().unwrap()).unwrap();
        assert_eq!(
            schema["spec"]["conversion"],
            json!({"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": {"url": "https://x"}}})
        );
        let error = snapshot_text("kind: ConfigMap\n", "today", "yaml").unwrap_err();
        assert!(format!("{error:#}").contains("unexpected type for CRD ConfigMap"));
    }
}
