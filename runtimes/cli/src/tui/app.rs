//! The UI's state and protocol logic: keys and host messages in, framed requests out. No IO
//! and no drawing, so whole conversations are unit-tested against scripted host messages.
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

use super::rpc::{Inbound, Requests};
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
    requests: Requests<Call>,
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
            requests: Requests::default(),
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
        self.requests.call("connect", params, Call::Connect);
        self.requests
            .call("session.getForeground", json!({}), Call::GetForeground);
    }

    /// The framed requests to write to the host since the last call.
    pub fn take_output(&mut self) -> Bytes {
        self.requests.take_output()
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
        self.requests.call(
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
        self.requests.call(
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
        self.requests.call(
            "session.ui.handlePendingElicitation",
            json!({"sessionId": session, "requestId": request_id, "result": result}),
            Call::Answer,
        );
    }

    // ----- host messages -----

    /// Handles one message from the host.
    pub fn on_message(&mut self, message: Inbound) {
        match message {
            Inbound::Response { id, outcome } => {
                if let Some(call) = self.requests.finish(id) {
                    self.on_response(call, outcome);
                }
            }
            Inbound::Notification { method, params } => match method.as_str() {
                "session.event" => self.on_event(&params),
                "session.lifecycle" => self.on_lifecycle(&params),
                _ => {}
            },
            // The UI attaches with no capability that makes the host call it; say so.
            Inbound::Request { id, method } => self.requests.reject(&id, &method),
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
                self.requests.call(
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
                self.requests
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
        self.requests.call(
            "session.resume",
            json!({"sessionId": session, "disableResume": true,
                   "requestPermission": true, "requestElicitation": true}),
            Call::Resume(session.clone()),
        );
        self.requests.call(
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
        self.requests.call("session.create", params, Call::Create);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::rpc::decode;
    use agentwire_tokio::agentwire::frame::{FrameDecoder, FrameLimits, Framing};

    /// The requests in `bytes`, as (id, method, params).
    fn sent(app: &mut App) -> Vec<(u64, String, Value)> {
        let bytes = app.take_output();
        let mut frames = FrameDecoder::new(Framing::ContentLength, FrameLimits::default());
        frames.push(&bytes).unwrap();
        let mut out = Vec::new();
        while let Some(body) = frames.next_frame().unwrap() {
            let v: Value = serde_json::from_slice(&body).unwrap();
            out.push((
                v["id"].as_u64().unwrap_or(0),
                v["method"].as_str().unwrap_or("").to_owned(),
                v["params"].clone(),
            ));
        }
        out
    }

    fn methods(requests: &[(u64, String, Value)]) -> Vec<&str> {
        requests.iter().map(|(_, m, _)| m.as_str()).collect()
    }

    fn reply(app: &mut App, id: u64, result: Value) {
        app.on_message(Inbound::Response {
            id: Some(id),
            outcome: Ok(result),
        });
    }

    fn notify(app: &mut App, method: &str, params: Value) {
        app.on_message(Inbound::Notification {
            method: method.into(),
            params,
        });
    }

    fn event(app: &mut App, session: &str, id: &str, ty: &str, data: Value) {
        notify(
            app,
            "session.event",
            json!({"sessionId": session, "event": {"type": ty, "data": data, "id": id}}),
        );
    }

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    fn type_line(app: &mut App, text: &str) {
        for c in text.chars() {
            app.on_key(key(KeyCode::Char(c)));
        }
        app.on_key(key(KeyCode::Enter));
    }

    /// An app that created session `s1` (no foreground session existed).
    fn started() -> App {
        let mut app = App::new(AppOptions {
            token: Some("tok".into()),
            cwd: Some("/w".into()),
        });
        app.start();
        let out = sent(&mut app);
        assert_eq!(methods(&out), ["connect", "session.getForeground"]);
        assert_eq!(out[0].2, json!({"token": "tok"}));
        reply(&mut app, out[0].0, json!({"ok": true}));
        reply(&mut app, out[1].0, json!({}));
        let out = sent(&mut app);
        assert_eq!(methods(&out), ["session.create"]);
        assert_eq!(
            out[0].2,
            json!({"requestPermission": true, "requestElicitation": true,
                   "workingDirectory": "/w"})
        );
        reply(&mut app, out[0].0, json!({"sessionId": "s1"}));
        let out = sent(&mut app);
        assert_eq!(methods(&out), ["session.setForeground"]);
        assert_eq!(out[0].2, json!({"sessionId": "s1"}));
        assert_eq!(app.session(), Some("s1"));
        app
    }

    #[test]
    fn creates_a_session_sends_prompts_and_shows_the_answer() {
        let mut app = started();
        type_line(&mut app, "hello");
        let out = sent(&mut app);
        assert_eq!(methods(&out), ["session.send"]);
        assert_eq!(out[0].2, json!({"sessionId": "s1", "prompt": "hello"}));
        assert_eq!(app.input().text(), "");
        event(
            &mut app,
            "s1",
            "e1",
            "user.message",
            json!({"content": "hello"}),
        );
        event(
            &mut app,
            "other",
            "x",
            "user.message",
            json!({"content": "no"}),
        );
        event(
            &mut app,
            "s1",
            "e2",
            "assistant.message",
            json!({"content": "You said: hello"}),
        );
        let lines: Vec<_> = app.transcript().lines().iter().map(|l| &l.text).collect();
        assert_eq!(lines, ["hello", "You said: hello"]);
        // Empty input sends nothing; /quit quits.
        app.on_key(key(KeyCode::Enter));
        assert!(sent(&mut app).is_empty());
        type_line(&mut app, "/quit");
        assert!(app.should_quit());
    }

    #[test]
    fn joins_the_foreground_session_at_start() {
        let mut app = App::new(AppOptions::default());
        app.start();
        let out = sent(&mut app);
        reply(&mut app, out[1].0, json!({"sessionId": "fg"}));
        let out = sent(&mut app);
        assert_eq!(methods(&out), ["session.resume", "session.getMessages"]);
        assert_eq!(out[0].2["disableResume"], true);
        assert_eq!(out[0].2["requestPermission"], true);
        assert_eq!(app.session(), Some("fg"));
    }

    #[test]
    fn follows_the_foreground_and_loads_history_in_order() {
        let mut app = started();
        event(
            &mut app,
            "s1",
            "a",
            "user.message",
            json!({"content": "old"}),
        );
        notify(
            &mut app,
            "session.lifecycle",
            json!({"type": "session.foreground", "sessionId": "s1"}),
        );
        assert!(sent(&mut app).is_empty(), "its own session: nothing to do");
        notify(
            &mut app,
            "session.lifecycle",
            json!({"type": "session.foreground", "sessionId": "s2"}),
        );
        let out = sent(&mut app);
        assert_eq!(
            methods(&out),
            ["session.detach", "session.resume", "session.getMessages"]
        );
        assert_eq!(out[0].2, json!({"sessionId": "s1"}));
        assert_eq!(app.session(), Some("s2"));
        // A live event overtakes the history response: it is applied after the history,
        // and once.
        event(
            &mut app,
            "s2",
            "h2",
            "assistant.message",
            json!({"content": "B"}),
        );
        event(
            &mut app,
            "s2",
            "h3",
            "user.message",
            json!({"content": "C"}),
        );
        assert!(app.transcript().lines().iter().all(|l| l.text != "C"));
        reply(&mut app, out[1].0, json!({"sessionId": "s2"}));
        reply(
            &mut app,
            out[2].0,
            json!({"events": [
                {"type": "user.message", "data": {"content": "A"}, "id": "h1"},
                {"type": "assistant.message", "data": {"content": "B"}, "id": "h2"}]}),
        );
        let lines: Vec<_> = app.transcript().lines().iter().map(|l| &l.text).collect();
        assert_eq!(lines, ["A", "B", "C"]);
        event(
            &mut app,
            "s2",
            "h4",
            "assistant.message",
            json!({"content": "D"}),
        );
        assert_eq!(app.transcript().lines().last().unwrap().text, "D");
    }

    #[test]
    fn permission_prompts_take_y_and_n() {
        let mut app = started();
        event(
            &mut app,
            "s1",
            "p",
            "permission.requested",
            json!({"requestId": "r1", "permissionRequest": {"kind": "read", "path": "/a"}}),
        );
        assert_eq!(
            app.mode(),
            Mode::Permission {
                summary: "read request: /a"
            }
        );
        app.on_key(key(KeyCode::Char('x')));
        assert!(sent(&mut app).is_empty());
        assert_eq!(app.input().text(), "", "keys do not leak into the input");
        app.on_key(key(KeyCode::Char('y')));
        let out = sent(&mut app);
        assert_eq!(
            out[0].1,
            "session.permissions.handlePendingPermissionRequest"
        );
        assert_eq!(
            out[0].2,
            json!({"sessionId": "s1", "requestId": "r1", "result": {"kind": "approve-once"}})
        );
        assert_eq!(app.mode(), Mode::Chat);
        event(
            &mut app,
            "s1",
            "q",
            "permission.requested",
            json!({"requestId": "r2", "permissionRequest": {}}),
        );
        app.on_key(key(KeyCode::Char('n')));
        assert_eq!(sent(&mut app)[0].2["result"], json!({"kind": "reject"}));
    }

    #[test]
    fn forms_are_filled_field_by_field() {
        let mut app = started();
        event(
            &mut app,
            "s1",
            "f",
            "elicitation.requested",
            json!({"requestId": "e1", "message": "Who?", "requestedSchema": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
                "required": ["name", "age"]}}),
        );
        let Mode::Form { field, steps, .. } = app.mode() else {
            panic!("expected a form");
        };
        assert_eq!((field.map(|f| f.name.as_str()), steps), (Some("name"), 2));
        type_line(&mut app, "Ada");
        assert!(matches!(app.mode(), Mode::Form { step: 1, .. }));
        type_line(&mut app, "old");
        assert!(app.status().contains("whole number"), "{}", app.status());
        assert!(sent(&mut app).is_empty());
        app.on_key(key(KeyCode::Home));
        for _ in 0..3 {
            app.on_key(key(KeyCode::Delete));
        }
        type_line(&mut app, "36");
        let out = sent(&mut app);
        assert_eq!(out[0].1, "session.ui.handlePendingElicitation");
        assert_eq!(
            out[0].2["result"],
            json!({"action": "accept", "content": {"name": "Ada", "age": 36}})
        );
        assert_eq!(app.mode(), Mode::Chat);

        event(
            &mut app,
            "s1",
            "g",
            "elicitation.requested",
            json!({"requestId": "e2", "message": "Sure?"}),
        );
        app.on_key(key(KeyCode::Esc));
        assert_eq!(sent(&mut app)[0].2["result"], json!({"action": "decline"}));
    }

    #[test]
    fn errors_odd_messages_and_host_requests_are_handled() {
        let mut app = started();
        type_line(&mut app, "hi");
        let out = sent(&mut app);
        app.on_message(Inbound::Response {
            id: Some(out[0].0),
            outcome: Err("Session not found".into()),
        });
        assert_eq!(app.status(), "session.send failed: Session not found");
        // Unknown ids, unknown notifications and events without a session are ignored.
        reply(&mut app, 999, json!({}));
        notify(&mut app, "brand.new", json!(null));
        notify(&mut app, "session.event", json!({"event": {}}));
        notify(&mut app, "session.lifecycle", json!({"type": 3}));
        // A request from the host is answered with -32601.
        let request = decode(br#"{"jsonrpc":"2.0","id":7,"method":"hooks.invoke"}"#).unwrap();
        app.on_message(request);
        let bytes = app.take_output();
        assert!(std::str::from_utf8(&bytes).unwrap().contains("-32601"));
        // Deleting the shown session starts a new one.
        notify(
            &mut app,
            "session.lifecycle",
            json!({"type": "session.deleted", "sessionId": "s1"}),
        );
        assert_eq!(methods(&sent(&mut app)), ["session.create"]);
        assert_eq!(app.session(), None);
    }

    #[test]
    fn input_editing_and_quit_keys() {
        let mut app = started();
        for c in "helo".chars() {
            app.on_key(key(KeyCode::Char(c)));
        }
        app.on_key(key(KeyCode::Left));
        app.on_key(key(KeyCode::Char('l')));
        app.on_key(key(KeyCode::End));
        app.on_key(key(KeyCode::Backspace));
        assert_eq!(app.input().text(), "hell");
        assert_eq!(app.input().cursor(), 4);
        app.on_key(key(KeyCode::PageUp));
        assert_eq!(app.scroll(), PAGE);
        app.clamp_scroll(3);
        assert_eq!(app.scroll(), 3);
        app.on_key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL));
        assert!(app.should_quit());
    }
}
