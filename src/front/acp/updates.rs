//! Public events and stored messages → ACP `session/update` payloads. Pure: the caller reads
//! the disk (a file's text before `write` replaces it) and writes the lines. Message ids are
//! the message's ordinal in the session (`msg_1`, `msg_2`, …), so a replay in a new process
//! and the live stream name the same message the same way.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::schema::{
    ContentBlock, ContentChunk, Cost, Diff, MessageId, Notice, NoticeSeverity, Plan, PlanEntry,
    PlanEntryPriority, PlanEntryStatus, SessionInfoUpdate, SessionUpdate, TextContent, ToolCall,
    ToolCallContent, ToolCallLocation, ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields,
    ToolKind, UsageUpdate,
};
use crate::kernel::message::{Content, Message};
use crate::kernel::tool::todo::{TodoItem, TodoStatus};
use crate::wire::events::{
    AssistantMessageEvent as Delta, NotifyType, ShownArgs, ToolDetails, ToolResult, UiMethod,
    UiRequest, WireEvent,
};
use crate::wire::pi::data::ContextUsage;

/// The tools whose calls need an approval under `--permission ask`.
pub const ASKING_TOOLS: &[&str] = &["write", "edit", "bash"];

/// A tool call seen so far: what its updates and its permission request are made of.
#[derive(Debug, Clone)]
struct Call {
    name: String,
    args: Value,
    /// `write`: the file's text before the call (`None`: there was no file).
    before: Option<Option<String>>,
    /// What the sandbox stopped the call's process from doing (`sandbox_violation`), each
    /// as the line the editor shows.
    stopped: Vec<String>,
}

/// The mapping state of one session.
#[derive(Debug)]
pub struct Mapper {
    cwd: PathBuf,
    /// Messages seen (the ordinal of the last one).
    messages: u64,
    /// Write, edit and bash calls wait for approval before they run.
    pub asks: bool,
    /// The client shows `notice` updates (it advertised `session.notices`); else a warning
    /// is an agent message chunk.
    pub notices: bool,
    calls: HashMap<String, Call>,
}

/// `usage_update` from `get_session_stats`: the tokens in context, the model's context window
/// and the session's cost so far (USD). `None` when the stats lack them.
pub fn usage(stats: &Value) -> Option<SessionUpdate> {
    let stats = StatsRef::deserialize(stats).ok()?;
    let context = ContextUsage::deserialize(&stats.context_usage).ok()?;
    let cost = stats.cost.as_f64().unwrap_or(0.0);
    Some(SessionUpdate::UsageUpdate(
        UsageUpdate::new(context.tokens, context.context_window).cost(Cost::new(cost, "USD")),
    ))
}

/// What `usage_update` reads of `get_session_stats`' answer (a cost that is not a number
/// is 0).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct StatsRef {
    #[serde(default)]
    cost: Value,
    #[serde(default)]
    context_usage: Value,
}

impl Mapper {
    pub fn new(cwd: PathBuf, asks: bool) -> Mapper {
        Mapper {
            cwd,
            messages: 0,
            asks,
            notices: false,
            calls: HashMap::new(),
        }
    }

    /// Counts `n` messages as seen without sending them (a session resumed without replay).
    pub fn skip(&mut self, n: usize) {
        self.messages += n as u64;
    }

    fn message_id(&self) -> String {
        format!("msg_{}", self.messages)
    }

    /// The updates a live event makes. `before(path)` is the text of a file now (for the
    /// diff of a `write`), `None` if there is none.
    pub fn event(
        &mut self,
        event: &WireEvent,
        before: &dyn Fn(&Path) -> Option<String>,
    ) -> Vec<SessionUpdate> {
        match event {
            WireEvent::MessageStart { .. } => {
                self.messages += 1;
                Vec::new()
            }
            WireEvent::MessageUpdate {
                assistant_message_event: Delta::TextDelta { delta, .. },
                ..
            } => vec![SessionUpdate::AgentMessageChunk(self.chunk(&**delta))],
            WireEvent::MessageUpdate {
                assistant_message_event: Delta::ThinkingDelta { delta, .. },
                ..
            } => vec![SessionUpdate::AgentThoughtChunk(self.chunk(&**delta))],
            WireEvent::ToolExecutionStart {
                tool_call_id,
                tool_name,
                args,
            } => {
                let mut call = Call {
                    name: tool_name.to_string(),
                    args: args.clone().into_owned(),
                    before: None,
                    stopped: Vec::new(),
                };
                // Only while the call waits for approval is the file still as it was: a call
                // that runs at once may have written it before this event is read.
                if tool_name == "write" && self.asks {
                    if let Some(path) = self.path_arg(&ShownArgs::of(args)) {
                        call.before = Some(before(&path));
                    }
                }
                let waits = self.asks && ASKING_TOOLS.contains(&&**tool_name);
                let status = if waits {
                    ToolCallStatus::Pending
                } else {
                    ToolCallStatus::InProgress
                };
                let update = self.tool_call(tool_call_id, &call).status(status);
                self.calls.insert(tool_call_id.to_string(), call);
                vec![SessionUpdate::ToolCall(update)]
            }
            WireEvent::ToolExecutionUpdate {
                tool_call_id,
                partial_result,
                ..
            } => vec![SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                tool_call_id.to_string(),
                ToolCallUpdateFields::new()
                    .status(ToolCallStatus::InProgress)
                    .content(vec![text_content(partial_result.text())]),
            ))],
            WireEvent::ToolExecutionEnd {
                tool_call_id,
                tool_name,
                result,
                is_error,
                ..
            } => {
                let call = self.calls.remove(&**tool_call_id).unwrap_or(Call {
                    name: tool_name.to_string(),
                    args: Value::Null,
                    before: None,
                    stopped: Vec::new(),
                });
                vec![SessionUpdate::ToolCallUpdate(self.finished(
                    tool_call_id,
                    &call,
                    result,
                    *is_error,
                ))]
            }
            WireEvent::SessionInfoChanged { name } => vec![SessionUpdate::SessionInfoUpdate(
                SessionInfoUpdate::new().title(name.to_string()),
            )],
            WireEvent::ExtensionUiRequest(r) if r.method == UiMethod::Notify => {
                self.warning(r).into_iter().collect()
            }
            WireEvent::SandboxViolation {
                tool_call_id,
                reason,
                path,
                host,
            } => {
                let what = path.as_deref().or(host.as_deref());
                let line = crate::report::fact::violation_line(reason, what);
                let Some(call) = self.calls.get_mut(&**tool_call_id) else {
                    return Vec::new();
                };
                call.stopped.push(line);
                let content: Vec<_> = call.stopped.iter().cloned().map(text_content).collect();
                vec![SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                    tool_call_id.to_string(),
                    ToolCallUpdateFields::new().content(content),
                ))]
            }
            WireEvent::TodoUpdate { todos } => vec![plan(todos)],
            _ => Vec::new(),
        }
    }

    /// A `notify` warning or error (the sandbox is off or unavailable, a setting not
    /// applied, …) as the client can show it: a `notice` when it advertised them, else an
    /// agent message chunk of its own. Information is left to the log.
    fn warning(&self, r: &UiRequest) -> Option<SessionUpdate> {
        let (severity, word) = match r.notify_type {
            Some(NotifyType::Warning) => (NoticeSeverity::Warning, "Warning"),
            Some(NotifyType::Error) => (NoticeSeverity::Error, "Error"),
            Some(NotifyType::Info | NotifyType::Other(_)) | None => {
                tracing::info!("{}", r.message);
                return None;
            }
        };
        Some(match self.notices {
            true => SessionUpdate::Notice(Notice::new(severity, r.message.to_string())),
            false => SessionUpdate::AgentMessageChunk(ContentChunk::new(ContentBlock::Text(
                TextContent::new(format!("{word}: {}\n\n", r.message)),
            ))),
        })
    }

    /// A call that was approved now runs.
    pub fn started(&self, tool_call_id: &str) -> SessionUpdate {
        SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
            tool_call_id.to_string(),
            ToolCallUpdateFields::new().status(ToolCallStatus::InProgress),
        ))
    }

    /// Whether the editor was sent call `tool_call_id` (a subagent's approval names a call of
    /// the child's, which it was not).
    pub fn knows(&self, tool_call_id: &str) -> bool {
        self.calls.contains_key(tool_call_id)
    }

    /// The tool call a permission request shows: title, kind, input and the diff or command.
    pub fn permission_call(&self, tool_call_id: &str, name: &str, args: &Value) -> ToolCallUpdate {
        let call = self.calls.get(tool_call_id).cloned().unwrap_or(Call {
            name: name.to_string(),
            args: args.clone(),
            before: None,
            stopped: Vec::new(),
        });
        let full = self.tool_call(tool_call_id, &call);
        let mut fields = ToolCallUpdateFields::new()
            .title(full.title)
            .kind(full.kind)
            .raw_input(full.raw_input);
        if !full.content.is_empty() {
            fields = fields.content(full.content);
        }
        if !full.locations.is_empty() {
            fields = fields.locations(full.locations);
        }
        ToolCallUpdate::new(tool_call_id.to_string(), fields)
    }

    /// The updates that replay stored messages (a loaded session), in order.
    pub fn replay(&mut self, messages: &[Message]) -> Vec<SessionUpdate> {
        let mut out = Vec::new();
        for m in messages {
            self.messages += 1;
            match m {
                Message::User(u) => {
                    for c in &u.content {
                        if let Some(block) = block_of(c) {
                            out.push(SessionUpdate::UserMessageChunk(self.chunk(block)));
                        }
                    }
                }
                Message::Assistant(a) => {
                    for c in &a.content {
                        match c {
                            Content::Thinking { thinking, .. } => out.push(
                                SessionUpdate::AgentThoughtChunk(self.chunk(thinking.as_str())),
                            ),
                            Content::ToolCall {
                                id,
                                name,
                                arguments,
                            } => {
                                let call = Call {
                                    name: name.clone(),
                                    args: arguments.clone(),
                                    before: None,
                                    stopped: Vec::new(),
                                };
                                out.push(SessionUpdate::ToolCall(self.tool_call(id, &call)));
                                self.calls.insert(id.clone(), call);
                            }
                            other => {
                                if let Some(block) = block_of(other) {
                                    out.push(SessionUpdate::AgentMessageChunk(self.chunk(block)));
                                }
                            }
                        }
                    }
                }
                Message::ToolResult(r) => {
                    let call = self.calls.remove(&r.tool_call_id).unwrap_or(Call {
                        name: r.tool_name.clone(),
                        args: Value::Null,
                        before: None,
                        stopped: Vec::new(),
                    });
                    let result = ToolResult {
                        content: Cow::Borrowed(&r.content),
                        details: r.details.as_ref().map(Cow::Borrowed),
                    };
                    out.push(SessionUpdate::ToolCallUpdate(self.finished(
                        &r.tool_call_id,
                        &call,
                        &result,
                        r.is_error,
                    )));
                }
            }
        }
        out
    }

    fn chunk(&self, block: impl Into<ContentBlock>) -> ContentChunk {
        ContentChunk::new(block.into()).message_id(MessageId::new(self.message_id()))
    }

    fn path_arg(&self, args: &ShownArgs) -> Option<PathBuf> {
        Some(self.cwd.join(args.path.as_deref()?))
    }

    fn tool_call(&self, id: &str, call: &Call) -> ToolCall {
        let args = &call.args;
        let a = ShownArgs::of(args);
        let arg = ShownArgs::str;
        let path = self.path_arg(&a);
        let shown = path.as_ref().map(|p| p.display().to_string());
        let shown = shown.as_deref().unwrap_or_default();
        let (title, kind) = match call.name.as_str() {
            "read" => (format!("Read {shown}"), ToolKind::Read),
            "write" => (format!("Write {shown}"), ToolKind::Edit),
            "edit" => (format!("Edit {shown}"), ToolKind::Edit),
            "bash" => (first_line(arg(&a.command)), ToolKind::Execute),
            "grep" => (format!("grep {}", arg(&a.pattern)), ToolKind::Search),
            "find" => (format!("find {}", arg(&a.pattern)), ToolKind::Search),
            "ls" => (
                format!("ls {}", if shown.is_empty() { "." } else { shown }),
                ToolKind::Read,
            ),
            other => (other.to_string(), ToolKind::Other),
        };
        let mut tc = ToolCall::new(id.to_string(), title)
            .kind(kind)
            .raw_input(args.clone());
        if let Some(p) = path {
            let line = a.offset.and_then(|l| u32::try_from(l).ok());
            tc = tc.locations(vec![ToolCallLocation::new(p).line(line)]);
        }
        if let Some(diff) = self.diff(call, None) {
            tc = tc.content(vec![diff]);
        }
        tc
    }

    /// `edit`: the replaced text and its replacement; `write`: the file before (as read while
    /// the call waited for approval, or none when the result says it `created` the file) and
    /// after.
    fn diff(&self, call: &Call, details: Option<ToolDetails>) -> Option<ToolCallContent> {
        let shown = ShownArgs::of(&call.args);
        let path = self.path_arg(&shown)?;
        let arg = |f: Option<String>, alias: Option<String>| f.or(alias);
        let diff = match call.name.as_str() {
            "edit" => Diff::new(path, arg(shown.new_text, shown.new_string)?)
                .old_text(arg(shown.old_text, shown.old_string)?),
            "write" => {
                let created = match details {
                    Some(ToolDetails::Write(w)) => Some(w.created),
                    _ => None,
                };
                let before = match (&call.before, created) {
                    (Some(before), _) => before.clone(),
                    (None, Some(true)) => None,
                    (None, _) => return None,
                };
                Diff::new(path, shown.content?).old_text(before)
            }
            _ => return None,
        };
        Some(ToolCallContent::Diff(diff))
    }

    fn finished(
        &self,
        id: &str,
        call: &Call,
        result: &ToolResult,
        is_error: bool,
    ) -> ToolCallUpdate {
        let status = if is_error {
            ToolCallStatus::Failed
        } else {
            ToolCallStatus::Completed
        };
        let mut content = Vec::new();
        if !is_error {
            content.extend(self.diff(call, result.details_of(&call.name)));
        }
        if content.is_empty() {
            content.push(text_content(result.text()));
        }
        content.extend(call.stopped.iter().cloned().map(text_content));
        let mut fields = ToolCallUpdateFields::new().status(status).content(content);
        if let Some(details) = &result.details {
            fields = fields.raw_output(details.clone().into_owned());
        }
        ToolCallUpdate::new(id.to_string(), fields)
    }
}

/// ACP's `plan` for the task list: every entry each time (the client replaces its list);
/// keel's items have no priority, so each is `medium`.
pub fn plan(todos: &[TodoItem]) -> SessionUpdate {
    let entries = todos
        .iter()
        .map(|t| {
            let status = match t.status {
                TodoStatus::Pending => PlanEntryStatus::Pending,
                TodoStatus::InProgress => PlanEntryStatus::InProgress,
                TodoStatus::Completed => PlanEntryStatus::Completed,
            };
            PlanEntry::new(t.content.clone(), PlanEntryPriority::Medium, status)
        })
        .collect();
    SessionUpdate::Plan(Plan::new(entries))
}

fn text_content(text: String) -> ToolCallContent {
    ToolCallContent::Content(agent_client_protocol_schema::v1::Content::new(
        ContentBlock::Text(TextContent::new(text)),
    ))
}

fn block_of(c: &Content) -> Option<ContentBlock> {
    match c {
        Content::Text { text } => Some(ContentBlock::Text(TextContent::new(text.clone()))),
        Content::Image { data, mime_type } => Some(ContentBlock::Image(
            agent_client_protocol_schema::v1::ImageContent::new(data.clone(), mime_type.clone()),
        )),
        _ => None,
    }
}

/// A command's first line, at most 200 characters (a title, not the whole script).
fn first_line(command: &str) -> String {
    let line = command.lines().next().unwrap_or_default();
    let mut title: String = line.chars().take(200).collect();
    if title.len() < command.len() {
        title.push('…');
    }
    title
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ev(v: Value) -> WireEvent<'static> {
        WireEvent::parse(&v.to_string()).unwrap()
    }

    fn wire(u: &[SessionUpdate]) -> Value {
        serde_json::to_value(u).unwrap()
    }

    #[test]
    fn deltas_become_chunks_with_the_message_ordinal_as_id() {
        let mut m = Mapper::new("/w".into(), false);
        let none = |_: &Path| None;
        m.event(&ev(json!({"type":"message_start","message":{"role":"user","content":"hi","timestamp":1}})), &none);
        m.event(&ev(json!({"type":"message_start","message":{"role":"assistant","content":[],"stopReason":"stop","timestamp":1}})), &none);
        let think = m.event(&ev(json!({"type":"message_update","assistantMessageEvent":{"type":"thinking_delta","contentIndex":0,"delta":"hmm"}})), &none);
        let text = m.event(&ev(json!({"type":"message_update","assistantMessageEvent":{"type":"text_delta","contentIndex":1,"delta":"Hi"}})), &none);
        assert_eq!(
            wire(&think),
            json!([{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"hmm"},"messageId":"msg_2"}])
        );
        assert_eq!(
            wire(&text),
            json!([{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Hi"},"messageId":"msg_2"}])
        );
    }

    #[test]
    fn a_write_shows_the_file_before_and_after_as_a_diff() {
        let mut m = Mapper::new("/w".into(), true);
        let before = |p: &Path| (p == Path::new("/w/a.txt")).then(|| "old\n".to_string());
        let start = m.event(&ev(json!({"type":"tool_execution_start","toolCallId":"c1","toolName":"write","args":{"path":"a.txt","content":"new\n"}})), &before);
        assert_eq!(
            wire(&start),
            json!([{"sessionUpdate":"tool_call","toolCallId":"c1","title":"Write /w/a.txt","kind":"edit",
                "content":[{"type":"diff","path":"/w/a.txt","oldText":"old\n","newText":"new\n"}],
                "locations":[{"path":"/w/a.txt"}],"rawInput":{"path":"a.txt","content":"new\n"}}])
        );
        let end = m.event(&ev(json!({"type":"tool_execution_end","toolCallId":"c1","toolName":"write","result":{"content":[{"type":"text","text":"Wrote 4 bytes"}],"details":{"created":false}},"isError":false})), &before);
        assert_eq!(
            wire(&end),
            json!([{"sessionUpdate":"tool_call_update","toolCallId":"c1","status":"completed",
                "content":[{"type":"diff","path":"/w/a.txt","oldText":"old\n","newText":"new\n"}],
                "rawOutput":{"created":false}}])
        );
    }

    #[test]
    fn a_write_that_ran_at_once_shows_a_diff_only_for_a_created_file() {
        let mut m = Mapper::new("/w".into(), false);
        let stale = |_: &Path| Some("already rewritten".to_string());
        let start = m.event(&ev(json!({"type":"tool_execution_start","toolCallId":"c1","toolName":"write","args":{"path":"a.txt","content":"x"}})), &stale);
        assert_eq!(
            wire(&start)[0].get("content"),
            None,
            "no diff from a file read too late"
        );
        let end = |created: bool| json!({"type":"tool_execution_end","toolCallId":"c1","toolName":"write","result":{"content":[{"type":"text","text":"Wrote 1 bytes"}],"details":{"created":created}},"isError":false});
        let done = m.event(&ev(end(false)), &stale);
        assert_eq!(
            wire(&done)[0]["content"],
            json!([{"type":"content","content":{"type":"text","text":"Wrote 1 bytes"}}])
        );
        m.event(&ev(json!({"type":"tool_execution_start","toolCallId":"c1","toolName":"write","args":{"path":"a.txt","content":"x"}})), &stale);
        let created = m.event(&ev(end(true)), &stale);
        assert_eq!(
            wire(&created)[0]["content"],
            json!([{"type":"diff","path":"/w/a.txt","newText":"x"}]),
            "no oldText: a new file"
        );
    }

    #[test]
    fn a_renamed_session_updates_its_title() {
        let mut m = Mapper::new("/w".into(), false);
        let u = m.event(
            &ev(json!({"type":"session_info_changed","name":"Refactor"})),
            &|_: &Path| None,
        );
        assert_eq!(
            wire(&u),
            json!([{"sessionUpdate":"session_info_update","title":"Refactor"}])
        );
    }

    #[test]
    fn tool_kinds_follow_the_tool() {
        let m = Mapper::new("/w".into(), false);
        let kind = |name: &str| {
            let call = Call {
                name: name.into(),
                args: json!({"path":"x"}),
                before: None,
                stopped: Vec::new(),
            };
            serde_json::to_value(m.tool_call("c", &call)).unwrap()["kind"].clone()
        };
        assert_eq!(kind("read"), "read");
        assert_eq!(kind("edit"), "edit");
        assert_eq!(kind("write"), "edit");
        assert_eq!(kind("bash"), "execute");
        assert_eq!(kind("grep"), "search");
        assert_eq!(kind("find"), "search");
        assert_eq!(kind("ls"), "read");
        assert_eq!(
            kind("mcp_tool"),
            Value::Null,
            "other is the default, left out"
        );
    }

    #[test]
    fn a_replay_sends_user_text_thoughts_and_finished_calls() {
        let mut m = Mapper::new("/w".into(), false);
        let msgs: Vec<Message> = serde_json::from_value(json!([
            {"role":"user","content":[{"type":"text","text":"q"}],"timestamp":1},
            {"role":"assistant","content":[{"type":"thinking","thinking":"t"},{"type":"text","text":"a"},
                {"type":"toolCall","id":"c","name":"bash","arguments":{"command":"ls"}}],"stopReason":"toolUse","timestamp":2},
            {"role":"toolResult","toolCallId":"c","toolName":"bash","content":[{"type":"text","text":"out"}],"isError":false,"timestamp":3}
        ])).unwrap();
        let kinds: Vec<Value> = wire(&m.replay(&msgs))
            .as_array()
            .unwrap()
            .iter()
            .map(|u| json!([u["sessionUpdate"], u["messageId"], u["status"]]))
            .collect();
        assert_eq!(
            kinds,
            vec![
                json!(["user_message_chunk", "msg_1", null]),
                json!(["agent_thought_chunk", "msg_2", null]),
                json!(["agent_message_chunk", "msg_2", null]),
                json!(["tool_call", null, null]),
                json!(["tool_call_update", null, "completed"]),
            ]
        );
    }

    #[test]
    fn usage_comes_from_the_session_stats() {
        let stats = json!({"cost": 0.25, "contextUsage": {"tokens": 1200, "contextWindow": 200000, "percent": 0.6}});
        let update = serde_json::to_value(usage(&stats).unwrap()).unwrap();
        assert_eq!(
            update,
            json!({"sessionUpdate": "usage_update", "used": 1200, "size": 200000,
                "cost": {"amount": 0.25, "currency": "USD"}})
        );
        assert!(
            usage(&json!({"cost": 1.0})).is_none(),
            "no context, no update"
        );
    }
}
