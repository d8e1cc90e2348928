//! Real MCP servers for tests, nobody here wrote: the reference server
//! `@modelcontextprotocol/server-everything` (installed by `scripts/install-test-servers` with npm), started through
//! `sh -c 'echo $$ > PIDFILE; exec node ENTRY stdio'` so a test knows its process id.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The server-everything entry point: `$AGENTWIRE_MCP_EVERYTHING`, else
/// `target/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js` (where
/// `scripts/install-test-servers` installs it). Panics with instructions when neither exists.
pub fn everything_entry() -> PathBuf {
    let path = std::env::var_os("AGENTWIRE_MCP_EVERYTHING")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            // The workspace's target/ (this file serves the root crate and runtimes/cli).
            let rel =
                "target/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js";
            let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
            manifest
                .ancestors()
                .map(|dir| dir.join(rel))
                .find(|p| p.is_file())
                .unwrap_or_else(|| manifest.join(rel))
        });
    assert!(
        path.is_file(),
        "the MCP reference server was not found at {}: run `scripts/install-test-servers` (it installs the pinned \
         npm package @modelcontextprotocol/server-everything 2026.8.31 into target/mcp with \
         `npm install --prefix target/mcp`), or set AGENTWIRE_MCP_EVERYTHING to its dist/index.js",
        path.display()
    );
    path
}

/// `(command, args)` that start server-everything over stdio and write its pid to `pidfile`.
pub fn everything_command(pidfile: &Path) -> (String, Vec<String>) {
    let script = format!(
        "echo $$ > '{}'; exec node '{}' stdio",
        pidfile.display(),
        everything_entry().display()
    );
    ("sh".to_owned(), vec!["-c".to_owned(), script])
}

/// The pid written to `pidfile` (waits up to 10 s for it).
pub fn read_pid(pidfile: &Path) -> u32 {
    let start = Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(pidfile) {
            if let Ok(pid) = text.trim().parse() {
                return pid;
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the MCP server never wrote its pid to {}",
            pidfile.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether process `pid` is alive (exists and is not a zombie).
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next());
            state != Some("Z")
        }
        Err(_) => false,
    }
}

/// Waits (up to 15 s) until `pid` is gone; false if it is still alive then.
pub async fn gone(pid: u32) -> bool {
    let start = Instant::now();
    while alive(pid) {
        if start.elapsed() > Duration::from_secs(15) {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    true
}

/// Kills `pid` with SIGKILL.
pub fn kill(pid: u32) {
    let status = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .expect("kill");
    assert!(status.success(), "kill -KILL {pid}");
}

/// The directory holding the Python `mcp` package: `$AGENTWIRE_MCP_PYTHONPATH`, else
/// `target/mcp-python` (where `scripts/install-test-servers` installs it). Panics with instructions when missing.
pub fn mcp_pythonpath() -> PathBuf {
    let path = std::env::var_os("AGENTWIRE_MCP_PYTHONPATH")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
            manifest
                .ancestors()
                .map(|dir| dir.join("target/mcp-python"))
                .find(|p| p.join("mcp-1.20.0.dist-info").is_dir())
                .unwrap_or_else(|| manifest.join("target/mcp-python"))
        });
    assert!(
        path.join("mcp").is_dir(),
        "the Python mcp package was not found in {}: run `scripts/install-test-servers` (it runs `pip install \
         --target target/mcp-python mcp==1.20.0 pydantic==2.12.5`), or set \
         AGENTWIRE_MCP_PYTHONPATH to a directory holding it",
        path.display()
    );
    path
}

/// `(command, args, env)` that start the FastMCP fixture server over stdio.
pub fn fastmcp_command() -> (String, Vec<String>, Vec<(String, String)>) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .map(|dir| dir.join("tests/fixtures/fastmcp_server.py"))
        .find(|p| p.is_file())
        .expect("tests/fixtures/fastmcp_server.py");
    (
        "python3".to_owned(),
        vec![script.display().to_string()],
        vec![(
            "PYTHONPATH".to_owned(),
            mcp_pythonpath().display().to_string(),
        )],
    )
}
