//! The adversarial suite: a hostile tenant trying in turn everything that once took a server
//! down or exhausted it, while another tenant's data sits beside it. Each test is one scene on a
//! server of its own (what is measured is the process): throughout, `/readyz` must answer within
//! three seconds on a fresh connection while slow clients hold connections open; after each
//! attack the server's memory must be within the bound stated for it; at the end the other
//! tenant's data must be exactly as it was written. The attacks are split over two scenes so
//! that they run side by side. Beside them, what a request must never make on behalf of an
//! identity that may not have it (a home workspace).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams};

use super::support::Kcp;

const MIB: u64 = 1024 * 1024;

/// Resident memory of a process, in bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/<pid>/status");
    kib * 1024
}

/// Asks `/readyz` every 200 ms on a new connection and remembers the slowest answer (a failed
/// or missing answer counts as infinitely slow).
struct ReadyProbe {
    stop: Arc<AtomicBool>,
    slowest_ms: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<u64>,
}

impl ReadyProbe {
    fn start(config: kube::Config) -> ReadyProbe {
        let stop = Arc::new(AtomicBool::new(false));
        let slowest_ms = Arc::new(AtomicU64::new(0));
        let (stopping, slowest) = (Arc::clone(&stop), Arc::clone(&slowest_ms));
        let task = tokio::spawn(async move {
            let mut probes = 0;
            while !stopping.load(Ordering::Relaxed) {
                // A client of its own per probe: a new TCP connection and TLS handshake.
                let client = kube::Client::try_from(config.clone()).unwrap();
                let request = http::Request::get("/readyz").body(Vec::new()).unwrap();
                let started = Instant::now();
                let answered =
                    tokio::time::timeout(Duration::from_secs(5), client.request_text(request))
                        .await;
                let took = match answered {
                    Ok(Ok(text)) if text == "ok" => started.elapsed().as_millis() as u64,
                    _ => u64::MAX,
                };
                slowest.fetch_max(took, Ordering::Relaxed);
                probes += 1;
                // The probe's pace (the whole run is the window it watches), not a wait.
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            probes
        });
        ReadyProbe {
            stop,
            slowest_ms,
            task,
        }
    }

    /// The slowest answer since the last check, which must be under three seconds; resets it.
    /// (A server taken down answers in none of the five each probe waits; a debug build on a
    /// busy two-core machine can take over a second for a new TLS connection.)
    fn check(&self, during: &str) {
        let slowest = self.slowest_ms.swap(0, Ordering::Relaxed);
        assert!(
            slowest < 3000,
            "/readyz took {slowest} ms (u64::MAX: no answer) during {during}"
        );
    }

    async fn finish(self, during: &str) {
        self.stop.store(true, Ordering::Relaxed);
        self.check(during);
        let probes = self.task.await.unwrap();
        assert!(probes > 10, "the probe ran only {probes} times");
    }
}

fn configmap(name: &str, payload: &str) -> ConfigMap {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "data": {"payload": payload},
    }))
    .unwrap()
}

/// Creates `count` configmaps named `<prefix>-<i>` with `payload` in `api`, 16 at a time.
async fn create_configmaps(api: &Api<ConfigMap>, prefix: &str, count: usize, payload: &str) {
    futures::stream::iter(0..count)
        .map(|i| {
            let api = api.clone();
            let object = configmap(&format!("{prefix}-{i}"), payload);
            async move { api.create(&PostParams::default(), &object).await.unwrap() }
        })
        .buffer_unordered(16)
        .collect::<Vec<_>>()
        .await;
}

/// The other tenant: data written before the attacks, compared after them.
struct Bystander {
    api: Api<ConfigMap>,
    written: Vec<(String, String)>,
}

impl Bystander {
    async fn write(kcp: &Kcp, cluster: &str) -> Bystander {
        let client = kube::Client::try_from(kcp.kube_config_in(cluster).await).unwrap();
        let api: Api<ConfigMap> = Api::namespaced(client, "default");
        let written: Vec<(String, String)> = (0..50)
            .map(|i| {
                (
                    format!("keep-{i}"),
                    format!("value {i} {}", "x".repeat(i * 20)),
                )
            })
            .collect();
        for (name, payload) in &written {
            api.create(&PostParams::default(), &configmap(name, payload))
                .await
                .unwrap();
        }
        Bystander { api, written }
    }

    async fn verify(&self) {
        let listed = self.api.list(&ListParams::default()).await.unwrap();
        let mut found: Vec<(String, String)> = listed
            .items
            .iter()
            .filter_map(|cm| {
                let name = cm.metadata.name.clone()?;
                let payload = cm.data.as_ref()?.get("payload")?.clone();
                Some((name, payload))
            })
            .collect();
        found.sort();
        let mut expected = self.written.clone();
        expected.sort();
        assert_eq!(found, expected, "the bystander's data changed");
    }
}

/// Slow clients for the whole run: connections that never start their TLS handshake, and
/// connections that send a request's headers a byte a second. Each is reopened when the server
/// drops it (after its handshake or header timeout), so the pressure lasts.
fn slow_clients(address: std::net::SocketAddr) -> Vec<tokio::task::JoinHandle<()>> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    const SILENT: usize = 300;
    const DRIBBLING: usize = 30;
    let silent = (0..SILENT).map(move |_| {
        tokio::spawn(async move {
            loop {
                let Ok(mut stream) = tokio::net::TcpStream::connect(address).await else {
                    // A pause before trying again, so a refused connect does not spin.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                };
                // Wait for the server to give up on the handshake.
                let _ = stream.read(&mut [0u8; 64]).await;
            }
        })
    });
    let dribbling = (0..DRIBBLING).map(move |_| {
        tokio::spawn(async move {
            loop {
                let Ok(mut stream) = tokio::net::TcpStream::connect(address).await else {
                    // A pause before trying again, so a refused connect does not spin.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                };
                // A ClientHello's first bytes, then a byte a second: never a whole handshake.
                for byte in [0x16u8, 0x03, 0x01, 0x02, 0x00].iter().cycle() {
                    if stream.write_all(&[*byte]).await.is_err() {
                        break;
                    }
                    // The attack's own pace: a byte a second.
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        })
    });
    silent.chain(dribbling).collect()
}

/// `count` GETs of `path`, each on a client (a connection) of its own, whose bodies are never
/// read; held until dropped.
async fn unread(
    attacker: &kube::Config,
    path: &str,
    count: usize,
) -> Vec<(kube::Client, http::Response<kube::client::Body>)> {
    let mut held = Vec::new();
    for _ in 0..count {
        let client = kube::Client::try_from(attacker.clone()).unwrap();
        let request = http::Request::get(path)
            .body(kube::client::Body::empty())
            .unwrap();
        let response = client.send(request).await.unwrap();
        assert_eq!(response.status(), 200);
        held.push((client, response));
    }
    held
}

/// The server's RSS, after a fixed window, must have grown less than `bound` over `before`.
/// Deliberately a window, not a condition: what is held gets time to fill what it may buffer,
/// and the server's memory must NOT grow past the bound meanwhile.
async fn within(kcp: &Kcp, before: u64, bound: u64, what: &str) {
    tokio::time::sleep(Duration::from_secs(3)).await;
    let grown = rss(kcp.pid()).saturating_sub(before);
    eprintln!(
        "{what}: RSS {} MiB before, grew {} MiB",
        before / MIB,
        grown / MIB
    );
    assert!(
        grown < bound,
        "{what} grew the server by {} MiB",
        grown / MIB
    );
}

/// Watchers that ask for the whole collection (`resourceVersion=0`) and never read: each may
/// hold a page of objects, never the collection.
async fn stalled_watchers(kcp: &Kcp, attacker: &kube::Config, probe: &ReadyProbe) {
    const OBJECTS: usize = 20_000;
    const WATCHERS: usize = 20;
    let client = kube::Client::try_from(attacker.clone()).unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    create_configmaps(&api, "bulk", OBJECTS, &"p".repeat(1024)).await;
    probe.check("20,000 creates");
    let before = rss(kcp.pid());
    let held = unread(
        attacker,
        "/api/v1/namespaces/default/configmaps?watch=1",
        WATCHERS,
    )
    .await;
    within(
        kcp,
        before,
        256 * MIB,
        &format!("{WATCHERS} stalled watchers over {OBJECTS} objects"),
    )
    .await;
    probe.check("stalled watchers");
    drop(held);
    stalled_lists(kcp, attacker, probe, OBJECTS).await;
}

/// Lists of the whole collection (no limit) whose bodies are never read: each is streamed a
/// page at a time as the client takes it, so a stalled one holds a page or two, not the
/// `objects` it would list (20 of them, whole, would take gigabytes).
async fn stalled_lists(kcp: &Kcp, attacker: &kube::Config, probe: &ReadyProbe, objects: usize) {
    const LISTS: usize = 20;
    let before = rss(kcp.pid());
    let held = unread(attacker, "/api/v1/namespaces/default/configmaps", LISTS).await;
    within(
        kcp,
        before,
        128 * MIB,
        &format!("{LISTS} stalled lists of {objects} objects"),
    )
    .await;
    probe.check("stalled lists");
    // A list read to its end has every object once.
    let client = kube::Client::try_from(attacker.clone()).unwrap();
    let request = http::Request::get("/api/v1/namespaces/default/configmaps")
        .body(Vec::new())
        .unwrap();
    let list: serde_json::Value =
        serde_json::from_str(&client.request_text(request).await.unwrap()).unwrap();
    let names: std::collections::BTreeSet<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|item| item["metadata"]["name"].as_str())
        .filter(|name| name.starts_with("bulk-"))
        .collect();
    assert_eq!(names.len(), objects);
    drop(held);
}

/// CEL rules that would run for minutes are refused when the CRD is written; rules that are
/// expensive but within the estimate, written many at once, leave the server answering.
async fn expensive_rules(kcp: &Arc<Kcp>, attacker: &kube::Config, probe: &ReadyProbe) {
    use super::crd_cel::{costly_crd, expensive_crd};
    let dir = tempfile::tempdir().unwrap();
    let unbounded = super::support::write_file(dir.path(), "unbounded.yaml", &costly_crd());
    let bounded = super::support::write_file(dir.path(), "bounded.yaml", &expensive_crd());
    let server = Arc::clone(kcp);
    tokio::task::spawn_blocking(move || {
        let refused = server.kubectl_in_err("root:attacker", &["apply", "-f", &unbounded]);
        assert!(
            refused.contains("estimated rule cost exceeds budget"),
            "{refused}"
        );
        server.kubectl_in_ok("root:attacker", &["apply", "-f", &bounded]);
        server.wait_established("root:attacker", "bombs.example.com");
    })
    .await
    .unwrap();
    let items: Vec<String> = (0..300).map(|i| format!("i{i:03}")).collect();
    let writes = (0..24).map(|i| {
        let client = kube::Client::try_from(attacker.clone()).unwrap();
        let body = serde_json::json!({
            "apiVersion": "example.com/v1",
            "kind": "Bomb",
            "metadata": {"name": format!("b{i}")},
            "spec": {"items": items},
        });
        async move {
            let request = http::Request::post("/apis/example.com/v1/namespaces/default/bombs")
                .header("content-type", "application/json")
                .body(body.to_string().into_bytes())
                .unwrap();
            // Accepted or refused for its cost, the write is answered.
            let _ = client.request_text(request).await;
        }
    });
    futures::future::join_all(writes).await;
    probe.check("expensive CEL rules");
}

/// Patches built to crash or exhaust the server: answered with 4xx, memory unchanged, the
/// target object as it was.
async fn patch_bombs(kcp: &Kcp, attacker: &kube::Config, probe: &ReadyProbe) {
    use kcp_testing::patches::{exponential_copy_patch, self_nesting_patch};
    let client = kube::Client::try_from(attacker.clone()).unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    api.create(&PostParams::default(), &configmap("target", "intact"))
        .await
        .unwrap();
    let before = rss(kcp.pid());
    let deep_merge = format!(r#"{{"x":{}1{}}}"#, r#"{"a":"#.repeat(120), "}".repeat(120));
    let bombs = [
        ("application/json-patch+json", self_nesting_patch()),
        ("application/json-patch+json", exponential_copy_patch()),
        ("application/merge-patch+json", deep_merge.clone()),
        ("application/strategic-merge-patch+json", deep_merge),
    ];
    for _ in 0..5 {
        for (content_type, bomb) in &bombs {
            let request = http::Request::patch("/api/v1/namespaces/default/configmaps/target")
                .header("content-type", *content_type)
                .body(bomb.clone().into_bytes())
                .unwrap();
            let response = client
                .send(request.map(kube::client::Body::from))
                .await
                .unwrap();
            let code = response.status().as_u16();
            assert!(
                (400..500).contains(&code),
                "a {content_type} bomb answered {code}"
            );
        }
    }
    let grown = rss(kcp.pid()).saturating_sub(before);
    assert!(
        grown < 64 * MIB,
        "patch bombs grew the server by {} MiB",
        grown / MIB
    );
    let target = api.get("target").await.unwrap();
    assert_eq!(target.data.unwrap()["payload"], "intact");
    probe.check("patch bombs");
}

/// A CustomResourceDefinition of about 300 KiB: `fields` string properties with long
/// descriptions, the description of the first one saying `revision`.
fn big_crd(revision: usize, fields: usize) -> serde_json::Value {
    let properties: serde_json::Map<String, serde_json::Value> = (0..fields)
        .map(|i| {
            let description = format!("field {i} of revision {revision}: {}", "d".repeat(1000));
            (
                format!("f{i}"),
                serde_json::json!({"type": "string", "maxLength": 64, "description": description}),
            )
        })
        .collect();
    serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "churns.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "churns", "kind": "Churn"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {"spec": {
                    "type": "object",
                    "properties": properties,
                    "x-kubernetes-validations": [{"rule": "self.f0 != 'forbidden'"}],
                }},
            }}}],
        },
    })
}

/// The server's RSS once it has stopped falling: freed memory is given back by a trim every
/// 5 s, so it counts as settled when it fell by less than a MiB over 6 s.
async fn settled_rss(kcp: &Kcp) -> u64 {
    let mut last = rss(kcp.pid());
    for _ in 0..10 {
        // Deliberately a fixed window: settled means RSS did NOT fall across one whole trim
        // period, which only a window longer than the period can show.
        tokio::time::sleep(Duration::from_secs(6)).await;
        let now = rss(kcp.pid());
        if now + MIB > last {
            return now.min(last);
        }
        last = now;
    }
    last
}

/// A CRD of about 300 KiB updated over and over with a distinct spec, then deleted: what every
/// version cost (schemas, compiled rules, OpenAPI documents) is given back. The churn runs
/// twice and only the second round is measured: the first fills the embedded store's page
/// cache (bounded at 64 MiB of pages, about 80 MiB resident), which then stays full by design
/// and would otherwise be most of the growth; anything a round keeps shows in the second.
async fn crd_churn(kcp: &Kcp, attacker: &kube::Config, probe: &ReadyProbe) {
    churn_a_crd(attacker, probe, 0).await;
    let before = settled_rss(kcp).await;
    churn_a_crd(attacker, probe, 1).await;
    let after = settled_rss(kcp).await;
    eprintln!(
        "CRD churn: RSS {} MiB before the second round, {} MiB after",
        before / MIB,
        after / MIB
    );
    assert!(
        after < before + 32 * MIB,
        "{CHURN_UPDATES} more updates of a 300 KiB CRD left the server {} MiB larger",
        (after.saturating_sub(before)) / MIB
    );
}

/// Updates of the churned CRD in one round.
const CHURN_UPDATES: usize = 100;

/// One round of churn: the CRD is created, updated [`CHURN_UPDATES`] times (each version read
/// through its OpenAPI document every tenth), deleted, and waited for until it is gone.
async fn churn_a_crd(attacker: &kube::Config, probe: &ReadyProbe, round: usize) {
    let client = kube::Client::try_from(attacker.clone()).unwrap();
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let send = |method: http::Method, path: String, body: Vec<u8>| {
        let client = client.clone();
        async move {
            let request = http::Request::builder()
                .method(method)
                .uri(path)
                .header("content-type", "application/json")
                .body(body)
                .unwrap();
            client.request_text(request).await.unwrap()
        }
    };
    let created = send(
        http::Method::POST,
        crds.into(),
        big_crd(round * (CHURN_UPDATES + 1), 290)
            .to_string()
            .into_bytes(),
    )
    .await;
    let created: serde_json::Value = serde_json::from_str(&created).unwrap();
    assert!(
        created.to_string().len() > 290 * 1024,
        "the CRD is about 300 KiB"
    );
    for update in 1..=CHURN_UPDATES {
        let revision = round * (CHURN_UPDATES + 1) + update;
        let patch = serde_json::json!({"spec": big_crd(revision, 290)["spec"]});
        let request = http::Request::patch(format!("{crds}/churns.example.com"))
            .header("content-type", "application/merge-patch+json")
            .body(patch.to_string().into_bytes())
            .unwrap();
        client.request_text(request).await.unwrap();
        // Something must read each version: the OpenAPI document of the group.
        if update % 10 == 0 {
            let openapi = http::Request::get("/openapi/v3/apis/example.com/v1")
                .body(Vec::new())
                .unwrap();
            let _ = client.request_text(openapi).await;
        }
    }
    probe.check("CRD churn");
    send(
        http::Method::DELETE,
        format!("{crds}/churns.example.com"),
        Vec::new(),
    )
    .await;
    // The CRD goes once its cleanup has run.
    kcp_testing::wait::until_async("the churned CRD is gone", async || {
        let request = http::Request::get(format!("{crds}/churns.example.com"))
            .body(Vec::new())
            .unwrap();
        client.request_text(request).await.is_err()
    })
    .await;
}

/// A server of its own with a bystander's data, an attacker's workspace, a `/readyz` probe and
/// slow clients, for one scene of attacks.
struct Scene {
    kcp: Arc<Kcp>,
    bystander: Bystander,
    attacker: kube::Config,
    probe: ReadyProbe,
    slow: Vec<tokio::task::JoinHandle<()>>,
    /// The server's root directory, removed after the server is gone (fields drop in order).
    _root: tempfile::TempDir,
}

impl Scene {
    async fn set() -> Scene {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        let kcp = tokio::task::spawn_blocking(move || {
            let kcp = Kcp::start(&root, &[]);
            kcp.workspace("bystander");
            kcp.workspace("attacker");
            Arc::new(kcp)
        })
        .await
        .unwrap();
        let bystander = Bystander::write(&kcp, "root:bystander").await;
        let attacker = kcp.kube_config_in("root:attacker").await;
        let probe = ReadyProbe::start(kcp.kube_config_in("root").await);
        let slow = slow_clients(kcp.address());
        Scene {
            kcp,
            bystander,
            attacker,
            probe,
            slow,
            _root: dir,
        }
    }

    /// The probe must have been answered throughout and the bystander's data must be intact.
    async fn end(self) {
        self.probe.finish("the attacks").await;
        for task in self.slow {
            task.abort();
        }
        self.bystander.verify().await;
    }
}

/// Requests built to exhaust memory or time: patch bombs, watchers and lists that never read, CEL rules
/// too expensive to run.
#[tokio::test]
async fn a_hostile_tenant_cannot_exhaust_the_server_with_requests() {
    let scene = Scene::set().await;
    patch_bombs(&scene.kcp, &scene.attacker, &scene.probe).await;
    stalled_watchers(&scene.kcp, &scene.attacker, &scene.probe).await;
    expensive_rules(&scene.kcp, &scene.attacker, &scene.probe).await;
    scene.end().await;
}

/// A large CustomResourceDefinition rewritten over and over, then deleted.
#[tokio::test]
async fn a_hostile_tenant_cannot_exhaust_the_server_with_crd_churn() {
    let scene = Scene::set().await;
    crd_churn(&scene.kcp, &scene.attacker, &scene.probe).await;
    scene.end().await;
}

/// The LogicalClusters across every workspace, by the path each is annotated with.
fn logical_cluster_paths(kcp: &Kcp) -> Vec<String> {
    let listed = kcp.kubectl_in_ok(
        "*",
        &[
            "get",
            "logicalclusters",
            "-o",
            r#"jsonpath={range .items[*]}{.metadata.annotations.kcp\.io/path}{"\n"}{end}"#,
        ],
    );
    let mut paths: Vec<String> = listed.lines().map(str::to_string).collect();
    paths.sort();
    paths
}

/// Nothing is made on behalf of an identity that may not have it: no home workspace for a
/// request without credentials, for a service account outside its own workspace (anonymous
/// there), or for anyone impersonating `system:anonymous`; each answers kcp's 403.
#[test]
fn nobody_gets_a_home_without_credentials_or_outside_their_workspace() {
    const HOME: &str = "/clusters/root/apis/tenancy.kcp.io/v1alpha1/workspaces/~";
    const REFUSED: &str = r#"workspaces.tenancy.kcp.io \"~\" is forbidden: User \"system:anonymous\" cannot create resource \"workspaces\" in API group \"tenancy.kcp.io\" at the cluster scope: workspace access not permitted"#;
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::start(&dir.path().join(".kcp"), &[]);
    let team = kcp.workspace("team");
    kcp.kubectl_in_ok(
        &team,
        &["create", "serviceaccount", "robot", "-n", "default"],
    );
    let token = kcp
        .kubectl_in_ok(&team, &["create", "token", "robot", "-n", "default"])
        .trim()
        .to_string();
    let before = logical_cluster_paths(&kcp);

    let (code, body) = kcp.anonymous_get(HOME);
    assert_eq!(code, "403", "{body}");
    assert!(body.contains(REFUSED), "{body}");
    assert!(body.contains(r#""reason":"Forbidden""#), "{body}");

    let foreign = kcp.kubectl_in_as(&token, "root", &["get", "--raw", HOME]);
    let refused = String::from_utf8_lossy(&foreign.stderr);
    assert!(!foreign.status.success(), "{refused}");
    assert!(refused.contains(&REFUSED.replace('\\', "")), "{refused}");

    let impersonated = kcp.kubectl_in("root", &["--as=system:anonymous", "get", "--raw", HOME]);
    let refused = String::from_utf8_lossy(&impersonated.stderr);
    assert!(!impersonated.status.success(), "{refused}");
    assert!(refused.contains(&REFUSED.replace('\\', "")), "{refused}");

    assert_eq!(logical_cluster_paths(&kcp), before);
    let missing = kcp.kubectl_in_err("user:system:anonymous", &["get", "namespaces"]);
    assert!(
        missing.contains("NotFound") || missing.contains("not found"),
        "{missing}"
    );

    // Nor is anything else made on their behalf: a token filled into a Secret, a
    // TokenRequest, a Secret in a workspace that is not the service account's.
    let secrets = format!("/clusters/{team}/api/v1/namespaces/default/secrets");
    let token_secret = r#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"taken","annotations":{"kubernetes.io/service-account.name":"robot"}},"type":"kubernetes.io/service-account-token"}"#;
    let (code, body) = kcp.anonymous_post(&secrets, token_secret);
    assert_eq!(code, "403", "{body}");
    let token_request =
        format!("/clusters/{team}/api/v1/namespaces/default/serviceaccounts/robot/token");
    let (code, body) = kcp.anonymous_post(
        &token_request,
        r#"{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{}}"#,
    );
    assert_eq!(code, "403", "{body}");
    let foreign_secret = kcp.kubectl_in_as(
        &token,
        "root",
        &["create", "secret", "generic", "taken", "-n", "default"],
    );
    assert!(!foreign_secret.status.success());
    let stored = kcp.kubectl_in(&team, &["get", "secret", "taken", "-n", "default"]);
    assert!(!stored.status.success());

    // Whoever is authenticated in their own right still has one made.
    let home = kcp.kubectl_in_ok("root", &["get", "--raw", HOME]);
    assert!(home.contains(r#""kind":"Workspace""#), "{home}");
}
