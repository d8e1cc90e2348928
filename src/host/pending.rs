//! The vocabulary of waiting: what a session's pending requests wait for, who gets their
//! answers, and what a request the host sent to one client was for. The parts of the host
//! share these types: `requests/` resolves pending requests, `mcp/` and `sessions/` start
//! them, `io/` correlates client calls on their connection, `cluster/` carries them across a
//! relay.

use serde_json::Value;

use crate::agent::BuiltinCall;
use crate::host::requests::canvas::CanvasCall;
use crate::host::requests::client_calls::AgentCall;
use crate::host::{ConnId, EffectId};
use crate::jsonrpc::OwnedId;

/// A request waiting for a client's answer.
#[derive(Clone, Debug)]
pub(crate) enum Pending {
    /// A permission prompt (for a tool call, or an extension's access to prompts).
    Permission(Box<PermissionAsk>),
    /// A client tool call waiting for its owner's result.
    ExternalTool {
        tool_call_id: String,
        owner: ConnId,
        /// Who gets the result.
        caller: ToolCaller,
    },
    /// An MCP tool call waiting for its server's `tools/call` result (`token` names it on
    /// the server's client).
    McpTool {
        tool_call_id: String,
        server: String,
        tool: String,
        token: u64,
    },
    /// A form or URL elicitation (`session.ui.elicitation`) waiting for a provider's answer;
    /// the caller's request is answered with the result.
    Elicitation {
        answer_to: AnswerTo,
        /// The `elicitation.requested` data, offered again to a provider that attaches later.
        announced: Box<Value>,
    },
    /// A command (`session.commands.execute` or an agent's `command` step) waiting for its
    /// owner to run it.
    Command { owner: ConnId, answer_to: AnswerTo },
    /// A sampling request (an agent's, or an MCP server's `sampling/createMessage`) waiting
    /// for a client with `requestSampling` or an interest in `sampling.requested`.
    Sampling {
        answer_to: AnswerTo,
        /// The `sampling.requested` data, offered again to a sampler that attaches later.
        announced: Box<Value>,
    },
    /// A queued slash command (`command.queued`) waiting for a client to say whether it ran it.
    QueuedCommand,
}

/// Who started a client tool call and gets its outcome.
#[derive(Clone, Debug)]
pub(crate) enum ToolCaller {
    /// The session's agent (`tool.execution_complete` and [`AgentInput::ToolDone`]).
    ///
    /// [`AgentInput::ToolDone`]: crate::agent::AgentInput::ToolDone
    Agent,
    /// A `tools/call` of the client-tools MCP server (an ACP agent's call): the request `id`
    /// of connection `conn` is answered with the outcome; the agent reports its own tool call.
    Served { conn: ConnId, id: OwnedId },
}

/// Who gets the answer of a pending request.
#[derive(Clone, Debug)]
pub(crate) enum AnswerTo {
    /// A client's request (`session.ui.elicitation`, `session.commands.execute`) is answered.
    Caller(ConnId, OwnedId),
    /// The agent gets [`AgentInput::ClientAnswer`] with this token.
    Agent(u64),
    /// An MCP server's request (`elicitation/create`, `sampling/createMessage`) is answered.
    Mcp {
        /// The session's server.
        server: String,
        /// The server's request id.
        id: OwnedId,
    },
    /// The ACP agent's request (`elicitation/create`) is answered.
    AcpAgent {
        /// The agent process that asked (an ended process gets no answer).
        process: EffectId,
        /// The agent's request id.
        request: OwnedId,
    },
}

/// What approving a permission prompt does.
#[derive(Clone, Debug)]
pub(crate) enum Approval {
    /// Ask the client that provides the tool to run it (`external_tool.requested`).
    ClientTool,
    /// Run a built-in tool call (`read_file`, `write_file`, `shell` steps, a model's `view`, …).
    Builtin(Box<BuiltinCall>),
    /// Call the MCP server's tool.
    Mcp(Box<McpTarget>),
    /// Let this extension's connections see the session's permission prompts. There is no
    /// tool call.
    ExtensionAccess(String),
    /// Answer an ACP agent's `session/request_permission` with the option the decision
    /// picks. There is no host tool call: the agent runs its own tools.
    AcpAgent(Box<AcpPermission>),
}

/// An ACP agent's request that waits for a permission decision, as kept while the session's
/// clients decide.
#[derive(Clone, Debug)]
pub(crate) struct AcpPermission {
    /// The agent process it came from (a request of an ended process is not answered).
    pub process: EffectId,
    /// The agent's request id.
    pub request: OwnedId,
    /// The host session it is for.
    pub session: String,
    /// What was asked.
    pub ask: AcpAsk,
}

/// What an ACP agent asked that needs a permission decision.
#[derive(Clone, Debug)]
pub(crate) enum AcpAsk {
    /// `session/request_permission` for the agent's own tool call: the decision picks one of
    /// these options (by kind).
    ToolCall(Vec<crate::agent::acp::PermissionOption>),
    /// `fs/read_text_file` or `fs/write_text_file` of a path outside the session's
    /// directories: approved, the host performs it.
    File(AcpFileOp),
}

/// A file operation an ACP agent asked of the host (`fs/*`).
#[derive(Clone, Debug)]
pub(crate) enum AcpFileOp {
    /// `fs/read_text_file`: `line` (1-based) and `limit` select lines.
    Read {
        path: String,
        line: Option<u64>,
        limit: Option<u64>,
    },
    /// `fs/write_text_file`.
    Write { path: String, content: String },
}

impl AcpFileOp {
    /// The path it reads or writes.
    pub(crate) fn path(&self) -> &str {
        match self {
            AcpFileOp::Read { path, .. } | AcpFileOp::Write { path, .. } => path,
        }
    }
}

/// A permission prompt: what is asked and what approving it does.
#[derive(Clone, Debug)]
pub(crate) struct PermissionAsk {
    /// The tool call asking (empty for an extension-access prompt).
    pub tool_call_id: String,
    /// The tool's name (empty for an extension-access prompt).
    pub tool_name: String,
    /// The call's arguments.
    pub arguments: Value,
    /// The `permissionRequest` (its `kind` says what is asked).
    pub request: Value,
    /// What approval does.
    pub approval: Approval,
}

/// The server and tool a permission prompt of kind `mcp` is for.
#[derive(Clone, Debug)]
pub(crate) struct McpTarget {
    pub(crate) server: String,
    pub(crate) tool: String,
}

/// A server-to-client request in flight on a connection.
#[derive(Clone, Debug)]
pub(crate) enum ClientCall {
    /// Asked for the session's agent (`ask_client`).
    Agent(AgentCall),
    /// A canvas request to the canvas's provider.
    Canvas(Box<CanvasCall>),
    /// A frame of model HTTP exchange `call` sent to the client performing it (its answer
    /// is an acknowledgement).
    Http {
        /// The exchange.
        call: u64,
    },
    /// A file operation on the session's file provider.
    Fs(Box<crate::host::requests::remote_fs::FsCall>),
    /// A write of `session`'s state to its file provider (`state_files.rs`).
    StateFile {
        /// The session.
        session: String,
        /// The provider.
        conn: ConnId,
        /// The write.
        write: Box<crate::host::requests::remote_fs::FsPrimitive>,
    },
    /// A bearer token for the provider of model-list request `call` (HTTP call id).
    ModelsToken {
        /// The model-list request.
        call: u64,
    },
    /// The `preMcpToolCall` hook of a model's MCP tool call (`prompt_hooks.rs`).
    McpHook {
        /// The session.
        session: String,
        /// The hook's `hookInvocationId`.
        invocation: String,
        /// The call waiting for it.
        call: Box<McpHookCall>,
    },
    /// A `factory.execute` of a factory run (`extensions.rs`).
    Factory(Box<crate::host::extensions::FactoryCall>),
    /// A `factory.abort` (its answer is only an acknowledgement).
    FactoryAbort,
    /// A request a dialect sent on its own (`tag` is the dialect's), handed back to it when
    /// it ends ([`DialectHandler::client_call_finished`](crate::host::DialectHandler::client_call_finished)).
    Dialect {
        /// The dialect that sent it.
        dialect: crate::host::DialectId,
        /// The session it is about.
        session: String,
        /// What the dialect correlates it with.
        tag: u64,
    },
    /// The client's rewrite of `session`'s system prompt sections (`prompt_hooks.rs`).
    SystemTransform {
        /// The session.
        session: String,
    },
    /// A hook a held prompt of `session` passes (`prompt_hooks.rs`).
    PromptHook {
        /// The session.
        session: String,
        /// Which hook.
        hook: crate::host::sessions::prompt_hooks::PromptHook,
    },
}

impl From<CanvasCall> for ClientCall {
    fn from(call: CanvasCall) -> Self {
        ClientCall::Canvas(Box::new(call))
    }
}

/// A model's MCP tool call waiting for its `preMcpToolCall` hook.
#[derive(Clone, Debug)]
pub(crate) struct McpHookCall {
    pub(crate) tool_call_id: String,
    pub(crate) server: String,
    pub(crate) tool: String,
    pub(crate) arguments: Value,
}

/// How an ACP agent's permission request is answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AcpChoice {
    /// Allowed this once.
    Allow,
    /// Allowed for the rest of the session (`allow_always`, else `allow_once`).
    AllowAlways,
    /// Rejected.
    Reject,
}
