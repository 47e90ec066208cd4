//! TLS with client certificates: etcd started with its own CA-signed server certificate and
//! `--client-cert-auth`, reached over https with a client certificate made by the same CA.

use std::time::Duration;

use kcp_storage::{Storage, WatchRequest};
use kcp_storage_etcd::{EtcdStorage, EtcdTls};
use kcp_testing::etcd::{EtcdOptions, EtcdProcess, EtcdServerTls};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

use crate::support::{bytes, next_event};

struct Pki {
    ca_pem: Vec<u8>,
    server: (Vec<u8>, Vec<u8>),
    client: (Vec<u8>, Vec<u8>),
}

/// A CA, a server certificate for 127.0.0.1 and localhost, and a client certificate.
fn make_pki(ca_name: &str) -> Pki {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params
        .distinguished_name
        .push(DnType::CommonName, ca_name);
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_key = KeyPair::generate().unwrap();
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);

    let leaf = |names: Vec<String>, common_name: &str, usages: Vec<ExtendedKeyUsagePurpose>| {
        let mut params = CertificateParams::new(names).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.extended_key_usages = usages;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &issuer).unwrap();
        (cert.pem().into_bytes(), key.serialize_pem().into_bytes())
    };
    Pki {
        ca_pem: ca_cert.pem().into_bytes(),
        // etcd also uses its serving certificate as a client of itself, hence both usages.
        server: leaf(
            vec!["127.0.0.1".into(), "localhost".into()],
            "etcd",
            vec![
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ],
        ),
        client: leaf(Vec::new(), "kcp", vec![ExtendedKeyUsagePurpose::ClientAuth]),
    }
}

fn client_tls(pki: &Pki) -> EtcdTls {
    EtcdTls {
        ca_pem: pki.ca_pem.clone(),
        client_cert_pem: Some(pki.client.0.clone()),
        client_key_pem: Some(pki.client.1.clone()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_with_client_certificates_serves_reads_writes_and_watches() {
    let pki = make_pki("kcp test CA");
    let etcd = EtcdProcess::start_with(EtcdOptions {
        tls: Some(EtcdServerTls {
            cert_pem: pki.server.0.clone(),
            key_pem: pki.server.1.clone(),
            client_ca_pem: Some(pki.ca_pem.clone()),
            client: client_tls(&pki),
        }),
        ..Default::default()
    })
    .await;
    assert!(etcd.endpoint().starts_with("https://"));

    let store = EtcdStorage::connect(etcd.config()).await.unwrap();
    let mut watch = store.watch(WatchRequest::prefix("/tls/", 0)).await.unwrap();
    let created = store.create(b"/tls/a", bytes("secret")).await.unwrap();
    let read = store.get(b"/tls/a", 0).await.unwrap();
    assert_eq!(read.kv.unwrap(), created);
    let event = next_event(&mut watch).await;
    assert_eq!(event.kv, created);

    // Without a client certificate, or trusting another CA, nothing works.
    let mut no_client_cert = etcd.config();
    no_client_cert.connect_timeout = Duration::from_secs(2);
    no_client_cert.tls = Some(EtcdTls {
        ca_pem: pki.ca_pem.clone(),
        client_cert_pem: None,
        client_key_pem: None,
    });
    let refused = EtcdStorage::connect(no_client_cert).await.err();
    eprintln!("without client certificate: {refused:?}");
    assert!(refused.is_some());

    let other = make_pki("another CA");
    let mut wrong_ca = etcd.config();
    wrong_ca.connect_timeout = Duration::from_secs(2);
    wrong_ca.tls = Some(client_tls(&other));
    let refused = EtcdStorage::connect(wrong_ca).await.err();
    eprintln!("with another CA: {refused:?}");
    assert!(refused.is_some());
}
