//! The session's conversation as a Claude Code transcript, for hook scripts that read the
//! file at `transcript_path` (a Stop hook looking for the last `type == "assistant"` line,
//! a logger reading `tool_use` blocks). One JSON object a line, with Claude's fields: `type`
//! (`user`, `assistant`), `uuid`, `parentUuid` (the line before), `sessionId`, `cwd`,
//! `timestamp` (ISO 8601), `isSidechain` (a subagent's), `message {role, content}` (a plain
//! prompt's content is a string; otherwise blocks of `text`, `thinking`, `image`, `tool_use
//! {id, name, input}` under Claude's tool names and input shapes, and `tool_result
//! {tool_use_id, content, is_error}` in a `user` line); an assistant message adds `id`,
//! `model`, `stop_reason` and `usage`.
//!
//! Written only while some hook is configured (the hooks write it, just before one runs),
//! owner-only, in the saved session's directory beside its file
//! (`<file>.output/claude-transcript.jsonl`, with its kept tool outputs), or in the session's
//! private temporary directory (removed when the session ends) for a session without a file. Brought
//! up to date by appending what is new; when the conversation got shorter or changed under it
//! (a compaction, a rewind) it is written again from the start.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::Serialize;
use serde_json::Value;

use crate::kernel::message::{Content, Message, StopReason};

/// Where one session's Claude transcript is and how much of the conversation it holds.
#[derive(Debug)]
pub struct Transcript {
    path: PathBuf,
    /// In the session's private temporary directory (a session without a file): the caller
    /// makes that directory before a write.
    private: bool,
    written: Mutex<Written>,
}

/// What the file holds: how many messages, the timestamp of the last (to notice a
/// conversation that changed under it) and the uuid of the last line.
#[derive(Debug, Default)]
struct Written {
    count: usize,
    last_stamp: i64,
    last_uuid: Option<String>,
}

/// Who wrote the lines: the session and its directory, and whether it is a subagent.
pub struct Writer<'a> {
    pub session_id: &'a str,
    pub cwd: &'a Path,
    pub sidechain: bool,
}

impl Transcript {
    /// The transcript of the session saved at `session_file` (`""`: none) with id
    /// `session_id`, at [`path_for`].
    pub fn new(session_file: &str, session_id: &str, private_dir: &Path) -> Transcript {
        Transcript {
            path: path_for(session_file, session_id, private_dir),
            private: session_file.is_empty(),
            written: Mutex::default(),
        }
    }

    /// The file's path (`transcript_path`).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether it is kept in the session's private temporary directory.
    pub fn is_private(&self) -> bool {
        self.private
    }

    /// Appends the messages of `messages` the file does not hold yet (or writes it anew when
    /// the conversation changed under it).
    pub fn sync(&self, messages: &[Message], who: &Writer<'_>) -> std::io::Result<()> {
        let mut written = match self.written.lock() {
            Ok(w) => w,
            Err(poisoned) => poisoned.into_inner(),
        };
        let changed = written.count > messages.len()
            || (written.count > 0 && stamp(&messages[written.count - 1]) != written.last_stamp);
        let fresh = changed || written.count == 0;
        if changed {
            *written = Written::default();
        }
        if !fresh && written.count == messages.len() {
            return Ok(());
        }
        if let Some(dir) = self.path.parent().filter(|_| !self.private) {
            crate::kernel::private::create_dir_all(dir)?;
        }
        let mut text = Vec::new();
        for message in &messages[written.count..] {
            let uuid = uuid::Uuid::new_v4().to_string();
            let line = line(message, who, written.last_uuid.take(), uuid.clone());
            serde_json::to_writer(&mut text, &line).map_err(std::io::Error::other)?;
            text.push(b'\n');
            written.last_uuid = Some(uuid);
        }
        let mut file = match fresh {
            true => {
                crate::kernel::private::write_file(&self.path, b"")?;
                crate::kernel::private::append_file(&self.path)?
            }
            false => crate::kernel::private::append_file(&self.path)?,
        };
        file.write_all(&text)?;
        written.count = messages.len();
        written.last_stamp = messages.last().map_or(0, stamp);
        Ok(())
    }
}

/// Where [`Transcript::new`] keeps the transcript of a session: in the saved session's own
/// directory (`<file>.output/`, beside its file, where its kept tool outputs are: not a
/// `*.jsonl` that session listings would read), else in the private directory.
pub fn path_for(session_file: &str, session_id: &str, private_dir: &Path) -> PathBuf {
    if session_file.is_empty() {
        return private_dir.join(format!("claude-transcript-{}.jsonl", safe(session_id)));
    }
    crate::kernel::tool::output_dir_of(Path::new(session_file)).join(FILE_NAME)
}

/// A copy of a child's transcript (`child`) beside its parent's (`parent`), as
/// `subagents/agent-<id>.jsonl` (where Claude Code keeps a subagent's), owner-only: the
/// parent's hooks run in the parent's sandbox, which reads the parent's directory but not the
/// child's (beside the child's file, under the hidden `$KEEL_HOME`).
pub fn copy_beside(parent: &Path, child: &Path, agent_id: &str) -> std::io::Result<PathBuf> {
    let dir = parent
        .parent()
        .ok_or_else(|| std::io::Error::other("no directory"))?
        .join("subagents");
    crate::kernel::private::create_dir_all(&dir)?;
    let path = dir.join(format!("agent-{}.jsonl", safe(agent_id)));
    crate::kernel::private::write_file(&path, &std::fs::read(child)?)?;
    Ok(path)
}

/// The transcript's name in a saved session's directory.
const FILE_NAME: &str = "claude-transcript.jsonl";

/// A session id as a file name part.
fn safe(id: &str) -> String {
    id.chars()
        .map(|c| match c.is_ascii_alphanumeric() || c == '-' {
            true => c,
            false => '_',
        })
        .collect()
}

fn stamp(m: &Message) -> i64 {
    match m {
        Message::User(u) => u.timestamp,
        Message::Assistant(a) => a.timestamp,
        Message::ToolResult(r) => r.timestamp,
    }
}

/// One transcript line.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Line<'a> {
    parent_uuid: Option<String>,
    is_sidechain: bool,
    user_type: &'static str,
    cwd: String,
    session_id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    message: Body,
    uuid: String,
    timestamp: String,
}

#[derive(Serialize)]
#[serde(untagged)]
enum Body {
    User {
        role: &'static str,
        content: UserContent,
    },
    Assistant {
        id: String,
        #[serde(rename = "type")]
        kind: &'static str,
        role: &'static str,
        model: String,
        content: Vec<Block>,
        stop_reason: &'static str,
        usage: Usage,
    },
}

/// A plain prompt's text, or blocks.
#[derive(Serialize)]
#[serde(untagged)]
enum UserContent {
    Text(String),
    Blocks(Vec<Block>),
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block {
    Text {
        text: String,
    },
    Thinking {
        thinking: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    Image {
        source: ImageSource,
    },
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
    ToolResult {
        tool_use_id: String,
        content: String,
        is_error: bool,
    },
}

#[derive(Serialize)]
struct ImageSource {
    #[serde(rename = "type")]
    kind: &'static str,
    media_type: String,
    data: String,
}

/// Claude's token counts of one model call.
#[derive(Serialize)]
struct Usage {
    input_tokens: u64,
    output_tokens: u64,
    cache_read_input_tokens: u64,
    cache_creation_input_tokens: u64,
}

fn line<'a>(m: &Message, who: &Writer<'a>, parent: Option<String>, uuid: String) -> Line<'a> {
    let cwd = who.cwd;
    let (kind, message) = match m {
        Message::User(u) => {
            let content = match u.content.as_slice() {
                [Content::Text { text }] => UserContent::Text(text.clone()),
                blocks => UserContent::Blocks(blocks.iter().map(|b| block(b, cwd)).collect()),
            };
            let role = "user";
            ("user", Body::User { role, content })
        }
        Message::Assistant(a) => {
            let body = Body::Assistant {
                id: format!("msg_{}", uuid.replace('-', "")),
                kind: "message",
                role: "assistant",
                model: a.model.clone(),
                content: a.content.iter().map(|b| block(b, cwd)).collect(),
                stop_reason: match a.stop_reason {
                    StopReason::ToolUse => "tool_use",
                    StopReason::Length => "max_tokens",
                    _ => "end_turn",
                },
                usage: Usage {
                    input_tokens: a.usage.input,
                    output_tokens: a.usage.output,
                    cache_read_input_tokens: a.usage.cache_read,
                    cache_creation_input_tokens: a.usage.cache_write,
                },
            };
            ("assistant", body)
        }
        Message::ToolResult(r) => {
            let result = Block::ToolResult {
                tool_use_id: r.tool_call_id.clone(),
                content: crate::kernel::message::joined_text(&r.content),
                is_error: r.is_error,
            };
            let content = UserContent::Blocks(vec![result]);
            (
                "user",
                Body::User {
                    role: "user",
                    content,
                },
            )
        }
    };
    Line {
        parent_uuid: parent,
        is_sidechain: who.sidechain,
        user_type: "external",
        cwd: cwd.display().to_string(),
        session_id: who.session_id,
        kind,
        message,
        uuid,
        timestamp: iso(stamp(m)),
    }
}

fn block(c: &Content, cwd: &Path) -> Block {
    match c {
        Content::Text { text } => Block::Text { text: text.clone() },
        Content::Thinking {
            thinking,
            signature,
        } => Block::Thinking {
            thinking: thinking.clone(),
            signature: signature.clone(),
        },
        Content::Image { data, mime_type } => Block::Image {
            source: ImageSource {
                kind: "base64",
                media_type: mime_type.clone(),
                data: data.clone(),
            },
        },
        Content::ToolCall {
            id,
            name,
            arguments,
        } => Block::ToolUse {
            id: id.clone(),
            name: super::names::claude_name(name).to_string(),
            input: super::names::claude_input(name, arguments, cwd),
        },
    }
}

/// Unix milliseconds as ISO 8601 in UTC (`2025-01-02T03:04:05.678Z`).
fn iso(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::kernel::message::{AssistantMessage, ToolResultMessage};
    use std::sync::Arc;

    fn assistant(content: Vec<Content>, ts: i64) -> Message {
        Message::Assistant(Arc::new(AssistantMessage {
            content,
            api: String::new(),
            provider: String::new(),
            model: "m".into(),
            usage: Default::default(),
            stop_reason: StopReason::Stop,
            error_message: None,
            duration_ms: None,
            timestamp: ts,
        }))
    }

    fn lines(path: &Path) -> Vec<Value> {
        let text = std::fs::read_to_string(path).unwrap();
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[test]
    fn appends_what_is_new_and_rewrites_a_conversation_that_changed() {
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("s.jsonl").display().to_string();
        let t = Transcript::new(&file, "s", &d.path().join("private"));
        assert_eq!(t.path(), d.path().join("s.output/claude-transcript.jsonl"));
        let who = Writer {
            session_id: "s",
            cwd: Path::new("/w"),
            sidechain: false,
        };
        let call = Content::ToolCall {
            id: "c1".into(),
            name: "read".into(),
            arguments: serde_json::json!({"path": "a"}),
        };
        let mut msgs = vec![Message::user("hi", 1_000), assistant(vec![call], 2_000)];
        t.sync(&msgs, &who).unwrap();
        msgs.push(Message::ToolResult(Arc::new(ToolResultMessage {
            tool_call_id: "c1".into(),
            tool_name: "read".into(),
            content: vec![Content::text("x")],
            details: None,
            is_error: false,
            duration_ms: None,
            timestamp: 3_000,
        })));
        t.sync(&msgs, &who).unwrap();
        t.sync(&msgs, &who).unwrap();
        let l = lines(t.path());
        assert_eq!(l.len(), 3);
        assert_eq!(l[0]["message"]["content"], "hi");
        assert_eq!(l[0]["timestamp"], "1970-01-01T00:00:01.000Z");
        assert_eq!(l[2]["parentUuid"], l[1]["uuid"]);
        let used = &l[1]["message"]["content"][0];
        assert_eq!(used["name"], "Read");
        assert_eq!(used["input"]["file_path"], "/w/a");
        assert_eq!(l[2]["message"]["content"][0]["tool_use_id"], "c1");
        // A compaction left one message: the file is written again from it.
        let compacted = vec![Message::user("summary", 4_000)];
        t.sync(&compacted, &who).unwrap();
        let l = lines(t.path());
        assert_eq!(l.len(), 1);
        assert_eq!(l[0]["parentUuid"], Value::Null);
    }

    #[test]
    fn a_session_without_a_file_writes_in_its_private_directory() {
        let d = tempfile::tempdir().unwrap();
        let t = Transcript::new("", "a/b", &d.path().join("p"));
        assert_eq!(t.path(), d.path().join("p/claude-transcript-a_b.jsonl"));
        assert!(t.is_private());
        std::fs::create_dir(d.path().join("p")).unwrap();
        let who = Writer {
            session_id: "a/b",
            cwd: Path::new("/w"),
            sidechain: true,
        };
        t.sync(&[Message::user("x", 0)], &who).unwrap();
        assert_eq!(lines(t.path())[0]["isSidechain"], true);
    }
}
