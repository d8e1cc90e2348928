//! Deterministic simulation of several agentwire hosts (one per node) over the in-memory
//! engine, with SDK-like clients.
//!
//! Three nodes each run a sans-IO `Host` glued to `MemoryEngine` the way `src/node.rs` glues
//! it to NATS, with the crate's own machines (`agentwire_cluster::machines`: the node's lease
//! keeper and session log with its workers and lookups, both sides of the node's links and
//! relay groups, and each relayed client's gateway; `host_simulation/node.rs` says which
//! behaviour each piece mirrors): persisted events are appended through the fenced single
//! writer, frames
//! reach clients only after their events are acknowledged, lookups claim and restore a dead
//! owner's session and close its open turn, or relay the client to a live owner over live
//! subjects (`host_simulation/sim/links.rs` runs the link and group machines as `owner.rs`
//! and `group.rs` do, `sim/gateways.rs` the gateway machine as `gateway.rs` does): the
//! client's frames go to the owner on its own link, and
//! the owner serves it as a member of the gateway node's relay group (one group connection
//! per gateway node and owner incarnation, `ClusterApi::join_relay_group`), whose frames carry
//! every member's responses, requests and events back, an event for several members once.
//! Clients (Content-Length JSON-RPC, as the Copilot SDKs) create sessions, send prompts to
//! the scripted agent, answer client-tool and permission requests, ask `session.getMessages`,
//! move to another node (now and then to the node another client of the session is on) and
//! `session.resume` there.
//!
//! A seeded schedule moves time (lease expiry), pauses a busy owner past its lease and
//! resumes it (its tasks run before its lease task notices: its appends are fenced), loses
//! requests and acknowledgements, and kills nodes (their clients reconnect to another node and
//! resume; the node restarts as a new incarnation); then every fault heals and the run settles.
//! It also drops live-subject messages and partitions nodes (both lose link and group
//! messages; `SIM_LINK_LOSS=0` turns that off): links and groups number their messages and
//! send heartbeats, so a lost one or silence breaks the link (the owner ends the member and
//! its group says so, `@?`) or the group (every member's link ends). A relayed client's
//! gateway follows its session as in the runtime: after a broken link it re-attaches the
//! client to the same owner when it still answers; when the owner dies, to whichever node
//! took the session over (over a new link, or to its own node's host), failing the requests
//! the old owner never answered and catching the client up from the log. An owner ends a
//! group when the gateway
//! node's lease is gone or it had no member for a while (its members end with it); an opening
//! naming a group that ended is refused and the gateway node starts a new one. Invariants,
//! checked after every step:
//!
//! 1. nothing a fenced owner emits after its fence reaches a client: every durable event a
//!    client gets is in the log, and no frame a node took after another node's claim superseded
//!    its own is written to a client or a relay group;
//! 2. no acknowledged event is lost or duplicated: each is in the log at its acknowledged
//!    sequence, no event is stored twice, and every owner's history (once its claim is
//!    acknowledged to it) starts with the whole log;
//! 3. every `session.getMessages` answer is a prefix of the log holding every event
//!    acknowledged before it was asked; at the end every live node answers it for every
//!    session with the whole log;
//! 4. every request gets at most one response, and at the end (faults healed, the schedule
//!    quiet) every request on an open connection got exactly one;
//! 5. relayed frames travel in their group, addressed: a member of a live group writes nothing
//!    of its own (it would be lost); every event a relayed client receives was handed to it
//!    by its gateway (from its group, its own host's link, or the log in a catch-up), once;
//!    each event crosses once per group however many of the gateway
//!    node's clients it is for; a client gets only its own session's events, and streaming
//!    deltas only if it attached with `streaming: true`.
//!
//! `cargo test -p agentwire-cluster --test cluster host_simulation::` runs `SIM_SEEDS` seeds (default
//! 200) from `SIM_FIRST_SEED` (default 0); a failure names its seed, and `SIM_TRACE=1` prints
//! what the schedule did.

mod client;
mod log;
mod node;
mod sim;

use futures_util::FutureExt;

/// Runs an in-memory engine future, which is always ready at once.
fn now<F: std::future::Future>(future: F) -> F::Output {
    future
        .now_or_never()
        .expect("in-memory engine futures are ready at once")
}

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn run_seed(seed: u64) -> sim::Stats {
    match std::panic::catch_unwind(|| sim::run(seed, sim::STEPS)) {
        Ok(stats) => stats,
        Err(e) => {
            eprintln!(
                "host simulation failed with seed {seed} (SIM_FIRST_SEED={seed} SIM_SEEDS=1)"
            );
            std::panic::resume_unwind(e)
        }
    }
}

#[test]
fn invariants_hold_across_nodes_under_faults() {
    let first = env("SIM_FIRST_SEED", 0);
    let seeds = env("SIM_SEEDS", 200);
    let started = std::time::Instant::now();
    let mut total = sim::Stats::default();
    for seed in first..first + seeds {
        total.add(&run_seed(seed));
    }
    eprintln!("{seeds} seeds in {:?}: {total:?}", started.elapsed());
    // The schedule really exercises takeovers, fencing, gateways, relay groups and lost
    // messages, so the invariants are not checked on idle runs.
    if seeds >= 50 {
        assert!(total.acked > 20 * seeds, "{total:?}");
        assert!(total.takeovers > 2 * seeds, "{total:?}");
        assert!(total.fenced_stops > seeds / 20, "{total:?}");
        assert!(total.gateways > 5 * seeds, "{total:?}");
        assert!(total.kills > seeds, "{total:?}");
        assert!(total.client.get_messages_checked > 5 * seeds, "{total:?}");
        assert!(total.client.tool_requests > seeds / 2, "{total:?}");
        assert!(total.client.ephemeral > seeds, "{total:?}");
        assert!(total.resumes_elsewhere > 5 * seeds, "{total:?}");
        // Relayed clients follow their session: re-attached to the same owner after a broken
        // link or to the new owner after a takeover, their own node's host among them.
        assert!(total.reattached > seeds / 10, "{total:?}");
        assert!(total.reattached_here > seeds / 20, "{total:?}");
        assert!(total.groups > 2 * seeds, "{total:?}");
        assert!(total.group_events > 2 * seeds, "{total:?}");
        // Several clients of one gateway node on one session share its group.
        assert!(total.shared_events > seeds / 10, "{total:?}");
        assert!(
            total.groups_idle + total.groups_peer_gone > seeds / 2,
            "{total:?}"
        );
        if sim::link_loss() {
            // Lost link messages are sent again; partitions longer than the repair window
            // still break links and groups.
            assert!(total.resends > seeds, "{total:?}");
            assert!(total.links_broken > seeds / 2, "{total:?}");
            assert!(total.groups_broken > seeds / 2, "{total:?}");
            assert!(total.ended_link_broke > seeds / 4, "{total:?}");
            assert!(total.ended_group_broke > seeds / 10, "{total:?}");
            assert!(total.reattached > seeds / 4, "{total:?}");
        }
    }
}
