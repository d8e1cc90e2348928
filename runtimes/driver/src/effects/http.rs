//! Performs the HTTP exchanges the host asks for (`EffectOp::HttpRequest` / `HttpCancel`),
//! the same on every runtime: each request runs as a blocking `ureq` call (rustls) on a plain
//! thread, whose response start, body chunks (fed as they arrive), end or transport error are
//! queued, in order, for one driver task that feeds them to the host
//! (`EffectEvent::HttpHead`, `HttpBody`, `HttpEnd`, `HttpError`).
//! The host enforces the model's deadlines itself; the thread only has coarse connect and
//! total backstops. A cancelled exchange stops at its next chunk and reports nothing more.

use std::collections::HashMap;
use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use agentwire::host::{EffectEvent, EffectId};
use agentwire::model::{HttpMethod, HttpRequest, TransportErrorKind};

use super::Port;
use crate::sync::{lock, Queue};

/// Exchanges in flight: effect id → its cancel flag.
#[derive(Default)]
pub(super) struct Https {
    running: Mutex<HashMap<EffectId, Arc<AtomicBool>>>,
}

impl Https {
    /// Abandons exchange `id`: its thread stops at the next chunk, nothing more is reported.
    pub(super) fn cancel(&self, id: EffectId) {
        if let Some(flag) = lock(&self.running).remove(&id) {
            flag.store(true, Ordering::SeqCst);
        }
    }
}

/// Size of the chunks a body is read in.
const CHUNK: usize = 16 * 1024;
/// Backstops; the host's own deadlines are tighter.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
const TOTAL_TIMEOUT: Duration = Duration::from_secs(60 * 60);

fn agent() -> &'static ureq::Agent {
    static AGENT: OnceLock<ureq::Agent> = OnceLock::new();
    AGENT.get_or_init(|| {
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(CONNECT_TIMEOUT))
            .timeout_global(Some(TOTAL_TIMEOUT))
            .max_redirects(0)
            .build()
            .into()
    })
}

/// Starts exchange `id`. Runs outside the host lock.
pub(super) fn start(https: &Arc<Https>, port: &Arc<dyn Port>, id: EffectId, request: HttpRequest) {
    let cancelled = Arc::new(AtomicBool::new(false));
    lock(&https.running).insert(id, cancelled.clone());
    let queue = Arc::new(Queue::new());
    let producer = queue.clone();
    let started = std::thread::Builder::new()
        .name(format!("agentwire-http-{}", id.get()))
        .spawn(move || exchange(request, &cancelled, &producer));
    if let Err(e) = started {
        queue.push(EffectEvent::HttpError {
            kind: TransportErrorKind::Io,
            message: format!("cannot start the request thread: {e}"),
        });
    }
    port.spawn(Box::pin(report(https.clone(), port.clone(), id, queue)));
}

/// Feeds what the exchange did to the host until it ends (or is cancelled).
async fn report(
    https: Arc<Https>,
    port: Arc<dyn Port>,
    id: EffectId,
    queue: Arc<Queue<EffectEvent>>,
) {
    loop {
        let event = queue.pop().await;
        if !lock(&https.running).contains_key(&id) {
            return;
        }
        let last = matches!(event, EffectEvent::HttpEnd | EffectEvent::HttpError { .. });
        port.clone().report(id, event);
        if last {
            lock(&https.running).remove(&id);
            return;
        }
    }
}

/// Performs one request on this thread.
fn exchange(request: HttpRequest, cancelled: &AtomicBool, out: &Queue<EffectEvent>) {
    let response = match request.method {
        HttpMethod::Get => {
            let mut req = agent().get(&request.url);
            for h in &request.headers {
                req = req.header(h.name.as_str(), h.value.as_str());
            }
            req.call()
        }
        HttpMethod::Post => {
            let mut req = agent().post(&request.url);
            for h in &request.headers {
                req = req.header(h.name.as_str(), h.value.as_str());
            }
            req.send(&request.body[..])
        }
    };
    let response = match response {
        Ok(r) => r,
        Err(e) => {
            let (kind, message) = classify(&e);
            out.push(EffectEvent::HttpError {
                kind,
                message: request.scrub(&message),
            });
            return;
        }
    };
    let headers = response
        .headers()
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_owned(),
                v.to_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    out.push(EffectEvent::HttpHead {
        status: response.status().as_u16(),
        headers,
    });
    let mut reader = response.into_body().into_reader();
    let mut buf = vec![0u8; CHUNK];
    loop {
        if cancelled.load(Ordering::SeqCst) {
            return;
        }
        match reader.read(&mut buf) {
            Ok(0) => {
                out.push(EffectEvent::HttpEnd);
                return;
            }
            Ok(n) => out.push(EffectEvent::HttpBody(buf[..n].to_vec())),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                let kind = match e.kind() {
                    std::io::ErrorKind::TimedOut => TransportErrorKind::Timeout,
                    _ => TransportErrorKind::Io,
                };
                out.push(EffectEvent::HttpError {
                    kind,
                    message: request.scrub(&e.to_string()),
                });
                return;
            }
        }
    }
}

/// The transport failure class of a `ureq` error, and its message.
fn classify(e: &ureq::Error) -> (TransportErrorKind, String) {
    let kind = match e {
        ureq::Error::HostNotFound | ureq::Error::ConnectionFailed => TransportErrorKind::Connect,
        ureq::Error::Io(io) => match io.kind() {
            std::io::ErrorKind::ConnectionRefused
            | std::io::ErrorKind::AddrNotAvailable
            | std::io::ErrorKind::NotFound => TransportErrorKind::Connect,
            std::io::ErrorKind::TimedOut => TransportErrorKind::Timeout,
            _ => TransportErrorKind::Io,
        },
        ureq::Error::Timeout(_) => TransportErrorKind::Timeout,
        ureq::Error::Tls(_) | ureq::Error::Rustls(_) | ureq::Error::TlsRequired => {
            TransportErrorKind::Tls
        }
        _ => TransportErrorKind::Io,
    };
    (kind, e.to_string())
}
