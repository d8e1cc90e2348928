//! One AHP load client (`--ahp`): a WebSocket connection to the server's `--ahp-port`
//! listener, subscribed to its session's chat, counting the `chat/delta` actions it receives
//! and their emit-to-receipt latency. Client 0 of a session creates it (`createSession`) and
//! starts the turn (`chat/turnStarted`); every client is done at `chat/turnComplete`.
//!
//! AHP actions are never dropped and carry no event ids: there is no durable check against
//! the session's log for these clients (a lost action would show as a missing delta).

use std::time::Instant;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::client::ClientCtx;
use crate::progress::Phase;
use crate::{lock, now_ns, ClientStats};

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Sends request `method` with id `id` and reads until its answer (actions meanwhile are
/// dropped: nothing streams before the run starts).
async fn call(ws: &mut Ws, id: u64, method: &str, params: Value) -> Result<Value, String> {
    let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    ws.send(Message::text(request.to_string()))
        .await
        .map_err(|e| format!("{method}: {e}"))?;
    loop {
        let message = ws
            .next()
            .await
            .ok_or_else(|| format!("{method}: the connection closed"))?
            .map_err(|e| format!("{method}: {e}"))?;
        let Message::Text(text) = message else {
            continue;
        };
        let answer: Value =
            serde_json::from_str(text.as_str()).map_err(|e| format!("{method}: {e}"))?;
        if answer["id"] == json!(id) {
            if let Some(error) = answer.get("error") {
                return Err(format!("{method} failed: {error}"));
            }
            return Ok(answer["result"].clone());
        }
    }
}

/// The leading nanosecond stamp of a delta's content (`"{now_ns} "`).
fn stamp(content: &str) -> Option<u64> {
    content.split(' ').next()?.parse().ok()
}

pub(crate) async fn ahp_client(ctx: ClientCtx, port: u16) -> Result<ClientStats, String> {
    let session = &ctx.session;
    let run = &ctx.run;
    let session_uri = format!("ahp-session:/{}", session.session_id);
    let chat = format!("ahp-chat:/{}", session.session_id);
    if ctx.idx != 0 {
        session
            .created_tx
            .subscribe()
            .wait_for(|c| *c)
            .await
            .map_err(|_| "the session was never created")?;
    }
    let mut ws = {
        let _permit = run
            .setup
            .acquire()
            .await
            .map_err(|_| "setup semaphore closed")?;
        ctx.progress.at_port(port);
        let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://127.0.0.1:{port}"))
            .await
            .map_err(|e| format!("websocket connect: {e}"))?;
        call(
            &mut ws,
            1,
            "initialize",
            json!({"channel": "ahp-root://", "protocolVersions": ["1.0.0"],
                   "clientId": format!("load-{}-{}", session.home, ctx.idx)}),
        )
        .await?;
        if ctx.idx == 0 {
            call(&mut ws, 2, "createSession", json!({"channel": session_uri})).await?;
            session.created_tx.send_replace(true);
        }
        call(&mut ws, 3, "subscribe", json!({"channel": chat})).await?;
        ws
    };
    ctx.progress.set(Phase::Attached);
    // Nothing streams before client 0 starts the turn, after the barrier.
    run.attached.wait().await;
    let mut stats = ClientStats {
        latencies: Vec::with_capacity(run.deltas as usize),
        ..ClientStats::default()
    };
    if ctx.idx == 0 {
        run.go
            .subscribe()
            .wait_for(|go| *go)
            .await
            .map_err(|_| "the run was never started")?;
        *lock(&session.sent_at) = Some(Instant::now());
        let dispatch = json!({"jsonrpc": "2.0", "method": "dispatchAction", "params": {
            "channel": chat, "clientSeq": 1, "action": {
                "type": "chat/turnStarted", "turnId": "load", "startedAt": "1970-01-01T00:00:00Z",
                "message": {"text": session.prompt, "origin": {"kind": "user"}}}}});
        ws.send(Message::text(dispatch.to_string()))
            .await
            .map_err(|e| format!("dispatchAction: {e}"))?;
    }
    ctx.progress.set(Phase::Streaming);
    loop {
        let message = ws
            .next()
            .await
            .ok_or_else(|| {
                format!(
                    "the server closed the connection before chat/turnComplete ({} deltas received)",
                    stats.deltas
                )
            })?
            .map_err(|e| format!("read: {e}"))?;
        let received = now_ns();
        let Message::Text(text) = message else {
            continue;
        };
        let body: Value =
            serde_json::from_str(text.as_str()).map_err(|e| format!("bad frame: {e}"))?;
        if body["method"] != "action" {
            continue;
        }
        let action = &body["params"]["action"];
        if let Some(reason) = body["params"]["rejectionReason"].as_str() {
            return Err(format!("the turn was rejected: {reason}"));
        }
        stats.events += 1;
        match action["type"].as_str().unwrap_or("") {
            "chat/delta" => {
                stats.deltas += 1;
                ctx.progress.deltas(stats.deltas);
                if let Some(emitted) = action["content"].as_str().and_then(stamp) {
                    stats.latencies.push(received.saturating_sub(emitted));
                }
            }
            // The part the deltas append to: the AHP counterpart of `assistant.message_start`.
            "chat/responsePart" => stats.starts += 1,
            "chat/turnComplete" | "chat/error" | "chat/turnCancelled" => {
                stats.idle_at = Some(Instant::now());
                break;
            }
            _ => {}
        }
    }
    ctx.progress.set(Phase::Idle);
    run.idled.wait().await;
    ctx.progress.set(Phase::Done);
    Ok(stats)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_stamp_is_the_leading_number() {
        assert_eq!(
            super::stamp("1795983976952000000 "),
            Some(1_795_983_976_952_000_000)
        );
        assert_eq!(super::stamp("x "), None);
    }
}
