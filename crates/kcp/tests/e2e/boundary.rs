//! The request boundary under abuse: connections that never finish their TLS handshake or send
//! their headers a byte at a time are dropped after the (shortened) timeouts while `/readyz`
//! keeps answering; beyond the connection limit clients wait until idle ones are reaped; one
//! user flooding with slow requests gets kube-apiserver's 429 while another user is answered,
//! and the stuck requests end with its 504.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use super::support::{Kcp, write_file};

/// How long a probe of `/readyz` may take while the server is under abuse.
const PROBE_LIMIT: Duration = Duration::from_secs(1);
/// How long the test waits for the server to drop a connection before failing.
const DROP_DEADLINE: Duration = Duration::from_secs(30);

/// The server's address and a TLS connector trusting its CA.
struct Client {
    address: SocketAddr,
    tls: Arc<rustls::ClientConfig>,
    h2: Arc<rustls::ClientConfig>,
}

impl Client {
    fn of(kcp: &Kcp) -> Client {
        let address = kcp.address();
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_file_iter(kcp.root.join("ca.crt")).unwrap() {
            roots.add(cert.unwrap()).unwrap();
        }
        let config = |alpn: &[u8]| {
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let mut config = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(roots.clone())
                .with_no_client_auth();
            config.alpn_protocols = vec![alpn.to_vec()];
            Arc::new(config)
        };
        Client {
            address,
            tls: config(b"http/1.1"),
            h2: config(b"h2"),
        }
    }

    async fn connect(&self, config: &Arc<rustls::ClientConfig>) -> TlsStream<TcpStream> {
        let tcp = TcpStream::connect(self.address).await.unwrap();
        TlsConnector::from(Arc::clone(config))
            .connect(ServerName::try_from("localhost").unwrap(), tcp)
            .await
            .unwrap()
    }

    /// Sends `head` (and `body`) on a new HTTP/1.1 connection and reads the whole answer.
    async fn send(&self, head: &str, body: &[u8]) -> String {
        let mut stream = self.connect(&self.tls).await;
        stream.write_all(head.as_bytes()).await.unwrap();
        stream.write_all(body).await.unwrap();
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer).await;
        String::from_utf8_lossy(&answer).into_owned()
    }

    /// `GET /readyz` on a new connection; its status line must come within [`PROBE_LIMIT`].
    async fn probe(&self) {
        let started = Instant::now();
        let answer = tokio::time::timeout(
            PROBE_LIMIT,
            self.send(
                "GET /readyz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
                b"",
            ),
        )
        .await
        .unwrap_or_else(|_| panic!("/readyz took more than {PROBE_LIMIT:?}"));
        assert!(
            answer.starts_with("HTTP/1.1 200"),
            "/readyz after {:?}: {answer}",
            started.elapsed()
        );
    }
}

/// A request with a bearer token and a JSON body.
fn request(method: &str, path: &str, token: &str, body: &str) -> String {
    format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// Waits until the server closes `stream` (end of stream or an error), failing after
/// [`DROP_DEADLINE`]; returns whatever the server sent first.
async fn closed_by_server<S: tokio::io::AsyncRead + Unpin>(mut stream: S, what: &str) -> Vec<u8> {
    let mut received = Vec::new();
    let mut buffer = [0u8; 4096];
    tokio::time::timeout(DROP_DEADLINE, async {
        loop {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(n) => received.extend_from_slice(&buffer[..n]),
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("the server kept {what} open"));
    received
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn slow_and_idle_connections_are_dropped_while_readyz_answers() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::start(
        &dir.path().join(".kcp"),
        &[
            "--tls-handshake-timeout",
            "1s",
            "--read-header-timeout",
            "2s",
            "--idle-connection-timeout",
            "2s",
        ],
    );
    let client = Arc::new(Client::of(&kcp));
    client.probe().await;

    let mut waiting = Vec::new();
    // Connections that never start their TLS handshake, and ones that stop half-way through the
    // ClientHello.
    for i in 0..300 {
        let mut tcp = TcpStream::connect(client.address).await.unwrap();
        if i % 2 == 1 {
            tcp.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01])
                .await
                .unwrap();
        }
        waiting.push(tokio::spawn(async move {
            closed_by_server(tcp, "a connection without a TLS handshake").await;
        }));
    }
    // HTTP/1.1 request headers sent a byte every 100 ms, never finished.
    for _ in 0..20 {
        let stream = client.connect(&client.tls).await;
        let (reader, mut writer) = tokio::io::split(stream);
        tokio::spawn(async move {
            let head = b"GET /readyz HTTP/1.1\r\nHost: localhost\r\nX-Slow: ";
            for byte in head.iter().chain(std::iter::repeat(&b'a')) {
                if writer.write_all(&[*byte]).await.is_err() || writer.flush().await.is_err() {
                    return;
                }
                // The slow client's own pace: a byte every 100 ms.
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        waiting.push(tokio::spawn(async move {
            closed_by_server(reader, "a connection sending headers a byte at a time").await;
        }));
    }
    // HTTP/2 connections that never send a frame, and an HTTP/1.1 connection idle after one
    // answered request.
    for _ in 0..10 {
        let stream = client.connect(&client.h2).await;
        assert_eq!(stream.get_ref().1.alpn_protocol(), Some(b"h2".as_slice()));
        waiting.push(tokio::spawn(async move {
            closed_by_server(stream, "an idle HTTP/2 connection").await;
        }));
    }
    let mut kept_alive = client.connect(&client.tls).await;
    kept_alive
        .write_all(b"GET /readyz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    waiting.push(tokio::spawn(async move {
        let answer = closed_by_server(kept_alive, "an idle kept-alive connection").await;
        assert!(answer.starts_with(b"HTTP/1.1 200"));
    }));

    // The server answers throughout, while the timeouts fire.
    let probing = {
        let client = Arc::clone(&client);
        tokio::spawn(async move {
            let until = Instant::now() + Duration::from_secs(8);
            while Instant::now() < until {
                client.probe().await;
                // The probe's pace over a fixed window: readyz must NOT fail while the timeouts
                // fire, which only probing for a while can show.
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    };
    for task in waiting {
        task.await.unwrap();
    }
    probing.await.unwrap();
    client.probe().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beyond_the_connection_limit_clients_wait_until_idle_ones_are_reaped() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::start(
        &dir.path().join(".kcp"),
        &["--max-connections", "10", "--tls-handshake-timeout", "1s"],
    );
    let client = Client::of(&kcp);
    client.probe().await;
    let idle: Vec<TcpStream> =
        futures::future::join_all((0..10).map(|_| TcpStream::connect(client.address)))
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
    // The server says so once every place is taken, so the next one has to wait.
    tokio::task::block_in_place(|| kcp.wait_for_log("connection limit reached"));
    let started = Instant::now();
    let answer = tokio::time::timeout(
        DROP_DEADLINE,
        client.send(
            "GET /readyz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
            b"",
        ),
    )
    .await
    .expect("a client beyond the limit is served once idle connections are reaped");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    // It waited for the handshake timeout of the idle ones rather than being served at once.
    assert!(
        started.elapsed() >= Duration::from_millis(500),
        "served after {:?} although ten idle connections held every place",
        started.elapsed()
    );
    for tcp in idle {
        closed_by_server(tcp, "an idle connection").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_user_flooding_gets_429_while_another_is_answered() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = write_file(
        dir.path(),
        "tokens.csv",
        "flood-token,flooder,1001\nother-token,other,1002,\"team-a,team-b\"\n",
    );
    let kcp = Kcp::start(
        &dir.path().join(".kcp"),
        &[
            "--token-auth-file",
            &tokens,
            "--max-requests-inflight",
            "8",
            "--max-mutating-requests-inflight",
            "8",
            "--request-timeout",
            "4s",
        ],
    );
    // Both users may do anything in root: what is measured is admission, not authorization.
    kcp.kubectl_in_ok(
        "root",
        &[
            "create",
            "clusterrolebinding",
            "users-admin",
            "--clusterrole=cluster-admin",
            "--user=flooder",
            "--user=other",
        ],
    );
    let client = Arc::new(Client::of(&kcp));
    let namespaces = "/clusters/root/api/v1/namespaces";

    // The flooder's creates announce a body and never send it: each holds a place until the
    // request timeout. A user may hold a quarter of the pool (2 of 8).
    let head = format!(
        "POST {namespaces} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer flood-token\r\n\
         Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{\"metadata\":"
    );
    let (answers, mut answered) = tokio::sync::mpsc::unbounded_channel();
    for _ in 0..12 {
        let (client, head, answers) = (Arc::clone(&client), head.clone(), answers.clone());
        tokio::spawn(async move {
            let mut stream = client.connect(&client.tls).await;
            stream.write_all(head.as_bytes()).await.unwrap();
            let answer = closed_by_server(stream, "a flooding request").await;
            let _ = answers.send(String::from_utf8_lossy(&answer).into_owned());
        });
    }
    // Ten are refused at once; two are held.
    let mut flood = Vec::new();
    for _ in 0..10 {
        flood.push(answered.recv().await.unwrap());
    }

    // Meanwhile the other user writes and reads, with kubectl too, and health checks answer.
    let created = client
        .send(
            &request(
                "POST",
                namespaces,
                "other-token",
                r#"{"metadata":{"name":"others"}}"#,
            ),
            b"",
        )
        .await;
    assert!(created.starts_with("HTTP/1.1 201"), "{created}");
    let listed = client
        .send(&request("GET", namespaces, "other-token", ""), b"")
        .await;
    assert!(listed.starts_with("HTTP/1.1 200"), "{listed}");
    let kubectl = kcp.kubectl_in_ok(
        "root",
        &[
            "--token=other-token",
            "get",
            "namespace",
            "others",
            "-o",
            "name",
        ],
    );
    assert_eq!(kubectl.trim(), "namespace/others");
    client.probe().await;
    // Reads are a pool of their own: the flooder may still read.
    let flooder_reads = client
        .send(&request("GET", namespaces, "flood-token", ""), b"")
        .await;
    assert!(flooder_reads.starts_with("HTTP/1.1 200"), "{flooder_reads}");

    // The two stuck requests end with kube-apiserver's 504, which gives their places back.
    for _ in 0..2 {
        flood.push(answered.recv().await.unwrap());
    }
    let refused: Vec<_> = flood
        .iter()
        .filter(|answer| answer.starts_with("HTTP/1.1 429"))
        .collect();
    assert_eq!(refused.len(), 10, "{flood:#?}");
    for answer in refused {
        assert!(answer.contains("\r\nretry-after: 1\r\n"), "{answer}");
        assert!(
            answer.contains(r#""message":"Too many requests, please try again later.""#),
            "{answer}"
        );
        assert!(answer.contains(r#""reason":"TooManyRequests""#), "{answer}");
    }
    let timed_out: Vec<_> = flood
        .iter()
        .filter(|answer| answer.starts_with("HTTP/1.1 504"))
        .collect();
    assert_eq!(timed_out.len(), 2, "{flood:#?}");
    for answer in timed_out {
        assert!(
            answer.contains(
                r#""message":"Timeout: request did not complete within the allotted timeout""#
            ),
            "{answer}"
        );
    }
    let created = client
        .send(
            &request(
                "POST",
                namespaces,
                "flood-token",
                r#"{"metadata":{"name":"flooder"}}"#,
            ),
            b"",
        )
        .await;
    assert!(created.starts_with("HTTP/1.1 201"), "{created}");
    // A token with extra spaces is refused, as kube-apiserver refuses it.
    let spaced = client
        .send(
            &format!(
                "GET {namespaces} HTTP/1.1\r\nHost: localhost\r\n\
                 Authorization: Bearer   other-token  \r\nConnection: close\r\n\r\n"
            ),
            b"",
        )
        .await;
    // Not a bearer token: no credentials, so the anonymous user, whom root does not let in.
    assert!(spaced.starts_with("HTTP/1.1 403"), "{spaced}");
    assert!(
        spaced.contains(r#"User \"system:anonymous\" cannot list"#),
        "{spaced}"
    );
}
