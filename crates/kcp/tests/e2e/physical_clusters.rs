//! Physical clusters registered in workspaces, against two real Kubernetes clusters (`east`,
//! `west`: `PhysicalCluster::shared`): their APIs imported and negotiated into the workspace's
//! CRDs by the cluster-controller inside `kcp start` and as its own binary, and `crd-puller`'s
//! CRDs of Kubernetes' own kinds applied to a workspace as they are.

use std::path::Path;
use std::process::{Child, Command};

use kcp_testing::crd::Crd;
use serde_json::Value;

use kcp_testing::output::{stderr, stdout};

use super::support::{Kcp, PhysicalCluster, kubectl_with_plugins, write_file};

/// A namespaced CRD `<plural>.example.dev` of `kind` whose `spec` has `fields` (`name: type`).
fn crd(plural: &str, kind: &str, fields: &[(&str, &str)]) -> String {
    let properties: String = fields
        .iter()
        .map(|(name, kind)| format!("      {name}: {{type: {kind}}}\n"))
        .collect();
    let schema = format!(
        "type: object\nproperties:\n  spec:\n    type: object\n    properties:\n{properties}"
    );
    Crd::namespaced(plural, kind)
        .group("example.dev")
        .storage_version("v1", &schema)
        .yaml()
}

/// Applies `yaml` to the physical cluster and waits until its CRDs are established.
fn apply_to_cluster(cluster: &PhysicalCluster, dir: &Path, name: &str, yaml: &str) {
    let file = write_file(dir, &format!("{}-{name}.yaml", cluster.name()), yaml);
    cluster.kubectl_ok(&["apply", "--server-side", "-f", &file]);
    cluster.kubectl_ok(&[
        "wait",
        "--for=condition=Established",
        "-f",
        &file,
        "--timeout=60s",
    ]);
}

/// A Cluster object for `cluster`, its kubeconfig inline.
fn inline_cluster(cluster: &PhysicalCluster) -> String {
    let kubeconfig = std::fs::read_to_string(cluster.kubeconfig()).unwrap();
    let indented: String = kubeconfig.lines().map(|l| format!("    {l}\n")).collect();
    format!(
        "apiVersion: cluster.example.dev/v1alpha1\nkind: Cluster\nmetadata: {{name: {}}}\nspec:\n  kubeconfig: |\n{indented}",
        cluster.name()
    )
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// The property names of `spec` in the negotiated schema of `name` (`widgets.v1.example.dev`).
fn negotiated_spec_fields(kcp: &Kcp, ws: &str, name: &str) -> Result<Vec<String>, String> {
    let out = kcp.kubectl_in(ws, &["get", "negotiatedapiresource", name, "-o", "json"]);
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let negotiated = json(&String::from_utf8_lossy(&out.stdout));
    let mut fields: Vec<String> =
        negotiated["spec"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
            .as_object()
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default();
    fields.sort();
    Ok(fields)
}

/// The status of condition `kind` of the object `args` names, and its message.
fn condition(kcp: &Kcp, ws: &str, args: &[&str], kind: &str) -> Option<(String, String)> {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    let out = kcp.kubectl_in(ws, &all);
    let object = json(&String::from_utf8_lossy(&out.stdout));
    let condition = object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)?
        .clone();
    Some((
        condition["status"].as_str()?.to_string(),
        condition["message"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    ))
}

fn api_resources(kcp: &Kcp, ws: &str) -> String {
    kcp.kubectl_in_ok(ws, &["api-resources", "-o", "name"])
}

#[test]
fn clusters_registered_in_a_workspace_negotiate_their_apis() {
    let [east, west] = PhysicalCluster::shared();
    let dir = tempfile::tempdir().unwrap();
    // Widgets differ (west lacks `color`), only east serves gadgets, both serve gizmos as
    // integers where the workspace will enforce a string.
    apply_to_cluster(
        east,
        dir.path(),
        "negotiated",
        &[
            crd(
                "widgets",
                "Widget",
                &[("size", "integer"), ("color", "string")],
            ),
            crd("gadgets", "Gadget", &[("size", "integer")]),
            crd("gizmos", "Gizmo", &[("size", "integer")]),
        ]
        .join("---\n"),
    );
    apply_to_cluster(
        west,
        dir.path(),
        "negotiated",
        &[
            crd("widgets", "Widget", &[("size", "integer")]),
            crd("gizmos", "Gizmo", &[("size", "integer")]),
        ]
        .join("---\n"),
    );

    let root = tempfile::tempdir().unwrap();
    let kcp = start_importing(
        root.path(),
        "deployments.apps,services,configmaps,widgets.example.dev,gadgets.example.dev,gizmos.example.dev",
        &[],
    );
    let team = kcp.workspace("team");
    let other = kcp.workspace("other");
    let enforced = write_file(
        dir.path(),
        "gizmos.yaml",
        &crd("gizmos", "Gizmo", &[("size", "string")]),
    );
    kcp.kubectl_in_ok(&team, &["apply", "-f", &enforced]);
    kcp.wait_established(&team, "gizmos.example.dev");
    // Registered in one apply, west (the narrower) first: however the controller sees them
    // come, widgets end with what both accept (west published alone is already the LCD, and
    // east then fits it).
    let clusters = [inline_cluster(west), inline_cluster(east)].join("---\n");
    let file = write_file(dir.path(), "clusters.yaml", &clusters);
    kcp.kubectl_in_ok(&team, &["apply", "-f", &file]);
    for cluster in ["east", "west"] {
        kcp_testing::wait::until(&format!("Cluster {cluster} Ready"), || {
            condition(&kcp, &team, &["get", "cluster", cluster], "Ready")
                .filter(|(status, _)| status == "True")
                .ok_or_else(|| {
                    format!(
                        "{:?}",
                        condition(&kcp, &team, &["get", "cluster", cluster], "Ready")
                    )
                })
        });
    }

    // Deployments, Services and both custom kinds are served, widgets with what both accept.
    kcp_testing::wait::until("the negotiated kinds in discovery", || {
        let served = api_resources(&kcp, &team);
        let wanted = [
            "deployments.apps",
            "services",
            "widgets.example.dev",
            "gadgets.example.dev",
        ];
        match wanted.iter().all(|w| served.lines().any(|l| l == *w)) {
            true => Ok(()),
            false => Err(served),
        }
    });
    assert_eq!(
        negotiated_spec_fields(&kcp, &team, "widgets.v1.example.dev").unwrap(),
        ["size"]
    );
    let explained = kcp.kubectl_in_ok(&team, &["explain", "deployment.spec"]);
    assert!(explained.contains("replicas"), "{explained}");
    let explained = kcp.kubectl_in_ok(&team, &["explain", "widgets.spec"]);
    assert!(
        explained.contains("size") && !explained.contains("color"),
        "{explained}"
    );
    // kubectl's typed commands (protobuf bodies) work on the negotiated kinds.
    kcp.kubectl_in_ok(
        &team,
        &[
            "create",
            "deployment",
            "web",
            "--image=nginx",
            "--replicas=2",
        ],
    );
    kcp.kubectl_in_ok(&team, &["expose", "deployment", "web", "--port=80"]);
    assert_eq!(
        kcp.kubectl_in_ok(
            &team,
            &[
                "get",
                "deployment",
                "web",
                "-o",
                "jsonpath={.spec.replicas}"
            ]
        ),
        "2"
    );

    // The CRD applied by hand wins: gizmos imports are incompatible with it, with the field.
    for cluster in ["east", "west"] {
        let name = format!("gizmos.{cluster}.v1.example.dev");
        let (status, message) = kcp_testing::wait::until(&format!("{name} Compatible"), || {
            condition(
                &kcp,
                &team,
                &["get", "apiresourceimport", &name],
                "Compatible",
            )
        });
        assert_eq!(status, "False");
        assert!(
            message.contains("properties[spec].properties[size]"),
            "{message}"
        );
    }
    let (enforced, _) = condition(
        &kcp,
        &team,
        &["get", "negotiatedapiresource", "gizmos.v1.example.dev"],
        "Enforced",
    )
    .unwrap();
    assert_eq!(enforced, "True");
    let crd = json(&kcp.kubectl_in_ok(&team, &["get", "crd", "gizmos.example.dev", "-o", "json"]));
    assert_eq!(
        crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
            ["size"]["type"],
        "string"
    );
    // West's synced resources: the compatible and published ones (not gizmos), and configmaps,
    // which the workspace serves itself.
    kcp_testing::wait::until("west's synced resources", || {
        let synced = kcp.kubectl_in_ok(
            &team,
            &[
                "get",
                "cluster",
                "west",
                "-o",
                "jsonpath={.status.syncedResources}",
            ],
        );
        (synced == r#"["configmaps","deployments.apps","services","widgets.example.dev"]"#)
            .then_some(())
            .ok_or(synced)
    });

    // A resource the workspace serves itself is not published over it, and says why.
    let (published, message) = kcp_testing::wait::until("configmaps refused", || {
        condition(
            &kcp,
            &team,
            &["get", "negotiatedapiresource", "configmaps.v1.core"],
            "Published",
        )
    });
    assert_eq!(published, "False");
    assert!(
        message.contains("is a resource the server itself serves"),
        "{message}"
    );
    kcp.kubectl_in_ok(&team, &["create", "configmap", "still-built-in"]);

    // Another workspace sees none of it.
    let served = api_resources(&kcp, &other);
    assert!(
        !served.contains("deployments") && !served.contains("widgets"),
        "{served}"
    );
    assert!(
        kcp.kubectl_in_ok(&other, &["get", "crds", "-o", "name"])
            .is_empty()
    );

    // West goes: widgets are negotiated again from east alone.
    kcp.kubectl_in_ok(&team, &["delete", "cluster", "west"]);
    kcp_testing::wait::until("widgets negotiated again", || match negotiated_spec_fields(
        &kcp,
        &team,
        "widgets.v1.example.dev",
    ) {
        Ok(fields) if fields == ["color", "size"] => Ok(()),
        other => Err(format!("{other:?}")),
    });
    // The CRD follows its negotiated resource.
    kcp_testing::wait::until("the CRD widened", || {
        let explained = kcp.kubectl_in_ok(&team, &["explain", "widgets.spec"]);
        explained.contains("color").then_some(()).ok_or(explained)
    });
    let imports = kcp.kubectl_in_ok(&team, &["get", "apiresourceimports", "-o", "name"]);
    assert!(!imports.contains(".west."), "{imports}");
}

/// Stops the child on drop.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_cluster_controller_binary_imports_from_a_kubeconfig_secret_and_forgets_removed_clusters() {
    let [east, _] = PhysicalCluster::shared();
    let root = tempfile::tempdir().unwrap();
    let kcp = Kcp::start(root.path(), &["--install-cluster-controller=false"]);
    let controller = Running(
        Command::new(env!("CARGO_BIN_EXE_cluster-controller"))
            .arg("--kubeconfig")
            .arg(kcp.kubeconfig())
            .args([
                "--context",
                "shard-base",
                "--resources-to-sync",
                "deployments.apps",
                "--cluster-poll-interval",
                "1s",
            ])
            .spawn()
            .expect("run cluster-controller"),
    );
    let ws = kcp.workspace("fleet");
    let dir = tempfile::tempdir().unwrap();
    let nowhere = write_file(
        dir.path(),
        "nowhere.yaml",
        "apiVersion: cluster.example.dev/v1alpha1\nkind: Cluster\nmetadata: {name: nowhere}\nspec: {}\n",
    );
    let refused = kcp.kubectl_in_err(&ws, &["apply", "-f", &nowhere]);
    assert!(
        refused.contains("exactly one of kubeconfig and kubeconfigSecretRef must be set"),
        "{refused}"
    );
    let cluster = write_file(
        dir.path(),
        "cluster.yaml",
        "apiVersion: cluster.example.dev/v1alpha1\nkind: Cluster\nmetadata: {name: east}\nspec:\n  kubeconfigSecretRef: {namespace: default, name: east}\n",
    );
    kcp.kubectl_in_ok(&ws, &["apply", "-f", &cluster]);
    // No Secret yet: said so.
    kcp_testing::wait::until("the missing Secret reported", || {
        let ready = condition(&kcp, &ws, &["get", "cluster", "east"], "Ready");
        let reason = kcp.kubectl_in_ok(
            &ws,
            &[
                "get",
                "cluster",
                "east",
                "-o",
                r#"jsonpath={.status.conditions[?(@.type=="Ready")].reason}"#,
            ],
        );
        (reason == "KubeConfigSecretNotFound")
            .then_some(())
            .ok_or(format!("{ready:?} {reason}"))
    });
    let kubeconfig = east.kubeconfig();
    kcp.kubectl_in_ok(
        &ws,
        &[
            "create",
            "secret",
            "generic",
            "east",
            "-n",
            "default",
            &format!("--from-file=kubeconfig={}", kubeconfig.display()),
        ],
    );
    kcp_testing::wait::until("deployments served", || {
        api_resources(&kcp, &ws)
            .lines()
            .any(|l| l == "deployments.apps")
    });
    let printed = kcp.kubectl_in_ok(&ws, &["get", "clusters"]);
    assert!(
        printed.contains("True") && printed.contains("APIsImported"),
        "{printed}"
    );
    let crd = json(&kcp.kubectl_in_ok(&ws, &["get", "crd", "deployments.apps", "-o", "json"]));
    assert_eq!(
        crd["metadata"]["ownerReferences"][0]["kind"],
        "NegotiatedAPIResource"
    );

    // Without its Cluster, the imports, the negotiated resource and its CRD go.
    kcp.kubectl_in_ok(&ws, &["delete", "cluster", "east"]);
    kcp_testing::wait::until("the imported API withdrawn", || {
        let crds = kcp.kubectl_in_ok(&ws, &["get", "crds", "-o", "name"]);
        let negotiated = kcp.kubectl_in_ok(&ws, &["get", "negotiatedapiresources", "-o", "name"]);
        let imports = kcp.kubectl_in_ok(&ws, &["get", "apiresourceimports", "-o", "name"]);
        (crds.is_empty() && negotiated.is_empty() && imports.is_empty())
            .then_some(())
            .ok_or(format!("{crds}{negotiated}{imports}"))
    });
    drop(controller);
}

#[test]
fn pulled_kubernetes_kinds_apply_as_they_are_and_round_trip() {
    let [east, _] = PhysicalCluster::shared();
    let kcp = Kcp::shared("pulled-kubernetes-kinds");
    let dir = tempfile::tempdir().unwrap();
    let resources = ["deployments.apps", "pods", "services"];
    let pull = |kubeconfig: &Path| -> Value {
        let mut args = vec!["kcp", "crd", "pull", "-o", "json"];
        args.extend(resources);
        let output = kubectl_with_plugins(kubeconfig, &args);
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_slice(&output.stdout).unwrap()
    };
    let pulled = pull(&east.kubeconfig());
    let names: Vec<&str> = pulled["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["deployments.apps", "pods.core", "services.core"]);
    let target = kcp.workspace("pulled");
    let file = write_file(dir.path(), "pulled.json", &pulled.to_string());
    kcp.kubectl_in_ok(&target, &["apply", "--server-side", "-f", &file]);
    for name in names {
        kcp.wait_established(&target, name);
    }
    kcp.kubectl_in_ok(&target, &["run", "p", "--image=nginx"]);
    assert_eq!(
        kcp.kubectl_in_ok(
            &target,
            &[
                "get",
                "pod",
                "p",
                "-o",
                "jsonpath={.spec.containers[0].image}"
            ]
        ),
        "nginx"
    );
    let again = pull(&kcp.kubeconfig_in(dir.path(), &target, None));
    for (before, after) in pulled["items"]
        .as_array()
        .unwrap()
        .iter()
        .zip(again["items"].as_array().unwrap())
    {
        assert_eq!(before["metadata"], after["metadata"]);
        assert_eq!(difference(&before["spec"], &after["spec"], "spec"), None);
    }
}

/// The first path where `a` and `b` differ, with both values there.
fn difference(a: &Value, b: &Value, path: &str) -> Option<String> {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            keys.into_iter().find_map(|k| {
                difference(
                    a.get(k).unwrap_or(&Value::Null),
                    b.get(k).unwrap_or(&Value::Null),
                    &format!("{path}.{k}"),
                )
            })
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (x, y))| difference(x, y, &format!("{path}[{i}]"))),
        _ if a == b => None,
        _ => Some(format!("{path}: {a} != {b}")),
    }
}

/// A Deployment of nginx, assigned to `cluster` if given.
fn deployment(name: &str, replicas: u32, cluster: Option<&str>) -> String {
    let labels = match cluster {
        Some(cluster) => format!("{{app: {name}, kcp.dev/cluster: {cluster}}}"),
        None => format!("{{app: {name}}}"),
    };
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}, namespace: default, labels: {labels}}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      containers: [{{name: nginx, image: nginx}}]
"
    )
}

/// The `jsonpath` of a Deployment in `ws`.
fn deployment_field(kcp: &Kcp, ws: &str, name: &str, jsonpath: &str) -> String {
    kcp.kubectl_in_ok(
        ws,
        &[
            "get",
            "deployment",
            name,
            "-o",
            &format!("jsonpath={jsonpath}"),
        ],
    )
}

/// kubectl against a physical cluster, its output whether it succeeded or not.
fn downstream(cluster: &PhysicalCluster, args: &[&str]) -> std::process::Output {
    Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig())
        .args(args)
        .output()
        .expect("run kubectl")
}

#[test]
fn objects_assigned_to_a_cluster_are_synced_down_and_their_status_up() {
    let [east, _] = PhysicalCluster::shared();
    let root = tempfile::tempdir().unwrap();
    let kcp = start_importing(root.path(), "deployments.apps,services", &[]);
    let ws = kcp.workspace("apps");
    let dir = tempfile::tempdir().unwrap();
    let file = write_file(dir.path(), "east.yaml", &inline_cluster(east));
    kcp.kubectl_in_ok(&ws, &["apply", "-f", &file]);
    kcp_testing::wait::until("deployments served", || {
        api_resources(&kcp, &ws)
            .lines()
            .any(|l| l == "deployments.apps")
    });
    let namespace = format!("kcp-{}-default", kcp.logical_cluster(&ws));

    // A Deployment assigned to east runs there, and its status comes back.
    let manifest = write_file(dir.path(), "web.yaml", &deployment("web", 2, Some("east")));
    kcp.kubectl_in_ok(&ws, &["apply", "-f", &manifest]);
    kcp.kubectl_in_ok(
        &ws,
        &["create", "service", "clusterip", "web", "--tcp=80:80"],
    );
    kcp.kubectl_in_ok(&ws, &["label", "service", "web", "kcp.dev/cluster=east"]);
    kcp_testing::wait::until("the Deployment available in kcp", || {
        let available = kcp.kubectl_in_ok(
            &ws,
            &[
                "get",
                "deployment",
                "web",
                "-o",
                "jsonpath={.status.availableReplicas}",
            ],
        );
        (available == "2").then_some(()).ok_or(available)
    });
    kcp.kubectl_in_ok(
        &ws,
        &["rollout", "status", "deployment/web", "--timeout=60s"],
    );
    let pods = east.kubectl_ok(&["get", "pods", "-n", &namespace, "-o", "name"]);
    assert_eq!(pods.lines().count(), 2, "{pods}");
    let service = east.kubectl_ok(&[
        "get",
        "service",
        "web",
        "-n",
        &namespace,
        "-o",
        "jsonpath={.spec.ports[0].port}",
    ]);
    assert_eq!(service, "80");

    // Scaled upstream, scaled downstream.
    kcp.kubectl_in_ok(&ws, &["scale", "deployment", "web", "--replicas=3"]);
    kcp_testing::wait::until("three available", || {
        let available = kcp.kubectl_in_ok(
            &ws,
            &[
                "get",
                "deployment",
                "web",
                "-o",
                "jsonpath={.status.availableReplicas}",
            ],
        );
        (available == "3").then_some(()).ok_or(available)
    });
    kcp.kubectl_in_ok(
        &ws,
        &["rollout", "status", "deployment/web", "--timeout=60s"],
    );

    // The server's /metrics counts what its syncer wrote, both ways.
    let metrics = kcp.kubectl_in_ok(&ws, &["get", "--raw", "/metrics"]);
    let lc = kcp.logical_cluster(&ws);
    for operation in ["create", "update", "status"] {
        let line = format!(
            "kcp_syncer_objects_synced_total{{workspace=\"{lc}\",cluster=\"east\",resource=\"deployments.apps\",operation=\"{operation}\"}}"
        );
        assert!(metrics.contains(&line), "{line} in {metrics}");
    }
    assert!(metrics.contains("kcp_syncer_sync_duration_seconds_count{direction=\"up\"}"));

    // Unassigned or deleted upstream: gone downstream.
    kcp.kubectl_in_ok(&ws, &["label", "deployment", "web", "kcp.dev/cluster-"]);
    kcp.kubectl_in_ok(&ws, &["delete", "service", "web"]);
    kcp_testing::wait::until("removed downstream", || {
        let deployment = downstream(east, &["get", "deployment", "web", "-n", &namespace]);
        let service = downstream(east, &["get", "service", "web", "-n", &namespace]);
        (!deployment.status.success() && !service.status.success())
            .then_some(())
            .ok_or("still there")
    });
}

#[test]
fn one_syncer_binary_serves_many_workspaces_each_in_namespaces_of_its_own() {
    let [_, west] = PhysicalCluster::shared();
    let root = tempfile::tempdir().unwrap();
    let kcp = start_importing(root.path(), "deployments.apps", &["--syncer-mode", "none"]);
    let teams = [kcp.workspace("team-a"), kcp.workspace("team-b")];
    let metrics_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let file = write_file(dir.path(), "west.yaml", &inline_cluster(west));
    // The same Deployment in both workspaces.
    let manifest = write_file(dir.path(), "api.yaml", &deployment("api", 1, Some("west")));
    for ws in &teams {
        kcp.kubectl_in_ok(ws, &["apply", "-f", &file]);
        kcp_testing::wait::until("deployments served", || {
            api_resources(&kcp, ws)
                .lines()
                .any(|l| l == "deployments.apps")
        });
        kcp.kubectl_in_ok(ws, &["apply", "-f", &manifest]);
    }
    let syncer = Running(
        Command::new(env!("CARGO_BIN_EXE_syncer"))
            .arg("--from-kubeconfig")
            .arg(kcp.kubeconfig())
            .args(["--workspace", &teams.join(","), "--to-kubeconfig"])
            .arg(west.kubeconfig())
            .args([
                "--cluster",
                "west",
                "--resync-interval",
                "1s",
                "--metrics-bind-address",
                &format!("127.0.0.1:{metrics_port}"),
                "deployments.apps",
            ])
            .spawn()
            .expect("run syncer"),
    );
    for ws in &teams {
        kcp_testing::wait::until("the Deployment available in kcp", || {
            let available = deployment_field(&kcp, ws, "api", "{.status.availableReplicas}");
            (available == "1").then_some(()).ok_or(available)
        });
    }
    let [a, b] = teams
        .each_ref()
        .map(|ws| format!("kcp-{}-default", kcp.logical_cluster(ws)));
    let labels = west.kubectl_ok(&["get", "namespace", &a, "-o", "jsonpath={.metadata.labels}"]);
    assert!(labels.contains("kcp.io/synced-from"), "{labels}");
    assert_eq!(names_in(west, "deployments", &b), "deployment.apps/api");

    // Its /metrics counts each workspace's writes apart.
    let metrics = http_get(metrics_port, "/metrics");
    for ws in &teams {
        let line = format!(
            "kcp_syncer_objects_synced_total{{workspace=\"{}\",cluster=\"west\",resource=\"deployments.apps\",operation=\"create\"}} 1",
            kcp.logical_cluster(ws)
        );
        assert!(metrics.contains(&line), "{line} in {metrics}");
    }

    // One workspace's deletion touches nothing of the other's.
    kcp.kubectl_in_ok(&teams[0], &["delete", "deployment", "api"]);
    namespace_gone(west, &a);
    assert_eq!(names_in(west, "deployments", &b), "deployment.apps/api");
    assert_eq!(
        deployment_field(&kcp, &teams[1], "api", "{.status.availableReplicas}"),
        "1"
    );
    drop(syncer);
}

#[test]
fn an_unassigned_deployment_is_split_across_the_clusters_and_summed_back() {
    let [east, west] = PhysicalCluster::shared();
    let root = tempfile::tempdir().unwrap();
    let kcp = start_importing(root.path(), "deployments.apps", &[]);
    let ws = kcp.workspace("split");
    let dir = tempfile::tempdir().unwrap();
    register(&kcp, &ws, dir.path(), &[east, west]);
    for cluster in ["east", "west"] {
        kcp_testing::wait::until(&format!("{cluster} syncing Deployments"), || {
            let synced = kcp.kubectl_in_ok(
                &ws,
                &[
                    "get",
                    "cluster",
                    cluster,
                    "-o",
                    "jsonpath={.status.syncedResources}",
                ],
            );
            synced
                .contains("deployments.apps")
                .then_some(())
                .ok_or(synced)
        });
    }
    let namespace = format!("kcp-{}-default", kcp.logical_cluster(&ws));

    // 5 replicas: 3 to east, 2 to west; the root sums what runs.
    let web = write_file(dir.path(), "web.yaml", &deployment("web", 5, None));
    kcp.kubectl_in_ok(&ws, &["apply", "-f", &web]);
    kcp_testing::wait::until("5 available at the root", || {
        let available = deployment_field(&kcp, &ws, "web", "{.status.availableReplicas}");
        (available == "5").then_some(()).ok_or(available)
    });
    assert_eq!(
        deployment_field(&kcp, &ws, "web--east", "{.spec.replicas}"),
        "3"
    );
    assert_eq!(
        deployment_field(&kcp, &ws, "web--west", "{.spec.replicas}"),
        "2"
    );
    let owner = deployment_field(
        &kcp,
        &ws,
        "web--west",
        "{.metadata.ownerReferences[0].name}",
    );
    assert_eq!(owner, "web");
    kcp.kubectl_in_ok(
        &ws,
        &["rollout", "status", "deployment/web", "--timeout=60s"],
    );
    for (cluster, replicas) in [(east, "3"), (west, "2")] {
        let leaf = format!("web--{}", cluster.name());
        let ready = cluster.kubectl_ok(&[
            "get",
            "deployment",
            &leaf,
            "-n",
            &namespace,
            "-o",
            "jsonpath={.status.readyReplicas}",
        ]);
        assert_eq!(ready, replicas, "in {}", cluster.name());
    }

    // Scaled to 8: 4 and 4.
    kcp.kubectl_in_ok(&ws, &["scale", "deployment", "web", "--replicas=8"]);
    kcp_testing::wait::until("8 available at the root", || {
        let available = deployment_field(&kcp, &ws, "web", "{.status.availableReplicas}");
        (available == "8").then_some(()).ok_or(available)
    });
    assert_eq!(
        deployment_field(&kcp, &ws, "web--east", "{.spec.replicas}"),
        "4"
    );
    assert_eq!(
        deployment_field(&kcp, &ws, "web--west", "{.spec.replicas}"),
        "4"
    );
    kcp.kubectl_in_ok(
        &ws,
        &["rollout", "status", "deployment/web", "--timeout=60s"],
    );
}

#[test]
fn a_lost_clusters_share_moves_after_the_grace_period_and_comes_back_with_it() {
    let [east, _] = PhysicalCluster::shared();
    let parent = tempfile::tempdir().unwrap();
    let south_dir = parent.path().join("south");
    let south = PhysicalCluster::start(&south_dir);
    let root = tempfile::tempdir().unwrap();
    let kcp = start_importing(
        root.path(),
        "deployments.apps,configmaps",
        &["--cluster-unreachable-grace-period", "3s"],
    );
    let ws = kcp.workspace("failover");
    let dir = tempfile::tempdir().unwrap();
    register(&kcp, &ws, dir.path(), &[east, &south]);
    let web = write_file(dir.path(), "web.yaml", &deployment("web", 8, None));
    let split_and_available = |east_share: &str, south_share: Option<&str>| {
        kcp_testing::wait::until(
            &format!("east {east_share}, south {south_share:?}, 8 available"),
            || {
                let leaves = kcp.kubectl_in_ok(
                    &ws,
                    &[
                        "get",
                        "deployments",
                        "-l",
                        "kcp.dev/owned-by=web",
                        "-o",
                        "jsonpath={range .items[*]}{.metadata.name}={.spec.replicas}/{.status.availableReplicas} {end}",
                    ],
                );
                // Each leaf runs its share (the root's sum alone may count a share that is
                // still moving twice).
                let mut wanted = format!("web--east={east_share}/{east_share} ");
                if let Some(south) = south_share {
                    wanted.push_str(&format!("web--south={south}/{south} "));
                }
                let available = deployment_field(&kcp, &ws, "web", "{.status.availableReplicas}");
                (leaves == wanted && available == "8")
                    .then_some(())
                    .ok_or(format!("{leaves}; {available} available"))
            },
        );
    };
    kcp_testing::wait::until("both clusters syncing Deployments", || {
        let ready = kcp.kubectl_in_ok(
            &ws,
            &[
                "get",
                "clusters",
                "-o",
                "jsonpath={.items[*].status.syncedResources}",
            ],
        );
        (ready.matches("deployments.apps").count() == 2 && ready.matches("configmaps").count() == 2)
            .then_some(())
            .ok_or(ready)
    });
    kcp.kubectl_in_ok(&ws, &["apply", "-f", &web]);
    split_and_available("4", Some("4"));
    // Namespaces spread over both clusters (with default, which went first, two of three on
    // one), a ConfigMap in each: at least one of them on south.
    for name in ["a", "b", "c"] {
        kcp.kubectl_in_ok(&ws, &["create", "namespace", name]);
        kcp.kubectl_in_ok(&ws, &["create", "configmap", "settings", "-n", name]);
    }
    let lc = kcp.logical_cluster(&ws);
    let on_south = kcp_testing::wait::until("a namespace of a, b, c on south, synced", || {
        ["a", "b", "c"]
            .into_iter()
            .find(|n| placed_on(&kcp, &ws, n) == "south")
            .filter(|n| configmaps_in(&south, &format!("kcp-{lc}-{n}")) == ["settings"])
            .ok_or("not yet")
    });

    // South's kube-apiserver is killed: after the grace period east runs all 8.
    let _ = Command::new("kill")
        .args(["-9", &south.pid_of("kube-apiserver").to_string()])
        .status();
    south.stop();
    split_and_available("8", None);
    // Its namespace moved to east, with the ConfigMap.
    kcp_testing::wait::until("the namespace moved to east", || {
        let there = configmaps_in(east, &format!("kcp-{lc}-{on_south}"));
        (placed_on(&kcp, &ws, on_south) == "east" && there == ["settings"])
            .then_some(())
            .ok_or(format!("{there:?}"))
    });

    // South comes back: split again, and nothing of the old share is left twice there.
    let south = PhysicalCluster::start(&south_dir);
    split_and_available("4", Some("4"));
    let namespace = format!("kcp-{}-default", kcp.logical_cluster(&ws));
    let there = south.kubectl_ok(&["get", "deployments", "-n", &namespace, "-o", "name"]);
    assert_eq!(there.trim(), "deployment.apps/web--south");
    // What it held of the namespace that moved is cleaned up.
    namespace_gone(&south, &format!("kcp-{lc}-{on_south}"));
    south.stop();
}

/// The leaves of the root `web` in `ws`, as `name=replicas ` each.
fn leaves(kcp: &Kcp, ws: &str) -> String {
    kcp.kubectl_in_ok(
        ws,
        &[
            "get",
            "deployments",
            "-n",
            "shop",
            "-l",
            "kcp.dev/owned-by=web",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name}={.spec.replicas} {end}",
        ],
    )
}

/// What `kind` in `namespace` of `cluster` holds, by name.
fn names_in(cluster: &PhysicalCluster, kind: &str, namespace: &str) -> String {
    let out = downstream(cluster, &["get", kind, "-n", namespace, "-o", "name"]);
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The available replicas of every Deployment in `namespace` of `cluster`, summed.
fn available_in(cluster: &PhysicalCluster, namespace: &str) -> i64 {
    let out = downstream(
        cluster,
        &[
            "get",
            "deployments",
            "-n",
            namespace,
            "-o",
            "jsonpath={.items[*].status.availableReplicas}",
        ],
    );
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|n| n.parse::<i64>().ok())
        .sum()
}

#[test]
fn a_drained_cluster_hands_its_namespaces_and_shares_over_before_letting_them_go() {
    let both = PhysicalCluster::shared();
    let root = tempfile::tempdir().unwrap();
    let kcp = start_importing(root.path(), "deployments.apps,services,configmaps", &[]);
    let ws = kcp.workspace("drain");
    let dir = tempfile::tempdir().unwrap();
    register(&kcp, &ws, dir.path(), &[&both[0], &both[1]]);
    kcp_testing::wait::until("both clusters syncing Deployments and ConfigMaps", || {
        let synced = kcp.kubectl_in_ok(
            &ws,
            &[
                "get",
                "clusters",
                "-o",
                "jsonpath={.items[*].status.syncedResources}",
            ],
        );
        (synced.matches("deployments.apps").count() == 2
            && synced.matches("configmaps").count() == 2)
            .then_some(())
            .ok_or(synced)
    });

    // A namespace is placed on one cluster (its home); its ConfigMap and Service go there and
    // wherever its split Deployment runs.
    kcp.kubectl_in_ok(&ws, &["create", "namespace", "shop"]);
    let home_name = kcp_testing::wait::until("shop placed", || {
        let placed = placed_on(&kcp, &ws, "shop");
        (!placed.is_empty()).then_some(placed.clone()).ok_or(placed)
    });
    let (home, other) = match both[0].name() == home_name {
        true => (&both[0], &both[1]),
        false => (&both[1], &both[0]),
    };
    kcp.kubectl_in_ok(
        &ws,
        &[
            "create",
            "configmap",
            "settings",
            "-n",
            "shop",
            "--from-literal=color=blue",
        ],
    );
    kcp.kubectl_in_ok(
        &ws,
        &[
            "create",
            "service",
            "clusterip",
            "web",
            "-n",
            "shop",
            "--tcp=80:80",
        ],
    );
    let web = deployment("web", 8, None).replace("namespace: default", "namespace: shop");
    kcp.kubectl_in_ok(
        &ws,
        &["apply", "-f", &write_file(dir.path(), "web.yaml", &web)],
    );
    let namespace = format!("kcp-{}-shop", kcp.logical_cluster(&ws));
    kcp_testing::wait::until("8 available, 4 and 4, config and service in both", || {
        let available = web_available(&kcp, &ws);
        let split = leaves(&kcp, &ws);
        let everywhere = both.iter().all(|c| {
            names_in(c, "configmap", &namespace).contains("configmap/settings")
                && names_in(c, "service", &namespace) == "service/web"
        });
        (available == "8" && split.matches("=4 ").count() == 2 && everywhere)
            .then_some(())
            .ok_or(format!(
                "{available} available; {split}; everywhere: {everywhere}"
            ))
    });
    let condition = kcp.kubectl_in_ok(
        &ws,
        &[
            "get",
            "deployment",
            "web",
            "-n",
            "shop",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Split\")].reason}",
        ],
    );
    assert_eq!(condition, "Split");

    // A sampler watches what runs in both clusters while the home is drained.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let (stop, namespace) = (stop.clone(), namespace.clone());
        let clusters: Vec<&'static PhysicalCluster> = both.iter().collect();
        std::thread::spawn(move || {
            let mut lowest = i64::MAX;
            let mut samples = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let total: i64 = clusters.iter().map(|c| available_in(c, &namespace)).sum();
                lowest = lowest.min(total);
                samples += 1;
            }
            (lowest, samples)
        })
    };
    let kubeconfig = kcp.kubeconfig_in(dir.path(), &ws, None);
    let drained = kubectl_with_plugins(
        &kubeconfig,
        &["kcp", "cluster", "drain", &home.name(), "--timeout", "120s"],
    );
    assert!(drained.status.success(), "{}", stderr(&drained));
    assert_eq!(
        stdout(&drained),
        format!("cluster/{0} cordoned\ncluster/{0} drained\n", home.name())
    );
    kcp_testing::wait::until("8 available on the other cluster alone", || {
        let available = web_available(&kcp, &ws);
        let split = leaves(&kcp, &ws);
        (available == "8" && split == format!("web--{}=8 ", other.name()))
            .then_some(())
            .ok_or(format!("{available} available; {split}"))
    });
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (lowest, samples) = sampler.join().unwrap();
    // maxUnavailable is 25% of 8: never fewer than 6; make-before-break keeps all 8.
    assert!(
        lowest >= 8,
        "{lowest} available at the lowest of {samples} samples"
    );

    // Events say what happened: the split and the drain on the root; in default, the
    // Clusters' readiness and the namespaces' placements.
    let reasons = |namespace: &str| {
        kcp.kubectl_in_ok(
            &ws,
            &[
                "get",
                "events",
                "-n",
                namespace,
                "-o",
                "jsonpath={range .items[*]}{.involvedObject.kind}/{.reason} {end}",
            ],
        )
    };
    let shop = reasons("shop");
    for wanted in ["Deployment/Split", "Deployment/Draining"] {
        assert!(shop.contains(wanted), "{wanted} in {shop}");
    }
    let default = reasons("default");
    for wanted in ["Cluster/APIsImported", "Namespace/Placed"] {
        assert!(default.contains(wanted), "{wanted} in {default}");
    }

    // The namespace moved, its ConfigMap and Service with it; nothing is left on the home.
    let placed = placed_on(&kcp, &ws, "shop");
    assert_eq!(placed, other.name());
    assert!(names_in(other, "configmap", &namespace).contains("configmap/settings"));
    assert_eq!(names_in(other, "service", &namespace), "service/web");
    namespace_gone(home, &namespace);

    // Nothing can take the other cluster's workloads now: its drain is refused, and changes
    // nothing.
    let refused = kubectl_with_plugins(&kubeconfig, &["kcp", "cluster", "drain", &other.name()]);
    assert!(!refused.status.success());
    assert!(
        stderr(&refused).contains(&format!("cannot drain cluster {}", other.name())),
        "{}",
        stderr(&refused)
    );
    let unschedulable = kcp.kubectl_in_ok(
        &ws,
        &[
            "get",
            "cluster",
            &other.name(),
            "-o",
            "jsonpath={.spec.unschedulable}",
        ],
    );
    assert_eq!(unschedulable, "");

    // Uncordoned, the home takes a share again.
    let uncordoned =
        kubectl_with_plugins(&kubeconfig, &["kcp", "cluster", "uncordon", &home.name()]);
    assert_eq!(
        stdout(&uncordoned),
        format!("cluster/{} uncordoned\n", home.name())
    );
    kcp_testing::wait::until("split again", || {
        let split = leaves(&kcp, &ws);
        (split.matches("=4 ").count() == 2)
            .then_some(())
            .ok_or(split)
    });
}

/// A kubeconfig of `cluster` for `token` (its server and CA as the cluster's own kubeconfig).
fn token_kubeconfig(cluster: &PhysicalCluster, token: &str) -> String {
    let field = |path: &str| {
        cluster.kubectl_ok(&[
            "config",
            "view",
            "--raw",
            "--minify",
            "-o",
            &format!("jsonpath={{.clusters[0].cluster.{path}}}"),
        ])
    };
    format!(
        "apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: \"{}\", certificate-authority-data: \"{}\"}}}}]\nusers: [{{name: u, user: {{token: \"{token}\"}}}}]\ncontexts: [{{name: c, context: {{cluster: c, user: u}}}}]\ncurrent-context: c\n",
        field("server"),
        field("certificate-authority-data")
    )
}

#[test]
fn pull_mode_installs_the_syncer_and_takes_readiness_from_its_heartbeat() {
    let [_, west] = PhysicalCluster::shared();
    let root = tempfile::tempdir().unwrap();
    let kcp = start_importing(
        root.path(),
        "deployments.apps,configmaps",
        &["--syncer-mode", "pull"],
    );
    let ws = kcp.workspace("pull");
    let dir = tempfile::tempdir().unwrap();
    register(&kcp, &ws, dir.path(), &[west]);
    let ready = |kcp: &Kcp| {
        kcp.kubectl_in_ok(
            &ws,
            &[
                "get",
                "cluster",
                "west",
                "-o",
                "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}/{.status.conditions[?(@.type==\"Ready\")].reason}",
            ],
        )
    };
    // Installed, but not Ready before its syncer beats.
    let namespace = format!("kcp-syncer-{}-west", kcp.logical_cluster(&ws));
    let args = installed_syncer_args(west, &namespace, &["deployments.apps", "configmaps"]);
    assert_eq!(ready(&kcp), "False/SyncerNotReady");
    let syncer = run_installed_syncer(west, &namespace, &args, dir.path());
    kcp_testing::wait::until("west Ready from the heartbeat", || {
        let now = ready(&kcp);
        (now == "True/APIsImported").then_some(()).ok_or(now)
    });
    let metrics = kcp.kubectl_in_ok(&ws, &["get", "--raw", "/metrics"]);
    let age = format!(
        "kcp_syncer_heartbeat_age_seconds{{workspace=\"{}\",cluster=\"west\"}}",
        kcp.logical_cluster(&ws)
    );
    assert!(metrics.contains(&age), "{age} in {metrics}");

    // It syncs: a Deployment assigned to west runs there and its status comes up; a ConfigMap
    // of a namespace placed on west goes there, and goes when deleted.
    kcp.kubectl_in_ok(
        &ws,
        &[
            "apply",
            "-f",
            &write_file(dir.path(), "api.yaml", &deployment("api", 1, Some("west"))),
        ],
    );
    kcp.kubectl_in_ok(&ws, &["create", "configmap", "settings", "-n", "default"]);
    kcp_testing::wait::until("the Deployment available in kcp", || {
        let available = deployment_field(&kcp, &ws, "api", "{.status.availableReplicas}");
        (available == "1").then_some(()).ok_or(available)
    });
    let synced = format!("kcp-{}-default", kcp.logical_cluster(&ws));
    kcp_testing::wait::until("the ConfigMap downstream", || {
        names_in(west, "configmap", &synced)
            .contains("configmap/settings")
            .then_some(())
            .ok_or("not yet")
    });
    kcp.kubectl_in_ok(&ws, &["delete", "configmap", "settings", "-n", "default"]);
    kcp_testing::wait::until("the ConfigMap gone downstream", || {
        (!names_in(west, "configmap", &synced).contains("configmap/settings"))
            .then_some(())
            .ok_or("still there")
    });

    // The syncer stops: its heartbeat with it, and the Cluster is no longer Ready.
    drop(syncer);
    kcp_testing::wait::until("west not Ready without its syncer", || {
        let now = ready(&kcp);
        (now == "False/SyncerNotReady").then_some(()).ok_or(now)
    });

    // The Cluster deleted: what was installed and synced in the cluster goes (no orphans).
    kcp.kubectl_in_ok(&ws, &["delete", "cluster", "west"]);
    namespace_gone(west, &namespace);
    namespace_gone(west, &synced);
}

/// The ConfigMaps of `namespace` in `cluster`, by name, without the cluster's own.
fn configmaps_in(cluster: &PhysicalCluster, namespace: &str) -> Vec<String> {
    let mut names: Vec<String> = names_in(cluster, "configmaps", namespace)
        .lines()
        .map(|l| l.trim_start_matches("configmap/").to_string())
        .filter(|n| !n.is_empty() && n != "kube-root-ca.crt")
        .collect();
    names.sort();
    names
}

#[test]
fn kcp_killed_mid_sync_converges_with_nothing_leaked() {
    let [east, _] = PhysicalCluster::shared();
    let root = tempfile::tempdir().unwrap();
    let args = [
        "--resources-to-sync",
        "configmaps",
        "--cluster-poll-interval",
        "1s",
    ];
    let kcp = Kcp::start(root.path(), &args);
    let ws = kcp.workspace("crash-sync");
    let dir = tempfile::tempdir().unwrap();
    register(&kcp, &ws, dir.path(), &[east]);
    kcp_testing::wait::until("east syncing ConfigMaps", || {
        let synced = kcp.kubectl_in_ok(
            &ws,
            &[
                "get",
                "cluster",
                "east",
                "-o",
                "jsonpath={.status.syncedResources}",
            ],
        );
        synced.contains("configmaps").then_some(()).ok_or(synced)
    });
    kcp.kubectl_in_ok(&ws, &["create", "namespace", "batch"]);
    kcp_testing::wait::until("batch placed on east", || {
        let placed = placed_on(&kcp, &ws, "batch");
        (placed == "east").then_some(()).ok_or(placed)
    });
    let count = 300;
    let many: String = (0..count)
        .map(|i| {
            let half = if i % 2 == 0 { "even" } else { "odd" };
            format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c{i:03}, namespace: batch, labels: {{half: {half}}}}}\ndata: {{i: \"{i}\"}}\n---\n")
        })
        .collect();
    // Created one by one while the syncer follows; SIGKILL as soon as it has written some.
    let many = write_file(dir.path(), "many.yaml", &many);
    let mut creating = Command::new("kubectl")
        .env("KUBECONFIG", kcp.kubeconfig())
        .arg(format!("--server={}/clusters/{ws}", kcp.base_url()))
        .args(["create", "-f", &many])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("run kubectl");
    let namespace = format!("kcp-{}-batch", kcp.logical_cluster(&ws));
    let synced_at_kill = kcp_testing::wait::until("the sync under way", || {
        let synced = configmaps_in(east, &namespace).len();
        (synced > 0).then_some(synced).ok_or(synced)
    });
    kcp_testing::signal::kill(kcp.pid()).expect("SIGKILL kcp");
    drop(kcp);
    let _ = creating.wait();
    eprintln!("killed kcp with {synced_at_kill} of {count} ConfigMaps synced");

    // Started again on the same store: the rest created, half deleted, and what is downstream
    // converges to exactly what is upstream.
    let kcp = Kcp::start(root.path(), &args);
    let _ = kcp.kubectl_in(&ws, &["create", "-f", &many]);
    kcp.kubectl_in_ok(
        &ws,
        &["delete", "configmaps", "-n", "batch", "-l", "half=even"],
    );
    let wanted: Vec<String> = (0..count)
        .filter(|i| i % 2 == 1)
        .map(|i| format!("c{i:03}"))
        .collect();
    kcp_testing::wait::until("the odd half downstream, nothing else", || {
        let there = configmaps_in(east, &namespace);
        (there == wanted)
            .then_some(())
            .ok_or(format!("{} there", there.len()))
    });

    // The namespace deleted upstream: gone there (no stuck finalizer) and downstream.
    kcp.kubectl_in_ok(&ws, &["delete", "namespace", "batch", "--timeout=60s"]);
    namespace_gone(east, &namespace);
}

/// The body of a plain HTTP GET of `path` on a loopback `port`.
fn http_get(port: u16, path: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}

/// Waits until `namespace` of `cluster` is gone, or going (Terminating).
fn namespace_gone(cluster: &PhysicalCluster, namespace: &str) {
    kcp_testing::wait::until(&format!("namespace {namespace} removed"), || {
        let out = downstream(
            cluster,
            &[
                "get",
                "namespace",
                namespace,
                "-o",
                "jsonpath={.status.phase}",
            ],
        );
        let phase = String::from_utf8_lossy(&out.stdout).to_string();
        (!out.status.success() || phase == "Terminating")
            .then_some(())
            .ok_or(phase)
    });
}

/// Starts kcp importing `resources` from Clusters every second, with `extra` flags.
fn start_importing(root: &Path, resources: &str, extra: &[&str]) -> Kcp {
    let mut args = vec![
        "--resources-to-sync",
        resources,
        "--cluster-poll-interval",
        "1s",
    ];
    args.extend_from_slice(extra);
    Kcp::start(root, &args)
}

/// Registers `clusters` in `ws` in one apply, their kubeconfigs inline.
fn register(kcp: &Kcp, ws: &str, dir: &Path, clusters: &[&PhysicalCluster]) {
    let objects: Vec<String> = clusters.iter().map(|c| inline_cluster(c)).collect();
    let file = write_file(dir, "clusters.yaml", &objects.join("---\n"));
    kcp.kubectl_in_ok(ws, &["apply", "-f", &file]);
}

/// The available replicas of the root `web` in `shop` of `ws`.
fn web_available(kcp: &Kcp, ws: &str) -> String {
    kcp.kubectl_in_ok(
        ws,
        &[
            "get",
            "deployment",
            "web",
            "-n",
            "shop",
            "-o",
            "jsonpath={.status.availableReplicas}",
        ],
    )
}

/// The cluster the namespace `namespace` of `ws` is placed on (empty when none).
fn placed_on(kcp: &Kcp, ws: &str, namespace: &str) -> String {
    kcp.kubectl_in_ok(
        ws,
        &[
            "get",
            "namespace",
            namespace,
            "-o",
            "jsonpath={.metadata.labels.kcp\\.dev/cluster}",
        ],
    )
}

/// Runs the syncer as the cluster-controller installed it in `namespace` of `cluster`: with
/// `args` (its Deployment's, as JSON), the kubeconfig of kcp from its Secret, and its service
/// account's token downstream (so the RBAC installed is what it runs on).
fn run_installed_syncer(
    cluster: &PhysicalCluster,
    namespace: &str,
    args: &str,
    dir: &Path,
) -> Running {
    let args: Vec<String> = serde_json::from_str(args).unwrap();
    let secret = cluster.kubectl_ok(&[
        "get",
        "secret",
        "kcp-syncer-kubeconfig",
        "-n",
        namespace,
        "-o",
        "jsonpath={.data.kubeconfig}",
    ]);
    let upstream =
        base64::Engine::decode(&base64::engine::general_purpose::STANDARD, secret.trim()).unwrap();
    let name = cluster.name();
    let upstream = write_file(
        dir,
        &format!("{name}-upstream.kubeconfig"),
        &String::from_utf8(upstream).unwrap(),
    );
    let token = cluster.kubectl_ok(&["create", "token", "kcp-syncer", "-n", namespace]);
    let down = write_file(
        dir,
        &format!("{name}-down.kubeconfig"),
        &token_kubeconfig(cluster, token.trim()),
    );
    let args: Vec<String> = args
        .into_iter()
        .map(|a| match a.starts_with("--from-kubeconfig=") {
            true => format!("--from-kubeconfig={upstream}"),
            false => a,
        })
        .chain([format!("--to-kubeconfig={down}")])
        .collect();
    Running(
        Command::new(env!("CARGO_BIN_EXE_syncer"))
            .args(&args)
            .spawn()
            .expect("run syncer"),
    )
}

/// The arguments (JSON) of the syncer installed in `namespace` of `cluster`, once they sync
/// every one of `resources`.
fn installed_syncer_args(cluster: &PhysicalCluster, namespace: &str, resources: &[&str]) -> String {
    kcp_testing::wait::until("the syncer installed", || {
        let out = downstream(
            cluster,
            &[
                "get",
                "deployment",
                "kcp-syncer",
                "-n",
                namespace,
                "-o",
                "jsonpath={.spec.template.spec.containers[0].args}",
            ],
        );
        let args = String::from_utf8_lossy(&out.stdout).to_string();
        resources
            .iter()
            .all(|r| args.contains(r))
            .then(|| args.clone())
            .ok_or(format!("{args}{}", String::from_utf8_lossy(&out.stderr)))
    })
}

#[test]
fn in_pull_mode_a_deployment_splits_across_the_installed_syncers_and_sums_back() {
    let both = PhysicalCluster::shared();
    let root = tempfile::tempdir().unwrap();
    let kcp = start_importing(root.path(), "deployments.apps", &["--syncer-mode", "pull"]);
    let ws = kcp.workspace("pull-split");
    let dir = tempfile::tempdir().unwrap();
    register(&kcp, &ws, dir.path(), &[&both[0], &both[1]]);
    let lc = kcp.logical_cluster(&ws);
    let _syncers: Vec<Running> = both
        .iter()
        .map(|cluster| {
            let namespace = format!("kcp-syncer-{lc}-{}", cluster.name());
            let args = installed_syncer_args(cluster, &namespace, &["deployments.apps"]);
            run_installed_syncer(cluster, &namespace, &args, dir.path())
        })
        .collect();
    let web = deployment("web", 5, None);
    kcp.kubectl_in_ok(
        &ws,
        &["apply", "-f", &write_file(dir.path(), "web.yaml", &web)],
    );
    kcp_testing::wait::until("5 available, 3 and 2", || {
        let available = deployment_field(&kcp, &ws, "web", "{.status.availableReplicas}");
        let east = deployment_field(&kcp, &ws, "web--east", "{.spec.replicas}");
        (available == "5" && east == "3")
            .then_some(())
            .ok_or(format!("{available} available, east {east}"))
    });
    kcp.kubectl_in_ok(
        &ws,
        &["rollout", "status", "deployment/web", "--timeout=60s"],
    );
    // A leaf deleted by hand comes back.
    kcp.kubectl_in_ok(&ws, &["delete", "deployment", "web--west"]);
    kcp_testing::wait::until("the leaf back and 5 available", || {
        let west = kcp.kubectl_in(
            &ws,
            &[
                "get",
                "deployment",
                "web--west",
                "-o",
                "jsonpath={.spec.replicas}",
            ],
        );
        let west = String::from_utf8_lossy(&west.stdout).to_string();
        let available = deployment_field(&kcp, &ws, "web", "{.status.availableReplicas}");
        (west == "2" && available == "5")
            .then_some(())
            .ok_or(format!("west {west}, {available} available"))
    });
}
