//! The caps on one streamed model response, and the running count that enforces them: body
//! bytes, and argument bytes per tool call. (The cap on one SSE line or event lives in the SSE
//! decoder.) A response over a cap fails with kind `stream_too_large`; nothing here allocates
//! in proportion to what the server sends.

use super::sse::{TooLarge, MAX_LINE_BYTES};
use super::ProviderEvent;

const MIB: u64 = 1024 * 1024;

/// The default cap on the body of one response: 256 MiB.
pub const MAX_RESPONSE_BYTES: u64 = 256 * MIB;

/// The default cap on the arguments of one tool call: 8 MiB.
pub const MAX_TOOL_ARGS_BYTES: u64 = 8 * MIB;

/// How much of an error response's body is read: 64 KiB (the message keeps 500 characters).
pub const MAX_ERROR_BODY_BYTES: u64 = 64 * 1024;

/// How much of a `GET /models` body is read: 32 MiB (OpenRouter's list is a few MiB).
pub const MAX_MODEL_LIST_BYTES: u64 = 32 * MIB;

/// Caps on one streamed response (docs/providers.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamLimits {
    /// Longest SSE line, and most data in one SSE event.
    pub max_line_bytes: usize,
    /// Most body bytes in one response.
    pub max_response_bytes: u64,
    /// Most argument bytes in one tool call.
    pub max_tool_args_bytes: u64,
}

impl Default for StreamLimits {
    fn default() -> Self {
        StreamLimits {
            max_line_bytes: MAX_LINE_BYTES,
            max_response_bytes: MAX_RESPONSE_BYTES,
            max_tool_args_bytes: MAX_TOOL_ARGS_BYTES,
        }
    }
}

/// What one response has used of its limits so far.
#[derive(Debug)]
pub struct Budget {
    limits: StreamLimits,
    body: u64,
    /// Open tool calls: id, name, argument bytes so far.
    calls: Vec<(String, String, u64)>,
}

impl Budget {
    pub fn new(limits: StreamLimits) -> Self {
        Budget {
            limits,
            body: 0,
            calls: Vec::new(),
        }
    }

    /// Counts `n` more body bytes; the message when the response is over its cap. (Within
    /// the provider module only: a stream's reader turns it into a `stream_too_large` error.)
    pub(super) fn body(&mut self, n: usize) -> Result<(), String> {
        self.body += n as u64;
        if self.body > self.limits.max_response_bytes {
            return Err(format!(
                "the response exceeded the cap of {} per response",
                size(self.limits.max_response_bytes)
            ));
        }
        Ok(())
    }

    /// Counts a decoded event; the message when a tool call's arguments are over their cap.
    pub(super) fn event(&mut self, ev: &ProviderEvent) -> Result<(), String> {
        match ev {
            ProviderEvent::ToolCallStart { id, name } => {
                self.calls.push((id.clone(), name.clone(), 0));
            }
            ProviderEvent::ToolCallDelta { id, delta } => {
                if let Some((_, name, used)) = self.calls.iter_mut().find(|c| c.0 == *id) {
                    *used += delta.len() as u64;
                    if *used > self.limits.max_tool_args_bytes {
                        return Err(format!(
                            "the arguments of the `{name}` tool call exceeded the cap of {}",
                            size(self.limits.max_tool_args_bytes)
                        ));
                    }
                }
            }
            ProviderEvent::ToolCallEnd { id } => self.calls.retain(|c| c.0 != *id),
            _ => {}
        }
        Ok(())
    }
}

/// The message for a line or event the SSE decoder refused.
pub fn too_large_message(e: TooLarge) -> String {
    format!(
        "the stream sent an SSE {} over the cap of {}",
        e.what,
        size(e.limit as u64)
    )
}

/// `16 MiB`, `64 KiB` or `100 bytes`.
pub fn size(n: u64) -> String {
    if n >= MIB && n.is_multiple_of(MIB) {
        format!("{} MiB", n / MIB)
    } else if n >= 1024 && n.is_multiple_of(1024) {
        format!("{} KiB", n / 1024)
    } else {
        format!("{n} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(body: u64, args: u64) -> StreamLimits {
        StreamLimits {
            max_line_bytes: 1024,
            max_response_bytes: body,
            max_tool_args_bytes: args,
        }
    }

    #[test]
    fn body_bytes_add_up_to_the_cap() {
        let mut b = Budget::new(limits(10, 100));
        assert_eq!(b.body(6), Ok(()));
        assert_eq!(b.body(4), Ok(()));
        assert_eq!(
            b.body(1),
            Err("the response exceeded the cap of 10 bytes per response".into())
        );
    }

    #[test]
    fn tool_arguments_count_per_call() {
        let mut b = Budget::new(limits(1 << 20, 8));
        let start = |id: &str, name: &str| ProviderEvent::ToolCallStart {
            id: id.into(),
            name: name.into(),
        };
        let delta = |id: &str, d: &str| ProviderEvent::ToolCallDelta {
            id: id.into(),
            delta: d.into(),
        };
        assert_eq!(b.event(&start("a", "read")), Ok(()));
        assert_eq!(b.event(&start("b", "write")), Ok(()));
        // Two interleaved calls of 8 bytes each: each is within its own cap.
        for _ in 0..4 {
            assert_eq!(b.event(&delta("a", "xx")), Ok(()));
            assert_eq!(b.event(&delta("b", "yy")), Ok(()));
        }
        assert_eq!(
            b.event(&delta("b", "y")),
            Err("the arguments of the `write` tool call exceeded the cap of 8 bytes".into())
        );
        // An ended call is forgotten; text does not count.
        assert_eq!(
            b.event(&ProviderEvent::ToolCallEnd { id: "a".into() }),
            Ok(())
        );
        assert_eq!(b.event(&delta("a", "zzzzzzzzzz")), Ok(()));
        assert_eq!(b.event(&ProviderEvent::Text("t".repeat(100))), Ok(()));
    }

    #[test]
    fn sizes_read_naturally() {
        assert_eq!(size(16 * MIB), "16 MiB");
        assert_eq!(size(64 * 1024), "64 KiB");
        assert_eq!(size(1000), "1000 bytes");
        assert_eq!(size(MIB + 1), "1048577 bytes");
        assert_eq!(
            too_large_message(TooLarge {
                what: "line",
                limit: MAX_LINE_BYTES
            }),
            "the stream sent an SSE line over the cap of 16 MiB"
        );
    }
}
