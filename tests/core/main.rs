//! The `core` tier: the sans-IO building blocks without a host world — framing, JSON-RPC
//! (spec examples), request correlation, the standalone endpoint, the model client's streams
//! and conversations, their property tests, and the fuzz corpora and seeded simulation (on the
//! target bodies of `fuzz/src/`, compiled here as modules: the fuzz crate is outside the
//! workspace). One test binary: `cargo test --test core`.

mod correlation_props;
mod endpoint;
mod framing;
mod fuzz_corpus_replay;
mod jsonrpc_spec;
mod mcp_props;
mod model_conversation;
mod model_props;
mod model_streams;
mod simulation;
