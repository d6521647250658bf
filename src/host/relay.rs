//! A subagent's approval dialogs shown to its parent's clients (`DESIGN.md` §17). The child's
//! host tells its parent's host when a dialog opens and when it closes ([`Relay`]); the parent
//! publishes each one under an id of its own (`<child id>/<dialog id>`) with `subagent` naming
//! the child, hands an answer from its clients to the child's session (the first answer wins
//! there: the child's own clients may answer too), and publishes `dialog_resolved` once the
//! dialog is closed, wherever it was answered. While an interactive client watches the
//! parent, its children's dialogs wait for an answer as a watched session's do. Bookkeeping
//! and messages only: no output, no sockets, no timers.

use std::collections::HashMap;

use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::actor::{Call, SessionHandle};
use super::{Host, Internal};
use crate::kernel::tool::preview::Preview;
use crate::wire::events::DialogSubagent;
use crate::wire::rpc::{self, Request};

/// What a child's host tells its parent's host.
pub enum ChildNote {
    /// A child session is served by `handle` (the parent answers its dialogs through it).
    Started { id: String, handle: SessionHandle },
    /// The child session ended.
    Ended { id: String },
    /// The child opened an approval dialog.
    Opened(Box<Opened>),
    /// The child's dialog `dialog_id` is closed (answered, timed out, or its run ended).
    Closed { child: String, dialog_id: String },
}

/// A child's approval dialog (`subagent.dialog_id` in the child's session).
pub struct Opened {
    subagent: DialogSubagent,
    tool_name: String,
    args: Value,
    preview: Option<Preview>,
    timeout_ms: u64,
}

/// A child host's line to its parent's host.
#[derive(Clone)]
pub struct Relay {
    parent: mpsc::UnboundedSender<Internal>,
    /// The child as its dialogs name it (`dialog_id` is filled in per dialog).
    child: DialogSubagent,
}

impl std::fmt::Debug for Relay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relay").field("child", &self.child).finish()
    }
}

impl Relay {
    /// The relay of the child `session_id` (started by the parent's `task` call `call_id`).
    pub fn new(
        parent: mpsc::UnboundedSender<Internal>,
        (session_id, agent_type, description, call_id): (&str, &str, &str, &str),
    ) -> Relay {
        Relay {
            parent,
            child: DialogSubagent {
                session_id: session_id.to_string(),
                agent_type: agent_type.to_string(),
                description: description.to_string(),
                tool_call_id: call_id.to_string(),
                dialog_id: String::new(),
            },
        }
    }

    /// Tells the parent's host something about its child.
    pub fn note(&self, note: ChildNote) {
        let _ = self.parent.send(Internal::Child(note));
    }

    /// The child opened dialog `id`.
    pub fn opened(
        &self,
        id: &str,
        (tool_name, args, preview): (&str, &Value, Option<&Preview>),
        timeout_ms: u64,
    ) {
        self.note(ChildNote::Opened(Box::new(Opened {
            subagent: DialogSubagent {
                dialog_id: id.to_string(),
                ..self.child.clone()
            },
            tool_name: tool_name.to_string(),
            args: args.clone(),
            preview: preview.cloned(),
            timeout_ms,
        })));
    }

    /// The child's dialog `id` closed.
    pub fn closed(&self, id: &str) {
        self.note(ChildNote::Closed {
            child: self.child.session_id.clone(),
            dialog_id: id.to_string(),
        });
    }
}

/// A parent's live children and the dialogs of theirs it shows.
#[derive(Default)]
pub struct Children {
    live: HashMap<String, SessionHandle>,
    /// The parent's dialog id → the child's session id and its own dialog id.
    shown: HashMap<String, (String, String)>,
    /// An interactive client watches the parent (told to each child).
    watched: bool,
}

impl Host {
    /// Something a child's host said.
    pub(super) fn on_child(&mut self, note: ChildNote) {
        match note {
            ChildNote::Started { id, handle } => {
                handle.send(Call::ParentWatched(self.children.watched));
                self.children.live.insert(id, handle);
            }
            ChildNote::Ended { id } => {
                self.children.live.remove(&id);
                let gone: Vec<String> = (self.children.shown.iter())
                    .filter(|(_, (child, _))| *child == id)
                    .map(|(shown, _)| shown.clone())
                    .collect();
                for shown in gone {
                    self.resolve_shown(&shown);
                }
            }
            ChildNote::Opened(opened) => {
                let Opened {
                    subagent,
                    tool_name,
                    args,
                    preview,
                    timeout_ms,
                } = *opened;
                if !self.children.live.contains_key(&subagent.session_id) {
                    return; // ended meanwhile
                }
                let id = format!("{}/{}", subagent.session_id, subagent.dialog_id);
                let from = (subagent.session_id.clone(), subagent.dialog_id.clone());
                let line = rpc::subagent_approval_line(
                    &id,
                    &tool_name,
                    &args,
                    preview.as_ref(),
                    (Some(timeout_ms), subagent),
                );
                self.drain_events();
                self.open_dialogs
                    .insert(id.clone(), line.trim_end().to_string().into());
                self.children.shown.insert(id, from);
                self.publish(&line);
            }
            ChildNote::Closed { child, dialog_id } => {
                self.resolve_shown(&format!("{child}/{dialog_id}"));
            }
        }
    }

    /// Closes the shown dialog `id` (if it is open) and tells the clients.
    fn resolve_shown(&mut self, id: &str) {
        if self.children.shown.remove(id).is_some() {
            self.open_dialogs.remove(id);
            self.drain_events();
            self.publish(&rpc::dialog_resolved_line(id));
        }
    }

    /// An answer to dialog `id`: if it is a child's, it goes to the child's session (`true`).
    pub(super) fn answer_shown(
        &mut self,
        id: &str,
        (confirmed, cancelled): (Option<bool>, Option<bool>),
        value: Option<&str>,
    ) -> bool {
        let Some((child, dialog)) = self.children.shown.get(id).cloned() else {
            return false;
        };
        if let Some(handle) = self.children.live.get(&child) {
            let mut fields = serde_json::Map::new();
            for (key, v) in [("confirmed", confirmed), ("cancelled", cancelled)] {
                if let Some(v) = v {
                    fields.insert(key.into(), json!(v));
                }
            }
            if let Some(v) = value {
                fields.insert("value".into(), json!(v));
            }
            let mut req = Request::new("extension_ui_response", Value::Object(fields));
            req.id = Some(rpc::Id::string(&dialog));
            handle.send(Call::Request { req, answer: None });
        }
        self.resolve_shown(id);
        true
    }

    /// Tells every child whether an interactive client watches this session.
    pub(super) fn children_watched(&mut self, watched: bool) {
        self.children.watched = watched;
        for handle in self.children.live.values() {
            handle.send(Call::ParentWatched(watched));
        }
    }

    /// Forgets the children's dialogs shown (this session's run settled: clients take every
    /// question down).
    pub(super) fn forget_shown(&mut self) {
        self.children.shown.clear();
    }

    /// A dialog of this session closed: its parent (if this is a subagent) is told.
    pub(super) fn relay_closed(&self, id: &str) {
        if let Some(r) = &self.relay {
            r.closed(id);
        }
    }
}
