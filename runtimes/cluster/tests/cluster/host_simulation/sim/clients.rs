//! The clients' side of the schedule, and the quiet end with the final checks.

use std::time::Duration;

use agentwire::frame::Framing;
use serde_json::json;

use super::super::client::{frame, Client, Link};
use super::super::node::End;
use super::{session_id, Sim, NODES, PROMPTS, SESSIONS};

impl Sim {
    // ----- clients -----

    pub(super) fn move_client(&mut self, c: usize) {
        let Some(link) = self.clients[c].link else {
            return;
        };
        let t = self.t();
        if let Some(node) = self.nodes[link.node].as_mut() {
            if node.paused > 0 {
                return;
            }
            node.ends.remove(&link.conn);
            node.held.remove(&link.conn);
            node.host.handle_eof(t, link.conn);
        }
        self.clients[c].disconnected();
        self.settle(link.node);
    }

    /// One thing client `c` does. `chatty`: it may prompt, ask for messages and move.
    pub(super) fn client_step(&mut self, c: usize, chatty: bool) {
        let s = (0..SESSIONS)
            .find(|&s| session_id(s) == self.clients[c].session)
            .expect("session");
        let Some(link) = self.clients[c].link else {
            return self.connect(c, None);
        };
        if self.nodes[link.node].as_ref().is_none_or(|n| n.paused > 0) {
            return;
        }
        let subject = self.layout.log_subject(&self.clients[c].session);
        let acked: Vec<String> = self
            .acked
            .get(&subject)
            .map(|a| a.iter().map(|a| a.event_id.clone()).collect())
            .unwrap_or_default();
        let client = &mut self.clients[c];
        let session = client.session.clone();
        let bytes = if let Some(answer) = client.answers.pop_front() {
            match answer["method"].as_str() {
                Some(method) => client.request(method, answer["params"].clone(), Vec::new()),
                None => frame(&answer),
            }
        } else if !client.attached {
            if !client.pending.is_empty() {
                return;
            }
            let Some(method) = self.attach_method(c, s) else {
                return;
            };
            let client = &mut self.clients[c];
            let params = client.attach_params();
            client.request(method, params, Vec::new())
        } else if chatty && client.prompts_left > 0 && self.rng.below(3) == 0 {
            client.prompts_left -= 1;
            let prompt = PROMPTS[self.rng.below(PROMPTS.len() as u64) as usize];
            let params = json!({"sessionId": session, "prompt": prompt});
            client.request("session.send", params, Vec::new())
        } else if chatty && self.rng.below(2) == 0 {
            client.request("session.getMessages", json!({"sessionId": session}), acked)
        } else {
            return;
        };
        let t = self.t();
        self.node(link.node).feed(t, link.conn, &bytes);
        self.settle(link.node);
    }

    /// Create or resume, or nothing while the session does not exist yet.
    pub(super) fn attach_method(&mut self, c: usize, s: usize) -> Option<&'static str> {
        let client = &self.clients[c];
        if self.created[s] {
            let link = client.link.expect("connected");
            if self.last_node[c].is_some_and(|n| n != link.node) {
                self.stats.resumes_elsewhere += 1;
            }
            self.last_node[c] = Some(link.node);
            Some("session.resume")
        } else if client.creator {
            self.last_node[c] = client.link.map(|l| l.node);
            Some("session.create")
        } else {
            None
        }
    }

    /// Connects client `c` to a serving node (`only`: that one), preferring another node
    /// than its last.
    pub(super) fn connect(&mut self, c: usize, only: Option<usize>) {
        let candidates: Vec<usize> = (0..NODES)
            .filter(|&i| only.is_none_or(|o| o == i))
            .filter(|&i| {
                self.nodes[i]
                    .as_ref()
                    .is_some_and(|n| n.keeper.is_serving() && n.paused == 0)
            })
            .collect();
        if candidates.is_empty() {
            return;
        }
        let mut i = candidates[self.rng.below(candidates.len() as u64) as usize];
        if Some(i) == self.last_node[c] && candidates.len() > 1 && self.rng.below(4) > 0 {
            i = candidates
                [(candidates.iter().position(|&x| x == i).expect("i") + 1) % candidates.len()];
        }
        // Now and then the node another client of the session is on: two clients of one
        // gateway node relayed to one owner share its relay group (invariant 5).
        let sibling = (0..self.clients.len())
            .filter(|&o| o != c && self.clients[o].session == self.clients[c].session)
            .filter_map(|o| self.clients[o].link.map(|l| l.node))
            .find(|n| candidates.contains(n));
        if let Some(n) = sibling.filter(|_| only.is_none() && self.rng.below(3) == 0) {
            i = n;
        }
        let t = self.t();
        let node = self.node(i);
        let conn = node.host.open(t, Framing::ContentLength);
        node.ends.insert(conn, End::Client(c));
        let incarnation = node.me.incarnation;
        self.clients[c].connected(Link {
            node: i,
            incarnation,
            conn,
        });
        self.last_node[c] = self.last_node[c].or(Some(i));
    }

    // ----- the quiet end -----

    /// Heals everything, restarts dead nodes and lets the run settle: no new prompts, every
    /// client reconnected and attached, every request answered, every frame out.
    pub(super) fn quiesce(&mut self) {
        self.trace("quiet end".into());
        for i in 0..NODES {
            self.partitioned[i] = 0;
            self.cluster.set_partitioned(&self.names[i], false);
            if let Some(node) = self.nodes[i].as_mut() {
                node.paused = 0;
            }
        }
        self.cluster.heal();
        self.drift = Duration::ZERO;
        for round in 0..3_000u64 {
            for i in 0..NODES {
                if self.nodes[i].is_none() {
                    self.start_node(i);
                }
                self.node_step(i);
            }
            for c in 0..self.clients.len() {
                self.client_step(c, false);
            }
            self.cluster.advance(Duration::from_millis(100));
            self.check();
            self.stats.quiet_steps += 1;
            if round > 20 && self.settled() {
                return;
            }
        }
        let pending = self.clients.iter().any(|c| !c.pending.is_empty());
        panic!(
            "{}the run did not settle: {}",
            if pending {
                "invariant 4: requests never answered; "
            } else {
                ""
            },
            self.describe()
        );
    }

    pub(super) fn settled(&self) -> bool {
        let t = self.t();
        self.nodes.iter().all(|n| {
            n.as_ref().is_some_and(|n| {
                n.keeper.is_serving() && n.quiet() && n.host.poll_timeout().is_none_or(|d| d > t)
            })
        }) && self
            .clients
            .iter()
            .all(|c| c.link.is_some() && c.attached && c.pending.is_empty() && c.answers.is_empty())
    }

    pub(super) fn describe(&self) -> String {
        let mut out = String::new();
        for (i, n) in self.nodes.iter().enumerate() {
            match n {
                None => out.push_str(&format!("\nnode {i}: dead")),
                Some(n) => out.push_str(&format!(
                    "\nnode {i}: serving {} busy {} work {:?} held {} gateways {} {:?} {:?}",
                    n.keeper.is_serving(),
                    n.sessions.is_busy(),
                    n.work.iter().map(|(t, _)| t).collect::<Vec<_>>(),
                    n.held.values().map(|h| h.len()).sum::<usize>(),
                    n.gateways.len(),
                    n.gateway,
                    n.owner,
                )),
            }
        }
        for (c, client) in self.clients.iter().enumerate() {
            out.push_str(&format!(
                "\nclient {c}: link {:?} attached {} pending {:?}",
                client.link.map(|l| l.node),
                client.attached,
                client
                    .pending
                    .values()
                    .map(|p| p.method.as_str())
                    .collect::<Vec<_>>()
            ));
        }
        out
    }

    /// Invariant 3 on every node for every session, and invariant 4 at the end.
    pub(super) fn final_checks(&mut self) {
        for i in 0..NODES {
            for s in 0..SESSIONS {
                if !self.created[s] {
                    continue;
                }
                let session = session_id(s);
                let subject = self.layout.log_subject(&session);
                let c = self.clients.len();
                self.clients.push(Client::new(session.clone(), false, 0));
                self.last_node.push(None);
                self.connect(c, Some(i));
                assert!(self.clients[c].link.is_some(), "node {i} serves at the end");
                let everything: Vec<String> = self
                    .index
                    .subject(&subject)
                    .map(|l| l.ids().map(str::to_owned).collect())
                    .unwrap_or_default();
                let bytes = self.clients[c].request(
                    "session.getMessages",
                    json!({"sessionId": session}),
                    everything,
                );
                let link = self.clients[c].link.expect("connected");
                let before = self.stats.client.get_messages_checked;
                let t = self.t();
                self.node(i).feed(t, link.conn, &bytes);
                self.settle(i);
                for _ in 0..500 {
                    if self.clients[c].pending.is_empty() {
                        break;
                    }
                    for j in 0..NODES {
                        self.node_step(j);
                    }
                    self.cluster.advance(Duration::from_millis(100));
                }
                assert!(
                    self.clients[c].pending.is_empty(),
                    "invariant 3: node {i} never answered getMessages for {session}: {}",
                    self.describe()
                );
                assert_eq!(
                    self.stats.client.get_messages_checked,
                    before + 1,
                    "invariant 3: node {i} failed getMessages for {session}: {:?} {:?} {}",
                    self.clients[c].last_error,
                    self.clients[c].link,
                    self.describe()
                );
            }
        }
        for (c, client) in self.clients.iter().enumerate() {
            assert!(
                client.pending.is_empty(),
                "invariant 4: client {c} has requests never answered: {:?}",
                client.pending
            );
        }
    }
}
