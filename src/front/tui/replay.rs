//! What a resumed or attached session shows of its past: the conversation's messages (the
//! snapshot's or `get_messages`'), with the user messages the session made itself shown as what
//! they are. A compaction's summary and a `!cmd`'s output reach the model as user messages;
//! the session's entries (`get_entries`, pi's session format) say which ones they are: a
//! `compaction` entry's summary and a `bashExecution` message. Pure: the caller fetches.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::Value;

use crate::kernel::message::{user_text, Message};
use crate::kernel::session::compaction_text;
use crate::kernel::tool::bash::BashExecution;
use crate::wire::pi::data::EntriesData;

/// The fields of a session entry (pi's session format) a replay reads; others are ignored.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct EntryFields {
    #[serde(rename = "type")]
    kind: String,
    /// A `compaction`'s summary (one that is not a string leaves the entry out).
    summary: Option<String>,
    /// A `compaction`'s size before (read leniently: anything but a count is 0).
    tokens_before: Option<Value>,
    /// A `message` entry's message.
    message: Option<Value>,
}

/// One piece of a replayed conversation.
#[derive(Debug, Clone, PartialEq)]
pub enum Replayed {
    Message(Message),
    /// The summary that replaced the history before it.
    Compaction {
        tokens_before: u64,
    },
    /// A shell command the user ran.
    Bash(BashExecution),
}

/// The user messages a session made itself, by the text the model got.
#[derive(Debug, Default)]
pub struct Internals {
    compactions: HashMap<String, u64>,
    shells: HashMap<String, BashExecution>,
}

impl Internals {
    /// Reads a `get_entries` answer (`{entries: [...]}`); entries of other types are passed
    /// over, and an answer of another shape gives no internals (every message shows as sent).
    pub fn from_entries(answer: &Value) -> Internals {
        let mut out = Internals::default();
        let entries = EntriesData::deserialize(answer).unwrap_or_default().entries;
        for e in entries
            .iter()
            .filter_map(|e| EntryFields::deserialize(e).ok())
        {
            match (e.kind.as_str(), e.summary, e.message) {
                ("compaction", Some(summary), _) => {
                    let before = e.tokens_before.as_ref().and_then(Value::as_u64);
                    out.compactions
                        .insert(compaction_text(&summary), before.unwrap_or(0));
                }
                ("message", _, Some(message)) => {
                    let bash = BashExecution::from_json(&message);
                    let context = bash.as_ref().and_then(BashExecution::context_message);
                    if let (Some(bash), Some(Message::User(u))) = (bash, context) {
                        out.shells.insert(user_text(&u), bash);
                    }
                }
                _ => {}
            }
        }
        out
    }

    /// The messages with the session's own user messages replaced by what they are.
    pub fn replay(&self, messages: &[Message]) -> Vec<Replayed> {
        messages
            .iter()
            .map(|m| {
                let Message::User(u) = m else {
                    return Replayed::Message(m.clone());
                };
                let text = user_text(u);
                if let Some(&tokens_before) = self.compactions.get(&text) {
                    return Replayed::Compaction { tokens_before };
                }
                match self.shells.get(&text) {
                    Some(bash) => Replayed::Bash(bash.clone()),
                    None => Replayed::Message(m.clone()),
                }
            })
            .collect()
    }
}

/// The prompts the user typed, oldest first (the editor's history; hooks' context is not one).
pub fn typed(replayed: &[Replayed]) -> Vec<String> {
    replayed
        .iter()
        .filter_map(|r| match r {
            Replayed::Message(Message::User(u)) => Some(user_text(u)),
            _ => None,
        })
        .filter(|text| crate::kernel::hooks::context::parse(text).is_none())
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Only the entries say what a message is: a prompt the user typed that reads like a
    /// shell command's output stays a prompt.
    #[test]
    fn only_the_sessions_own_messages_are_replaced() {
        let bash = json!({"role": "bashExecution", "command": "ls", "output": "a\n",
                          "exitCode": 0, "cancelled": false, "truncated": false, "timestamp": 5});
        let entries = json!({"entries": [
            {"type": "compaction", "id": "c", "summary": "S", "tokensBefore": 42},
            {"type": "message", "id": "b", "message": bash},
        ]});
        let internals = Internals::from_entries(&entries);
        let record = BashExecution::from_json(&bash).unwrap();
        let shell = record.context_message().unwrap();
        let typed_by_hand = Message::user("Ran `ls`\n```\nb\n```", 6);
        let messages = [
            Message::user(compaction_text("S"), 1),
            shell,
            typed_by_hand.clone(),
        ];
        let got = internals.replay(&messages);
        assert_eq!(
            got,
            [
                Replayed::Compaction { tokens_before: 42 },
                Replayed::Bash(record),
                Replayed::Message(typed_by_hand)
            ]
        );
        assert_eq!(typed(&got), ["Ran `ls`\n```\nb\n```"]);
        let none = Internals::from_entries(&json!({"error": "x"}));
        let first = Replayed::Message(messages[0].clone());
        assert_eq!(none.replay(&messages[..1]), [first]);
    }
}
