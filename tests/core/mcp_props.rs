//! Property tests of the MCP client's message handling against a hostile server: whatever
//! the server writes (junk lines, lines over the limit, responses to ids never used,
//! requests it may not make, notifications, cut anywhere), the client never panics, every
//! call it was asked to make ends exactly once, a failure is final, and everything it writes
//! is one JSON-RPC message per line.

use std::collections::BTreeMap;
use std::time::Duration;

use agentwire::mcp::{ClientEvent, McpClient};
use agentwire::Timestamp;
use proptest::prelude::*;
use serde_json::{json, Value};

const MAX_LINE: usize = 2048;

/// One thing the hostile server (or the host) does.
#[derive(Clone, Debug)]
enum Op {
    /// A line of arbitrary bytes.
    Junk(Vec<u8>),
    /// A line longer than the client accepts.
    Huge(usize),
    /// A response to id `n` (maybe one the client used, maybe not).
    Response(u64, bool),
    /// The answer to `initialize` with this protocol version.
    Initialize(String),
    /// A `tools/list` page answer for id `n`, with or without a cursor.
    Tools(u64, bool),
    /// A request from the server.
    Request(u64, String),
    /// A notification from the server.
    Notification(String),
    /// The host calls a tool.
    Call,
    /// Time passes.
    Wait(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..64).prop_map(Op::Junk),
        (MAX_LINE..MAX_LINE * 3).prop_map(Op::Huge),
        (0u64..8, any::<bool>()).prop_map(|(id, ok)| Op::Response(id, ok)),
        prop_oneof![
            Just("2025-11-25".to_owned()),
            Just("2025-06-18".to_owned()),
            Just("1999-01-01".to_owned())
        ]
        .prop_map(Op::Initialize),
        (0u64..8, any::<bool>()).prop_map(|(id, more)| Op::Tools(id, more)),
        (
            0u64..4,
            prop_oneof![
                Just("ping".to_owned()),
                Just("roots/list".to_owned()),
                Just("sampling/createMessage".to_owned()),
                Just("tools/call".to_owned()),
                "[a-z/]{0,12}",
            ]
        )
            .prop_map(|(id, m)| Op::Request(id, m)),
        prop_oneof![
            Just("notifications/tools/list_changed".to_owned()),
            Just("notifications/message".to_owned()),
            "[a-z/]{0,12}",
        ]
        .prop_map(Op::Notification),
        Just(Op::Call),
        (0u64..120_000).prop_map(Op::Wait),
    ]
}

fn line(op: &Op) -> Option<Vec<u8>> {
    let value = match op {
        Op::Junk(bytes) => {
            let mut b: Vec<u8> = bytes.iter().copied().filter(|b| *b != b'\n').collect();
            b.push(b'\n');
            return Some(b);
        }
        Op::Huge(n) => {
            let mut b = vec![b'x'; *n];
            b.push(b'\n');
            return Some(b);
        }
        Op::Response(id, true) => json!({"jsonrpc": "2.0", "id": id, "result": {"content": [
            {"type": "text", "text": "ok"}]}}),
        Op::Response(id, false) => {
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": -1, "message": "no"}})
        }
        Op::Initialize(v) => json!({"jsonrpc": "2.0", "id": 0, "result": {
            "protocolVersion": v, "capabilities": {"tools": {"listChanged": true}},
            "serverInfo": {"name": "hostile", "version": "0"}}}),
        Op::Tools(id, more) => {
            let mut result = json!({"tools": [{"name": "t", "inputSchema": {"type": "object"}},
                                              {"name": 7}, {}]});
            if *more {
                result["nextCursor"] = json!("again");
            }
            json!({"jsonrpc": "2.0", "id": id, "result": result})
        }
        Op::Request(id, method) => {
            json!({"jsonrpc": "2.0", "id": format!("s{id}"), "method": method, "params": {}})
        }
        Op::Notification(method) => json!({"jsonrpc": "2.0", "method": method}),
        Op::Call | Op::Wait(_) => return None,
    };
    let mut b = serde_json::to_vec(&value).unwrap();
    b.push(b'\n');
    Some(b)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn a_hostile_server_never_breaks_the_client(
        ops in proptest::collection::vec(op(), 0..40),
        cut in 1usize..200,
    ) {
        let mut now = Timestamp::from_millis(1_795_983_976_952);
        let mut client = McpClient::new("hostile", Duration::from_secs(60), vec!["/w".into()], "0")
            .with_max_message_bytes(MAX_LINE);
        client.start(now);
        let mut next_token = 0u64;
        let mut done: BTreeMap<u64, usize> = BTreeMap::new();
        let mut failed = false;
        let drain = |client: &mut McpClient, done: &mut BTreeMap<u64, usize>, failed: &mut bool| {
            while let Some(frame) = client.poll_transmit() {
                assert_eq!(frame.last(), Some(&b'\n'));
                let body = &frame[..frame.len() - 1];
                assert!(!body.contains(&b'\n'));
                let v: Value = serde_json::from_slice(body).expect("the client writes JSON");
                assert_eq!(v["jsonrpc"], "2.0");
            }
            while let Some(event) = client.poll_event() {
                match event {
                    ClientEvent::CallDone { token, .. } => *done.entry(token).or_default() += 1,
                    ClientEvent::Failed(reason) => {
                        assert!(!*failed, "failed twice");
                        assert!(!reason.is_empty());
                        *failed = true;
                    }
                    ClientEvent::Ready => assert!(!*failed, "ready after failing"),
                    ClientEvent::ToolsChanged | ClientEvent::ServerRequest { .. } => {}
                }
            }
        };
        drain(&mut client, &mut done, &mut failed);
        for op in &ops {
            match op {
                Op::Call => {
                    client.call_tool(now, next_token, "t", &json!({}));
                    next_token += 1;
                }
                Op::Wait(ms) => {
                    now = now.saturating_add(Duration::from_millis(*ms));
                    client.handle_timeout(now);
                }
                other => {
                    let bytes = line(other).unwrap();
                    for chunk in bytes.chunks(cut) {
                        client.handle_stdout(now, chunk);
                    }
                }
            }
            drain(&mut client, &mut done, &mut failed);
        }
        client.handle_exit(now, Some(1), None);
        drain(&mut client, &mut done, &mut failed);
        prop_assert!(failed, "an exited server has failed");
        prop_assert!(client.failure().is_some());
        for token in 0..next_token {
            prop_assert_eq!(done.get(&token).copied(), Some(1), "call {} ends exactly once", token);
        }
        prop_assert_eq!(done.len() as u64, next_token);
    }
}
