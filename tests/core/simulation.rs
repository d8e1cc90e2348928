//! Deterministic simulation of the host with several clients over an unreliable link.
//!
//! Everything derives from one `u64` seed (a local splitmix64; no OS randomness, no clock):
//! the world's configuration, every client's behaviour and the link. Clients create and join
//! sessions (with or without streaming, tools, permission and elicitation handlers, commands),
//! send prompts during running turns, `sendAndWait`, abort, answer permissions and tool calls
//! (sometimes late, sometimes twice), detach, disconnect abruptly (losing bytes in flight),
//! reconnect with `session.resume` + `session.getMessages`, and stall their readers. The link
//! delivers each client's bytes in random chunks after random delays; time jumps fire the
//! scripted agent's sleeps.
//!
//! A third of the seeds run with a model provider instead of the scripted agent: the world's
//! simulated endpoint (`fuzz/targets/src/targets/world/model.rs`) answers every model call from the seed
//! (text in pieces, tool calls of the client and built-in tools, 500/429, cut and malformed
//! streams), so model turns, their retries and the built-in tools' file and shell outputs are
//! part of the run.
//!
//! The checker (`fuzz/targets/src/targets/world.rs`, shared with the `host_sequence` fuzz target) runs after
//! every input and every read: at most one response per request and, after the run settles,
//! exactly one; responses to in-order requests in order; `parentId` chains unbroken per
//! connection; deltas only to streaming attachments; `getMessages` holding every persisted event
//! the client saw; outboxes within budget; every turn reaching `session.idle`; no timer left.
//!
//! `cargo test --test core simulation::` runs `SIM_SEEDS` seeds (default 1000) from `SIM_FIRST_SEED`
//! (default 0). A failure prints its seed; `SIM_SEED=<n> cargo test --test core simulation::` replays
//! exactly that seed and prints its trace.

// The fuzz targets' world (the agentwire-fuzz-targets crate).
use agentwire_fuzz_targets::targets::world;

use std::collections::BTreeSet;
use std::time::Instant;

use agentwire::frame::{FrameLimits, Framing};
use serde_json::{json, Value};
use world::{AskKind, Rng, World, WorldConfig, TOKEN};

/// Prompts; each matches a rule of the world's scenario.
const PROMPTS: &[&str] = &[
    "hello",
    "weather in Paris?",
    "both please",
    "slow down",
    "fail now",
    "title",
    "lookup",
    "ghost",
    "question",
    "plan",
    "mode",
    "hook",
    "ask",
    "sample",
    "cmd",
];

/// One simulated client: its capabilities, its sessions and its link.
struct Client {
    /// Its current connection (index into `World::conns`), if connected.
    conn: Option<usize>,
    framing: Framing,
    streaming: bool,
    permissions: bool,
    elicitation: bool,
    tools: Vec<Value>,
    commands: Vec<Value>,
    /// Answers server-to-client requests (userInput, exitPlanMode, autoModeSwitch, hooks) and
    /// sampling.
    calls: bool,
    /// Sessions it means to be attached to.
    sessions: BTreeSet<String>,
    /// Its reader does not read until this step.
    stalled_until: u64,
    /// Its writes reach the host only with this probability (percent) per step.
    link_speed: u64,
    /// Answers to send later: (step, method, params).
    late: Vec<(u64, &'static str, Value)>,
    /// Speaks AHP (over the AHP dialect) instead of the Copilot SDK protocol.
    ahp: bool,
    /// AHP: the turns it started (for ids and cancels).
    turns: u64,
}

impl Client {
    fn attach_params(&self, session: &str, rng: &mut Rng) -> Value {
        json!({
            "sessionId": session,
            "streaming": self.streaming,
            "requestPermission": self.permissions,
            "requestElicitation": self.elicitation,
            "tools": self.tools,
            "commands": self.commands,
            "disableResume": rng.below(3) == 0,
            "requestUserInput": self.calls,
            "requestExitPlanMode": self.calls,
            "requestAutoModeSwitch": self.calls,
            "hooks": self.calls,
            "requestSampling": self.calls,
        })
    }
}

/// One simulation run.
struct Sim {
    rng: Rng,
    world: World,
    clients: Vec<Client>,
    step: u64,
    sessions: Vec<String>,
    next_session: u64,
    /// Avoid the sequences that trigger known host bugs.
    tolerate: bool,
}

fn answer_for(
    kind: AskKind,
    session: &str,
    request_id: &str,
    rng: &mut Rng,
) -> (&'static str, Value) {
    match kind {
        AskKind::Permission => {
            let decision = match rng.below(6) {
                0 => json!({"kind": "reject", "feedback": "not now"}),
                1 => json!({"kind": "user-not-available"}),
                2 => json!({"kind": "approve-for-session"}),
                _ => json!({"kind": "approve-once"}),
            };
            (
                "session.permissions.handlePendingPermissionRequest",
                json!({"sessionId": session, "requestId": request_id, "result": decision}),
            )
        }
        AskKind::Tool => {
            let mut p = json!({"sessionId": session, "requestId": request_id});
            match rng.below(4) {
                0 => p["error"] = json!("tool failed"),
                1 => p["result"] = json!({"textResultForLlm": "sunny", "resultType": "success"}),
                _ => p["result"] = json!("sunny"),
            }
            ("session.tools.handlePendingToolCall", p)
        }
        AskKind::Elicitation => (
            "session.ui.handlePendingElicitation",
            json!({"sessionId": session, "requestId": request_id,
            "result": if rng.below(2) == 0 {
                json!({"action": "accept", "content": {"ok": true}})
            } else {
                json!({"action": "decline"})
            }}),
        ),
        AskKind::Command => (
            "session.commands.handlePendingCommand",
            json!({"sessionId": session, "requestId": request_id}),
        ),
        AskKind::Sampling => {
            let mut p = json!({"sessionId": session, "requestId": request_id});
            if rng.below(3) != 0 {
                p["response"] = json!({"content": {"type": "text", "text": "sampled"}});
            }
            ("session.ui.handlePendingSampling", p)
        }
    }
}

impl Sim {
    fn new(seed: u64) -> Sim {
        let mut rng = Rng(seed ^ 0x5eed_0000_a9e7_3172);
        let budget = match rng.below(4) {
            0 => 3_000,
            1 => 12_000,
            2 => 64 * 1024,
            _ => agentwire::host::DEFAULT_OUTBOX_BUDGET,
        };
        let config = WorldConfig {
            seed,
            budget,
            token: rng.below(4) == 0,
            limits: FrameLimits::default(),
            persist: rng.below(2) == 0,
            // Drawn apart from `rng`, so seeds without a model play as before.
            model: Rng(seed ^ 0x0de1_5eed).below(3) == 0,
        };
        let world = World::new(config);
        let n = 2 + rng.below(3) as usize;
        // AHP clients beside the Copilot SDK ones, drawn apart from `rng` (half the seeds
        // have some).
        let mut ahp_rng = Rng(seed ^ 0xa4b0_5eed);
        let with_ahp = ahp_rng.below(2) == 0;
        let clients = (0..n)
            .map(|_| {
                let mut tools = Vec::new();
                if rng.below(2) == 0 {
                    tools.push(json!({"name": "get_weather", "description": "Get weather"}));
                }
                if rng.below(3) == 0 {
                    tools.push(json!({"name": "lookup", "skipPermission": true}));
                }
                Client {
                    conn: None,
                    framing: if rng.below(6) == 0 {
                        Framing::Ndjson
                    } else {
                        Framing::ContentLength
                    },
                    streaming: rng.below(2) == 0,
                    permissions: rng.below(3) != 0,
                    elicitation: rng.below(3) == 0,
                    tools,
                    commands: if rng.below(4) == 0 {
                        vec![json!({"name": "deploy", "description": "ship it"})]
                    } else {
                        Vec::new()
                    },
                    calls: rng.below(3) == 0,
                    sessions: BTreeSet::new(),
                    stalled_until: 0,
                    link_speed: 30 + rng.below(71),
                    late: Vec::new(),
                    ahp: with_ahp && ahp_rng.below(2) == 0,
                    turns: 0,
                }
            })
            .collect();
        Sim {
            rng,
            world,
            clients,
            step: 0,
            sessions: Vec::new(),
            next_session: 0,
            tolerate: false,
        }
    }

    /// The client's connection, connecting first if it has none.
    fn connection(&mut self, i: usize) -> usize {
        if let Some(c) = self.clients[i].conn {
            if self.world.conns[c].usable() {
                return c;
            }
        }
        if self.clients[i].ahp {
            return self.ahp_connection(i);
        }
        let c = self.world.open(self.clients[i].framing, i);
        self.clients[i].conn = Some(c);
        if self.world.config.token {
            self.world.request(
                c,
                "connect",
                json!({"token": TOKEN, "supportedTaskKinds": ["client"]}),
            );
        }
        // Reconnect: rejoin every session, then catch up with getMessages.
        let sessions: Vec<String> = self.clients[i].sessions.iter().cloned().collect();
        for s in sessions {
            let params = self.clients[i].attach_params(&s, &mut self.rng);
            self.world.request(c, "session.resume", params);
            self.world
                .request(c, "session.getMessages", json!({"sessionId": s}));
        }
        c
    }

    fn pick_session(&mut self, i: usize) -> Option<String> {
        let own: Vec<&String> = self.clients[i].sessions.iter().collect();
        if !own.is_empty() && self.rng.below(5) != 0 {
            return Some(own[self.rng.below(own.len() as u64) as usize].clone());
        }
        if self.sessions.is_empty() {
            return None;
        }
        Some(self.sessions[self.rng.below(self.sessions.len() as u64) as usize].clone())
    }

    /// One client action.
    fn act(&mut self, i: usize) -> Result<(), String> {
        if self.clients[i].ahp {
            return self.act_ahp(i);
        }
        let mut roll = self.rng.below(100);
        if self.tolerate
            && ((58..=61).contains(&roll) || roll == 76)
            && self.world.conns.iter().any(|c| c.owes_deferred())
        {
            // Known: detach / delete leave deferred requests unanswered.
            roll = 99;
        }
        match roll {
            0..=9 => {
                let c = self.connection(i);
                let s = format!("sim-{}", self.next_session);
                self.next_session += 1;
                let mut params = self.clients[i].attach_params(&s, &mut self.rng);
                params["workingDirectory"] = json!("/sim");
                self.world.request(c, "session.create", params);
                self.clients[i].sessions.insert(s.clone());
                self.sessions.push(s);
            }
            10..=17 => {
                if let Some(s) = self.pick_session(i) {
                    let c = self.connection(i);
                    let params = self.clients[i].attach_params(&s, &mut self.rng);
                    self.world.request(c, "session.resume", params);
                    self.clients[i].sessions.insert(s);
                }
            }
            18..=37 => {
                if let Some(s) = self.pick_session(i) {
                    let c = self.connection(i);
                    let prompt = PROMPTS[self.rng.below(PROMPTS.len() as u64) as usize];
                    let method = if self.rng.below(3) == 0 {
                        "session.sendAndWait"
                    } else {
                        "session.send"
                    };
                    self.world
                        .request(c, method, json!({"sessionId": s, "prompt": prompt}));
                }
            }
            38..=41 => {
                if let Some(s) = self.pick_session(i) {
                    let c = self.connection(i);
                    self.world
                        .request(c, "session.abort", json!({"sessionId": s}));
                }
            }
            42..=57 => self.answer(i),
            58..=61 => {
                if let Some(s) = self.pick_session(i) {
                    let c = self.connection(i);
                    self.world
                        .request(c, "session.detach", json!({"sessionId": s}));
                    self.clients[i].sessions.remove(&s);
                }
            }
            62..=65 => {
                // Abrupt disconnect: whatever is still in flight is lost.
                if let Some(c) = self.clients[i].conn.take() {
                    if self.world.conns[c].open {
                        self.world.eof(c)?;
                    }
                }
            }
            66..=69 => {
                self.clients[i].stalled_until = self.step + 1 + self.rng.below(12);
            }
            70..=73 => {
                if let Some(s) = self.pick_session(i) {
                    let c = self.connection(i);
                    self.world
                        .request(c, "session.getMessages", json!({"sessionId": s}));
                }
            }
            74..=75 => {
                if let Some(s) = self.pick_session(i) {
                    let c = self.connection(i);
                    let msg = if self.rng.below(2) == 0 {
                        json!({"sessionId": s, "message": "Proceed?"})
                    } else {
                        json!({"sessionId": s, "commandName": "deploy", "args": "prod"})
                    };
                    let method = if msg.get("message").is_some() {
                        "session.ui.elicitation"
                    } else {
                        "session.commands.execute"
                    };
                    self.world.request(c, method, msg);
                }
            }
            76 => {
                if let Some(s) = self.pick_session(i) {
                    let c = self.connection(i);
                    self.world
                        .request(c, "session.delete", json!({"sessionId": s}));
                    for client in &mut self.clients {
                        client.sessions.remove(&s);
                    }
                    self.sessions.retain(|x| x != &s);
                }
            }
            80..=89 => self.answer_call(i),
            77..=79 => {
                let c = self.connection(i);
                let method = ["ping", "session.list", "status.get"][self.rng.below(3) as usize];
                self.world.request(c, method, json!({}));
            }
            _ => {}
        }
        Ok(())
    }

    /// Answers a pending request the client can handle: now, later, or twice.
    fn answer(&mut self, i: usize) {
        let candidates: Vec<usize> = self
            .world
            .asks
            .iter()
            .enumerate()
            .filter(|(_, a)| match a.kind {
                AskKind::Permission => self.clients[i].permissions,
                AskKind::Tool => !self.clients[i].tools.is_empty(),
                AskKind::Elicitation => self.clients[i].elicitation,
                AskKind::Command => !self.clients[i].commands.is_empty(),
                AskKind::Sampling => self.clients[i].calls,
            })
            .map(|(k, _)| k)
            .collect();
        if candidates.is_empty() {
            return;
        }
        // Mostly the newest requests; sometimes an old (already answered) one.
        let k = if self.rng.below(4) == 0 {
            candidates[self.rng.below(candidates.len() as u64) as usize]
        } else {
            candidates[candidates.len() - 1]
        };
        let ask = self.world.asks[k].clone();
        let (method, params) = answer_for(ask.kind, &ask.session, &ask.request_id, &mut self.rng);
        match self.rng.below(6) {
            0 => {
                let at = self.step + 1 + self.rng.below(10);
                self.clients[i].late.push((at, method, params));
            }
            1 => {
                let c = self.connection(i);
                self.world.request(c, method, params.clone());
                self.world.request(c, method, params);
            }
            _ => {
                let c = self.connection(i);
                self.world.request(c, method, params);
            }
        }
    }

    /// Answers a server-to-client request this client's connection received: mostly right,
    /// sometimes twice, sometimes with an error or a made-up id (a late answer comes after
    /// the host cancelled it at its deadline).
    fn answer_call(&mut self, i: usize) {
        let Some(c) = self.clients[i].conn else {
            return;
        };
        let open: Vec<world::Call> = self
            .world
            .calls
            .iter()
            .filter(|k| k.conn == c && !k.done)
            .cloned()
            .collect();
        let Some(call) = open.last() else {
            return;
        };
        let variant = if self.rng.below(4) == 0 {
            self.rng.below(4) as u8
        } else {
            0
        };
        let id = if self.rng.below(10) == 0 {
            "\"made-up\"".to_owned()
        } else {
            call.id.clone()
        };
        let body = world::call_response(&id, &call.method, variant);
        self.world.queue_body(c, body.as_bytes());
        if self.rng.below(5) == 0 {
            self.world.queue_body(c, body.as_bytes());
        }
    }

    /// The link and the readers: deliver some bytes, let readers read, send late answers.
    fn link(&mut self) -> Result<(), String> {
        for i in 0..self.clients.len() {
            let due: Vec<(&'static str, Value)> = {
                let step = self.step;
                let late = &mut self.clients[i].late;
                let (now, later): (Vec<_>, Vec<_>) =
                    late.drain(..).partition(|(at, _, _)| *at <= step);
                *late = later;
                now.into_iter().map(|(_, m, p)| (m, p)).collect()
            };
            for (method, params) in due {
                let c = self.connection(i);
                self.world.request(c, method, params);
            }
            let Some(c) = self.clients[i].conn else {
                continue;
            };
            if self.rng.below(100) < self.clients[i].link_speed {
                let pending = self.world.conns[c].to_host.len();
                if pending > 0 {
                    let n = match self.rng.below(4) {
                        0 => pending,
                        1 => 1 + self.rng.below(8) as usize,
                        _ => 1 + self.rng.below(pending as u64) as usize,
                    };
                    self.world.deliver(c, n)?;
                }
            }
            if self.step >= self.clients[i].stalled_until && self.rng.below(3) != 0 {
                self.world.drain(c)?;
            }
        }
        // Clients whose connection the host closed notice it and forget it.
        for client in &mut self.clients {
            if let Some(c) = client.conn {
                if !self.world.conns[c].usable() {
                    client.conn = None;
                }
            }
        }
        Ok(())
    }

    fn run(&mut self, steps: u64) -> Result<(), String> {
        for _ in 0..steps {
            self.step += 1;
            let i = self.rng.below(self.clients.len() as u64) as usize;
            self.act(i)?;
            if self.rng.below(4) == 0 {
                let ms = [1, 10, 50, 120, 300][self.rng.below(5) as usize];
                self.world.advance(ms)?;
            }
            if self.world.model.is_some() {
                // The model endpoint answers a few pieces.
                for _ in 0..self.rng.below(4) {
                    self.world.model_step()?;
                }
            }
            self.link()?;
            self.world.check_budgets()?;
        }
        // The end: late answers go out, every link delivers, every reader reads, every
        // announced request is answered, every deadline fires.
        for i in 0..self.clients.len() {
            for (_, method, params) in std::mem::take(&mut self.clients[i].late) {
                if let Some(c) = self.clients[i].conn {
                    self.world.request(c, method, params);
                }
            }
        }
        self.world.settle(1_000)?;
        self.world.final_checks()
    }
}

/// AHP clients: the same sessions through the AHP dialect (`world::ahp` checks what they see).
impl Sim {
    /// An AHP client's connection: after a dropped one, mostly `reconnect` from the last
    /// `serverSeq` it saw (replay), else `initialize` with its channels as the initial
    /// subscriptions.
    fn ahp_connection(&mut self, i: usize) -> usize {
        let previous = (0..self.world.conns.len())
            .rev()
            .find(|&c| self.world.conns[c].client == i && self.world.is_ahp(c));
        let last_seen = previous
            .and_then(|c| self.world.conns[c].ahp.as_ref())
            .map_or(0, |v| v.last_seen);
        let c = self.world.open_ahp(i);
        self.clients[i].conn = Some(c);
        let mut channels = vec!["ahp-root://".to_owned()];
        for s in &self.clients[i].sessions {
            channels.push(world::chat_of(s));
            if self.rng.below(2) == 0 {
                channels.push(world::session_of(s));
            }
        }
        let client_id = format!("ahp-{i}");
        if previous.is_some() && self.rng.below(4) != 0 {
            let last_seen = match self.rng.below(8) {
                0 => 0,
                1 => last_seen.saturating_sub(1 + self.rng.below(5)),
                _ => last_seen,
            };
            self.world.request(
                c,
                "reconnect",
                json!({"channel": "ahp-root://", "clientId": client_id,
                       "lastSeenServerSeq": last_seen, "subscriptions": channels}),
            );
        } else {
            self.world.ahp_initialize(c, &client_id, &channels);
        }
        if !self.clients[i].tools.is_empty() {
            for s in self.clients[i].sessions.clone() {
                self.ahp_provide_tools(i, c, &s);
            }
        }
        c
    }

    /// `session/activeClientSet` with the client's tools.
    fn ahp_provide_tools(&mut self, i: usize, c: usize, session: &str) {
        let tools: Vec<Value> = self.clients[i]
            .tools
            .iter()
            .map(|t| {
                json!({"name": t["name"], "description": "a tool",
                       "inputSchema": {"type": "object"}})
            })
            .collect();
        self.world.ahp_dispatch(
            c,
            &world::session_of(session),
            json!({"type": "session/activeClientSet",
                   "activeClient": {"clientId": format!("ahp-{i}"), "tools": tools}}),
        );
    }

    /// The turn in progress on `session`'s chat as client `i`'s connection knows it.
    fn ahp_active_turn(&self, c: usize, session: &str) -> Option<String> {
        let view = self.world.conns[c].ahp.as_ref()?;
        match view.turns.get(&world::chat_of(session))? {
            world::TurnState::Active(t) => Some(t.clone()),
            _ => None,
        }
    }

    /// One AHP client action.
    fn act_ahp(&mut self, i: usize) -> Result<(), String> {
        let roll = self.rng.below(100);
        match roll {
            0..=9 => {
                let c = self.connection(i);
                let s = format!("sim-{}", self.next_session);
                self.next_session += 1;
                self.world.request(
                    c,
                    "createSession",
                    json!({"channel": world::session_of(&s),
                           "workingDirectories": ["file:///sim"]}),
                );
                self.world
                    .request(c, "subscribe", json!({"channel": world::chat_of(&s)}));
                if self.rng.below(2) == 0 {
                    self.world
                        .request(c, "subscribe", json!({"channel": world::session_of(&s)}));
                }
                if !self.clients[i].tools.is_empty() {
                    self.ahp_provide_tools(i, c, &s);
                }
                self.clients[i].sessions.insert(s.clone());
                self.sessions.push(s);
            }
            10..=17 => {
                if let Some(s) = self.pick_session(i) {
                    let c = self.connection(i);
                    let channel = if self.rng.below(3) == 0 {
                        world::session_of(&s)
                    } else {
                        world::chat_of(&s)
                    };
                    self.world
                        .request(c, "subscribe", json!({"channel": channel}));
                    self.clients[i].sessions.insert(s);
                }
            }
            18..=37 => {
                if let Some(s) = self.pick_session(i) {
                    let c = self.connection(i);
                    let prompt = PROMPTS[self.rng.below(PROMPTS.len() as u64) as usize];
                    self.clients[i].turns += 1;
                    let turn = format!("ahp-{i}-t{}", self.clients[i].turns);
                    self.world.ahp_dispatch(
                        c,
                        &world::chat_of(&s),
                        world::turn_started(&turn, prompt),
                    );
                }
            }
            38..=41 => {
                if let Some(s) = self.pick_session(i) {
                    let c = self.connection(i);
                    let turn = self
                        .ahp_active_turn(c, &s)
                        .filter(|_| self.rng.below(5) != 0)
                        .unwrap_or_else(|| "no-such-turn".to_owned());
                    self.world.ahp_dispatch(
                        c,
                        &world::chat_of(&s),
                        json!({"type": "chat/turnCancelled", "turnId": turn, "duration": 0}),
                    );
                }
            }
            42..=57 => {
                // Any announced request, the newest mostly: the host accepts what this
                // client may answer and rejects the rest (another client's tool call, an
                // answered one) with a reason.
                if self.world.asks.is_empty() {
                    return Ok(());
                }
                let n = self.world.asks.len() as u64;
                let k = if self.rng.below(4) == 0 {
                    self.rng.below(n)
                } else {
                    n - 1
                } as usize;
                let ask = self.world.asks[k].clone();
                let variant = self.rng.below(256) as u8;
                if let Some((channel, action)) = World::ahp_answer(&ask, variant) {
                    let c = self.connection(i);
                    self.world.ahp_dispatch(c, &channel, action.clone());
                    if self.rng.below(6) == 0 {
                        self.world.ahp_dispatch(c, &channel, action);
                    }
                }
            }
            58..=61 => {
                if let Some(s) = self.pick_session(i) {
                    let c = self.connection(i);
                    for channel in [world::chat_of(&s), world::session_of(&s)] {
                        self.world.request_raw_id(
                            c,
                            None,
                            "unsubscribe",
                            &json!({"channel": channel}),
                        );
                    }
                    self.clients[i].sessions.remove(&s);
                }
            }
            62..=65 => {
                if let Some(c) = self.clients[i].conn.take() {
                    if self.world.conns[c].open {
                        self.world.eof(c)?;
                    }
                }
            }
            66..=69 => {
                self.clients[i].stalled_until = self.step + 1 + self.rng.below(12);
            }
            70..=73 => {
                if let Some(s) = self.pick_session(i) {
                    let c = self.connection(i);
                    match self.rng.below(3) {
                        0 => self.ahp_provide_tools(i, c, &s),
                        1 => {
                            let mode = ["interactive", "autopilot"][self.rng.below(2) as usize];
                            self.world.ahp_dispatch(
                                c,
                                &world::session_of(&s),
                                json!({"type": "session/configChanged",
                                       "config": {"mode": mode}}),
                            );
                        }
                        _ => self.world.ahp_dispatch(
                            c,
                            &world::session_of(&s),
                            json!({"type": "session/titleChanged", "title": "sim"}),
                        ),
                    }
                }
            }
            74..=75 => {
                // Bad input: a junk frame, an unknown channel, an unknown action, an action
                // on the wrong channel, invalid params, an unknown method.
                let c = self.connection(i);
                let s = self.pick_session(i).unwrap_or_else(|| "nope".to_owned());
                match self.rng.below(6) {
                    0 => self.world.queue_body(c, b"{\"jsonrpc\":\"2.0\",\"id\":"),
                    1 => self.world.ahp_dispatch(
                        c,
                        &format!("ahp-terminal:/{s}"),
                        world::turn_started("x", "hello"),
                    ),
                    2 => self.world.ahp_dispatch(
                        c,
                        &world::chat_of(&s),
                        json!({"type": "chat/draftChanged", "draft": "x"}),
                    ),
                    3 => self.world.ahp_dispatch(
                        c,
                        &world::session_of(&s),
                        world::turn_started("x", "hello"),
                    ),
                    4 => self
                        .world
                        .request_raw_id(
                            c,
                            None,
                            "dispatchAction",
                            &json!({"channel": world::chat_of(&s)}),
                        )
                        .map_or((), |_| ()),
                    _ => {
                        self.world
                            .request(c, "resourceRead", json!({"uri": "file:///x"}));
                    }
                }
            }
            76 => {
                if let Some(s) = self.pick_session(i) {
                    let c = self.connection(i);
                    self.world.request(
                        c,
                        "disposeSession",
                        json!({"channel": world::session_of(&s)}),
                    );
                    for client in &mut self.clients {
                        client.sessions.remove(&s);
                    }
                    self.sessions.retain(|x| x != &s);
                }
            }
            77..=79 => {
                let c = self.connection(i);
                let s = self.pick_session(i).unwrap_or_else(|| "nope".to_owned());
                match self.rng.below(4) {
                    0 => self
                        .world
                        .request(c, "ping", json!({"channel": "ahp-root://"})),
                    1 => self
                        .world
                        .request(c, "listSessions", json!({"channel": "ahp-root://"})),
                    2 => {
                        self.world
                            .request(c, "fetchTurns", json!({"channel": world::chat_of(&s)}))
                    }
                    _ => {
                        // Another chat in the session (a host session of its own), or one
                        // disposed.
                        if self.rng.below(2) == 0 {
                            let chat = format!("sim-{}", self.next_session);
                            self.next_session += 1;
                            self.world.request(
                                c,
                                "createChat",
                                json!({"channel": world::session_of(&s),
                                       "chat": world::chat_of(&chat)}),
                            );
                            self.world.request(
                                c,
                                "subscribe",
                                json!({"channel": world::chat_of(&chat)}),
                            );
                            self.clients[i].sessions.insert(chat.clone());
                            self.sessions.push(chat);
                            String::new()
                        } else {
                            self.world.request(
                                c,
                                "disposeChat",
                                json!({"channel": world::chat_of(&s)}),
                            )
                        }
                    }
                };
            }
            _ => {}
        }
        Ok(())
    }
}

/// Runs one seed; returns what it exercised, or the failure (with the trace when `trace` is
/// set).
fn run_seed(seed: u64, trace: bool) -> Result<(u64, world::Stats), String> {
    let mut sim = Sim::new(seed);
    // SIM_TOLERATE_KNOWN=1: tolerate the known, reported host bugs (fuzz/README.md,
    // "Findings") to look for others. Off by default: the run is strict.
    let tolerate = std::env::var_os("SIM_TOLERATE_KNOWN").is_some();
    sim.tolerate = tolerate;
    sim.world.lenient_send_and_wait = tolerate;
    sim.world.lenient_reentrant_emit = tolerate;
    sim.world.lenient_orphan_sampling = tolerate;
    if trace {
        sim.world.trace = Some(String::new());
    }
    let steps = 30 + sim.rng.below(50);
    let result = sim.run(steps);
    if trace {
        if let Some(t) = &sim.world.trace {
            println!("{t}");
        }
    }
    result.map(|()| (sim.world.inputs, sim.world.stats))
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

#[test]
fn simulated_clients_over_an_unreliable_link() {
    if let Some(seed) = env_u64("SIM_SEED") {
        match run_seed(seed, true) {
            Ok((inputs, stats)) => println!("seed {seed}: ok ({inputs} host inputs, {stats:?})"),
            Err(e) => panic!("seed {seed} fails: {e}"),
        }
        return;
    }
    let first = env_u64("SIM_FIRST_SEED").unwrap_or(0);
    let count = env_u64("SIM_SEEDS").unwrap_or(1_000);
    let started = Instant::now();
    let mut failures = Vec::new();
    let mut inputs = 0;
    let mut stats = world::Stats::default();
    for seed in first..first + count {
        match std::panic::catch_unwind(|| run_seed(seed, false)) {
            Ok(Ok((n, s))) => {
                inputs += n;
                stats += s;
            }
            Ok(Err(e)) => failures.push((seed, e)),
            Err(_) => failures.push((seed, "panicked".to_owned())),
        }
    }
    println!(
        "{count} seeds from {first}: {} failed, {inputs} host inputs, {:.1?}; passing seeds \
         exercised {stats:?}",
        failures.len(),
        started.elapsed()
    );
    if std::env::var_os("SIM_LIST").is_some() {
        for (seed, e) in &failures {
            println!("seed {seed}: {}", world::truncate(e, 160));
        }
    }
    if let Some((seed, e)) = failures.first() {
        let seeds: Vec<u64> = failures.iter().map(|(s, _)| *s).take(20).collect();
        panic!(
            "{} of {count} seeds failed (first: {seeds:?}); seed {seed}: {e}\n\
             replay with: SIM_SEED={seed} cargo test --test core simulation::",
            failures.len()
        );
    }
}

/// The checker can fail: a host answering twice, or not at all, is caught.
#[test]
fn the_checker_catches_a_missing_response() {
    let mut w = World::new(WorldConfig::default());
    let c = w.open(Framing::ContentLength, 0);
    // A request the host never reads (the peer's bytes are never delivered) is still owed.
    w.request(c, "ping", json!({}));
    let owed = w.conns[c].owed_total();
    assert_eq!(owed, 1);
    w.conns[c].to_host.clear();
    let e = w
        .final_checks()
        .expect_err("an unanswered request must be reported");
    assert!(e.contains("never answered"), "{e}");
}

#[test]
fn the_checker_catches_a_second_response() {
    let mut w = World::new(WorldConfig::default());
    let c = w.open(Framing::ContentLength, 0);
    w.request(c, "ping", json!({}));
    w.deliver_all(c).unwrap();
    w.drain(c).unwrap();
    // Replay the host's answer as if it were sent twice.
    let dup = world::frame(
        Framing::ContentLength,
        br#"{"jsonrpc":"2.0","id":0,"result":{}}"#,
    );
    let e = w
        .inject_host_bytes(c, &dup)
        .expect_err("a second response must be reported");
    assert!(e.contains("not owed"), "{e}");
}

#[test]
fn the_checker_catches_a_broken_parent_chain_and_a_stray_delta() {
    let mut w = World::new(WorldConfig::default());
    let c = w.open(Framing::ContentLength, 0);
    w.request(
        c,
        "session.create",
        json!({"sessionId": "s", "streaming": false}),
    );
    w.deliver_all(c).unwrap();
    w.drain(c).unwrap();
    let event = |ty: &str, id: &str, parent: &str| {
        let body = json!({"jsonrpc":"2.0","method":"session.event","params":{"sessionId":"s",
            "event":{"type":ty,"data":{},"id":id,"timestamp":"2026-01-01T00:00:00Z","parentId":parent}}});
        world::frame(Framing::ContentLength, body.to_string().as_bytes())
    };
    let e = w
        .inject_host_bytes(c, &event("assistant.message", "x1", "not-the-last-one"))
        .expect_err("a broken chain must be reported");
    assert!(e.contains("parentId"), "{e}");
    let mut w2 = World::new(WorldConfig::default());
    let c2 = w2.open(Framing::ContentLength, 0);
    w2.request(
        c2,
        "session.create",
        json!({"sessionId": "s", "streaming": false}),
    );
    w2.deliver_all(c2).unwrap();
    w2.drain(c2).unwrap();
    let last = w2
        .host
        .session_events("s")
        .unwrap()
        .last()
        .unwrap()
        .id
        .clone();
    let delta = event("assistant.message_delta", "x2", &last);
    let e = w2
        .inject_host_bytes(c2, &delta)
        .expect_err("a delta to a non-streaming connection must be reported");
    assert!(e.contains("streaming"), "{e}");
}

/// An AHP client's world: one connection initialized as `a`, subscribed to a chat of a
/// session created through it, drained.
fn ahp_world() -> (World, usize) {
    let mut w = World::new(WorldConfig::default());
    let c = w.open_ahp(0);
    w.ahp_initialize(c, "a", &["ahp-root://".to_owned()]);
    w.request(c, "createSession", json!({"channel": "ahp-session:/s"}));
    w.request(c, "subscribe", json!({"channel": "ahp-chat:/s"}));
    w.deliver_all(c).unwrap();
    w.drain(c).unwrap();
    (w, c)
}

fn envelope(channel: &str, seq: u64, action: Value) -> Vec<u8> {
    let body = json!({"jsonrpc": "2.0", "method": "action",
                      "params": {"channel": channel, "serverSeq": seq, "action": action}});
    world::frame(Framing::ContentLength, body.to_string().as_bytes())
}

/// The AHP checks can fail: envelopes out of order, overlapping turns, another client's
/// rejection, a channel never subscribed, and an envelope lost on a subscribed channel.
#[test]
fn the_checker_catches_ahp_envelopes_out_of_order_overlapping_turns_and_foreign_rejections() {
    let (mut w, c) = ahp_world();
    let title = json!({"type": "session/titleChanged", "title": "t"});
    let started = |t: &str| world::turn_started(t, "hi");
    w.inject_host_bytes(c, &envelope("ahp-chat:/s", 50, started("t1")))
        .unwrap();
    let e = w
        .inject_host_bytes(c, &envelope("ahp-chat:/s", 49, title.clone()))
        .expect_err("a lower serverSeq must be reported");
    assert!(e.contains("out of order"), "{e}");

    let (mut w, c) = ahp_world();
    w.inject_host_bytes(c, &envelope("ahp-chat:/s", 50, started("t1")))
        .unwrap();
    let e = w
        .inject_host_bytes(c, &envelope("ahp-chat:/s", 51, started("t2")))
        .expect_err("a turn starting during another must be reported");
    assert!(e.contains("in progress"), "{e}");

    let (mut w, c) = ahp_world();
    let e = w
        .inject_host_bytes(c, &envelope("ahp-chat:/elsewhere", 60, title.clone()))
        .expect_err("an envelope on a channel never subscribed must be reported");
    assert!(e.contains("never subscribed"), "{e}");

    let (mut w, c) = ahp_world();
    let body = json!({"jsonrpc": "2.0", "method": "action", "params": {
        "channel": "ahp-chat:/s", "serverSeq": 3, "action": title,
        "origin": {"clientId": "someone-else", "clientSeq": 1},
        "rejectionReason": "no"}});
    let e = w
        .inject_host_bytes(
            c,
            &world::frame(Framing::ContentLength, body.to_string().as_bytes()),
        )
        .expect_err("another client's rejection must be reported");
    assert!(e.contains("sender alone"), "{e}");
}

#[test]
fn the_checker_catches_an_envelope_lost_on_a_subscribed_channel() {
    let (mut w, a) = ahp_world();
    let b = w.open_ahp(1);
    w.ahp_initialize(b, "b", &["ahp-chat:/s".to_owned()]);
    w.deliver_all(b).unwrap();
    w.drain(b).unwrap();
    // B sees an envelope on the chat that A, subscribed too, never gets.
    let title = json!({"type": "session/titleChanged", "title": "t"});
    w.inject_host_bytes(b, &envelope("ahp-chat:/s", 70, title))
        .unwrap();
    let e = w
        .final_checks()
        .expect_err("an envelope one subscriber missed must be reported");
    assert!(e.contains("c0") && e.contains("lost"), "{e} (a = c{a})");
}
