//! API sharing with kubectl and kcp's plugin: a provider workspace exports `widgets` (its
//! schema made by `kubectl kcp crd snapshot`), consumers bind it with `kubectl kcp bind
//! apiexport`, and use widgets validated and defaulted by the export's schema, stored under the
//! export's identity; wildcard lists by identity, naming conflicts with local CRDs in either
//! order, the identity Secret, the endpoint slice, a binding's deletion, and the permission to
//! bind.

use std::path::Path;

use base64::Engine;
use kcp_testing::output::{json, stderr, stdout};

use super::support::{Kcp, kubectl_with_plugins, write_file};

/// Creates, in `kcp`'s home, the WorkspaceType `name` (extending `root:universal`) with
/// `field` (`initializer` or `terminator`) set, and the workspace `held` of that type.
fn held_workspace(kcp: &Kcp, dir: &Path, name: &str, field: &str) {
    let home = kcp.home();
    let ty = write_file(
        dir,
        "type.yaml",
        &format!(
            "apiVersion: tenancy.kcp.io/v1alpha1\nkind: WorkspaceType\nmetadata:\n  name: {name}\nspec:\n  {field}: true\n  extend:\n    with:\n    - name: universal\n      path: root\n"
        ),
    );
    kcp.kubectl_in_ok(home, &["create", "-f", &ty]);
    let workspace = write_file(
        dir,
        "ws.yaml",
        &format!(
            "apiVersion: tenancy.kcp.io/v1alpha1\nkind: Workspace\nmetadata:\n  name: held\nspec:\n  type: {{name: {name}, path: \"{home}\"}}\n"
        ),
    );
    kcp.kubectl_in_ok(home, &["create", "-f", &workspace]);
}

/// kubectl with `args` against `target` (`*` or a logical cluster) of the virtual workspace at
/// `view`.
fn in_view(kcp: &Kcp, view: &str, target: &str, args: &[&str]) -> std::process::Output {
    let server = format!("--server={view}/clusters/{target}");
    let mut all = vec![server.as_str()];
    all.extend_from_slice(args);
    kcp.kubectl(&all)
}

/// The logical clusters the initializing or terminating view at `view` lists, once it lists
/// some (`what` it waits for).
fn waiting_in_view(kcp: &Kcp, view: &str, what: &str) -> String {
    kcp_testing::wait::until(what, || {
        let names = stdout(&in_view(
            kcp,
            view,
            "*",
            &[
                "get",
                "logicalclusters",
                "-o",
                "jsonpath={range .items[*]}{.metadata.annotations.kcp\\.io/cluster}{\"\\n\"}{end}",
            ],
        ));
        (!names.is_empty()).then_some(names)
    })
}

/// A `widgets.example.io` CRD; `color` lists the colours its schema allows.
fn widget_crd(color: &str) -> String {
    format!(
        "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.io
spec:
  group: example.io
  scope: Namespaced
  names: {{plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {{status: {{}}}}
    additionalPrinterColumns:
    - {{name: Size, type: integer, jsonPath: .spec.size}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-validations:
            - {{rule: \"self.size <= 10\", message: a widget is at most 10 big}}
            properties:
              size: {{type: integer, minimum: 1, default: 3, description: How big the widget is.}}
              color: {{type: string, enum: [{color}]}}
          status:
            type: object
            properties:
              seen: {{type: boolean}}
"
    )
}

/// Exports `widgets` from `provider`: the schema made from [`widget_crd`] by the plugin, and
/// an APIExport written at v1alpha1 (stored at v1alpha2) claiming configmaps. Returns the
/// export's identity hash once it has one.
pub(super) fn export_widgets(kcp: &Kcp, dir: &Path, provider: &str, color: &str) -> String {
    let file = color.replace([',', ' '], "");
    let crd = write_file(dir, &format!("{file}-crd.yaml"), &widget_crd(color));
    let kubeconfig = kcp.kubeconfig_in(dir, provider, None);
    let snapshot = kubectl_with_plugins(
        &kubeconfig,
        &["kcp", "crd", "snapshot", "-f", &crd, "--prefix", "v1"],
    );
    let schema = write_file(dir, &format!("{file}-schema.yaml"), &stdout(&snapshot));
    kcp.kubectl_in_ok(provider, &["apply", "-f", &schema]);
    let export = write_file(
        dir,
        "export.yaml",
        "apiVersion: apis.kcp.io/v1alpha1
kind: APIExport
metadata:
  name: widgets
spec:
  latestResourceSchemas: [v1.widgets.example.io]
  permissionClaims:
  - {group: \"\", resource: configmaps, all: true}
",
    );
    kcp.kubectl_in_ok(provider, &["apply", "-f", &export]);
    kcp.kubectl_in_ok(
        provider,
        &[
            "wait",
            "--for=jsonpath={.status.identityHash}",
            "apiexport/widgets",
            "--timeout=10s",
        ],
    );
    kcp.kubectl_in_ok(
        provider,
        &[
            "get",
            "apiexport",
            "widgets",
            "-o",
            "jsonpath={.status.identityHash}",
        ],
    )
}

/// `kubectl kcp bind apiexport <export> <flags>` in `consumer`, which must succeed; its output.
pub(super) fn bind(kcp: &Kcp, dir: &Path, consumer: &str, export: &str, flags: &[&str]) -> String {
    let kubeconfig = kcp.kubeconfig_in(dir, consumer, None);
    let mut args = vec!["kcp", "bind", "apiexport", export];
    args.extend_from_slice(flags);
    let output = kubectl_with_plugins(&kubeconfig, &args);
    assert!(output.status.success(), "{}", stderr(&output));
    stdout(&output)
}

/// `namespace/name` of each object a wildcard list of `path` returns, sorted.
fn wildcard_names(kcp: &Kcp, path: &str) -> Vec<String> {
    let list = json(&kcp.kubectl_in_ok("*", &["get", "--raw", path]));
    let mut names: Vec<String> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| {
            format!(
                "{}/{}",
                item["metadata"]["annotations"]["kcp.io/cluster"]
                    .as_str()
                    .unwrap(),
                item["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect();
    names.sort();
    names
}

#[test]
fn an_exported_api_is_bound_served_and_kept_apart() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::shared("api-sharing");
    let provider = kcp.workspace("provider");
    let identity = export_widgets(&kcp, dir.path(), &provider, "red, blue");
    assert_eq!(identity.len(), 64, "{identity}");

    // v1alpha1 names schemas; v1alpha2 (stored) lists resources; claims keep their meaning.
    let v2 = json(&kcp.kubectl_in_ok(
        &provider,
        &[
            "get",
            "apiexports.v1alpha2.apis.kcp.io",
            "widgets",
            "-o",
            "json",
        ],
    ));
    assert_eq!(
        v2["spec"]["resources"][0]["schema"],
        "v1.widgets.example.io"
    );
    assert_eq!(
        v2["spec"]["resources"][0]["storage"],
        serde_json::json!({"crd": {}})
    );
    assert_eq!(
        v2["spec"]["permissionClaims"][0]["verbs"],
        serde_json::json!(["*"])
    );
    let v1 = json(&kcp.kubectl_in_ok(
        &provider,
        &[
            "get",
            "apiexports.v1alpha1.apis.kcp.io",
            "widgets",
            "-o",
            "json",
        ],
    ));
    assert_eq!(
        v1["spec"]["latestResourceSchemas"],
        serde_json::json!(["v1.widgets.example.io"])
    );

    // The identity is the SHA-256 of the key of the Secret kcp-system/widgets.
    let secret = json(&kcp.kubectl_in_ok(
        &provider,
        &["get", "secret", "widgets", "-n", "kcp-system", "-o", "json"],
    ));
    let key = base64::engine::general_purpose::STANDARD
        .decode(secret["data"]["key"].as_str().unwrap())
        .unwrap();
    let key_file = dir.path().join("key");
    std::fs::write(&key_file, key).unwrap();
    let sum = std::process::Command::new("sha256sum")
        .arg(&key_file)
        .output()
        .unwrap();
    assert!(stdout(&sum).starts_with(&identity));

    // Two consumers bind it: one accepts the claim, one rejects it.
    let (a, b) = (kcp.workspace("consumer-a"), kcp.workspace("consumer-b"));
    let export = format!("{provider}:widgets");
    assert_eq!(
        bind(
            &kcp,
            dir.path(),
            &a,
            &export,
            &["--accept-permission-claim", "configmaps.core"]
        ),
        "apibinding widgets created. Waiting to successfully bind ...\nwidgets created and bound.\n"
    );
    bind(
        &kcp,
        dir.path(),
        &b,
        &export,
        &["--reject-permission-claim", "configmaps.core"],
    );
    let binding = json(&kcp.kubectl_in_ok(&a, &["get", "apibinding", "widgets", "-o", "json"]));
    assert_eq!(binding["status"]["phase"], "Bound");
    assert_eq!(
        binding["status"]["apiExportClusterName"],
        kcp.logical_cluster(&provider)
    );
    let bound = &binding["status"]["boundResources"][0];
    assert_eq!(bound["resource"], "widgets");
    assert_eq!(bound["schema"]["identityHash"], identity.as_str());
    assert_eq!(
        binding["status"]["appliedPermissionClaims"][0]["resource"],
        "configmaps"
    );
    let rejected = json(&kcp.kubectl_in_ok(&b, &["get", "apibinding", "widgets", "-o", "json"]));
    assert_eq!(rejected["spec"]["permissionClaims"][0]["state"], "Rejected");
    assert!(rejected["status"].get("appliedPermissionClaims").is_none());

    // Each consumer uses widgets as a CRD of the export's schema would serve them.
    for (consumer, name) in [(&a, "wa"), (&b, "wb")] {
        let listed = kcp.kubectl_in_ok(consumer, &["api-resources", "--api-group=example.io"]);
        assert!(listed.contains("widgets"), "{listed}");
        let widget = write_file(
            dir.path(),
            &format!("{name}.yaml"),
            &format!(
                "apiVersion: example.io/v1\nkind: Widget\nmetadata: {{name: {name}, namespace: default}}\nspec: {{color: red}}\n"
            ),
        );
        kcp.kubectl_in_ok(consumer, &["apply", "-f", &widget]);
        let size = kcp.kubectl_in_ok(
            consumer,
            &[
                "get",
                "widget",
                name,
                "-n",
                "default",
                "-o",
                "jsonpath={.spec.size}",
            ],
        );
        assert_eq!(size, "3", "defaulted by the schema");
        let table = kcp.kubectl_in_ok(consumer, &["get", "widgets", "-n", "default"]);
        assert!(table.starts_with("NAME   SIZE"), "{table}");
        let refused = kcp.kubectl_in_err(
            consumer,
            &[
                "patch",
                "widget",
                name,
                "-n",
                "default",
                "--type=merge",
                "-p",
                r#"{"spec":{"color":"green"}}"#,
            ],
        );
        assert!(
            refused.contains("Unsupported value: \"green\""),
            "{refused}"
        );
        let explained = kcp.kubectl_in_ok(consumer, &["explain", "widgets.spec.size"]);
        assert!(explained.contains("How big the widget is."), "{explained}");
        // The schema's CEL rules hold, and server-side apply owns fields as for a CRD's.
        let big = kcp.kubectl_in_err(
            consumer,
            &[
                "patch",
                "widget",
                name,
                "-n",
                "default",
                "--type=merge",
                "-p",
                r#"{"spec":{"size":11}}"#,
            ],
        );
        assert!(big.contains("a widget is at most 10 big"), "{big}");
        let applied = write_file(
            dir.path(),
            &format!("{name}-applied.yaml"),
            &format!(
                "apiVersion: example.io/v1\nkind: Widget\nmetadata: {{name: {name}, namespace: default}}\nspec: {{size: 5}}\n"
            ),
        );
        let conflict = kcp.kubectl_in_err(
            consumer,
            &[
                "apply",
                "--server-side",
                "--field-manager=sizer",
                "-f",
                &applied,
            ],
        );
        assert!(
            conflict.contains("conflict with \"kubectl-client-side-apply\"")
                && conflict.contains(".spec.size"),
            "{conflict}"
        );
        kcp.kubectl_in_ok(
            consumer,
            &[
                "apply",
                "--server-side",
                "--field-manager=sizer",
                "--force-conflicts",
                "-f",
                &applied,
            ],
        );
        let managers = kcp.kubectl_in_ok(
            consumer,
            &[
                "get",
                "widget",
                name,
                "-n",
                "default",
                "--show-managed-fields",
                "-o",
                "jsonpath={.metadata.managedFields[*].manager}",
            ],
        );
        assert!(managers.contains("sizer"), "{managers}");
        let size = kcp.kubectl_in_ok(
            consumer,
            &[
                "get",
                "widget",
                name,
                "-n",
                "default",
                "-o",
                "jsonpath={.spec.size}",
            ],
        );
        assert_eq!(size, "5");
    }

    // The provider's endpoint slice points at this server's virtual workspace of the export.
    let provider_cluster = kcp.logical_cluster(&provider);
    let url = kcp.endpoint_url(&provider, "widgets");
    assert_eq!(
        url,
        format!(
            "{}/services/apiexport/{provider_cluster}/widgets",
            kcp.base_url()
        )
    );

    // The export's virtual workspace: its resources, the claimed ones and the bindings.
    let (ca, cb) = (kcp.logical_cluster(&a), kcp.logical_cluster(&b));
    let view = |target: &str, args: &[&str]| in_view(&kcp, &url, target, args);
    let resources = stdout(&view("*", &["api-resources", "-o", "name"]));
    assert_eq!(
        resources,
        "configmaps\napibindings.apis.kcp.io\nwidgets.example.io\n"
    );
    let names = |output: String| -> Vec<String> {
        let mut lines: Vec<String> = output.lines().map(str::to_string).collect();
        lines.sort();
        lines
    };
    let every_widget = [
        "-o",
        "jsonpath={range .items[*]}{.metadata.annotations.kcp\\.io/cluster}/{.metadata.name}{\"\\n\"}{end}",
    ];
    let mut listed = vec!["get", "widgets", "-A"];
    listed.extend_from_slice(&every_widget);
    assert_eq!(
        names(stdout(&view("*", &listed))),
        [format!("{ca}/wa"), format!("{cb}/wb")]
    );
    // Claimed configmaps only where the claim was accepted.
    let mut configmaps = vec!["get", "configmaps", "-A"];
    configmaps.extend_from_slice(&every_widget);
    let claimed = names(stdout(&view("*", &configmaps)));
    assert!(
        claimed.contains(&format!("{ca}/kube-root-ca.crt")),
        "{claimed:?}"
    );
    assert!(claimed.iter().all(|c| c.starts_with(&ca)), "{claimed:?}");
    let not_claimed = stderr(&view(&cb, &["get", "configmaps", "-n", "default"]));
    assert!(not_claimed.contains("could not find"), "{not_claimed}");
    // Every binding to the export, the one that rejected the claim too.
    let mut bindings = vec!["get", "apibindings"];
    bindings.extend_from_slice(&every_widget);
    assert_eq!(
        names(stdout(&view("*", &bindings))),
        [format!("{ca}/widgets"), format!("{cb}/widgets")]
    );
    // A provider's controller writes status through it; consumers are named by logical
    // cluster, not by path.
    stdout(&view(
        &ca,
        &[
            "patch",
            "widget",
            "wa",
            "-n",
            "default",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"seen":true}}"#,
        ],
    ));
    let seen = kcp.kubectl_in_ok(
        &a,
        &[
            "get",
            "widget",
            "wa",
            "-n",
            "default",
            "-o",
            "jsonpath={.status.seen}",
        ],
    );
    assert_eq!(seen, "true");
    let path_url = format!(
        "{}/clusters/{a}/apis",
        url.trim_start_matches(&kcp.base_url())
    );
    let by_path = kcp.kubectl_err(&["get", "--raw", &path_url]);
    assert!(
        by_path.contains("Path not resolved to a valid virtual workspace"),
        "{by_path}"
    );

    // Wildcard lists need the identity; with it they return exactly the binders' objects.
    let by_identity = format!("/clusters/*/apis/example.io/v1/widgets:{identity}");
    assert_eq!(
        wildcard_names(&kcp, &by_identity),
        [format!("{ca}/wa"), format!("{cb}/wb")]
    );
    // Without it, or with another hash, kcp's plain-text 404 (not a Status).
    for plural in ["widgets", "widgets:0123abcd"] {
        let path = format!("/clusters/*/apis/example.io/v1/{plural}");
        let plain = kcp.kubectl_in_err("*", &["get", "--raw", &path, "-v=8"]);
        let body = plain.split("\"Response Body\"").nth(1).unwrap_or_default();
        assert!(body.contains("404 page not found"), "{plain}");
        assert!(plain.contains("Content-Type: text/plain"), "{plain}");
    }

    // Another export of the same group and resource, bound elsewhere, stays apart.
    let other_provider = kcp.workspace("provider-2");
    let other_identity = export_widgets(&kcp, dir.path(), &other_provider, "green");
    assert_ne!(other_identity, identity);
    let c = kcp.workspace("consumer-c");
    bind(
        &kcp,
        dir.path(),
        &c,
        &format!("{other_provider}:widgets"),
        &[],
    );
    let green = write_file(
        dir.path(),
        "wc.yaml",
        "apiVersion: example.io/v1\nkind: Widget\nmetadata: {name: wc, namespace: default}\nspec: {color: green}\n",
    );
    kcp.kubectl_in_ok(&c, &["apply", "-f", &green]);
    let cc = kcp.logical_cluster(&c);
    assert_eq!(
        wildcard_names(
            &kcp,
            &format!("/clusters/*/apis/example.io/v1/widgets:{other_identity}")
        ),
        [format!("{cc}/wc")]
    );
    assert_eq!(wildcard_names(&kcp, &by_identity).len(), 2);

    // Deleting a binding deletes its widgets and the resource from the consumer.
    kcp.kubectl_in_ok(&b, &["delete", "apibinding", "widgets", "--timeout=20s"]);
    assert_eq!(wildcard_names(&kcp, &by_identity), [format!("{ca}/wa")]);
    kcp_testing::wait::until("widgets leave consumer-b's discovery", || {
        !kcp.kubectl_in_ok(&b, &["api-resources", "--api-group=example.io"])
            .contains("widgets")
    });
}

#[test]
fn a_local_crd_and_a_binding_of_the_same_resource_conflict_as_in_kcp() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::shared("api-sharing-conflicts");
    let provider = kcp.workspace("provider");
    export_widgets(&kcp, dir.path(), &provider, "red");
    let crd = write_file(dir.path(), "local.yaml", &widget_crd("blue"));
    let export = format!("{provider}:widgets");

    // A local CRD first: the binding does not bind, and says why.
    let first = kcp.workspace("crd-first");
    kcp.kubectl_in_ok(&first, &["apply", "-f", &crd]);
    kcp.wait_established(&first, "widgets.example.io");
    let binding = write_file(
        dir.path(),
        "binding.yaml",
        &format!(
            "apiVersion: apis.kcp.io/v1alpha2\nkind: APIBinding\nmetadata: {{name: widgets}}\nspec: {{reference: {{export: {{path: \"{provider}\", name: widgets}}}}}}\n"
        ),
    );
    kcp.kubectl_in_ok(&first, &["apply", "-f", &binding]);
    kcp.kubectl_in_ok(
        &first,
        &[
            "wait",
            "--for=condition=BindingUpToDate=false",
            "apibinding/widgets",
            "--timeout=10s",
        ],
    );
    let status = json(&kcp.kubectl_in_ok(&first, &["get", "apibinding", "widgets", "-o", "json"]))
        ["status"]
        .clone();
    assert_eq!(status["phase"], "Binding");
    for kind in ["InitialBindingCompleted", "BindingUpToDate", "Ready"] {
        let condition = status["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == kind)
            .unwrap_or_else(|| panic!("{kind} in {status}"));
        assert_eq!(condition["status"], "False");
        assert_eq!(condition["reason"], "NamingConflicts");
        assert_eq!(
            condition["message"],
            "Unable to bind APIs because they are bound by other APIBindings or CRDs: map[widgets.example.io:{ true}]"
        );
    }

    // A binding first: the local CRD is admitted but never established.
    let second = kcp.workspace("binding-first");
    bind(&kcp, dir.path(), &second, &export, &[]);
    kcp.kubectl_in_ok(&second, &["apply", "-f", &crd]);
    kcp.kubectl_in_ok(
        &second,
        &[
            "wait",
            "--for=condition=NamesAccepted=false",
            "crd/widgets.example.io",
            "--timeout=10s",
        ],
    );
    let conditions = kcp.kubectl_in_ok(
        &second,
        &[
            "get",
            "crd",
            "widgets.example.io",
            "-o",
            "jsonpath={range .status.conditions[*]}{.type}={.status}/{.reason}/{.message};{end}",
        ],
    );
    assert!(
        conditions
            .contains("NamesAccepted=False/ListKindConflict/\"WidgetList\" is already in use;"),
        "{conditions}"
    );
    assert!(
        conditions.contains("Established=False/NotAccepted/"),
        "{conditions}"
    );
    // The bound resource keeps serving, by the export's schema (red, not blue).
    let red = write_file(
        dir.path(),
        "red.yaml",
        "apiVersion: example.io/v1\nkind: Widget\nmetadata: {name: red, namespace: default}\nspec: {color: red}\n",
    );
    kcp.kubectl_in_ok(&second, &["apply", "-f", &red]);
}

#[test]
fn schemas_are_immutable_and_binding_needs_bind_on_the_export() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = write_file(
        dir.path(),
        "tokens.csv",
        "alice-token,alice,1001,\nbob-token,bob,1002,\n",
    );
    let kcp = Kcp::start(&dir.path().join("root"), &["--token-auth-file", &tokens]);
    let provider = kcp.workspace("provider");
    export_widgets(&kcp, dir.path(), &provider, "red");

    // An APIResourceSchema's spec never changes.
    let refused = kcp.kubectl_in_err(
        &provider,
        &[
            "patch",
            "apiresourceschema",
            "v1.widgets.example.io",
            "--type=merge",
            "-p",
            r#"{"spec":{"names":{"singular":"gadget"}}}"#,
        ],
    );
    assert!(
        refused.contains("is forbidden") && refused.contains("is immutable"),
        "{refused}"
    );

    // Alice and Bob administer the consumer; only Alice may bind the export.
    let consumer = kcp.workspace("consumer");
    for user in ["alice", "bob"] {
        kcp.kubectl_in_ok(
            &consumer,
            &[
                "create",
                "clusterrolebinding",
                &format!("{user}-admin"),
                "--clusterrole=cluster-admin",
                &format!("--user={user}"),
            ],
        );
    }
    // (kubectl's `create clusterrole` refuses verbs discovery does not list, such as `bind`.)
    let grant = write_file(
        dir.path(),
        "grant.yaml",
        "apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: bind-widgets}
rules:
- {apiGroups: [apis.kcp.io], resources: [apiexports], resourceNames: [widgets], verbs: [bind]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: alice-binds}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: bind-widgets}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}
",
    );
    kcp.kubectl_in_ok(&provider, &["apply", "-f", &grant]);
    let export = format!("{provider}:widgets");
    let bob = kcp.kubeconfig_in(dir.path(), &consumer, Some("bob-token"));
    let denied = kubectl_with_plugins(&bob, &["kcp", "bind", "apiexport", &export]);
    assert!(!denied.status.success());
    assert!(
        stderr(&denied).contains(&format!(
            "unable to create APIBinding: no permission to bind to export {export}"
        )),
        "{}",
        stderr(&denied)
    );
    let alice_dir = dir.path().join("alice");
    std::fs::create_dir_all(&alice_dir).unwrap();
    let alice = kcp.kubeconfig_in(&alice_dir, &consumer, Some("alice-token"));
    let bound = kubectl_with_plugins(&alice, &["kcp", "bind", "apiexport", &export]);
    assert!(bound.status.success(), "{}", stderr(&bound));
    assert!(stdout(&bound).ends_with("widgets created and bound.\n"));

    // The export's virtual workspace answers whoever holds verbs on `apiexports/content`
    // in the provider's workspace (and may enter it).
    let content = write_file(
        dir.path(),
        "content.yaml",
        "apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: widgets-content}
rules:
- {apiGroups: [apis.kcp.io], resources: [apiexports/content], resourceNames: [widgets], verbs: [get, list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: alice-content}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: widgets-content}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: alice-access}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:kcp:workspace:access}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}
",
    );
    kcp.kubectl_in_ok(&provider, &["apply", "-f", &content]);
    let url = kcp.endpoint_url(&provider, "widgets");
    let path = format!(
        "{}/clusters/*/apis/example.io/v1/widgets",
        url.trim_start_matches(&kcp.base_url())
    );
    let listed = kcp.kubectl_in_as("alice-token", "root", &["get", "--raw", &path]);
    assert!(stdout(&listed).contains("\"items\":[]"));
    let refused = stderr(&kcp.kubectl_in_as("bob-token", "root", &["get", "--raw", &path]));
    assert!(
        refused.contains("Forbidden") || refused.contains("forbidden"),
        "{refused}"
    );
    let widget = write_file(
        dir.path(),
        "widget.json",
        r#"{"apiVersion":"example.io/v1","kind":"Widget","metadata":{"name":"w","namespace":"default"},"spec":{"color":"red"}}"#,
    );
    let consumer_path = path.replace(
        "/clusters/*/apis/example.io/v1/widgets",
        &format!(
            "/clusters/{}/apis/example.io/v1/namespaces/default/widgets",
            kcp.logical_cluster(&consumer)
        ),
    );
    let create = [
        "create",
        "--raw",
        consumer_path.as_str(),
        "-f",
        widget.as_str(),
    ];
    let written = stderr(&kcp.kubectl_in_as("alice-token", "root", &create));
    assert!(
        written.contains("cannot create resource \"apiexports/content\""),
        "{written}"
    );
    stdout(&kcp.kubectl_in(&consumer, &create));

    // After a restart the bindings are read back (their parts, page by page): the widget is
    // served, and the view still lists it.
    kcp.stop();
    let kcp = Kcp::start(&dir.path().join("root"), &["--token-auth-file", &tokens]);
    kcp.kubectl_in_ok(&consumer, &["get", "widget", "w", "-n", "default"]);
    let listed = kcp.kubectl_in_as("alice-token", "root", &["get", "--raw", &path]);
    assert!(stdout(&listed).contains("\"name\":\"w\""));
}

/// The SDK's example provider controller (`kcp_sdk::examples::provider`), pointed at the
/// export's endpoint slice, sees every consumer's widgets through the virtual workspace and
/// writes their status there; the consumers read it back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_provider_controller_serves_every_consumer() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::shared("api-sharing-provider");
    let provider = kcp.workspace("provider");
    export_widgets(&kcp, dir.path(), &provider, "red");
    let export = format!("{provider}:widgets");
    let mut consumers = Vec::new();
    for name in ["one", "two", "three"] {
        let consumer = kcp.workspace(name);
        bind(&kcp, dir.path(), &consumer, &export, &[]);
        let widget = write_file(
            dir.path(),
            &format!("{name}.yaml"),
            &format!(
                "apiVersion: example.io/v1\nkind: Widget\nmetadata: {{name: {name}, namespace: default}}\nspec: {{color: red}}\n"
            ),
        );
        kcp.kubectl_in_ok(&consumer, &["apply", "-f", &widget]);
        consumers.push((consumer, name));
    }
    let config = kcp_sdk::ClusterConfig::new(kcp.kube_config_in(&provider).await);
    let url = kcp.endpoint_url(&provider, "widgets");
    assert_eq!(
        config.endpoints(&provider, "widgets").await.unwrap(),
        std::slice::from_ref(&url)
    );
    let resource = kube::api::ApiResource {
        group: "example.io".into(),
        version: "v1".into(),
        api_version: "example.io/v1".into(),
        kind: "Widget".into(),
        plural: "widgets".into(),
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let controller = tokio::spawn(kcp_sdk::examples::provider::run(
        config.at(&url),
        resource,
        async {
            let _ = stopped.await;
        },
    ));
    for (consumer, name) in &consumers {
        let consumer = consumer.clone();
        let name = name.to_string();
        let kcp = &kcp;
        tokio::task::block_in_place(|| {
            kcp_testing::wait::until("the provider marks the widget seen", || {
                kcp.kubectl_in_ok(
                    &consumer,
                    &[
                        "get",
                        "widget",
                        &name,
                        "-n",
                        "default",
                        "-o",
                        "jsonpath={.status.seen}",
                    ],
                ) == "true"
            })
        });
    }
    let _ = stop.send(());
    controller.await.unwrap().unwrap();
}

/// An export's maximal permission policy: a consumer's requests on its resources are also
/// checked against the provider's RBAC for the prefixed user and groups.
#[test]
fn the_maximal_permission_policy_caps_what_consumers_may_do() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::shared("api-sharing-policy");
    let provider = kcp.workspace("provider");
    export_widgets(&kcp, dir.path(), &provider, "red");
    kcp.kubectl_in_ok(
        &provider,
        &[
            "patch",
            "apiexport",
            "widgets",
            "--type=merge",
            "-p",
            r#"{"spec":{"maximalPermissionPolicy":{"local":{}}}}"#,
        ],
    );
    let policy = write_file(
        dir.path(),
        "policy.yaml",
        "apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: widgets-at-most}
rules:
- {apiGroups: [example.io], resources: [widgets], verbs: [get, list, watch, create]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: widgets-at-most}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: widgets-at-most}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: Group, name: \"apis.kcp.io:binding:system:authenticated\"}
",
    );
    kcp.kubectl_in_ok(&provider, &["apply", "-f", &policy]);
    let consumer = kcp.workspace("consumer");
    bind(
        &kcp,
        dir.path(),
        &consumer,
        &format!("{provider}:widgets"),
        &[],
    );
    let widget = write_file(
        dir.path(),
        "w.yaml",
        "apiVersion: example.io/v1\nkind: Widget\nmetadata: {name: w, namespace: default}\nspec: {color: red}\n",
    );
    kcp.kubectl_in_ok(&consumer, &["create", "-f", &widget]);
    kcp.kubectl_in_ok(&consumer, &["get", "widgets", "-n", "default"]);
    let denied = kcp.kubectl_in_err(&consumer, &["delete", "widget", "w", "-n", "default"]);
    assert!(
        denied.contains("cannot delete resource \"widgets\" in API group \"example.io\"")
            && denied.contains("access not permitted by maximal permission policy"),
        "{denied}"
    );
    // What the policy does not cover is the workspace's own RBAC's alone.
    kcp.kubectl_in_ok(&consumer, &["create", "configmap", "free", "-n", "default"]);
    kcp.kubectl_in_ok(&consumer, &["delete", "configmap", "free", "-n", "default"]);
}

/// An initializer controller finishes the workspaces of its type through the initializing
/// workspaces' virtual workspace: it lists those waiting for it across workspaces, sets one up
/// through the view, and removes its initializer there; the workspace becomes Ready.
#[test]
fn an_initializer_finishes_workspaces_of_its_type_through_its_virtual_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::shared("initializing-view");
    let home = kcp.home().to_string();
    held_workspace(&kcp, dir.path(), "gated", "initializer");
    let initializer = format!("{home}:gated");
    let cluster = kcp_testing::wait::until("the workspace is scheduled", || {
        let cluster = kcp.kubectl_in_ok(
            &home,
            &["get", "ws", "held", "-o", "jsonpath={.spec.cluster}"],
        );
        (!cluster.is_empty()).then_some(cluster)
    });
    let view = format!(
        "{}/services/initializingworkspaces/{initializer}",
        kcp.base_url()
    );
    let in_view = |target: &str, args: &[&str]| in_view(&kcp, &view, target, args);
    // The workspaces waiting for this initializer, across workspaces.
    let waiting = waiting_in_view(&kcp, &view, "the view lists the workspace");
    assert_eq!(waiting, format!("{cluster}\n"));
    // It sets the workspace up through the view, then lets it go.
    stdout(&in_view(
        &cluster,
        &["create", "configmap", "initialized", "-n", "default"],
    ));
    let status = json(&stdout(&in_view(
        &cluster,
        &["get", "logicalcluster", "cluster", "-o", "json"],
    )))["status"]["initializers"]
        .clone();
    let left: Vec<&str> = status
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i.as_str())
        .filter(|i| *i != initializer)
        .collect();
    let patch = serde_json::json!({"status": {"initializers": left}}).to_string();
    stdout(&in_view(
        &cluster,
        &[
            "patch",
            "logicalcluster",
            "cluster",
            "--subresource=status",
            "--type=merge",
            "-p",
            &patch,
        ],
    ));
    kcp.kubectl_in_ok(
        &home,
        &[
            "wait",
            "--for=jsonpath={.status.phase}=Ready",
            "ws/held",
            "--timeout=10s",
        ],
    );
    let path = format!("{home}:held");
    kcp.kubectl_in_ok(&path, &["get", "configmap", "initialized", "-n", "default"]);
    // Done: the workspace has left the view.
    let after = stderr(&in_view(&cluster, &["get", "configmaps", "-n", "default"]));
    assert!(
        after.contains("cannot access this workspace") || after.contains("Forbidden"),
        "{after}"
    );
    let other = stderr(&kcp.kubectl(&[
        &format!(
            "--server={}/services/initializingworkspaces/{home}:other/clusters/{cluster}",
            kcp.base_url()
        ),
        "get",
        "configmaps",
        "-n",
        "default",
    ]));
    assert!(
        other.contains("Forbidden")
            || other.contains("forbidden")
            || other.contains("access not permitted"),
        "{other}"
    );
}

/// Every workspace has kcp's default bindings, made while it initializes (the universal type's
/// `defaultAPIBindings`, named as kcp names them) and Ready before the workspace is; root has
/// its own, named as the exports; `topology.kcp.io`'s resources are served by them.
#[test]
fn every_workspace_has_kcps_default_bindings() {
    let kcp = Kcp::shared("default-bindings");
    let ws = kcp.workspace("child");
    let names = kcp.kubectl_in_ok(
        &ws,
        &[
            "get",
            "apibindings",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name} {.status.phase}{\"\\n\"}{end}",
        ],
    );
    let lines: Vec<&str> = names.lines().collect();
    assert_eq!(lines.len(), 2, "{names}");
    assert!(
        lines[0].starts_with("tenancy.kcp.io-") && lines[0].ends_with(" Bound"),
        "{names}"
    );
    assert!(
        lines[1].starts_with("topology.kcp.io-") && lines[1].ends_with(" Bound"),
        "{names}"
    );
    assert_eq!(
        lines[0].len(),
        "tenancy.kcp.io-xxxxx Bound".len(),
        "{names}"
    );
    let root = kcp.kubectl_in_ok("root", &["get", "apibindings", "-o", "name"]);
    assert!(
        root.contains("apibinding.apis.kcp.io/tenancy.kcp.io\n"),
        "{root}"
    );
    assert!(
        root.contains("apibinding.apis.kcp.io/topology.kcp.io\n"),
        "{root}"
    );
    // kcp's own kinds stay listed once; the bound topology kinds are served.
    let resources = kcp.kubectl_in_ok(&ws, &["api-resources", "-o", "name"]);
    assert_eq!(
        resources.matches("workspaces.tenancy.kcp.io\n").count(),
        1,
        "{resources}"
    );
    assert!(
        resources.contains("partitions.topology.kcp.io\n"),
        "{resources}"
    );
    kcp.kubectl_in_ok(&ws, &["get", "partitions"]);
}

/// Beyond kcp (kcp#1326): owner references between a bound resource's objects and a
/// consumer's own objects are garbage collected like any other, both ways and in the
/// foreground.
#[test]
fn owner_references_across_bound_and_local_objects_are_collected() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::shared("api-sharing-gc");
    let provider = kcp.workspace("provider");
    export_widgets(&kcp, dir.path(), &provider, "red");
    let consumer = kcp.workspace("consumer");
    bind(
        &kcp,
        dir.path(),
        &consumer,
        &format!("{provider}:widgets"),
        &[],
    );
    let uid_of = |kind: &str, name: &str| {
        kcp.kubectl_in_ok(
            &consumer,
            &[
                "get",
                kind,
                name,
                "-n",
                "default",
                "-o",
                "jsonpath={.metadata.uid}",
            ],
        )
    };
    let create = |name: &str, text: String| {
        let file = write_file(dir.path(), name, &text);
        kcp.kubectl_in_ok(&consumer, &["create", "-f", &file]);
    };
    // An object of `api_version`/`kind` in `default`, owned by `owner` (api version, kind,
    // name, uid) if given.
    let object =
        |api_version: &str, kind: &str, name: &str, owner: Option<(&str, &str, &str, &str)>| {
            let mut object = serde_json::json!({
                "apiVersion": api_version, "kind": kind,
                "metadata": {"name": name, "namespace": "default"},
            });
            if let Some((api, kind, name, uid)) = owner {
                object["metadata"]["ownerReferences"] = serde_json::json!([{
                    "apiVersion": api, "kind": kind, "name": name, "uid": uid,
                    "blockOwnerDeletion": true,
                }]);
            }
            object.to_string()
        };
    let widget = |name: &str, owner| object("example.io/v1", "Widget", name, owner);
    let configmap = |name: &str, owner| object("v1", "ConfigMap", name, owner);
    let gone = |kind: &str, name: &str| {
        kcp_testing::wait::until(&format!("{kind} {name} is collected"), || {
            !kcp.kubectl_in(&consumer, &["get", kind, name, "-n", "default"])
                .status
                .success()
        });
    };
    // A widget owns a configmap.
    create("w1.json", widget("owner", None));
    let uid = uid_of("widget", "owner");
    create(
        "c1.json",
        configmap(
            "dependent",
            Some(("example.io/v1", "Widget", "owner", &uid)),
        ),
    );
    kcp.kubectl_in_ok(&consumer, &["delete", "widget", "owner", "-n", "default"]);
    gone("configmap", "dependent");
    // A configmap owns a widget.
    create("c2.json", configmap("owner", None));
    let uid = uid_of("configmap", "owner");
    create(
        "w2.json",
        widget("dependent", Some(("v1", "ConfigMap", "owner", &uid))),
    );
    kcp.kubectl_in_ok(
        &consumer,
        &["delete", "configmap", "owner", "-n", "default"],
    );
    gone("widget", "dependent");
    // In the foreground: the widget goes once its dependent has.
    create("w3.json", widget("fg", None));
    let uid = uid_of("widget", "fg");
    create(
        "c3.json",
        configmap(
            "fg-dependent",
            Some(("example.io/v1", "Widget", "fg", &uid)),
        ),
    );
    kcp.kubectl_in_ok(
        &consumer,
        &[
            "delete",
            "widget",
            "fg",
            "-n",
            "default",
            "--cascade=foreground",
            "--timeout=20s",
        ],
    );
    gone("configmap", "fg-dependent");
    gone("widget", "fg");
}

/// A claim accepted with a selector shows the provider, through the export's virtual
/// workspace, only the objects it selects in that consumer.
#[test]
fn a_claim_accepted_with_a_selector_shows_only_what_it_selects() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::shared("api-sharing-selectors");
    let provider = kcp.workspace("provider");
    export_widgets(&kcp, dir.path(), &provider, "red");
    let consumer = kcp.workspace("consumer");
    let binding = write_file(
        dir.path(),
        "binding.yaml",
        &format!(
            "apiVersion: apis.kcp.io/v1alpha2
kind: APIBinding
metadata: {{name: widgets}}
spec:
  reference: {{export: {{path: \"{provider}\", name: widgets}}}}
  permissionClaims:
  - {{group: \"\", resource: configmaps, verbs: [\"*\"], state: Accepted,
     selector: {{matchLabels: {{shared: \"yes\"}}}}}}
"
        ),
    );
    kcp.kubectl_in_ok(&consumer, &["apply", "-f", &binding]);
    kcp.kubectl_in_ok(
        &consumer,
        &[
            "wait",
            "--for=jsonpath={.status.phase}=Bound",
            "apibinding/widgets",
            "--timeout=10s",
        ],
    );
    for (name, label) in [("shared", "yes"), ("private", "no")] {
        kcp.kubectl_in_ok(&consumer, &["create", "configmap", name, "-n", "default"]);
        kcp.kubectl_in_ok(
            &consumer,
            &[
                "label",
                "configmap",
                name,
                "-n",
                "default",
                &format!("shared={label}"),
            ],
        );
    }
    let url = kcp.endpoint_url(&provider, "widgets");
    let cluster = kcp.logical_cluster(&consumer);
    let listed = kcp.kubectl_ok(&[
        &format!("--server={url}/clusters/*"),
        "get",
        "configmaps",
        "-A",
        "-o",
        "jsonpath={range .items[*]}{.metadata.annotations.kcp\\.io/cluster}/{.metadata.name}{\"\\n\"}{end}",
    ]);
    assert_eq!(listed, format!("{cluster}/shared\n"));
}

/// An export may claim another export's resource (by its identity): a consumer that binds both
/// and accepts the claim shows the claiming provider those objects through its view.
#[test]
fn a_claim_on_another_exports_resource_is_served_where_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::shared("api-sharing-bound-claims");
    let provider = kcp.workspace("provider");
    let identity = export_widgets(&kcp, dir.path(), &provider, "red");
    let observer = write_file(
        dir.path(),
        "observer.yaml",
        &format!(
            "apiVersion: apis.kcp.io/v1alpha2
kind: APIExport
metadata: {{name: observer}}
spec:
  permissionClaims:
  - {{group: example.io, resource: widgets, identityHash: {identity}, verbs: [\"*\"]}}
"
        ),
    );
    kcp.kubectl_in_ok(&provider, &["apply", "-f", &observer]);
    let consumer = kcp.workspace("consumer");
    bind(
        &kcp,
        dir.path(),
        &consumer,
        &format!("{provider}:widgets"),
        &[],
    );
    let binding = write_file(
        dir.path(),
        "binding.yaml",
        &format!(
            "apiVersion: apis.kcp.io/v1alpha2
kind: APIBinding
metadata: {{name: observer}}
spec:
  reference: {{export: {{path: \"{provider}\", name: observer}}}}
  permissionClaims:
  - {{group: example.io, resource: widgets, identityHash: {identity}, verbs: [\"*\"], state: Accepted,
     selector: {{matchAll: true}}}}
"
        ),
    );
    kcp.kubectl_in_ok(&consumer, &["apply", "-f", &binding]);
    kcp.kubectl_in_ok(
        &consumer,
        &[
            "wait",
            "--for=jsonpath={.status.phase}=Bound",
            "apibinding/observer",
            "--timeout=10s",
        ],
    );
    let widget = write_file(
        dir.path(),
        "w.yaml",
        "apiVersion: example.io/v1\nkind: Widget\nmetadata: {name: observed, namespace: default}\nspec: {color: red}\n",
    );
    kcp.kubectl_in_ok(&consumer, &["apply", "-f", &widget]);
    let url = kcp.endpoint_url(&provider, "observer");
    let cluster = kcp.logical_cluster(&consumer);
    let listed = kcp.kubectl_ok(&[
        &format!("--server={url}/clusters/*"),
        "get",
        "widgets",
        "-A",
        "-o",
        "jsonpath={range .items[*]}{.metadata.annotations.kcp\\.io/cluster}/{.metadata.name}{\"\\n\"}{end}",
    ]);
    assert_eq!(listed, format!("{cluster}/observed\n"));
}

/// A terminator holds the workspaces of its type while they are deleted, until it removes
/// itself through the terminating workspaces' virtual workspace.
#[test]
fn a_terminator_lets_deleted_workspaces_of_its_type_go_through_its_virtual_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::shared("terminating-view");
    let home = kcp.home().to_string();
    held_workspace(&kcp, dir.path(), "doomed", "terminator");
    kcp.kubectl_in_ok(
        &home,
        &[
            "wait",
            "--for=jsonpath={.status.phase}=Ready",
            "ws/held",
            "--timeout=10s",
        ],
    );
    let cluster = kcp.logical_cluster(&format!("{home}:held"));
    kcp.kubectl_in_ok(&home, &["delete", "ws", "held", "--wait=false"]);
    let terminator = format!("{home}:doomed");
    let view = format!(
        "{}/services/terminatingworkspaces/{terminator}",
        kcp.base_url()
    );
    let in_view = |target: &str, args: &[&str]| in_view(&kcp, &view, target, args);
    let waiting = waiting_in_view(&kcp, &view, "the view lists the deleted workspace");
    assert_eq!(waiting, format!("{cluster}\n"));
    // Held while the terminator is there (deliberately a fixed window: it must NOT go).
    std::thread::sleep(std::time::Duration::from_millis(500));
    kcp.kubectl_in_ok(&home, &["get", "ws", "held"]);
    stdout(&in_view(
        &cluster,
        &[
            "patch",
            "logicalcluster",
            "cluster",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"terminators":[]}}"#,
        ],
    ));
    kcp_testing::wait::until("the workspace goes", || {
        !kcp.kubectl_in(&home, &["get", "ws", "held"])
            .status
            .success()
    });
}
