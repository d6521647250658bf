//! The closed word sets of the event vocabulary (`outcome`, the dialog `method`, error kinds,
//! …): each declared once, as an enum with its exact wire word, read back tolerantly (a word
//! this keel does not know, from a newer peer, is kept as `Other` and written back unchanged).

/// Declares a word enum: unit variants with their exact wire words, plus `Other(String)` for a
/// word this keel does not know. Serialized as the word; read back from any string.
macro_rules! words {
    ($(#[$meta:meta])* pub enum $name:ident { $($(#[$vmeta:meta])* $var:ident = $word:literal,)* }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vmeta])* $var,)*
            /// A word this keel does not know (a newer peer's), kept as it was written.
            Other(String),
        }

        impl $name {
            /// Every word this keel knows, in declaration order.
            pub const KNOWN: &'static [$name] = &[$($name::$var),*];

            /// The wire word.
            pub fn as_str(&self) -> &str {
                match self {
                    $($name::$var => $word,)*
                    $name::Other(word) => word,
                }
            }
        }

        impl From<&str> for $name {
            fn from(word: &str) -> Self {
                match word {
                    $($word => $name::$var,)*
                    _ => $name::Other(word.to_string()),
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                d.deserialize_str(WordVisitor(std::marker::PhantomData))
            }
        }
    };
}

/// Reads a word enum from a JSON string without allocating for the words it knows.
struct WordVisitor<T>(std::marker::PhantomData<T>);

impl<T: for<'w> From<&'w str>> serde::de::Visitor<'_> for WordVisitor<T> {
    type Value = T;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a string")
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<T, E> {
        Ok(T::from(v))
    }
}

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

words! {
    /// The stable machine-readable kind of a run's error (`agent_settled`'s `error.kind`, the
    /// JSON `result` line's `error.kind`).
    pub enum ErrorKind {
        /// A provider error keel has no better word for.
        ProviderError = "provider_error",
        ProviderHttp = "provider_http",
        Overloaded = "overloaded",
        RateLimited = "rate_limited",
        ServerError = "server_error",
        Timeout = "timeout",
        Auth = "auth",
        Quota = "quota",
        ContextOverflow = "context_overflow",
        BadRequest = "bad_request",
        /// The model's answer was cut at its output limit.
        Length = "length",
        /// The model refused to answer.
        Refusal = "refusal",
        /// The model repeated the same failing tool call.
        ToolLoop = "tool_loop",
        /// The scripted provider ran out of turns.
        ScriptExhausted = "script_exhausted",
        TurnLimit = "turn_limit",
        Blocked = "blocked",
        Aborted = "aborted",
        Interrupted = "interrupted",
        OutputWrite = "output_write",
        /// The session could not be saved.
        SessionWrite = "session_write",
        NotConfigured = "not_configured",
        /// The daemon went away before the run ended.
        DaemonLost = "daemon_lost",
        /// The session was running another prompt.
        Busy = "busy",
        /// The final answer did not match `--output-schema`, even after one correction.
        SchemaMismatch = "schema_mismatch",
        /// The run cost more than `--max-cost`.
        Budget = "budget",
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
