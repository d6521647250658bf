//! What a view shows of a session when it attaches: the snapshot's transcript, state, run
//! in flight (timed from when it started, not from the attach) and open dialogs, and the
//! flags the daemon opened the session with (to reopen it from its file if the daemon dies).

use serde_json::{json, Value};

use super::Client;
use crate::client::link::Start;
use crate::front::tui::replay::{self, Internals};
use crate::front::tui::short_id;
use crate::front::tui::transcript::HistoryCell;
use crate::kernel::message::Message;

impl Client {
    /// The state at attach time: the transcript so far, the model and name, a streaming
    /// message and pending dialogs.
    pub fn load(&mut self, start: &Start, internals: &Internals, warnings: &[String]) {
        self.view.attached = self.daemon.is_some();
        let Some(snap) = &start.snapshot else { return };
        self.take_open_args(snap);
        let messages: Vec<Message> = snap["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| serde_json::from_value(m.clone()).ok())
            .collect();
        let replayed = internals.replay(&messages);
        let state = &snap["state"];
        self.take_state(state);
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
        // Timers count from when the run and its tools started, not from this attach (a
        // daemon's clock ahead of this one's counts from now).
        let since = |v: &Value| v.as_i64().map_or(now, |t| t.min(now));
        if state["isStreaming"] == true {
            self.feed(
                &json!({"type": "agent_start"}),
                since(&snap["runStartedAt"]),
            );
            if let Some(m) = snap["streaming"]["message"].as_object() {
                self.feed(&json!({"type": "message_start", "message": m}), now);
            }
            for tool in snap["streaming"]["tools"].as_array().into_iter().flatten() {
                let mut start = tool.clone();
                start["type"] = json!("tool_execution_start");
                self.feed(&start, since(&tool["startedAt"]));
            }
        }
        for dialog in snap["pendingUi"].as_array().into_iter().flatten() {
            self.feed(dialog, now);
        }
    }

    /// The flags the daemon opened the session with (the snapshot's `openArgs`): if the
    /// daemon dies, the session is reopened from its file with them, whoever opened it (a
    /// `keel attach` window has no flags of its own).
    fn take_open_args(&mut self, snap: &Value) {
        let (Some(d), Some(args)) = (&mut self.daemon, snap["openArgs"].as_array()) else {
            return;
        };
        if !args.is_empty() {
            d.reopen["args"] = json!(args);
        }
    }
}
