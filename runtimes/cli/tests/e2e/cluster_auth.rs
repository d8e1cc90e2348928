//! `--cluster-creds` against a nats-server in operator (JWT) mode, as `nsc` sets one up: an
//! operator, a system account and an application account with JetStream, whose JWTs the
//! server preloads (memory resolver), and users of that account whose `.creds` files the nodes
//! get. The JWTs are signed here with the nkeys crate (what `nsc` does). A node with its
//! user's `.creds` serves a session through the **official Copilot Rust SDK**; a node with a
//! user the server does not know, or with no credentials, does not start and says why.

use crate::support::sdk_scenarios as sdk;

use crate::support;

use crate::support::nats;

use crate::support::cluster_node;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use cluster_node::app_session;
use nkeys::KeyPair;
use serde_json::{json, Value};

/// A JWT of `claims` (its `iss` the public key of `signer`), signed by `signer`.
fn jwt(signer: &KeyPair, mut claims: Value) -> String {
    claims["iss"] = json!(signer.public_key());
    claims["iat"] = json!(1_796_000_000u64);
    claims["jti"] = json!(format!("{:x}", claims.to_string().len()));
    let header = URL_SAFE_NO_PAD.encode(br#"{"typ":"JWT","alg":"ed25519-nkey"}"#);
    let body = URL_SAFE_NO_PAD.encode(claims.to_string());
    let signed = format!("{header}.{body}");
    let signature = signer.sign(signed.as_bytes()).expect("sign");
    format!("{signed}.{}", URL_SAFE_NO_PAD.encode(signature))
}

/// An account JWT for `account`, signed by `operator`; with JetStream when `jetstream`.
fn account_jwt(operator: &KeyPair, account: &KeyPair, name: &str, jetstream: bool) -> String {
    let mut limits = json!({"subs": -1, "data": -1, "payload": -1, "imports": -1,
                            "exports": -1, "wildcards": true, "conn": -1, "leaf": -1});
    if jetstream {
        for key in ["mem_storage", "disk_storage", "streams", "consumer"] {
            limits[key] = json!(-1);
        }
    }
    jwt(
        operator,
        json!({"name": name, "sub": account.public_key(),
               "nats": {"limits": limits, "default_permissions": {"pub": {}, "sub": {}},
                        "type": "account", "version": 2}}),
    )
}

/// The `.creds` file of a user of `account` (its JWT and its seed, as `nsc` writes them).
fn creds(account: &KeyPair, name: &str) -> String {
    let user = KeyPair::new_user();
    let token = jwt(
        account,
        json!({"name": name, "sub": user.public_key(),
               "nats": {"pub": {}, "sub": {}, "subs": -1, "data": -1, "payload": -1,
                        "type": "user", "version": 2}}),
    );
    format!(
        "-----BEGIN NATS USER JWT-----\n{token}\n------END NATS USER JWT------\n\n\
         ************************* IMPORTANT *************************\n\
         NKEY Seed printed below can be used to sign and prove identity.\n\n\
         -----BEGIN USER NKEY SEED-----\n{}\n------END USER NKEY SEED------\n",
        user.seed().expect("seed")
    )
}

/// An operator-mode JetStream nats-server: its config in `dir`; the application account.
fn operator_mode_server(dir: &Path) -> (nats::NatsServer, KeyPair) {
    let operator = KeyPair::new_operator();
    let system = KeyPair::new_account();
    let app = KeyPair::new_account();
    let operator_jwt = jwt(
        &operator,
        json!({"name": "agentwire-test", "sub": operator.public_key(),
               "nats": {"type": "operator", "version": 2,
                        "system_account": system.public_key()}}),
    );
    std::fs::write(dir.join("operator.jwt"), &operator_jwt).unwrap();
    let config = format!(
        "operator: {operator}\nsystem_account: {sys}\nresolver: MEMORY\n\
         resolver_preload: {{\n  {sys}: {sys_jwt}\n  {app}: {app_jwt}\n}}\n",
        operator = dir.join("operator.jwt").display(),
        sys = system.public_key(),
        sys_jwt = account_jwt(&operator, &system, "SYS", false),
        app = app.public_key(),
        app_jwt = account_jwt(&operator, &app, "APP", true),
    );
    let path = dir.join("server.conf");
    std::fs::write(&path, config).unwrap();
    (nats::NatsServer::with_config(&path), app)
}

/// `agentwire --headless --cluster URL --node-id ID` with `extra` args; how it ended within
/// a few seconds (`None`: still running) and its stderr.
async fn start_briefly(url: &str, id: &str, extra: &[&str]) -> (Option<bool>, String) {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_agentwire"))
        .args(cluster_node::node_args(url, id))
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn agentwire");
    let ended = tokio::time::timeout(Duration::from_secs(8), child.wait()).await;
    let _ = child.start_kill();
    let output = child.wait_with_output().await.expect("stderr");
    let status = ended.ok().map(|s| s.expect("wait").success());
    (status, String::from_utf8_lossy(&output.stderr).into_owned())
}

#[tokio::test]
async fn a_node_with_its_users_creds_serves_sessions_on_an_operator_mode_server() {
    sdk::bounded(async {
        let dir = tempfile::tempdir().unwrap();
        let (server, app) = operator_mode_server(dir.path());
        let url = server.url();
        let node_creds = dir.path().join("node.creds");
        std::fs::write(&node_creds, creds(&app, "node-a")).unwrap();

        let mut args = cluster_node::node_args(&url, "a");
        args.extend([
            "--cluster-creds".to_owned(),
            node_creds.display().to_string(),
        ]);
        let a = support::Agentwire::launch(args).await;
        let (_client, _id, session, reply) = app_session(&a, Some("hello over JWT")).await;
        let reply = reply.expect("the turn's answer");
        assert!(sdk::str_field(&reply, "content").is_some());
        // The session's log is in JetStream, in the application account.
        let history = sdk::within("getMessages", session.get_events())
            .await
            .expect("getMessages");
        assert!(history.iter().any(|e| e.event_type == "user.message"));
        assert!(a.stderr().contains("cluster lease taken"), "{}", a.stderr());

        // A user of an account the server does not know is refused; so is a node with no
        // credentials. Neither serves: each ends with the reason.
        let stranger = dir.path().join("stranger.creds");
        std::fs::write(&stranger, creds(&KeyPair::new_account(), "stranger")).unwrap();
        for extra in [
            vec!["--cluster-creds", stranger.to_str().unwrap()],
            Vec::new(),
        ] {
            let (ended, stderr) = start_briefly(&url, "b", &extra).await;
            assert_eq!(ended, Some(false), "{extra:?}: {stderr}");
            assert!(
                stderr.to_lowercase().contains("authoriz")
                    || stderr.to_lowercase().contains("authentic"),
                "{extra:?}: {stderr}"
            );
        }
        drop(server);
    })
    .await
}
