//! Shared scenarios for the interop tests that drive agentwire with the **official Copilot Rust
//! SDK** (`github-copilot-sdk`, unmodified). Every scenario takes an already constructed
//! [`Client`]; the test files decide the transport (in-process duplex pipe, TCP to the real
//! binary, stdio of the real binary).
//!
//! * `envelope`: checks every event envelope must pass (ids, timestamps, the `parentId`
//!   chain, ephemeral vs persisted types).
//! * `recorder`: a subscriber that records a session's events and lifecycle notifications.
//! * `handlers`: recording tool, permission, elicitation and command handlers, and session
//!   setup helpers.
//! * `sessions` / `bridges`: the scenarios themselves (`scenario_*`).
//!
//! Part of `agentwire-testkit`, used by the root crate's `interop` tier and `agentwire-cli`'s
//! `e2e` tier, so it only depends on the SDK, tokio and serde_json.
//!
//! Every wait is bounded: a single protocol step by [`STEP`], a whole test by [`TEST`].
#![allow(dead_code, unused_imports)]

use std::collections::hash_map::RandomState;
use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use github_copilot_sdk::handler::{ElicitationHandler, PermissionHandler, PermissionResult};
use github_copilot_sdk::rpc::ExecuteCommandParams;
use github_copilot_sdk::session::Session;
use github_copilot_sdk::subscription::{EventSubscription, LifecycleSubscription, RecvErrorKind};
use github_copilot_sdk::tool::ToolHandler;
use github_copilot_sdk::types::{
    CommandContext, CommandDefinition, CommandHandler, ElicitationRequest, ElicitationResult,
    MessageOptions, PermissionRequestData, RequestId, ResumeSessionConfig, SessionConfig,
    SessionEvent, SessionId, SessionLifecycleEvent, SessionLifecycleEventType, Tool,
    ToolInvocation, ToolResult,
};
use github_copilot_sdk::{Client, Error};
use serde_json::{json, Value};
use tokio::sync::mpsc;

/// Upper bound for one protocol step (one RPC, one wait for an event).
pub const STEP: Duration = Duration::from_secs(10);
/// Upper bound for one whole test.
pub const TEST: Duration = Duration::from_secs(30);
/// `send_and_wait` timeout handed to the SDK (its default is 60 s).
pub const TURN: Duration = Duration::from_secs(10);

/// The prompt that makes the built-in scenario call the client tool `get_weather`.
pub const WEATHER_PROMPT: &str = "What is the weather in Paris?";
/// What the built-in scenario says after the tool call.
pub const WEATHER_ANSWER: &str = "It is sunny in Paris.";
/// What the client tool answers.
pub const TOOL_REPLY: &str = "sunny, 21 C";

/// Awaits `fut`, failing the test if it takes longer than [`STEP`].
pub async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    match tokio::time::timeout(STEP, fut).await {
        Ok(v) => v,
        Err(_) => panic!("timed out after {STEP:?} waiting for: {what}"),
    }
}

/// Runs a whole test body, failing it if it takes longer than [`TEST`].
pub async fn bounded<T>(fut: impl Future<Output = T>) -> T {
    match tokio::time::timeout(TEST, fut).await {
        Ok(v) => v,
        Err(_) => panic!("test exceeded {TEST:?}"),
    }
}

/// A fresh client-chosen session id, in UUID form (what the SDK itself would pick).
pub fn new_session_id() -> SessionId {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let state = RandomState::new();
    let mut h1 = state.build_hasher();
    h1.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h1.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    let a = h1.finish();
    let mut h2 = state.build_hasher();
    h2.write_u64(a);
    let b = h2.finish();
    let hi = (a & 0xffff_ffff_ffff_0fff) | 0x4000; // version 4
    let lo = (b & 0x3fff_ffff_ffff_ffff) | 0x8000_0000_0000_0000; // variant 10
    SessionId::new(format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        hi >> 32,
        (hi >> 16) & 0xffff,
        hi & 0xffff,
        lo >> 48,
        lo & 0xffff_ffff_ffff
    ))
}

mod bridges;
mod envelope;
mod handlers;
mod recorder;
mod sessions;

pub use bridges::*;
pub use envelope::*;
pub use handlers::*;
pub use recorder::*;
pub use sessions::*;
