//! Client-owned tasks (`session.tasks.register` / `session.tasks.update`): work an SDK app
//! or extension does outside the runtime, tracked in the session's task list beside its
//! background agents, in the runtime's shapes (`TaskClientInfo`, `TaskClientProgress`).
//!
//! * `register {type: "client", clientTaskId, description, displayName?, cancellable,
//!   expectedSequence?}` binds a new task to the calling connection (its owner; `created`).
//!   The owner registering the same `clientTaskId` again gets the same task (idempotent);
//!   once the owner's connection is gone the task is `orphaned`, and any client of the
//!   session reclaims it by registering its `clientTaskId` with `expectedSequence` equal to
//!   the task's `sequence` (`reclaimed`). Another client's live key, or a reclaim without
//!   the right sequence, is an error.
//! * `update {id, sequence, update}` applies the owner's next update (`sequence` = the
//!   task's + 1; the same `sequence` again is a `duplicate`, anything else an error):
//!   `progress {message?, percentage?, phase?, status?}` (a `null` clears), `completed
//!   {message?, result?}`, `failed {error, code?, message?}`, `cancelled {reason?,
//!   message?}`. Only the bound owner updates; a task that is over takes no update.
//! * `session.tasks.cancel` of a task whose owner said `cancellable` and is connected asks
//!   the owner (`tasks.cancel {sessionId, id, clientTaskId, cancellationId, reason:
//!   "cancel_requested"}`); callers asking while one is in flight share it, and all get
//!   the owner's `{cancelled}` (`true`: the task is `cancelled`).
//! * `session.tasks.list` shows them to connections whose `connect` declared the `client`
//!   task kind; `getProgress` / `remove` serve them like agents. They do not hold
//!   `waitForPending` (it waits for agents), and they live with the loaded session (a
//!   restart forgets them, as the owners' connections are gone too).

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::correlation::Outcome;
use crate::host::pending::ClientCall;
use crate::host::{ConnId, Host};
use crate::jsonrpc::{code, ErrorObject, OwnedId};
use crate::Timestamp;

use super::method_table::{Call, Reply};
use super::surface::{decode, known, Answer};

/// How many progress messages a task keeps (`recentActivity`).
const RECENT_ACTIVITY: usize = 20;

/// The client-owned tasks of one session.
#[derive(Debug, Default)]
pub(super) struct ClientTasks {
    tasks: Vec<ClientTask>,
    /// Numbers the `tasks.cancel` requests (their `cancellationId` and call tag).
    next_cancel: u64,
}

/// Where a client task is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    Running,
    Idle,
    Completed,
    Failed,
    Cancelled,
    Orphaned,
}

impl Status {
    fn as_str(self) -> &'static str {
        match self {
            Status::Running => "running",
            Status::Idle => "idle",
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Cancelled => "cancelled",
            Status::Orphaned => "orphaned",
        }
    }

    fn is_over(self) -> bool {
        matches!(self, Status::Completed | Status::Failed | Status::Cancelled)
    }
}

/// A `tasks.cancel` in flight and the `session.tasks.cancel` callers waiting for it.
#[derive(Debug)]
struct CancelInFlight {
    tag: u64,
    callers: Vec<(ConnId, OwnedId)>,
}

#[derive(Debug)]
struct ClientTask {
    id: String,
    client_task_id: String,
    description: String,
    display_name: Option<String>,
    cancellable: bool,
    /// The connection bound as owner (`None` once it is gone).
    owner: Option<ConnId>,
    owner_kind: &'static str,
    participant_id: String,
    join_id: String,
    disconnected_at: Option<Timestamp>,
    status: Status,
    sequence: i64,
    started: Timestamp,
    updated: Timestamp,
    completed: Option<Timestamp>,
    idle_since: Option<Timestamp>,
    orphaned_at: Option<Timestamp>,
    reclaimed_at: Option<Timestamp>,
    /// Active time before the current active segment, and when that began.
    active_ms: u64,
    active_since: Option<Timestamp>,
    last_message: Option<String>,
    percentage: Option<f64>,
    phase: Option<String>,
    recent: Vec<(String, Timestamp)>,
    result: Option<Value>,
    error: Option<String>,
    error_code: Option<String>,
    cancellation_reason: Option<String>,
    cancel: Option<CancelInFlight>,
}

impl ClientTask {
    /// `TaskClientInfo` at `now`.
    fn info(&self, now: Timestamp) -> Value {
        let active = self.active_ms
            + self
                .active_since
                .map_or(0, |t| now.saturating_duration_since(t).as_millis() as u64);
        let mut owner = json!({
            "joinId": self.join_id,
            "kind": self.owner_kind,
            "participantId": self.participant_id,
            "presence": if self.owner.is_some() { "connected" } else { "disconnected" },
        });
        if let Some(at) = self.disconnected_at {
            owner["disconnectedAt"] = json!(at.to_rfc3339());
        }
        let mut info = json!({
            "type": "client",
            "id": self.id,
            "clientTaskId": self.client_task_id,
            "description": self.description,
            "status": self.status.as_str(),
            "executionMode": "background",
            "sequence": self.sequence,
            "startedAt": self.started.to_rfc3339(),
            "updatedAt": self.updated.to_rfc3339(),
            "activeTimeMs": active,
            "canCancel": self.can_cancel(),
            "owner": owner,
        });
        let optional = [
            ("displayName", self.display_name.clone().map(Value::from)),
            ("completedAt", self.completed.map(|t| json!(t.to_rfc3339()))),
            ("idleSince", self.idle_since.map(|t| json!(t.to_rfc3339()))),
            (
                "orphanedAt",
                self.orphaned_at.map(|t| json!(t.to_rfc3339())),
            ),
            (
                "reclaimedAt",
                self.reclaimed_at.map(|t| json!(t.to_rfc3339())),
            ),
            (
                "activeStartedAt",
                self.active_since.map(|t| json!(t.to_rfc3339())),
            ),
            ("result", self.result.clone()),
            ("error", self.error.clone().map(Value::from)),
            ("errorCode", self.error_code.clone().map(Value::from)),
            (
                "cancellationReason",
                self.cancellation_reason.clone().map(Value::from),
            ),
        ];
        for (key, value) in optional {
            if let Some(value) = value {
                info[key] = value;
            }
        }
        info
    }

    /// `TaskClientProgress`.
    fn progress(&self) -> Value {
        let recent: Vec<Value> = self
            .recent
            .iter()
            .map(|(m, t)| json!({"message": m, "timestamp": t.to_rfc3339()}))
            .collect();
        let mut progress =
            json!({"type": "client", "recentActivity": recent, "sequence": self.sequence});
        if let Some(m) = &self.last_message {
            progress["lastMessage"] = json!(m);
        }
        if let Some(p) = self.percentage {
            progress["percentage"] = json!(p);
        }
        if let Some(p) = &self.phase {
            progress["phase"] = json!(p);
        }
        progress
    }

    fn can_cancel(&self) -> bool {
        self.cancellable && self.owner.is_some() && !self.status.is_over()
    }

    /// Moves to `status` at `now`, keeping the active time and timestamps right.
    fn set_status(&mut self, status: Status, now: Timestamp) {
        if let Some(since) = self.active_since.take() {
            self.active_ms += now.saturating_duration_since(since).as_millis() as u64;
        }
        self.status = status;
        self.idle_since = (status == Status::Idle).then_some(now);
        match status {
            Status::Running => self.active_since = Some(now),
            Status::Orphaned => self.orphaned_at = Some(now),
            Status::Completed | Status::Failed | Status::Cancelled => self.completed = Some(now),
            Status::Idle => {}
        }
        self.updated = now;
    }

    fn note(&mut self, message: Option<&str>, now: Timestamp) {
        let Some(message) = message.filter(|m| !m.trim().is_empty()) else {
            return;
        };
        self.last_message = Some(message.to_owned());
        self.recent.push((message.to_owned(), now));
        if self.recent.len() > RECENT_ACTIVITY {
            self.recent.remove(0);
        }
    }

    /// Applies the owner's update (already sequenced).
    fn apply(&mut self, update: &Value, now: Timestamp) -> Result<(), String> {
        let text = |key: &str| update.get(key).and_then(Value::as_str);
        match text("kind") {
            Some("progress") => {
                self.note(text("message"), now);
                if let Some(p) = update.get("percentage") {
                    self.percentage = p.as_f64().filter(|p| (0.0..=100.0).contains(p));
                    if !p.is_null() && self.percentage.is_none() {
                        return Err("percentage must be from 0 through 100".to_owned());
                    }
                }
                if let Some(p) = update.get("phase") {
                    self.phase = p.as_str().map(str::to_owned);
                }
                match text("status") {
                    Some("running") => self.set_status(Status::Running, now),
                    Some("idle") => self.set_status(Status::Idle, now),
                    None => self.updated = now,
                    Some(other) => return Err(format!("unknown progress status \"{other}\"")),
                }
            }
            Some("completed") => {
                self.note(text("message"), now);
                self.result = update.get("result").cloned();
                self.set_status(Status::Completed, now);
            }
            Some("failed") => {
                let Some(error) = text("error") else {
                    return Err("a failed update needs its error".to_owned());
                };
                self.note(text("message"), now);
                self.error = Some(error.to_owned());
                self.error_code = text("code").map(str::to_owned);
                self.set_status(Status::Failed, now);
            }
            Some("cancelled") => {
                self.note(text("message"), now);
                self.cancellation_reason = text("reason").map(str::to_owned);
                self.set_status(Status::Cancelled, now);
            }
            other => return Err(format!("unknown update kind {other:?}")),
        }
        Ok(())
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RegisterParams {
    session_id: String,
    r#type: String,
    client_task_id: String,
    description: String,
    #[serde(default)]
    display_name: Option<String>,
    cancellable: bool,
    #[serde(default)]
    expected_sequence: Option<i64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct UpdateParams {
    session_id: String,
    id: String,
    sequence: i64,
    update: Value,
}

fn refused(call: &Call<'_>, message: impl std::fmt::Display) -> ErrorObject {
    ErrorObject::new(
        code::INVALID_PARAMS,
        format!("Request {} failed with message: {message}", call.method),
    )
}

/// `session.tasks.register`.
pub(super) fn register(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Answer {
    let p = decode::<RegisterParams>(params)?;
    known(host, call.method, &p.session_id)?;
    if p.r#type != "client" {
        return Err(refused(call, format!("unknown task type \"{}\"", p.r#type)));
    }
    if p.client_task_id.trim().is_empty() {
        return Err(refused(call, "clientTaskId is empty"));
    }
    let (now, conn) = (host.now(), call.conn);
    let owner_kind = host
        .session(&p.session_id)
        .and_then(|s| s.attached.get(&conn))
        .map_or("sdk", |a| {
            if a.extension.is_some() {
                "extension"
            } else {
                "sdk"
            }
        });
    let participant = participant_id(conn);
    let join_id = host.new_id();
    let new_id = host.new_id();
    let Some(state) = host.session_state::<ClientTasks>(&p.session_id) else {
        return Err(refused(call, "the session is gone"));
    };
    let existing = state.tasks.iter_mut().rev().find(|t| {
        t.client_task_id == p.client_task_id && (t.owner.is_none() || t.owner == Some(conn))
    });
    let (created, reclaimed, info) = match existing {
        Some(task) if task.owner == Some(conn) => {
            if p.expected_sequence.is_some_and(|s| s != task.sequence) {
                return Err(refused(
                    call,
                    format!("task {} is at sequence {}", task.id, task.sequence),
                ));
            }
            (false, false, task.info(now))
        }
        Some(task) if task.status == Status::Orphaned => {
            if p.expected_sequence != Some(task.sequence) {
                return Err(refused(
                    call,
                    format!(
                        "task {} is orphaned: reclaim it with expectedSequence {}",
                        task.id, task.sequence
                    ),
                ));
            }
            task.owner = Some(conn);
            task.owner_kind = owner_kind;
            task.participant_id = participant;
            task.join_id = join_id;
            task.disconnected_at = None;
            task.reclaimed_at = Some(now);
            task.cancellable = p.cancellable;
            task.set_status(Status::Running, now);
            (false, true, task.info(now))
        }
        _ => {
            if state
                .tasks
                .iter()
                .any(|t| t.client_task_id == p.client_task_id && t.owner.is_some())
            {
                return Err(refused(
                    call,
                    format!(
                        "clientTaskId \"{}\" is registered by another client",
                        p.client_task_id
                    ),
                ));
            }
            let task = ClientTask {
                id: new_id,
                client_task_id: p.client_task_id,
                description: p.description,
                display_name: p.display_name,
                cancellable: p.cancellable,
                owner: Some(conn),
                owner_kind,
                participant_id: participant,
                join_id,
                disconnected_at: None,
                status: Status::Running,
                sequence: 0,
                started: now,
                updated: now,
                completed: None,
                idle_since: None,
                orphaned_at: None,
                reclaimed_at: None,
                active_ms: 0,
                active_since: Some(now),
                last_message: None,
                percentage: None,
                phase: None,
                recent: Vec::new(),
                result: None,
                error: None,
                error_code: None,
                cancellation_reason: None,
                cancel: None,
            };
            let info = task.info(now);
            state.tasks.push(task);
            (true, false, info)
        }
    };
    if created || reclaimed {
        host.emit(
            &p.session_id,
            "session.background_tasks_changed",
            &json!({}),
            true,
        );
    }
    Ok(json!({"created": created, "reclaimed": reclaimed, "task": info}))
}

/// `session.tasks.update`.
pub(super) fn update(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Answer {
    let p = decode::<UpdateParams>(params)?;
    known(host, call.method, &p.session_id)?;
    let now = host.now();
    let Some(task) = host
        .session_state::<ClientTasks>(&p.session_id)
        .and_then(|s| s.tasks.iter_mut().find(|t| t.id == p.id))
    else {
        return Err(refused(call, format!("No client task with id {}", p.id)));
    };
    if task.owner != Some(call.conn) {
        return Err(refused(
            call,
            format!("task {} is owned by another client", p.id),
        ));
    }
    if p.sequence == task.sequence {
        return Ok(json!({"applied": false, "duplicate": true, "task": task.info(now)}));
    }
    if task.status.is_over() {
        return Err(refused(
            call,
            format!("task {} is already {}", p.id, task.status.as_str()),
        ));
    }
    if p.sequence != task.sequence + 1 {
        return Err(refused(
            call,
            format!(
                "sequence {} is not the next for task {} (expected {})",
                p.sequence,
                p.id,
                task.sequence + 1
            ),
        ));
    }
    task.apply(&p.update, now).map_err(|e| refused(call, e))?;
    task.sequence = p.sequence;
    let info = task.info(now);
    host.emit(
        &p.session_id,
        "session.background_tasks_changed",
        &json!({}),
        true,
    );
    Ok(json!({"applied": true, "duplicate": false, "task": info}))
}

/// The `TaskClientInfo`s of `session`, for `session.tasks.list`.
pub(super) fn infos(host: &mut Host, session: &str) -> Vec<Value> {
    let now = host.now();
    host.session_state_ref::<ClientTasks>(session)
        .map(|s| s.tasks.iter().map(|t| t.info(now)).collect())
        .unwrap_or_default()
}

/// `TaskClientProgress` of client task `id`, if `session` has it.
pub(super) fn progress(host: &Host, session: &str, id: &str) -> Option<Value> {
    let state = host.session_state_ref::<ClientTasks>(session)?;
    state
        .tasks
        .iter()
        .find(|t| t.id == id)
        .map(|t| t.progress())
}

/// `session.tasks.remove` of a client task: `Some(removed)` when `session` has task `id`.
pub(super) fn remove(host: &mut Host, session: &str, id: &str) -> Option<bool> {
    let state = host.session_state::<ClientTasks>(session)?;
    let i = state.tasks.iter().position(|t| t.id == id)?;
    let over = state.tasks[i].status.is_over();
    if over {
        state.tasks.remove(i);
    }
    Some(over)
}

/// `session.tasks.cancel` of a client task: `None` when `session` has no task `id`;
/// `Some(reply)` otherwise (no reply yet while its owner is asked).
pub(super) fn cancel(host: &mut Host, call: &Call<'_>, session: &str, id: &str) -> Option<Reply> {
    let state = host.session_state::<ClientTasks>(session)?;
    state.next_cancel += 1;
    let tag = state.next_cancel;
    let task = state.tasks.iter_mut().find(|t| t.id == id)?;
    if !task.can_cancel() {
        return Some(Some(Ok(json!({"cancelled": false}))));
    }
    let caller = (call.conn, call.id.clone());
    if let Some(flight) = &mut task.cancel {
        flight.callers.push(caller);
        return Some(None);
    }
    let owner = task.owner?;
    let params = json!({"sessionId": session, "id": task.id, "clientTaskId": task.client_task_id,
                        "cancellationId": format!("cancel-{tag}"), "reason": "cancel_requested"});
    task.cancel = Some(CancelInFlight {
        tag,
        callers: vec![caller],
    });
    let sent = host.send_client_request(
        owner,
        "tasks.cancel",
        &params,
        ClientCall::Dialect {
            dialect: super::ID,
            session: session.to_owned(),
            tag,
        },
    );
    if sent.is_err() {
        finish_cancel(host, session, tag, false);
    }
    Some(None)
}

/// The owner answered `tasks.cancel` `tag` (or did not): its callers learn whether the
/// task stopped.
pub(super) fn cancel_answered(host: &mut Host, session: &str, tag: u64, outcome: Outcome) {
    let cancelled = match outcome {
        Outcome::Result(raw) => serde_json::from_str::<Value>(raw.get())
            .ok()
            .and_then(|v| v.get("cancelled").and_then(Value::as_bool))
            .unwrap_or(false),
        Outcome::Error(_) | Outcome::Cancelled | Outcome::TimedOut | Outcome::Closed => false,
    };
    finish_cancel(host, session, tag, cancelled);
}

fn finish_cancel(host: &mut Host, session: &str, tag: u64, cancelled: bool) {
    let now = host.now();
    let Some(state) = host.session_state::<ClientTasks>(session) else {
        return;
    };
    let Some(task) = state
        .tasks
        .iter_mut()
        .find(|t| t.cancel.as_ref().is_some_and(|c| c.tag == tag))
    else {
        return;
    };
    let callers = task.cancel.take().map(|c| c.callers).unwrap_or_default();
    let stopped = cancelled && !task.status.is_over();
    if stopped {
        task.cancellation_reason = Some("cancel_requested".to_owned());
        task.sequence += 1;
        task.set_status(Status::Cancelled, now);
    }
    for (conn, id) in callers {
        host.respond(conn, &id, Ok(json!({"cancelled": cancelled})));
    }
    if stopped {
        host.emit(
            session,
            "session.background_tasks_changed",
            &json!({}),
            true,
        );
    }
}

/// `session` is being deleted: `session.tasks.cancel` callers still waiting for an owner
/// learn that nothing was cancelled.
pub(super) fn session_deleting(host: &mut Host, session: &str) {
    let Some(state) = host.session_state::<ClientTasks>(session) else {
        return;
    };
    let callers: Vec<(ConnId, OwnedId)> = state
        .tasks
        .iter_mut()
        .filter_map(|t| t.cancel.take())
        .flat_map(|c| c.callers)
        .collect();
    for (conn, id) in callers {
        host.respond(conn, &id, Ok(json!({"cancelled": false})));
    }
}

/// `conn` left `session`: the tasks it owned and had not finished are orphaned.
pub(super) fn owner_left(host: &mut Host, session: &str, conn: ConnId) {
    let now = host.now();
    let Some(state) = host.session_state::<ClientTasks>(session) else {
        return;
    };
    let mut changed = false;
    for task in state.tasks.iter_mut().filter(|t| t.owner == Some(conn)) {
        task.owner = None;
        task.disconnected_at = Some(now);
        if !task.status.is_over() {
            task.set_status(Status::Orphaned, now);
        }
        changed = true;
    }
    if changed {
        host.emit(
            session,
            "session.background_tasks_changed",
            &json!({}),
            true,
        );
    }
}

/// The opaque participant id of `conn` (one per connection).
fn participant_id(conn: ConnId) -> String {
    format!("participant-{}", conn.as_u64())
}
