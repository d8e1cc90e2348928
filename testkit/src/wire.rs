//! A tiny Content-Length client, independent of the core, shared by the runtime tests
//! (`agentwire-tokio`'s `runtime` tier, `agentwire-cli`'s `e2e` tier).
#![allow(dead_code)]

use std::io;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};

/// A generous bound for anything that should be prompt, so slow CI machines don't flake.
pub const PROMPT: Duration = Duration::from_secs(10);

/// `Content-Length: N\r\n\r\n` + body.
pub fn frame(body: &Value) -> Vec<u8> {
    let body = serde_json::to_vec(body).expect("serialize");
    let mut out = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    out.extend_from_slice(&body);
    out
}

/// A `ping` request with the given id (and optional message).
pub fn ping(id: u64, message: Option<&str>) -> Vec<u8> {
    let params = match message {
        Some(m) => json!({ "message": m }),
        None => json!({}),
    };
    frame(&json!({"jsonrpc": "2.0", "id": id, "method": "ping", "params": params}))
}

/// Reads Content-Length framed JSON bodies.
pub struct FrameReader<R> {
    inner: BufReader<R>,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    pub fn new(r: R) -> Self {
        FrameReader {
            inner: BufReader::new(r),
        }
    }

    /// The next frame's body as JSON; `Ok(None)` on a clean end of stream before a frame.
    pub async fn next(&mut self) -> io::Result<Option<Value>> {
        let mut len: Option<usize> = None;
        let mut first = true;
        loop {
            let mut line = String::new();
            let n = self.inner.read_line(&mut line).await?;
            if n == 0 {
                if first {
                    return Ok(None);
                }
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "eof in headers",
                ));
            }
            first = false;
            let line = line.trim_end_matches(['\r', '\n']);
            if line.is_empty() {
                break;
            }
            let (name, value) = line
                .split_once(':')
                .ok_or_else(|| bad(format!("bad header line {line:?}")))?;
            if name.eq_ignore_ascii_case("content-length") {
                len = Some(
                    value
                        .trim()
                        .parse()
                        .map_err(|_| bad(format!("bad length {value:?}")))?,
                );
            }
        }
        let len = len.ok_or_else(|| bad("no Content-Length".into()))?;
        let mut body = vec![0u8; len];
        self.inner.read_exact(&mut body).await?;
        serde_json::from_slice(&body)
            .map(Some)
            .map_err(|e| bad(format!("bad JSON body: {e}")))
    }

    /// The next frame, which must arrive within [`PROMPT`].
    pub async fn expect(&mut self) -> Value {
        match tokio::time::timeout(PROMPT, self.next()).await {
            Ok(Ok(Some(v))) => v,
            Ok(Ok(None)) => panic!("stream ended, expected a frame"),
            Ok(Err(e)) => panic!("reading a frame failed: {e}"),
            Err(_) => panic!("no frame within {PROMPT:?}"),
        }
    }

    /// Skips frames (e.g. notifications) until the response with `id`.
    pub async fn response(&mut self, id: u64) -> Value {
        loop {
            let v = self.expect().await;
            if v.get("id") == Some(&json!(id)) && v.get("method").is_none() {
                return v;
            }
        }
    }
}

fn bad(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

/// Sends a ping and checks its response: a `result` with `protocolVersion` 3.
pub async fn ping_ok<R, W>(reader: &mut FrameReader<R>, writer: &mut W, id: u64)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    writer.write_all(&ping(id, None)).await.expect("write ping");
    writer.flush().await.expect("flush");
    let resp = reader.response(id).await;
    assert_pong(&resp);
}

/// Asserts that `resp` is a successful ping response.
pub fn assert_pong(resp: &Value) {
    assert_eq!(resp["jsonrpc"], "2.0", "response: {resp}");
    assert_eq!(
        resp["result"]["protocolVersion"], 3,
        "ping result must carry protocolVersion 3: {resp}"
    );
    assert!(
        resp["result"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("pong")),
        "ping result message: {resp}"
    );
}
