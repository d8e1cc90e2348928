//! Issue 17 through the host's sans-IO API (raw JSON-RPC): what a durable store hears of
//! history edits, and the interest gate for an agent's sampling request.

use agentwire::agent::Scenario;
use agentwire::host::{Effect, EffectEvent, EffectId, EffectOp, HostConfig, Output, StoreOutput};
use serde_json::{json, Value};

use crate::support::*;

fn stored(w: &mut World) -> Vec<(String, Option<Value>)> {
    let mut out = Vec::new();
    while let Some(o) = w.host.poll_output() {
        match o {
            Output::Store(StoreOutput::Persist { session, event }) => {
                out.push((session, Some(serde_json::from_slice(&event).unwrap())))
            }
            Output::Store(StoreOutput::SessionDeleted { session }) => out.push((session, None)),
            other => panic!("unexpected {other:?}"),
        }
    }
    out
}

#[test]
fn truncate_and_fork_rewrite_a_durable_store() {
    let config = || HostConfig::default().with_report_persisted_events(true);
    let mut w = World::new(config());
    let mut p = w.connect();
    create(&mut w, &mut p, "s", json!({}));
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId":"s","prompt":"first"}),
    );
    stored(&mut w);
    let events = p.events("s");
    let user = events
        .iter()
        .find(|e| e["type"] == "user.message")
        .unwrap()
        .clone();
    let r = w.call(
        &mut p,
        &mut [],
        "session.history.truncate",
        json!({"sessionId":"s","eventId": user["id"]}),
    );
    let removed = r["result"]["eventsRemoved"].as_u64().unwrap();
    assert!(removed >= 2, "{r}");
    let out = stored(&mut w);
    assert_eq!(
        out[0],
        ("s".to_owned(), None),
        "the store drops the old log first"
    );
    let kept: Vec<Value> = out[1..].iter().map(|(_, e)| e.clone().unwrap()).collect();
    assert_eq!(kept.len(), 1, "only session.start is kept: {kept:?}");
    assert_eq!(kept[0]["type"], "session.start");

    let r = w.call(
        &mut p,
        &mut [],
        "sessions.fork",
        json!({"sessionId":"s", "name": "copy"}),
    );
    let fork = r["result"]["sessionId"].as_str().unwrap().to_owned();
    assert_eq!(r["result"]["name"], "copy");
    let out = stored(&mut w);
    assert_eq!(out[0], (fork.clone(), None));
    assert_eq!(out[1].0, fork);
    assert_eq!(out[1].1.as_ref().unwrap()["type"], "session.start");
    // The source's `session.info` (fork) is persisted on the source.
    let info = out.last().unwrap();
    assert_eq!(info.0, "s");
    assert_eq!(info.1.as_ref().unwrap()["data"]["infoType"], "fork");

    // A new process restores the fork from what the store holds.
    let mut w2 = World::new(config());
    let log: Vec<bytes::Bytes> = out
        .iter()
        .filter(|(s, e)| *s == fork && e.is_some())
        .map(|(_, e)| serde_json::to_vec(e.as_ref().unwrap()).unwrap().into())
        .collect();
    w2.host.restore_session(w2.now, &fork, log).unwrap();
    let mut q = w2.connect();
    let r = w2.call(
        &mut q,
        &mut [],
        "session.getMessages",
        json!({"sessionId": fork}),
    );
    assert_eq!(r["result"]["events"].as_array().unwrap().len(), 1);
}

#[test]
fn sampling_interest_counts_as_a_consumer() {
    let scenario =
        Scenario::from_json(r#"{"default":[{"sample":{"messages":[]}},{"say":"sampled"}]}"#)
            .unwrap();
    let mut w = World::new(HostConfig::with_scenario(scenario));
    let mut p = w.connect();
    create(&mut w, &mut p, "s", json!({}));
    // Without a sampler or an interest the request fails at once.
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId":"s","prompt":"one"}),
    );
    assert!(!p.types("s").contains(&"sampling.requested".to_owned()));
    let r = w.call(
        &mut p,
        &mut [],
        "session.eventLog.registerInterest",
        json!({"sessionId":"s","eventType":"sampling.requested"}),
    );
    assert_eq!(r["result"]["handle"], "interest-1");
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId":"s","prompt":"two"}),
    );
    let requested = p
        .events("s")
        .into_iter()
        .find(|e| e["type"] == "sampling.requested")
        .expect("sampling.requested with an interest registered");
    let r = w.call(
        &mut p,
        &mut [],
        "session.ui.handlePendingSampling",
        json!({"sessionId":"s","requestId": requested["data"]["requestId"],
               "response": {"role":"assistant","content":{"type":"text","text":"ok"}}}),
    );
    assert_eq!(r["result"]["success"], true);
    assert!(p.types("s").contains(&"sampling.completed".to_owned()));
}

/// `session.permissions.pendingRequests` lists the prompts still waiting, and forgets one
/// once it is answered.
#[test]
fn pending_permission_requests_are_listed_until_answered() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    create(&mut w, &mut p, "s", json!({"tools": weather_tool()}));
    let pending = |w: &mut World, p: &mut Peer| {
        w.call(
            p,
            &mut [],
            "session.permissions.pendingRequests",
            json!({"sessionId": "s"}),
        )["result"]["items"]
            .clone()
    };
    assert_eq!(pending(&mut w, &mut p), json!([]));
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId":"s","prompt":"What is the weather in Paris?"}),
    );
    let asked = p.event("s", "permission.requested")["data"].clone();
    let items = pending(&mut w, &mut p);
    assert_eq!(
        items,
        json!([{"requestId": asked["requestId"], "request": asked["permissionRequest"]}])
    );
    w.call(
        &mut p,
        &mut [],
        "session.permissions.handlePendingPermissionRequest",
        json!({"sessionId":"s","requestId":asked["requestId"],"result":{"kind":"approve-once"}}),
    );
    assert_eq!(pending(&mut w, &mut p), json!([]));
}

/// The GitHub API lookup the host asked for: its call id and `authorization` header.
fn identity_lookup(w: &mut World) -> (EffectId, String) {
    while let Some(o) = w.host.poll_output() {
        if let Output::Effect(Effect {
            id: call,
            op: EffectOp::HttpRequest(request),
        }) = o
        {
            assert_eq!(request.url, "http://gh.test/copilot_internal/user");
            let auth = request.header("authorization").unwrap().to_owned();
            return (call, auth);
        }
    }
    panic!("no identity lookup")
}

fn answer_lookup(w: &mut World, p: &mut Peer, call: EffectId, status: u16, body: Value) {
    w.host.handle_effect(
        w.now,
        call,
        EffectEvent::HttpHead {
            status,
            headers: Vec::new(),
        },
    );
    w.host.handle_effect(
        w.now,
        call,
        EffectEvent::HttpBody(body.to_string().as_bytes().to_vec()),
    );
    w.host.handle_effect(w.now, call, EffectEvent::HttpEnd);
    w.pump(&mut [&mut *p]);
}

/// A session created with its own `gitHubToken` is created once the GitHub API says whose
/// the token is (its account is then the session's `gitHubAuth.getStatus`); a refused token
/// fails the creation; a known token needs no second lookup.
#[test]
fn a_session_s_github_token_is_checked_before_it_is_created() {
    let config = HostConfig::default().with_github_api_url(Some("http://gh.test".into()));
    let mut w = World::new(config);
    let mut p = w.connect();
    let create = |w: &mut World, p: &mut Peer, id: &str, token: &str| {
        send_request(
            w,
            p,
            "session.create",
            json!({"sessionId": id, "gitHubToken": token}),
        )
    };
    let first = create(&mut w, &mut p, "a", "tok-alice");
    assert!(response(&p, first).is_none(), "answered before the lookup");
    let (call, auth) = identity_lookup(&mut w);
    assert_eq!(auth, "Bearer tok-alice");
    answer_lookup(
        &mut w,
        &mut p,
        call,
        200,
        json!({"login": "alice", "copilot_plan": "individual_pro"}),
    );
    let created = response(&p, first).expect("created after the lookup");
    assert_eq!(created["result"]["sessionId"], "a");
    let status = w.call(
        &mut p,
        &mut [],
        "session.gitHubAuth.getStatus",
        json!({"sessionId": "a"}),
    );
    assert_eq!(status["result"]["isAuthenticated"], true);
    assert_eq!(status["result"]["login"], "alice");
    assert_eq!(status["result"]["copilotPlan"], "individual_pro");

    let refused = create(&mut w, &mut p, "b", "bad-token");
    let (call, _) = identity_lookup(&mut w);
    answer_lookup(
        &mut w,
        &mut p,
        call,
        401,
        json!({"message": "Bad credentials"}),
    );
    let error = response(&p, refused).expect("answered");
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.contains("401 Unauthorized"), "{message}");
    let missing = w.call(
        &mut p,
        &mut [],
        "session.getMessages",
        json!({"sessionId": "b"}),
    );
    assert!(missing.get("error").is_some(), "{missing}");

    // Known now: answered at once, no second lookup.
    let again = create(&mut w, &mut p, "c", "tok-alice");
    assert_eq!(response(&p, again).unwrap()["result"]["sessionId"], "c");
    assert!(
        !std::iter::from_fn(|| w.host.poll_output()).any(|o| matches!(
            o,
            Output::Effect(Effect {
                op: EffectOp::HttpRequest(_),
                ..
            })
        ))
    );
}

/// Answers the skill reads of one directory: its walk lists `entries`, then its `SKILL.md`
/// files are read as `texts`.
fn answer_skill_reads(w: &mut World, p: &mut Peer, root: &str, texts: &[(&str, &str)]) {
    use agentwire::host::{FileReply, FileRequest};
    let (op, request) = w.next_file_op();
    assert!(
        matches!(&request, FileRequest::Walk { root: r, .. } if r == root),
        "{request:?}"
    );
    let mut entries: Vec<String> = texts.iter().map(|(path, _)| path.to_string()).collect();
    entries.push("notes.md".into());
    entries.push("deep/er/SKILL.md".into());
    w.host.handle_effect(
        w.now,
        op,
        EffectEvent::FileDone(Ok(FileReply::Entries(entries))),
    );
    let (op, request) = w.next_file_op();
    let FileRequest::ReadMany { paths, .. } = request else {
        panic!("{request:?}")
    };
    let wanted: Vec<String> = texts.iter().map(|(path, _)| path.to_string()).collect();
    assert_eq!(paths, wanted, "only NAME/SKILL.md files are read");
    let texts = texts
        .iter()
        .map(|(path, text)| (path.to_string(), text.to_string()))
        .collect();
    w.host.handle_effect(
        w.now,
        op,
        EffectEvent::FileDone(Ok(FileReply::Texts(texts))),
    );
    w.pump(&mut [&mut *p]);
}

/// A session's `skillDirectories` are read when its skills are first asked for: each
/// `NAME/SKILL.md`'s front matter names a skill; `disabledSkills` and enable / disable switch
/// them; reload reads again; `skills.discover` reads given directories.
#[test]
fn skills_are_read_from_the_session_s_skill_directories() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    create(
        &mut w,
        &mut p,
        "s",
        json!({"skillDirectories": ["/skills"], "disabledSkills": ["beta"]}),
    );
    let list = send_request(
        &mut w,
        &mut p,
        "session.skills.list",
        json!({"sessionId": "s"}),
    );
    assert!(response(&p, list).is_none(), "answered before the reads");
    answer_skill_reads(
        &mut w,
        &mut p,
        "/skills",
        &[
            (
                "alpha/SKILL.md",
                "---\nname: alpha\ndescription: First.\n---\nbody",
            ),
            (
                "beta/SKILL.md",
                "---\nname: beta\ndescription: Second.\n---\n",
            ),
        ],
    );
    let skills = response(&p, list).unwrap()["result"]["skills"].clone();
    assert_eq!(
        skills,
        json!([
            {"name": "alpha", "description": "First.", "source": "custom", "userInvocable": false,
             "enabled": true, "path": "/skills/alpha/SKILL.md"},
            {"name": "beta", "description": "Second.", "source": "custom", "userInvocable": false,
             "enabled": false, "path": "/skills/beta/SKILL.md"}
        ])
    );
    w.call(
        &mut p,
        &mut [],
        "session.skills.enable",
        json!({"sessionId": "s", "name": "beta"}),
    );
    w.call(
        &mut p,
        &mut [],
        "session.skills.disable",
        json!({"sessionId": "s", "name": "alpha"}),
    );
    // Read already: answered at once.
    let listed = w.call(
        &mut p,
        &mut [],
        "session.skills.list",
        json!({"sessionId": "s"}),
    );
    let enabled: Vec<bool> = listed["result"]["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["enabled"].as_bool().unwrap())
        .collect();
    assert_eq!(enabled, [false, true]);
    // Reload reads again: a skill added since appears.
    let reload = send_request(
        &mut w,
        &mut p,
        "session.skills.reload",
        json!({"sessionId": "s"}),
    );
    answer_skill_reads(
        &mut w,
        &mut p,
        "/skills",
        &[(
            "gamma/SKILL.md",
            "---\nname: gamma\ndescription: Third.\n---\n",
        )],
    );
    assert_eq!(response(&p, reload).unwrap()["result"], json!({}));
    let listed = w.call(
        &mut p,
        &mut [],
        "session.skills.list",
        json!({"sessionId": "s"}),
    );
    assert_eq!(listed["result"]["skills"][0]["name"], "gamma");

    let discover = send_request(
        &mut w,
        &mut p,
        "skills.discover",
        json!({"skillDirectories": ["/more/"]}),
    );
    answer_skill_reads(
        &mut w,
        &mut p,
        "/more",
        &[("delta/SKILL.md", "no front matter")],
    );
    let found = response(&p, discover).unwrap()["result"]["skills"].clone();
    assert_eq!(found[0]["name"], "delta", "the directory names it");
    assert_eq!(found[0]["path"], "/more/delta/SKILL.md");
}

/// A client installs the account a session runs as; `getStatus` reports it. Credentials
/// without a login are refused.
#[test]
fn a_client_sets_the_session_s_github_credentials() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    create(&mut w, &mut p, "s", json!({}));
    let before = w.call(
        &mut p,
        &mut [],
        "session.gitHubAuth.getStatus",
        json!({"sessionId": "s"}),
    );
    assert_eq!(before["result"]["isAuthenticated"], false);
    let set = w.call(
        &mut p,
        &mut [],
        "session.gitHubAuth.setCredentials",
        json!({"sessionId": "s", "credentials": {"type": "user", "host": "https://github.com",
               "login": "octo", "copilotUser": {"login": "octo", "copilot_plan": "business"}}}),
    );
    assert_eq!(set["result"]["success"], true, "{set}");
    let status = w.call(
        &mut p,
        &mut [],
        "session.gitHubAuth.getStatus",
        json!({"sessionId": "s"}),
    );
    assert_eq!(
        status["result"],
        json!({"isAuthenticated": true, "authType": "user", "host": "https://github.com",
               "login": "octo", "copilotPlan": "business", "statusMessage": "Authenticated as octo"})
    );
    let refused = w.call(
        &mut p,
        &mut [],
        "session.gitHubAuth.setCredentials",
        json!({"sessionId": "s", "credentials": {"type": "user"}}),
    );
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
}

/// `account.getQuota {gitHubToken}` reads the token's quotas fresh from the GitHub API
/// (`/copilot_internal/user`, asked again on every call) and answers them in the SDK's shape:
/// used requests from the entitlement and the percentage left, the overage and whether it is
/// allowed, the reset date. A refused token, or none, is an error.
#[test]
fn account_quotas_are_read_fresh_from_the_github_api() {
    let config = HostConfig::default().with_github_api_url(Some("http://gh.test".into()));
    let mut w = World::new(config);
    let mut p = w.connect();
    let user = |percent: u64| {
        json!({"login": "q", "quota_snapshots": {"chat": {"entitlement": 100,
            "overage_count": 2, "overage_permitted": true, "percent_remaining": percent,
            "timestamp_utc": "2026-04-30T00:00:00Z"}}})
    };
    let ask = |w: &mut World, p: &mut Peer, percent: u64| {
        let asked = send_request(w, p, "account.getQuota", json!({"gitHubToken": "tok-q"}));
        assert!(response(p, asked).is_none(), "answered before the lookup");
        let (call, auth) = identity_lookup(w);
        assert_eq!(auth, "Bearer tok-q");
        answer_lookup(w, p, call, 200, user(percent));
        response(p, asked)
            .expect("answered after the lookup")
            .clone()
    };
    let first = ask(&mut w, &mut p, 75);
    let chat = &first["result"]["quotaSnapshots"]["chat"];
    assert_eq!(chat["entitlementRequests"], 100.0, "{first}");
    assert_eq!(chat["usedRequests"], 25.0);
    assert_eq!(chat["remainingPercentage"], 75.0);
    assert_eq!(chat["overage"], 2.0);
    assert_eq!(chat["usageAllowedWithExhaustedQuota"], true);
    assert_eq!(chat["overageAllowedWithExhaustedQuota"], true);
    assert_eq!(chat["isUnlimitedEntitlement"], false);
    assert_eq!(chat["resetDate"], "2026-04-30T00:00:00Z");
    // Asked again: a new lookup, the new figures.
    let second = ask(&mut w, &mut p, 40);
    assert_eq!(
        second["result"]["quotaSnapshots"]["chat"]["usedRequests"],
        60.0
    );

    let refused = send_request(
        &mut w,
        &mut p,
        "account.getQuota",
        json!({"gitHubToken": "bad"}),
    );
    let (call, _) = identity_lookup(&mut w);
    answer_lookup(
        &mut w,
        &mut p,
        call,
        401,
        json!({"message": "Bad credentials"}),
    );
    let refused = response(&p, refused).unwrap();
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Bad credentials"),
        "{refused}"
    );
    let none = w.call(&mut p, &mut [], "account.getQuota", json!({}));
    assert!(
        none["error"]["message"]
            .as_str()
            .unwrap()
            .contains("gitHubToken"),
        "{none}"
    );
}

/// A connection that opted into telemetry forwarding on `connect` gets the telemetry events
/// of every session from then on as `gitHubTelemetry.event` notifications (a session's start
/// first, even one another client created); one that did not gets none.
#[test]
fn telemetry_is_forwarded_to_the_connections_that_opted_in() {
    let mut w = World::new(HostConfig::default());
    let mut watcher = w.connect();
    let mut other = w.connect();
    let connected = w.call(
        &mut watcher,
        &mut [],
        "connect",
        json!({"enableGitHubTelemetryForwarding": true}),
    );
    assert_eq!(connected["result"]["ok"], true, "{connected}");
    create(&mut w, &mut other, "s", json!({}));
    w.pump(&mut [&mut watcher, &mut other]);
    let forwarded: Vec<Value> = watcher
        .inbox
        .iter()
        .filter(|m| m["method"] == "gitHubTelemetry.event")
        .map(|m| m["params"].clone())
        .collect();
    assert!(!forwarded.is_empty(), "{:?}", watcher.inbox);
    let first = &forwarded[0];
    assert_eq!(first["sessionId"], "s");
    assert_eq!(first["restricted"], false);
    assert_eq!(first["event"]["kind"], "session_start");
    assert_eq!(first["event"]["session_id"], "s");
    assert!(first["event"]["properties"].is_object());
    assert!(first["event"]["metrics"].is_object());
    assert!(other
        .inbox
        .iter()
        .all(|m| m["method"] != "gitHubTelemetry.event"));
}

/// `session.agent.list` reports each custom agent's authored model preference and tools when
/// it declares them (and nothing when it does not).
#[test]
fn custom_agents_are_listed_with_their_model_and_tools() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    create(
        &mut w,
        &mut p,
        "s",
        json!({"customAgents": [
            {"name": "planner", "prompt": "Plan.", "model": "alpha/sonnet", "tools": ["view"]},
            {"name": "plain", "prompt": "Help."}]}),
    );
    let list = w.call(
        &mut p,
        &mut [],
        "session.agent.list",
        json!({"sessionId": "s"}),
    );
    let agents = list["result"]["agents"].as_array().unwrap();
    assert_eq!(agents[0]["model"], "alpha/sonnet", "{list}");
    assert_eq!(agents[0]["tools"], json!(["view"]));
    assert!(agents[1].get("model").is_none() && agents[1].get("tools").is_none());
}
