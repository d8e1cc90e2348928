//! Extensions and the agent factories they author.
//!
//! **Extensions.** With [`HostConfig::extensions`](super::HostConfig::extensions) set (the
//! runtime's `EXTENSIONS` feature flag), a session created with `requestExtensions: true`
//! starts the extensions it finds: every `<root>/<name>/extension.mjs` where the roots are the
//! session's `<cwd>/.github/extensions`, then the configured user directories (a name found
//! in an earlier root is not started again). The directories are listed with
//! [`FileRequest::Read`] effects; each extension is a process
//! (`node [--import <loader>] <dir>/<name>/extension.mjs`, in the session's working
//! directory, `SESSION_ID` in its environment) whose stdin and stdout are a Copilot SDK
//! connection of the host (Content-Length framing): what the process writes is fed to that
//! connection, what the host queues for it is written to its stdin
//! ([`EffectOp::ProcessWrite`]) when the runtime polls. The SDK's `joinSession` connects
//! and resumes the session over it. With the session's `extensionSdkPath`, the loader maps
//! `@github/copilot-sdk` and `@github/copilot-sdk/extension` to that folder's `index.js` and
//! `extension.js` (a Node module resolution hook passed as a `data:` URL), as the runtime
//! injects its SDK into the extensions it forks. The processes end when the client that
//! created the session lets go of it (`session.destroy`, its connection closing) or the
//! session is deleted; a process that exits ends its connection.
//!
//! **Factories.** A connection that attaches with `factories` (the metadata of
//! `defineFactory`) provides them. `session.factory.run` starts a run (a fresh `runId`,
//! status `running`) by sending `factory.execute {sessionId, name, runId, executionToken,
//! args}` to the provider (the latest attached connection that declared the name) and is
//! answered with the run's terminal envelope (`{runId, status, result?, error?}`) when the
//! provider answers: `completed` with its `result`, or `error` with the provider's error
//! message (or why it never answered). `session.factory.resume` re-executes a run that
//! ended in `error` under the same `runId` with its stored arguments; it refuses an unknown
//! run (`data.code: "not_found"`), a completed or cancelled one (`non_resumable`) and one still
//! running (`already_active`). `session.factory.getRun` reads a run's envelope;
//! `session.factory.cancel` sends `factory.abort` and settles a running run as `cancelled`.
//! Every status change emits the ephemeral `factory.run_updated {runId, revision}`. Runs live
//! with the loaded session, in memory.

use std::collections::{BTreeMap, BTreeSet};

use indexmap::IndexMap;
use serde_json::{json, Value};

use crate::correlation::Outcome;
use crate::frame::Framing;
use crate::jsonrpc::{ErrorObject, OwnedId};

use super::dialect::{DialectId, ServerRequest};
use super::effects::{EffectId, EffectOp, ProcessSpec};
use super::pending::ClientCall;
use super::{ConnId, FileReply, FileRequest, Host};

/// The file each extension directory holds.
pub(crate) const EXTENSION_ENTRY: &str = "extension.mjs";

/// The host's extension processes and factory runs.
#[derive(Default)]
pub(crate) struct Extensions {
    /// Running extension processes, by process effect id.
    procs: BTreeMap<EffectId, ExtensionProcess>,
    /// The process behind each extension connection.
    conns: BTreeMap<ConnId, EffectId>,
    /// Names started (or being looked at) per session, so a name is started once.
    names: BTreeMap<String, BTreeSet<String>>,
    /// Extensions of each session that ended on their own (`session.extensions.list`'s
    /// `failed`), by id.
    failed: BTreeMap<String, IndexMap<String, (String, &'static str)>>,
    /// Factory runs per session, by run id, in creation order.
    runs: BTreeMap<String, IndexMap<String, FactoryRun>>,
}

/// One extension process.
struct ExtensionProcess {
    session: String,
    /// Its directory's name.
    name: String,
    /// `project` or `user`.
    source: &'static str,
    /// The client whose session started it.
    owner: ConnId,
    /// The connection over its stdio.
    conn: ConnId,
    /// A kill was asked for (its exit is still awaited).
    killed: bool,
}

/// Where a directory listing of extension discovery stands.
#[derive(Clone, Debug)]
pub(crate) struct ExtensionScan {
    session: String,
    owner: ConnId,
    /// The dialect the owner speaks, which its extensions speak to the host too (only the
    /// Copilot SDK protocol's clients ask for extensions).
    dialect: DialectId,
    sdk_path: Option<String>,
    /// The directory listed.
    dir: String,
    /// `None`: a root of extension directories; `Some(name)`: extension `name`'s directory.
    name: Option<String>,
    /// The roots still to list after this one (only for a root's listing).
    rest: Vec<String>,
    /// Where the listed root is: `project` (the session's `.github/extensions`) or `user`.
    source: &'static str,
}

/// Status of a factory run (the wire's `FactoryRunStatus`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RunStatus {
    Running,
    Completed,
    Cancelled,
    Error,
}

impl RunStatus {
    fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Completed => "completed",
            RunStatus::Cancelled => "cancelled",
            RunStatus::Error => "error",
        }
    }
}

/// A caller waiting for a run to settle.
#[derive(Clone, Debug)]
pub(crate) struct RunWaiter {
    conn: ConnId,
    id: OwnedId,
    /// `session.factory.resume`: answered `{factoryName, run}`.
    resume: bool,
}

impl RunWaiter {
    /// The caller of request `id` on `conn`; `resume` wraps the envelope as
    /// `session.factory.resume` answers.
    pub(crate) fn new(conn: ConnId, id: OwnedId, resume: bool) -> Self {
        RunWaiter { conn, id, resume }
    }
}

/// One factory run.
struct FactoryRun {
    name: String,
    args: Value,
    status: RunStatus,
    result: Option<Value>,
    error: Option<String>,
    revision: u64,
    /// The token of the attempt in flight (answers of other attempts are ignored).
    token: String,
    /// The provider executing the attempt in flight.
    provider: Option<ConnId>,
    waiters: Vec<RunWaiter>,
}

impl FactoryRun {
    fn envelope(&self, run_id: &str) -> Value {
        let mut e = json!({"runId": run_id, "status": self.status.as_str()});
        if let Some(result) = &self.result {
            e["result"] = result.clone();
        }
        if let Some(error) = &self.error {
            e["error"] = json!(error);
        }
        e
    }
}

/// A `factory.execute` in flight.
#[derive(Clone, Debug)]
pub(crate) struct FactoryCall {
    session: String,
    run_id: String,
    token: String,
}

/// Why a factory request is refused: the message and the machine-readable `data.code`.
pub(crate) struct FactoryRefusal {
    /// What went wrong, for people.
    pub(crate) message: String,
    /// The `FactoryResumeErrorCode` (`None`: no code).
    pub(crate) code: Option<&'static str>,
}

impl FactoryRefusal {
    fn new(message: String, code: Option<&'static str>) -> Self {
        FactoryRefusal { message, code }
    }
}

/// A `file://` URL of an absolute path (each byte outside the unreserved set and `/`
/// percent-encoded).
fn file_url(path: &str) -> String {
    let mut url = String::from("file://");
    if !path.starts_with('/') {
        url.push('/');
    }
    url.push_str(&percent_encode(path, b"-_.~/"));
    url
}

fn percent_encode(text: &str, keep: &[u8]) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || keep.contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The `--import` module (a `data:` URL) that makes `@github/copilot-sdk` and
/// `@github/copilot-sdk/extension` resolve to the SDK in `sdk_path`.
pub(crate) fn sdk_loader(sdk_path: &str) -> String {
    let dir = sdk_path.trim_end_matches('/');
    let map = json!({
        "@github/copilot-sdk": file_url(&format!("{dir}/index.js")),
        "@github/copilot-sdk/extension": file_url(&format!("{dir}/extension.js")),
    });
    let hook = format!(
        "const m={map};export async function resolve(s,c,n){{return Object.hasOwn(m,s)?{{url:m[s],shortCircuit:true}}:n(s,c)}}"
    );
    let hook_url = Value::String(format!(
        "data:text/javascript,{}",
        percent_encode(&hook, b"-_.~")
    ));
    let register = format!("import{{register}}from\"node:module\";register({hook_url});");
    format!(
        "data:text/javascript,{}",
        percent_encode(&register, b"-_.~")
    )
}

/// Extensions.
impl Host {
    /// Starts the extensions of `session` for `owner` (the client that created or resumed
    /// it with `requestExtensions`), when extensions are enabled and none runs for it yet.
    pub(crate) fn start_extensions(
        &mut self,
        session: &str,
        owner: ConnId,
        sdk_path: Option<String>,
    ) {
        let Some(config) = self.config.extensions.clone() else {
            return;
        };
        let Some(cwd) = self.session(session).and_then(|s| s.cwd.clone()) else {
            return;
        };
        // Extensions already run for the session (another client asked first): they serve
        // every client of it.
        if self.extensions.procs.values().any(|p| p.session == session) {
            return;
        }
        self.extensions.names.remove(session);
        self.extensions.failed.remove(session);
        let mut roots = vec![format!("{}/.github/extensions", cwd.trim_end_matches('/'))];
        roots.extend(config.user_dirs.iter().cloned());
        let dir = roots.remove(0);
        let Some(dialect) = self.conns.get(&owner).map(|c| c.dialect) else {
            return;
        };
        self.scan_extensions(ExtensionScan {
            session: session.to_owned(),
            owner,
            dialect,
            sdk_path,
            dir,
            name: None,
            rest: roots,
            source: "project",
        });
    }

    fn scan_extensions(&mut self, scan: ExtensionScan) {
        let request = FileRequest::Read {
            path: scan.dir.clone(),
        };
        self.extension_read(scan, request);
    }

    /// A directory listing of extension discovery came back.
    pub(crate) fn extension_scan_done(
        &mut self,
        scan: ExtensionScan,
        result: Result<FileReply, String>,
    ) {
        // The session (or the client that asked) is gone: nothing more starts.
        let owner_here = self
            .session(&scan.session)
            .is_some_and(|s| s.attached.contains_key(&scan.owner));
        if !owner_here {
            return;
        }
        let entries = match result {
            Ok(FileReply::Entries(entries)) => entries,
            // A root that is missing (or not a directory) has no extensions.
            _ => Vec::new(),
        };
        match scan.name.clone() {
            Some(name) => {
                if entries.iter().any(|e| e == EXTENSION_ENTRY) {
                    let path = format!("{}/{EXTENSION_ENTRY}", scan.dir);
                    self.spawn_extension(&scan, &name, &path);
                }
            }
            None => {
                for entry in &entries {
                    let Some(name) = entry.strip_suffix('/') else {
                        continue;
                    };
                    if name.is_empty() || name.starts_with('.') {
                        continue;
                    }
                    let seen = self
                        .extensions
                        .names
                        .entry(scan.session.clone())
                        .or_default();
                    if !seen.insert(name.to_owned()) {
                        continue;
                    }
                    let dir = format!("{}/{name}", scan.dir.trim_end_matches('/'));
                    let sub = ExtensionScan {
                        dir: dir.clone(),
                        name: Some(name.to_owned()),
                        rest: Vec::new(),
                        ..scan.clone()
                    };
                    self.extension_read(sub, FileRequest::Read { path: dir });
                }
                let mut rest = scan.rest;
                if !rest.is_empty() {
                    let dir = rest.remove(0);
                    self.scan_extensions(ExtensionScan {
                        dir,
                        name: None,
                        rest,
                        source: "user",
                        ..scan
                    });
                }
            }
        }
    }

    /// Starts extension `name` of `scan.session` and opens the connection over its stdio.
    fn spawn_extension(&mut self, scan: &ExtensionScan, name: &str, path: &str) {
        let Some(config) = self.config.extensions.clone() else {
            return;
        };
        let cwd = self.session(&scan.session).and_then(|s| s.cwd.clone());
        let mut argv = vec![config.node.clone()];
        if let Some(sdk) = scan.sdk_path.as_deref().filter(|p| !p.is_empty()) {
            argv.push("--import".to_owned());
            argv.push(sdk_loader(sdk));
        }
        argv.push(path.to_owned());
        let spec = ProcessSpec {
            argv,
            env: vec![
                ("SESSION_ID".to_owned(), scan.session.clone()),
                ("COPILOT_EXTENSION_NAME".to_owned(), name.to_owned()),
            ],
            env_from_host: Vec::new(),
            cwd,
            stdin: true,
            timeout_ms: None,
        };
        let id = self.next_effect_id();
        let now = self.now;
        let conn = self.open_conn(now, scan.dialect, Framing::ContentLength);
        // The host started it: it needs no connection token.
        self.set_authenticated(conn);
        self.extensions.procs.insert(
            id,
            ExtensionProcess {
                session: scan.session.clone(),
                name: name.to_owned(),
                source: scan.source,
                owner: scan.owner,
                conn,
                killed: false,
            },
        );
        self.extensions.conns.insert(conn, id);
        self.push_effect(id, EffectOp::ProcessSpawn(spec));
    }

    /// Output of process `id` if it is an extension's: stdout feeds its connection (stderr
    /// is not part of the protocol and is dropped). `false`: not an extension process.
    pub(crate) fn extension_output(&mut self, id: EffectId, stdout: bool, bytes: &[u8]) -> bool {
        let Some(p) = self.extensions.procs.get(&id) else {
            return false;
        };
        if stdout {
            let conn = p.conn;
            let now = self.now;
            self.handle_bytes(now, conn, bytes);
        }
        true
    }

    /// Process `id` ended (or never started) if it is an extension's: its connection ends.
    pub(crate) fn extension_ended(&mut self, id: EffectId) -> bool {
        let Some(p) = self.extensions.procs.remove(&id) else {
            return false;
        };
        self.extensions.conns.remove(&p.conn);
        if !p.killed {
            let id = format!("{}:{}", p.source, p.name);
            self.extensions
                .failed
                .entry(p.session.clone())
                .or_default()
                .insert(id, (p.name.clone(), p.source));
        }
        let now = self.now;
        self.handle_eof(now, p.conn);
        true
    }

    /// Writes what the host queued for extension connections to their processes' stdin,
    /// and kills the process of a connection the host closed once its last frames are
    /// written. Called whenever the runtime polls.
    pub(crate) fn flush_extension_conns(&mut self) {
        if self.extensions.conns.is_empty() {
            return;
        }
        let conns: Vec<(ConnId, EffectId)> = self
            .extensions
            .conns
            .iter()
            .map(|(c, p)| (*c, *p))
            .collect();
        for (conn, process) in conns {
            let mut bytes = Vec::new();
            while let Some(frame) = self.conns.pop_frame(&conn) {
                bytes.extend_from_slice(&frame);
            }
            if !bytes.is_empty() {
                self.push_effect(process, EffectOp::ProcessWrite(bytes.into()));
            }
            if self.conns.get(&conn).is_some_and(|c| c.closing) {
                self.kill_extension(process);
            }
        }
    }

    fn kill_extension(&mut self, process: EffectId) {
        let Some(p) = self.extensions.procs.get_mut(&process) else {
            return;
        };
        if p.killed {
            return;
        }
        p.killed = true;
        let signal = "SIGTERM".to_owned();
        self.push_effect(process, EffectOp::ProcessKill { signal });
    }

    /// `owner` let go of `session` (or is gone): the extensions it started for the session
    /// end. `None`: the session is deleted, every extension of it ends.
    pub(crate) fn stop_extensions(&mut self, session: &str, owner: Option<ConnId>) {
        let doomed: Vec<EffectId> = self
            .extensions
            .procs
            .iter()
            .filter(|(_, p)| p.session == session && owner.is_none_or(|o| p.owner == o))
            .map(|(id, _)| *id)
            .collect();
        for id in doomed {
            self.kill_extension(id);
        }
        if owner.is_none() {
            self.extensions.names.remove(session);
            self.extensions.failed.remove(session);
            if let Some(runs) = self.extensions.runs.remove(session) {
                for (run_id, run) in runs {
                    let envelope = json!({"runId": run_id, "status": "error",
                        "error": "the session was deleted"});
                    for w in run.waiters {
                        self.answer_run_waiter(&w, &run.name, &envelope);
                    }
                }
            }
        }
    }

    /// `session.extensions.list`: the session's extensions, `running` once joined (attached
    /// to the session), `starting` before, `failed` when one ended on its own.
    pub(crate) fn extensions_json(&self, session: &str) -> Value {
        let attached = |conn: &ConnId| {
            self.session(session)
                .is_some_and(|s| s.attached.contains_key(conn))
        };
        let mut list: Vec<Value> = self
            .extensions
            .procs
            .values()
            .filter(|p| p.session == session && !p.killed)
            .map(|p| {
                let status = if attached(&p.conn) {
                    "running"
                } else {
                    "starting"
                };
                json!({"id": format!("{}:{}", p.source, p.name), "name": p.name,
                       "source": p.source, "status": status})
            })
            .collect();
        if let Some(failed) = self.extensions.failed.get(session) {
            for (id, (name, source)) in failed {
                list.push(json!({"id": id, "name": name, "source": source, "status": "failed"}));
            }
        }
        json!({ "extensions": list })
    }

    /// `conn` is gone: the extensions it started end, whatever session they serve.
    pub(crate) fn extension_owner_left(&mut self, conn: ConnId) {
        let doomed: Vec<EffectId> = self
            .extensions
            .procs
            .iter()
            .filter(|(_, p)| p.owner == conn)
            .map(|(id, _)| *id)
            .collect();
        for id in doomed {
            self.kill_extension(id);
        }
    }
}

/// Factories.
impl Host {
    /// The connection providing factory `name` to `session`: the latest attached connection
    /// that declared it.
    fn factory_provider(&self, session: &str, name: &str) -> Option<ConnId> {
        let s = self.session(session)?;
        s.attached
            .iter()
            .rev()
            .find(|(_, a)| {
                a.factories
                    .iter()
                    .any(|f| f.get("name").and_then(Value::as_str) == Some(name))
            })
            .map(|(c, _)| *c)
    }

    /// `session.factory.run`: starts factory `name` with `args`; `waiter` is answered with
    /// the run's terminal envelope. `Err`: no run was created.
    pub(crate) fn run_factory(
        &mut self,
        session: &str,
        name: &str,
        args: Value,
        waiter: RunWaiter,
    ) -> Result<(), FactoryRefusal> {
        let Some(provider) = self.factory_provider(session, name) else {
            return Err(FactoryRefusal::new(
                format!("Factory \"{name}\" is not registered in this session"),
                None,
            ));
        };
        let run_id = self.new_id();
        let run = FactoryRun {
            name: name.to_owned(),
            args,
            status: RunStatus::Running,
            result: None,
            error: None,
            revision: 0,
            token: String::new(),
            provider: None,
            waiters: vec![waiter],
        };
        self.extensions
            .runs
            .entry(session.to_owned())
            .or_default()
            .insert(run_id.clone(), run);
        self.execute_run(session, &run_id, provider);
        Ok(())
    }

    /// `session.factory.resume`: re-executes run `run_id` if it ended in `error`.
    pub(crate) fn resume_factory(
        &mut self,
        session: &str,
        run_id: &str,
        waiter: RunWaiter,
    ) -> Result<(), FactoryRefusal> {
        let Some(run) = self
            .extensions
            .runs
            .get(session)
            .and_then(|r| r.get(run_id))
        else {
            return Err(FactoryRefusal::new(
                format!("Factory run {run_id} not found"),
                Some("not_found"),
            ));
        };
        match run.status {
            RunStatus::Completed | RunStatus::Cancelled => {
                return Err(FactoryRefusal::new(
                    format!(
                        "Factory run {run_id} is {} and cannot be resumed",
                        run.status.as_str()
                    ),
                    Some("non_resumable"),
                ))
            }
            RunStatus::Running => {
                return Err(FactoryRefusal::new(
                    format!("Factory run {run_id} is already running"),
                    Some("already_active"),
                ))
            }
            RunStatus::Error => {}
        }
        let name = run.name.clone();
        let Some(provider) = self.factory_provider(session, &name) else {
            return Err(FactoryRefusal::new(
                format!("Factory \"{name}\" of run {run_id} is not registered in this session"),
                None,
            ));
        };
        if let Some(run) = self
            .extensions
            .runs
            .get_mut(session)
            .and_then(|r| r.get_mut(run_id))
        {
            run.status = RunStatus::Running;
            run.error = None;
            run.result = None;
            run.waiters.push(waiter);
        }
        self.execute_run(session, run_id, provider);
        Ok(())
    }

    /// Sends a new attempt of run `run_id` to `provider`.
    fn execute_run(&mut self, session: &str, run_id: &str, provider: ConnId) {
        let token = self.new_id();
        let Some(run) = self
            .extensions
            .runs
            .get_mut(session)
            .and_then(|r| r.get_mut(run_id))
        else {
            return;
        };
        run.token = token.clone();
        run.provider = Some(provider);
        let params = json!({
            "sessionId": session,
            "name": run.name,
            "runId": run_id,
            "executionToken": token,
            "args": run.args,
        });
        self.run_updated(session, run_id);
        let call = ClientCall::Factory(Box::new(FactoryCall {
            session: session.to_owned(),
            run_id: run_id.to_owned(),
            token: token.clone(),
        }));
        if let Err(message) =
            self.send_client_call(provider, ServerRequest::FactoryExecute, &params, call)
        {
            self.settle_run(
                session,
                run_id,
                &token,
                RunStatus::Error,
                None,
                Some(message),
            );
        }
    }

    /// A provider answered `factory.execute` (or never will).
    pub(crate) fn finish_factory_call(&mut self, call: FactoryCall, outcome: Outcome) {
        let FactoryCall {
            session,
            run_id,
            token,
        } = call;
        let (status, result, error) = match outcome {
            Outcome::Result(raw) => match serde_json::from_str::<Value>(raw.get()) {
                Ok(Value::Object(mut o)) => (RunStatus::Completed, o.remove("result"), None),
                Ok(Value::Null) => (RunStatus::Completed, None, None),
                Ok(other) => (
                    RunStatus::Error,
                    None,
                    Some(format!("bad factory.execute result: {other}")),
                ),
                Err(e) => (
                    RunStatus::Error,
                    None,
                    Some(format!("bad factory.execute result: {e}")),
                ),
            },
            Outcome::Error(e) => (RunStatus::Error, None, Some(e.message)),
            Outcome::Cancelled => (RunStatus::Cancelled, None, None),
            Outcome::TimedOut => (
                RunStatus::Error,
                None,
                Some("the factory's extension did not answer factory.execute in time".to_owned()),
            ),
            Outcome::Closed => (
                RunStatus::Error,
                None,
                Some("the factory's extension disconnected".to_owned()),
            ),
        };
        self.settle_run(&session, &run_id, &token, status, result, error);
    }

    /// Attempt `token` of run `run_id` ended with `status`: waiters get the envelope.
    fn settle_run(
        &mut self,
        session: &str,
        run_id: &str,
        token: &str,
        status: RunStatus,
        result: Option<Value>,
        error: Option<String>,
    ) {
        let Some(run) = self
            .extensions
            .runs
            .get_mut(session)
            .and_then(|r| r.get_mut(run_id))
        else {
            return;
        };
        // A late answer of an attempt that was cancelled or replaced changes nothing.
        if run.token != token || run.status != RunStatus::Running {
            return;
        }
        run.status = status;
        run.result = result;
        run.error = error;
        run.provider = None;
        let envelope = run.envelope(run_id);
        let name = run.name.clone();
        let waiters = std::mem::take(&mut run.waiters);
        self.run_updated(session, run_id);
        for w in waiters {
            self.answer_run_waiter(&w, &name, &envelope);
        }
    }

    fn answer_run_waiter(&mut self, w: &RunWaiter, name: &str, envelope: &Value) {
        let answer = if w.resume {
            json!({"factoryName": name, "run": envelope})
        } else {
            envelope.clone()
        };
        self.respond(w.conn, &w.id, Ok(answer));
    }

    /// Bumps run `run_id`'s revision and emits `factory.run_updated`.
    fn run_updated(&mut self, session: &str, run_id: &str) {
        let Some(run) = self
            .extensions
            .runs
            .get_mut(session)
            .and_then(|r| r.get_mut(run_id))
        else {
            return;
        };
        run.revision += 1;
        let data = json!({"runId": run_id, "revision": run.revision});
        self.emit(session, "factory.run_updated", &data, true);
    }

    /// `session.factory.getRun`: run `run_id`'s envelope.
    pub(crate) fn factory_run(&self, session: &str, run_id: &str) -> Result<Value, FactoryRefusal> {
        self.extensions
            .runs
            .get(session)
            .and_then(|r| r.get(run_id))
            .map(|run| run.envelope(run_id))
            .ok_or_else(|| {
                FactoryRefusal::new(format!("Factory run {run_id} not found"), Some("not_found"))
            })
    }

    /// `session.factory.cancel`: a running run is cancelled (its provider gets
    /// `factory.abort`); the run's envelope.
    pub(crate) fn cancel_factory(
        &mut self,
        session: &str,
        run_id: &str,
    ) -> Result<Value, FactoryRefusal> {
        let running = self.factory_run(session, run_id)?;
        let Some(run) = self
            .extensions
            .runs
            .get(session)
            .and_then(|r| r.get(run_id))
        else {
            return Ok(running);
        };
        if run.status != RunStatus::Running {
            return Ok(running);
        }
        let token = run.token.clone();
        if let Some(provider) = run.provider {
            let params = json!({"sessionId": session, "runId": run_id});
            // Best effort: the run is cancelled here whatever the provider does.
            let _ = self.send_client_call(
                provider,
                ServerRequest::FactoryAbort,
                &params,
                ClientCall::FactoryAbort,
            );
        }
        self.settle_run(
            session,
            run_id,
            &token,
            RunStatus::Cancelled,
            None,
            Some("the run was cancelled".to_owned()),
        );
        self.factory_run(session, run_id)
    }

    /// The error a refused factory request answers `method` with.
    pub(crate) fn factory_error(
        &self,
        conn: ConnId,
        method: &str,
        refusal: FactoryRefusal,
    ) -> ErrorObject {
        let error = self.caller_error(conn, Some(method), &refusal.message);
        match refusal.code {
            Some(code) => {
                let data = json!({"code": code});
                error.clone().with_data_value(&data).unwrap_or(error)
            }
            None => error,
        }
    }
}
