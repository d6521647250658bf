//! The scripted provider: replays model turns from a fixture file, with no network. It is how
//! tests, the demo and plugin authors run keel without a model. The file format is documented
//! in docs/providers.md ("Scripted provider"). It never touches the bus or the filesystem after load.

use crate::kernel::failure::ErrorKind;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use regex::Regex;
use serde::Deserialize;
use serde_json::Value;
use tokio::sync::mpsc;

use super::model::{ModelCost, ModelInfo, API_SCRIPTED, THINKING_LEVELS};
use super::{ModelRequest, Provider, ProviderEvent};
use crate::kernel::abort::AbortSignal;
use crate::kernel::message::{Message, StopReason, Usage};

/// A parsed script file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Script {
    /// Model id reported on messages (default `scripted-1`).
    #[serde(default)]
    pub model: Option<String>,
    /// The model's context window in tokens (default 128000): what compaction measures against.
    #[serde(default)]
    pub context_window: Option<u64>,
    /// The model's prices in USD per million tokens (default: none known). They price the
    /// turns whose `usage` gives no `cost`, and let a run take `--max-cost`.
    #[serde(default)]
    pub cost: Option<ModelCost>,
    pub turns: Vec<Turn>,
}

/// One model response.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Turn {
    /// Regex matched against the latest user message; absent = matches anything.
    #[serde(default, rename = "match")]
    pub pattern: Option<String>,
    /// Keep this turn available after it was used.
    #[serde(default)]
    pub repeat: bool,
    /// Pause before every chunk, in milliseconds.
    #[serde(default)]
    pub delay_ms: u64,
    pub chunks: Vec<Chunk>,
    #[serde(default)]
    pub usage: Option<ScriptUsage>,
    /// `stop`, `length` or `toolUse`; default `toolUse` when the turn calls a tool, else `stop`.
    #[serde(default)]
    pub stop: Option<String>,
}

/// Token counts a turn reports (cost in USD optional).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ScriptUsage {
    #[serde(default)]
    pub input: u64,
    #[serde(default)]
    pub output: u64,
    #[serde(default)]
    pub cache_read: u64,
    #[serde(default)]
    pub cache_write: u64,
    #[serde(default)]
    pub cost: f64,
}

/// One streamed piece of a turn.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Chunk {
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub thinking: Option<String>,
    #[serde(default)]
    pub tool_call: Option<ScriptToolCall>,
    /// Fail the response here with this message.
    #[serde(default)]
    pub error: Option<String>,
    /// Error kind for `error` (default `provider_error`; a word keel does not know is kept as
    /// `ErrorKind::Other`).
    #[serde(default)]
    pub kind: Option<ErrorKind>,
    /// The server's `Retry-After` for `error`, in milliseconds.
    #[serde(default)]
    pub retry_after_ms: Option<u64>,
    /// Stop producing and wait until aborted (to test interruption).
    #[serde(default)]
    pub hang: bool,
    /// Wait until this file exists before the chunk (a test's gate: it creates the file when
    /// it has seen what came before).
    #[serde(default)]
    pub wait_for: Option<std::path::PathBuf>,
    /// Pause before this chunk, in milliseconds (overrides the turn's `delayMs`).
    #[serde(default)]
    pub delay_ms: Option<u64>,
    /// Stream this chunk this many times (default 1): large outputs without large fixtures.
    #[serde(default)]
    pub times: Option<u32>,
}

/// A tool call the scripted model makes; its arguments stream as JSON fragments of
/// [`ARG_PIECE`] bytes.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ScriptToolCall {
    #[serde(default)]
    pub id: Option<String>,
    pub name: String,
    #[serde(default)]
    pub arguments: Value,
}

/// Why a script cannot be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScriptErrorKind {
    /// The file is not a regular file, or cannot be read.
    Unreadable,
    /// Not a script: bad JSON, an unknown field, a bad `match` regex or `stop` reason.
    Invalid,
}

/// A script that cannot be used: its kind and what is wrong and where, as the user reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptError {
    pub kind: ScriptErrorKind,
    pub message: String,
}

impl std::fmt::Display for ScriptError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ScriptError {}

/// Replays a [`Script`].
#[derive(Debug)]
pub struct ScriptedProvider {
    info: ModelInfo,
    turns: Vec<(Option<Regex>, Turn)>,
    used: Arc<Mutex<Vec<bool>>>,
}

impl ScriptedProvider {
    /// Loads and validates a script file; the error says what is wrong and where.
    pub fn load(path: &Path) -> Result<Self, ScriptError> {
        let unreadable = |why: &dyn std::fmt::Display| ScriptError {
            kind: ScriptErrorKind::Unreadable,
            message: format!("cannot read script {}: {why}", path.display()),
        };
        let invalid = |why: &dyn std::fmt::Display| ScriptError {
            kind: ScriptErrorKind::Invalid,
            message: format!("invalid script {}: {why}", path.display()),
        };
        // A FIFO would block the open, a device like /dev/zero would be read forever.
        if std::fs::metadata(path).is_ok_and(|m| !m.is_file()) {
            return Err(unreadable(&"not a regular file"));
        }
        let text = std::fs::read_to_string(path).map_err(|e| unreadable(&e))?;
        let script: Script = serde_json::from_str(&text).map_err(|e| invalid(&e))?;
        Self::from_script(script).map_err(|e| invalid(&e))
    }

    /// Validates `script` (its `match` regexes and `stop` reasons).
    pub fn from_script(script: Script) -> Result<Self, ScriptError> {
        let invalid = |message: String| ScriptError {
            kind: ScriptErrorKind::Invalid,
            message,
        };
        let mut turns = Vec::with_capacity(script.turns.len());
        for (i, turn) in script.turns.into_iter().enumerate() {
            let re = match &turn.pattern {
                Some(p) => Some(
                    Regex::new(p)
                        .map_err(|e| invalid(format!("turn {}: bad `match` regex: {e}", i + 1)))?,
                ),
                None => None,
            };
            if let Some(s) = &turn.stop {
                parse_stop(s).ok_or_else(|| {
                    invalid(format!(
                        "turn {}: `stop` must be stop, length or toolUse",
                        i + 1
                    ))
                })?;
            }
            turns.push((re, turn));
        }
        let used = Arc::new(Mutex::new(vec![false; turns.len()]));
        Ok(ScriptedProvider {
            info: {
                let id = script.model.unwrap_or_else(|| "scripted-1".to_string());
                let mut info = ModelInfo::unlisted("scripted", API_SCRIPTED, "", &id);
                // A script replays whatever it holds; every level is accepted.
                info.thinking_levels = THINKING_LEVELS.iter().map(|s| s.to_string()).collect();
                if let Some(w) = script.context_window {
                    info.context_window = w;
                }
                info.cost = script.cost.unwrap_or_default();
                info
            },
            turns,
            used,
        })
    }

    /// Picks the first unused (or repeating) turn whose pattern matches `last_user`.
    fn pick(&self, last_user: &str) -> Option<Turn> {
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        for (i, (re, turn)) in self.turns.iter().enumerate() {
            if used[i] && !turn.repeat {
                continue;
            }
            if re.as_ref().is_none_or(|re| re.is_match(last_user)) {
                used[i] = true;
                return Some(turn.clone());
            }
        }
        None
    }
}

fn parse_stop(s: &str) -> Option<StopReason> {
    match s {
        "stop" => Some(StopReason::Stop),
        "length" => Some(StopReason::Length),
        "toolUse" => Some(StopReason::ToolUse),
        _ => None,
    }
}

fn last_user_text(messages: &[Message]) -> String {
    messages
        .iter()
        .rev()
        .find_map(|m| match m {
            Message::User(u) => Some(crate::kernel::message::user_text(u)),
            _ => None,
        })
        .unwrap_or_default()
}

impl Provider for ScriptedProvider {
    fn info(&self) -> &ModelInfo {
        &self.info
    }

    fn stream(&self, request: ModelRequest, abort: AbortSignal) -> mpsc::Receiver<ProviderEvent> {
        let (tx, rx) = mpsc::channel(256);
        let last = last_user_text(&request.messages);
        let turn = self.pick(&last);
        let prices = self.info.cost;
        tokio::spawn(async move {
            tokio::select! {
                _ = replay(turn, last, prices, &tx) => {}
                _ = abort.aborted() => {}
            }
        });
        rx
    }
}

async fn replay(
    turn: Option<Turn>,
    last: String,
    prices: ModelCost,
    tx: &mpsc::Sender<ProviderEvent>,
) {
    let Some(turn) = turn else {
        let mut shown: String = last.chars().take(80).collect();
        if shown.len() < last.len() {
            shown.push('…');
        }
        let _ = tx
            .send(ProviderEvent::Error {
                kind: ErrorKind::ScriptExhausted,
                message: format!("scripted provider: no turn matches the user message {shown:?}"),
                retry_after_ms: None,
            })
            .await;
        return;
    };
    let mut called_tool = false;
    let mut n = 0u64;
    for chunk in &turn.chunks {
        let delay = chunk.delay_ms.unwrap_or(turn.delay_ms);
        if delay > 0 {
            tokio::time::sleep(Duration::from_millis(delay)).await;
        }
        if chunk.hang {
            std::future::pending::<()>().await;
        }
        if let Some(gate) = &chunk.wait_for {
            while !gate.exists() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        if let Some(message) = &chunk.error {
            let kind = chunk.kind.clone().unwrap_or(ErrorKind::ProviderError);
            let _ = tx
                .send(ProviderEvent::Error {
                    kind,
                    message: message.clone(),
                    retry_after_ms: chunk.retry_after_ms,
                })
                .await;
            return;
        }
        for _ in 0..chunk.times.unwrap_or(1) {
            for ev in chunk_events(chunk, &mut n) {
                called_tool |= matches!(ev, ProviderEvent::ToolCallStart { .. });
                if tx.send(ev).await.is_err() {
                    return;
                }
            }
        }
    }
    let usage = turn.usage.clone().unwrap_or_default();
    let _ = tx
        .send(ProviderEvent::Usage(to_usage(&usage, &prices)))
        .await;
    let stop = match &turn.stop {
        Some(s) => parse_stop(s).unwrap_or(StopReason::Stop),
        None if called_tool => StopReason::ToolUse,
        None => StopReason::Stop,
    };
    let _ = tx.send(ProviderEvent::Done { stop }).await;
}

/// Arguments stream in pieces of this many bytes (on char boundaries).
const ARG_PIECE: usize = 16;

fn chunk_events(chunk: &Chunk, n: &mut u64) -> Vec<ProviderEvent> {
    let mut out = Vec::new();
    if let Some(t) = &chunk.thinking {
        out.push(ProviderEvent::Thinking(t.clone()));
    }
    if let Some(t) = &chunk.text {
        out.push(ProviderEvent::Text(t.clone()));
    }
    if let Some(call) = &chunk.tool_call {
        *n += 1;
        let id = call.id.clone().unwrap_or_else(|| format!("call_{n}"));
        out.push(ProviderEvent::ToolCallStart {
            id: id.clone(),
            name: call.name.clone(),
        });
        let args = if call.arguments.is_null() {
            "{}".to_string()
        } else {
            call.arguments.to_string()
        };
        let mut rest = args.as_str();
        while !rest.is_empty() {
            let mut cut = rest.len().min(ARG_PIECE);
            while !rest.is_char_boundary(cut) {
                cut += 1;
            }
            out.push(ProviderEvent::ToolCallDelta {
                id: id.clone(),
                delta: rest[..cut].to_string(),
            });
            rest = &rest[cut..];
        }
        out.push(ProviderEvent::ToolCallEnd { id });
    }
    out
}

/// The turn's usage, its cost as the turn gives it or else at the script's prices.
fn to_usage(u: &ScriptUsage, prices: &ModelCost) -> Usage {
    let mut usage = Usage {
        input: u.input,
        output: u.output,
        cache_read: u.cache_read,
        cache_write: u.cache_write,
        total_tokens: u.input + u.output + u.cache_read + u.cache_write,
        ..Usage::default()
    };
    if u.cost > 0.0 {
        usage.cost.total = u.cost;
    } else {
        prices.apply(&mut usage);
    }
    usage
}

#[cfg(test)]
mod tests {
    use super::*;

    fn script(json: &str) -> ScriptedProvider {
        ScriptedProvider::from_script(serde_json::from_str(json).unwrap()).unwrap()
    }

    /// Regression: `load("/dev/zero")` read the endless device into memory.
    #[test]
    fn load_refuses_what_is_not_a_regular_file() {
        for path in ["/dev/zero", "/tmp"] {
            let e = ScriptedProvider::load(Path::new(path)).unwrap_err();
            assert!(e.message.contains("not a regular file"), "{e}");
            assert_eq!(e.kind, ScriptErrorKind::Unreadable);
        }
    }

    #[test]
    fn picks_by_pattern_and_repeats() {
        let p = script(
            r#"{"turns":[{"match":"^hi","repeat":true,"chunks":[{"text":"a"}]},
                          {"chunks":[{"text":"b"}]}]}"#,
        );
        assert!(p.pick("hi there").is_some());
        assert!(p.pick("hi again").is_some());
        let other = p.pick("bye").unwrap();
        assert_eq!(other.chunks[0].text.as_deref(), Some("b"));
        assert!(p.pick("bye").is_none());
    }

    #[test]
    fn tool_arguments_stream_in_pieces_that_rejoin() {
        let chunk: Chunk = serde_json::from_str(
            r#"{"toolCall":{"name":"read","arguments":{"path":"ünïcode/file/name.txt"}}}"#,
        )
        .unwrap();
        let evs = chunk_events(&chunk, &mut 0);
        let joined: String = evs
            .iter()
            .filter_map(|e| match e {
                ProviderEvent::ToolCallDelta { delta, .. } => Some(delta.as_str()),
                _ => None,
            })
            .collect();
        assert!(evs.len() > 3);
        assert_eq!(
            serde_json::from_str::<Value>(&joined).unwrap(),
            serde_json::json!({"path":"ünïcode/file/name.txt"})
        );
    }

    #[test]
    fn rejects_bad_stop_and_regex() {
        let bad: Script =
            serde_json::from_str(r#"{"turns":[{"stop":"nope","chunks":[]}]}"#).unwrap();
        let e = ScriptedProvider::from_script(bad).unwrap_err();
        assert!(e.message.contains("stop"), "{e}");
        assert_eq!(e.kind, ScriptErrorKind::Invalid);
        let bad: Script = serde_json::from_str(r#"{"turns":[{"match":"(","chunks":[]}]}"#).unwrap();
        let e = ScriptedProvider::from_script(bad).unwrap_err();
        assert!(e.message.contains("regex"), "{e}");
        assert_eq!(e.kind, ScriptErrorKind::Invalid);
    }
}
