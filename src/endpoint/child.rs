//! What a JSON-RPC peer that is a child process (an MCP server, an ACP agent) leaves behind
//! when it ends: the tail of its stderr and the reason its conversation ended.

/// Bytes of a child's stderr kept for error messages.
const STDERR_TAIL: usize = 2048;

/// The last [`STDERR_TAIL`] bytes a child wrote to its stderr.
#[derive(Clone, Debug, Default)]
pub(crate) struct StderrTail(Vec<u8>);

impl StderrTail {
    /// Keeps `bytes`, dropping what falls out of the tail.
    pub(crate) fn push(&mut self, bytes: &[u8]) {
        self.0.extend_from_slice(bytes);
        if self.0.len() > STDERR_TAIL {
            let cut = self.0.len() - STDERR_TAIL;
            self.0.drain(..cut);
        }
    }

    /// Why the child `who` ("the server", "the agent") ended: it could not be started
    /// (`message`), exited with `code`, or was killed by a signal, with its last non-empty
    /// stderr line.
    pub(crate) fn exit_reason(
        &self,
        who: &str,
        code: Option<i32>,
        message: Option<&str>,
    ) -> String {
        let mut reason = match (message, code) {
            (Some(m), _) => format!("{who} could not be started: {m}"),
            (None, Some(c)) => format!("{who} exited with code {c}"),
            (None, None) => format!("{who} was killed by a signal"),
        };
        let tail = String::from_utf8_lossy(&self.0);
        if let Some(last) = tail.lines().rev().find(|l| !l.trim().is_empty()) {
            reason.push_str(&format!(" (stderr: {})", last.trim()));
        }
        reason
    }
}
