//! The official ACP Rust SDK (`agent-client-protocol`) drives `agentwire --acp` (stdio) with
//! the unmodified reference MCP server `@modelcontextprotocol/server-everything` (installed by
//! `scripts/install-test-servers`) in `session/new`'s `mcpServers`. A scenario step calls the server's
//! `trigger-elicitation-request` tool: the server's `elicitation/create` reaches an ACP client
//! that advertised `elicitation.form` as ACP's `elicitation/create`, and the client's answer is
//! what the server gets; a client that advertised no elicitation is never asked.

use crate::support::mcp_servers;

use crate::support::acp_stdio;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    ClientCapabilities, ContentBlock, CreateElicitationRequest, CreateElicitationResponse,
    ElicitationAcceptAction, ElicitationAction, ElicitationCapabilities,
    ElicitationFormCapabilities, ElicitationMode, ElicitationScope, InitializeRequest, McpServer,
    McpServerStdio, NewSessionRequest, PromptRequest, RequestPermissionOutcome,
    RequestPermissionRequest, RequestPermissionResponse, SelectedPermissionOutcome,
    SessionNotification, StopReason, TextContent,
};
use agent_client_protocol::Client;

const LIMIT: Duration = Duration::from_secs(30);

const SCENARIO: &str = r#"{
  "rules": [
    { "match": "elicit", "steps": [ { "mcp": "everything/trigger-elicitation-request" },
                                    { "say": "{result}" } ] }
  ],
  "default": [ { "say": "You said: {prompt}" } ]
}"#;

/// What one run saw: the turn's stop reason, the agent's text, the session id and the
/// elicitation requests the client got.
struct Run {
    stop: StopReason,
    text: String,
    session_id: String,
    elicitations: Vec<CreateElicitationRequest>,
}

/// Runs one prompt that triggers the server's elicitation; the client advertises
/// `elicitation.form` when `advertise` is set and answers with `accept` + a name.
async fn elicit(advertise: bool) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("mcp.pid");
    let (command, args) = mcp_servers::everything_command(&pidfile);
    let mut child = acp_stdio::spawn_scripted(dir.path(), SCENARIO);
    let transport = acp_stdio::lines(&mut child);
    let updates: Arc<Mutex<Vec<SessionNotification>>> = Arc::default();
    let elicitations: Arc<Mutex<Vec<CreateElicitationRequest>>> = Arc::default();
    let on_update = updates.clone();
    let on_elicitation = elicitations.clone();
    let cwd = dir.path().to_path_buf();
    let mut caps = ClientCapabilities::new();
    if advertise {
        caps = caps
            .elicitation(ElicitationCapabilities::new().form(ElicitationFormCapabilities::new()));
    }
    let run = Client
        .v1()
        .on_receive_notification(
            async move |n: SessionNotification, _cx| {
                on_update.lock().unwrap().push(n);
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            async move |_request: RequestPermissionRequest, responder, _cx| {
                responder.respond(RequestPermissionResponse::new(
                    RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(
                        "allow-once",
                    )),
                ))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: CreateElicitationRequest, responder, _cx| {
                on_elicitation.lock().unwrap().push(request);
                responder.respond(CreateElicitationResponse::new(ElicitationAction::Accept(
                    ElicitationAcceptAction::new().content(
                        [("name".to_owned(), "Ada Lovelace".into())]
                            .into_iter()
                            .collect::<std::collections::BTreeMap<_, _>>(),
                    ),
                )))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_with(transport, async |cx| {
            cx.send_request(InitializeRequest::new(ProtocolVersion::V1).client_capabilities(caps))
                .block_task()
                .await?;
            let server = McpServer::Stdio(McpServerStdio::new("everything", command).args(args));
            let new = cx
                .send_request(NewSessionRequest::new(cwd).mcp_servers(vec![server]))
                .block_task()
                .await?;
            let prompt = vec![ContentBlock::Text(TextContent::new("elicit now"))];
            let response = cx
                .send_request(PromptRequest::new(new.session_id.clone(), prompt))
                .block_task()
                .await?;
            Ok((response.stop_reason, new.session_id.to_string()))
        });
    let (stop, session_id) = tokio::time::timeout(LIMIT, run)
        .await
        .expect("the client finished in time")
        .expect("no protocol error");
    // The turn's last chunk is queued before the prompt's answer; give the reader a moment.
    let mut text = String::new();
    for _ in 0..200 {
        text = acp_stdio::agent_text(&updates.lock().unwrap());
        if !text.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let _ = child.kill().await;
    let _ = child.wait().await;
    let elicitations = elicitations.lock().unwrap().clone();
    Run {
        stop,
        text,
        session_id,
        elicitations,
    }
}

#[tokio::test]
async fn a_server_elicitation_reaches_an_acp_client_that_advertises_it_and_its_answer_returns() {
    let run = elicit(true).await;
    assert_eq!(run.stop, StopReason::EndTurn);
    assert_eq!(run.elicitations.len(), 1, "the client was asked once");
    let request = &run.elicitations[0];
    assert!(
        request.message.contains("Please provide inputs"),
        "{:?}",
        request.message
    );
    let ElicitationMode::Form(form) = &request.mode else {
        panic!("a form elicitation: {:?}", request.mode);
    };
    let ElicitationScope::Session(scope) = &form.scope else {
        panic!("scoped to the session: {:?}", form.scope);
    };
    assert_eq!(scope.session_id.to_string(), run.session_id);
    assert!(
        form.requested_schema.properties.contains_key("name"),
        "the server's schema: {:?}",
        form.requested_schema
    );
    assert!(
        run.text.contains("Name: Ada Lovelace"),
        "the server got the client's answer: {:?}",
        run.text
    );
}

#[tokio::test]
async fn an_acp_client_that_does_not_advertise_elicitation_is_not_asked() {
    let run = elicit(false).await;
    assert_eq!(run.stop, StopReason::EndTurn);
    assert!(run.elicitations.is_empty(), "never asked");
    assert!(
        !run.text.contains("Ada Lovelace"),
        "nobody answered for it: {:?}",
        run.text
    );
}
