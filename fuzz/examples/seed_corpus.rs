//! Writes the seed corpora `fuzz/corpus/<target>/` from the recorded wire traces.
//!
//! ```text
//! cargo run --manifest-path fuzz/Cargo.toml --example seed_corpus -- [TRACES_DIR] [CORPUS_DIR]
//! ```
//!
//! Defaults: the repository's `tests/fixtures/traces` and `fuzz/corpus`. Each trace line is one frame
//! (`{"dir", "header", "msg"}`); the client's frames become:
//!
//! * `jsonrpc_parse`: one file per distinct kind of message (method, or response / error), plus
//!   hand-written edge cases;
//! * `content_length_decoder` / `ndjson_decoder`: each trace's client stream, framed, behind the
//!   two control bytes the targets read (limits, chunking), plus framed-recipe seeds;
//! * `host_sequence`: each trace replayed as host operations (bodies, deliveries, reads), with
//!   the trace's answers to permissions / tools / elicitations / commands turned into answers to
//!   whatever the host announced, plus a few hand-written sequences.
//!
//! File names are the target name plus a counter, so a rerun rewrites the same files.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use agentwire_fuzz::targets::{op, SequenceBuilder};
use serde_json::{json, Value};

struct Frame {
    client: bool,
    msg: Value,
}

fn read_trace(path: &Path) -> Vec<Frame> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|v| v.get("msg").is_some())
        .map(|v| Frame {
            client: v["dir"] == "client->server",
            msg: v["msg"].clone(),
        })
        .collect()
}

fn kind(msg: &Value) -> String {
    if let Some(m) = msg["method"].as_str() {
        let detail = msg["params"]["event"]["type"].as_str().unwrap_or("");
        format!("{m}:{detail}")
    } else if msg.get("error").is_some() {
        "error".to_owned()
    } else {
        "response".to_owned()
    }
}

fn content_length(body: &[u8]) -> Vec<u8> {
    let mut out = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    out.extend_from_slice(body);
    out
}

struct Writer {
    dir: PathBuf,
    target: &'static str,
    count: usize,
    bytes: usize,
}

impl Writer {
    fn new(root: &Path, target: &'static str) -> Writer {
        let dir = root.join(target);
        std::fs::create_dir_all(&dir).expect("create corpus dir");
        Writer {
            dir,
            target,
            count: 0,
            bytes: 0,
        }
    }

    fn write(&mut self, data: &[u8]) {
        let path = self.dir.join(format!("seed-{:03}", self.count));
        std::fs::write(&path, data).expect("write corpus file");
        self.count += 1;
        self.bytes += data.len();
    }

    fn report(&self) {
        println!(
            "{}: {} files, {} bytes",
            self.target, self.count, self.bytes
        );
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let traces = args.next().map(PathBuf::from).unwrap_or_else(|| {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/traces")
    });
    let root = PathBuf::from(args.next().unwrap_or_else(|| {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("corpus")
            .display()
            .to_string()
    }));
    let names = [
        "wire.jsonl",
        "wire2.jsonl",
        "wire-py.jsonl",
        "wire-mcpapps.jsonl",
        "stdio-tee.jsonl",
    ];
    let trace_frames: Vec<(String, Vec<Frame>)> = names
        .iter()
        .map(|n| (n.to_string(), read_trace(&traces.join(n))))
        .collect();

    // jsonrpc_parse: one body per distinct kind, both directions.
    let mut parse = Writer::new(&root, "jsonrpc_parse");
    let mut seen = BTreeSet::new();
    for (_, frames) in &trace_frames {
        for f in frames {
            let k = format!("{}:{}", f.client, kind(&f.msg));
            if seen.insert(k) {
                let body = serde_json::to_vec(&f.msg).expect("serialise");
                if body.len() <= 8 * 1024 {
                    parse.write(&body);
                }
            }
        }
    }
    let edge_cases: &[&[u8]] = &[
        br#"{"jsonrpc":"2.0","id":1.0,"method":"ping"}"#,
        br#"{"jsonrpc":"2.0","id":12345678901234567890,"method":"ping","params":[]}"#,
        br#"{"jsonrpc":"2.0","id":"\u0041","method":"p\u0069ng","params":{}}"#,
        br#"{"jsonrpc":"2\u002e0","id":null,"method":"x"}"#,
        br#"{"jsonrpc":"2.0","id":1,"id":2,"method":"x"}"#,
        br#"{"jsonrpc":"2.0","id":[1],"method":"x"}"#,
        br#"{"jsonrpc":"2.0","method":"x","params":3}"#,
        br#"{"jsonrpc":"2.0","id":7,"result":null}"#,
        br#"{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"m","data":[1,{"a":2}]}}"#,
        br#"{"jsonrpc":"2.0","id":7,"error":{"code":1.5,"message":"m"}}"#,
        br#"{"jsonrpc":"2.0","id":7,"result":1,"error":{"code":1,"message":""}}"#,
        br#"[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","method":"b"},3]"#,
        b"[]",
        b" \t\r\n{\"jsonrpc\":\"2.0\",\"method\":\"$/cancelRequest\",\"params\":{\"id\":4}} ",
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\"",
        b"\xff\xfe{}",
        b"42",
        b"\"2.0\"",
    ];
    for case in edge_cases {
        parse.write(case);
    }
    parse.report();

    // Decoders: each trace's client stream.
    let mut cl = Writer::new(&root, "content_length_decoder");
    let mut nd = Writer::new(&root, "ndjson_decoder");
    for (i, (_, frames)) in trace_frames.iter().enumerate() {
        let bodies: Vec<Vec<u8>> = frames
            .iter()
            .filter(|f| f.client)
            .map(|f| serde_json::to_vec(&f.msg).expect("serialise"))
            .collect();
        let mut stream = vec![0u8, i as u8 * 37];
        let mut lines = vec![0u8, i as u8 * 37];
        for (j, b) in bodies.iter().enumerate() {
            stream.extend_from_slice(&content_length(b));
            lines.extend_from_slice(b);
            lines.extend_from_slice(if j % 3 == 0 { b"\r\n" } else { b"\n" });
        }
        cl.write(&stream);
        nd.write(&lines);
        // The first few frames under small limits.
        let short: Vec<u8> = bodies
            .iter()
            .take(3)
            .flat_map(|b| content_length(b))
            .collect();
        let mut small = vec![1u8, 3];
        small.extend_from_slice(&short);
        cl.write(&small);
    }
    // Framed recipes (bit 2 of the config byte): variant, length, body.
    for (config, seed) in [(4u8, 1u8), (5, 9), (6, 200), (7, 3)] {
        let mut recipe = vec![config, seed];
        for (v, body) in [
            (0u8, &br#"{"jsonrpc":"2.0","id":0,"method":"ping"}"#[..]),
            (1, b"{}"),
            (2, b"[1,2]"),
            (3, b""),
            (4, b" x\r"),
            (9, b"{\"a\":\"\xc3\xa9\"}"),
        ] {
            recipe.push(v);
            recipe.push(body.len() as u8);
            recipe.extend_from_slice(body);
        }
        cl.write(&recipe);
        nd.write(&recipe);
    }
    for raw in [
        &b"\x00\x05Content-Length: 2\r\ncontent-length: 2\r\n\r\n{}"[..],
        b"\x00\x05Content-Length: -1\r\n\r\n",
        b"\x03\x05Content-Length: 99999999999999999999999\r\n\r\n",
        b"\x02\x05X: \x01\r\n\r\n",
        b"\x00\x05 Content-Length: 2\r\n\r\n{}",
        b"\x00\x05Content-Length: 2\n\n{}",
        b"\x01\x07\n\n   \r\n{\"a\":1}\r\n\t \n[]",
        b"\x03\x07 {}  \r\r\n12345678901\n",
    ] {
        cl.write(raw);
        nd.write(raw);
    }
    cl.report();
    nd.report();

    // host_sequence: the traces as host operations.
    let mut hs = Writer::new(&root, "host_sequence");
    for (i, (name, frames)) in trace_frames.iter().enumerate() {
        // Config: DEFAULT budget (4 % 5), no token, default limits.
        let mut seq = SequenceBuilder::new(4, i as u8);
        seq.push(&[op::OPEN, 0]);
        let mut answers = 0u8;
        for f in frames.iter().filter(|f| f.client) {
            let method = f.msg["method"].as_str().unwrap_or("");
            if method.starts_with("session.")
                && method.contains(".handlePending")
                && f.msg["params"].get("requestId").is_some()
            {
                // The trace's request ids are the runtime's: answer what this host announced.
                let variant = if f.msg["params"].get("error").is_some() {
                    3
                } else {
                    0
                };
                seq.answer(0, answers, variant).round_trip(0);
                answers = answers.wrapping_add(1);
                continue;
            }
            let body = serde_json::to_vec(&f.msg).expect("serialise");
            seq.body(0, &body).round_trip(0);
        }
        hs.write(&seq.bytes);
        println!("host_sequence seed from {name}: {} bytes", seq.bytes.len());
    }
    // Hand-written: two clients, tools, permissions, sleeps, streaming, a token, NDJSON.
    let req = |id: u64, method: &str, params: Value| -> Vec<u8> {
        serde_json::to_vec(&json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}))
            .expect("serialise")
    };
    let tools = json!([{"name":"get_weather"},{"name":"lookup","skipPermission":true}]);
    {
        let mut seq = SequenceBuilder::new(4, 1);
        seq.push(&[op::OPEN, 0, op::OPEN, 1]);
        seq.body(
            0,
            &req(
                0,
                "session.create",
                json!({"sessionId":"s0","tools":tools,"requestPermission":true,"streaming":true}),
            ),
        )
        .round_trip(0);
        seq.body(
            1,
            &req(
                0,
                "session.resume",
                json!({"sessionId":"s0","requestPermission":true,"requestElicitation":true}),
            ),
        )
        .round_trip(1);
        seq.body(
            0,
            &req(
                1,
                "session.sendAndWait",
                json!({"sessionId":"s0","prompt":"both please"}),
            ),
        )
        .round_trip(0)
        .round_trip(1);
        seq.answer(1, 0, 0)
            .round_trip(1)
            .answer(0, 0, 1)
            .round_trip(0);
        seq.answer(0, 1, 0)
            .round_trip(0)
            .answer(0, 2, 3)
            .round_trip(0);
        seq.body(
            1,
            &req(
                1,
                "session.ui.elicitation",
                json!({"sessionId":"s0","message":"?"}),
            ),
        )
        .round_trip(1)
        .round_trip(0);
        seq.body(
            0,
            &req(
                2,
                "session.send",
                json!({"sessionId":"s0","prompt":"slow down"}),
            ),
        )
        .round_trip(0)
        .timer()
        .timer();
        seq.body(1, &req(2, "session.abort", json!({"sessionId":"s0"})))
            .round_trip(1);
        seq.push(&[op::DRAIN_ALL]);
        hs.write(&seq.bytes);
    }
    {
        // Token required (bit 3), small limits (bit 4), NDJSON allowed (bit 5), budget 600.
        let mut seq = SequenceBuilder::new(0x38, 2);
        seq.push(&[op::OPEN, 0x80, op::OPEN, 1]);
        seq.body(0, &req(0, "ping", json!({}))).round_trip(0);
        seq.body(0, &req(1, "connect", json!({"token": "fuzz-token"})))
            .round_trip(0);
        seq.body(
            0,
            &req(
                2,
                "session.create",
                json!({"sessionId":"s1","streaming":true}),
            ),
        )
        .round_trip(0);
        seq.body(
            0,
            &req(
                3,
                "session.send",
                json!({"sessionId":"s1","prompt":"title"}),
            ),
        )
        .push(&[op::DELIVER, 0, 5, op::DELIVER, 0, 40, op::DELIVER_ALL, 0]);
        seq.body(0, &req(4, "session.getMessages", json!({"sessionId":"s1"})))
            .round_trip(0);
        seq.push(&[op::RAW, 1, 4, b'x', b'y', b'\r', b'\n', op::ROUND_TRIP, 1]);
        hs.write(&seq.bytes);
    }
    hs.report();
}
