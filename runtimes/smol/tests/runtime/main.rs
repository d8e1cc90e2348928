//! The `runtime` tier of `agentwire-smol`: the driver over TCP and stdio, and `TCP_QUICKACK`.
//! One test binary: `cargo test -p agentwire-smol --test runtime`.

mod driver;
mod quickack;
