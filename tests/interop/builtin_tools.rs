//! The model's built-in tools (`view`, `create`, `edit`, `bash`, `grep`, `glob`) driven by
//! the **official Copilot Rust SDK** (unmodified) against `agentwire_tokio::Server`: the
//! fake model endpoint (`testkit/src/fake_model.rs`) plays a scripted conversation of
//! tool calls, every call goes through the client's permission handler, and the files in a
//! temporary working directory really change. Also: `excludedTools` / `availableTools`
//! remove tools from the request, a denied edit leaves the file alone, and the calls of one
//! response run together with their results sent back in call order.

use crate::support::fake_model;
use crate::support::sdk_scenarios;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::support::connect;
use agentwire_tokio::agentwire::host::HostConfig;
use agentwire_tokio::Server;
use fake_model::{FakeModel, FakeReply};
use github_copilot_sdk::types::{MessageOptions, ProviderConfig, SessionConfig};
use github_copilot_sdk::Client;
use sdk_scenarios::{
    assert_subsequence, new_session_id, types, weather_tool, within, Recorder, RecordingPermission,
};
use serde_json::{json, Value};

/// A fresh directory under the system temp dir (removed on drop).
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!(
            "agentwire-builtin-{tag}-{}-{}",
            std::process::id(),
            new_session_id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir.canonicalize().unwrap())
    }

    fn path(&self) -> &Path {
        &self.0
    }

    fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.0.join(rel)).unwrap_or_default()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

struct Setup {
    session: github_copilot_sdk::session::Session,
    events: Recorder,
    permissions: Arc<Mutex<Vec<(String, Value)>>>,
}

async fn session(
    client: &Client,
    fake: &FakeModel,
    dir: &Path,
    reject: Option<&str>,
    adjust: impl FnOnce(SessionConfig) -> SessionConfig,
) -> Setup {
    session_in(client, fake, Some(dir), reject, adjust).await
}

/// A BYOK session in `dir`, or (`None`) with no `workingDirectory` at all.
async fn session_in(
    client: &Client,
    fake: &FakeModel,
    dir: Option<&Path>,
    reject: Option<&str>,
    adjust: impl FnOnce(SessionConfig) -> SessionConfig,
) -> Setup {
    let permissions = Arc::new(Mutex::new(Vec::new()));
    let mut config = SessionConfig::default()
        .with_session_id(new_session_id())
        .with_model("fake-model");
    if let Some(dir) = dir {
        config = config.with_working_directory(dir);
    }
    let config = config
        .with_provider(
            ProviderConfig::new(fake.base_url())
                .with_provider_type("openai")
                .with_api_key("sk-fake"),
        )
        .with_tools([weather_tool(Arc::new(Mutex::new(Vec::new())))])
        .with_permission_handler(Arc::new(RecordingPermission {
            requests: permissions.clone(),
            reject: reject.map(str::to_owned),
        }));
    let prepared = client
        .prepare_session(adjust(config))
        .expect("prepare_session");
    let events = Recorder::new(prepared.subscribe());
    let session = within("session.create", prepared.start())
        .await
        .expect("session.create succeeds");
    Setup {
        session,
        events,
        permissions,
    }
}

async fn send(s: &mut Setup, prompt: &str) -> Vec<github_copilot_sdk::types::SessionEvent> {
    within("session.send", s.session.send(MessageOptions::new(prompt)))
        .await
        .expect("session.send");
    s.events.turn().await
}

fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .map(|t| {
                    t["function"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned()
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The `tool` messages at the end of a request, as (tool_call_id, content).
fn tool_results(body: &Value) -> Vec<(String, String)> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .take_while(|m| m["role"] == "tool")
        .map(|m| {
            (
                m["tool_call_id"].as_str().unwrap_or_default().to_owned(),
                m["content"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect()
}

fn permission_kinds(s: &Setup) -> Vec<String> {
    s.permissions
        .lock()
        .unwrap()
        .iter()
        .map(|(_, p)| {
            let p = p.get("permissionRequest").unwrap_or(p);
            p["kind"].as_str().unwrap_or_default().to_owned()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_views_edits_creates_and_runs_bash_in_the_working_directory() {
    sdk_scenarios::bounded(async {
        let dir = TempDir::new("edit");
        std::fs::write(dir.path().join("notes.txt"), "hello world\nsecond line\n").unwrap();
        let fake = FakeModel::start_script(vec![
            FakeReply::tool("call_view", "view", json!({"path": "notes.txt"})),
            FakeReply::tool(
                "call_edit",
                "edit",
                json!({"path": "notes.txt", "old_str": "world", "new_str": "agentwire"}),
            ),
            FakeReply::tool(
                "call_bash",
                "bash",
                json!({"command": "cat notes.txt && echo ran > out.txt", "description": "show"}),
            ),
            FakeReply::tool(
                "call_create",
                "create",
                json!({"path": "sub/new.txt", "file_text": "fresh\n"}),
            ),
            FakeReply::Text("Done.".into()),
        ]);
        let server = Server::new(HostConfig::default());
        let client = connect(&server).await;
        let mut s = session(&client, &fake, dir.path(), None, |c| c).await;
        let turn = send(&mut s, "Fix my notes").await;
        assert_subsequence(
            &turn,
            &[
                "tool.execution_start",
                "permission.requested",
                "tool.execution_complete",
                "assistant.turn_end",
                "tool.execution_start",
                "permission.requested",
                "tool.execution_complete",
                "session.idle",
            ],
        );
        // The files really changed.
        assert_eq!(dir.read("notes.txt"), "hello agentwire\nsecond line\n");
        assert_eq!(dir.read("out.txt"), "ran\n");
        assert_eq!(dir.read("sub/new.txt"), "fresh\n");
        // Each call was behind the runtime's prompt kind.
        assert_eq!(permission_kinds(&s), ["read", "write", "shell", "write"]);
        let bodies = fake.completion_bodies();
        assert_eq!(bodies.len(), 5, "{}", types(&turn).join(","));
        let names = tool_names(&bodies[0]);
        for name in [
            "bash",
            "view",
            "create",
            "edit",
            "grep",
            "glob",
            "get_weather",
        ] {
            assert!(
                names.iter().any(|n| n == name),
                "{name} missing from {names:?}"
            );
        }
        let view = tool_results(&bodies[1]);
        assert_eq!(view[0].0, "call_view");
        assert!(view[0].1.contains("1. hello world"), "{}", view[0].1);
        let edit = tool_results(&bodies[2]);
        assert!(edit[0].1.contains("updated"), "{}", edit[0].1);
        let bash = tool_results(&bodies[3]);
        assert!(bash[0].1.contains("hello agentwire"), "{}", bash[0].1);
        assert!(
            bash[0].1.contains("<exited with exit code 0>"),
            "{}",
            bash[0].1
        );
        let create = tool_results(&bodies[4]);
        assert!(create[0].1.contains("Created file"), "{}", create[0].1);
        let complete: Vec<_> = turn
            .iter()
            .filter(|e| e.event_type == "tool.execution_complete")
            .collect();
        assert_eq!(complete.len(), 4);
        assert!(complete.iter().all(|e| e.data["success"] == true));
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn excluded_and_unavailable_tools_are_not_offered() {
    sdk_scenarios::bounded(async {
        let dir = TempDir::new("filter");
        let fake = FakeModel::start_script(vec![FakeReply::Text("ok".into())]);
        let server = Server::new(HostConfig::default());
        let client = connect(&server).await;
        let mut s = session(&client, &fake, dir.path(), None, |c| {
            c.with_excluded_tools(["bash", "builtin:edit"])
        })
        .await;
        send(&mut s, "hi").await;
        let names = tool_names(&fake.completion_bodies()[0]);
        assert!(
            !names.iter().any(|n| n == "bash" || n == "edit"),
            "{names:?}"
        );
        assert!(names.iter().any(|n| n == "view"), "{names:?}");

        let fake = FakeModel::start_script(vec![FakeReply::Text("ok".into())]);
        let mut s = session(&client, &fake, dir.path(), None, |c| {
            c.with_available_tools(["view", "get_weather"])
        })
        .await;
        send(&mut s, "hi").await;
        let mut names = tool_names(&fake.completion_bodies()[0]);
        names.sort();
        assert_eq!(names, ["get_weather", "view"]);

        // The operator's switch removes every built-in.
        let server = Server::new(HostConfig::default().with_builtin_tools(false));
        let client = connect(&server).await;
        let fake = FakeModel::start_script(vec![FakeReply::Text("ok".into())]);
        let mut s = session(&client, &fake, dir.path(), None, |c| c).await;
        send(&mut s, "hi").await;
        assert_eq!(tool_names(&fake.completion_bodies()[0]), ["get_weather"]);
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_edit_leaves_the_file_alone_and_the_model_is_told() {
    sdk_scenarios::bounded(async {
        let dir = TempDir::new("deny");
        std::fs::write(dir.path().join("keep.txt"), "original\n").unwrap();
        let fake = FakeModel::start_script(vec![
            FakeReply::tool(
                "call_1",
                "edit",
                json!({"path": "keep.txt", "old_str": "original", "new_str": "changed"}),
            ),
            FakeReply::Text("Understood.".into()),
        ]);
        let server = Server::new(HostConfig::default());
        let client = connect(&server).await;
        let mut s = session(&client, &fake, dir.path(), Some("not now"), |c| c).await;
        let turn = send(&mut s, "edit it").await;
        assert_eq!(dir.read("keep.txt"), "original\n");
        let complete = turn
            .iter()
            .find(|e| e.event_type == "tool.execution_complete")
            .expect("the call completes");
        assert_eq!(complete.data["success"], false);
        let result = &tool_results(&fake.completion_bodies()[1])[0];
        assert!(result.1.contains("not now"), "{}", result.1);
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_path_outside_the_working_directory_gets_a_path_prompt() {
    sdk_scenarios::bounded(async {
        let dir = TempDir::new("inside");
        let outside = TempDir::new("outside");
        std::fs::write(outside.path().join("secret.txt"), "s3cret\n").unwrap();
        let target = format!(
            "{}/../{}/secret.txt",
            dir.path().display(),
            outside.path().file_name().unwrap().to_string_lossy()
        );
        let fake = FakeModel::start_script(vec![
            FakeReply::tool("call_1", "view", json!({"path": target})),
            FakeReply::Text("ok".into()),
        ]);
        let server = Server::new(HostConfig::default());
        let client = connect(&server).await;
        let mut s = session(&client, &fake, dir.path(), Some("no"), |c| c).await;
        send(&mut s, "read it").await;
        assert_eq!(permission_kinds(&s), ["path"]);
        let result = &tool_results(&fake.completion_bodies()[1])[0];
        assert!(!result.1.contains("s3cret"), "{}", result.1);
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_of_one_response_run_together_and_answer_in_call_order() {
    sdk_scenarios::bounded(async {
        let dir = TempDir::new("parallel");
        std::fs::create_dir_all(dir.path().join("src")).unwrap();
        std::fs::write(dir.path().join("src/a.rs"), "fn main() {}\n// TODO: fix\n").unwrap();
        std::fs::write(dir.path().join("src/b.txt"), "TODO later\n").unwrap();
        let fake = FakeModel::start_script(vec![
            FakeReply::Tools(vec![
                (
                    "call_grep".into(),
                    "grep".into(),
                    json!({"pattern": "TODO", "output_mode": "content", "-n": true, "glob": "*.rs"})
                        .to_string(),
                ),
                ("call_glob".into(), "glob".into(), json!({"pattern": "**/*.txt"}).to_string()),
                ("call_weather".into(), "get_weather".into(), json!({"city": "Paris"}).to_string()),
            ]),
            FakeReply::Text("Found them.".into()),
        ]);
        let server = Server::new(HostConfig::default());
        let client = connect(&server).await;
        let mut s = session(&client, &fake, dir.path(), None, |c| c).await;
        let turn = send(&mut s, "find todos").await;
        // All three started before any completed.
        let starts: Vec<usize> = turn
            .iter()
            .enumerate()
            .filter(|(_, e)| e.event_type == "tool.execution_start")
            .map(|(i, _)| i)
            .collect();
        let first_complete = turn
            .iter()
            .position(|e| e.event_type == "tool.execution_complete")
            .unwrap();
        assert_eq!(starts.len(), 3);
        assert!(starts[2] < first_complete, "{}", types(&turn).join(","));
        let results = tool_results(&fake.completion_bodies()[1]);
        let ids: Vec<&str> = results.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, ["call_grep", "call_glob", "call_weather"]);
        // As the runtime answers: grep names matches by their full path, glob relative to
        // the searched directory as `./PATH` (the SDK suite's recordings).
        assert_eq!(
            results[0].1,
            format!("{}/src/a.rs:2:// TODO: fix\n", dir.path().display())
        );
        assert_eq!(results[1].1, "./src/b.txt\n");
        assert_eq!(results[2].1, sdk_scenarios::TOOL_REPLY);
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_working_directory_the_session_works_in_the_servers_directory() {
    sdk_scenarios::bounded(async {
        let dir = TempDir::new("server-cwd");
        std::fs::write(
            dir.path().join("notes.txt"),
            "from the server's directory\n",
        )
        .unwrap();
        let fake = FakeModel::start_script(vec![
            FakeReply::tool("call_view", "view", json!({"path": "notes.txt"})),
            FakeReply::tool("call_bash", "bash", json!({"command": "pwd"})),
            FakeReply::tool(
                "call_create",
                "create",
                json!({"path": "made.txt", "file_text": "new\n"}),
            ),
            FakeReply::Text("Done.".into()),
        ]);
        let cwd = dir.path().to_string_lossy().into_owned();
        let server = Server::new(HostConfig::default().with_server_cwd(Some(cwd.clone())));
        let client = connect(&server).await;
        let mut s = session_in(&client, &fake, None, None, |c| c).await;
        s.events.wait_for("session.start").await;
        let start = s
            .events
            .seen
            .iter()
            .find(|e| e.event_type == "session.start")
            .unwrap();
        assert_eq!(start.data["context"]["cwd"], cwd.as_str());
        let turn = send(&mut s, "look around").await;
        // Relative paths were inside the session's directory: no `path` prompt.
        assert_eq!(permission_kinds(&s), ["read", "shell", "write"]);
        let bodies = fake.completion_bodies();
        assert_eq!(bodies.len(), 4, "{}", types(&turn).join(","));
        let view = &tool_results(&bodies[1])[0].1;
        assert!(view.contains("from the server's directory"), "{view}");
        let pwd = &tool_results(&bodies[2])[0].1;
        assert!(pwd.starts_with(&format!("{cwd}\n")), "{pwd}");
        assert_eq!(dir.read("made.txt"), "new\n");
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_driver_uses_the_process_directory_when_none_is_configured() {
    sdk_scenarios::bounded(async {
        let fake = FakeModel::start_script(vec![FakeReply::Text("ok".into())]);
        let server = Server::new(HostConfig::default());
        let client = connect(&server).await;
        let mut s = session_in(&client, &fake, None, None, |c| c).await;
        let start = s.events.wait_for("session.start").await;
        let here = std::env::current_dir().unwrap();
        assert_eq!(start.data["context"]["cwd"], here.to_str().unwrap());
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bash_command_past_its_timeout_is_reported_as_timed_out() {
    sdk_scenarios::bounded(async {
        let dir = TempDir::new("timeout");
        let fake = FakeModel::start_script(vec![
            FakeReply::tool(
                "call_bash",
                "bash",
                json!({"command": "echo started; sleep 30", "initial_wait": 1}),
            ),
            FakeReply::Text("Gave up.".into()),
        ]);
        let server = Server::new(HostConfig::default());
        let client = connect(&server).await;
        let mut s = session(&client, &fake, dir.path(), None, |c| c).await;
        let turn = send(&mut s, "run the slow thing").await;
        let bodies = fake.completion_bodies();
        assert_eq!(bodies.len(), 2, "{}", types(&turn).join(","));
        let result = &tool_results(&bodies[1])[0].1;
        assert_eq!(
            result, "started\n<command timed out after 1 second and was stopped>",
            "{result}"
        );
    })
    .await
}

/// The `sql` tool on the runtime's own session database (the server keeps session state in
/// a workspace root): the starting `todos` / `todo_deps` tables exist, several statements run
/// in one call (one transaction: a failing one undoes the others) and are told in turn, a
/// `SELECT` comes back as a table, a bad statement is an error for the model, and the todos
/// it wrote are read back with
/// `session.plan.readSqlTodosWithDependencies` after `session.todos_changed`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sql_tool_keeps_a_session_database_and_its_todos() {
    sdk_scenarios::bounded(async {
        let dir = TempDir::new("sql");
        let fake = FakeModel::start_script(vec![
            FakeReply::tool(
                "call_write",
                "sql",
                json!({"description": "Track work", "query":
                    "CREATE TABLE items (id TEXT PRIMARY KEY, name TEXT); \
                     INSERT INTO items VALUES ('a1', 'Widget; the first'); \
                     INSERT INTO todos (id, title) VALUES ('t1', 'Testing'), ('t2', 'Shipping'); \
                     INSERT INTO todo_deps (todo_id, depends_on) VALUES ('t2', 't1')"}),
            ),
            FakeReply::tool(
                "call_read",
                "sql",
                json!({"description": "Read items", "query": "SELECT id, name FROM items"}),
            ),
            FakeReply::tool(
                "call_bad",
                "sql",
                json!({"description": "Bad", "query": "SELECT * FROM missing_table"}),
            ),
            FakeReply::tool(
                "call_half",
                "sql",
                json!({"description": "Half", "query":
                    "INSERT INTO todos (id, title) VALUES ('t3', 'Never'); \
                     INSERT INTO nowhere VALUES (1)"}),
            ),
            FakeReply::Text("Done.".into()),
        ]);
        let root = dir.path().join("state").to_string_lossy().into_owned();
        let server = Server::new(HostConfig::default().with_workspace_root(Some(root.clone())));
        let client = connect(&server).await;
        let mut s = session(&client, &fake, dir.path(), None, |c| c).await;
        let turn = send(&mut s, "Track my work").await;
        assert!(
            types(&turn).contains(&"session.todos_changed"),
            "{}",
            types(&turn).join(",")
        );
        assert!(
            permission_kinds(&s).is_empty(),
            "the sql tool asks no permission"
        );
        let bodies = fake.completion_bodies();
        assert_eq!(bodies.len(), 5, "{}", types(&turn).join(","));
        assert!(tool_names(&bodies[0]).iter().any(|n| n == "sql"));
        let write = tool_results(&bodies[1]);
        assert_eq!(
            write[0].1,
            "Executed 4 statement(s):\n\n1. CREATE\n   Schema operation completed successfully.\
             \n\n2. INSERT\n   1 row(s) inserted. Last inserted row ID: 1.\
             \n\n3. INSERT\n   2 row(s) inserted. Last inserted row ID: 2.\
             \n\n4. INSERT\n   1 row(s) inserted. Last inserted row ID: 1."
        );
        let read = tool_results(&bodies[2]);
        assert_eq!(
            read[0].1,
            "1 row(s) returned:\n\n| id | name |\n| --- | --- |\n| a1 | Widget; the first |"
        );
        let bad = tool_results(&bodies[3]);
        assert!(
            bad[0].1.contains("no such table: missing_table"),
            "{}",
            bad[0].1
        );
        // The first statement's row is undone with the failing second one.
        let half = tool_results(&bodies[4]);
        assert!(
            half[0].1.contains("no such table: nowhere"),
            "{}",
            half[0].1
        );
        let todos = s
            .session
            .rpc()
            .plan()
            .read_sql_todos_with_dependencies()
            .await
            .expect("readSqlTodosWithDependencies");
        let todos = serde_json::to_value(&todos).unwrap();
        let ids: Vec<&str> = todos["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["t1", "t2"]);
        assert_eq!(todos["rows"][0]["status"], "pending");
        assert_eq!(
            todos["dependencies"],
            json!([{"todoId": "t2", "dependsOn": "t1"}])
        );
        assert!(dir.path().join("state/session-state").exists());
    })
    .await
}

/// The `task` tool: the model hands work to a sub-agent, whose model calls see only its own
/// conversation (the task's prompt, its tool calls and results) under a prompt of its own,
/// whose events and tool calls carry its `agentId`, and whose final answer is the call's
/// result; the parent's conversation shows the call and that result only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_task_tool_runs_a_sub_agent_and_returns_its_answer() {
    sdk_scenarios::bounded(async {
        let dir = TempDir::new("task");
        std::fs::write(dir.path().join("data.txt"), "forty-two\n").unwrap();
        let fake = FakeModel::start_script(vec![
            FakeReply::tool(
                "call_task",
                "task",
                json!({"agent_type": "explore", "description": "Read the data",
                       "prompt": "Read data.txt and tell me what it says.", "mode": "sync"}),
            ),
            FakeReply::tool("call_view", "view", json!({"path": "data.txt"})),
            FakeReply::Text("The file says forty-two.".into()),
            FakeReply::Text("Done: the sub-agent read it.".into()),
        ]);
        let server = Server::new(HostConfig::default());
        let client = connect(&server).await;
        let mut s = session(&client, &fake, dir.path(), None, |c| c).await;
        let turn = send(&mut s, "What is in data.txt? Use a sub-agent.").await;
        assert_subsequence(
            &turn,
            &[
                "tool.execution_start",
                "subagent.started",
                "user.message",
                "tool.execution_start",
                "tool.execution_complete",
                "subagent.completed",
                "tool.execution_complete",
                "session.idle",
            ],
        );
        let started = turn
            .iter()
            .find(|e| e.event_type == "subagent.started")
            .unwrap();
        assert_eq!(started.data["toolCallId"], "call_task");
        assert_eq!(started.data["agentName"], "explore");
        // The sub-agent's events carry its agentId; the task call's do not.
        let view_start = turn
            .iter()
            .find(|e| e.event_type == "tool.execution_start" && e.data["toolName"] == "view")
            .unwrap();
        let agent = view_start
            .agent_id
            .clone()
            .expect("the sub-agent's call has an agentId");
        let task_done = turn
            .iter()
            .find(|e| {
                e.event_type == "tool.execution_complete" && e.data["toolCallId"] == "call_task"
            })
            .unwrap();
        assert_eq!(task_done.agent_id, None);
        assert_eq!(
            task_done.data["result"]["content"],
            "The file says forty-two."
        );
        assert!(turn
            .iter()
            .filter(|e| e.event_type == "assistant.message"
                && e.data["content"] == "The file says forty-two.")
            .all(|e| e.agent_id.as_deref() == Some(agent.as_str())));

        let bodies = fake.completion_bodies();
        assert_eq!(bodies.len(), 4, "{}", types(&turn).join(","));
        let task_spec = bodies[0]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["function"]["name"] == "task")
            .expect("the task tool is offered");
        assert!(
            task_spec["function"]["parameters"]["properties"]["agent_type"]["enum"]
                .as_array()
                .unwrap()
                .contains(&json!("explore"))
        );
        // The sub-agent's first call: its own prompt, after a system prompt of its own.
        let child = bodies[1]["messages"].as_array().unwrap();
        assert_eq!(child[0]["role"], "system");
        assert!(child[0]["content"].as_str().unwrap().contains("sub-agent"));
        let roles: Vec<&str> = child.iter().map(|m| m["role"].as_str().unwrap()).collect();
        assert_eq!(roles, ["system", "user"], "{child:?}");
        assert!(child[1]["content"]
            .as_str()
            .unwrap()
            .contains("Read data.txt and tell me what it says."));
        assert!(!tool_names(&bodies[1]).iter().any(|n| n == "task"));
        let view = tool_results(&bodies[2]);
        assert!(view[0].1.contains("forty-two"), "{}", view[0].1);
        // The parent's next call: its prompt, the task call and the sub-agent's answer.
        let parent = bodies[3]["messages"].as_array().unwrap();
        let roles: Vec<&str> = parent.iter().map(|m| m["role"].as_str().unwrap()).collect();
        assert_eq!(roles, ["system", "user", "assistant", "tool"], "{parent:?}");
        assert_eq!(parent[3]["content"], "The file says forty-two.");
    })
    .await
}

/// `excludedBuiltinAgents` takes agent types out of the `task` tool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn excluded_built_in_agents_are_not_offered_to_the_task_tool() {
    sdk_scenarios::bounded(async {
        let dir = TempDir::new("agents");
        let fake = FakeModel::start_script(vec![FakeReply::Text("ok".into())]);
        let server = Server::new(HostConfig::default());
        let client = connect(&server).await;
        let mut s = session(&client, &fake, dir.path(), None, |c| {
            c.with_excluded_builtin_agents(["explore"])
        })
        .await;
        send(&mut s, "hi").await;
        let bodies = fake.completion_bodies();
        let task = bodies[0]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["function"]["name"] == "task")
            .expect("the task tool is offered")
            .clone();
        let agents = &task["function"]["parameters"]["properties"]["agent_type"]["enum"];
        assert_eq!(agents, &json!(["task", "general-purpose"]));
    })
    .await
}

/// The marker of a sub-agent's system prompt (its model calls get their own fake script).
const SUB_AGENT: &str = "sub-agent of GitHub Copilot";

/// `task` in `background` mode: the call answers at once with the agent's id, the parent's
/// turn goes on beside the sub-agent, and when the sub-agent is done a notification wakes
/// the parent (a new turn whose prompt is the runtime's `<system_notification>`), which
/// reads the result with `read_agent`; `session.idle` waits for all of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_agent_runs_beside_its_parent_and_wakes_it_when_done() {
    sdk_scenarios::bounded(async {
        let dir = TempDir::new("background");
        std::fs::write(dir.path().join("data.txt"), "forty-two\n").unwrap();
        let fake = FakeModel::start_script(vec![
            FakeReply::tool(
                "call_task",
                "task",
                json!({"agent_type": "explore", "name": "reader", "description": "Read the data",
                       "prompt": "Read data.txt and tell me what it says.",
                       "mode": "background"}),
            ),
            FakeReply::Text("A reader is on it; waiting for it.".into()),
            FakeReply::tool(
                "call_read",
                "read_agent",
                json!({"agent_id": "reader", "wait": true}),
            ),
            FakeReply::Text("The reader says forty-two.".into()),
        ]);
        fake.script_for(
            SUB_AGENT,
            vec![
                FakeReply::tool("call_view", "view", json!({"path": "data.txt"})),
                FakeReply::Text("The file says forty-two.".into()),
            ],
        );
        let server = Server::new(HostConfig::default());
        let client = connect(&server).await;
        let mut s = session(&client, &fake, dir.path(), None, |c| c).await;
        let turn = send(&mut s, "What is in data.txt? Use a background agent.").await;
        assert_subsequence(
            &turn,
            &[
                "tool.execution_start",
                "subagent.started",
                "tool.execution_complete",
                "subagent.completed",
                "system.notification",
                "user.message",
                "tool.execution_start",
                "tool.execution_complete",
                "session.idle",
            ],
        );
        // One idle, at the very end: not when the first turn ended with the agent running.
        assert_eq!(
            turn.iter()
                .filter(|e| e.event_type == "session.idle")
                .count(),
            1
        );
        let started = turn
            .iter()
            .find(|e| {
                e.event_type == "tool.execution_complete" && e.data["toolCallId"] == "call_task"
            })
            .unwrap();
        assert_eq!(
            started.data["result"]["content"],
            "Agent started in background with agent_id: reader. You'll be notified when it \
             completes. Tell the user you're waiting and end your response, or continue \
             unrelated work until notified."
        );
        let waiting = turn
            .iter()
            .position(|e| {
                e.event_type == "assistant.message"
                    && e.data["content"] == "A reader is on it; waiting for it."
            })
            .expect("the parent's first turn ends while the agent runs");
        let notice = turn
            .iter()
            .position(|e| e.event_type == "system.notification")
            .unwrap();
        assert!(waiting < notice);
        assert_eq!(turn[notice].data["kind"]["type"], "agent_completed");
        assert_eq!(turn[notice].data["kind"]["agentId"], "reader");
        assert_eq!(turn[notice].data["kind"]["status"], "completed");
        let woken = turn[notice..]
            .iter()
            .find(|e| e.event_type == "user.message")
            .unwrap();
        assert_eq!(woken.data["source"], "system");
        let read = turn
            .iter()
            .find(|e| {
                e.event_type == "tool.execution_complete" && e.data["toolCallId"] == "call_read"
            })
            .unwrap();
        let text = read.data["result"]["content"].as_str().unwrap();
        assert!(
            text.starts_with(
                "Agent completed. agent_id: reader, agent_type: explore, status: completed, \
                 description: Read the data, elapsed: "
            ),
            "{text}"
        );
        assert!(text.ends_with("\n\nThe file says forty-two."), "{text}");

        // What the models saw: the parent's third call is woken by the notice.
        let bodies = fake.completion_bodies();
        let (children, parents): (Vec<&Value>, Vec<&Value>) = bodies.iter().partition(|b| {
            b["messages"][0]["content"]
                .as_str()
                .is_some_and(|c| c.contains(SUB_AGENT))
        });
        assert_eq!((parents.len(), children.len()), (4, 2));
        let names = tool_names(parents[0]);
        for tool in ["task", "read_agent", "list_agents"] {
            assert!(names.iter().any(|n| n == tool), "{tool} offered: {names:?}");
        }
        assert!(!tool_names(children[0])
            .iter()
            .any(|n| ["task", "read_agent", "list_agents"].contains(&n.as_str())));
        let woken = parents[2]["messages"].as_array().unwrap().last().unwrap();
        assert_eq!(woken["role"], "user");
        assert_eq!(
            woken["content"],
            "<system_notification>\nAgent \"reader\" (explore) has completed successfully. \
             Use read_agent with agent_id \"reader\" to retrieve the full results.\n\
             </system_notification>"
        );

        // The session's task list keeps the agent, with its result, until removed.
        let tasks = s.session.rpc().tasks().list().await.expect("tasks.list");
        assert_eq!(tasks.tasks.len(), 1);
        assert_eq!(tasks.tasks[0]["id"], "reader");
        assert_eq!(tasks.tasks[0]["status"], "completed");
        assert_eq!(tasks.tasks[0]["result"], "The file says forty-two.");
    })
    .await
}

/// `session.tasks.*` with the official SDK: a client starts a background agent while the
/// session is idle (its end wakes the session's agent, and `waitForPending` answers once
/// that turn is over too), lists it, cancels a running one (no notification), removes what
/// is over; an unknown agent type or a model override is refused and starts nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_start_list_cancel_and_await_background_agents() {
    use github_copilot_sdk::rpc::{TasksCancelRequest, TasksRemoveRequest, TasksStartAgentRequest};
    sdk_scenarios::bounded(async {
        let dir = TempDir::new("tasks");
        let fake =
            FakeModel::start_script(vec![FakeReply::Text("Noted: the summary is ready.".into())]);
        fake.script_for(
            SUB_AGENT,
            vec![FakeReply::Text("Summary: all good.".into())],
        );
        let server = Server::new(HostConfig::default());
        let client = connect(&server).await;
        let mut s = session(&client, &fake, dir.path(), None, |c| c).await;
        let tasks = s.session.rpc().tasks();
        let start = |name: &str, agent_type: &str, model: Option<&str>| TasksStartAgentRequest {
            agent_type: agent_type.to_owned(),
            prompt: "Summarise the project.".to_owned(),
            name: name.to_owned(),
            description: Some("Summarise".to_owned()),
            model: model.map(str::to_owned),
        };
        for refused in [
            start("x", "missing-agent-type", None),
            start("x", "general-purpose", Some("not-a-real-model")),
        ] {
            let error = tasks.start_agent(refused).await.expect_err("refused");
            assert!(
                error.to_string().contains("session.tasks.startAgent"),
                "{error}"
            );
        }
        assert!(tasks.list().await.unwrap().tasks.is_empty());

        let started = tasks
            .start_agent(start("summary", "general-purpose", None))
            .await
            .expect("startAgent");
        assert_eq!(started.agent_id, "summary");
        within("waitForPending", tasks.wait_for_pending())
            .await
            .expect("waitForPending");
        // By the time waitForPending answered, the notification's turn was over.
        let turn = s.events.turn().await;
        assert_subsequence(
            &turn,
            &[
                "subagent.started",
                "subagent.completed",
                "system.notification",
                "user.message",
                "assistant.message",
                "session.idle",
            ],
        );
        let listed = tasks.list().await.unwrap().tasks;
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0]["status"], "completed");
        assert_eq!(listed[0]["toolCallId"], "");

        // A running agent (its model call stalls) is cancelled: no notification.
        fake.set_mode(fake_model::FakeMode::Stall);
        let slow = tasks
            .start_agent(start("slow", "explore", None))
            .await
            .expect("startAgent");
        let listed = tasks.list().await.unwrap().tasks;
        assert_eq!(listed[1]["id"], slow.agent_id);
        assert_eq!(listed[1]["status"], "running");
        let remove = |id: &str| TasksRemoveRequest { id: id.to_owned() };
        assert!(!tasks.remove(remove("slow")).await.unwrap().removed);
        let cancel = |id: &str| TasksCancelRequest { id: id.to_owned() };
        assert!(tasks.cancel(cancel("slow")).await.unwrap().cancelled);
        assert!(!tasks.cancel(cancel("slow")).await.unwrap().cancelled);
        within("waitForPending", tasks.wait_for_pending())
            .await
            .expect("nothing runs");
        let listed = tasks.list().await.unwrap().tasks;
        assert_eq!(listed[1]["status"], "cancelled");
        assert!(tasks.remove(remove("slow")).await.unwrap().removed);
        assert!(tasks.remove(remove("summary")).await.unwrap().removed);
        assert!(tasks.list().await.unwrap().tasks.is_empty());
        assert_eq!(
            s.session
                .rpc()
                .cancel_all_background_agents()
                .await
                .unwrap(),
            0
        );
        // The cancelled agent woke nobody: its end owed the session one idle, no turn.
        let rest = s.events.turn().await;
        assert!(
            types(&rest).iter().all(|t| *t != "system.notification"),
            "{rest:?}"
        );
        assert!(types(&rest).contains(&"subagent.failed"));
    })
    .await
}
