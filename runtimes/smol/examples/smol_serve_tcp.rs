//! Serves the built-in scenario on TCP with smol until a client calls `runtime.shutdown`.
//!
//! ```sh
//! cargo run -p agentwire-smol --example smol_serve_tcp            # a free port
//! cargo run -p agentwire-smol --example smol_serve_tcp -- 4321    # a fixed port
//! ```
//!
//! Point a Copilot SDK at it with `RuntimeConnection.forUri("127.0.0.1:<port>")` (Node) or
//! `RuntimeConnection.for_uri("127.0.0.1:<port>")` (Python).

use agentwire_smol::agentwire::host::HostConfig;
use agentwire_smol::{Server, Stopped};

fn main() -> std::io::Result<()> {
    let port: u16 = match std::env::args().nth(1) {
        Some(p) => p
            .parse()
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?,
        None => 0,
    };
    smol::block_on(async {
        // Fixed ids: every run replays the same way.
        let server = Server::new(HostConfig::default().with_seed(1));
        let (addr, serving) = server.bind_tcp(("127.0.0.1", port)).await?;
        println!("listening on port {}", addr.port());
        match serving.await {
            Stopped::Shutdown { reason } => eprintln!("shut down: {reason}"),
            Stopped::Disconnected => eprintln!("disconnected"),
        }
        Ok(())
    })
}
