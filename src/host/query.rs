//! Read-only answers: state, stats, messages to fork from, entries, the session tree,
//! prompt-template commands and the HTML export.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use std::collections::HashMap;

use serde_json::{json, Value};

use super::dispatch::data;
use super::{Answer, CommandError, Host};
use crate::host::live;
use crate::kernel::compaction;
use crate::kernel::message::{user_text, Message};
use crate::kernel::op::QueueMode;
use crate::kernel::recorder;
use crate::kernel::session::EntryData;
use crate::kernel::subagent::SubagentDetails;
use crate::prompts;
use crate::wire::pi::data::{
    CommandInfo, CommandsData, ContextUsage, EntriesData, ExportData, ForkMessage,
    ForkMessagesData, SessionStats, SourceInfo, State, TokenStats,
};
use crate::wire::pi::DeliveryMode;

impl Host {
    pub(super) fn model_json(&self) -> Value {
        serde_json::to_value(self.live.session.provider().info()).unwrap_or(Value::Null)
    }

    pub(super) fn state(&self) -> State {
        let session = &self.live.session;
        let status = session.status();
        let (steering, follow_up) = session.queue_modes();
        let store = recorder::lock(&self.live.store);
        State {
            model: Some(session.provider().info().clone()),
            thinking_level: session.thinking_level(),
            is_streaming: status.running,
            is_compacting: status.compacting,
            steering_mode: mode_word(steering),
            follow_up_mode: mode_word(follow_up),
            session_file: store.path().map(|p| p.display().to_string()),
            session_id: store.header().id.clone(),
            session_name: store.name().map(str::to_string),
            auto_compaction_enabled: status.auto_compaction,
            auto_retry_enabled: status.auto_retry,
            message_count: status.message_count as u64,
            pending_message_count: status.pending_count as u64,
            todos: session.todos(),
        }
    }

    pub(super) fn stats(&self) -> SessionStats {
        let store = recorder::lock(&self.live.store);
        let (mut user, mut assistant, mut calls, mut results) = (0u64, 0u64, 0u64, 0u64);
        let mut usage = crate::kernel::message::Usage::default();
        let (mut api_ms, mut lines) = (0u64, ChangedLines::default());
        for e in store.entries() {
            match &e.data {
                EntryData::Message(Message::User(_)) => user += 1,
                EntryData::Message(Message::Assistant(a)) => {
                    assistant += 1;
                    calls += a.tool_calls().len() as u64;
                    usage.add(&a.usage);
                    api_ms += a.duration_ms.unwrap_or(0);
                    lines.calls(a);
                }
                EntryData::Message(Message::ToolResult(r)) => {
                    results += 1;
                    lines.result(r);
                    // A subagent's calls are the session's too.
                    let details = r.details.as_ref();
                    if let Some(u) = SubagentDetails::usage_of(&r.tool_name, details) {
                        usage.add(&u);
                    }
                }
                _ => {}
            }
        }
        let provider = self.live.session.provider();
        let window = provider.info().context_window;
        let tokens = compaction::context_tokens(&self.live.session.messages());
        let percent = if window > 0 {
            tokens as f64 * 100.0 / window as f64
        } else {
            0.0
        };
        SessionStats {
            session_file: store.path().map(|p| p.display().to_string()),
            session_id: store.header().id.clone(),
            user_messages: user,
            assistant_messages: assistant,
            tool_calls: calls,
            tool_results: results,
            total_messages: user + assistant + results,
            tokens: TokenStats {
                input: usage.input,
                output: usage.output,
                cache_read: usage.cache_read,
                cache_write: usage.cache_write,
                total: usage.input + usage.output + usage.cache_read + usage.cache_write,
            },
            cost: usage.cost.total,
            context_usage: ContextUsage {
                tokens,
                context_window: window,
                percent,
            },
            duration_ms: self.clock.duration_ms(self.live.started.elapsed()),
            api_duration_ms: api_ms,
            lines_added: lines.added,
            lines_removed: lines.removed,
        }
    }

    pub(super) fn export_html(&self, output_path: Option<&str>) -> Answer {
        let path = output_path.map(|p| self.config.cwd.join(p));
        let path = live::export_html(&self.live, &self.config.cwd, path)?;
        let path = path.display().to_string();
        Ok(data(&ExportData { path }))
    }

    pub(super) fn fork_messages(&self) -> ForkMessagesData {
        let store = recorder::lock(&self.live.store);
        let messages = store
            .entries()
            .iter()
            .filter_map(|e| match &e.data {
                EntryData::Message(Message::User(u)) => Some(ForkMessage {
                    entry_id: e.id.clone(),
                    text: user_text(u),
                }),
                _ => None,
            })
            .collect();
        ForkMessagesData { messages }
    }

    pub(super) fn entries(&self, since: Option<&str>) -> Answer {
        let store = recorder::lock(&self.live.store);
        let all = store.entries();
        let start = match since {
            None => 0,
            Some(id) => {
                all.iter()
                    .position(|e| e.id == id)
                    .ok_or_else(|| CommandError::entry_not_found(id))?
                    + 1
            }
        };
        let entries: Vec<Value> = all[start..]
            .iter()
            .filter_map(|e| e.to_json().ok())
            .collect();
        let leaf_id = store.leaf_id().map(str::to_string);
        Ok(data(&EntriesData { entries, leaf_id }))
    }

    /// `get_tree`'s data as JSON text: `{"tree":[{entry,children,label?,labelTimestamp?}],
    /// "leafId"}`. Written with an explicit stack, never as a nested `Value`: a linear
    /// session of 50k entries is a tree 50k levels deep, and building, serializing or
    /// dropping a `Value` that deep recurses once per level and overflows the stack.
    pub(super) fn tree_json(&self) -> String {
        let store = recorder::lock(&self.live.store);
        let entries = store.entries();
        let index: HashMap<&str, usize> = entries
            .iter()
            .enumerate()
            .map(|(i, e)| (e.id.as_str(), i))
            .collect();
        let mut children: Vec<Vec<usize>> = vec![Vec::new(); entries.len()];
        let mut roots = Vec::new();
        let mut labels: HashMap<&str, (&str, &str)> = HashMap::new();
        for (i, e) in entries.iter().enumerate() {
            if let EntryData::Label { target_id, label } = &e.data {
                match label {
                    Some(l) => labels.insert(target_id, (l, &e.timestamp)),
                    None => labels.remove(target_id.as_str()),
                };
            }
            match e.parent_id.as_deref().and_then(|p| index.get(p)) {
                Some(&parent) if parent < i => children[parent].push(i),
                _ => roots.push(i),
            }
        }
        enum Step {
            /// Write node `n` up to its children; `first`: no comma before it.
            Open(usize, bool),
            /// Close node `n`'s children and write its label.
            Close(usize),
        }
        let mut out = String::from("{\"tree\":[");
        let mut stack: Vec<Step> = roots
            .iter()
            .enumerate()
            .rev()
            .map(|(k, &r)| Step::Open(r, k == 0))
            .collect();
        while let Some(step) = stack.pop() {
            match step {
                Step::Open(n, first) => {
                    if !first {
                        out.push(',');
                    }
                    let entry = entries[n].to_json().unwrap_or(Value::Null);
                    out.push_str("{\"entry\":");
                    out.push_str(&entry.to_string());
                    out.push_str(",\"children\":[");
                    stack.push(Step::Close(n));
                    for (k, &c) in children[n].iter().enumerate().rev() {
                        stack.push(Step::Open(c, k == 0));
                    }
                }
                Step::Close(n) => {
                    out.push(']');
                    if let Some((label, at)) = labels.get(entries[n].id.as_str()) {
                        out.push_str(&format!(
                            ",\"label\":{},\"labelTimestamp\":{}",
                            json!(label),
                            json!(at)
                        ));
                    }
                    out.push('}');
                }
            }
        }
        out.push_str("],\"leafId\":");
        out.push_str(&json!(store.leaf_id()).to_string());
        out.push('}');
        out
    }

    pub(super) fn commands(&mut self) -> CommandsData {
        // Re-read so templates added while the editor runs show up.
        let (templates, _) = prompts::load_dirs(&self.prompt_dirs);
        self.templates = templates;
        let info = |name: String, description: &str, source: &str, source_info| CommandInfo {
            name,
            description: description.to_string(),
            source: source.to_string(),
            source_info,
            argument_hint: None,
        };
        let where_from = |path: &std::path::Path, claude: bool, scope: &str, base_dir| SourceInfo {
            path: path.display().to_string(),
            source: if claude { "claude" } else { "local" }.into(),
            scope: scope.to_string(),
            origin: "top-level".into(),
            base_dir,
        };
        let templates = self.templates.iter().map(|t| {
            let base = match &t.claude {
                Some(c) => Some(c.root.display().to_string()),
                None => t.path.parent().map(|p| p.display().to_string()),
            };
            let from = where_from(&t.path, t.claude.is_some(), t.scope.as_str(), base);
            CommandInfo {
                argument_hint: t.argument_hint().map(str::to_string),
                ..info(t.name.clone(), &t.description, "prompt", from)
            }
        });
        // A skill is `/NAME` (Claude Code's form) unless a template has the name (a template
        // wins), and always `/skill:NAME` (pi's).
        let skill = |s: &crate::skills::Skill, name: String| {
            let base = Some(s.base_dir().display().to_string());
            let from = where_from(&s.path, s.claude, s.scope, base);
            info(name, &s.description, "skill", from)
        };
        let named = self
            .skills
            .iter()
            .filter(|s| !self.templates.iter().any(|t| t.name == s.name))
            .map(|s| skill(s, s.name.clone()));
        let prefixed = self
            .skills
            .iter()
            .map(|s| skill(s, format!("skill:{}", s.name)));
        CommandsData {
            commands: templates.chain(named).chain(prefixed).collect(),
        }
    }
}

fn mode_word(m: QueueMode) -> DeliveryMode {
    match m {
        QueueMode::All => DeliveryMode::All,
        QueueMode::OneAtATime => DeliveryMode::OneAtATime,
    }
}

/// The lines the `edit` and `write` tools changed, as `get_session_stats` counts them: an
/// edit's diff lines, a write's whole content as added (what it replaced is not known).
#[derive(Default)]
struct ChangedLines {
    added: u64,
    removed: u64,
    /// Lines each `write` call would write, until its result says whether it did.
    writes: HashMap<String, u64>,
}

/// The one argument of a `write` call counted here.
#[derive(serde::Deserialize)]
struct WriteArgs {
    content: String,
}

impl ChangedLines {
    fn calls(&mut self, a: &crate::kernel::message::AssistantMessage) {
        for (id, name, arguments) in a.tool_calls() {
            if name != "write" {
                continue;
            }
            if let Ok(args) = serde_json::from_value::<WriteArgs>(arguments) {
                self.writes.insert(id, args.content.lines().count() as u64);
            }
        }
    }

    fn result(&mut self, r: &crate::kernel::message::ToolResultMessage) {
        use crate::kernel::tool::details::ToolDetails;
        if r.is_error {
            return;
        }
        let details = r
            .details
            .as_ref()
            .and_then(|d| ToolDetails::read(&r.tool_name, d));
        match details {
            Some(ToolDetails::Edit(d)) => {
                // The `---`/`+++` header comes before the first hunk.
                let hunks = d.diff.lines().skip_while(|l| !l.starts_with("@@"));
                for line in hunks {
                    match line.as_bytes().first() {
                        Some(b'+') => self.added += 1,
                        Some(b'-') => self.removed += 1,
                        _ => {}
                    }
                }
            }
            Some(ToolDetails::Write(_)) => {
                self.added += self.writes.remove(&r.tool_call_id).unwrap_or(0);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::message::{AssistantMessage, Content, StopReason, ToolResultMessage};

    fn result(id: &str, tool: &str, details: Value) -> ToolResultMessage {
        ToolResultMessage {
            tool_call_id: id.into(),
            tool_name: tool.into(),
            content: Vec::new(),
            details: Some(details),
            is_error: false,
            duration_ms: None,
            timestamp: 0,
        }
    }

    #[test]
    fn edits_count_their_diff_and_writes_their_lines() {
        let call = Content::ToolCall {
            id: "w1".into(),
            name: "write".into(),
            arguments: json!({"path": "a.txt", "content": "one\ntwo\nthree\n"}),
        };
        let a = AssistantMessage {
            content: vec![call],
            api: String::new(),
            provider: String::new(),
            model: String::new(),
            usage: Default::default(),
            stop_reason: StopReason::ToolUse,
            error_message: None,
            duration_ms: None,
            timestamp: 0,
        };
        let mut lines = ChangedLines::default();
        lines.calls(&a);
        lines.result(&result(
            "w1",
            "write",
            json!({"path": "a.txt", "bytes": 14}),
        ));
        let diff =
            "--- a/b.txt\n+++ b/b.txt\n@@ -1,2 +1,2 @@\n-old\n+new\n+more\n same\n--- gone\n";
        lines.result(&result(
            "e1",
            "edit",
            json!({"path": "b.txt", "diff": diff}),
        ));
        assert_eq!((lines.added, lines.removed), (5, 2));
    }
}
