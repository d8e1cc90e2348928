//! The `runtime` tier of `agentwire-tokio`: the driver over TCP and stdio, shell commands, slow
//! consumers. One test binary: `cargo test -p agentwire-tokio --test runtime`.

mod driver;
mod shell;
mod slow_consumer;
