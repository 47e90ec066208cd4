//! ServiceAccount credentials, as Kubernetes issues them and kcp scopes them: `kubectl create
//! token` (a TokenRequest) and token Secrets filled by the server; a token authenticates its
//! service account in the workspace it lives in only (elsewhere it is a foreign identity:
//! `system:anonymous`), only while the account exists with the uid it names, and a Secret's
//! token only while the Secret does. A request without a cluster path goes to the account's
//! own workspace, as in-cluster clients send them.

use kcp_testing::wait;

use super::support::Kcp;

fn stderr(output: &std::process::Output) -> String {
    kcp_testing::output::stderr(output)
}

#[test]
fn service_account_tokens_work_in_their_workspace_only_and_while_their_account_stands() {
    let kcp = Kcp::shared("service-accounts");
    let home = kcp.home().to_string();
    let other = kcp.workspace("elsewhere");
    kcp.kubectl_in_ok(
        &home,
        &["create", "serviceaccount", "robot", "-n", "default"],
    );
    kcp.kubectl_in_ok(
        &home,
        &[
            "create",
            "rolebinding",
            "robot-view",
            "-n",
            "default",
            "--clusterrole=view",
            "--serviceaccount=default:robot",
        ],
    );
    kcp.kubectl_in_ok(&home, &["create", "configmap", "seen", "-n", "default"]);

    // kubectl create token: a bound token of an hour, for the server's audience.
    let token = kcp
        .kubectl_in_ok(&home, &["create", "token", "robot", "-n", "default"])
        .trim()
        .to_string();
    assert_eq!(token.matches('.').count(), 2, "a JWT: {token}");
    let listed = kcp.kubectl_in_as(&token, &home, &["get", "configmaps", "-n", "default"]);
    assert!(listed.status.success(), "{}", stderr(&listed));
    assert!(String::from_utf8_lossy(&listed.stdout).contains("seen"));
    // RBAC holds for it as for anyone: view, not edit.
    let refused = kcp.kubectl_in_as(
        &token,
        &home,
        &["create", "configmap", "x", "-n", "default"],
    );
    assert!(
        stderr(&refused).contains(
            r#"User "system:serviceaccount:default:robot" cannot create resource "configmaps" in API group "" in the namespace "default""#
        ),
        "{}",
        stderr(&refused)
    );
    // Who it is: the account, its groups and uid, and the cluster it authenticated in.
    let whoami = kcp.kubectl_in_as(&token, &home, &["auth", "whoami", "-o", "json"]);
    assert!(whoami.status.success(), "{}", stderr(&whoami));
    let info = kcp_testing::output::json(&String::from_utf8_lossy(&whoami.stdout));
    let info = &info["status"]["userInfo"];
    let uid = kcp.kubectl_in_ok(
        &home,
        &[
            "get",
            "sa",
            "robot",
            "-n",
            "default",
            "-o",
            "jsonpath={.metadata.uid}",
        ],
    );
    assert_eq!(info["username"], "system:serviceaccount:default:robot");
    assert_eq!(info["uid"], uid.as_str());
    assert_eq!(
        info["groups"],
        serde_json::json!([
            "system:serviceaccounts",
            "system:serviceaccounts:default",
            "system:authenticated"
        ])
    );
    let cluster = kcp.logical_cluster(&home);
    assert_eq!(
        info["extra"]["authentication.kcp.io/cluster-name"],
        serde_json::json!([cluster])
    );
    assert!(
        info["extra"]["authentication.kubernetes.io/credential-id"][0]
            .as_str()
            .unwrap()
            .starts_with("JTI=")
    );

    // Without a cluster path, the request goes to the account's own workspace.
    let in_cluster = kcp.kubectl(&[
        "--context=base",
        &format!("--token={token}"),
        "get",
        "configmap",
        "seen",
        "-n",
        "default",
        "-o",
        "name",
    ]);
    assert!(in_cluster.status.success(), "{}", stderr(&in_cluster));

    // Elsewhere it is a foreign identity, which that workspace does not let in...
    let path = format!("/clusters/{other}/api/v1/namespaces/default/configmaps");
    let foreign = kcp.kubectl_in_as(&token, &other, &["get", "--raw", &path]);
    assert!(
        stderr(&foreign).contains(
            r#"User "system:anonymous" cannot list resource "configmaps" in API group "" in the namespace "default": access denied"#
        ),
        "{}",
        stderr(&foreign)
    );
    // ...unless it grants the identities of the account's workspace something, as a group.
    let origin = format!("--group=system:cluster:{cluster}");
    kcp.kubectl_in_ok(
        &other,
        &[
            "create",
            "clusterrolebinding",
            "from-home",
            "--clusterrole=system:kcp:workspace:access",
            &origin,
        ],
    );
    kcp.kubectl_in_ok(
        &other,
        &[
            "create",
            "rolebinding",
            "from-home-view",
            "-n",
            "default",
            "--clusterrole=view",
            &origin,
        ],
    );
    wait::until("the grant to the origin's group holds", || {
        let listed = kcp.kubectl_in_as(&token, &other, &["get", "--raw", &path]);
        match listed.status.success() {
            true => Ok(()),
            false => Err(String::from_utf8_lossy(&listed.stderr).into_owned()),
        }
    });
    let elsewhere = kcp.kubectl_in_as(&token, &other, &["auth", "whoami", "-o", "json"]);
    let seen = kcp_testing::output::json(&kcp_testing::output::stdout(&elsewhere));
    assert_eq!(seen["status"]["userInfo"]["username"], "system:anonymous");
    assert_eq!(
        seen["status"]["userInfo"]["groups"],
        serde_json::json!(["system:authenticated", format!("system:cluster:{cluster}")])
    );
    let create = kcp.kubectl_in_as(
        &token,
        &other,
        &["create", "configmap", "x", "-n", "default"],
    );
    assert!(
        stderr(&create).contains(r#"User "system:anonymous" cannot create"#),
        "{}",
        stderr(&create)
    );

    // Audiences and lifetimes as asked: a token for another audience is not for this server.
    let claims = |token: &str| {
        use base64::Engine;
        let payload = token.split('.').nth(1).unwrap();
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(payload)
            .unwrap();
        serde_json::from_slice::<serde_json::Value>(&bytes).unwrap()
    };
    assert_eq!(
        claims(&token)["aud"],
        serde_json::json!(["https://kcp.default.svc"])
    );
    assert_eq!(claims(&token)["iss"], "https://kcp.default.svc");
    let vault = kcp
        .kubectl_in_ok(
            &home,
            &[
                "create",
                "token",
                "robot",
                "-n",
                "default",
                "--audience=vault",
                "--duration=20m",
            ],
        )
        .trim()
        .to_string();
    let vault_claims = claims(&vault);
    assert_eq!(vault_claims["aud"], serde_json::json!(["vault"]));
    assert_eq!(
        vault_claims["exp"].as_i64().unwrap() - vault_claims["iat"].as_i64().unwrap(),
        1200
    );
    let elsewhere_token = kcp.kubectl_in_as(&vault, &home, &["get", "configmaps", "-n", "default"]);
    assert!(
        stderr(&elsewhere_token).contains("Unauthorized"),
        "{}",
        stderr(&elsewhere_token)
    );

    // Issuer discovery, for verifiers outside the server: the key that signed the token.
    let discovery = kcp.kubectl(&[
        "--context=base",
        &format!("--token={token}"),
        "get",
        "--raw",
        "/.well-known/openid-configuration",
    ]);
    let discovery = kcp_testing::output::json(&kcp_testing::output::stdout(&discovery));
    assert_eq!(discovery["issuer"], "https://kcp.default.svc");
    assert!(
        discovery["jwks_uri"]
            .as_str()
            .unwrap()
            .ends_with("/openid/v1/jwks")
    );
    let keys = kcp_testing::output::json(&kcp.kubectl_ok(&[
        "--context=base",
        "get",
        "--raw",
        "/openid/v1/jwks",
    ]));
    let header = {
        use base64::Engine;
        let part = token.split('.').next().unwrap();
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(part)
            .unwrap();
        serde_json::from_slice::<serde_json::Value>(&bytes).unwrap()
    };
    assert_eq!(keys["keys"][0]["kid"], header["kid"]);
    assert_eq!(keys["keys"][0]["alg"], "ES256");

    // A TokenRequest is validated as Kubernetes validates it.
    let short = kcp.kubectl_in(
        &home,
        &["create", "token", "robot", "-n", "default", "--duration=5m"],
    );
    assert!(
        stderr(&short).contains("may not specify a duration less than 10 minutes"),
        "{}",
        stderr(&short)
    );
    let missing = kcp.kubectl_in(&home, &["create", "token", "nobody", "-n", "default"]);
    assert!(
        stderr(&missing).contains(r#"serviceaccounts "nobody" not found"#),
        "{}",
        stderr(&missing)
    );

    // Deleted and created again under the same name: the old token names the old uid.
    kcp.kubectl_in_ok(
        &home,
        &["delete", "serviceaccount", "robot", "-n", "default"],
    );
    kcp.kubectl_in_ok(
        &home,
        &["create", "serviceaccount", "robot", "-n", "default"],
    );
    let stale = kcp.kubectl_in_as(&token, &home, &["get", "configmaps", "-n", "default"]);
    assert!(
        stderr(&stale).contains("Unauthorized"),
        "{}",
        stderr(&stale)
    );
    let fresh = kcp
        .kubectl_in_ok(&home, &["create", "token", "robot", "-n", "default"])
        .trim()
        .to_string();
    let listed = kcp.kubectl_in_as(&fresh, &home, &["get", "configmaps", "-n", "default"]);
    assert!(listed.status.success(), "{}", stderr(&listed));
}

#[test]
fn token_secrets_are_filled_and_their_tokens_end_with_them() {
    let kcp = Kcp::shared("service-account-secrets");
    let home = kcp.home().to_string();
    kcp.kubectl_in_ok(
        &home,
        &["create", "serviceaccount", "builder", "-n", "default"],
    );
    kcp.kubectl_in_ok(
        &home,
        &[
            "create",
            "rolebinding",
            "builder-view",
            "-n",
            "default",
            "--clusterrole=view",
            "--serviceaccount=default:builder",
        ],
    );
    let dir = tempfile::tempdir().unwrap();
    let secret = super::support::write_file(
        dir.path(),
        "secret.yaml",
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: builder-token\n  namespace: default\n  annotations:\n    kubernetes.io/service-account.name: builder\ntype: kubernetes.io/service-account-token\n",
    );
    kcp.kubectl_in_ok(&home, &["create", "-f", &secret]);
    let token = wait::until("the token controller fills the Secret", || {
        let data = kcp.kubectl_in_ok(
            &home,
            &[
                "get",
                "secret",
                "builder-token",
                "-n",
                "default",
                "-o",
                "jsonpath={.data.token}",
            ],
        );
        if data.is_empty() {
            return Err("no token yet".to_string());
        }
        Ok(data)
    });
    use base64::Engine;
    let decode = |text: &str| {
        String::from_utf8(
            base64::engine::general_purpose::STANDARD
                .decode(text)
                .unwrap(),
        )
        .unwrap()
    };
    let token = decode(&token);
    let field = |path: &str| {
        kcp.kubectl_in_ok(
            &home,
            &[
                "get",
                "secret",
                "builder-token",
                "-n",
                "default",
                "-o",
                &format!("jsonpath={path}"),
            ],
        )
    };
    assert_eq!(decode(&field("{.data.namespace}")), "default");
    assert!(decode(&field("{.data.ca\\.crt}")).contains("BEGIN CERTIFICATE"));
    let uid = kcp.kubectl_in_ok(
        &home,
        &[
            "get",
            "sa",
            "builder",
            "-n",
            "default",
            "-o",
            "jsonpath={.metadata.uid}",
        ],
    );
    assert_eq!(
        field("{.metadata.annotations.kubernetes\\.io/service-account\\.uid}"),
        uid
    );
    let listed = kcp.kubectl_in_as(&token, &home, &["get", "configmaps", "-n", "default"]);
    assert!(listed.status.success(), "{}", stderr(&listed));

    // The token ends with its Secret.
    kcp.kubectl_in_ok(
        &home,
        &["delete", "secret", "builder-token", "-n", "default"],
    );
    let ended = kcp.kubectl_in_as(&token, &home, &["get", "configmaps", "-n", "default"]);
    assert!(
        stderr(&ended).contains("Unauthorized"),
        "{}",
        stderr(&ended)
    );

    // A token Secret of an account that does not exist is removed; so are the token Secrets
    // of an account that is deleted.
    let orphan = super::support::write_file(
        dir.path(),
        "orphan.yaml",
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: orphan-token\n  namespace: default\n  annotations:\n    kubernetes.io/service-account.name: ghost\ntype: kubernetes.io/service-account-token\n",
    );
    kcp.kubectl_in_ok(&home, &["create", "-f", &orphan]);
    kcp.kubectl_in_ok(&home, &["create", "-f", &secret]);
    wait::until("the Secret is filled again", || {
        match field("{.data.token}").is_empty() {
            true => Err("not yet".to_string()),
            false => Ok(()),
        }
    });
    kcp.kubectl_in_ok(
        &home,
        &["delete", "serviceaccount", "builder", "-n", "default"],
    );
    wait::until("token Secrets of missing accounts are removed", || {
        let left = kcp.kubectl_in_ok(&home, &["get", "secrets", "-n", "default", "-o", "name"]);
        match left.trim().is_empty() {
            true => Ok(()),
            false => Err(left),
        }
    });
}
