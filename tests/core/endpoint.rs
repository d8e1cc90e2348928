//! Two endpoints wired together in memory (client <-> server), plus raw-byte peers.

use std::time::Duration;

use agentwire::correlation::Outcome;
use agentwire::endpoint::{CloseReason, Endpoint, EndpointConfig, EndpointEvent, Role, SendError};
use agentwire::frame::{FrameLimits, Framing};
use agentwire::jsonrpc::{code, BatchPolicy, ErrorObject, OwnedId};
use agentwire::Timestamp;
use proptest::prelude::*;
use serde_json::{json, Value};

const T0: Timestamp = Timestamp::from_millis(1_795_983_976_952);

fn pair(framing: Framing) -> (Endpoint, Endpoint) {
    (
        Endpoint::new(Role::Client, EndpointConfig::new(framing)),
        Endpoint::new(Role::Server, EndpointConfig::new(framing)),
    )
}

/// Moves every queued frame from `from` to `to`; returns how many frames moved.
fn transfer(now: Timestamp, from: &mut Endpoint, to: &mut Endpoint) -> usize {
    let mut n = 0;
    while let Some(frame) = from.poll_transmit() {
        to.handle_bytes(now, &frame);
        n += 1;
    }
    n
}

fn events(e: &mut Endpoint) -> Vec<EndpointEvent> {
    std::iter::from_fn(|| e.poll_event()).collect()
}

/// Everything `e` wants to write, as parsed JSON bodies (framing stripped).
fn written_bodies(e: &mut Endpoint) -> Vec<Value> {
    let mut raw = Vec::new();
    while let Some(frame) = e.poll_transmit() {
        raw.extend_from_slice(&frame);
    }
    let mut decoder =
        agentwire::frame::FrameDecoder::new(e.config().framing, FrameLimits::default());
    decoder.push(&raw).unwrap();
    std::iter::from_fn(|| decoder.next_frame().unwrap())
        .map(|body| serde_json::from_slice(&body).unwrap())
        .collect()
}

fn outcome_of(events: &[EndpointEvent], id: &OwnedId) -> Vec<Outcome> {
    events
        .iter()
        .filter_map(|e| match e {
            EndpointEvent::Outcome { id: i, outcome } if i == id => Some(outcome.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn request_response_and_notification_both_framings() {
    for framing in [Framing::ContentLength, Framing::Ndjson] {
        let (mut client, mut server) = pair(framing);
        let id = client
            .send_request(T0, "session.create", &json!({"model": "fake-model"}), None)
            .unwrap();
        client
            .send_notification("session.log", &json!({"line": "a\nb"}))
            .unwrap();
        assert_eq!(transfer(T0, &mut client, &mut server), 2);

        let ev = events(&mut server);
        assert_eq!(ev.len(), 2, "{ev:?}");
        let EndpointEvent::Request(req) = &ev[0] else {
            panic!("{ev:?}")
        };
        assert_eq!(req.method(), "session.create");
        assert_eq!(req.id(), &id);
        assert_eq!(req.params_raw(), Some(&br#"{"model":"fake-model"}"#[..]));
        let params: Value = req.params().unwrap();
        assert_eq!(params["model"], "fake-model");
        let EndpointEvent::Notification(note) = &ev[1] else {
            panic!("{ev:?}")
        };
        assert_eq!(note.method(), "session.log");
        assert_eq!(note.params::<Value>().unwrap()["line"], "a\nb");

        assert_eq!(server.in_flight_requests(), 1);
        server
            .respond(req.id(), &json!({"sessionId": "s1"}))
            .unwrap();
        assert_eq!(server.in_flight_requests(), 0);
        transfer(T0, &mut server, &mut client);
        let ev = events(&mut client);
        let outcomes = outcome_of(&ev, &id);
        assert_eq!(outcomes.len(), 1);
        let Outcome::Result(result) = &outcomes[0] else {
            panic!("{outcomes:?}")
        };
        assert_eq!(result.get(), r#"{"sessionId":"s1"}"#);
        assert_eq!(client.pending_requests(), 0);
    }
}

#[test]
fn error_responses_and_ids_count_up() {
    let (mut client, mut server) = pair(Framing::ContentLength);
    let a = client.send_request(T0, "a", &(), None).unwrap();
    let b = client.send_request(T0, "b", &[1, 2], None).unwrap();
    assert_eq!((a.as_raw(), b.as_raw()), ("0", "1"));
    transfer(T0, &mut client, &mut server);
    let reqs: Vec<_> = events(&mut server)
        .into_iter()
        .filter_map(|e| match e {
            EndpointEvent::Request(r) => Some(r),
            _ => None,
        })
        .collect();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].params_raw(), None, "unit params are omitted");
    assert_eq!(reqs[0].params::<Option<Value>>().unwrap(), None);
    // Answer in reverse order.
    server
        .respond_error(reqs[1].id(), &ErrorObject::method_not_found("b"))
        .unwrap();
    server
        .respond_raw(
            reqs[0].id(),
            &serde_json::value::RawValue::from_string("[true]".into()).unwrap(),
        )
        .unwrap();
    transfer(T0, &mut server, &mut client);
    let ev = events(&mut client);
    assert!(
        matches!(&outcome_of(&ev, &b)[..], [Outcome::Error(e)] if e.code == code::METHOD_NOT_FOUND)
    );
    assert!(matches!(&outcome_of(&ev, &a)[..], [Outcome::Result(r)] if r.get() == "[true]"));
}

#[test]
fn a_request_is_answered_exactly_once() {
    let (mut client, mut server) = pair(Framing::ContentLength);
    let id = client.send_request(T0, "x", &(), None).unwrap();
    transfer(T0, &mut client, &mut server);
    let EndpointEvent::Request(req) = server.poll_event().unwrap() else {
        panic!()
    };
    server.respond(req.id(), &1).unwrap();
    for second in [
        server.respond(req.id(), &2),
        server.respond_error(req.id(), &ErrorObject::internal("again")),
    ] {
        assert!(
            matches!(second, Err(SendError::NotInFlight(ref i)) if i == &id),
            "{second:?}"
        );
    }
    assert!(matches!(
        server.respond(&OwnedId::from_u64(77), &1),
        Err(SendError::NotInFlight(_))
    ));
    assert_eq!(
        transfer(T0, &mut server, &mut client),
        1,
        "only one answer on the wire"
    );
    assert_eq!(outcome_of(&events(&mut client), &id).len(), 1);
}

#[test]
fn timeout_tells_the_peer_and_late_answer_is_dropped() {
    let (mut client, mut server) = pair(Framing::ContentLength);
    let id = client
        .send_request(T0, "slow", &(), Some(Duration::from_millis(500)))
        .unwrap();
    let deadline = T0.saturating_add(Duration::from_millis(500));
    assert_eq!(client.poll_timeout(), Some(deadline));
    transfer(T0, &mut client, &mut server);
    let EndpointEvent::Request(req) = server.poll_event().unwrap() else {
        panic!()
    };

    client.handle_timeout(T0.saturating_add(Duration::from_millis(499)));
    assert!(client.poll_event().is_none(), "not yet");
    client.handle_timeout(deadline);
    assert_eq!(
        outcome_of(&events(&mut client), &id),
        vec![Outcome::TimedOut]
    );
    assert_eq!(client.poll_timeout(), None);

    // The client sent `$/cancelRequest {id}`; the server application is told and answers once.
    transfer(deadline, &mut client, &mut server);
    let ev = events(&mut server);
    assert!(
        matches!(&ev[..], [EndpointEvent::CancelRequested { id: i }] if i == req.id()),
        "{ev:?}"
    );
    assert!(server.is_cancel_requested(req.id()));
    server
        .respond_error(req.id(), &ErrorObject::request_cancelled())
        .unwrap();
    transfer(deadline, &mut server, &mut client);
    assert!(events(&mut client).is_empty(), "no second outcome");
    assert_eq!(client.stats().unknown_responses, 1);
}

#[test]
fn response_after_deadline_is_late_even_without_handle_timeout() {
    let (mut client, mut server) = pair(Framing::Ndjson);
    let id = client
        .send_request(T0, "x", &(), Some(Duration::from_secs(1)))
        .unwrap();
    transfer(T0, &mut client, &mut server);
    let EndpointEvent::Request(req) = server.poll_event().unwrap() else {
        panic!()
    };
    server.respond(req.id(), &"late").unwrap();
    transfer(
        T0.saturating_add(Duration::from_secs(2)),
        &mut server,
        &mut client,
    );
    assert_eq!(
        outcome_of(&events(&mut client), &id),
        vec![Outcome::TimedOut]
    );
    assert_eq!(client.stats().unknown_responses, 1);
}

#[test]
fn cancel_resolves_once_and_notifies_the_peer() {
    let (mut client, mut server) = pair(Framing::Ndjson);
    let id = client
        .send_request(T0, "prompt", &json!({}), Some(Duration::from_secs(60)))
        .unwrap();
    transfer(T0, &mut client, &mut server);
    let EndpointEvent::Request(req) = server.poll_event().unwrap() else {
        panic!()
    };
    assert!(client.cancel(&id));
    assert!(!client.cancel(&id), "only once");
    assert_eq!(
        outcome_of(&events(&mut client), &id),
        vec![Outcome::Cancelled]
    );
    assert_eq!(client.poll_timeout(), None);
    let bodies = written_bodies(&mut client);
    assert_eq!(
        bodies,
        vec![json!({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"id": 0}})]
    );
    // Deliver the (ACP-style) cancel to the server.
    let mut frame = serde_json::to_vec(&bodies[0]).unwrap();
    frame.push(b'\n');
    server.handle_bytes(T0, &frame);
    assert!(
        matches!(&events(&mut server)[..], [EndpointEvent::CancelRequested { id: i }] if i == req.id())
    );
    server
        .respond_error(req.id(), &ErrorObject::request_cancelled())
        .unwrap();
    transfer(T0, &mut server, &mut client);
    assert!(events(&mut client).is_empty());
    // A cancel for something not in flight is ignored.
    server.handle_bytes(
        T0,
        b"{\"jsonrpc\":\"2.0\",\"method\":\"$/cancelRequest\",\"params\":{\"id\":9}}\n",
    );
    assert!(server.poll_event().is_none());
    assert_eq!(server.stats().unknown_cancels, 1);
}

#[test]
fn close_resolves_every_pending_request_closed() {
    for close in ["eof", "local", "eof-mid-frame"] {
        let (mut client, mut server) = pair(Framing::ContentLength);
        let ids: Vec<_> = (0..3)
            .map(|i| {
                client
                    .send_request(T0, "m", &[i], Some(Duration::from_secs(i + 1)))
                    .unwrap()
            })
            .collect();
        transfer(T0, &mut client, &mut server);
        match close {
            "eof" => client.handle_eof(),
            "local" => client.close("shutting down"),
            _ => {
                client.handle_bytes(T0, b"Content-Length: 10\r\n\r\n{\"js");
                client.handle_eof();
            }
        }
        let ev = events(&mut client);
        for id in &ids {
            assert_eq!(outcome_of(&ev, id), vec![Outcome::Closed], "{close}");
        }
        let reason = match ev.last() {
            Some(EndpointEvent::Closed(reason)) => reason.clone(),
            other => panic!("{close}: last event {other:?}"),
        };
        match close {
            "eof" => assert_eq!(reason, CloseReason::PeerClosed),
            "local" => assert_eq!(reason, CloseReason::Local("shutting down".into())),
            _ => assert!(
                matches!(reason, CloseReason::PeerClosedMidFrame { buffered } if buffered > 0),
                "{reason:?}"
            ),
        }
        assert_eq!(client.pending_requests(), 0);
        assert_eq!(client.poll_timeout(), None);
        assert!(client.is_closed());
        assert!(matches!(
            client.send_request(T0, "m", &(), None),
            Err(SendError::Closed)
        ));
        assert!(matches!(
            client.send_notification("m", &()),
            Err(SendError::Closed)
        ));
        client.handle_eof();
        client.handle_timeout(T0.saturating_add(Duration::from_secs(10)));
        assert!(client.poll_event().is_none(), "closed once, nothing after");
    }
}

#[test]
fn framing_error_closes_with_reason() {
    let (mut client, mut server) = pair(Framing::ContentLength);
    let id = server
        .send_request(T0, "tool.call", &json!({}), None)
        .unwrap();
    server.handle_bytes(T0, b"Content-Length: nope\r\n\r\n{}");
    let ev = events(&mut server);
    assert_eq!(outcome_of(&ev, &id), vec![Outcome::Closed]);
    let Some(EndpointEvent::Closed(CloseReason::Framing(e))) = ev.last() else {
        panic!("{ev:?}")
    };
    assert!(!e.to_string().is_empty());
    assert!(server
        .close_reason()
        .unwrap()
        .to_string()
        .starts_with("framing error"));
    // Queued frames stay available for a final flush.
    assert_eq!(transfer(T0, &mut server, &mut client), 1);
    // Oversized frames are a framing error too.
    let mut config = EndpointConfig::new(Framing::Ndjson);
    config.frame_limits.max_frame_bytes = 16;
    let mut small = Endpoint::new(Role::Server, config);
    small.handle_bytes(T0, &[b'x'; 64]);
    assert!(matches!(
        small.close_reason(),
        Some(CloseReason::Framing(_))
    ));
}

#[test]
fn invalid_input_is_answered_automatically() {
    let mut server = Endpoint::new(Role::Server, EndpointConfig::new(Framing::Ndjson));
    server.handle_bytes(T0, b"{not json}\n");
    server.handle_bytes(T0, b"{\"jsonrpc\":\"2.0\",\"id\":\"q\",\"method\":7}\n");
    server.handle_bytes(T0, b"{\"jsonrpc\":\"2.0\",\"id\":1.0,\"method\":\"ok\"}\n");
    server.handle_bytes(
        T0,
        b"{\"jsonrpc\":\"2.0\",\"id\":1.0,\"method\":\"again\"}\n",
    );
    server.handle_bytes(T0, b"[{\"jsonrpc\":\"2.0\",\"method\":\"n\"}]\n");
    server.handle_bytes(
        T0,
        b"{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32600,\"message\":\"x\"}}\n",
    );
    let bodies = written_bodies(&mut server);
    assert_eq!(
        bodies,
        vec![
            json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "Parse error"}}),
            json!({"jsonrpc": "2.0", "id": "q", "error": {"code": -32600, "message": "Invalid Request"}}),
            json!({"jsonrpc": "2.0", "id": 1.0, "error": {"code": -32600, "message": "Invalid Request: id already in use by a request in flight"}}),
            json!([{"jsonrpc": "2.0", "id": null, "error": {"code": -32600, "message": "Invalid Request"}}]),
        ]
    );
    let ev = events(&mut server);
    assert_eq!(ev.len(), 1, "only the valid request is delivered: {ev:?}");
    let EndpointEvent::Request(req) = &ev[0] else {
        panic!()
    };
    assert_eq!(req.id().as_raw(), "1.0");
    let stats = server.stats();
    assert_eq!(
        (
            stats.rejected,
            stats.duplicate_requests,
            stats.unknown_responses
        ),
        (3, 1, 1)
    );
    assert!(!server.is_closed());
    // The answer echoes the id byte-exactly.
    server.respond(req.id(), &()).unwrap();
    let frame = server.poll_transmit().unwrap();
    assert_eq!(
        &frame[..],
        b"{\"jsonrpc\":\"2.0\",\"id\":1.0,\"result\":null}\n"
    );
}

#[test]
fn batches_with_allow_are_answered_as_one_array() {
    let mut config = EndpointConfig::new(Framing::ContentLength);
    config.batch_policy = BatchPolicy::Allow;
    let mut server = Endpoint::new(Role::Server, config);
    let body = br#"[{"jsonrpc":"2.0","id":"a","method":"sum","params":[1,2]},{"jsonrpc":"2.0","method":"note"},5,{"jsonrpc":"2.0","id":"b","method":"get"}]"#;
    server.handle_bytes(
        T0,
        format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes(),
    );
    server.handle_bytes(T0, body);
    let ev = events(&mut server);
    assert_eq!(ev.len(), 3, "{ev:?}");
    let EndpointEvent::Request(a) = &ev[0] else {
        panic!()
    };
    let EndpointEvent::Notification(n) = &ev[1] else {
        panic!()
    };
    let EndpointEvent::Request(b) = &ev[2] else {
        panic!()
    };
    assert_eq!((a.method(), n.method(), b.method()), ("sum", "note", "get"));
    assert_eq!(a.params::<Vec<i64>>().unwrap(), vec![1, 2]);
    assert!(
        server.poll_transmit().is_none(),
        "the invalid element waits for the batch"
    );
    server.respond(b.id(), &"got").unwrap();
    assert!(server.poll_transmit().is_none(), "still waiting for a");
    assert!(matches!(
        server.respond(b.id(), &"twice"),
        Err(SendError::NotInFlight(_))
    ));
    server.respond(a.id(), &3).unwrap();
    let bodies = written_bodies(&mut server);
    assert_eq!(
        bodies,
        vec![json!([
            {"jsonrpc": "2.0", "id": null, "error": {"code": -32600, "message": "Invalid Request"}},
            {"jsonrpc": "2.0", "id": "b", "result": "got"},
            {"jsonrpc": "2.0", "id": "a", "result": 3},
        ])]
    );
    // All-notification batch: nothing is sent.
    let body = br#"[{"jsonrpc":"2.0","method":"x"},{"jsonrpc":"2.0","method":"y"}]"#;
    server.handle_bytes(
        T0,
        format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes(),
    );
    server.handle_bytes(T0, body);
    assert_eq!(events(&mut server).len(), 2);
    assert!(server.poll_transmit().is_none());
}

#[test]
fn bounded_outbox_hands_the_message_back() {
    let mut config = EndpointConfig::new(Framing::ContentLength);
    config.max_outbox_frames = 2;
    let mut client = Endpoint::new(Role::Client, config.clone());
    let mut server = Endpoint::new(Role::Server, config);
    client.send_notification("n", &[1]).unwrap();
    let id = client
        .send_request(T0, "r", &[2], Some(Duration::from_secs(1)))
        .unwrap();
    assert!(client.is_outbox_full());
    let Err(SendError::Full(unsent)) =
        client.send_request(T0, "r", &[3], Some(Duration::from_secs(1)))
    else {
        panic!("expected Full")
    };
    assert_eq!(
        client.pending_requests(),
        1,
        "the refused request is not pending"
    );
    assert_eq!(unsent.id().map(OwnedId::as_raw), Some("1"));
    assert!(std::str::from_utf8(unsent.body())
        .unwrap()
        .contains(r#""params":[3]"#));
    let Err(SendError::Full(unsent_note)) = client.send_notification("n", &[4]) else {
        panic!()
    };
    assert_eq!(transfer(T0, &mut client, &mut server), 2);
    let later = T0.saturating_add(Duration::from_millis(500));
    client.retry(later, unsent).unwrap();
    client.retry(later, unsent_note).unwrap();
    assert_eq!(
        client.poll_timeout(),
        T0.saturating_add(Duration::from_secs(1)).into()
    );
    transfer(later, &mut client, &mut server);
    let reqs: Vec<_> = events(&mut server)
        .into_iter()
        .filter_map(|e| match e {
            EndpointEvent::Request(r) => Some(r),
            _ => None,
        })
        .collect();
    assert_eq!(
        reqs.iter().map(|r| r.id().as_raw()).collect::<Vec<_>>(),
        ["0", "1"]
    );

    // A response refused for lack of room is not an answer: the request stays in flight.
    server.send_notification("fill", &()).unwrap();
    server.send_notification("fill", &()).unwrap();
    let Err(SendError::Full(answer)) = server.respond(reqs[0].id(), &"ok") else {
        panic!()
    };
    assert_eq!(server.in_flight_requests(), 2);
    assert_eq!(transfer(later, &mut server, &mut client), 2);
    server.retry(later, answer.clone()).unwrap();
    assert!(
        matches!(server.retry(later, answer), Err(SendError::NotInFlight(_))),
        "exactly once"
    );
    transfer(later, &mut server, &mut client);
    assert!(matches!(
        &outcome_of(&events(&mut client), &id)[..],
        [Outcome::Result(_)]
    ));
}

#[test]
fn byte_at_a_time_delivery() {
    for framing in [Framing::ContentLength, Framing::Ndjson] {
        let (mut client, mut server) = pair(framing);
        let ids: Vec<_> = (0..3)
            .map(|i| client.send_request(T0, "echo", &[i], None).unwrap())
            .collect();
        let mut wire = Vec::new();
        while let Some(frame) = client.poll_transmit() {
            wire.extend_from_slice(&frame);
        }
        for byte in wire {
            server.handle_bytes(T0, &[byte]);
        }
        for event in events(&mut server) {
            let EndpointEvent::Request(req) = event else {
                panic!()
            };
            let params: Value = req.params().unwrap();
            server.respond(req.id(), &params).unwrap();
        }
        transfer(T0, &mut server, &mut client);
        let ev = events(&mut client);
        for (i, id) in ids.iter().enumerate() {
            assert!(
                matches!(&outcome_of(&ev, id)[..], [Outcome::Result(r)] if r.get() == format!("[{i}]"))
            );
        }
    }
}

proptest! {
    /// Arbitrary bytes never panic, and afterwards every pending request still ends exactly once.
    #[test]
    fn peer_input_never_panics(
        chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 0..20),
        ndjson in any::<bool>(),
        allow_batches in any::<bool>(),
    ) {
        let framing = if ndjson { Framing::Ndjson } else { Framing::ContentLength };
        let mut config = EndpointConfig::new(framing);
        config.batch_policy = if allow_batches { BatchPolicy::Allow } else { BatchPolicy::Reject };
        let mut e = Endpoint::new(Role::Server, config);
        let id = e.send_request(T0, "m", &(), Some(Duration::from_secs(1))).unwrap();
        let mut outcomes = 0;
        for chunk in &chunks {
            e.handle_bytes(T0, chunk);
            while let Some(ev) = e.poll_event() {
                match ev {
                    EndpointEvent::Request(r) => {
                        let _ = r.method();
                        let _ = r.params::<Value>();
                        prop_assert!(e.respond(r.id(), &()).is_ok() || e.is_closed());
                    }
                    EndpointEvent::Outcome { id: i, .. } => {
                        prop_assert_eq!(&i, &id);
                        outcomes += 1;
                    }
                    _ => {}
                }
            }
            while e.poll_transmit().is_some() {}
        }
        e.handle_eof();
        while let Some(ev) = e.poll_event() {
            if let EndpointEvent::Outcome { id: i, .. } = ev {
                prop_assert_eq!(&i, &id);
                outcomes += 1;
            }
        }
        prop_assert_eq!(outcomes, 1);
    }

    /// Structured-but-hostile JSON-RPC lines never panic either.
    #[test]
    fn hostile_messages_never_panic(
        lines in proptest::collection::vec(
            prop_oneof![
                Just(r#"{"jsonrpc":"2.0","id":0,"result":1}"#.to_string()),
                Just(r#"{"jsonrpc":"2.0","id":"0","result":1}"#.to_string()),
                Just(r#"{"jsonrpc":"2.0","id":0.5,"error":{"code":1,"message":"m"}}"#.to_string()),
                Just(r#"{"jsonrpc":"2.0","id":1,"method":"$/cancelRequest","params":{"id":1}}"#.to_string()),
                Just(r#"{"jsonrpc":"2.0","method":"$/cancel_request","params":{"id":1}}"#.to_string()),
                Just(r#"{"jsonrpc":"2.0","id":1,"method":"m\u0000\"x","params":[]}"#.to_string()),
                Just(r#"[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","id":1,"method":"b"}]"#.to_string()),
                Just("[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]".to_string()),
                "[a-z{}\\[\\]\":,0-9 ]{0,40}",
            ],
            0..30,
        ),
        answer in any::<bool>(),
    ) {
        let mut config = EndpointConfig::new(Framing::Ndjson);
        config.batch_policy = BatchPolicy::Allow;
        let mut e = Endpoint::new(Role::Server, config);
        let _ = e.send_request(T0, "m", &(), None).unwrap();
        for line in lines {
            e.handle_bytes(T0, format!("{line}\n").as_bytes());
            while let Some(ev) = e.poll_event() {
                if let EndpointEvent::Request(r) = ev {
                    if answer {
                        prop_assert!(e.respond(r.id(), &r.method().to_string()).is_ok());
                    }
                }
            }
        }
        let mut bytes = 0;
        while let Some(frame) = e.poll_transmit() {
            prop_assert_eq!(frame.last(), Some(&b'\n'));
            prop_assert!(!frame[..frame.len() - 1].contains(&b'\n'));
            for line in frame.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
                prop_assert!(serde_json::from_slice::<Value>(line).is_ok());
            }
            bytes += frame.len();
        }
        prop_assert_eq!(e.outbox_bytes(), 0);
        let _ = bytes;
    }
}
