//! The fake model endpoint of `--model-deltas`: a loopback HTTP/1.1 server (std threads, one
//! per connection, `Connection: close`) answering `POST …/chat/completions` with an SSE
//! stream of M `chat.completion.chunk` text deltas, then a `stop` chunk and `[DONE]`. Each
//! delta's text is the time it was written in nanoseconds (`"<now_ns> "`), so the clients
//! measure emit-to-receipt from the endpoint's write to their receipt of the
//! `assistant.message_delta`, the whole model path included.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};

use crate::now_ns;

/// The running endpoint: its base URL (`http://127.0.0.1:PORT/v1`). The acceptor thread
/// lives until the process ends (a run's server is killed before the next starts).
pub(crate) struct FakeModel {
    pub(crate) base_url: String,
}

impl FakeModel {
    /// Starts an endpoint streaming `deltas` deltas per response, `batch` SSE events per
    /// write.
    pub(crate) fn start(deltas: u64, batch: u64) -> Result<FakeModel, String> {
        let listener =
            TcpListener::bind(("127.0.0.1", 0)).map_err(|e| format!("fake model: bind: {e}"))?;
        let port = listener
            .local_addr()
            .map_err(|e| format!("fake model: {e}"))?
            .port();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                std::thread::spawn(move || {
                    if let Err(e) = serve(stream, deltas, batch.max(1)) {
                        eprintln!("fake model: {e}");
                    }
                });
            }
        });
        Ok(FakeModel {
            base_url: format!("http://127.0.0.1:{port}/v1"),
        })
    }
}

/// Reads one request: its method, path and (Content-Length) body, discarded.
fn read_request(reader: &mut impl BufRead) -> std::io::Result<Option<(String, String)>> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_owned();
    let path = parts.next().unwrap_or_default().to_owned();
    let mut len = 0u64;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 || h == "\r\n" || h == "\n" {
            break;
        }
        if let Some((name, value)) = h.split_once(':') {
            if name.trim().eq_ignore_ascii_case("content-length") {
                len = value.trim().parse().unwrap_or(0);
            }
        }
    }
    std::io::copy(&mut reader.take(len), &mut std::io::sink())?;
    Ok(Some((method, path)))
}

/// One text chunk as SSE (the first also carries the role).
fn push_chunk(out: &mut String, content: Option<u64>, first: bool, finish: bool) {
    out.push_str(
        "data: {\"id\":\"chatcmpl-load\",\"object\":\"chat.completion.chunk\",\"created\":0,\
         \"model\":\"fake-model\",\"choices\":[{\"index\":0,\"delta\":{",
    );
    if first {
        out.push_str("\"role\":\"assistant\"");
    }
    if let Some(ns) = content {
        if first {
            out.push(',');
        }
        let _ = write!(out, "\"content\":\"{ns} \"");
    }
    out.push_str("},\"finish_reason\":");
    out.push_str(if finish { "\"stop\"" } else { "null" });
    out.push_str("}]}\n\n");
}

/// Writes `data` as one HTTP chunk.
fn write_chunk(stream: &mut TcpStream, data: &str) -> std::io::Result<()> {
    let mut framed = Vec::with_capacity(data.len() + 16);
    let _ = write!(framed, "{:x}\r\n", data.len());
    framed.extend_from_slice(data.as_bytes());
    framed.extend_from_slice(b"\r\n");
    stream.write_all(&framed)
}

fn serve(stream: TcpStream, deltas: u64, batch: u64) -> std::io::Result<()> {
    let _ = stream.set_nodelay(true);
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut stream = stream;
    let Some((method, path)) = read_request(&mut reader)? else {
        return Ok(());
    };
    if method != "POST" || !path.ends_with("/chat/completions") {
        let body = "404 page not found";
        let head = format!(
            "HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        stream.write_all(head.as_bytes())?;
        return stream.write_all(body.as_bytes());
    }
    stream.write_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\
          Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
    )?;
    let mut events = String::with_capacity(256 * batch as usize);
    let mut sent = 0;
    while sent < deltas {
        events.clear();
        let n = batch.min(deltas - sent);
        for i in 0..n {
            push_chunk(&mut events, Some(now_ns()), sent + i == 0, false);
        }
        sent += n;
        write_chunk(&mut stream, &events)?;
    }
    events.clear();
    push_chunk(&mut events, None, false, true);
    events.push_str("data: [DONE]\n\n");
    write_chunk(&mut stream, &events)?;
    stream.write_all(b"0\r\n\r\n")?;
    stream.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_are_chat_completion_json() {
        let mut out = String::new();
        push_chunk(&mut out, Some(42), true, false);
        let json: serde_json::Value =
            serde_json::from_str(out.strip_prefix("data: ").unwrap().trim()).unwrap();
        assert_eq!(json["choices"][0]["delta"]["content"], "42 ");
        assert_eq!(json["choices"][0]["delta"]["role"], "assistant");
        out.clear();
        push_chunk(&mut out, None, false, true);
        let json: serde_json::Value =
            serde_json::from_str(out.strip_prefix("data: ").unwrap().trim()).unwrap();
        assert_eq!(json["choices"][0]["finish_reason"], "stop");
        assert_eq!(json["choices"][0]["delta"], serde_json::json!({}));
    }
}
