//! The tenant-separation matrix: seven identities of every kind kcp authenticates (three
//! token-file users, a client-certificate user, two service accounts, an identity the admin
//! impersonates) across three workspaces (a parent and two children), each asked for get,
//! list, watch, create, update, patch and delete of a built-in kind (configmaps) and a custom
//! one (widgets). Every cell a grant covers is allowed and every other one is refused with 403.
//!
//! Grants are RoleBindings of the bootstrap `view` and `edit` roles in namespace `team`; the
//! workspaces' own ClusterRoles labelled `aggregate-to-view` and `aggregate-to-edit` add
//! widgets to those roles there. Entering a workspace takes `system:kcp:workspace:access`
//! (service accounts enter their own workspace without it; elsewhere they are foreign).
//! Then: required groups close a workspace to everyone else, a CertificateSigningRequest records
//! its requester, and `kubectl auth can-i --list` shows the aggregated rules. (A server of its
//! own: token file and client CA are flags.)

use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::api::{PostParams, WatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::json;

use super::support::{Kcp, write_file};

const VERBS: [&str; 7] = [
    "get", "list", "watch", "create", "update", "patch", "delete",
];
const READ: [&str; 3] = ["get", "list", "watch"];
const NAMESPACE: &str = "team";

/// How an identity authenticates.
enum Credential {
    Token(String),
    Certificate {
        cert: String,
        key: String,
    },
    /// The admin's token, acting as a user in groups.
    Impersonating {
        user: String,
        groups: Vec<String>,
    },
}

struct Identity {
    name: &'static str,
    credential: Credential,
}

/// A CRD for widgets, the namespace, one object of each kind, and ClusterRoles adding widgets
/// to `view` and `edit` in `workspace`.
fn furnish(kcp: &Kcp, dir: &std::path::Path, workspace: &str) {
    let crd = kcp_testing::crd::Crd::namespaced("widgets", "Widget").storage_version(
        "v1",
        "type: object\nx-kubernetes-preserve-unknown-fields: true",
    );
    let manifests = format!(
        "{crd}---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: widget-view\n  labels:\n    rbac.authorization.k8s.io/aggregate-to-view: \"true\"\nrules:\n- apiGroups: [example.com]\n  resources: [widgets]\n  verbs: [get, list, watch]\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: widget-edit\n  labels:\n    rbac.authorization.k8s.io/aggregate-to-edit: \"true\"\nrules:\n- apiGroups: [example.com]\n  resources: [widgets]\n  verbs: [create, delete, patch, update]\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: {NAMESPACE}\n",
        crd = crd.yaml()
    );
    let file = write_file(
        dir,
        &format!("{}.yaml", workspace.replace(':', "-")),
        &manifests,
    );
    kcp.kubectl_in_ok(workspace, &["create", "-f", &file]);
    kcp.wait_established(workspace, "widgets.example.com");
}

/// Grants `role` (`view` or `edit`) in namespace `team` of `workspace` to a subject (kubectl's
/// `--user=`, `--group=` or `--serviceaccount=` flag), and entry into the workspace.
fn grant(kcp: &Kcp, workspace: &str, role: &str, subject: &str, enter: bool) {
    let tag = subject.replace([':', '=', '-'], "").to_lowercase();
    let name = format!("{role}-{tag}");
    kcp.kubectl_in_ok(
        workspace,
        &[
            "create",
            "rolebinding",
            &name,
            "-n",
            NAMESPACE,
            &format!("--clusterrole={role}"),
            &format!("--{subject}"),
        ],
    );
    if enter {
        kcp.kubectl_in_ok(
            workspace,
            &[
                "create",
                "clusterrolebinding",
                &format!("access-{tag}"),
                "--clusterrole=system:kcp:workspace:access",
                &format!("--{subject}"),
            ],
        );
    }
}

fn kubeconfig(kcp: &Kcp, workspace: &str, identity: &Identity) -> Kubeconfig {
    let ca = std::fs::read_to_string(kcp.root.join("ca.crt")).unwrap();
    let admin_token = kcp_testing::kubeconfig::admin_token(&kcp.root, "kcp-admin");
    use base64::Engine;
    let b64 = |text: &str| base64::engine::general_purpose::STANDARD.encode(text);
    let user = match &identity.credential {
        Credential::Token(token) => json!({"token": token}),
        Credential::Certificate { cert, key } => {
            json!({"client-certificate-data": b64(cert), "client-key-data": b64(key)})
        }
        Credential::Impersonating { user, groups } => {
            json!({"token": admin_token, "as": user, "as-groups": groups})
        }
    };
    let text = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "kcp", "cluster": {
            "server": format!("{}/clusters/{workspace}", kcp.base_url()),
            "certificate-authority-data": b64(&ca),
        }}],
        "contexts": [{"name": "it", "context": {"cluster": "kcp", "user": "it"}}],
        "current-context": "it",
        "users": [{"name": "it", "user": user}],
    });
    Kubeconfig::from_yaml(&text.to_string()).unwrap()
}

async fn client(kubeconfig: Kubeconfig) -> kube::Client {
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}

fn kinds() -> [(&'static str, ApiResource); 2] {
    [
        (
            "configmaps",
            ApiResource {
                group: String::new(),
                version: "v1".into(),
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                plural: "configmaps".into(),
            },
        ),
        (
            "widgets",
            ApiResource {
                group: "example.com".into(),
                version: "v1".into(),
                api_version: "example.com/v1".into(),
                kind: "Widget".into(),
                plural: "widgets".into(),
            },
        ),
    ]
}

fn object(resource: &ApiResource, name: &str) -> DynamicObject {
    let mut object = DynamicObject::new(name, resource).within(NAMESPACE);
    object.data = json!({"data": {"k": "v"}});
    object
}

/// Whether `verb` on `kind` was allowed (`Ok`), refused with 403 (`Err`); anything else fails
/// the test.
async fn attempt(
    admin: &Api<DynamicObject>,
    api: &Api<DynamicObject>,
    resource: &ApiResource,
    verb: &str,
    tag: &str,
) -> bool {
    let outcome: Result<(), kube::Error> = match verb {
        "get" => api.get("existing").await.map(drop),
        "list" => api.list(&ListParams::default()).await.map(drop),
        "watch" => api
            .watch(&WatchParams::default().timeout(1), "0")
            .await
            .map(drop),
        "create" => api
            .create(
                &PostParams::default(),
                &object(resource, &format!("new-{tag}")),
            )
            .await
            .map(drop),
        "update" => {
            let current = admin.get("existing").await.unwrap();
            api.replace("existing", &PostParams::default(), &current)
                .await
                .map(drop)
        }
        "patch" => {
            let patch = Patch::Merge(json!({"metadata": {"labels": {"patched-by": tag}}}));
            api.patch("existing", &PatchParams::default(), &patch)
                .await
                .map(drop)
        }
        "delete" => {
            let victim = format!("victim-{tag}");
            admin
                .create(&PostParams::default(), &object(resource, &victim))
                .await
                .unwrap();
            api.delete(&victim, &DeleteParams::default())
                .await
                .map(drop)
        }
        _ => unreachable!(),
    };
    match outcome {
        Ok(()) => true,
        Err(kube::Error::Api(status)) if status.code == 403 => false,
        Err(error) => panic!(
            "{verb} {} by {tag}: neither allowed nor 403: {error}",
            resource.plural
        ),
    }
}

#[test]
fn every_identity_gets_what_is_granted_in_each_workspace_and_nothing_else() {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    };
    let dir = tempfile::tempdir().unwrap();
    let tokens = write_file(
        dir.path(),
        "tokens.csv",
        "ann-token,ann,1001,\"team-a\"\nben-token,ben,1002,\"team-b\"\ncat-token,cat,1003,\"team-c\"\n",
    );
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "matrix CA");
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let dave_key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name.push(DnType::CommonName, "dave");
    params
        .distinguished_name
        .push(DnType::OrganizationName, "team-d");
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let dave_cert = params.signed_by(&dave_key, &issuer).unwrap();
    let client_ca = write_file(dir.path(), "client-ca.crt", &ca_cert.pem());
    let kcp = Kcp::start(
        &dir.path().join("root"),
        &["--token-auth-file", &tokens, "--client-ca-file", &client_ca],
    );

    let parent = kcp.workspace("matrix");
    let (c1, c2) = (
        kcp.workspace_in(&parent, "c1"),
        kcp.workspace_in(&parent, "c2"),
    );
    let workspaces = [parent.clone(), c1.clone(), c2.clone()];
    for workspace in &workspaces {
        furnish(&kcp, dir.path(), workspace);
    }
    for (workspace, account) in [(&parent, "sa-p"), (&c1, "sa-c1")] {
        kcp.kubectl_in_ok(
            workspace,
            &["create", "serviceaccount", account, "-n", NAMESPACE],
        );
    }
    // The grants: (identity, workspace, role).
    let grants: [(&str, &str, &str); 9] = [
        ("ann", &parent, "edit"),
        ("ann", &c2, "view"),
        ("ben", &c1, "edit"),
        ("cat", &parent, "view"),
        ("cat", &c2, "edit"),
        ("dave", &c1, "view"),
        ("sa-p", &parent, "edit"),
        ("sa-c1", &c1, "view"),
        ("erin", &c2, "view"),
    ];
    for (who, workspace, role) in grants {
        let subject = match who {
            "sa-p" | "sa-c1" => format!("serviceaccount={NAMESPACE}:{who}"),
            // Dave through his certificate's organization, erin through the impersonated group.
            "dave" => "group=team-d".to_string(),
            "erin" => "group=team-e".to_string(),
            user => format!("user={user}"),
        };
        grant(&kcp, workspace, role, &subject, !who.starts_with("sa-"));
    }
    let token_of = |workspace: &str, account: &str| {
        kcp.kubectl_in_ok(workspace, &["create", "token", account, "-n", NAMESPACE])
            .trim()
            .to_string()
    };
    let identities = [
        Identity {
            name: "ann",
            credential: Credential::Token("ann-token".into()),
        },
        Identity {
            name: "ben",
            credential: Credential::Token("ben-token".into()),
        },
        Identity {
            name: "cat",
            credential: Credential::Token("cat-token".into()),
        },
        Identity {
            name: "dave",
            credential: Credential::Certificate {
                cert: dave_cert.pem(),
                key: dave_key.serialize_pem(),
            },
        },
        Identity {
            name: "sa-p",
            credential: Credential::Token(token_of(&parent, "sa-p")),
        },
        Identity {
            name: "sa-c1",
            credential: Credential::Token(token_of(&c1, "sa-c1")),
        },
        Identity {
            name: "erin",
            credential: Credential::Impersonating {
                user: "erin".into(),
                groups: vec!["team-e".into()],
            },
        },
    ];
    let admin_identity = Identity {
        name: "kcp-admin",
        credential: Credential::Token(kcp_testing::kubeconfig::admin_token(&kcp.root, "kcp-admin")),
    };

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mut wrong = Vec::new();
    let mut cells = 0;
    runtime.block_on(async {
        for workspace in &workspaces {
            let admin_client = client(kubeconfig(&kcp, workspace, &admin_identity)).await;
            for (_, resource) in kinds() {
                let admin: Api<DynamicObject> =
                    Api::namespaced_with(admin_client.clone(), NAMESPACE, &resource);
                admin.create(&PostParams::default(), &object(&resource, "existing")).await.unwrap();
            }
            for identity in &identities {
                let granted = grants
                    .iter()
                    .find(|(who, ws, _)| *who == identity.name && ws == workspace)
                    .map(|(_, _, role)| *role);
                let client = client(kubeconfig(&kcp, workspace, identity)).await;
                for (plural, resource) in kinds() {
                    let admin: Api<DynamicObject> =
                        Api::namespaced_with(admin_client.clone(), NAMESPACE, &resource);
                    let api: Api<DynamicObject> =
                        Api::namespaced_with(client.clone(), NAMESPACE, &resource);
                    for verb in VERBS {
                        let expected = match granted {
                            Some("edit") => true,
                            Some("view") => READ.contains(&verb),
                            _ => false,
                        };
                        let allowed = attempt(&admin, &api, &resource, verb, identity.name).await;
                        cells += 1;
                        if allowed != expected {
                            wrong.push(format!(
                                "{} {verb} {plural} in {workspace}: allowed {allowed}, expected {expected}",
                                identity.name
                            ));
                        }
                    }
                }
            }
        }
    });
    assert_eq!(cells, 3 * 7 * 2 * 7);
    assert!(
        wrong.is_empty(),
        "cells not as granted:\n{}",
        wrong.join("\n")
    );

    // kubectl agrees, and lists the aggregated widget rules among what ann may do.
    let ann = |workspace: &str, args: &[&str]| {
        let mut all = vec!["--token=ann-token"];
        all.extend_from_slice(args);
        kcp.kubectl_in(workspace, &all)
    };
    let can = ann(
        &parent,
        &[
            "auth",
            "can-i",
            "delete",
            "widgets.example.com",
            "-n",
            NAMESPACE,
        ],
    );
    assert_eq!(kcp_testing::output::stdout(&can).trim(), "yes");
    let listed =
        kcp_testing::output::stdout(&ann(&parent, &["auth", "can-i", "--list", "-n", NAMESPACE]));
    assert!(
        listed
            .lines()
            .any(|line| line.starts_with("widgets.example.com")
                && line.contains("create delete patch update get list watch")),
        "{listed}"
    );

    // Required groups: c2 admits only auditors now; kcp's admin stays welcome.
    kcp.kubectl_in_ok(
        &c2,
        &[
            "annotate",
            "logicalcluster",
            "cluster",
            "authorization.kcp.io/required-groups=auditors",
        ],
    );
    let path = format!("/clusters/{c2}/api/v1/namespaces/{NAMESPACE}/configmaps");
    kcp_testing::wait::until("required groups hold", || {
        let out = kcp.kubectl_in(&c2, &["--token=cat-token", "get", "--raw", &path]);
        let said = String::from_utf8_lossy(&out.stderr).into_owned();
        match said.contains(r#"User "cat" cannot list resource "configmaps" in API group "" in the namespace "team": access denied"#) {
            true => Ok(()),
            false => Err(said),
        }
    });
    kcp.kubectl_in_ok(&c2, &["get", "configmaps", "-n", NAMESPACE]);

    // A CertificateSigningRequest records who asked, whatever the body says.
    kcp.kubectl_in_ok(
        &parent,
        &[
            "create",
            "clusterrole",
            "csr-creator",
            "--verb=create,get",
            "--resource=certificatesigningrequests",
        ],
    );
    kcp.kubectl_in_ok(
        &parent,
        &[
            "create",
            "clusterrolebinding",
            "ann-csr",
            "--clusterrole=csr-creator",
            "--user=ann",
        ],
    );
    let request_key = KeyPair::generate().unwrap();
    let mut request_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    request_params
        .distinguished_name
        .push(DnType::CommonName, "ann");
    let csr_pem = request_params
        .serialize_request(&request_key)
        .unwrap()
        .pem()
        .unwrap();
    use base64::Engine;
    let csr = write_file(
        dir.path(),
        "csr.yaml",
        &format!(
            "apiVersion: certificates.k8s.io/v1\nkind: CertificateSigningRequest\nmetadata:\n  name: ann-csr\nspec:\n  request: {}\n  signerName: example.com/signer\n  usages: [client auth]\n  username: mallory\n  groups: [system:masters]\n",
            base64::engine::general_purpose::STANDARD.encode(csr_pem)
        ),
    );
    kcp_testing::wait::until("ann may create CSRs", || {
        let out = ann(&parent, &["create", "-f", &csr]);
        match out.status.success() {
            true => Ok(()),
            false => Err(String::from_utf8_lossy(&out.stderr).into_owned()),
        }
    });
    let spec = kcp.kubectl_in_ok(
        &parent,
        &["get", "csr", "ann-csr", "-o", "jsonpath={.spec}"],
    );
    let spec = kcp_testing::output::json(&spec);
    assert_eq!(spec["username"], "ann");
    assert_eq!(spec["uid"], "1001");
    assert_eq!(spec["groups"], json!(["team-a", "system:authenticated"]));
}
