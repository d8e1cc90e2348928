//! A fake OpenAI-compatible model endpoint for tests: a small HTTP/1.1 server on
//! `127.0.0.1` (std threads, one per connection, `Connection: close`) that streams Chat
//! Completions answers in the chosen [`FakeMode`] and records every request it received.
//!
//! Routes: `POST …/chat/completions` (OpenAI `/v1/…` and Azure `/openai/…`, answered per
//! mode), `POST /v1/messages` (the Anthropic Messages stream: text, or a `get_weather`
//! tool use in `ToolCall` mode) and `GET /v1/models` / `/openai/v1/models` (one model,
//! `fake-model`, or the ids of [`FakeModel::set_models`]); anything else (e.g. `/v2/…`) is a 404. The tool modes behave like the endpoint behind
//! the recorded traces: while the conversation's last message is not a `tool` result they
//! ask for `get_weather` (ids `call_1`, `call_2`), then they answer `It is sunny in Paris.`
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::{json, Value};

/// How the fake answers completions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FakeMode {
    /// `It is sunny in Paris.` in two deltas, a usage chunk, `[DONE]`.
    Text,
    /// One `get_weather` call (id and name, then the arguments), then text after the result.
    ToolCall,
    /// Two calls (`Paris`, `Lyon`) in one response, then text after the results.
    TwoToolCalls,
    /// `reasoning_content` deltas, then the text.
    Reasoning,
    /// The text without any usage chunk.
    NoUsage,
    /// The first completion gets `429` with `Retry-After: 0`; later ones are `Text`.
    RateLimitedOnce,
    /// `500` with a JSON error body.
    ServerError,
    /// The first text delta, then the connection closes mid-body (chunked, unterminated).
    CutMidStream,
    /// The first text delta, then silence (the connection stays open until the fake drops).
    Stall,
    /// The first text delta, then a chunk that is not JSON, then `[DONE]`.
    MalformedChunk,
    /// One call of the MCP tool `everything-echo` (`{"message": "hello from the model"}`),
    /// then text after the result.
    McpEcho,
    /// One call of `everything-trigger-sampling-request` (`{"prompt": "ping"}`), then text
    /// after the result; the server's sampling prompt (`Resource trigger-sampling-request
    /// context: …`) is answered with the text too.
    McpSample,
}

/// One scripted answer (see [`FakeModel::start_script`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FakeReply {
    /// Stream this text.
    Text(String),
    /// Ask for these tool calls, all in one response: `(id, name, arguments JSON)`.
    Tools(Vec<(String, String, String)>),
}

impl FakeReply {
    /// A response with one tool call.
    pub fn tool(id: &str, name: &str, arguments: Value) -> FakeReply {
        FakeReply::Tools(vec![(
            id.to_owned(),
            name.to_owned(),
            arguments.to_string(),
        )])
    }
}

/// One request as received.
#[derive(Clone, Debug)]
pub struct RecordedRequest {
    /// `GET` / `POST`.
    pub method: String,
    /// The path (and query).
    pub path: String,
    /// Headers, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// The body bytes.
    pub body: Vec<u8>,
}

impl RecordedRequest {
    /// The first header called `name` (lower-case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body parsed as JSON (`Null` if it is not).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

#[derive(Default)]
struct State {
    requests: Vec<RecordedRequest>,
    completions: u64,
    /// Scripted answers: completion `n` (1-based) gets `script[n - 1]`.
    script: Vec<FakeReply>,
    /// Scripts of their own for completions whose system prompt contains a marker
    /// ([`FakeModel::script_for`]): the marker, its script, how many it answered.
    keyed: Vec<(String, Vec<FakeReply>, usize)>,
    /// The ids `GET …/models` lists (empty: `fake-model`).
    models: Vec<String>,
}

/// The running fake. Dropping it stops the server (and releases stalled connections).
pub struct FakeModel {
    addr: SocketAddr,
    mode: Arc<Mutex<FakeMode>>,
    state: Arc<Mutex<State>>,
    shutdown: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
}

impl FakeModel {
    /// Starts a fake on an ephemeral port of 127.0.0.1.
    pub fn start(mode: FakeMode) -> FakeModel {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let mode = Arc::new(Mutex::new(mode));
        let state = Arc::new(Mutex::new(State::default()));
        let shutdown = Arc::new(AtomicBool::new(false));
        let acceptor = {
            let (mode, state, shutdown) = (mode.clone(), state.clone(), shutdown.clone());
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if shutdown.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    let (mode, state, shutdown) = (mode.clone(), state.clone(), shutdown.clone());
                    std::thread::spawn(move || {
                        let _ = serve(stream, &mode, &state, &shutdown);
                    });
                }
            })
        };
        FakeModel {
            addr,
            mode,
            state,
            shutdown,
            acceptor: Some(acceptor),
        }
    }

    /// Starts a fake whose completions answer `script` in order (completion `n` gets
    /// `script[n - 1]`; after the script, `Text` mode).
    pub fn start_script(script: Vec<FakeReply>) -> FakeModel {
        let fake = FakeModel::start(FakeMode::Text);
        fake.state.lock().unwrap().script = script;
        fake
    }

    /// Completions whose system prompt contains `marker` answer `script` in order (their
    /// own count, whatever other conversations run at the same time); they do not count
    /// for the main script. For conversations that run concurrently (a sub-agent beside
    /// its parent), so each gets its answers whatever order their requests arrive in.
    pub fn script_for(&self, marker: &str, script: Vec<FakeReply>) {
        self.state
            .lock()
            .unwrap()
            .keyed
            .push((marker.to_owned(), script, 0));
    }

    /// `http://127.0.0.1:PORT/v1`, the `baseUrl` to configure.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Sets the model ids `GET …/models` lists from now on.
    pub fn set_models(&self, ids: &[&str]) {
        self.state.lock().unwrap().models = ids.iter().map(|s| (*s).to_owned()).collect();
    }

    /// Switches the mode for later requests.
    pub fn set_mode(&self, mode: FakeMode) {
        *self.mode.lock().unwrap() = mode;
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.state.lock().unwrap().requests.clone()
    }

    /// The JSON bodies of the completion requests received so far.
    pub fn completion_bodies(&self) -> Vec<Value> {
        self.requests()
            .iter()
            .filter(|r| r.method == "POST")
            .map(RecordedRequest::json)
            .collect()
    }
}

impl Drop for FakeModel {
    fn drop(&mut self) {
        self.shutdown.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr); // wake the acceptor
        if let Some(t) = self.acceptor.take() {
            let _ = t.join();
        }
    }
}

fn read_request(stream: &TcpStream) -> std::io::Result<Option<RecordedRequest>> {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_owned();
    let path = parts.next().unwrap_or_default().to_owned();
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 || h == "\r\n" || h == "\n" {
            break;
        }
        if let Some((name, value)) = h.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
    }
    let len = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = vec![0; len];
    reader.read_exact(&mut body)?;
    Ok(Some(RecordedRequest {
        method,
        path,
        headers,
        body,
    }))
}

fn serve(
    mut stream: TcpStream,
    mode: &Mutex<FakeMode>,
    state: &Mutex<State>,
    shutdown: &AtomicBool,
) -> std::io::Result<()> {
    let Some(request) = read_request(&stream)? else {
        return Ok(());
    };
    let (method, path, body) = (request.method.clone(), request.path.clone(), request.json());
    let n = {
        let mut s = state.lock().unwrap();
        s.requests.push(request);
        if method == "POST" {
            s.completions += 1;
        }
        s.completions
    };
    let route = path.split('?').next().unwrap_or_default();
    match (method.as_str(), route) {
        ("GET", "/v1/models" | "/openai/v1/models") => {
            let mut ids = state.lock().unwrap().models.clone();
            if ids.is_empty() {
                ids.push("fake-model".to_owned());
            }
            let data: Vec<Value> = ids
                .iter()
                .map(|id| json!({"id": id, "object": "model", "owned_by": "fake"}))
                .collect();
            let body = json!({"object": "list", "data": data});
            return plain(&mut stream, 200, "OK", &[], &body.to_string());
        }
        ("POST", "/v1/messages") => {
            let mode = *mode.lock().unwrap();
            start_stream(&mut stream)?;
            for e in anthropic_events(mode, &body) {
                write_chunk(&mut stream, &e)?;
            }
            stream.write_all(b"0\r\n\r\n")?;
            return stream.flush();
        }
        // OpenAI (`/v1/…`) and Azure (`/openai/v1/…`, `/openai/deployments/M/…`).
        ("POST", r) if r.ends_with("/chat/completions") && r != "/v2/chat/completions" => {}
        _ => return plain(&mut stream, 404, "Not Found", &[], "404 page not found"),
    }
    let mode = *mode.lock().unwrap();
    let id = format!("chatcmpl-{n}");
    let after_tool = body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .is_some_and(|m| m["role"] == "tool");
    let text = text_events(&id, true);
    let scripted = {
        let mut state = state.lock().unwrap();
        let system = body["messages"][0]["content"].as_str().unwrap_or_default();
        match state
            .keyed
            .iter_mut()
            .find(|(m, _, _)| system.contains(m.as_str()))
        {
            Some((_, script, used)) => {
                *used += 1;
                script.get(*used - 1).cloned()
            }
            None => {
                // Completions answered from the keyed scripts do not move the main one.
                let keyed: usize = state.keyed.iter().map(|(_, _, used)| used).sum();
                state
                    .script
                    .get((n as usize).saturating_sub(keyed + 1))
                    .cloned()
            }
        }
    };
    let events = match (scripted, mode) {
        (Some(FakeReply::Text(t)), _) => vec![
            chunk(&id, json!({"role": "assistant", "content": t}), None),
            chunk(&id, json!({}), Some("stop")),
            usage(&id),
            "data: [DONE]\n\n".to_owned(),
        ],
        (Some(FakeReply::Tools(calls)), _) => scripted_tool_events(&id, &calls),
        (None, mode) => match mode {
            FakeMode::Text => text,
            FakeMode::ToolCall if after_tool => text,
            FakeMode::ToolCall => tool_events(&id, &[("call_1", "Paris")]),
            FakeMode::McpSample
                if after_tool
                    || body
                        .to_string()
                        .contains("Resource trigger-sampling-request") =>
            {
                text
            }
            FakeMode::McpSample => named_tool_events(
                &id,
                "everything-trigger-sampling-request",
                &json!({"prompt": "ping", "maxTokens": 10}),
            ),
            FakeMode::McpEcho if after_tool => text,
            FakeMode::McpEcho => named_tool_events(
                &id,
                "everything-echo",
                &json!({"message": "hello from the model"}),
            ),
            FakeMode::TwoToolCalls if after_tool => text,
            FakeMode::TwoToolCalls => tool_events(&id, &[("call_1", "Paris"), ("call_2", "Lyon")]),
            FakeMode::Reasoning => {
                let mut e = vec![
                    chunk(
                        &id,
                        json!({"role": "assistant", "reasoning_content": "The user asks "}),
                        None,
                    ),
                    chunk(&id, json!({"reasoning_content": "about Paris."}), None),
                ];
                e.extend(text);
                e
            }
            FakeMode::NoUsage => text_events(&id, false),
            FakeMode::RateLimitedOnce if n == 1 => {
                let body =
                    json!({"error": {"message": "Rate limit reached", "type": "rate_limit"}});
                return plain(
                    &mut stream,
                    429,
                    "Too Many Requests",
                    &[("Retry-After", "0")],
                    &body.to_string(),
                );
            }
            FakeMode::RateLimitedOnce => text,
            FakeMode::ServerError => {
                let body = json!({"error": {"message": "internal error", "type": "server_error"}});
                return plain(
                    &mut stream,
                    500,
                    "Internal Server Error",
                    &[],
                    &body.to_string(),
                );
            }
            FakeMode::CutMidStream => {
                start_stream(&mut stream)?;
                write_chunk(&mut stream, &text[0])?;
                return Ok(()); // closes without the terminating chunk
            }
            FakeMode::Stall => {
                start_stream(&mut stream)?;
                write_chunk(&mut stream, &text[0])?;
                while !shutdown.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(10));
                }
                return Ok(());
            }
            FakeMode::MalformedChunk => vec![
                text[0].clone(),
                "data: {\"choices\":[{\"delta\":{\"content\":\n\n".to_owned(),
                "data: [DONE]\n\n".to_owned(),
            ],
        },
    };
    start_stream(&mut stream)?;
    for e in &events {
        write_chunk(&mut stream, e)?;
    }
    stream.write_all(b"0\r\n\r\n")?;
    stream.flush()
}

fn chunk(id: &str, delta: Value, finish: Option<&str>) -> String {
    let c = json!({"id": id, "object": "chat.completion.chunk", "created": 1_764_612_000, "model": "fake-model",
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    format!("data: {c}\n\n")
}

fn usage(id: &str) -> String {
    let c = json!({"id": id, "object": "chat.completion.chunk", "model": "fake-model", "choices": [],
                   "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}});
    format!("data: {c}\n\n")
}

fn text_events(id: &str, with_usage: bool) -> Vec<String> {
    let mut e = vec![
        chunk(id, json!({"role": "assistant", "content": "It is "}), None),
        chunk(id, json!({"content": "sunny in Paris."}), None),
        chunk(id, json!({}), Some("stop")),
    ];
    if with_usage {
        e.push(usage(id));
    }
    e.push("data: [DONE]\n\n".to_owned());
    e
}

fn named_tool_events(id: &str, name: &str, arguments: &Value) -> Vec<String> {
    vec![
        chunk(
            id,
            json!({"role": "assistant", "content": null, "tool_calls": [{"index": 0, "id": "call_1",
                   "type": "function", "function": {"name": name, "arguments": arguments.to_string()}}]}),
            None,
        ),
        chunk(id, json!({}), Some("tool_calls")),
        usage(id),
        "data: [DONE]\n\n".to_owned(),
    ]
}

fn tool_events(id: &str, calls: &[(&str, &str)]) -> Vec<String> {
    let mut e = Vec::new();
    for (i, (call_id, city)) in calls.iter().enumerate() {
        e.push(chunk(
            id,
            json!({"role": "assistant", "content": null, "tool_calls": [{"index": i, "id": call_id, "type": "function",
                   "function": {"name": "get_weather", "arguments": ""}}]}),
            None,
        ));
        let args = json!({"city": city}).to_string();
        e.push(chunk(
            id,
            json!({"tool_calls": [{"index": i, "function": {"arguments": args}}]}),
            None,
        ));
    }
    e.push(chunk(id, json!({}), Some("tool_calls")));
    e.push(usage(id));
    e.push("data: [DONE]\n\n".to_owned());
    e
}

/// An Anthropic Messages stream: `get_weather` in `ToolCall` mode until a `tool_result`
/// came back, else the text answer.
fn anthropic_events(mode: FakeMode, body: &Value) -> Vec<String> {
    let event = |name: &str, data: Value| format!("event: {name}\ndata: {data}\n\n");
    let after_tool = body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_array())
        .is_some_and(|c| c.iter().any(|b| b["type"] == "tool_result"));
    let mut e = vec![event(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
               "role": "assistant", "model": "claude-fake", "content": [],
               "usage": {"input_tokens": 10, "output_tokens": 1}}}),
    )];
    if mode == FakeMode::ToolCall && !after_tool {
        e.push(event("content_block_start", json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}})));
        for part in ["{\"city\":", "\"Paris\"}"] {
            e.push(event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": part}}),
            ));
        }
        e.push(event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ));
        e.push(event(
            "message_delta",
            json!({"type": "message_delta",
            "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 5}}),
        ));
    } else {
        e.push(event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "text", "text": ""}}),
        ));
        for part in ["It is ", "sunny in Paris."] {
            e.push(event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": part}}),
            ));
        }
        e.push(event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ));
        e.push(event(
            "message_delta",
            json!({"type": "message_delta",
            "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 5}}),
        ));
    }
    e.push(event("message_stop", json!({"type": "message_stop"})));
    e
}

fn scripted_tool_events(id: &str, calls: &[(String, String, String)]) -> Vec<String> {
    let mut e = Vec::new();
    for (i, (call_id, name, args)) in calls.iter().enumerate() {
        e.push(chunk(
            id,
            json!({"role": "assistant", "tool_calls": [{"index": i, "id": call_id, "type": "function",
                   "function": {"name": name, "arguments": args}}]}),
            None,
        ));
    }
    e.push(chunk(id, json!({}), Some("tool_calls")));
    e.push(usage(id));
    e.push("data: [DONE]\n\n".to_owned());
    e
}

fn start_stream(stream: &mut TcpStream) -> std::io::Result<()> {
    stream.write_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\
          Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
    )?;
    stream.flush()
}

fn write_chunk(stream: &mut TcpStream, data: &str) -> std::io::Result<()> {
    write!(stream, "{:x}\r\n{data}\r\n", data.len())?;
    stream.flush()
}

fn plain(
    stream: &mut TcpStream,
    status: u16,
    reason: &str,
    extra: &[(&str, &str)],
    body: &str,
) -> std::io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n",
        if body.starts_with('{') { "application/json" } else { "text/plain" },
        body.len()
    );
    for (k, v) in extra {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())?;
    stream.flush()
}
