//! Model HTTP performed by a client instead of the runtime.
//!
//! A connection may register as an *HTTP provider* ([`Host::register_http_provider`]): from
//! then on the model requests of every session it is attached to go to it, through its
//! dialect
//! ([`DialectHandler::start_provided_http`](crate::host::DialectHandler::start_provided_http)),
//! instead of being handed to the runtime as
//! [`EffectOp::HttpRequest`](crate::host::EffectOp::HttpRequest). The client's answers come back
//! through [`Host::provided_http_event`] and reach the session's agent exactly like the runtime's
//! reports ([`Host::handle_effect`]), so deadlines, retries and faults work the same.
//!
//! Rules:
//! * Only a provider attached to the session serves it (a client never sees the requests
//!   of sessions it is not in). The first attached provider serves each request.
//! * A session once served by a provider (or created / resumed by one) keeps its requests
//!   off the network: with no provider attached, a request fails at once with a reason.
//! * Credentials the *operator* configured (the server's default provider) are never sent
//!   to a client: their headers are dropped; a session's own provider settings came from its
//!   clients and are sent as they are.
//! * A provider whose connection closes fails its exchanges in flight as a transport error
//!   (the model call's error path: `session.error`, the turn ends).

use crate::agent::HttpEvent;
use crate::correlation::Outcome;
use crate::model::{HttpRequest, TransportErrorKind};

use crate::host::pending::ClientCall;
use crate::host::{ConnId, Host};

/// An HTTP exchange in flight.
#[derive(Clone, Debug)]
pub(crate) struct HttpCall {
    /// The session whose agent made it.
    pub(crate) session: String,
    /// The client performing it; `None`: the runtime ([`crate::host::EffectOp::HttpRequest`]).
    pub(crate) provider: Option<ConnId>,
    /// The sub-agent it is made for (its instance id); `None`: the session's main agent.
    pub(crate) agent: Option<String>,
}

/// Why a provided exchange failed when its connection closed.
const PROVIDER_LEFT: &str =
    "the client that performs this session's model requests disconnected mid-request";

impl Host {
    /// Registers `conn` as an HTTP provider for the sessions it is attached to. `false` when
    /// the connection is not open.
    pub(crate) fn register_http_provider(&mut self, conn: ConnId) -> bool {
        match self.conns.get_mut(&conn) {
            Some(c) if !c.closing => {
                c.http_provider = true;
                true
            }
            _ => false,
        }
    }

    /// Whether `conn` registered as an HTTP provider.
    pub(crate) fn is_http_provider(&self, conn: ConnId) -> bool {
        self.conns.get(&conn).is_some_and(|c| c.http_provider)
    }

    /// Whether a client performs `session`'s model requests when `conn` joins it: `conn`
    /// is a provider, one is attached, or one already served it. The operator's base-URL
    /// policy does not apply to such a session's providers (the runtime never connects to
    /// them).
    pub(crate) fn served_by_client(&self, session: &str, conn: ConnId) -> bool {
        self.is_http_provider(conn) || self.client_serves(session)
    }

    /// Whether a client performs `session`'s model requests: a provider is attached, or one
    /// already served it.
    pub(crate) fn client_serves(&self, session: &str) -> bool {
        self.sessions.get(session).is_some_and(|live| {
            live.client_transport
                || live
                    .session
                    .attached
                    .keys()
                    .any(|c| self.is_http_provider(*c))
        })
    }

    /// Marks `session`'s model requests as performed by a client, for as long as the
    /// session is loaded: with no provider attached they fail instead of reaching the
    /// network (see the module docs).
    pub(crate) fn mark_client_transport(&mut self, session: &str) {
        if let Some(live) = self.sessions.get_mut(session) {
            live.client_transport = true;
        }
    }

    /// Whether `conn` performs exchange `call`, still in flight.
    pub(crate) fn provides_http(&self, conn: ConnId, call: u64) -> bool {
        self.http_calls
            .get(&call)
            .is_some_and(|c| c.provider == Some(conn))
    }

    /// A provider's report about exchange `call`: it reaches the session's agent when `conn`
    /// is the provider performing that exchange. Returns whether it matched one.
    pub(crate) fn provided_http_event(
        &mut self,
        conn: ConnId,
        call: u64,
        event: HttpEvent,
    ) -> bool {
        let matched = self.provides_http(conn, call);
        if matched {
            let last = matches!(event, HttpEvent::End | HttpEvent::Error { .. });
            self.route_http_event(call, event, last);
        }
        matched
    }

    /// Sends an HTTP exchange's frame to its provider as a server-to-client request whose
    /// answer is only an acknowledgement (an error answer fails the exchange).
    pub(crate) fn send_http_frame(
        &mut self,
        conn: ConnId,
        call: u64,
        method: &str,
        params: &serde_json::Value,
    ) -> Result<(), String> {
        self.send_client_request(conn, method, params, ClientCall::Http { call })
    }

    /// The provider answered a frame of exchange `call`: an error (or no answer in time)
    /// fails the exchange.
    pub(crate) fn finish_http_frame(&mut self, call: u64, outcome: Outcome) {
        let message = match outcome {
            Outcome::Result(_) | Outcome::Closed | Outcome::Cancelled => return,
            Outcome::Error(e) => format!("the client refused the model request: {}", e.message),
            Outcome::TimedOut => "the client did not acknowledge the model request".to_owned(),
        };
        self.fail_provided(call, message);
    }

    /// Routes a new exchange to a provider attached to `session`, or fails it when the
    /// session's requests must not reach the network. `false`: the runtime performs it.
    pub(crate) fn start_provided_http(
        &mut self,
        call: u64,
        session: &str,
        request: &HttpRequest,
        agent: Option<&str>,
    ) -> bool {
        let Some(live) = self.sessions.get(session) else {
            return false;
        };
        let provider = live
            .session
            .attached
            .keys()
            .copied()
            .find(|c| self.is_http_provider(*c) && self.conn_is_open(*c));
        let client_transport = live.client_transport;
        let operator_credentials = live.model.catalog.is_none();
        self.http_calls.insert(
            call,
            HttpCall {
                session: session.to_owned(),
                provider,
                agent: agent.map(str::to_owned),
            },
        );
        let Some(conn) = provider else {
            if client_transport {
                self.fail_provided(
                    call,
                    "no client that performs this session's model requests is attached".to_owned(),
                );
                return true;
            }
            self.http_calls.remove(&call);
            return false;
        };
        self.mark_client_transport(session);
        let mut request = request.clone();
        if operator_credentials {
            request.headers.retain(|h| !h.sensitive);
        }
        let Some(dialect) = self.conn_dialect(conn) else {
            return true;
        };
        let handler = self.dialects[dialect.index()];
        if let Err(message) = handler.start_provided_http(self, conn, call, session, &request) {
            self.fail_provided(call, message);
        }
        true
    }

    /// Tells the provider `conn` to abandon exchange `call` (already forgotten here).
    pub(crate) fn cancel_provided_http(&mut self, conn: ConnId, call: u64) {
        if let Some(dialect) = self.conn_dialect(conn) {
            let handler = self.dialects[dialect.index()];
            handler.cancel_provided_http(self, conn, call);
        }
    }

    /// The provider `conn` is gone: its exchanges in flight fail.
    pub(crate) fn http_provider_left(&mut self, conn: ConnId) {
        let calls: Vec<u64> = self
            .http_calls
            .iter()
            .filter(|(_, c)| c.provider == Some(conn))
            .map(|(call, _)| *call)
            .collect();
        for call in calls {
            self.fail_provided(call, PROVIDER_LEFT.to_owned());
        }
    }

    /// Ends exchange `call` with a transport error (if it is still in flight).
    fn fail_provided(&mut self, call: u64, message: String) {
        let event = HttpEvent::Error {
            kind: TransportErrorKind::Io,
            message,
        };
        self.route_http_event(call, event, true);
    }
}
