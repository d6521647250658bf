//! The closed word sets of the event vocabulary (`outcome`, the dialog `method`, error kinds,
//! …): each declared once, as an enum with its exact wire word, read back tolerantly (a word
//! this keel does not know, from a newer peer, is kept as `Other` and written back unchanged).

/// The kinds of a run's error: declared in the kernel, which decides them.
pub use crate::kernel::failure::ErrorKind;
use crate::kernel::words::words;

words! {
    /// How a run settled (`agent_settled`'s `outcome`).
    pub enum Outcome {
        /// The model finished without error.
        Completed = "completed",
        /// The provider or model failed; `error` says why.
        Failed = "failed",
        /// `--max-turns` was reached while the model still wanted to continue.
        TurnLimit = "turn_limit",
        /// A tool call needed an approval nobody could give.
        Blocked = "blocked",
        /// The run was aborted (abort request, signal).
        Aborted = "aborted",
        /// The run cost more than `--max-cost` before its next model call.
        Budget = "budget",
    }
}

words! {
    /// What an `extension_ui_request` asks of the client (pi's dialog methods). keel sends
    /// `confirm` (an approval, answered by `extension_ui_response`) and `notify` (a message,
    /// no answer).
    pub enum UiMethod {
        Confirm = "confirm",
        Notify = "notify",
        Select = "select",
        Input = "input",
        Editor = "editor",
    }
}

words! {
    /// The level of a `notify` dialog (`notifyType`).
    pub enum NotifyType {
        Info = "info",
        Warning = "warning",
        Error = "error",
    }
}

words! {
    /// Why a compaction ran (`compaction_start`/`compaction_end`'s `reason`).
    pub enum CompactionReason {
        /// Asked for (RPC `compact`, TUI `/compact`).
        Manual = "manual",
        /// The context grew past the threshold before a model call.
        Threshold = "threshold",
        /// The provider rejected the request as too long.
        Overflow = "overflow",
    }
}

impl From<crate::kernel::event::CompactionReason> for CompactionReason {
    fn from(r: crate::kernel::event::CompactionReason) -> Self {
        use crate::kernel::event::CompactionReason as K;
        match r {
            K::Manual => CompactionReason::Manual,
            K::Threshold => CompactionReason::Threshold,
            K::Overflow => CompactionReason::Overflow,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn known_and_unknown_words_read_back_as_written() {
        for o in Outcome::KNOWN {
            let text = serde_json::to_string(o).unwrap();
            assert_eq!(&serde_json::from_str::<Outcome>(&text).unwrap(), o);
        }
        let newer: UiMethod = serde_json::from_str("\"setWidget\"").unwrap();
        assert_eq!(newer, UiMethod::Other("setWidget".into()));
        assert_eq!(serde_json::to_string(&newer).unwrap(), "\"setWidget\"");
        assert_eq!(ErrorKind::from("tool_loop"), ErrorKind::ToolLoop);
        assert!(serde_json::from_str::<NotifyType>("3").is_err());
    }
}
