//! Server-side apply with kubectl and kube-rs: managers sharing a configmap, a role and a
//! custom resource with a `listType=map` list, conflicts and their message, forced applies,
//! fields an applier drops, kubectl's client-side → server-side migration, dry runs,
//! `--show-managed-fields`, and the 4xx answers of malformed applies.

use serde_json::{Value, json};

use super::support::{Kcp, write_file};

/// The managedFields entries of `object`, as `(manager, operation, fieldsV1)`.
fn owners(object: &Value) -> Vec<(String, String, Value)> {
    object["metadata"]["managedFields"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|e| {
            (
                e["manager"].as_str().unwrap_or_default().to_string(),
                e["operation"].as_str().unwrap_or_default().to_string(),
                e["fieldsV1"].clone(),
            )
        })
        .collect()
}

fn fields_of(object: &Value, manager: &str) -> Value {
    owners(object)
        .into_iter()
        .find(|(m, _, _)| m == manager)
        .map(|(_, _, fields)| fields)
        .unwrap_or(Value::Null)
}

/// `kubectl apply --server-side` of `file` for `manager`; its output.
fn apply(kcp: &Kcp, manager: &str, file: &str) -> String {
    let manager = format!("--field-manager={manager}");
    kcp.kubectl_ok(&["apply", "--server-side", &manager, "-f", file])
}

/// The same apply, which must be refused; its error output.
fn apply_refused(kcp: &Kcp, manager: &str, file: &str) -> String {
    let manager = format!("--field-manager={manager}");
    kcp.kubectl_in_err(
        kcp.home(),
        &["apply", "--server-side", &manager, "-f", file],
    )
}

fn get_json(kcp: &Kcp, args: &[&str]) -> Value {
    let mut all = vec!["get"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["-o", "json", "--show-managed-fields"]);
    serde_json::from_str(&kcp.kubectl_ok(&all)).unwrap()
}

#[test]
fn kubectl_managers_share_a_configmap_conflict_force_and_drop_fields() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::shared("ssa-configmap");
    let manifest = |name: &str, text: &str| write_file(dir.path(), name, text);
    let one = manifest(
        "one.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shared\n  labels: {team: one}\ndata:\n  a: \"1\"\n  b: \"1\"\n",
    );
    let two = manifest(
        "two.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shared\ndata:\n  c: \"2\"\n",
    );
    assert_eq!(
        apply(&kcp, "one", &one).trim(),
        "configmap/shared serverside-applied"
    );
    apply(&kcp, "two", &two);
    let object = get_json(&kcp, &["cm", "shared"]);
    assert_eq!(object["data"], json!({"a": "1", "b": "1", "c": "2"}));
    assert_eq!(
        fields_of(&object, "one"),
        json!({"f:data": {"f:a": {}, "f:b": {}}, "f:metadata": {"f:labels": {"f:team": {}}}})
    );
    assert_eq!(fields_of(&object, "two"), json!({"f:data": {"f:c": {}}}));
    assert!(
        owners(&object).iter().all(|(_, op, _)| op == "Apply"),
        "{object}"
    );

    // "two" claims a field "one" owns with another value: a conflict naming "one".
    let clash = manifest(
        "clash.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shared\ndata:\n  a: \"two\"\n  c: \"2\"\n",
    );
    let refused = apply_refused(&kcp, "two", &clash);
    assert!(
        refused.contains(r#"Apply failed with 1 conflict: conflict with "one": .data.a"#),
        "{refused}"
    );
    assert_eq!(
        get_json(&kcp, &["cm", "shared"])["data"]["a"],
        "1",
        "a refused apply changes nothing"
    );
    // A dry run of the forced apply changes nothing either.
    kcp.kubectl_ok(&[
        "apply",
        "--server-side",
        "--field-manager=two",
        "--force-conflicts",
        "--dry-run=server",
        "-f",
        &clash,
    ]);
    assert_eq!(get_json(&kcp, &["cm", "shared"])["data"]["a"], "1");
    kcp.kubectl_ok(&[
        "apply",
        "--server-side",
        "--field-manager=two",
        "--force-conflicts",
        "-f",
        &clash,
    ]);
    let object = get_json(&kcp, &["cm", "shared"]);
    assert_eq!(object["data"]["a"], "two");
    assert_eq!(
        fields_of(&object, "two"),
        json!({"f:data": {"f:a": {}, "f:c": {}}})
    );
    assert_eq!(
        fields_of(&object, "one"),
        json!({"f:data": {"f:b": {}}, "f:metadata": {"f:labels": {"f:team": {}}}})
    );

    // "one" stops sending b and its label: both go; what "two" owns stays.
    let fewer = manifest(
        "fewer.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shared\ndata:\n  c: \"2\"\n",
    );
    apply(&kcp, "one", &fewer);
    let object = get_json(&kcp, &["cm", "shared"]);
    assert_eq!(object["data"], json!({"a": "two", "c": "2"}));
    assert!(object["metadata"].get("labels").is_none(), "{object}");
    // c is shared now: it stays until both drop it.
    let none = manifest(
        "none.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shared\n",
    );
    apply(&kcp, "one", &none);
    assert_eq!(
        get_json(&kcp, &["cm", "shared"])["data"],
        json!({"a": "two", "c": "2"})
    );

    // Updates are recorded too, and take fields from appliers.
    kcp.kubectl_ok(&["patch", "cm", "shared", "-p", r#"{"data":{"c":"3"}}"#]);
    let object = get_json(&kcp, &["cm", "shared"]);
    assert_eq!(
        fields_of(&object, "kubectl-patch"),
        json!({"f:data": {"f:c": {}}})
    );
    assert_eq!(fields_of(&object, "two"), json!({"f:data": {"f:a": {}}}));
    // Without --show-managed-fields kubectl hides them.
    let plain = kcp.kubectl_ok(&["get", "cm", "shared", "-o", "yaml"]);
    assert!(!plain.contains("managedFields"), "{plain}");
}

#[test]
fn kubectl_moves_from_client_side_to_server_side_apply() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::shared("ssa-migration");
    let before = write_file(
        dir.path(),
        "before.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: moved\ndata:\n  a: \"1\"\n  b: \"1\"\n",
    );
    let after = write_file(
        dir.path(),
        "after.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: moved\ndata:\n  a: \"2\"\n",
    );
    kcp.kubectl_ok(&["apply", "-f", &before]);
    let object = get_json(&kcp, &["cm", "moved"]);
    assert_eq!(owners(&object)[0].0, "kubectl-client-side-apply");
    // No conflict with kubectl's client-side apply; the field it dropped goes.
    let applied = kcp.kubectl_ok(&["apply", "--server-side", "-f", &after]);
    assert!(!applied.contains("conflict"), "{applied}");
    let object = get_json(&kcp, &["cm", "moved"]);
    assert_eq!(object["data"], json!({"a": "2"}));
    assert_eq!(
        fields_of(&object, "kubectl"),
        json!({"f:data": {"f:a": {}}})
    );
    assert!(
        owners(&object)
            .iter()
            .all(|(m, _, _)| m != "kubectl-client-side-apply"),
        "{object}"
    );
    // The last-applied annotation follows, so client-side apply still works afterwards.
    let last =
        object["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .as_str()
            .unwrap();
    let last: Value = serde_json::from_str(last).unwrap();
    assert_eq!(last["data"], json!({"a": "2"}));
}

#[test]
fn managers_share_a_role_and_a_custom_resource_list_map() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::shared("ssa-role-crd");
    let manifest = |name: &str, text: &str| write_file(dir.path(), name, text);
    let role_one = manifest(
        "role-one.yaml",
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: reader\nrules:\n- apiGroups: [\"\"]\n  resources: [configmaps]\n  verbs: [get]\n",
    );
    let role_two = manifest(
        "role-two.yaml",
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: reader\n  labels: {owner: two}\n",
    );
    apply(&kcp, "one", &role_one);
    apply(&kcp, "two", &role_two);
    let role = get_json(&kcp, &["role", "reader"]);
    // Rules are an atomic list: one owner for the whole list.
    assert_eq!(fields_of(&role, "one"), json!({"f:rules": {}}));
    assert_eq!(
        fields_of(&role, "two"),
        json!({"f:metadata": {"f:labels": {"f:owner": {}}}})
    );
    let role_clash = manifest(
        "role-clash.yaml",
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: reader\nrules:\n- apiGroups: [\"\"]\n  resources: [secrets]\n  verbs: [get]\n",
    );
    let refused = apply_refused(&kcp, "two", &role_clash);
    assert!(
        refused.contains(r#"conflict with "one": .rules"#),
        "{refused}"
    );

    let crd = manifest(
        "crd.yaml",
        r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.ssa.example.com
spec:
  group: ssa.example.com
  names: {kind: Gadget, plural: gadgets, singular: gadget, listKind: GadgetList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
              ports:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name]
                items:
                  type: object
                  required: [name]
                  properties:
                    name: {type: string}
                    port: {type: integer}
          status:
            type: object
            properties:
              ready: {type: boolean}
"#,
    );
    kcp.kubectl_ok(&["apply", "--server-side", "-f", &crd]);
    kcp.wait_established(kcp.home(), "gadgets.ssa.example.com");
    let gadget = |name: &str, spec: &str| {
        manifest(
            name,
            &format!(
                "apiVersion: ssa.example.com/v1\nkind: Gadget\nmetadata:\n  name: g\nspec:\n{spec}"
            ),
        )
    };
    let http = gadget(
        "http.yaml",
        "  size: 1\n  ports:\n  - {name: http, port: 80}\n",
    );
    let https = gadget("https.yaml", "  ports:\n  - {name: https, port: 443}\n");
    apply(&kcp, "one", &http);
    apply(&kcp, "two", &https);
    let object = get_json(&kcp, &["gadget", "g"]);
    assert_eq!(
        object["spec"]["ports"],
        json!([{"name": "http", "port": 80}, {"name": "https", "port": 443}])
    );
    assert_eq!(
        fields_of(&object, "two"),
        json!({"f:spec": {"f:ports": {"k:{\"name\":\"https\"}": {".": {}, "f:name": {}, "f:port": {}}}}})
    );
    let clash = gadget("clash.yaml", "  ports:\n  - {name: http, port: 8080}\n");
    let refused = apply_refused(&kcp, "two", &clash);
    assert!(
        refused.contains(r#"conflict with "one": .spec.ports[name="http"].port"#),
        "{refused}"
    );
    // "one" drops its item: it goes, "two"'s stays.
    let size_only = gadget("size.yaml", "  size: 2\n");
    apply(&kcp, "one", &size_only);
    let object = get_json(&kcp, &["gadget", "g"]);
    assert_eq!(
        object["spec"],
        json!({"size": 2, "ports": [{"name": "https", "port": 443}]})
    );
    // Status through its subresource, recorded as such; the main resource ignores it.
    let status = manifest(
        "status.yaml",
        "apiVersion: ssa.example.com/v1\nkind: Gadget\nmetadata:\n  name: g\nstatus:\n  ready: true\n",
    );
    kcp.kubectl_ok(&[
        "apply",
        "--server-side",
        "--field-manager=checker",
        "--subresource=status",
        "-f",
        &status,
    ]);
    let object = get_json(&kcp, &["gadget", "g"]);
    assert_eq!(object["status"], json!({"ready": true}));
    let entry = object["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["manager"] == "checker")
        .cloned()
        .unwrap();
    assert_eq!(entry["subresource"], "status");
    assert_eq!(entry["fieldsV1"], json!({"f:status": {"f:ready": {}}}));
}

#[tokio::test]
async fn kube_rs_applies_and_malformed_applies_get_their_status() {
    let kcp = tokio::task::spawn_blocking(|| Kcp::shared("ssa-kube-rs"))
        .await
        .unwrap();
    let client = kcp.kube_client().await;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{Api, Patch, PatchParams};
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let config = json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "from-kube-rs"}, "data": {"k": "v"}});
    let created = configmaps
        .patch(
            "from-kube-rs",
            &PatchParams::apply("operator"),
            &Patch::Apply(&config),
        )
        .await
        .unwrap();
    assert_eq!(created.data.unwrap()["k"], "v");
    let entries = created.metadata.managed_fields.unwrap();
    assert_eq!(entries[0].manager.as_deref(), Some("operator"));
    assert_eq!(entries[0].operation.as_deref(), Some("Apply"));

    let raw = |content_type: &str, query: &str, body: &str| {
        http::Request::patch(format!(
            "/api/v1/namespaces/default/configmaps/from-kube-rs?{query}"
        ))
        .header("Content-Type", content_type)
        .body(body.as_bytes().to_vec())
        .unwrap()
    };
    let status = |request: http::Request<Vec<u8>>| {
        let client = client.clone();
        async move {
            let response = client
                .send(request.map(kube::client::Body::from))
                .await
                .unwrap();
            let code = response.status().as_u16();
            let body = http_body_util::BodyExt::collect(response.into_body())
                .await
                .unwrap()
                .to_bytes();
            (code, serde_json::from_slice::<Value>(&body).unwrap())
        }
    };
    let body = config.to_string();
    let (code, answer) = status(raw("application/apply-patch+yaml", "", &body)).await;
    assert_eq!(code, 422, "{answer}");
    assert_eq!(
        answer["message"],
        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
    );
    let (code, answer) = status(raw("application/apply-patch+cbor", "fieldManager=m", &body)).await;
    assert_eq!(code, 415, "{answer}");
    let (code, answer) = status(raw(
        "application/merge-patch+json",
        "fieldManager=m&force=true",
        "{}",
    ))
    .await;
    assert_eq!(code, 422, "{answer}");
    assert!(
        answer["message"]
            .as_str()
            .unwrap()
            .ends_with("force: Forbidden: may not be specified for non-apply patch"),
        "{answer}"
    );
    let with_owners = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "from-kube-rs", "managedFields": [{"manager": "x"}]}});
    let (code, answer) = status(raw(
        "application/apply-patch+yaml",
        "fieldManager=m",
        &with_owners.to_string(),
    ))
    .await;
    assert_eq!(
        (code, answer["message"].as_str()),
        (400, Some("metadata.managedFields must be nil"))
    );
    let (code, answer) = status(raw(
        "application/apply-patch+yaml",
        "fieldManager=m",
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: from-kube-rs\n",
    ))
    .await;
    assert_eq!(
        (code, answer["message"].as_str()),
        (400, Some("invalid object type: /v1, Kind=Secret"))
    );
    // A conflict is a 409 with one FieldManagerConflict cause per field.
    let (code, answer) = status(raw(
        "application/apply-patch+yaml",
        "fieldManager=other",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-kube-rs\ndata:\n  k: changed\n",
    ))
    .await;
    assert_eq!(code, 409, "{answer}");
    assert_eq!(answer["reason"], "Conflict");
    assert_eq!(
        answer["details"]["causes"],
        json!([{"reason": "FieldManagerConflict", "message": "conflict with \"operator\"", "field": ".data.k"}])
    );
}

/// The directories of real-world CRD manifests `scripts/test` fetched (`KCP_TEST_CRD_DIRS`,
/// colon-separated), else the same modules in Go's default module cache. Missing ones are a
/// failure, not a skip.
fn real_world_crd_dirs() -> Vec<std::path::PathBuf> {
    let dirs: Vec<std::path::PathBuf> = match std::env::var("KCP_TEST_CRD_DIRS") {
        Ok(dirs) => dirs.split(':').map(Into::into).collect(),
        Err(_) => {
            let cache = std::path::PathBuf::from(std::env::var("HOME").unwrap_or_default())
                .join("go/pkg/mod");
            [
                "github.com/prometheus-operator/prometheus-operator@v0.78.2/example/prometheus-operator-crd",
                "github.com/kyverno/kyverno@v1.13.2/config/crds",
                "sigs.k8s.io/gateway-api@v1.2.1/config/crd/standard",
            ]
            .iter()
            .map(|dir| cache.join(dir))
            .collect()
        }
    };
    for dir in &dirs {
        assert!(
            dir.is_dir(),
            "{} is missing: run scripts/test, which fetches the real-world CRDs",
            dir.display()
        );
    }
    dirs
}

#[test]
fn prometheus_operator_kyverno_and_gateway_api_install_with_server_side_apply() {
    let kcp = Kcp::shared("ssa-real-crds");
    for dir in real_world_crd_dirs() {
        let dir = dir.to_string_lossy().into_owned();
        let applied = kcp.kubectl_ok(&["apply", "--server-side", "-R", "-f", &dir]);
        assert!(applied.contains("serverside-applied"), "{applied}");
        // Applying again changes nothing and meets no conflict.
        kcp.kubectl_ok(&["apply", "--server-side", "-R", "-f", &dir]);
    }
    let crds: Value = serde_json::from_str(&kcp.kubectl_ok(&["get", "crd", "-o", "json"])).unwrap();
    let names: Vec<&str> = crds["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|crd| crd["metadata"]["name"].as_str())
        .collect();
    for expected in [
        "prometheuses.monitoring.coreos.com",
        "clusterpolicies.kyverno.io",
        "httproutes.gateway.networking.k8s.io",
    ] {
        assert!(names.contains(&expected), "{expected} in {names:?}");
        kcp.wait_established(kcp.home(), expected);
    }
    // Each CRD is owned by kubectl's applier.
    let prometheus = get_json(&kcp, &["crd", "prometheuses.monitoring.coreos.com"]);
    assert_eq!(owners(&prometheus)[0].0, "kubectl");
    assert_eq!(owners(&prometheus)[0].1, "Apply");
}

#[test]
fn workspaces_apply_and_built_in_json_comes_in_kubernetes_order() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::shared("ssa-workspace");
    let workspace = write_file(
        dir.path(),
        "ws.yaml",
        "apiVersion: tenancy.kcp.io/v1alpha1\nkind: Workspace\nmetadata:\n  name: applied\n  labels: {team: a}\n",
    );
    kcp.kubectl_ok(&["apply", "--server-side", "-f", &workspace]);
    let relabelled = write_file(
        dir.path(),
        "ws2.yaml",
        "apiVersion: tenancy.kcp.io/v1alpha1\nkind: Workspace\nmetadata:\n  name: applied\n  labels: {team: b}\n",
    );
    kcp.kubectl_ok(&["apply", "--server-side", "-f", &relabelled]);
    let applied = get_json(&kcp, &["workspace", "applied"]);
    assert_eq!(applied["metadata"]["labels"]["team"], "b");
    assert_eq!(
        fields_of(&applied, "kubectl"),
        json!({"f:metadata": {"f:labels": {"f:team": {}}}})
    );
    // The server's own writes (scheduling, phase) are recorded as kcp's.
    kcp.kubectl_ok(&[
        "wait",
        "--for=jsonpath={.status.phase}=Ready",
        "workspace/applied",
        "--timeout=60s",
    ]);
    let ready = get_json(&kcp, &["workspace", "applied"]);
    assert!(
        owners(&ready)
            .iter()
            .any(|(m, op, _)| m == "kcp" && op == "Update"),
        "{ready}"
    );

    // JSON answers of built-in kinds come in Kubernetes' field order (GETs, lists).
    kcp.kubectl_ok(&["create", "configmap", "ordered", "--from-literal=b=1"]);
    let path = format!(
        "/clusters/{}/api/v1/namespaces/default/configmaps",
        kcp.home()
    );
    let object = kcp.kubectl_ok(&["get", "--raw", &format!("{path}/ordered")]);
    assert!(
        object.starts_with(r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"ordered","namespace":"default","uid":"#),
        "{object}"
    );
    assert!(
        object.trim_end().ends_with(r#""data":{"b":"1"}}"#),
        "{object}"
    );
    let list = kcp.kubectl_ok(&["get", "--raw", &path]);
    assert!(
        list.starts_with(
            r#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"#
        ),
        "{list}"
    );
}
