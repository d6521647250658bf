//! Rewinding a session to the state before one of its user messages: the files (from the
//! first checkpoint after that message), the conversation (the session tree's leaf moves to
//! the message's parent; the abandoned branch stays), or both. The present is snapshotted
//! first and the rewind recorded as an entry, so [`undo`] can bring it back.

use serde::{Deserialize, Serialize};

use super::{Checkpoint, CheckpointError, CheckpointErrorKind as Kind, Restored, Rewound, Shadow};
use crate::kernel::clock::Clock;
use crate::kernel::message::{joined_text, Message};
use crate::kernel::session::{EntryData, Store};

/// What a rewind restores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Restore {
    /// Files and conversation.
    #[default]
    Both,
    Conversation,
    Files,
}

impl Restore {
    pub fn word(self) -> &'static str {
        match self {
            Restore::Both => "both",
            Restore::Conversation => "conversation",
            Restore::Files => "files",
        }
    }

    /// Whether the files are restored.
    pub fn files(self) -> bool {
        self != Restore::Conversation
    }

    /// Whether the conversation moves.
    pub fn conversation(self) -> bool {
        self != Restore::Files
    }
}

/// One checkpoint of a session, as `keel rewind --list` and `get_checkpoints` show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Listed {
    /// The checkpoint's own entry id.
    pub id: String,
    /// The user message it precedes.
    pub entry_id: String,
    /// When it was taken (ISO-8601).
    pub timestamp: String,
    /// The first line of that user message.
    pub prompt: String,
    /// The snapshot's tree id.
    pub snapshot: String,
    /// The files the prompt's turn changed: from this checkpoint to the next one (to the
    /// present for the newest). A checkpoint is taken before the first change after its
    /// prompt, so these are that prompt's changes (and any made outside keel meanwhile).
    pub files: Vec<String>,
}

/// The first line of the user message `id` (empty if it is none).
fn prompt_of(store: &Store, id: &str) -> String {
    match store.entry(id).map(|e| &e.data) {
        Some(EntryData::Message(Message::User(u))) => joined_text(&u.content)
            .lines()
            .next()
            .unwrap_or("")
            .to_string(),
        _ => String::new(),
    }
}

/// The first line of the newest user message on the branch ending at the session's leaf.
fn newest_prompt(store: &Store) -> Option<String> {
    let branch = store.branch_to(store.leaf_id()).ok()?;
    let user = branch
        .iter()
        .rev()
        .find(|e| matches!(e.data, EntryData::Message(Message::User(_))))?;
    Some(prompt_of(store, &user.id))
}

/// Every checkpoint of the session file, oldest first, each with the files its prompt
/// changed. `shadow`: the session's shadow repository, which diffs each snapshot against the
/// next (and the newest against the present); without it (checkpoints off, or a diff that
/// fails) a checkpoint's files are those the next checkpoint recorded as changed since the
/// one before, and the newest's are unknown (none).
pub fn list(store: &Store, shadow: Option<&Shadow>) -> Vec<Listed> {
    let taken: Vec<(&crate::kernel::session::Entry, Checkpoint)> = store
        .entries()
        .iter()
        .filter_map(|e| Some((e, Checkpoint::from_entry(e)?)))
        .collect();
    let present = match (shadow, taken.is_empty()) {
        (Some(shadow), false) => shadow.peek().ok().map(|s| s.tree),
        _ => None,
    };
    let mut listed = Vec::with_capacity(taken.len());
    for (i, (e, c)) in taken.iter().enumerate() {
        let next = taken.get(i + 1).map(|(_, n)| n);
        let to = next.map(|n| n.snapshot.clone()).or_else(|| present.clone());
        let diffed = match (shadow, to) {
            (Some(shadow), Some(to)) => shadow.changed(&c.snapshot, &to).ok(),
            _ => None,
        };
        let files = diffed
            .or_else(|| next.map(|n| n.files.clone()))
            .unwrap_or_default();
        listed.push(Listed {
            id: e.id.clone(),
            prompt: prompt_of(store, &c.entry_id),
            entry_id: c.entry_id.clone(),
            timestamp: e.timestamp.clone(),
            snapshot: c.snapshot.clone(),
            files,
        });
    }
    listed
}

/// Rewinds to before the user message `target` (or the one checkpoint `target` names).
/// `shadow`: the session's shadow repository (`None`: checkpoints are off, and only the
/// conversation can be rewound).
pub fn rewind(
    store: &mut Store,
    shadow: Option<&Shadow>,
    target: &str,
    restore: Restore,
    clock: &Clock,
) -> Result<Rewound, CheckpointError> {
    let (message_id, parent, checkpoint) = locate(store, target)?;
    let mut rewound = Rewound {
        entry_id: message_id.clone(),
        restore,
        snapshot: None,
        leaf: store.leaf_id().map(str::to_string),
        prompt: Some(prompt_of(store, &message_id)),
        back_at: None,
        restored: Restored::default(),
    };
    if restore.files() {
        let shadow = shadow.ok_or_else(|| {
            CheckpointError::new(
                Kind::Disabled,
                "checkpoints are off for this session: its files cannot be rewound",
            )
        })?;
        let present = shadow.snapshot()?;
        if let Some((_, c)) = &checkpoint {
            let keep: Vec<String> = c.skipped.iter().map(|s| s.path.clone()).collect();
            rewound.restored = shadow.restore(&present.tree, &c.snapshot, &keep)?;
        }
        rewound.snapshot = Some(present.tree);
    }
    if restore.conversation() {
        store.set_leaf(parent.as_deref()).map_err(session_error)?;
    }
    store
        .append(rewound.to_entry(), clock)
        .map_err(session_error)?;
    Ok(rewound)
}

/// Undoes the session's last rewind (itself recorded as a rewind, so an undo can be undone).
pub fn undo(
    store: &mut Store,
    shadow: Option<&Shadow>,
    clock: &Clock,
) -> Result<Rewound, CheckpointError> {
    let last = store
        .entries()
        .iter()
        .rev()
        .find_map(Rewound::from_entry)
        .ok_or_else(|| {
            CheckpointError::new(Kind::NotFound, "this session has no rewind to undo")
        })?;
    let restore = last.restore;
    let mut undone = Rewound {
        entry_id: last.entry_id.clone(),
        restore,
        snapshot: None,
        leaf: store.leaf_id().map(str::to_string),
        prompt: Some(prompt_of(store, &last.entry_id)),
        back_at: None,
        restored: Restored::default(),
    };
    if let (true, Some(target)) = (restore.files(), &last.snapshot) {
        let shadow = shadow.ok_or_else(|| {
            CheckpointError::new(
                Kind::Disabled,
                "checkpoints are off for this session: its files cannot be restored",
            )
        })?;
        let present = shadow.snapshot()?;
        undone.restored = shadow.restore(&present.tree, target, &[])?;
        undone.snapshot = Some(present.tree);
    }
    if restore.conversation() {
        store
            .set_leaf(last.leaf.as_deref())
            .map_err(session_error)?;
    }
    undone.back_at = newest_prompt(store);
    store
        .append(undone.to_entry(), clock)
        .map_err(session_error)?;
    Ok(undone)
}

/// A user message's id, its parent's id, and its checkpoint (entry id and content).
pub(super) type Located = (String, Option<String>, Option<(String, Checkpoint)>);

/// The user message `target` names (itself, or the one checkpoint `target` names), its
/// parent, and the first checkpoint after it with that checkpoint's entry id.
pub(super) fn locate(store: &Store, target: &str) -> Result<Located, CheckpointError> {
    let not_found = || {
        CheckpointError::new(
            Kind::NotFound,
            format!("no user message or checkpoint {target:?} in this session"),
        )
    };
    let entry = store.entry(target).ok_or_else(not_found)?;
    let message_id = match (&entry.data, Checkpoint::from_entry(entry)) {
        (_, Some(c)) => c.entry_id,
        (EntryData::Message(Message::User(_)), None) => entry.id.clone(),
        _ => return Err(not_found()),
    };
    let at = store
        .entries()
        .iter()
        .position(|e| e.id == message_id)
        .ok_or_else(not_found)?;
    let parent = store.entries()[at].parent_id.clone();
    let checkpoint = store.entries()[at..]
        .iter()
        .find_map(|e| Checkpoint::from_entry(e).map(|c| (e.id.clone(), c)));
    Ok((message_id, parent, checkpoint))
}

fn session_error(e: crate::kernel::session::SessionError) -> CheckpointError {
    CheckpointError::new(Kind::Io, e.message)
}
