//! The bodies of the cluster fuzz targets, shared by the cargo-fuzz binaries
//! (`fuzz/fuzz_targets/cluster_links.rs`, `cluster_gateway.rs`) and the stable corpus replay
//! of the cluster crate (`runtimes/cluster/tests/cluster/fuzz_replay.rs`): `cluster_links`
//! below, and [`cluster_gateway`] (a relayed client's gateway machine, `gateway.rs`).
//!
//! A node's links and relay groups take bytes from cluster peers: link messages from a gateway
//! node, resend requests, relay group messages (whose bodies are relay frames) from an owner,
//! and link openings. The target drives both sides of a node's links, the owner's
//! ([`OwnerLinks`]) and the gateway node's ([`GatewayLinks`]), with fuzzed operations: openings
//! with fuzzed names and dialects, well-formed link and group messages carrying fuzzed bodies
//! (lost, repeated or reordered now and then), raw bytes on any subject, frames the host
//! writes, ends, lease answers and time. Beyond "no panic" it asserts what the runners rely
//! on:
//!
//! * a subject is subscribed at most once at a time, and only a subscribed one is
//!   unsubscribed;
//! * one lease check per peer is out at a time;
//! * the owner delivers frames only to members it accepted and has not ended, and ends each
//!   member once;
//! * the gateway side hands owner frames only to links that are attached and open, each at
//!   most once per frame, and takes no second link for a member it has already; it ends each link once and each group once, and a group that ended
//!   takes no member;
//! * an opening read from a peer's request names subject tokens only.

mod gateway;

pub use gateway::cluster_gateway;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use agentwire::host::Dialect;
use agentwire_cluster::layout::Layout;
use agentwire_cluster::machines::gateway_links::{GatewayEvent, GatewayLinks};
use agentwire_cluster::machines::live::LiveIo;
use agentwire_cluster::machines::outbound::Outbound;
use agentwire_cluster::machines::owner_links::{Opening, OwnerEvent, OwnerLinks, RelayHost};
use agentwire_cluster::NodeIdentity;
use agentwire_fuzz_targets::targets::Input;
use bytes::Bytes;

/// The host of the owner side: numbered connections; a group connection in `gone` refuses
/// members.
#[derive(Default)]
struct Host {
    next: u32,
    groups: Vec<u32>,
    gone: BTreeSet<u32>,
}

impl RelayHost<u32> for Host {
    fn open_group(&mut self, _group: &str, _dialect: Dialect) -> Option<u32> {
        self.next += 1;
        self.groups.push(self.next);
        Some(self.next)
    }

    fn open_member(&mut self, _: Dialect, _: bool, group: u32) -> Option<u32> {
        self.next += 1;
        (!self.gone.contains(&group)).then_some(self.next)
    }
}

fn node(name: &str, incarnation: u64) -> NodeIdentity {
    NodeIdentity {
        node: name.to_owned(),
        incarnation,
    }
}

const DIALECTS: [Dialect; 3] = [Dialect::CopilotSdk, Dialect::Acp, Dialect::Ahp];

/// What the runners rely on, checked on every event.
#[derive(Default)]
struct Model {
    subscribed: BTreeSet<String>,
    leases_out: BTreeSet<NodeIdentity>,
    /// Owner side: live members.
    members: BTreeSet<u32>,
    group_conns_ended: BTreeSet<u32>,
    /// Gateway side: attached links, open ones, ended ones; groups that ended.
    attached: BTreeSet<u32>,
    open: BTreeSet<u32>,
    links_ended: BTreeSet<u32>,
    groups_ended: BTreeSet<String>,
    /// Gateway side: each group's members (the owner's ids) and their links.
    group_members: BTreeMap<String, BTreeMap<u64, u32>>,
}

impl Model {
    fn live(&mut self, io: LiveIo, side: &str) {
        match io {
            LiveIo::Subscribe(s) => assert!(
                self.subscribed.insert(format!("{side} {s}")),
                "{side}: {s} subscribed twice"
            ),
            LiveIo::Unsubscribe(s) => assert!(
                self.subscribed.remove(&format!("{side} {s}")),
                "{side}: {s} unsubscribed but not subscribed"
            ),
            LiveIo::Publish { .. } | LiveIo::AskAgain { .. } => {}
        }
    }

    fn owner(&mut self, owner: &mut OwnerLinks<u32>, host: &Host) {
        while let Some(event) = owner.poll_event() {
            match event {
                OwnerEvent::Live(io) => self.live(io, "owner"),
                OwnerEvent::CheckLease(peer) => assert!(
                    self.leases_out.insert(peer.clone()),
                    "a second lease check of {peer:?} while one is out"
                ),
                OwnerEvent::Deliver { member, .. } => assert!(
                    self.members.contains(&member),
                    "a frame for member {member}, which is not live"
                ),
                OwnerEvent::MemberEnded { member, .. } => assert!(
                    self.members.remove(&member),
                    "member {member} ended twice or was never accepted"
                ),
                OwnerEvent::GroupEnded { conn, .. } => {
                    assert!(
                        host.groups.contains(&conn),
                        "unknown group connection {conn}"
                    );
                    assert!(
                        self.group_conns_ended.insert(conn),
                        "group connection {conn} ended twice"
                    );
                }
            }
        }
    }

    fn gateway(&mut self, gateway: &mut GatewayLinks<u32>) {
        while let Some(event) = gateway.poll_event() {
            match event {
                GatewayEvent::Live(io) => self.live(io, "gateway"),
                GatewayEvent::Frame { to, .. } => {
                    let unique: BTreeSet<_> = to.iter().collect();
                    assert_eq!(unique.len(), to.len(), "a frame for a link twice: {to:?}");
                    for link in &to {
                        assert!(
                            self.open.contains(link),
                            "a frame for link {link}, not open"
                        );
                    }
                }
                GatewayEvent::LinkEnded { link, .. } => {
                    assert!(
                        self.attached.contains(&link),
                        "link {link} ended, never attached"
                    );
                    assert!(self.links_ended.insert(link), "link {link} ended twice");
                    self.open.remove(&link);
                    for members in self.group_members.values_mut() {
                        members.retain(|_, l| *l != link);
                    }
                }
                GatewayEvent::GroupEnded { group, .. } => {
                    assert!(
                        self.groups_ended.insert(group.clone()),
                        "{group} ended twice"
                    );
                    self.group_members.remove(&group);
                }
            }
        }
    }
}

/// Well-formed group frame bodies, from the vocabulary of relay frames.
fn group_body(input: &mut Input) -> Vec<u8> {
    let m = input.u8() % 6;
    match input.u8() % 7 {
        0 => format!("@{m}\n{{\"jsonrpc\":\"2.0\",\"id\":{m},\"result\":{{}}}}").into_bytes(),
        1 => format!("@{m},{}\n{{\"method\":\"x\"}}", m + 1).into_bytes(),
        2 => format!("@!{m}\nbye").into_bytes(),
        3 => format!("@?{m}\nthe link broke").into_bytes(),
        4 => b"@?\nthe owner closed it".to_vec(),
        5 => br#"{"jsonrpc":"2.0","method":"session.event","params":{"sessionId":"s","event":{"id":"e","type":"assistant.message_delta","ephemeral":true,"data":{}}}}"#.to_vec(),
        _ => input.bytes(usize::from(input.peek() % 48) + 1).to_vec(),
    }
}

/// Publishes what `sender` hands out into `deliver`, losing, repeating or swapping
/// messages as the input says.
fn carry(input: &mut Input, sender: &mut Outbound, mut deliver: impl FnMut(&Bytes)) {
    let mode = input.u8();
    let mut messages: Vec<Bytes> = std::iter::from_fn(|| sender.poll_transmit()).collect();
    match mode % 8 {
        0 if !messages.is_empty() => {
            let lost = usize::from(input.u8()) % messages.len();
            messages.remove(lost);
        }
        1 if !messages.is_empty() => {
            let again = messages[usize::from(input.u8()) % messages.len()].clone();
            messages.push(again);
        }
        2 if messages.len() > 1 => messages.swap(0, 1),
        _ => {}
    }
    for message in &messages {
        deliver(message);
    }
}

/// Runs one input.
pub fn cluster_links(data: &[u8]) {
    let mut input = Input::new(data);
    let layout = Layout::default();
    let t0 = Instant::now();
    let mut now = t0;
    let every = Duration::from_millis(3000);
    let mut owner = OwnerLinks::new(layout.clone(), every, 1 << 16);
    let mut gateway = GatewayLinks::new(layout.clone(), node("b", 1), 1 << 16);
    let mut host = Host::default();
    let mut model = Model::default();
    let peers = [node("b", 1), node("b", 2)];
    let owners = [node("a", 1), node("c", 7)];
    // The gateway nodes' senders of each link (by name), the owners' of each group.
    let mut to_owner: BTreeMap<String, Outbound> = BTreeMap::new();
    let mut groups_out: BTreeMap<String, Outbound> = BTreeMap::new();
    let mut groups: Vec<String> = Vec::new();
    let mut next_link = 0u32;
    let mut ops = 0;
    while !input.is_empty() && ops < 300 {
        ops += 1;
        match input.u8() % 18 {
            0 => {
                let opening = Opening {
                    link: format!("l{}", input.u8() % 4),
                    peer: peers[input.pick(2)].clone(),
                    group: format!("g{}", input.u8() % 3),
                    dialect: DIALECTS[input.pick(3)],
                    authenticated: input.u8() % 2 == 0,
                };
                if let Ok(member) = owner.accept(now, &opening, &mut host) {
                    assert!(
                        model.members.insert(member),
                        "member {member} accepted twice"
                    );
                    to_owner
                        .entry(opening.link)
                        .or_insert_with(|| Outbound::new(now));
                }
            }
            1 => {
                let link = format!("l{}", input.u8() % 4);
                let sender = to_owner
                    .entry(link.clone())
                    .or_insert_with(|| Outbound::new(now));
                match input.u8() % 4 {
                    0 => sender.close(),
                    1 => sender.handle_timeout(now),
                    _ => {
                        let n = usize::from(input.peek() % 64) + 1;
                        sender.send(input.bytes(n), usize::from(input.u8() % 40) + 8)
                    }
                }
                let subject = layout.link_in_subject(&link);
                carry(&mut input, sender, |m| {
                    owner.handle_message(now, &subject, m)
                });
            }
            2 => {
                let subject = match input.u8() % 4 {
                    0 => layout.link_in_subject(&format!("l{}", input.u8() % 4)),
                    1 => layout
                        .resend_subject(&layout.group_subject(&format!("g{}", input.u8() % 3))),
                    2 => {
                        layout.resend_subject(&layout.link_in_subject(&format!("x{}", input.u8())))
                    }
                    _ => String::from_utf8_lossy(input.bytes(8)).into_owned(),
                };
                let payload = Bytes::copy_from_slice(input.bytes(usize::from(input.peek() % 40)));
                owner.handle_message(now, &subject, &payload);
                gateway.handle_message(&subject, &payload);
            }
            3 => {
                let conn = host
                    .groups
                    .get(input.pick(host.groups.len() + 1))
                    .copied()
                    .unwrap_or(99);
                let body = input.bytes(usize::from(input.peek() % 64)).to_vec();
                owner.handle_group_frame(now, conn, &body, usize::from(input.u8()) + 8);
            }
            4 => {
                let conn = host
                    .groups
                    .get(input.pick(host.groups.len() + 1))
                    .copied()
                    .unwrap_or(99);
                match input.u8() % 3 {
                    0 => owner.handle_group_closing(conn),
                    1 => owner.handle_group_closed(now, conn),
                    _ => {
                        host.gone.insert(conn);
                    }
                }
            }
            5 => {
                let member = model
                    .members
                    .iter()
                    .nth(input.pick(model.members.len() + 1))
                    .copied();
                let member = member.unwrap_or(u32::from(input.u8()));
                owner.handle_member_closed(member);
                model.members.remove(&member);
            }
            6 => {
                let peer = model
                    .leases_out
                    .iter()
                    .next()
                    .cloned()
                    .unwrap_or_else(|| peers[0].clone());
                let alive = input.u8() % 4 != 0;
                model.leases_out.remove(&peer);
                owner.handle_lease(now, &peer, alive);
            }
            7 => {
                now += Duration::from_millis(u64::from(input.u16()) * 4);
                owner.handle_timeout(now);
                gateway.handle_timeout(now);
            }
            8 => {
                let id = gateway.group_to(now, &owners[input.pick(2)], DIALECTS[input.pick(3)]);
                if !groups.contains(&id) {
                    groups.push(id.clone());
                    groups_out.insert(id, Outbound::new(now));
                }
            }
            9..=10 => {
                let Some(group) = groups.get(input.pick(groups.len())).cloned() else {
                    continue;
                };
                match input.u8() % 4 {
                    0 => gateway.begin_open(&group),
                    1 => gateway.open_done(&group),
                    2 => gateway.refused(&group),
                    _ => {
                        next_link += 1;
                        let member = u64::from(input.u8() % 6);
                        let attached = gateway.attach(
                            now,
                            &group,
                            member,
                            next_link,
                            &format!("k{next_link}"),
                        );
                        if model.groups_ended.contains(&group) {
                            assert!(!attached, "{group} ended and took a member");
                        }
                        let members = model.group_members.entry(group.clone()).or_default();
                        if let Some(first) = members.get(&member) {
                            assert!(!attached, "member {member} of {group} is link {first}'s");
                        }
                        if attached {
                            members.insert(member, next_link);
                            model.attached.insert(next_link);
                            model.open.insert(next_link);
                        }
                    }
                }
            }
            11 => {
                let link = model
                    .attached
                    .iter()
                    .nth(input.pick(model.attached.len() + 1))
                    .copied();
                let link = link.unwrap_or(1000);
                if input.u8() % 3 == 0 {
                    gateway.close_link(&link);
                    model.open.remove(&link);
                } else {
                    let body = input.bytes(usize::from(input.peek() % 32)).to_vec();
                    gateway.send(&link, &body, usize::from(input.u8()) + 8);
                }
            }
            12..=14 => {
                let Some(group) = groups.get(input.pick(groups.len())).cloned() else {
                    continue;
                };
                let sender = groups_out.get_mut(&group).expect("a sender per group");
                match input.u8() % 5 {
                    0 => sender.close(),
                    1 => sender.handle_timeout(now),
                    _ => {
                        let body = group_body(&mut input);
                        sender.send(&body, usize::from(input.u8() % 40) + 8)
                    }
                }
                let subject = layout.group_subject(&group);
                carry(&mut input, sender, |m| gateway.handle_message(&subject, m));
            }
            15 => {
                let subject = match groups.get(input.pick(groups.len() + 1)) {
                    Some(group) => layout.group_subject(group),
                    None => String::from_utf8_lossy(input.bytes(6)).into_owned(),
                };
                gateway.handle_unsubscribed(&subject);
            }
            16 => {
                // A peer's link opening request.
                let text = input.bytes(usize::from(input.peek() % 120) + 1);
                if let Ok(open) = serde_json::from_slice(text) {
                    if let Some((opening, _)) = Opening::read(&open) {
                        for name in [&opening.link, &opening.group] {
                            assert!(
                                !name.is_empty()
                                    && name.bytes().all(|b| b.is_ascii_alphanumeric()
                                        || b == b'_'
                                        || b == b'-'),
                                "an opening named {name:?}"
                            );
                        }
                    }
                }
            }
            _ => {
                // An opening as a gateway node writes it, read back.
                let opening = Opening {
                    link: format!("l{}", input.u8()),
                    peer: peers[input.pick(2)].clone(),
                    group: format!("g{}", input.u8()),
                    dialect: DIALECTS[input.pick(3)],
                    authenticated: input.u8() % 2 == 0,
                };
                let read = Opening::read(&opening.request(&["{}".to_owned()]));
                assert_eq!(read.map(|(o, h)| (o, h.len())), Some((opening, 1)));
            }
        }
        model.owner(&mut owner, &host);
        model.gateway(&mut gateway);
    }
}
