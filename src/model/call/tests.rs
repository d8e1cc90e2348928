//! Tests of the call state machine.

use std::time::Duration;

use bytes::Bytes;

use super::faults::retry_after;
use super::*;
use crate::model::http::{HttpHeader, HttpMethod};

const URL: &str = "http://127.0.0.1:18080/v1/chat/completions";

fn request() -> HttpRequest {
    HttpRequest {
        method: HttpMethod::Post,
        url: URL.into(),
        headers: vec![HttpHeader::secret("authorization", "Bearer sk-top-secret")],
        body: Bytes::from_static(b"{}"),
    }
}

fn t(ms: u64) -> Timestamp {
    Timestamp::from_millis(1_000_000 + ms)
}

fn start(config: CallConfig) -> ModelCall {
    let mut call = ModelCall::new(
        t(0),
        request(),
        StreamDialect::OpenAiChat,
        "fake-model",
        config,
    );
    assert!(matches!(call.poll(), Some(CallOutput::Send(r)) if r.url == URL));
    call
}

fn drain(call: &mut ModelCall) -> Vec<CallOutput> {
    std::iter::from_fn(|| call.poll()).collect()
}

/// The length of TEXT's first event, blank line included.
fn first_event_end() -> usize {
    TEXT.windows(2).position(|w| w == b"\n\n").unwrap() + 2
}

fn sse() -> Vec<(String, String)> {
    vec![("Content-Type".into(), "text/event-stream".into())]
}

fn failed(outs: &[CallOutput]) -> &ModelError {
    match outs.last() {
        Some(CallOutput::Failed(e)) => e,
        other => panic!("not failed: {other:?} in {outs:?}"),
    }
}

const TEXT: &[u8] = b"data: {\"id\":\"chatcmpl-2\",\"choices\":[{\"delta\":{\"content\":\"It is \"}}]}\n\n\
data: {\"id\":\"chatcmpl-2\",\"choices\":[{\"delta\":{\"content\":\"sunny in Paris.\"},\"finish_reason\":\"stop\"}]}\n\n\
data: {\"id\":\"chatcmpl-2\",\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":5}}\n\n\
data: [DONE]\n\n";

#[test]
fn a_streamed_answer_completes() {
    let mut call = start(CallConfig::default());
    call.handle_response(t(5), 200, &sse());
    for chunk in TEXT.chunks(7) {
        call.handle_body(t(10), chunk);
    }
    let outs = drain(&mut call);
    let texts: Vec<_> = outs
        .iter()
        .filter_map(|o| match o {
            CallOutput::Event(ModelEvent::TextDelta(s)) => Some(s.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(texts, ["It is ", "sunny in Paris."]);
    let Some(CallOutput::Event(ModelEvent::Done(r))) = outs.last() else {
        panic!("{outs:?}")
    };
    assert_eq!(r.text, "It is sunny in Paris.");
    assert_eq!(r.response_id.as_deref(), Some("chatcmpl-2"));
    assert_eq!(call.state(), CallState::Completed);
    assert_eq!(call.next_deadline(), None);
    assert_eq!(call.timing().first_byte, Some(t(10)));
    // Input after the end is ignored.
    call.handle_body(t(11), b"data: junk\n\n");
    call.handle_end(t(12));
    assert!(drain(&mut call).is_empty());
}

#[test]
fn unauthorized_names_the_url_never_the_key() {
    let mut call = start(CallConfig::default());
    call.handle_response(t(1), 401, &[]);
    call.handle_body(t(2), br#"{"error":{"message":"Incorrect API key provided: sk-top-secret","type":"invalid_request_error"}}"#);
    call.handle_end(t(3));
    let outs = drain(&mut call);
    let e = failed(&outs);
    assert_eq!(e.kind, ModelErrorKind::Unauthorized);
    assert_eq!(e.status, Some(401));
    assert!(e.message.contains(URL), "{e}");
    assert!(!e.message.contains("sk-top-secret"), "{e}");
    assert!(
        e.message.contains("Incorrect API key provided: <redacted>"),
        "{e}"
    );
    assert_eq!(e.error_type(), "authentication");
}

#[test]
fn not_found_and_unknown_model() {
    let mut call = start(CallConfig::default());
    call.handle_response(t(1), 404, &[]);
    call.handle_body(
        t(2),
        br#"{"error":{"message":"model \"qwen9\" not found, try pulling it first"}}"#,
    );
    call.handle_end(t(3));
    let e = failed(&drain(&mut call)).clone();
    assert_eq!(e.kind, ModelErrorKind::NotFound);
    assert!(
        e.message
            .contains("The model `fake-model` is not available"),
        "{e}"
    );
    let mut call = start(CallConfig::default());
    call.handle_response(t(1), 404, &[]);
    call.handle_body(t(2), b"404 page not found");
    call.handle_end(t(3));
    let e = failed(&drain(&mut call)).clone();
    assert!(e.message.contains("baseUrl"), "{e}");
    let mut call = start(CallConfig::default());
    call.handle_response(t(1), 400, &[]);
    call.handle_body(
        t(2),
        br#"{"object":"error","message":"The model `x` does not exist.","code":404}"#,
    );
    call.handle_end(t(3));
    assert_eq!(failed(&drain(&mut call)).kind, ModelErrorKind::NotFound);
    let mut call = start(CallConfig::default());
    call.handle_response(t(1), 400, &[]);
    call.handle_body(t(2), br#"{"error":"tools not supported"}"#);
    call.handle_end(t(3));
    let e = failed(&drain(&mut call)).clone();
    assert_eq!(e.kind, ModelErrorKind::HttpStatus);
    assert!(
        e.message
            .contains("HTTP 400 Bad Request: tools not supported"),
        "{e}"
    );
}

#[test]
fn rate_limits_are_retried_honouring_retry_after_then_succeed() {
    let mut call = start(CallConfig::default());
    call.handle_response(t(1), 429, &[("Retry-After".into(), "2".into())]);
    let outs = drain(&mut call);
    assert_eq!(outs[0], CallOutput::Cancel);
    let CallOutput::Retrying {
        attempt,
        delay,
        message,
    } = &outs[1]
    else {
        panic!("{outs:?}")
    };
    assert_eq!((*attempt, *delay), (2, Duration::from_secs(2)));
    assert!(
        message.contains("HTTP 429 Too Many Requests; retrying in 2 s (attempt 2 of 4)"),
        "{message}"
    );
    assert_eq!(call.next_deadline(), Some(t(2001)));
    call.handle_timeout(t(2000));
    assert!(drain(&mut call).is_empty(), "not yet");
    call.handle_timeout(t(2001));
    assert!(matches!(drain(&mut call)[..], [CallOutput::Send(_)]));
    assert_eq!(call.attempt(), 2);
    call.handle_response(t(2002), 200, &sse());
    call.handle_body(t(2003), TEXT);
    assert!(matches!(
        drain(&mut call).last(),
        Some(CallOutput::Event(ModelEvent::Done(_)))
    ));
}

#[test]
fn server_errors_back_off_exponentially_and_give_up() {
    let config = CallConfig {
        max_retries: 2,
        ..CallConfig::default()
    };
    let mut call = start(config);
    let mut now = 0;
    let mut delays = Vec::new();
    for _ in 0..2 {
        call.handle_response(t(now), 503, &[]);
        let outs = drain(&mut call);
        let Some(CallOutput::Retrying { delay, .. }) = outs.get(1) else {
            panic!("{outs:?}")
        };
        delays.push(*delay);
        now += delay.as_millis() as u64;
        call.handle_timeout(t(now));
        assert!(matches!(drain(&mut call)[..], [CallOutput::Send(_)]));
    }
    assert_eq!(delays, [Duration::from_secs(1), Duration::from_secs(2)]);
    call.handle_response(t(now), 503, &[]);
    call.handle_body(t(now), b"upstream overloaded");
    call.handle_end(t(now));
    let e = failed(&drain(&mut call)).clone();
    assert_eq!(e.kind, ModelErrorKind::ServerError);
    assert!(
        e.message
            .contains("HTTP 503 Service Unavailable (after 3 attempts): upstream overloaded"),
        "{e}"
    );
}

#[test]
fn a_retry_after_too_long_is_not_waited_for() {
    let mut call = start(CallConfig::default());
    call.handle_response(t(0), 429, &[("retry-after".into(), "3600".into())]);
    call.handle_end(t(1));
    assert_eq!(failed(&drain(&mut call)).kind, ModelErrorKind::RateLimited);
}

#[test]
fn retry_after_forms() {
    let now = Timestamp::from_millis(784_111_777_000); // Sun, 06 Nov 1994 08:49:37 GMT
    let h = |k: &str, v: &str| vec![(k.to_owned(), v.to_owned())];
    assert_eq!(
        retry_after(&h("retry-after-ms", "250"), now),
        Some(Duration::from_millis(250))
    );
    assert_eq!(
        retry_after(&h("Retry-After", "1.5"), now),
        Some(Duration::from_millis(1500))
    );
    assert_eq!(
        retry_after(&h("Retry-After", "Sun, 06 Nov 1994 08:49:40 GMT"), now),
        Some(Duration::from_secs(3))
    );
    assert_eq!(
        retry_after(&h("Retry-After", "Sun, 06 Nov 1994 08:49:00 GMT"), now),
        Some(Duration::ZERO)
    );
    assert_eq!(retry_after(&h("Retry-After", "soon"), now), None);
    assert_eq!(retry_after(&h("Retry-After", "-1"), now), None);
}

#[test]
fn connect_failures_are_not_retried() {
    let mut call = start(CallConfig::default());
    call.handle_transport_error(
        t(1),
        TransportErrorKind::Connect,
        "Connection refused (os error 111)",
    );
    let e = failed(&drain(&mut call)).clone();
    assert_eq!(e.kind, ModelErrorKind::Connect);
    assert_eq!(
        e.message,
        format!("The model call could not connect to {URL}: Connection refused (os error 111)")
    );
    assert_eq!(e.error_type(), "network");
}

#[test]
fn a_cut_stream_is_an_error_and_keeps_what_arrived() {
    let mut call = start(CallConfig::default());
    call.handle_response(t(1), 200, &sse());
    call.handle_body(t(2), &TEXT[..first_event_end() + 10]);
    call.handle_end(t(3));
    let outs = drain(&mut call);
    assert!(matches!(&outs[0], CallOutput::Event(ModelEvent::TextDelta(s)) if s == "It is "));
    let e = failed(&outs);
    assert_eq!(e.kind, ModelErrorKind::StreamCut);
    assert!(e.message.contains(URL), "{e}");
    // A broken connection mid-stream.
    let mut call = start(CallConfig::default());
    call.handle_response(t(1), 200, &sse());
    call.handle_body(t(2), &TEXT[..first_event_end() + 10]);
    call.handle_transport_error(t(3), TransportErrorKind::Io, "connection reset");
    let outs = drain(&mut call);
    assert_eq!(failed(&outs).kind, ModelErrorKind::StreamCut);
    assert!(
        !outs.contains(&CallOutput::Cancel),
        "nothing left to cancel"
    );
}

#[test]
fn a_malformed_chunk_cancels_the_exchange() {
    let mut call = start(CallConfig::default());
    call.handle_response(t(1), 200, &sse());
    call.handle_body(
        t(2),
        b"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {not json}\n\n",
    );
    let outs = drain(&mut call);
    assert!(matches!(
        &outs[0],
        CallOutput::Event(ModelEvent::TextDelta(_))
    ));
    assert_eq!(outs[1], CallOutput::Cancel);
    assert_eq!(failed(&outs).kind, ModelErrorKind::MalformedStream);
}

#[test]
fn an_oversized_event_is_rejected() {
    let config = CallConfig {
        limits: SseLimits {
            max_event_bytes: 64,
        },
        ..CallConfig::default()
    };
    let mut call = start(config);
    call.handle_response(t(1), 200, &sse());
    call.handle_body(t(2), &[b'x'; 100]);
    let outs = drain(&mut call);
    let e = failed(&outs);
    assert_eq!(e.kind, ModelErrorKind::EventTooLarge);
    assert!(e.message.contains("64 bytes"), "{e}");
}

#[test]
fn deadlines_first_byte_idle_and_total() {
    let config = CallConfig {
        first_byte_timeout: Duration::from_secs(10),
        idle_timeout: Duration::from_secs(3),
        total_timeout: Duration::from_secs(60),
        ..CallConfig::default()
    };
    // First byte: the head alone does not count.
    let mut call = start(config.clone());
    assert_eq!(call.next_deadline(), Some(t(10_000)));
    call.handle_response(t(100), 200, &sse());
    assert_eq!(call.next_deadline(), Some(t(10_000)));
    call.handle_timeout(t(10_000));
    let outs = drain(&mut call);
    assert_eq!(outs[0], CallOutput::Cancel);
    assert_eq!(failed(&outs).kind, ModelErrorKind::FirstByteTimeout);
    // Idle: keep-alive comments keep the stream alive; silence stalls it.
    let mut call = start(config.clone());
    call.handle_response(t(1), 200, &sse());
    call.handle_body(
        t(2),
        b"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n",
    );
    assert_eq!(call.next_deadline(), Some(t(3_002)));
    call.handle_body(t(3_000), b": keep-alive\n\n");
    assert_eq!(call.next_deadline(), Some(t(6_000)));
    call.handle_timeout(t(6_000));
    let outs = drain(&mut call);
    let e = failed(&outs);
    assert_eq!(e.kind, ModelErrorKind::Stalled);
    assert!(
        e.message.contains("stalled: nothing arrived for 3 s"),
        "{e}"
    );
    // Total.
    let mut call = start(config);
    call.handle_response(t(1), 200, &sse());
    let mut now = 1;
    while now < 60_000 {
        now += 2_000;
        call.handle_body(t(now), b": ping\n\n");
    }
    assert_eq!(call.next_deadline(), Some(t(60_000)));
    call.handle_timeout(t(60_000));
    assert_eq!(failed(&drain(&mut call)).kind, ModelErrorKind::TotalTimeout);
}

#[test]
fn cancel_is_quiet_and_final() {
    let mut call = start(CallConfig::default());
    call.handle_response(t(1), 200, &sse());
    call.cancel(t(2));
    assert_eq!(drain(&mut call), [CallOutput::Cancel]);
    assert_eq!(call.state(), CallState::Cancelled);
    call.handle_body(t(3), TEXT);
    assert!(drain(&mut call).is_empty());
    assert_eq!(call.next_deadline(), None);
}

#[test]
fn a_json_body_instead_of_a_stream_is_accepted() {
    let mut call = start(CallConfig::default());
    call.handle_response(
        t(1),
        200,
        &[(
            "content-type".into(),
            "application/json; charset=utf-8".into(),
        )],
    );
    call.handle_body(
        t(2),
        b"{\"id\":\"c\",\"choices\":[{\"message\":{\"role\":\"assistant\",\n\"content\":\"hi\"},",
    );
    call.handle_body(t(3), b"\"finish_reason\":\"stop\"}]}");
    call.handle_end(t(4));
    let outs = drain(&mut call);
    let Some(CallOutput::Event(ModelEvent::Done(r))) = outs.last() else {
        panic!("{outs:?}")
    };
    assert_eq!(r.text, "hi");
}

#[test]
fn an_empty_success_body_is_a_cut() {
    let mut call = start(CallConfig::default());
    call.handle_response(t(1), 200, &sse());
    call.handle_end(t(2));
    assert_eq!(failed(&drain(&mut call)).kind, ModelErrorKind::StreamCut);
}

#[test]
fn a_body_that_is_not_an_event_stream_says_so() {
    let mut call = start(CallConfig::default());
    call.handle_response(t(1), 200, &[("content-type".into(), "text/html".into())]);
    call.handle_body(t(2), b"<html><body>Login required</body></html>");
    call.handle_end(t(3));
    let outs = drain(&mut call);
    let e = failed(&outs);
    assert_eq!(e.kind, ModelErrorKind::MalformedStream);
    assert!(
        e.message.contains(
            "not an event stream (content-type \"text/html\"): <html><body>Login required"
        ),
        "{e}"
    );
}
