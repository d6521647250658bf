//! Checkpoints and rewinds as session entries: pi `custom` entries (`customType`
//! `keel.checkpoint` / `keel.rewind`, the payload in `data`), which pi skips and keel reads
//! back through typed structs.

use serde::{Deserialize, Serialize};

use super::{Restored, Skipped};
use crate::kernel::session::{Entry, EntryData};

/// The `customType` of a checkpoint entry.
pub const CHECKPOINT_TYPE: &str = "keel.checkpoint";
/// The `customType` of a rewind entry.
pub const REWIND_TYPE: &str = "keel.rewind";

/// A snapshot of the workspace taken before the changes that followed a user message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Checkpoint {
    /// The user message entry whose changes this checkpoint precedes.
    pub entry_id: String,
    /// The snapshot (a tree id of the shadow repository).
    pub snapshot: String,
    /// Files changed since this session's previous checkpoint.
    pub files: Vec<String>,
    /// Files the caps left out of the snapshot.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<Skipped>,
}

/// A rewind: what was restored, and how to undo it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rewound {
    /// The user message rewound to (the state before it).
    pub entry_id: String,
    /// What it restored (`both`, `conversation` or `files` on the wire and in the entry).
    #[serde(default)]
    pub restore: super::Restore,
    /// The snapshot of the files taken just before the rewind (what an undo restores).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<String>,
    /// The conversation leaf before the rewind (where an undo goes back to).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leaf: Option<String>,
    /// The first line of the user message `entry_id` (the prompt rewound to).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// An undo's: the first line of the newest prompt on the branch the session is back on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub back_at: Option<String>,
    /// The files the rewind wrote and removed.
    #[serde(flatten)]
    pub restored: Restored,
}

fn read<T: serde::de::DeserializeOwned>(entry: &Entry, kind: &str) -> Option<T> {
    entry.custom(kind)
}

fn write<T: Serialize>(kind: &str, data: &T) -> EntryData {
    EntryData::custom(kind, data)
}

impl Checkpoint {
    /// The session entry.
    pub fn to_entry(&self) -> EntryData {
        write(CHECKPOINT_TYPE, self)
    }

    /// The checkpoint an entry holds, if it is one.
    pub fn from_entry(entry: &Entry) -> Option<Checkpoint> {
        read(entry, CHECKPOINT_TYPE)
    }
}

impl Rewound {
    /// The session entry.
    pub fn to_entry(&self) -> EntryData {
        write(REWIND_TYPE, self)
    }

    /// The rewind an entry holds, if it is one.
    pub fn from_entry(entry: &Entry) -> Option<Rewound> {
        read(entry, REWIND_TYPE)
    }
}
