//! Lists without a limit are streamed a page at a time (see `handlers::list_stream`): here they
//! must be, byte for byte, the list answered whole. The whole answer is the same snapshot asked
//! with a limit larger than the collection (`resourceVersionMatch=Exact`, so both read one
//! revision), in every format: JSON, YAML, Table, PartialObjectMetadataList, with selectors and
//! across `/clusters/*`; and gzip, when the client accepts it, decodes to the same bytes.

use std::process::Command;

use futures::StreamExt;
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, PostParams};

use super::support::Kcp;

/// More than two of the server's pages (500 objects).
const OBJECTS: usize = 1_100;

/// Status, content type and body of a GET.
async fn get(client: &kube::Client, path: &str, accept: &str) -> (u16, String, Vec<u8>) {
    let request = http::Request::get(path)
        .header(http::header::ACCEPT, accept)
        .body(kube::client::Body::empty())
        .unwrap();
    let response = client.send(request).await.unwrap();
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, content_type, body.to_vec())
}

/// Ages in Table cells (`"3s"`) as one placeholder: the two answers are read a moment apart.
fn without_ages(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('"') {
        out.push_str(&rest[..=at]);
        rest = &rest[at + 1..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && rest[digits..].starts_with("s\"") {
            out.push_str("AGE\"");
            rest = &rest[digits + 2..];
        }
    }
    out.push_str(rest);
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn streamed_lists_are_the_whole_list_byte_for_byte() {
    let kcp = Kcp::shared("lists-streamed");
    let client = kcp.kube_client().await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for name in ["stream-a", "stream-b"] {
        let namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": name}}));
        namespaces
            .create(&PostParams::default(), &namespace.unwrap())
            .await
            .unwrap();
    }
    futures::stream::iter(0..OBJECTS)
        .map(|i| {
            let api: Api<ConfigMap> = Api::namespaced(
                client.clone(),
                if i % 3 == 0 { "stream-b" } else { "stream-a" },
            );
            let object: ConfigMap = serde_json::from_value(serde_json::json!({
                "metadata": {"name": format!("c{i:04}"),
                             "labels": {"half": if i % 2 == 0 { "even" } else { "odd" }}},
                "data": {"text": "line one\nline two\n", "n": i.to_string()},
            }))
            .unwrap();
            async move { api.create(&PostParams::default(), &object).await.unwrap() }
        })
        .buffer_unordered(16)
        .collect::<Vec<_>>()
        .await;

    let home = kcp.home().to_string();
    let wildcard = kcp.kube_client_in("*").await;
    let json = "application/json";
    let table = "application/json;as=Table;v=v1;g=meta.k8s.io";
    let metadata = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io";
    let yaml = "application/yaml";
    let cases: &[(&kube::Client, &str, &str, &str)] = &[
        (&client, "/api/v1/configmaps", "", json),
        (&client, "/api/v1/namespaces/stream-a/configmaps", "", json),
        (&client, "/api/v1/namespaces/stream-a/configmaps", "", yaml),
        (&client, "/api/v1/namespaces/stream-a/configmaps", "", table),
        (&client, "/api/v1/configmaps", "includeObject=Object", table),
        (&client, "/api/v1/configmaps", "", metadata),
        (
            &client,
            "/api/v1/configmaps",
            "labelSelector=half%3Deven",
            json,
        ),
        (
            &client,
            "/api/v1/configmaps",
            "labelSelector=half%3Deven",
            yaml,
        ),
        (
            &client,
            "/api/v1/configmaps",
            "fieldSelector=metadata.namespace%3Dstream-b",
            json,
        ),
        (&wildcard, "/api/v1/configmaps", "", json),
        (
            &wildcard,
            "/api/v1/namespaces/stream-b/configmaps",
            "",
            metadata,
        ),
        (
            &wildcard,
            "/api/v1/configmaps",
            "labelSelector=half%3Dodd",
            table,
        ),
    ];
    for (client, path, query, accept) in cases {
        let separator = if query.is_empty() { "" } else { "&" };
        let (status, streamed_type, streamed) =
            get(client, &format!("{path}?{query}"), accept).await;
        assert_eq!(status, 200, "{path}?{query} {accept}");
        let rv = if *accept == yaml {
            let text = std::str::from_utf8(&streamed).unwrap();
            let marker = "\nmetadata:\n  resourceVersion: \"";
            let at = text.rfind(marker).expect("the list's resourceVersion") + marker.len();
            text[at..at + text[at..].find('"').unwrap()].to_string()
        } else {
            let parsed: serde_json::Value = serde_json::from_slice(&streamed).unwrap();
            parsed["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .to_string()
        };
        let whole_query = format!(
            "{query}{separator}limit=1000000&resourceVersion={rv}&resourceVersionMatch=Exact"
        );
        let (status, whole_type, whole) =
            get(client, &format!("{path}?{whole_query}"), accept).await;
        assert_eq!(status, 200, "{path}?{whole_query} {accept}");
        assert_eq!(streamed_type, whole_type);
        let (streamed, whole) = (
            String::from_utf8(streamed).unwrap(),
            String::from_utf8(whole).unwrap(),
        );
        let (streamed, whole) = if *accept == table {
            (without_ages(&streamed), without_ages(&whole))
        } else {
            (streamed, whole)
        };
        assert!(
            streamed == whole,
            "{path}?{query} as {accept}: {} streamed bytes differ from {} whole",
            streamed.len(),
            whole.len()
        );
        // Long enough to have been streamed (more than a page of items).
        if query.is_empty() && !path.contains("stream-b") {
            let items = match *accept {
                a if a == table => "\"cells\":",
                // Items of a built-in kind carry no kind, as kube-apiserver lists them.
                a if a == yaml => "\n  metadata:\n",
                _ => "\"name\":\"c",
            };
            assert!(
                streamed.matches(items).count() > 500,
                "{path} as {accept} is longer than a page"
            );
        }
    }
    paged_json_is_the_decoded_pages(&client).await;

    // A list of the home workspace alone sees its own objects only.
    let (_, _, listed) = get(&client, "/api/v1/configmaps", json).await;
    let listed: serde_json::Value = serde_json::from_slice(&listed).unwrap();
    let ours = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["metadata"]["name"].as_str().unwrap().starts_with('c'))
        .count();
    assert_eq!(ours, OBJECTS, "in {home}");

    // gzip, as kubectl asks for it: compressed as it streams, the same bytes once decoded.
    let token = kcp_testing::kubeconfig::admin_token(&kcp.root, "kcp-admin");
    let curl = |extra: &[&str]| {
        let output = Command::new("curl")
            .args(["-sS", "-D", "-", "--cacert"])
            .arg(kcp.root.join("ca.crt"))
            .arg("-H")
            .arg(format!("Authorization: Bearer {}", token.trim()))
            .args(extra)
            .arg(format!(
                "{}/clusters/{home}/api/v1/namespaces/stream-a/configmaps",
                kcp.base_url()
            ))
            .output()
            .expect("run curl");
        assert!(output.status.success(), "{output:?}");
        output.stdout
    };
    let compressed = curl(&["--compressed"]);
    let plain = curl(&[]);
    let split = |bytes: &[u8]| {
        let end = bytes.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
        (
            String::from_utf8_lossy(&bytes[..end]).to_lowercase(),
            bytes[end + 4..].to_vec(),
        )
    };
    let (compressed_head, compressed_body) = split(&compressed);
    let (plain_head, plain_body) = split(&plain);
    assert!(
        compressed_head.contains("content-encoding: gzip"),
        "{compressed_head}"
    );
    assert!(!plain_head.contains("content-encoding"), "{plain_head}");
    let (a, b): (serde_json::Value, serde_json::Value) = (
        serde_json::from_slice(&compressed_body).unwrap(),
        serde_json::from_slice(&plain_body).unwrap(),
    );
    assert_eq!(
        a["items"].as_array().unwrap().len(),
        b["items"].as_array().unwrap().len()
    );
}

/// Pages of plain JSON are made of the objects' stored bytes (`handlers::list`). Each must be,
/// byte for byte, the page read by decoding the objects (which any selector makes the server
/// do; `!absent` keeps every object), and count what follows it: counted once, on the first
/// page, and carried by the continue tokens (`kcp_registry::list`).
async fn paged_json_is_the_decoded_pages(client: &kube::Client) {
    let json = "application/json";
    let path = "/api/v1/namespaces/stream-a/configmaps";
    let (_, _, whole) = get(client, path, json).await;
    let whole: serde_json::Value = serde_json::from_slice(&whole).unwrap();
    let total = whole["items"].as_array().unwrap().len();
    let rv = whole["metadata"]["resourceVersion"].as_str().unwrap();
    let items_of = |body: &[u8]| {
        let at = body
            .windows(9)
            .position(|w| w == b"\"items\":[")
            .expect("a list's items");
        body[at..].to_vec()
    };
    let mut next = format!("resourceVersion={rv}&resourceVersionMatch=Exact");
    let mut seen = Vec::new();
    loop {
        let query = format!("{path}?limit=300&{next}");
        let (status, _, fast) = get(client, &query, json).await;
        assert_eq!(status, 200, "{query}");
        let (status, _, decoded) =
            get(client, &format!("{query}&labelSelector=%21absent"), json).await;
        assert_eq!(status, 200, "{query} with a selector");
        assert!(
            items_of(&fast) == items_of(&decoded),
            "{query}: the page from stored bytes is not the decoded page"
        );
        let (fast, decoded): (serde_json::Value, serde_json::Value) = (
            serde_json::from_slice(&fast).unwrap(),
            serde_json::from_slice(&decoded).unwrap(),
        );
        assert_eq!(
            fast["metadata"]["continue"].is_string(),
            decoded["metadata"]["continue"].is_string(),
            "{query}"
        );
        seen.extend(fast["items"].as_array().unwrap().iter().cloned());
        match fast["metadata"]["continue"].as_str() {
            Some(token) => {
                let remaining = fast["metadata"]["remainingItemCount"].as_u64();
                assert_eq!(remaining, Some((total - seen.len()) as u64), "{query}");
                next = format!("continue={token}");
            }
            None => break,
        }
    }
    assert_eq!(&seen, whole["items"].as_array().unwrap());
}
