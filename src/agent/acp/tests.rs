//! The ACP client role and the translation of a turn, driven with the agent's side of the
//! wire written out (the process itself is the driver's; interop runs real agents).

use std::time::Duration;

use serde_json::{json, Value};

use super::*;
use crate::agent::{
    AcpCall, AcpInput, Agent, AgentInput, BuiltinCall, ClientRequest, PromptContext,
    SessionControl, SessionSetting,
};
use crate::Timestamp;

const T0: Timestamp = Timestamp::from_millis(1_000_000);

/// Everything the client wrote to the agent, parsed.
fn written(client: &mut AcpAgentClient) -> Vec<Value> {
    let mut out = Vec::new();
    while let Some(frame) = client.poll_transmit() {
        for line in frame.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            out.push(serde_json::from_slice(line).expect("the client writes JSON lines"));
        }
    }
    out
}

fn events(client: &mut AcpAgentClient) -> Vec<AcpAgentEvent> {
    std::iter::from_fn(|| client.poll_event()).collect()
}

fn agent_says(client: &mut AcpAgentClient, message: Value) {
    let mut line = serde_json::to_vec(&message).unwrap();
    line.push(b'\n');
    client.handle_stdout(T0, &line);
}

/// A client past `initialize`, with the agent's capabilities as given.
fn ready_client(agent_capabilities: Value) -> AcpAgentClient {
    let mut client = AcpAgentClient::new(AcpClientConfig::default());
    client.start(T0);
    let init = written(&mut client);
    assert_eq!(init.len(), 1);
    agent_says(
        &mut client,
        json!({"jsonrpc": "2.0", "id": init[0]["id"], "result": {
            "protocolVersion": 1, "agentCapabilities": agent_capabilities,
            "agentInfo": {"name": "agent", "version": "1.0.0"}}}),
    );
    assert_eq!(events(&mut client), [AcpAgentEvent::Ready]);
    client
}

#[test]
fn initialize_offers_what_agentwire_serves_and_reads_the_agents_capabilities() {
    let mut client = AcpAgentClient::new(AcpClientConfig::default());
    assert!(
        written(&mut client).is_empty(),
        "nothing is sent before start"
    );
    client.start(T0);
    let init = written(&mut client);
    assert_eq!(init[0]["method"], "initialize");
    assert_eq!(init[0]["params"]["protocolVersion"], 1);
    assert_eq!(
        init[0]["params"]["clientCapabilities"],
        json!({"fs": {"readTextFile": true, "writeTextFile": true}, "terminal": true,
               "elicitation": {"form": {}}})
    );
    assert_eq!(init[0]["params"]["clientInfo"]["name"], "agentwire");
    agent_says(
        &mut client,
        json!({"jsonrpc": "2.0", "id": init[0]["id"], "result": {
            "protocolVersion": 1,
            "agentCapabilities": {"loadSession": true,
                                  "promptCapabilities": {"image": true},
                                  "mcpCapabilities": {"http": true},
                                  "sessionCapabilities": {"resume": {}, "close": null}},
            "agentInfo": {"name": "copilot", "version": "1.0.102"}}}),
    );
    assert_eq!(events(&mut client), [AcpAgentEvent::Ready]);
    let caps = client.capabilities();
    assert!(caps.load_session && caps.resume_session && caps.prompt_image && caps.mcp_http);
    assert!(!caps.close_session && !caps.prompt_audio && !caps.mcp_sse);
    assert_eq!(caps.agent_info["name"], "copilot");
}

#[test]
fn an_agent_that_speaks_another_version_or_never_answers_ends_the_client() {
    let mut client = AcpAgentClient::new(AcpClientConfig::default());
    client.start(T0);
    let init = written(&mut client);
    agent_says(
        &mut client,
        json!({"jsonrpc": "2.0", "id": init[0]["id"], "result": {"protocolVersion": 2}}),
    );
    assert_eq!(
        events(&mut client),
        [AcpAgentEvent::Failed(
            "the agent speaks ACP version 2; agentwire speaks version 1".into()
        )]
    );

    let config = AcpClientConfig {
        initialize_timeout: Duration::from_secs(5),
        ..AcpClientConfig::default()
    };
    let mut client = AcpAgentClient::new(config);
    client.start(T0);
    let deadline = client.poll_timeout().expect("initialize has a deadline");
    assert_eq!(deadline, T0.saturating_add(Duration::from_secs(5)));
    client.handle_timeout(deadline);
    assert_eq!(
        events(&mut client),
        [AcpAgentEvent::Failed(
            "the agent did not answer initialize within 5000 ms".into()
        )]
    );
    // A session request after the failure is refused with the reason at once.
    client.new_session(deadline, 7, "/w", &[]);
    assert_eq!(
        events(&mut client),
        [AcpAgentEvent::Done {
            token: 7,
            outcome: Err("the agent did not answer initialize within 5000 ms".into())
        }]
    );
}

#[test]
fn junk_from_the_agent_ends_the_client_and_fails_what_was_pending() {
    let mut client = ready_client(json!({}));
    client.prompt(T0, 3, "s1", &[json!({"type": "text", "text": "hi"})]);
    written(&mut client);
    client.handle_stderr(b"panic: something broke\n");
    client.handle_stdout(T0, b"this is not json\n");
    let got = events(&mut client);
    assert_eq!(
        got,
        [
            AcpAgentEvent::Done {
                token: 3,
                outcome: Err("the agent wrote a line that is not a JSON-RPC message".into())
            },
            AcpAgentEvent::Failed("the agent wrote a line that is not a JSON-RPC message".into()),
        ]
    );
    // The exit that follows adds nothing.
    client.handle_exit(T0, Some(2), None);
    assert!(events(&mut client).is_empty());
}

#[test]
fn an_exit_mid_turn_fails_the_prompt_with_the_exit_status_and_stderr() {
    let mut client = ready_client(json!({}));
    client.prompt(T0, 3, "s1", &[json!({"type": "text", "text": "hi"})]);
    client.handle_stderr(b"starting\nout of memory\n\n");
    client.handle_exit(T0, Some(137), None);
    let reason = "the agent exited with code 137 (stderr: out of memory)".to_owned();
    assert_eq!(
        events(&mut client),
        [
            AcpAgentEvent::Done {
                token: 3,
                outcome: Err(reason.clone())
            },
            AcpAgentEvent::Failed(reason)
        ]
    );
}

#[test]
fn sessions_prompts_and_cancel_go_out_as_acp_and_results_come_back_by_token() {
    let mut client = ready_client(json!({"loadSession": false}));
    let server = json!({"name": "fs", "command": "/bin/mcp", "args": [], "env": []});
    client.new_session(T0, 1, "/work", std::slice::from_ref(&server));
    let sent = written(&mut client);
    assert_eq!(sent[0]["method"], "session/new");
    assert_eq!(
        sent[0]["params"],
        json!({"cwd": "/work", "mcpServers": [server]})
    );
    agent_says(
        &mut client,
        json!({"jsonrpc": "2.0", "id": sent[0]["id"], "result": {"sessionId": "a1"}}),
    );
    assert_eq!(
        events(&mut client),
        [AcpAgentEvent::Done {
            token: 1,
            outcome: Ok(json!({"sessionId": "a1"}))
        }]
    );

    // A prompt has no deadline; the cancel is a notification.
    client.prompt(T0, 2, "a1", &[json!({"type": "text", "text": "go"})]);
    assert_eq!(client.poll_timeout(), None);
    client.cancel("a1");
    let sent = written(&mut client);
    assert_eq!(sent[0]["method"], "session/prompt");
    assert_eq!(
        sent[1],
        json!({"jsonrpc": "2.0", "method": "session/cancel",
                               "params": {"sessionId": "a1"}})
    );
    agent_says(
        &mut client,
        json!({"jsonrpc": "2.0", "id": sent[0]["id"], "result": {"stopReason": "cancelled"}}),
    );
    let AcpAgentEvent::Done {
        token: 2,
        outcome: Ok(result),
    } = &events(&mut client)[0]
    else {
        panic!("the prompt's result")
    };
    assert_eq!(StopReason::of_result(result), Ok(StopReason::Cancelled));

    // Without loadSession, a load is refused here, not sent.
    client.load_session(T0, 4, "a1", "/work", &[]);
    assert!(written(&mut client).is_empty());
    assert_eq!(
        events(&mut client),
        [AcpAgentEvent::Done {
            token: 4,
            outcome: Err("the agent cannot load sessions (no loadSession)".into())
        }]
    );

    // A boolean config option says so.
    client.set_config_option(T0, 5, "a1", "yolo", &json!(true));
    let sent = written(&mut client);
    assert_eq!(sent[0]["params"]["type"], "boolean");
    agent_says(
        &mut client,
        json!({"jsonrpc": "2.0", "id": sent[0]["id"], "error": {"code": -32602, "message": "no"}}),
    );
    assert_eq!(
        events(&mut client),
        [AcpAgentEvent::Done {
            token: 5,
            outcome: Err("the agent answered with error -32602: no".into())
        }]
    );
}

#[test]
fn updates_and_requests_are_handed_up_typed_and_bad_ones_answered_here() {
    let mut client = ready_client(json!({}));
    agent_says(
        &mut client,
        json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "a1",
               "update": {"sessionUpdate": "agent_message_chunk",
                          "content": {"type": "text", "text": "hi"}}}}),
    );
    // No sessionId, no sessionUpdate: dropped and counted.
    agent_says(
        &mut client,
        json!({"jsonrpc": "2.0", "method": "session/update",
               "params": {"update": {"sessionUpdate": "plan", "entries": []}}}),
    );
    agent_says(
        &mut client,
        json!({"jsonrpc": "2.0", "method": "session/update",
               "params": {"sessionId": "a1", "update": {"content": "x"}}}),
    );
    assert_eq!(client.malformed_notifications(), 2);
    agent_says(
        &mut client,
        json!({"jsonrpc": "2.0", "id": 10, "method": "session/request_permission", "params": {
            "sessionId": "a1",
            "toolCall": {"toolCallId": "call_1", "title": "Run ls", "kind": "execute"},
            "options": [{"optionId": "allow", "name": "Allow", "kind": "allow_once"},
                        {"optionId": "no", "name": "Reject", "kind": "reject_once"}]}}),
    );
    agent_says(
        &mut client,
        json!({"jsonrpc": "2.0", "id": 11, "method": "fs/read_text_file",
               "params": {"sessionId": "a1", "path": "/work/a.txt", "line": 3}}),
    );
    agent_says(
        &mut client,
        json!({"jsonrpc": "2.0", "id": 12, "method": "terminal/create", "params": {
            "sessionId": "a1", "command": "ls", "args": ["-l"],
            "env": [{"name": "A", "value": "1"}], "outputByteLimit": 100}}),
    );
    let got = events(&mut client);
    assert_eq!(got.len(), 4);
    assert_eq!(
        got[0],
        AcpAgentEvent::Update {
            session_id: "a1".into(),
            update: json!({"sessionUpdate": "agent_message_chunk",
                           "content": {"type": "text", "text": "hi"}})
        }
    );
    let AcpAgentEvent::Request {
        session_id,
        request: AgentRequest::Permission { tool_call, options },
        ..
    } = &got[1]
    else {
        panic!("a permission request: {:?}", got[1])
    };
    assert_eq!(session_id, "a1");
    assert_eq!(tool_call["toolCallId"], "call_1");
    assert_eq!(options[0].kind, PermissionOptionKind::AllowOnce);
    assert!(options[0].kind.allows() && !options[1].kind.allows());
    assert!(
        matches!(&got[2], AcpAgentEvent::Request { request: AgentRequest::ReadTextFile { path, line: Some(3), limit: None }, .. } if path == "/work/a.txt")
    );
    let AcpAgentEvent::Request {
        id,
        request:
            AgentRequest::TerminalCreate {
                command,
                args,
                env,
                cwd,
                output_byte_limit,
            },
        ..
    } = &got[3]
    else {
        panic!("a terminal")
    };
    assert_eq!(
        (command.as_str(), args.as_slice()),
        ("ls", ["-l".to_owned()].as_slice())
    );
    assert_eq!(env, &[("A".to_owned(), "1".to_owned())]);
    assert_eq!((cwd, output_byte_limit), (&None, &Some(100)));
    client.respond(id, &json!({"terminalId": "t1"}));
    assert_eq!(
        written(&mut client),
        [json!({"jsonrpc": "2.0", "id": 12, "result": {"terminalId": "t1"}})]
    );

    // Bad params are answered -32602 here; unknown methods -32601; nothing is handed up.
    for (id, method, params) in [
        (
            20,
            "fs/read_text_file",
            json!({"sessionId": "a1", "path": "relative.txt"}),
        ),
        (
            21,
            "session/request_permission",
            json!({"sessionId": "a1",
            "toolCall": {"toolCallId": "c"}, "options": [{"optionId": "x", "name": "X", "kind": "allow"}]}),
        ),
        (22, "terminal/output", json!({"sessionId": "a1"})),
        (
            23,
            "fs/write_text_file",
            json!({"path": "/w/a", "content": "x"}),
        ),
        (24, "session/frobnicate", json!({})),
    ] {
        agent_says(
            &mut client,
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        );
    }
    assert!(events(&mut client).is_empty());
    let answers = written(&mut client);
    let codes: Vec<i64> = answers
        .iter()
        .map(|a| a["error"]["code"].as_i64().unwrap())
        .collect();
    assert_eq!(codes, [-32602, -32602, -32602, -32602, -32601]);
    assert_eq!(
        answers[0]["error"]["message"],
        "Invalid params for fs/read_text_file: `path` must be absolute"
    );
}

#[test]
fn a_capability_that_was_not_offered_is_not_served() {
    let config = AcpClientConfig {
        capabilities: ClientCapabilities {
            read_text_file: true,
            write_text_file: false,
            terminal: false,
            elicitation_form: false,
        },
        ..AcpClientConfig::default()
    };
    let mut client = AcpAgentClient::new(config);
    client.start(T0);
    let init = written(&mut client);
    assert_eq!(
        init[0]["params"]["clientCapabilities"],
        json!({"fs": {"readTextFile": true, "writeTextFile": false}, "terminal": false})
    );
    agent_says(
        &mut client,
        json!({"jsonrpc": "2.0", "id": init[0]["id"], "result": {"protocolVersion": 1}}),
    );
    events(&mut client);
    agent_says(
        &mut client,
        json!({"jsonrpc": "2.0", "id": 1, "method": "terminal/create",
               "params": {"sessionId": "a", "command": "ls"}}),
    );
    assert!(events(&mut client).is_empty());
    assert_eq!(written(&mut client)[0]["error"]["code"], -32601);
}

// ----- the translation of a turn -----

/// A session that records what the translator (and the agent) emit and ask.
struct Recorder {
    streaming: bool,
    ids: u64,
    events: Vec<(String, Value)>,
    /// Whether the session has an ACP agent (`acp_call` answers with tokens).
    acp: bool,
    calls: Vec<(u64, AcpCall)>,
}

impl SessionControl for Recorder {
    fn now(&self) -> Timestamp {
        T0
    }
    fn new_id(&mut self) -> String {
        self.ids += 1;
        format!("id{}", self.ids)
    }
    fn streaming(&self) -> bool {
        self.streaming
    }
    fn emit(&mut self, event_type: &str, data: Value, _ephemeral: bool) -> String {
        self.events.push((event_type.to_owned(), data));
        String::new()
    }
    fn call_tool(&mut self, _: &str, _: &str, _: &Value, _: &str) {}
    fn call_builtin(&mut self, _: &str, _: &BuiltinCall, _: &str) {}
    fn cancel_tool_calls(&mut self) {}
    fn set_timer(&mut self, _: Timestamp) {}
    fn ask_client(&mut self, _: ClientRequest) -> u64 {
        0
    }
    fn acp_call(&mut self, call: AcpCall) -> Option<u64> {
        if !self.acp {
            return None;
        }
        let token = 100 + self.calls.len() as u64;
        self.calls.push((token, call));
        Some(token)
    }
}

fn recorder(streaming: bool) -> Recorder {
    Recorder {
        streaming,
        ids: 0,
        events: Vec::new(),
        acp: true,
        calls: Vec::new(),
    }
}

fn types(s: &Recorder) -> Vec<&str> {
    s.events.iter().map(|(t, _)| t.as_str()).collect()
}

fn text(chunk: &str) -> Value {
    json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": chunk}})
}

#[test]
fn a_turn_with_text_and_a_tool_call_reads_like_the_model_loops() {
    let mut s = recorder(true);
    let mut turn = TurnTranslator::new();
    turn.begin_turn(&mut s, "m1", "i1");
    for update in [
        json!({"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "hmm"}}),
        text("Let me "),
        text("look."),
        json!({"sessionUpdate": "tool_call", "toolCallId": "call_1", "title": "Read a.txt",
               "kind": "read", "status": "pending", "rawInput": {"path": "/w/a.txt"},
               "locations": [{"path": "/w/a.txt"}]}),
        json!({"sessionUpdate": "tool_call_update", "toolCallId": "call_1", "status": "in_progress",
               "content": [{"type": "content", "content": {"type": "text", "text": "partial"}}]}),
        json!({"sessionUpdate": "tool_call_update", "toolCallId": "call_1", "status": "completed",
               "content": [{"type": "content", "content": {"type": "text", "text": "hello"}}],
               "rawOutput": {"bytes": 5}}),
        text("It says hello."),
    ] {
        turn.apply(&mut s, &update).unwrap();
    }
    turn.end_turn(&mut s, Ok(StopReason::EndTurn));
    assert_eq!(
        types(&s),
        [
            "assistant.turn_start",
            "assistant.reasoning_delta",
            "assistant.reasoning",
            "assistant.message_start",
            "assistant.message_delta",
            "assistant.message_delta",
            "assistant.message",
            "tool.execution_start",
            "tool.execution_partial_result",
            "tool.execution_complete",
            "assistant.message_start",
            "assistant.message_delta",
            "assistant.message",
            "assistant.turn_end",
            "assistant.idle",
            "session.idle",
        ]
    );
    let get = |i: usize| &s.events[i].1;
    assert_eq!(get(0), &json!({"turnId": "0", "interactionId": "i1"}));
    assert_eq!(get(2), &json!({"reasoningId": "id1", "content": "hmm"}));
    assert_eq!(
        get(6),
        &json!({"messageId": "id2", "content": "Let me look.", "toolRequests": [], "turnId": "0",
                "originatingMessageId": "m1", "interactionId": "i1"})
    );
    assert_eq!(
        get(7),
        &json!({"toolCallId": "call_1", "toolName": "read", "arguments": {"path": "/w/a.txt"},
                "turnId": "0",
                "acp": {"title": "Read a.txt", "kind": "read", "locations": [{"path": "/w/a.txt"}]}})
    );
    assert_eq!(
        get(8),
        &json!({"toolCallId": "call_1", "partialOutput": "partial"})
    );
    assert_eq!(get(9)["success"], true);
    assert_eq!(
        get(9)["result"],
        json!({"content": "hello", "detailedContent": "hello", "rawOutput": {"bytes": 5}})
    );
    assert_eq!(get(12)["content"], "It says hello.");
    assert_eq!(get(15), &json!({"mode": "interactive"}));
    assert!(!turn.in_turn());
}

#[test]
fn without_streaming_only_whole_messages_are_emitted() {
    let mut s = recorder(false);
    let mut turn = TurnTranslator::new();
    turn.begin_turn(&mut s, "m1", "i1");
    turn.apply(&mut s, &text("a")).unwrap();
    turn.apply(&mut s, &text("b")).unwrap();
    // A new agent messageId starts a new message.
    turn.apply(
        &mut s,
        &json!({"sessionUpdate": "agent_message_chunk", "messageId": "m2",
                "content": {"type": "text", "text": "c"}}),
    )
    .unwrap();
    turn.end_turn(&mut s, Ok(StopReason::EndTurn));
    let messages: Vec<&Value> = s
        .events
        .iter()
        .filter(|(t, _)| t == "assistant.message")
        .map(|(_, d)| &d["content"])
        .collect();
    assert_eq!(messages, [&json!("ab"), &json!("c")]);
    assert!(!types(&s).contains(&"assistant.message_delta"));
}

#[test]
fn a_cancelled_or_failed_turn_ends_as_the_model_loops_do_and_running_tools_are_interrupted() {
    let mut s = recorder(true);
    let mut turn = TurnTranslator::new();
    turn.begin_turn(&mut s, "m1", "i1");
    turn.apply(
        &mut s,
        &json!({"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "sleep",
                "kind": "execute", "status": "in_progress"}),
    )
    .unwrap();
    turn.end_turn(&mut s, Ok(StopReason::Cancelled));
    assert_eq!(
        types(&s)[1..],
        [
            "tool.execution_start",
            "tool.execution_complete",
            "abort",
            "assistant.turn_end",
            "assistant.idle",
            "session.idle"
        ]
    );
    assert_eq!(s.events[2].1["error"]["code"], "interrupted");
    assert_eq!(s.events[6].1["aborted"], true);

    let mut s = recorder(true);
    turn.begin_turn(&mut s, "m2", "i2");
    turn.end_turn(&mut s, Err("the agent exited with code 1".into()));
    assert_eq!(
        types(&s),
        [
            "assistant.turn_start",
            "session.error",
            "assistant.turn_end",
            "assistant.idle",
            "session.idle"
        ]
    );
    assert_eq!(
        s.events[0].1["turnId"], "1",
        "turns are numbered per session"
    );
    assert_eq!(
        s.events[1].1,
        json!({"errorType": "agent", "message": "the agent exited with code 1"})
    );
}

#[test]
fn session_level_updates_become_session_events() {
    let mut s = recorder(true);
    let mut turn = TurnTranslator::new();
    turn.set_initial_mode(Some("ask"));
    for update in [
        json!({"sessionUpdate": "plan", "entries": [
            {"content": "read", "priority": "high", "status": "completed"},
            {"content": "write", "priority": "low", "status": "pending"}]}),
        json!({"sessionUpdate": "usage_update", "used": 1200, "size": 200000}),
        json!({"sessionUpdate": "available_commands_update",
               "availableCommands": [{"name": "web", "description": "Search"}]}),
        json!({"sessionUpdate": "current_mode_update", "currentModeId": "code"}),
        json!({"sessionUpdate": "current_mode_update", "currentModeId": "code"}),
        json!({"sessionUpdate": "session_info_update", "title": "Fix the bug"}),
        json!({"sessionUpdate": "config_option_update", "configOptions": []}),
    ] {
        turn.apply(&mut s, &update).unwrap();
    }
    assert_eq!(
        s.events,
        [
            (
                "session.plan_changed".to_owned(),
                json!({"operation": "update", "content": "- [x] read\n- [ ] write\n"})
            ),
            (
                "session.usage_info".to_owned(),
                json!({"tokenLimit": 200000, "currentTokens": 1200})
            ),
            (
                "commands.changed".to_owned(),
                json!({"commands": [{"name": "web", "description": "Search"}]})
            ),
            (
                "session.mode_changed".to_owned(),
                json!({"previousMode": "ask", "newMode": "code"})
            ),
            (
                "session.title_changed".to_owned(),
                json!({"title": "Fix the bug"})
            ),
        ]
    );
    assert_eq!(turn.mode(), Some("code"));
}

#[test]
fn updates_that_are_not_acp_v1_are_refused_and_change_nothing() {
    let mut s = recorder(true);
    let mut turn = TurnTranslator::new();
    for (update, reason) in [
        (
            json!({"sessionUpdate": "telepathy"}),
            "unknown sessionUpdate `telepathy`",
        ),
        (
            json!({"sessionUpdate": "tool_call", "title": "x"}),
            "tool_call without a toolCallId",
        ),
        (
            json!({"sessionUpdate": "tool_call", "toolCallId": "c"}),
            "tool_call without a title",
        ),
        (
            json!({"sessionUpdate": "current_mode_update", "modeId": "x"}),
            "current_mode_update without currentModeId",
        ),
        (json!("text"), "the update is not an object"),
    ] {
        assert_eq!(turn.apply(&mut s, &update), Err(reason.to_owned()));
    }
    assert!(s.events.is_empty());
}

// ----- a session run by an ACP agent -----

fn prompt(agent: &mut AcpSessionAgent, s: &mut Recorder, id: &str, text: &str) {
    agent.handle(
        AgentInput::Prompt {
            message_id: id.into(),
            prompt: text.into(),
            attachments: PromptContext::default(),
        },
        s,
    );
}

fn done(agent: &mut AcpSessionAgent, s: &mut Recorder, token: u64, outcome: Result<Value, String>) {
    agent.handle(AgentInput::Acp(AcpInput::Done { token, outcome }), s);
}

#[test]
fn the_first_prompt_opens_the_agents_session_and_later_ones_reuse_it() {
    let mut s = recorder(true);
    let mut agent = AcpSessionAgent::new(None);
    prompt(&mut agent, &mut s, "m1", "hello");
    assert!(agent.is_busy());
    assert_eq!(s.calls, [(100, AcpCall::Open { previous: None })]);
    assert_eq!(types(&s), ["user.message", "assistant.turn_start"]);
    assert_eq!(s.events[0].1["content"], "hello");
    assert_eq!(s.events[0].1["messageId"], "m1");

    done(
        &mut agent,
        &mut s,
        100,
        Ok(json!({"sessionId": "a1",
                                             "modes": {"currentModeId": "ask"}})),
    );
    assert_eq!(agent.agent_session(), Some("a1"));
    assert_eq!(
        s.calls[1],
        (
            101,
            AcpCall::Prompt {
                agent_session: "a1".into(),
                blocks: vec![json!({"type": "text", "text": "hello"})]
            }
        )
    );
    agent.handle(AgentInput::Acp(AcpInput::Update(text("hi there"))), &mut s);
    done(
        &mut agent,
        &mut s,
        101,
        Ok(json!({"stopReason": "end_turn"})),
    );
    assert!(!agent.is_busy());
    // The opened agent session is recorded in the log (a restored session loads it).
    assert_eq!(s.events[2].1["infoType"], AGENT_SESSION_INFO);
    assert_eq!(s.events[2].1["agentSessionId"], "a1");
    assert_eq!(
        types(&s)[2..],
        [
            "session.info",
            "assistant.message_start",
            "assistant.message_delta",
            "assistant.message",
            "assistant.turn_end",
            "assistant.idle",
            "session.idle"
        ]
    );

    // The next prompt goes to the same agent session.
    prompt(&mut agent, &mut s, "m2", "again");
    assert_eq!(s.calls.len(), 3);
    assert!(
        matches!(&s.calls[2].1, AcpCall::Prompt { agent_session, .. } if agent_session == "a1")
    );
}

#[test]
fn prompts_sent_during_a_turn_wait_for_it() {
    let mut s = recorder(false);
    let mut agent = AcpSessionAgent::new(None);
    prompt(&mut agent, &mut s, "m1", "one");
    done(&mut agent, &mut s, 100, Ok(json!({"sessionId": "a1"})));
    prompt(&mut agent, &mut s, "m2", "two");
    assert_eq!(
        agent.queued_prompts(),
        [("m2".to_owned(), "two".to_owned())]
    );
    assert_eq!(
        s.calls.len(),
        2,
        "the second prompt is not sent during the first turn"
    );
    done(
        &mut agent,
        &mut s,
        101,
        Ok(json!({"stopReason": "end_turn"})),
    );
    assert!(agent.queued_prompts().is_empty());
    assert!(matches!(&s.calls[2].1, AcpCall::Prompt { blocks, .. }
        if blocks[0]["text"] == "two"));
    let user_messages: Vec<&Value> = s
        .events
        .iter()
        .filter(|(t, _)| t == "user.message")
        .map(|(_, d)| &d["messageId"])
        .collect();
    assert_eq!(user_messages, [&json!("m1"), &json!("m2")]);
}

#[test]
fn an_abort_cancels_the_agents_turn_and_ends_it_as_aborted() {
    let mut s = recorder(true);
    let mut agent = AcpSessionAgent::new(None);
    prompt(&mut agent, &mut s, "m1", "long task");
    done(&mut agent, &mut s, 100, Ok(json!({"sessionId": "a1"})));
    agent.handle(AgentInput::Abort, &mut s);
    assert_eq!(
        s.calls[2].1,
        AcpCall::Cancel {
            agent_session: "a1".into()
        }
    );
    assert!(agent.is_busy(), "the turn ends when the agent says so");
    done(
        &mut agent,
        &mut s,
        101,
        Ok(json!({"stopReason": "cancelled"})),
    );
    let t = types(&s);
    assert_eq!(
        t[t.len() - 4..],
        [
            "abort",
            "assistant.turn_end",
            "assistant.idle",
            "session.idle"
        ]
    );
    assert_eq!(s.events.last().unwrap().1["aborted"], true);

    // An interrupt (orphaned work) cancels too, without an abort event.
    let mut s = recorder(true);
    prompt(&mut agent, &mut s, "m2", "more");
    agent.handle(AgentInput::Interrupt, &mut s);
    assert_eq!(
        s.calls[1].1,
        AcpCall::Cancel {
            agent_session: "a1".into()
        }
    );
    let token = s.calls[0].0;
    done(
        &mut agent,
        &mut s,
        token,
        Ok(json!({"stopReason": "cancelled"})),
    );
    assert!(!types(&s).contains(&"abort"));
    assert_eq!(s.events.last().unwrap().1["aborted"], true);
}

#[test]
fn an_agent_that_dies_mid_turn_fails_the_turn_and_the_next_prompt_opens_again() {
    let mut s = recorder(true);
    let mut agent = AcpSessionAgent::new(None);
    prompt(&mut agent, &mut s, "m1", "go");
    done(&mut agent, &mut s, 100, Ok(json!({"sessionId": "a1"})));
    agent.handle(
        AgentInput::Acp(AcpInput::Ended("the agent exited with code 137".into())),
        &mut s,
    );
    assert!(!agent.is_busy());
    assert_eq!(agent.agent_session(), None);
    let error = s.events.iter().find(|(t, _)| t == "session.error").unwrap();
    assert_eq!(error.1["message"], "the agent exited with code 137");
    // A late answer of the dead process changes nothing.
    done(
        &mut agent,
        &mut s,
        101,
        Ok(json!({"stopReason": "end_turn"})),
    );
    assert_eq!(
        types(&s).iter().filter(|t| **t == "session.idle").count(),
        1
    );

    prompt(&mut agent, &mut s, "m2", "again");
    assert_eq!(
        s.calls.last().unwrap().1,
        AcpCall::Open {
            previous: Some("a1".into())
        },
        "the new process may load the session it had"
    );
    // A load answers without a sessionId: the previous one is kept.
    let token = s.calls.last().unwrap().0;
    done(&mut agent, &mut s, token, Ok(json!({})));
    assert_eq!(agent.agent_session(), Some("a1"));
}

#[test]
fn bad_answers_from_the_agent_become_session_errors_and_warnings() {
    let mut s = recorder(true);
    let mut agent = AcpSessionAgent::new(None);
    prompt(&mut agent, &mut s, "m1", "go");
    done(
        &mut agent,
        &mut s,
        100,
        Err("the agent answered with error -32000: auth_required".into()),
    );
    let error = s.events.iter().find(|(t, _)| t == "session.error").unwrap();
    assert_eq!(
        error.1["message"],
        "The agent could not open a session: the agent answered with error -32000: auth_required"
    );
    assert!(!agent.is_busy());

    let mut s = recorder(true);
    prompt(&mut agent, &mut s, "m2", "go");
    done(&mut agent, &mut s, 100, Ok(json!({"sessionId": "a2"})));
    agent.handle(
        AgentInput::Acp(AcpInput::Update(json!({"sessionUpdate": "telepathy"}))),
        &mut s,
    );
    let warning = s
        .events
        .iter()
        .find(|(t, _)| t == "session.warning")
        .unwrap();
    assert_eq!(
        warning.1,
        json!({"warningType": "acp_update",
               "message": "The agent sent an update agentwire cannot read: unknown sessionUpdate `telepathy`"})
    );
    done(&mut agent, &mut s, 101, Ok(json!({"stopReason": "sleepy"})));
    let error = s.events.iter().find(|(t, _)| t == "session.error").unwrap();
    assert_eq!(
        error.1["message"],
        "the agent ended the turn with an unknown stopReason `sleepy`"
    );

    // A session without an ACP agent says so.
    let mut s = recorder(true);
    s.acp = false;
    let mut agent = AcpSessionAgent::new(None);
    prompt(&mut agent, &mut s, "m1", "go");
    let error = s.events.iter().find(|(t, _)| t == "session.error").unwrap();
    assert_eq!(error.1["message"], "this session has no ACP agent");
    assert!(!agent.is_busy());
}

#[test]
fn attached_files_go_to_the_agent_as_resource_links() {
    let mut s = recorder(true);
    let mut agent = AcpSessionAgent::new(Some("a9".into()));
    agent.handle(
        AgentInput::Prompt {
            message_id: "m1".into(),
            prompt: "explain".into(),
            attachments: PromptContext {
                sent: vec![
                    json!({"type": "file", "path": "/w/src/main.rs", "displayName": "main.rs"}),
                    json!({"type": "directory", "path": "/w/docs"}),
                    json!({"type": "selection", "text": "x"}),
                ],
                before: "<ide_selection>x</ide_selection>\n".into(),
                ..PromptContext::default()
            },
        },
        &mut s,
    );
    assert_eq!(
        s.calls[0].1,
        AcpCall::Open {
            previous: Some("a9".into())
        }
    );
    done(&mut agent, &mut s, 100, Ok(json!({"sessionId": "a9"})));
    let AcpCall::Prompt { blocks, .. } = &s.calls[1].1 else {
        panic!("a prompt")
    };
    assert_eq!(
        blocks,
        &[
            json!({"type": "text", "text": "<ide_selection>x</ide_selection>\nexplain"}),
            json!({"type": "resource_link", "uri": "file:///w/src/main.rs", "name": "main.rs"}),
            json!({"type": "resource_link", "uri": "file:///w/docs", "name": "docs"})
        ]
    );
    // The user message carries the attachments as sent.
    assert_eq!(s.events[0].1["attachments"].as_array().unwrap().len(), 3);
}

#[test]
fn mode_and_model_changes_follow_the_choices_the_agents_session_offers() {
    let mut s = recorder(false);
    let mut agent = AcpSessionAgent::new(None);
    let mode = |m: &str| AgentInput::SettingChanged(SessionSetting::Mode(m.into()));
    let model = |m: &str| AgentInput::SettingChanged(SessionSetting::Model(m.into()));
    // Changed before the agent's session is open: applied once it is.
    agent.handle(mode("plan"), &mut s);
    assert!(s.calls.is_empty());
    prompt(&mut agent, &mut s, "m1", "hello");
    done(
        &mut agent,
        &mut s,
        100,
        Ok(json!({"sessionId": "a1",
                  "modes": {"currentModeId": "agent",
                            "availableModes": [{"id": "agent", "name": "Agent"},
                                               {"id": "plan-mode", "name": "Plan"}]},
                  "configOptions": [{"id": "thinking", "category": "other", "options": []},
                                    {"id": "model", "category": "model", "type": "select",
                                     "currentValue": "m-a",
                                     "options": [{"value": "m-a", "name": "Model A"},
                                                 {"value": "m-b", "name": "Model B"}]}]})),
    );
    let set_mode = AcpCall::SetMode {
        agent_session: "a1".into(),
        mode: "plan-mode".into(),
    };
    assert_eq!(s.calls[1].1, set_mode, "the mode named Plan: {:?}", s.calls);
    assert!(matches!(s.calls[2].1, AcpCall::Prompt { .. }));
    // A model the selector offers (by value or by name); the mode already set is not sent
    // again; what the agent does not offer is not sent.
    agent.handle(model("m-b"), &mut s);
    agent.handle(model("model a"), &mut s);
    agent.handle(mode("plan"), &mut s);
    agent.handle(mode("autopilot"), &mut s);
    agent.handle(model("gpt-unknown"), &mut s);
    let calls: Vec<&AcpCall> = s.calls[3..].iter().map(|(_, c)| c).collect();
    assert_eq!(
        calls,
        [
            &AcpCall::SetConfigOption {
                agent_session: "a1".into(),
                config_id: "model".into(),
                value: "m-b".into()
            },
            &AcpCall::SetConfigOption {
                agent_session: "a1".into(),
                config_id: "model".into(),
                value: "m-a".into()
            },
        ]
    );
}

#[test]
fn a_mode_the_agent_left_by_itself_is_set_again() {
    let mut s = recorder(false);
    let mut agent = AcpSessionAgent::new(None);
    prompt(&mut agent, &mut s, "m1", "hello");
    done(
        &mut agent,
        &mut s,
        100,
        Ok(json!({"sessionId": "a1",
                  "modes": {"currentModeId": "plan",
                            "availableModes": [{"id": "agent", "name": "Agent"},
                                               {"id": "plan", "name": "Plan"}]}})),
    );
    let update = json!({"sessionUpdate": "current_mode_update", "currentModeId": "agent"});
    agent.handle(AgentInput::Acp(AcpInput::Update(update)), &mut s);
    agent.handle(
        AgentInput::SettingChanged(SessionSetting::Mode("plan".into())),
        &mut s,
    );
    assert_eq!(
        s.calls.last().unwrap().1,
        AcpCall::SetMode {
            agent_session: "a1".into(),
            mode: "plan".into()
        }
    );
}

#[test]
fn a_restored_session_loads_the_agent_session_its_log_records_without_replaying_it() {
    let info = |id: &str| {
        crate::Event::new(
            format!("e-{id}"),
            "session.info",
            &json!({"infoType": AGENT_SESSION_INFO, "agentSessionId": id}),
            false,
            T0,
            None,
        )
    };
    let mut s = recorder(false);
    let mut agent = AcpSessionAgent::new(None);
    agent.restored(&[info("old"), info("a7")]);
    prompt(&mut agent, &mut s, "m1", "again");
    assert_eq!(
        s.calls[0].1,
        AcpCall::Open {
            previous: Some("a7".into())
        }
    );
    // The agent replays the loaded session before answering: the log has it already.
    let replayed = json!({"sessionUpdate": "user_message_chunk",
                          "content": {"type": "text", "text": "earlier"}});
    agent.handle(AgentInput::Acp(AcpInput::Update(replayed)), &mut s);
    agent.handle(
        AgentInput::Acp(AcpInput::Update(text("old answer"))),
        &mut s,
    );
    done(&mut agent, &mut s, 100, Ok(json!({})));
    assert_eq!(agent.agent_session(), Some("a7"));
    assert_eq!(
        types(&s),
        ["user.message", "assistant.turn_start"],
        "nothing replayed, and the same agent session is not recorded twice"
    );
    assert!(
        matches!(&s.calls[1].1, AcpCall::Prompt { agent_session, .. } if agent_session == "a7")
    );
}

#[test]
fn an_agent_session_the_agent_cannot_load_is_replaced_by_a_new_one() {
    let mut s = recorder(false);
    let mut agent = AcpSessionAgent::new(Some("gone".into()));
    prompt(&mut agent, &mut s, "m1", "hello");
    assert_eq!(
        s.calls[0].1,
        AcpCall::Open {
            previous: Some("gone".into())
        }
    );
    done(
        &mut agent,
        &mut s,
        100,
        Err("Resource not found: gone".into()),
    );
    assert_eq!(s.calls[1].1, AcpCall::Open { previous: None });
    assert!(agent.is_busy(), "the prompt waits for the new session");
    let warning = &s
        .events
        .iter()
        .find(|(t, _)| t == "session.warning")
        .unwrap()
        .1;
    assert_eq!(warning["warningType"], "acp_agent_session");
    assert!(warning["message"]
        .as_str()
        .unwrap()
        .contains("Resource not found"));
    done(&mut agent, &mut s, 101, Ok(json!({"sessionId": "fresh"})));
    assert!(
        matches!(&s.calls[2].1, AcpCall::Prompt { agent_session, .. } if agent_session == "fresh")
    );
}
