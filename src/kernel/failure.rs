//! The kinds of failure a run reports (`RunOutcome::Failed`, a provider's `Error` event, the
//! wire's `error.kind`): one enum, declared here because the kernel decides them; the wire
//! re-exports it as its `ErrorKind`. Also which kinds are transient (worth a retry). Pure data.

use crate::kernel::words::words;

words! {
    /// The stable machine-readable kind of a run's error (`agent_settled`'s `error.kind`, the
    /// JSON `result` line's `error.kind`, a provider's failed stream). Written as its word
    /// (`"rate_limited"`); a word this keel does not know, from an older or newer peer or a
    /// scripted provider's file, reads as `Other(word)` and is written back unchanged, never
    /// retried and never taken for a context overflow.
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
        /// No response, or the connection closed before any output.
        Connection = "connection",
        /// No progress on the stream for the idle timeout.
        IdleTimeout = "idle_timeout",
        /// The stream was cut after output arrived.
        StreamCut = "stream_cut",
        /// A line, the response or a tool call's arguments went over its cap.
        StreamTooLarge = "stream_too_large",
        /// The provider sent something keel cannot read (a malformed event, a call without a
        /// name, …).
        BadResponse = "bad_response",
        /// The provider's safety filter stopped the answer.
        ContentFilter = "content_filter",
        /// The provider ended the answer early without saying it was complete.
        Incomplete = "incomplete",
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

impl ErrorKind {
    /// Whether a failure of this kind is transient: worth retrying when it happens before any
    /// output (rate limits, overload, server errors, connection failures and timeouts).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            ErrorKind::RateLimited
                | ErrorKind::Overloaded
                | ErrorKind::ServerError
                | ErrorKind::Connection
                | ErrorKind::IdleTimeout
                | ErrorKind::Timeout
        )
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn kinds_read_back_as_written_and_unknown_kinds_are_kept() {
        for k in ErrorKind::KNOWN {
            let text = serde_json::to_string(k).unwrap();
            assert_eq!(&serde_json::from_str::<ErrorKind>(&text).unwrap(), k);
        }
        let newer: ErrorKind = serde_json::from_str("\"gpu_on_fire\"").unwrap();
        assert_eq!(newer, ErrorKind::Other("gpu_on_fire".into()));
        assert_eq!(serde_json::to_string(&newer).unwrap(), "\"gpu_on_fire\"");
        assert!(!newer.is_retryable());
        assert!(ErrorKind::from("idle_timeout").is_retryable());
        assert!(!ErrorKind::StreamCut.is_retryable());
    }
}
