//! The agentwire nodes and SDK clients of the cluster tests (`cluster.rs`, `cluster_links.rs`).

use github_copilot_sdk::types::{SessionConfig, SessionEvent, SessionId};
use github_copilot_sdk::Client;

use super::agentwire::Agentwire;
use super::sdk_scenarios as sdk;

/// The nodes' lease TTL: a dead node's sessions can be claimed this long after its last renewal.
pub const LEASE_TTL: &str = "2s";

/// `agentwire --headless --port 0 --cluster URL --node-id ID`, all nodes with the same seed.
pub async fn node(url: &str, id: &str) -> Agentwire {
    node_with(url, id, "1").await
}

/// [`node`] with the stream and bucket replicated `replicas` times.
pub async fn node_with(url: &str, id: &str, replicas: &str) -> Agentwire {
    let mut args = node_args(url, id);
    args.extend(["--cluster-replicas", replicas, "--seed", "7"].map(str::to_owned));
    Agentwire::launch(args).await
}

/// [`node`] started with the arguments `extra` too.
pub async fn node_with_args(url: &str, id: &str, extra: &[&str]) -> Agentwire {
    let mut args = node_args(url, id);
    let same_as_node = ["--cluster-replicas", "1", "--seed", "7"];
    args.extend(same_as_node.iter().chain(extra).map(|a| a.to_string()));
    Agentwire::launch(args).await
}

/// Waits (10 s at most) until `session`'s log holds a prompt (`user.message`) containing
/// `text`: its turn started on the owner.
pub async fn until_prompted(session: &github_copilot_sdk::session::Session, text: &str) {
    let started = tokio::time::Instant::now();
    loop {
        let history = session.get_events().await.expect("getMessages");
        if history.iter().any(|e| {
            e.event_type == "user.message"
                && sdk::str_field(e, "content").is_some_and(|c| c.contains(text))
        }) {
            return;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "no prompt {text:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// A scenario file in `dir` whose rule for prompts with "slowly" waits 2.5 s, then says
/// "Done slowly." (the rest as the built-in default); its path.
pub fn slow_scenario(dir: &std::path::Path) -> String {
    slow_scenario_taking(dir, 2500)
}

/// [`slow_scenario`] whose slow turn takes `sleep_ms`.
pub fn slow_scenario_taking(dir: &std::path::Path, sleep_ms: u64) -> String {
    let scenario = dir.join("scenario.json");
    let rules = serde_json::json!({"rules": [{"match": "slowly",
        "steps": [{"sleep_ms": sleep_ms}, {"say": "Done slowly."}]}],
        "default": [{"say": "You said: {prompt}"}]});
    std::fs::write(&scenario, rules.to_string()).expect("write the scenario");
    scenario.to_str().expect("a UTF-8 path").to_owned()
}

/// Publishes on `subject`, a link's or relay group's, a heartbeat naming a message its sender
/// never sent: the receiver asks for it again, the sender says it does not keep it, and the
/// receiver counts the link broken.
pub async fn inject_unsent_heartbeat(watcher: &async_nats::Client, subject: async_nats::Subject) {
    let mut heartbeat = vec![b'H'];
    heartbeat.extend_from_slice(&(1u64 << 40).to_be_bytes());
    watcher
        .publish(subject, heartbeat.into())
        .await
        .expect("publish");
    watcher.flush().await.expect("flush");
}

/// The arguments of a headless node `id` on `url` with the tests' lease TTL.
pub fn node_args(url: &str, id: &str) -> Vec<String> {
    [
        "--headless",
        "--port",
        "0",
        "--cluster",
        url,
        "--node-id",
        id,
    ]
    .into_iter()
    .chain(["--cluster-lease-ttl", LEASE_TTL])
    .map(str::to_owned)
    .collect()
}

pub async fn client(node: &Agentwire) -> Client {
    super::sdk_client(node.port).await
}

/// The ids of `events`, in order.
pub fn ids(events: &[SessionEvent]) -> Vec<&str> {
    events.iter().map(|e| e.id.as_str()).collect()
}

/// A session of the fake model with the client-chosen id `id` (its permission handler is
/// added by the caller).
pub fn session_config(id: &SessionId) -> SessionConfig {
    SessionConfig::default()
        .with_session_id(id.clone())
        .with_model("fake-model")
}

/// A client of `node` and a new session it created there (approving every permission),
/// after one turn with `prompt` when given (its final message returned).
pub async fn app_session(
    node: &Agentwire,
    prompt: Option<&str>,
) -> (
    Client,
    SessionId,
    github_copilot_sdk::session::Session,
    Option<SessionEvent>,
) {
    let app = client(node).await;
    let id = sdk::new_session_id();
    let config = session_config(&id).with_permission_handler(std::sync::Arc::new(
        github_copilot_sdk::handler::ApproveAllHandler,
    ));
    let session = sdk::within("session.create", app.create_session(config))
        .await
        .expect("session.create");
    let reply = match prompt {
        Some(prompt) => Some(sdk::turn(&session, prompt).await),
        None => None,
    };
    (app, id, session, reply)
}

/// The prompts of `session`'s `user.message`s, in order, as `session.getMessages` answers.
pub async fn prompts(session: &github_copilot_sdk::session::Session) -> Vec<String> {
    let history = sdk::within("getMessages", session.get_events())
        .await
        .expect("getMessages");
    history
        .iter()
        .filter(|e| e.event_type == "user.message")
        .filter_map(|e| sdk::str_field(e, "content"))
        .map(str::to_owned)
        .collect()
}
