//! The UI's state and protocol logic: keys and the host's bytes in, framed requests out. No
//! IO and no drawing, so whole conversations are unit-tested against scripted host messages.
//!
//! The UI is an ordinary Copilot SDK client of the host. It `connect`s, shows the foreground
//! session (creating one and making it foreground when there is none), and follows the
//! `session.foreground` lifecycle notification when another client switches sessions: it
//! detaches from the old session, joins the new one (`session.resume` with `disableResume`)
//! and loads its history (`session.getMessages`). It attaches with `requestPermission` and
//! `requestElicitation`, so permission prompts and forms are answered from the keyboard.

use bytes::Bytes;
use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use serde_json::{json, Map, Value};

use super::peer::{Inbound, Peer};
use super::transcript::{Field, LineKind, Prompt, Transcript};

/// How many rows PageUp / PageDown scroll.
const PAGE: usize = 10;

/// What a request in flight was for.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Call {
    Connect,
    GetForeground,
    Create,
    SetForeground,
    /// Joining this session.
    Resume(String),
    /// Loading this session's history.
    History(String),
    Detach,
    Send,
    Answer,
}

impl Call {
    fn method(&self) -> &'static str {
        match self {
            Call::Connect => "connect",
            Call::GetForeground => "session.getForeground",
            Call::Create => "session.create",
            Call::SetForeground => "session.setForeground",
            Call::Resume(_) => "session.resume",
            Call::History(_) => "session.getMessages",
            Call::Detach => "session.detach",
            Call::Send => "session.send",
            Call::Answer => "answer",
        }
    }
}

/// What the keyboard currently does, for the view.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Mode<'a> {
    /// Typing a prompt.
    Chat,
    /// A permission prompt: `y` approves, `n` or Esc denies.
    Permission {
        /// What is asked.
        summary: &'a str,
    },
    /// Filling in a form, one field at a time: Enter submits the field, Esc declines.
    Form {
        /// The question.
        message: &'a str,
        /// The field being filled in (`None`: a form without fields, Enter accepts).
        field: Option<&'a Field>,
        /// 0-based index of that field.
        step: usize,
        /// Number of fields.
        steps: usize,
    },
}

/// The line being edited.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Input {
    text: String,
    /// Cursor position in characters.
    cursor: usize,
}

impl Input {
    /// The text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The cursor position, in characters from the start.
    pub fn cursor(&self) -> usize {
        self.cursor
    }

    fn byte_at(&self, chars: usize) -> usize {
        self.text
            .char_indices()
            .nth(chars)
            .map_or(self.text.len(), |(i, _)| i)
    }

    fn insert(&mut self, c: char) {
        let at = self.byte_at(self.cursor);
        self.text.insert(at, c);
        self.cursor += 1;
    }

    fn backspace(&mut self) {
        if self.cursor > 0 {
            self.cursor -= 1;
            let at = self.byte_at(self.cursor);
            self.text.remove(at);
        }
    }

    fn delete(&mut self) {
        if self.cursor < self.text.chars().count() {
            let at = self.byte_at(self.cursor);
            self.text.remove(at);
        }
    }

    fn take(&mut self) -> String {
        self.cursor = 0;
        std::mem::take(&mut self.text)
    }

    /// Applies an editing key; false if the key does not edit.
    fn edit(&mut self, key: &KeyEvent) -> bool {
        let len = self.text.chars().count();
        match key.code {
            KeyCode::Char(c)
                if !key
                    .modifiers
                    .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT) =>
            {
                self.insert(c)
            }
            KeyCode::Backspace => self.backspace(),
            KeyCode::Delete => self.delete(),
            KeyCode::Left => self.cursor = self.cursor.saturating_sub(1),
            KeyCode::Right => self.cursor = (self.cursor + 1).min(len),
            KeyCode::Home => self.cursor = 0,
            KeyCode::End => self.cursor = len,
            _ => return false,
        }
        true
    }
}

/// Progress through a form: which field is next and the values so far.
#[derive(Debug)]
struct FormProgress {
    request_id: String,
    step: usize,
    content: Map<String, Value>,
}

/// Settings the UI takes from the server's configuration.
#[derive(Clone, Debug, Default)]
pub struct AppOptions {
    /// The connection token to `connect` with (`COPILOT_CONNECTION_TOKEN`), if the host
    /// requires one.
    pub token: Option<String>,
    /// The working directory for sessions the UI creates.
    pub cwd: Option<String>,
}

/// The whole UI state.
#[derive(Debug)]
pub struct App {
    options: AppOptions,
    peer: Peer<Call>,
    session: Option<String>,
    /// Events of the session received while its history loads (applied after it).
    loading: Option<Vec<Value>>,
    transcript: Transcript,
    input: Input,
    form: Option<FormProgress>,
    status: String,
    /// Rows scrolled back from the bottom of the transcript.
    scroll: usize,
    quit: bool,
}

impl App {
    /// A UI that has not talked to the host yet; call [`App::start`].
    pub fn new(options: AppOptions) -> Self {
        App {
            options,
            peer: Peer::default(),
            session: None,
            loading: None,
            transcript: Transcript::new(),
            input: Input::default(),
            form: None,
            status: "connecting…".to_owned(),
            scroll: 0,
            quit: false,
        }
    }

    /// Sends the handshake and asks which session is in the foreground.
    pub fn start(&mut self) {
        let mut params = json!({});
        if let Some(token) = &self.options.token {
            params["token"] = json!(token);
        }
        self.peer.call("connect", params, Call::Connect);
        self.peer
            .call("session.getForeground", json!({}), Call::GetForeground);
    }

    /// The framed requests to write to the host since the last call.
    pub fn take_output(&mut self) -> Bytes {
        self.peer.take_output()
    }

    /// Whether the user asked to quit.
    pub fn should_quit(&self) -> bool {
        self.quit
    }

    /// The session shown, if any.
    pub fn session(&self) -> Option<&str> {
        self.session.as_deref()
    }

    /// The transcript of the session shown.
    pub fn transcript(&self) -> &Transcript {
        &self.transcript
    }

    /// The line being edited.
    pub fn input(&self) -> &Input {
        &self.input
    }

    /// The last status message.
    pub fn status(&self) -> &str {
        &self.status
    }

    /// Rows scrolled back from the bottom of the transcript.
    pub fn scroll(&self) -> usize {
        self.scroll
    }

    /// Clamps the scroll offset to what the view can show (`max` rows back).
    pub fn clamp_scroll(&mut self, max: usize) {
        self.scroll = self.scroll.min(max);
    }

    /// What the keyboard does now.
    pub fn mode(&self) -> Mode<'_> {
        match self.transcript.pending() {
            None => Mode::Chat,
            Some(Prompt::Permission { summary, .. }) => Mode::Permission { summary },
            Some(Prompt::Form {
                request_id,
                message,
                fields,
            }) => {
                let step = self
                    .form
                    .as_ref()
                    .filter(|f| &f.request_id == request_id)
                    .map_or(0, |f| f.step);
                Mode::Form {
                    message,
                    field: fields.get(step),
                    step,
                    steps: fields.len(),
                }
            }
        }
    }

    // ----- keys -----

    /// Handles one key press.
    pub fn on_key(&mut self, key: KeyEvent) {
        if key.kind == KeyEventKind::Release {
            return;
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        match key.code {
            KeyCode::Char('c') if ctrl => {
                self.quit = true;
                return;
            }
            KeyCode::Char('d') if ctrl && self.input.text.is_empty() => {
                self.quit = true;
                return;
            }
            KeyCode::PageUp => {
                self.scroll += PAGE;
                return;
            }
            KeyCode::PageDown => {
                self.scroll = self.scroll.saturating_sub(PAGE);
                return;
            }
            _ => {}
        }
        match self.transcript.pending().cloned() {
            Some(Prompt::Permission { request_id, .. }) => match key.code {
                KeyCode::Char('y' | 'Y') => self.answer_permission(&request_id, true),
                KeyCode::Char('n' | 'N') | KeyCode::Esc => {
                    self.answer_permission(&request_id, false)
                }
                _ => {}
            },
            Some(Prompt::Form {
                request_id, fields, ..
            }) => match key.code {
                KeyCode::Enter => self.submit_field(&request_id, &fields),
                KeyCode::Esc => self.answer_form(&request_id, "decline", None),
                _ => {
                    self.input.edit(&key);
                }
            },
            None => match key.code {
                KeyCode::Enter => self.submit_prompt(),
                _ => {
                    self.input.edit(&key);
                }
            },
        }
    }

    fn submit_prompt(&mut self) {
        let text = self.input.text.trim().to_owned();
        if text.is_empty() {
            return;
        }
        if text == "/quit" || text == "/exit" {
            self.quit = true;
            return;
        }
        let Some(session) = self.session.clone() else {
            self.status = "no session yet".to_owned();
            return;
        };
        self.input.take();
        self.scroll = 0;
        self.peer.call(
            "session.send",
            json!({"sessionId": session, "prompt": text}),
            Call::Send,
        );
    }

    fn answer_permission(&mut self, request_id: &str, approve: bool) {
        let Some(session) = self.session.clone() else {
            return;
        };
        let result = if approve {
            json!({"kind": "approve-once"})
        } else {
            json!({"kind": "reject"})
        };
        self.transcript.resolve(request_id);
        self.peer.call(
            "session.permissions.handlePendingPermissionRequest",
            json!({"sessionId": session, "requestId": request_id, "result": result}),
            Call::Answer,
        );
    }

    fn submit_field(&mut self, request_id: &str, fields: &[Field]) {
        let progress = match self.form.take() {
            Some(p) if p.request_id == request_id => p,
            _ => FormProgress {
                request_id: request_id.to_owned(),
                step: 0,
                content: Map::new(),
            },
        };
        let mut progress = progress;
        if let Some(field) = fields.get(progress.step) {
            match field.parse(self.input.text()) {
                Ok(value) => {
                    if let Some(value) = value {
                        progress.content.insert(field.name.clone(), value);
                    }
                    progress.step += 1;
                    self.input.take();
                }
                Err(problem) => {
                    self.status = problem;
                    self.form = Some(progress);
                    return;
                }
            }
        }
        if progress.step >= fields.len() {
            let content = (!fields.is_empty()).then_some(Value::Object(progress.content));
            self.answer_form(request_id, "accept", content);
        } else {
            self.form = Some(progress);
        }
    }

    fn answer_form(&mut self, request_id: &str, action: &str, content: Option<Value>) {
        self.form = None;
        self.input.take();
        let Some(session) = self.session.clone() else {
            return;
        };
        let mut result = json!({"action": action});
        if let Some(content) = content {
            result["content"] = content;
        }
        self.transcript.resolve(request_id);
        self.peer.call(
            "session.ui.handlePendingElicitation",
            json!({"sessionId": session, "requestId": request_id, "result": result}),
            Call::Answer,
        );
    }

    // ----- host messages -----

    /// Handles bytes read from the host.
    pub fn on_bytes(&mut self, bytes: &[u8]) {
        for message in self.peer.push(bytes) {
            self.on_message(message);
        }
    }

    /// Whether the connection to the host broke (its bytes broke the framing).
    pub fn is_disconnected(&self) -> bool {
        self.peer.is_closed()
    }

    fn on_message(&mut self, message: Inbound<Call>) {
        match message {
            Inbound::Response { purpose, outcome } => self.on_response(purpose, outcome),
            Inbound::Notification { method, params } => match method.as_str() {
                "session.event" => self.on_event(&params),
                "session.lifecycle" => self.on_lifecycle(&params),
                _ => {}
            },
        }
    }

    fn on_response(&mut self, call: Call, outcome: Result<Value, String>) {
        let result = match outcome {
            Ok(result) => result,
            Err(message) => {
                if let Call::Resume(session) | Call::History(session) = &call {
                    if self.session.as_deref() == Some(session) {
                        self.loading = None;
                    }
                }
                self.status = format!("{} failed: {message}", call.method());
                return;
            }
        };
        let session_id = result
            .get("sessionId")
            .and_then(Value::as_str)
            .map(str::to_owned);
        match call {
            Call::Connect => self.status = "connected".to_owned(),
            Call::GetForeground => match session_id {
                Some(session) => self.follow(session),
                None => self.create(),
            },
            Call::Create => {
                let Some(session) = session_id else {
                    self.status = "session.create returned no sessionId".to_owned();
                    return;
                };
                self.show(session.clone());
                self.status = "new session".to_owned();
                self.peer.call(
                    "session.setForeground",
                    json!({"sessionId": session}),
                    Call::SetForeground,
                );
            }
            Call::History(session) if self.session.as_deref() == Some(session.as_str()) => {
                self.transcript.clear();
                let history = result.get("events").and_then(Value::as_array);
                for event in history.into_iter().flatten() {
                    self.transcript.apply(event);
                }
                for event in self.loading.take().unwrap_or_default() {
                    self.transcript.apply(&event);
                }
            }
            Call::Answer if result.get("success") == Some(&Value::Bool(false)) => {
                self.status = "the answer came too late (already answered?)".to_owned();
            }
            _ => {}
        }
    }

    fn on_event(&mut self, params: &Value) {
        let session = params.get("sessionId").and_then(Value::as_str);
        if session.is_none() || session != self.session.as_deref() {
            return;
        }
        let event = params.get("event").cloned().unwrap_or(Value::Null);
        match &mut self.loading {
            Some(buffer) => buffer.push(event),
            None => self.transcript.apply(&event),
        }
    }

    fn on_lifecycle(&mut self, params: &Value) {
        let kind = params.get("type").and_then(Value::as_str).unwrap_or("");
        let Some(session) = params.get("sessionId").and_then(Value::as_str) else {
            return;
        };
        let current = self.session.as_deref() == Some(session);
        match kind {
            "session.foreground" if !current => self.follow(session.to_owned()),
            "session.deleted" if current => {
                self.session = None;
                self.loading = None;
                self.transcript.clear();
                self.status = "the session was deleted; starting a new one".to_owned();
                self.create();
            }
            _ => {}
        }
    }

    /// Shows `session` from now on (its events only), forgetting the previous one.
    fn show(&mut self, session: String) {
        if let Some(old) = self.session.take() {
            if old != session {
                // Leave the old session, so its prompts go to clients that can show them.
                self.peer
                    .call("session.detach", json!({"sessionId": old}), Call::Detach);
            }
        }
        self.session = Some(session);
        self.loading = None;
        self.transcript.clear();
        self.form = None;
        self.scroll = 0;
    }

    /// Joins an existing session and loads its history.
    fn follow(&mut self, session: String) {
        self.show(session.clone());
        self.loading = Some(Vec::new());
        self.status = format!("following session {session}");
        self.transcript
            .note(LineKind::Info, format!("following session {session}"));
        self.peer.call(
            "session.resume",
            json!({"sessionId": session, "disableResume": true,
                   "requestPermission": true, "requestElicitation": true}),
            Call::Resume(session.clone()),
        );
        self.peer.call(
            "session.getMessages",
            json!({"sessionId": session}),
            Call::History(session),
        );
    }

    fn create(&mut self) {
        let mut params = json!({"requestPermission": true, "requestElicitation": true});
        if let Some(cwd) = &self.options.cwd {
            params["workingDirectory"] = json!(cwd);
        }
        self.peer.call("session.create", params, Call::Create);
    }
}

#[cfg(test)]
mod tests;
