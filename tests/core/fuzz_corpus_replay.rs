//! Replays every file of every fuzz corpus (`fuzz/corpus/<target>/`) through the same target
//! code the fuzzers run (`fuzz/targets/`), so CI exercises the corpora on stable without
//! cargo-fuzz. A target asserts its invariants itself: a corpus file that breaks one fails here
//! with the file's name.

// The fuzz crate is not in the workspace (cargo-fuzz, libfuzzer-sys); its target bodies are
// the workspace crate agentwire-fuzz-targets.
use agentwire_fuzz_targets::{model_targets, targets};

use std::path::{Path, PathBuf};

fn corpus_files(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("corpus {} is missing: {e}", dir.display()))
        .map(|entry| entry.expect("corpus entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

fn replay(target: &str, run: fn(&[u8])) {
    let files = corpus_files(target);
    assert!(!files.is_empty(), "the {target} corpus is empty");
    for file in &files {
        let data = std::fs::read(file).expect("read corpus file");
        if let Err(panic) = std::panic::catch_unwind(|| run(&data)) {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default();
            panic!("{target}: corpus file {} fails: {message}", file.display());
        }
    }
}

#[test]
fn content_length_decoder_corpus() {
    replay("content_length_decoder", targets::content_length_decoder);
}

#[test]
fn ndjson_decoder_corpus() {
    replay("ndjson_decoder", targets::ndjson_decoder);
}

#[test]
fn jsonrpc_parse_corpus() {
    replay("jsonrpc_parse", targets::jsonrpc_parse);
}

#[test]
fn host_sequence_corpus() {
    replay("host_sequence", targets::host_sequence);
}

#[test]
fn model_stream_corpus() {
    replay("model_stream", model_targets::model_stream);
}

// ---------------------------------------------------------------------------------------------
// Regression tests: every failure the fuzzers or the simulation found, as a minimal input.
// Each asserts the correct behaviour; the bugs are in src/ (see fuzz/README.md, "Findings").
// ---------------------------------------------------------------------------------------------

use agentwire::frame::{FrameDecoder, FrameLimits, Framing};
use serde_json::json;
use targets::world::{World, WorldConfig};

/// A world with one Content-Length connection.
fn world() -> (World, usize) {
    let mut w = World::new(WorldConfig::default());
    w.keep_inbox = true;
    let c = w.open(Framing::ContentLength, 0);
    (w, c)
}

/// Sends everything queued on `c` and reads the answers.
fn flush(w: &mut World, c: usize) {
    w.deliver_all(c).expect("checker");
    w.drain_all().expect("checker");
}

/// NDJSON: a whitespace-only line is skipped when it arrives whole, so it must be skipped when
/// it arrives in pieces too (found by `ndjson_decoder`: `fuzz/regressions/ndjson-long-blank-line`).
#[test]
fn ndjson_long_blank_line_is_skipped_however_it_is_split() {
    let limits = FrameLimits {
        max_frame_bytes: 7,
        ..FrameLimits::default()
    };
    let stream = b"          \n{}\n";
    let mut whole = FrameDecoder::new(Framing::Ndjson, limits);
    whole.push(stream).unwrap();
    assert_eq!(whole.next_frame().unwrap().as_deref(), Some(&b"{}"[..]));
    let mut split = FrameDecoder::new(Framing::Ndjson, limits);
    let mut frames = Vec::new();
    for b in stream {
        split
            .push(&[*b])
            .expect("a blank line is not a frame, whatever its length");
        while let Some(f) = split.next_frame().expect("no error") {
            frames.push(f.to_vec());
        }
    }
    assert_eq!(frames, vec![b"{}".to_vec()]);
    // Through the fuzz target, which compares the two.
    targets::ndjson_decoder(b"\x03\x00          \n{}\n");
}

/// `session.sendAndWait` must be answered even if its caller detaches from the session before
/// the turn ends (found by the simulation; the waiter was dropped, the id stayed in flight).
#[test]
fn send_and_wait_is_answered_when_its_caller_detaches() {
    let (mut w, c) = world();
    w.request(c, "session.create", json!({"sessionId": "s"}));
    let id = w.request(
        c,
        "session.sendAndWait",
        json!({"sessionId": "s", "prompt": "slow"}),
    );
    w.request(c, "session.detach", json!({"sessionId": "s"}));
    flush(&mut w, c);
    w.settle(100).expect("checker");
    assert!(
        !w.conns[c].is_owed(&id),
        "sendAndWait (id {id}) was never answered after its caller detached"
    );
    // The id is free again: reusing it is not "already in flight".
    w.request_raw_id(c, Some(&id), "ping", &json!({}));
    flush(&mut w, c);
    assert!(w.conns[c].responses[&id].get("result").is_some());
}

/// Two `sendAndWait` calls on one session: each is answered when its own turn ends, with its
/// own reply (found by the simulation: the second was answered at the end of the first turn,
/// with the first prompt's reply, before its own turn even started).
#[test]
fn concurrent_send_and_wait_each_get_their_own_reply() {
    let (mut w, c) = world();
    w.request(c, "session.create", json!({"sessionId": "s"}));
    let first = w.request(
        c,
        "session.sendAndWait",
        json!({"sessionId": "s", "prompt": "slow"}),
    );
    let second = w.request(
        c,
        "session.sendAndWait",
        json!({"sessionId": "s", "prompt": "second"}),
    );
    flush(&mut w, c);
    // The first turn sleeps: nothing is answered yet.
    assert!(w.conns[c].is_owed(&first) && w.conns[c].is_owed(&second));
    w.settle(100).expect("checker");
    for (id, prompt) in [(&first, "slept"), (&second, "You said: second")] {
        let reply = &w.conns[c].responses[id]["result"];
        assert_eq!(
            reply["response"]["data"]["originatingMessageId"], reply["messageId"],
            "sendAndWait {id} was answered with another prompt's reply: {reply}"
        );
        assert_eq!(reply["response"]["data"]["content"], prompt);
    }
}

/// Deleting a session answers the callers of its pending `session.ui.elicitation` and
/// `session.commands.execute` requests (found by the simulation, seeds 93 and 146).
#[test]
fn deleting_a_session_answers_pending_elicitations_and_commands() {
    let (mut w, a) = world();
    let b = w.open(Framing::ContentLength, 1);
    w.request(a, "session.create", json!({"sessionId": "s"}));
    flush(&mut w, a);
    w.request(
        b,
        "session.resume",
        json!({"sessionId": "s", "requestElicitation": true,
               "commands": [{"name": "deploy"}]}),
    );
    flush(&mut w, b);
    let ask = w.request(
        a,
        "session.ui.elicitation",
        json!({"sessionId": "s", "message": "?"}),
    );
    let run = w.request(
        a,
        "session.commands.execute",
        json!({"sessionId": "s", "commandName": "deploy"}),
    );
    flush(&mut w, a);
    assert!(w.conns[a].is_owed(&ask) && w.conns[a].is_owed(&run));
    w.request(a, "session.delete", json!({"sessionId": "s"}));
    flush(&mut w, a);
    w.settle(100).expect("checker");
    assert!(
        !w.conns[a].is_owed(&ask),
        "session.ui.elicitation never answered after session.delete"
    );
    assert!(
        !w.conns[a].is_owed(&run),
        "session.commands.execute never answered after session.delete"
    );
}

/// Every connection receives a session's events in emit order, even when fanning one out
/// closes a slow connection whose departure emits more events (found by the simulation, seed
/// 691: `capabilities.changed` reached another connection before the `user.message` it
/// follows, so its `parentId` pointed at an event that connection had not received yet).
/// Swept over outbox budgets so that the overflow lands on an event's fan-out.
#[test]
fn closing_a_slow_consumer_mid_fan_out_keeps_every_connection_in_emit_order() {
    let mut overflowed = 0;
    for budget in (3_000..12_000).step_by(29) {
        let mut w = World::new(WorldConfig {
            budget,
            ..WorldConfig::default()
        });
        // The slow one attaches first (the fan-out reaches it first) and provides elicitation,
        // so its departure emits capabilities.changed.
        let slow = w.open(Framing::ContentLength, 0);
        let fast = w.open(Framing::ContentLength, 1);
        w.request(
            slow,
            "session.create",
            json!({"sessionId": "s", "requestElicitation": true}),
        );
        flush(&mut w, slow);
        w.request(
            fast,
            "session.resume",
            json!({"sessionId": "s", "disableResume": true}),
        );
        flush(&mut w, fast);
        // The slow reader stops reading; prompts pile events into its outbox until it overflows.
        for i in 0..20 {
            w.request(
                fast,
                "session.send",
                json!({"sessionId": "s", "prompt": format!("p{i}")}),
            );
            if let Err(e) = w.deliver_all(fast).and_then(|()| w.drain(fast)) {
                panic!("budget {budget}: {e}");
            }
            if w.conns[slow].closed_by_host || w.conns[fast].closed_by_host {
                break;
            }
        }
        if w.conns[slow].closed_by_host && !w.conns[fast].closed_by_host {
            overflowed += 1;
        }
    }
    assert!(
        overflowed > 100,
        "only {overflowed} budgets closed the slow reader alone"
    );
}

/// A sampling request the agent made is resolved when the last client that answers sampling
/// leaves, as an elicitation is (found by the simulation, seed 688 with
/// `SIM_TOLERATE_KNOWN=1`: the provider was closed as a slow reader before it read
/// `sampling.requested`, nobody else could answer, and the turn never ended).
#[test]
fn sampling_is_resolved_when_its_last_provider_leaves() {
    let (mut w, provider) = world();
    let caller = w.open(Framing::ContentLength, 1);
    w.request(
        provider,
        "session.create",
        json!({"sessionId": "s", "requestSampling": true}),
    );
    flush(&mut w, provider);
    // The caller is not attached: only the provider hears of the request.
    w.request(
        caller,
        "session.send",
        json!({"sessionId": "s", "prompt": "sample"}),
    );
    w.deliver_all(caller).expect("checker");
    w.drain(caller).expect("checker");
    w.eof(provider).expect("checker");
    w.settle(100).expect("checker");
    w.final_checks()
        .expect("the turn ends once nobody can answer its sampling request");
}

/// The `seed-ahp-*` inputs (written by `fuzz/seed_ahp_corpus.py`) drive AHP connections
/// through the same checker: envelopes arrive (and are checked), the reconnect seed checks
/// a replay, the bad-input seed gets rejections and errors without the connection failing.
#[test]
fn the_ahp_seeds_exercise_the_ahp_dialect() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/host_sequence");
    let run = |name: &str| {
        let data = std::fs::read(dir.join(name)).expect("the AHP seed exists");
        let mut w = targets::run_host_sequence(&data);
        w.keep_inbox = true;
        w
    };
    let tool = run("seed-ahp-client-tool-confirmed-by-another");
    assert!(tool.stats.actions >= 20, "{:?}", tool.stats);
    assert!(
        tool.stats.accepted == 0,
        "AHP answers are actions, not Copilot answers"
    );
    let replay = run("seed-ahp-reconnect-replay");
    assert_eq!(replay.stats.replays, 2, "{:?}", replay.stats);
    assert!(replay.stats.actions >= 10, "{:?}", replay.stats);
    let bad = run("seed-ahp-bad-input");
    assert!(
        bad.conns.iter().filter(|c| c.ahp.is_some()).count() == 3,
        "three AHP connections"
    );
    let disposed = run("seed-ahp-copilot-session-disposed");
    assert!(disposed.stats.actions >= 10, "{:?}", disposed.stats);
    let slow = run("seed-ahp-slow-reader");
    assert!(slow.stats.host_closes >= 1, "{:?}", slow.stats);
}
