//! A deterministic model endpoint inside the world (with [`WorldConfig::model`]): every
//! `EffectOp::HttpRequest` the host emits is answered in-process from the world's seed, piece
//! by piece on [`World::model_step`] (status, body bytes split anywhere, the end or a
//! transport error), so model turns are part of the simulation: text in any number of
//! chunks, one or two tool calls of the tools the request offers (client tools and the
//! built-in ones), a 500 or a 429, a stream cut mid-body, a malformed chunk. After a tool
//! result, or after a few calls, the answer is text, so every turn ends. The built-in tools'
//! File operations and commands (`EffectOp::FileOp`, `EffectOp::ProcessSpawn` of `sh -c`)
//! get deterministic results too.

use agentwire::host::{EffectEvent, EffectId, FileReply, FileRequest};
use agentwire::model::{HttpRequest, TransportErrorKind};

use super::*;

/// One piece of an answer.
#[derive(Clone, Debug)]
enum Piece {
    Status(u16, Vec<(String, String)>),
    Body(Vec<u8>),
    End,
    Error(TransportErrorKind, String),
}

/// Something the model side still has to deliver.
enum Pending {
    Http {
        call: EffectId,
        pieces: VecDeque<Piece>,
    },
    File {
        op: EffectId,
        result: Result<FileReply, String>,
    },
    Shell {
        process_id: EffectId,
        output: Vec<u8>,
    },
}

/// The simulated model endpoint and runtime.
pub struct SimModel {
    rng: Rng,
    pending: VecDeque<Pending>,
    /// Exchanges answered so far.
    pub exchanges: u64,
}

impl SimModel {
    /// A model whose answers derive from `seed`.
    pub fn new(seed: u64) -> SimModel {
        SimModel {
            rng: Rng(seed ^ 0x00de_1e7e_0f00_d5a1),
            pending: VecDeque::new(),
            exchanges: 0,
        }
    }

    /// Plans the answer to HTTP exchange `call`.
    pub(super) fn request(&mut self, call: EffectId, request: &HttpRequest) {
        self.exchanges += 1;
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let pieces = self.answer(&body);
        self.pending.push_back(Pending::Http { call, pieces });
    }

    /// Forgets a cancelled exchange.
    pub(super) fn cancel(&mut self, call: EffectId) {
        self.pending
            .retain(|p| !matches!(p, Pending::Http { call: c, .. } if *c == call));
    }

    /// Plans the result of file operation `op`.
    pub(super) fn file(&mut self, op: EffectId, request: &FileRequest) {
        let fail = self.rng.below(5) == 0;
        let result = match request {
            _ if fail => Err("simulated: permission denied".to_owned()),
            FileRequest::Read { .. } => Ok(FileReply::Text("alpha\nbeta TODO\n".to_owned())),
            FileRequest::Sqlite { statements, .. } => {
                Ok(FileReply::Rows(vec![Default::default(); statements.len()]))
            }
            FileRequest::Write { .. }
            | FileRequest::Append { .. }
            | FileRequest::CopyDir { .. }
            | FileRequest::Remove { .. } => Ok(FileReply::Written),
            FileRequest::Walk { .. } => Ok(FileReply::Entries(vec![
                "a.rs".to_owned(),
                "src/b.txt".to_owned(),
            ])),
            FileRequest::ReadMany { paths, .. } => Ok(FileReply::Texts(
                paths
                    .iter()
                    .map(|p| (p.clone(), "TODO one\ntwo\n".to_owned()))
                    .collect(),
            )),
        };
        self.pending.push_back(Pending::File { op, result });
    }

    /// Plans the output and exit of a command.
    pub(super) fn shell(&mut self, process_id: EffectId) {
        self.pending.push_back(Pending::Shell {
            process_id,
            output: b"simulated output\n".to_vec(),
        });
    }

    /// Whether anything is left to deliver.
    pub fn busy(&self) -> bool {
        !self.pending.is_empty()
    }

    fn sse(data: &Value) -> Vec<u8> {
        format!("data: {data}\n\n").into_bytes()
    }

    fn chunk(delta: Value, finish: Option<&str>) -> Vec<u8> {
        Self::sse(
            &json!({"id": "sim", "object": "chat.completion.chunk", "model": "sim-model",
                          "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}),
        )
    }

    /// The pieces of one answer to a completion request `body`.
    fn answer(&mut self, body: &Value) -> VecDeque<Piece> {
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        let after_tool = messages.last().is_some_and(|m| m["role"] == "tool");
        let calls_so_far = messages.iter().filter(|m| m["role"] == "assistant").count();
        let tools: Vec<String> = body["tools"]
            .as_array()
            .map(|t| {
                t.iter()
                    .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        let ok = || {
            Piece::Status(
                200,
                vec![("content-type".into(), "text/event-stream".into())],
            )
        };
        let roll = if after_tool || calls_so_far >= 3 || tools.is_empty() {
            self.rng.below(4)
        } else {
            self.rng.below(10)
        };
        let mut bytes = Vec::new();
        let mut tail = vec![Piece::End];
        match roll {
            0..=3 => {
                let text = ["It is sunny.", "Done", "", "ok, here is a longer answer"]
                    [self.rng.below(4) as usize];
                bytes.extend(Self::chunk(
                    json!({"role": "assistant", "content": ""}),
                    None,
                ));
                let cut = self.rng.below(text.len() as u64 + 1) as usize;
                let cut = (0..=cut)
                    .rev()
                    .find(|i| text.is_char_boundary(*i))
                    .unwrap_or(0);
                for part in [&text[..cut], &text[cut..]] {
                    if !part.is_empty() {
                        bytes.extend(Self::chunk(json!({"content": part}), None));
                    }
                }
                bytes.extend(Self::chunk(json!({}), Some("stop")));
                if self.rng.below(2) == 0 {
                    bytes.extend(Self::sse(&json!({"choices": [], "usage":
                        {"prompt_tokens": 3, "completion_tokens": 2}})));
                }
                bytes.extend(b"data: [DONE]\n\n");
            }
            4..=6 => {
                let n = if roll == 6 { 2 } else { 1 };
                for i in 0..n {
                    let name = &tools[self.rng.below(tools.len() as u64) as usize];
                    let args = match name.as_str() {
                        "view" | "create" | "edit" => {
                            json!({"path": "notes.txt", "file_text": "x", "old_str": "alpha", "new_str": "a"})
                        }
                        "bash" => json!({"command": "echo hi", "description": "say hi"}),
                        "grep" | "glob" => json!({"pattern": "TODO"}),
                        _ => json!({"city": "Paris"}),
                    };
                    let id = format!("call_{}", self.rng.below(1_000_000));
                    bytes.extend(Self::chunk(
                        json!({"tool_calls": [{"index": i, "id": id, "type": "function",
                               "function": {"name": name, "arguments": ""}}]}),
                        None,
                    ));
                    bytes.extend(Self::chunk(
                        json!({"tool_calls": [{"index": i, "function": {"arguments": args.to_string()}}]}),
                        None,
                    ));
                }
                bytes.extend(Self::chunk(json!({}), Some("tool_calls")));
                bytes.extend(b"data: [DONE]\n\n");
            }
            7 => {
                let status = if self.rng.below(2) == 0 { 500 } else { 429 };
                let mut headers = vec![("content-type".into(), "application/json".into())];
                if status == 429 {
                    headers.push(("retry-after".into(), "0".into()));
                }
                return VecDeque::from(vec![
                    Piece::Status(status, headers),
                    Piece::Body(br#"{"error":{"message":"simulated"}}"#.to_vec()),
                    Piece::End,
                ]);
            }
            8 => {
                bytes.extend(Self::chunk(json!({"content": "partial"}), None));
                tail = vec![Piece::Error(
                    TransportErrorKind::Io,
                    "simulated reset".into(),
                )];
            }
            _ => {
                bytes.extend(Self::chunk(json!({"content": "then"}), None));
                bytes.extend(b"data: {\"choices\":[{\"delta\":\n\n");
                bytes.extend(b"data: [DONE]\n\n");
            }
        }
        let mut pieces = VecDeque::from(vec![ok()]);
        let mut rest = &bytes[..];
        while !rest.is_empty() {
            let n = 1 + self.rng.below(rest.len().min(200) as u64) as usize;
            pieces.push_back(Piece::Body(rest[..n].to_vec()));
            rest = &rest[n..];
        }
        pieces.extend(tail);
        pieces
    }
}

impl World {
    /// Whether the simulated model or runtime has something left to deliver.
    pub fn model_busy(&self) -> bool {
        self.model.as_ref().is_some_and(SimModel::busy)
    }

    /// Delivers the next piece of one pending answer (chosen from the seed). Returns
    /// whether there was one.
    pub fn model_step(&mut self) -> Result<bool, String> {
        let Some(model) = self.model.as_mut() else {
            return Ok(false);
        };
        if model.pending.is_empty() {
            return Ok(false);
        }
        let k = model.rng.below(model.pending.len() as u64) as usize;
        let now = self.now;
        let next = match &mut model.pending[k] {
            Pending::Http { call, pieces } => {
                let (call, piece) = (*call, pieces.pop_front());
                let done = pieces.is_empty();
                if done {
                    model.pending.remove(k);
                }
                piece.map(|p| (call, p))
            }
            _ => None,
        };
        let other = if next.is_none() {
            model.pending.remove(k)
        } else {
            None
        };
        match (next, other) {
            (Some((call, Piece::Status(status, headers))), _) => {
                self.log(|| format!("model {call}: status {status}"));
                self.host
                    .handle_effect(now, call, EffectEvent::HttpHead { status, headers });
            }
            (Some((call, Piece::Body(bytes))), _) => {
                self.log(|| format!("model {call}: {} bytes", bytes.len()));
                self.host
                    .handle_effect(now, call, EffectEvent::HttpBody(bytes));
            }
            (Some((call, Piece::End)), _) => {
                self.log(|| format!("model {call}: end"));
                self.host.handle_effect(now, call, EffectEvent::HttpEnd);
            }
            (Some((call, Piece::Error(kind, message))), _) => {
                self.log(|| format!("model {call}: {message}"));
                self.host
                    .handle_effect(now, call, EffectEvent::HttpError { kind, message });
            }
            (None, Some(Pending::File { op, result })) => {
                self.log(|| format!("file op {op}: ok {}", result.is_ok()));
                self.host
                    .handle_effect(now, op, EffectEvent::FileDone(result));
            }
            (None, Some(Pending::Shell { process_id, output })) => {
                self.log(|| format!("shell {process_id} exits"));
                self.host
                    .handle_effect(now, process_id, EffectEvent::Stdout(output));
                self.inputs += 1;
                self.after_input()?;
                self.host
                    .handle_effect(now, process_id, EffectEvent::Exit(Some(0)));
            }
            (None, _) => return Ok(true),
        }
        self.inputs += 1;
        self.after_input()?;
        Ok(true)
    }
}
