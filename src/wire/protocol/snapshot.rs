//! `session/attach`'s snapshot (`DESIGN.md` §10.4): the materialised state of a session a
//! client attaches to without a usable cursor, declared once for the host that builds it and
//! the clients that read it. The field order is the order on the wire. Pure data.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::kernel::message::{Content, Message};
use crate::wire::pi::data::State;

/// A session as of the snapshot's `seq`. Every field has a default, so a client reads what
/// is there and shows the rest as empty.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Snapshot {
    /// The session file's header line.
    pub header: SnapshotHeader,
    /// The messages in the model's context, oldest first. A message a client cannot read is
    /// left out (the rest is still shown).
    #[serde(deserialize_with = "readable_messages")]
    pub messages: Vec<Message>,
    /// The session's state, as `get_state` answers it.
    pub state: State,
    /// What is in flight while a run streams (`null` when nothing is).
    pub streaming: Option<Streaming>,
    /// The dialogs still open, each the `extension_ui_request` event that opened it.
    pub pending_ui: Vec<Value>,
    /// When the active run started (its `agent_start`, unix ms; `null` when none runs): an
    /// attaching client times the run from there, not from the attach.
    pub run_started_at: Option<i64>,
    /// The spec the session was opened with (`session/open`'s `spec`), so a client can
    /// reopen it from its file if the daemon dies.
    pub open_spec: crate::wire::protocol::spec::SessionSpec,
    /// keel: the sandbox of the commands the model runs (absent: not known).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxState>,
}

/// The sandbox a session runs the model's commands in (what a status line shows).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SandboxState {
    /// `workspace-write`, `read-only` or `off`.
    pub mode: String,
    /// Whether the commands reach the network.
    pub network: bool,
    /// What enforces it: `bubblewrap`, `landlock`, `off`, `unavailable` (commands are
    /// refused) or `none` (no sandbox works; commands run unsandboxed).
    pub mechanism: String,
}

impl SandboxState {
    /// The state of `sandbox`.
    pub fn of(sandbox: &crate::kernel::sandbox::Sandbox) -> SandboxState {
        SandboxState {
            mode: sandbox.policy.mode.name().to_string(),
            network: sandbox.policy.network,
            mechanism: sandbox.mechanism.name().to_string(),
        }
    }

    /// What it is in a few words: `workspace-write · net off`, `read-only · net on`, or
    /// `off`, `unavailable` (commands are refused), `none (unavailable)` (no sandbox works and
    /// commands run unsandboxed).
    pub fn label(&self) -> String {
        match (self.mode.as_str(), self.mechanism.as_str()) {
            ("off", _) | (_, "off") => "off".to_string(),
            (_, "none") => "none (unavailable)".to_string(),
            (_, "unavailable") => "unavailable".to_string(),
            (mode, _) => {
                let net = if self.network { "on" } else { "off" };
                format!("{mode} · net {net}")
            }
        }
    }

    /// Whether it is worth a warning: the model's commands run unconfined (`off`, `none`) or
    /// not at all (`unavailable`).
    pub fn degraded(&self) -> bool {
        self.mode == "off" || ["off", "none", "unavailable"].contains(&self.mechanism.as_str())
    }
}

/// A session file's header line (pi's shape).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SnapshotHeader {
    /// Always `session`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The session file format's version.
    pub version: u64,
    /// The session id.
    pub id: String,
    /// When the session was created (RFC 3339).
    pub timestamp: String,
    /// The session's working directory.
    pub cwd: String,
    /// For forks and clones: the absolute path of the source session file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_session: Option<String>,
    /// keel's: the git worktree the session runs in (`-w`), its path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree: Option<String>,
    /// keel's: that worktree's branch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
}

/// What is in flight while a run streams.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Streaming {
    /// The assistant message being streamed, in pi's shape as far as it has streamed: a block
    /// not begun is `null`, a tool call's argument text so far is its block's
    /// `partialArguments`. `null` while only tools run.
    pub message: Option<Value>,
    /// The tools running, by call id.
    pub tools: Vec<RunningTool>,
}

/// A tool that is running.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RunningTool {
    /// The tool call's id.
    pub tool_call_id: String,
    /// The tool's name.
    pub tool_name: String,
    /// The call's arguments.
    pub args: Value,
    /// When it started (unix ms).
    pub started_at: i64,
    /// Its latest partial output, once it has sent one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partial_result: Option<PartialResult>,
}

/// A running tool's output so far.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PartialResult {
    /// The content for the model so far.
    pub content: Vec<Content>,
    /// Structured details for front ends (`null` when none).
    pub details: Option<Value>,
    /// Whether the output so far is an error.
    pub is_error: bool,
}

/// The messages a client can read; one it cannot is left out.
fn readable_messages<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Message>, D::Error> {
    let all = Vec::<Value>::deserialize(d)?;
    Ok(all
        .into_iter()
        .filter_map(|m| serde_json::from_value(m).ok())
        .collect())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::kernel::provider::model::ModelInfo;

    /// A snapshot with every field set, and the same built the way the host built it before
    /// it was typed (a `json!` object of JSON values).
    fn both() -> (Snapshot, Value) {
        let model = ModelInfo::unlisted("p", "openai-completions", "http://127.0.0.1:1", "m");
        let user: Message =
            serde_json::from_value(json!({"role": "user", "content": "hi", "timestamp": 1}))
                .unwrap();
        let message = json!({"role": "assistant", "content": [{"type": "text", "text": "He"}]});
        let dialog = json!({"type": "extension_ui_request", "id": "d1", "method": "confirm"});
        let snapshot = Snapshot {
            header: SnapshotHeader {
                kind: "session".into(),
                version: 3,
                id: "s1".into(),
                timestamp: "2026-01-01T00:00:00Z".into(),
                cwd: "/w".into(),
                parent_session: None,
                worktree: None,
                branch: None,
            },
            messages: vec![user.clone()],
            state: State {
                model: Some(model.clone()),
                thinking_level: "off".into(),
                is_streaming: true,
                is_compacting: false,
                steering_mode: crate::wire::pi::DeliveryMode::OneAtATime,
                follow_up_mode: crate::wire::pi::DeliveryMode::All,
                session_file: Some("/s/a.jsonl".into()),
                session_id: "s1".into(),
                session_name: None,
                auto_compaction_enabled: true,
                auto_retry_enabled: true,
                message_count: 1,
                pending_message_count: 0,
                todos: Vec::new(),
            },
            streaming: Some(Streaming {
                message: Some(message.clone()),
                tools: vec![
                    RunningTool {
                        tool_call_id: "c0".into(),
                        tool_name: "bash".into(),
                        args: json!({"command": "ls"}),
                        started_at: 7,
                        partial_result: Some(PartialResult {
                            content: vec![Content::text("a")],
                            details: None,
                            is_error: false,
                        }),
                    },
                    RunningTool {
                        tool_call_id: "c1".into(),
                        tool_name: "read".into(),
                        args: json!({"path": "x"}),
                        started_at: 8,
                        partial_result: None,
                    },
                ],
            }),
            pending_ui: vec![dialog.clone()],
            run_started_at: Some(5),
            open_spec: crate::wire::protocol::spec::SessionSpec {
                model: Some("m".into()),
                ..Default::default()
            },
            sandbox: Some(SandboxState {
                mode: "workspace-write".into(),
                network: false,
                mechanism: "bubblewrap".into(),
            }),
        };
        let before = json!({
            "header": {"type": "session", "version": 3, "id": "s1",
                       "timestamp": "2026-01-01T00:00:00Z", "cwd": "/w"},
            "messages": [user],
            "state": {
                "model": model, "thinkingLevel": "off", "isStreaming": true,
                "isCompacting": false, "steeringMode": "one-at-a-time", "followUpMode": "all",
                "sessionFile": "/s/a.jsonl", "sessionId": "s1", "autoCompactionEnabled": true,
                "autoRetryEnabled": true, "messageCount": 1, "pendingMessageCount": 0,
            },
            "streaming": {"message": message, "tools": [
                {"toolCallId": "c0", "toolName": "bash", "args": {"command": "ls"},
                 "startedAt": 7, "partialResult": {"content": [Content::text("a")],
                                                  "details": null, "isError": false}},
                {"toolCallId": "c1", "toolName": "read", "args": {"path": "x"}, "startedAt": 8},
            ]},
            "pendingUi": [dialog],
            "runStartedAt": 5,
            "openSpec": {"model": "m"},
            "sandbox": {"mode": "workspace-write", "network": false, "mechanism": "bubblewrap"},
        });
        (snapshot, before)
    }

    #[test]
    fn a_snapshot_is_written_byte_for_byte_as_the_untyped_one_was_and_reads_back() {
        let (snapshot, before) = both();
        let line = serde_json::to_string(&snapshot).unwrap();
        assert_eq!(line, before.to_string());
        // What a client reads holds everything that was sent (the model's settings that are
        // not on the wire are not compared).
        let back: Snapshot = serde_json::from_str(&line).unwrap();
        assert_eq!(serde_json::to_string(&back).unwrap(), line);
        assert_eq!(back.streaming, snapshot.streaming);
        assert_eq!(back.messages, snapshot.messages);
    }

    #[test]
    fn an_idle_snapshot_writes_null_for_what_is_not_in_flight() {
        let snapshot = Snapshot::default();
        let v = serde_json::to_value(&snapshot).unwrap();
        assert_eq!(v["streaming"], Value::Null);
        assert_eq!(v["runStartedAt"], Value::Null);
        assert_eq!(v["pendingUi"], json!([]));
    }

    #[test]
    fn a_message_a_client_cannot_read_is_left_out_and_the_rest_is_kept() {
        let (snapshot, mut before) = both();
        before["messages"] = json!([{"role": "nobody"}, before["messages"][0].clone()]);
        let back: Snapshot = serde_json::from_value(before).unwrap();
        assert_eq!(back.messages, snapshot.messages);
    }
}
