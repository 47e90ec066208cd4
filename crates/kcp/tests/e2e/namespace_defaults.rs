//! What every namespace has, in two workspaces at once: the ServiceAccount `default` and the
//! ConfigMap `kube-root-ca.crt` holding the server's CA; both come back when deleted.

use kcp_testing::wait;

use super::support::Kcp;

fn uid(kcp: &Kcp, cluster: &str, object: &str) -> Result<String, String> {
    let output = kcp.kubectl_in(
        cluster,
        &[
            "get",
            object,
            "-n",
            "team",
            "-o",
            "jsonpath={.metadata.uid}",
        ],
    );
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).trim().to_string())
    }
}

#[test]
fn a_new_namespace_has_its_default_service_account_and_root_ca_and_gets_them_back() {
    let kcp = Kcp::shared("namespace-defaults");
    let (home, other) = (kcp.home().to_string(), kcp.workspace("other"));
    let server_ca = std::fs::read_to_string(kcp.root.join("ca.crt")).unwrap();
    for cluster in [&home, &other] {
        kcp.kubectl_in_ok(cluster, &["create", "namespace", "team"]);
        wait::until("the default service account", || {
            uid(&kcp, cluster, "serviceaccount/default")
        });
        wait::until("the root CA config map", || {
            uid(&kcp, cluster, "configmap/kube-root-ca.crt")
        });
        let root_ca = |jsonpath: &str| {
            let jsonpath = format!("jsonpath={jsonpath}");
            let args = [
                "get",
                "configmap",
                "kube-root-ca.crt",
                "-n",
                "team",
                "-o",
                &jsonpath,
            ];
            kcp.kubectl_in_ok(cluster, &args)
        };
        let ca = root_ca("{.data.ca\\.crt}");
        assert_eq!(ca.trim(), server_ca.trim(), "ca.crt in {cluster}");
        let description = root_ca("{.metadata.annotations.kubernetes\\.io/description}");
        assert!(
            description.starts_with("Contains a CA bundle"),
            "{description}"
        );
    }

    // Deleted in one workspace, each comes back there (a new object); the other keeps its own.
    let other_account = uid(&kcp, &other, "serviceaccount/default").unwrap();
    for object in ["serviceaccount/default", "configmap/kube-root-ca.crt"] {
        let before = uid(&kcp, &home, object).unwrap();
        kcp.kubectl_in_ok(&home, &["delete", object, "-n", "team"]);
        wait::until(&format!("{object} back"), || {
            match uid(&kcp, &home, object) {
                Ok(now) if now != before => Ok(()),
                seen => Err(format!("{seen:?}")),
            }
        });
    }
    assert_eq!(
        uid(&kcp, &other, "serviceaccount/default").unwrap(),
        other_account
    );
}
