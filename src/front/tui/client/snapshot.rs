//! What a view shows of a session when it attaches: the snapshot's transcript, state, run
//! in flight (timed from when it started, not from the attach) and open dialogs, and the
//! spec the daemon opened the session with (to reopen it from its file if the daemon dies).

use serde_json::json;

use super::Client;
use crate::client::link::Start;
use crate::front::tui::replay::{self, Internals};
use crate::front::tui::short_id;
use crate::front::tui::transcript::HistoryCell;
use crate::wire::protocol::snapshot::Snapshot;

impl Client {
    /// The state at attach time: the transcript so far, the model and name, a streaming
    /// message and pending dialogs.
    pub fn load(&mut self, start: &Start, internals: &Internals, warnings: &[String]) {
        self.view.attached = self.daemon.is_some();
        let Some(snap) = &start.snapshot else { return };
        self.take_open_spec(snap);
        self.view.set_sandbox(snap.sandbox.as_ref());
        self.view.worktree = snap.header.branch.as_ref().map(|b| format!("⎇ {b}"));
        let messages = &snap.messages;
        let replayed = internals.replay(messages);
        self.take_state(&snap.state);
        let typed = replay::typed(&replayed);
        self.view.composer.set_history(self.merged_history(typed));
        let id = self.link.session_id().to_string();
        let model = self.view.transcript.model.clone();
        let version = env!("CARGO_PKG_VERSION");
        let header = match &self.daemon {
            Some(_) => format!(
                "keel {version} · {model} · session {} in the keel daemon · /detach leaves it running · /help",
                short_id(&id),
            ),
            None => format!(
                "keel {version} · {model} · session {}{} · /help for commands",
                short_id(&id),
                if messages.is_empty() { "" } else { " (resumed)" }
            ),
        };
        self.view.notice(HistoryCell::Notice(header));
        self.view.transcript.replay(&replayed);
        for w in warnings {
            self.view
                .notice(HistoryCell::Notice(format!("warning: {w}")));
        }
        let now = self.clock.now_ms();
        if snap.state.is_streaming {
            self.show_in_flight(snap, now);
        }
        for dialog in &snap.pending_ui {
            self.feed(dialog, now);
        }
    }

    /// The run in flight: its start, the message it streams and its running tools. Timers
    /// count from when the run and its tools started, not from this attach (a daemon's clock
    /// ahead of this one's counts from now).
    fn show_in_flight(&mut self, snap: &Snapshot, now: i64) {
        let since = |t: Option<i64>| t.map_or(now, |t| t.min(now));
        self.feed(&json!({"type": "agent_start"}), since(snap.run_started_at));
        let Some(streaming) = &snap.streaming else {
            return;
        };
        if let Some(m) = streaming.message.as_ref().filter(|m| m.is_object()) {
            self.feed(&json!({"type": "message_start", "message": m}), now);
            self.streamed_so_far(m, now);
        }
        for tool in &streaming.tools {
            let mut start = serde_json::to_value(tool).unwrap_or_default();
            if let Some(fields) = start.as_object_mut() {
                fields.insert("type".into(), json!("tool_execution_start"));
            }
            self.feed(&start, since(Some(tool.started_at)));
        }
    }

    /// What the message in progress streamed before the attach (its text and thinking
    /// blocks so far), drawn as the deltas that made it: the deltas after the attach go on
    /// from there. Every block but the last is finished.
    fn streamed_so_far(&mut self, message: &serde_json::Value, now: i64) {
        let Some(blocks) = message["content"].as_array() else {
            return;
        };
        let last = blocks.len().saturating_sub(1);
        for (i, block) in blocks.iter().enumerate() {
            let (kind, text) = match block["type"].as_str() {
                Some("text") => ("text", &block["text"]),
                Some("thinking") => ("thinking", &block["thinking"]),
                _ => continue,
            };
            let text = text.as_str().unwrap_or_default();
            let mut deltas = vec![
                json!({"type": format!("{kind}_start"), "contentIndex": i}),
                json!({"type": format!("{kind}_delta"), "contentIndex": i, "delta": text}),
            ];
            if i < last {
                deltas.push(
                    json!({"type": format!("{kind}_end"), "contentIndex": i, "content": text}),
                );
            }
            for d in deltas {
                let update = json!({
                    "type": "message_update",
                    "message": message,
                    "assistantMessageEvent": d,
                });
                self.feed(&update, now);
            }
        }
    }

    /// The spec the daemon opened the session with (the snapshot's `openSpec`): if the
    /// daemon dies, the session is reopened from its file with it, whoever opened it (a
    /// `keel attach` window has no spec of its own).
    fn take_open_spec(&mut self, snap: &Snapshot) {
        let Some(d) = &mut self.daemon else {
            return;
        };
        d.reopen.spec = snap.open_spec.clone();
    }
}
