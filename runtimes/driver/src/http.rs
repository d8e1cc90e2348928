//! Performs the HTTP exchanges the host asks for (`Output::HttpRequest` / `Output::HttpCancel`),
//! the same on every runtime: each request runs as a blocking `ureq` call (rustls) on a plain
//! thread, whose response start, body chunks (fed as they arrive), end or transport error are
//! queued, in order, for one driver task that feeds them to the host
//! (`Host::handle_http_response`, `handle_http_body`, `handle_http_end`, `handle_http_error`).
//! The host enforces the model's deadlines itself; the thread only has coarse connect and
//! total backstops. A cancelled exchange stops at its next chunk and reports nothing more.

use std::collections::HashMap;
use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use agentwire::model::{HttpMethod, HttpRequest, TransportErrorKind};

use crate::shared::Shared;
use crate::sync::{lock, Queue};

/// What the host asked for.
pub(crate) enum HttpCommand {
    Start { call: u64, request: HttpRequest },
    Cancel { call: u64 },
}

/// Exchanges in flight: call id → its cancel flag.
#[derive(Default)]
pub(crate) struct Https {
    running: Mutex<HashMap<u64, Arc<AtomicBool>>>,
}

/// What an exchange did, in order.
enum Report {
    Response(u16, Vec<(String, String)>),
    Body(Vec<u8>),
    End,
    Error(TransportErrorKind, String),
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

/// Starts or cancels an exchange. Runs outside the host lock.
pub(crate) fn perform(shared: &Arc<Shared>, command: HttpCommand) {
    match command {
        HttpCommand::Start { call, request } => {
            let cancelled = Arc::new(AtomicBool::new(false));
            lock(&shared.https.running).insert(call, cancelled.clone());
            let queue = Arc::new(Queue::new());
            let producer = queue.clone();
            let started = std::thread::Builder::new()
                .name(format!("agentwire-http-{call}"))
                .spawn(move || exchange(request, &cancelled, &producer));
            if let Err(e) = started {
                queue.push(Report::Error(
                    TransportErrorKind::Io,
                    format!("cannot start the request thread: {e}"),
                ));
            }
            shared.spawn(report(shared.clone(), call, queue));
        }
        HttpCommand::Cancel { call } => {
            if let Some(flag) = lock(&shared.https.running).remove(&call) {
                flag.store(true, Ordering::SeqCst);
            }
        }
    }
}

/// Feeds what the exchange did to the host until it ends (or is cancelled).
async fn report(shared: Arc<Shared>, call: u64, queue: Arc<Queue<Report>>) {
    loop {
        let report = queue.pop().await;
        if !lock(&shared.https.running).contains_key(&call) {
            return;
        }
        let last = matches!(report, Report::End | Report::Error(..));
        shared.with_inner(|inner, now| match &report {
            Report::Response(status, headers) => {
                inner.host.handle_http_response(now, call, *status, headers)
            }
            Report::Body(bytes) => inner.host.handle_http_body(now, call, bytes),
            Report::End => inner.host.handle_http_end(now, call),
            Report::Error(kind, message) => inner.host.handle_http_error(now, call, *kind, message),
        });
        if last {
            lock(&shared.https.running).remove(&call);
            return;
        }
    }
}

/// Performs one request on this thread.
fn exchange(request: HttpRequest, cancelled: &AtomicBool, out: &Queue<Report>) {
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
            out.push(Report::Error(kind, request.scrub(&message)));
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
    out.push(Report::Response(response.status().as_u16(), headers));
    let mut reader = response.into_body().into_reader();
    let mut buf = vec![0u8; CHUNK];
    loop {
        if cancelled.load(Ordering::SeqCst) {
            return;
        }
        match reader.read(&mut buf) {
            Ok(0) => {
                out.push(Report::End);
                return;
            }
            Ok(n) => out.push(Report::Body(buf[..n].to_vec())),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                let kind = match e.kind() {
                    std::io::ErrorKind::TimedOut => TransportErrorKind::Timeout,
                    _ => TransportErrorKind::Io,
                };
                out.push(Report::Error(kind, request.scrub(&e.to_string())));
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
