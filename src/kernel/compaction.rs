//! Context compaction: when the conversation nears the model's context window (or the provider
//! rejects it as too long, or a front end asks), the older part is summarised through the model
//! and replaced by that summary; recent messages stay verbatim. The session records a pi
//! `compaction` entry, so reloading the file rebuilds the same context.

use crate::kernel::abort::AbortSignal;
use crate::kernel::agent::Inner;
use crate::kernel::event::{CompactionReason, CompactionResult, EventPayload};
use crate::kernel::hooks::HookEvent;
use crate::kernel::message::{Content, Message, StopReason, Usage};
use crate::kernel::provider::{ModelRequest, ProviderEvent};
use crate::kernel::session::compaction_text;
use crate::kernel::turn::hooked;

/// When to compact and how much to keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactionPolicy {
    /// Compact automatically (threshold and overflow). Manual compaction works regardless.
    pub enabled: bool,
    /// Tokens kept free for the answer: compaction starts when the context exceeds
    /// `window - reserve` (reserve is capped at a quarter of the window).
    pub reserve_tokens: u64,
    /// Roughly how many tokens of recent messages stay verbatim (capped at a quarter of the
    /// window).
    pub keep_recent_tokens: u64,
}

impl Default for CompactionPolicy {
    fn default() -> Self {
        CompactionPolicy {
            enabled: true,
            reserve_tokens: 16_384,
            keep_recent_tokens: 20_000,
        }
    }
}

/// Estimated tokens of one message: about four characters per token, images at a flat rate.
pub fn estimate_tokens(m: &Message) -> u64 {
    let blocks = |content: &[Content]| -> u64 {
        content
            .iter()
            .map(|c| match c {
                Content::Text { text } => text.len() as u64,
                Content::Thinking { thinking, .. } => thinking.len() as u64,
                Content::ToolCall {
                    name, arguments, ..
                } => (name.len() + arguments.to_string().len()) as u64,
                Content::Image { .. } => 4_800,
            })
            .sum()
    };
    let chars = match m {
        Message::User(u) => blocks(&u.content),
        Message::Assistant(a) => blocks(&a.content),
        Message::ToolResult(r) => blocks(&r.content),
    };
    chars.div_ceil(4)
}

/// The context size: the last successful call's reported usage plus estimates for the
/// messages after it (or estimates for everything when no call reported usage).
pub fn context_tokens(messages: &[Message]) -> u64 {
    let last = messages.iter().rposition(|m| match m {
        Message::Assistant(a) => a.usage.total_tokens > 0 && !a.is_failed(),
        _ => false,
    });
    match last {
        Some(i) => {
            let Message::Assistant(a) = &messages[i] else {
                return 0;
            };
            let u = &a.usage;
            u.input
                + u.output
                + u.cache_read
                + u.cache_write
                + messages[i + 1..].iter().map(estimate_tokens).sum::<u64>()
        }
        None => messages.iter().map(estimate_tokens).sum(),
    }
}

impl CompactionPolicy {
    /// The context size above which a threshold compaction runs.
    pub fn threshold(&self, window: u64) -> u64 {
        window.saturating_sub(self.reserve_tokens.min(window / 4))
    }

    fn keep(&self, window: u64) -> u64 {
        self.keep_recent_tokens.min(window / 4).max(1)
    }
}

/// Where to cut: messages before the index are summarised. The cut keeps at least `keep`
/// estimated tokens of recent messages where possible, never separates a tool result from
/// the call before it (it lands on a user or assistant message), and always summarises
/// something. `None` when there is nothing to summarise.
pub fn find_cut(messages: &[Message], keep: u64) -> Option<usize> {
    let valid = |i: usize| {
        i > 0
            && match &messages[i] {
                Message::ToolResult(_) => false,
                Message::Assistant(a) => !a.is_failed(),
                Message::User(_) => true,
            }
    };
    let mut acc = 0;
    for i in (0..messages.len()).rev() {
        acc += estimate_tokens(&messages[i]);
        if acc >= keep {
            return (1..=i).rev().find(|&c| valid(c));
        }
    }
    // Everything fits in the recent window: keep only from the last possible cut.
    (1..messages.len()).rev().find(|&c| valid(c))
}

const SUMMARY_SYSTEM: &str = "You are a context summarization assistant. You read a \
conversation between a user and an AI coding agent and write a structured summary that lets \
the agent continue the work without the original messages. Do not continue the conversation \
and do not answer questions in it; only summarise.";

const SUMMARY_INSTRUCTIONS: &str = "Summarise the conversation above for the agent that will \
continue it. Use these sections:\n\
## Goal\nWhat the user wants.\n\
## Progress\nWhat has been done, with the files read or changed and commands run.\n\
## Key facts\nDecisions, constraints, errors seen and their causes, exact names and paths.\n\
## Next steps\nWhat remains, in order.\n\
Be concise and exact; keep code identifiers and paths verbatim.";

/// Longest tool output quoted into the summarisation request.
const MAX_TOOL_TEXT: usize = 2_000;

/// The older messages as one plain-text transcript for the summariser.
pub fn transcript(messages: &[Message]) -> String {
    let mut out = String::new();
    let text_of = |content: &[Content]| -> String {
        let mut s = String::new();
        for c in content {
            match c {
                Content::Text { text } => s.push_str(text),
                Content::Image { .. } => s.push_str("[image]"),
                _ => continue,
            }
            s.push('\n');
        }
        s
    };
    for m in messages {
        match m {
            Message::User(u) => {
                out.push_str("[User]: ");
                out.push_str(text_of(&u.content).trim_end());
            }
            Message::Assistant(a) => {
                if a.is_failed() && a.content.is_empty() {
                    continue;
                }
                out.push_str("[Assistant]: ");
                out.push_str(text_of(&a.content).trim_end());
                for (_, name, args) in a.tool_calls() {
                    out.push_str(&format!("\n[Assistant tool call]: {name}({args})"));
                }
            }
            Message::ToolResult(r) => {
                let text = text_of(&r.content);
                let mut cut = text.len().min(MAX_TOOL_TEXT);
                while !text.is_char_boundary(cut) {
                    cut -= 1;
                }
                let status = if r.is_error { " (error)" } else { "" };
                out.push_str(&format!("[Tool result {}{status}]: ", r.tool_name));
                out.push_str(text[..cut].trim_end());
                if cut < text.len() {
                    out.push_str(" [...]");
                }
            }
        }
        out.push_str("\n\n");
    }
    out
}

/// Why a compaction did not happen.
#[derive(Debug, Clone, PartialEq)]
pub enum CompactError {
    /// The conversation has nothing that could be summarised.
    NothingToCompact,
    /// The summarisation call failed.
    Failed(String),
    Aborted,
    /// A `PreCompact` hook blocked it, for this reason.
    Blocked(String),
}

impl std::fmt::Display for CompactError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CompactError::NothingToCompact => f.write_str("Nothing to compact (session too small)"),
            CompactError::Failed(m) => write!(f, "Compaction failed: {m}"),
            CompactError::Aborted => f.write_str("Compaction was aborted"),
            CompactError::Blocked(why) => write!(f, "Compaction was blocked by a hook: {why}"),
        }
    }
}

/// Compacts the conversation in place and publishes `CompactionStarted`/`Finished`.
/// `will_retry` is reported on the finish event (the caller repeats a failed call).
pub(crate) async fn compact(
    inner: &Inner,
    reason: CompactionReason,
    instructions: Option<&str>,
    will_retry: bool,
    abort: &AbortSignal,
) -> Result<CompactionResult, CompactError> {
    inner
        .bus
        .publish(EventPayload::CompactionStarted { reason });
    inner.lock().compacting = true;
    let trigger = match reason {
        CompactionReason::Manual => "manual",
        _ => "auto",
    };
    let fields =
        serde_json::json!({"trigger": trigger, "custom_instructions": instructions.unwrap_or("")});
    let pre = hooked::fire(inner, HookEvent::PreCompact, &[trigger], fields, abort).await;
    let outcome = match pre.blocked {
        Some(why) => Err(CompactError::Blocked(why)),
        None => summarise(inner, instructions, abort).await,
    };
    inner.lock().compacting = false;
    if let Ok(r) = &outcome {
        inner.lock().session_start = Some("compact");
        let fields = serde_json::json!({"trigger": trigger, "compact_summary": r.summary});
        hooked::fire(inner, HookEvent::PostCompact, &[trigger], fields, abort).await;
    }
    let (result, error) = match &outcome {
        Ok(r) => (Some(r.clone()), None),
        Err(e) => (None, Some(e.to_string())),
    };
    inner.bus.publish(EventPayload::CompactionFinished {
        reason,
        result,
        aborted: matches!(outcome, Err(CompactError::Aborted)),
        will_retry: will_retry && outcome.is_ok(),
        error_message: error,
    });
    outcome
}

async fn summarise(
    inner: &Inner,
    instructions: Option<&str>,
    abort: &AbortSignal,
) -> Result<CompactionResult, CompactError> {
    let provider = inner.run_provider();
    let window = provider.info().context_window;
    let (messages, ids) = {
        let state = inner.lock();
        (state.messages.clone(), state.ids.clone())
    };
    let tokens_before = context_tokens(&messages);
    let cut = find_cut(&messages, inner.config.compaction.keep(window))
        .ok_or(CompactError::NothingToCompact)?;
    let mut prompt = transcript(&messages[..cut]);
    prompt.push_str(SUMMARY_INSTRUCTIONS);
    if let Some(extra) = instructions.filter(|s| !s.trim().is_empty()) {
        prompt.push_str("\n\nAdditional instructions: ");
        prompt.push_str(extra);
    }
    let request = ModelRequest {
        system_prompt: SUMMARY_SYSTEM.to_string(),
        messages: vec![Message::user(prompt, inner.clock.now_ms())],
        tools: Vec::new(),
        thinking_level: "off".into(),
        session_id: inner.config.session_id.clone(),
        output_schema: None,
    };
    let mut rx = provider.stream(request, abort.clone());
    let mut summary = String::new();
    let mut usage = Usage::default();
    loop {
        let ev = tokio::select! {
            biased;
            _ = abort.aborted() => return Err(CompactError::Aborted),
            ev = rx.recv() => ev,
        };
        match ev {
            Some(ProviderEvent::Text(t)) => summary.push_str(&t),
            Some(ProviderEvent::Usage(u)) => usage = u,
            Some(ProviderEvent::Done {
                stop: StopReason::Length,
            }) => {
                return Err(CompactError::Failed(
                    "the summary was cut off at the output token limit".into(),
                ))
            }
            Some(ProviderEvent::Done { .. }) => break,
            Some(ProviderEvent::Error { message, .. }) => {
                return Err(CompactError::Failed(message))
            }
            Some(_) => {}
            None if abort.is_aborted() => return Err(CompactError::Aborted),
            None => {
                return Err(CompactError::Failed(
                    "the provider stream ended without a stop reason".into(),
                ))
            }
        }
    }
    let summary = summary.trim().to_string();
    if summary.is_empty() {
        return Err(CompactError::Failed(
            "the model returned an empty summary".into(),
        ));
    }
    let timestamp = inner.clock.now_ms();
    let entry_id = inner.clock.entry_id();
    let summary_message = Message::user(compaction_text(&summary), timestamp);
    let result = {
        let mut state = inner.lock();
        // The conversation cannot change under a compaction (it runs between model calls or
        // while idle), but check rather than splice the wrong messages.
        if state.ids.get(cut) != ids.get(cut) || state.messages.len() < cut {
            return Err(CompactError::Failed(
                "the conversation changed during compaction".into(),
            ));
        }
        let first_kept_entry_id = state.ids[cut].clone();
        state.messages.splice(..cut, [summary_message]);
        state.ids.splice(..cut, [entry_id.clone()]);
        CompactionResult {
            summary,
            first_kept_entry_id,
            tokens_before,
            estimated_tokens_after: state.messages.iter().map(estimate_tokens).sum(),
            usage,
            entry_id,
            timestamp,
        }
    };
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::message::{AssistantMessage, ToolResultMessage};

    fn user(n: usize) -> Message {
        Message::user("u".repeat(n), 0)
    }

    fn assistant_calling(n: usize) -> Message {
        Message::from(AssistantMessage {
            content: vec![
                Content::text("a".repeat(n)),
                Content::ToolCall {
                    id: "c".into(),
                    name: "read".into(),
                    arguments: serde_json::json!({}),
                },
            ],
            api: String::new(),
            provider: String::new(),
            model: String::new(),
            usage: Usage::default(),
            stop_reason: StopReason::ToolUse,
            error_message: None,
            duration_ms: None,
            timestamp: 0,
        })
    }

    fn result(n: usize) -> Message {
        Message::from(ToolResultMessage {
            tool_call_id: "c".into(),
            tool_name: "read".into(),
            content: vec![Content::text("r".repeat(n))],
            details: None,
            is_error: false,
            duration_ms: None,
            timestamp: 0,
        })
    }

    #[test]
    fn cuts_keep_recent_tokens_and_never_orphan_a_tool_result() {
        // 400 chars = 100 tokens each.
        let m = vec![
            user(400),
            assistant_calling(400),
            result(400),
            user(400),
            assistant_calling(400),
            result(4000),
        ];
        // Keeping 1000 tokens reaches back to the last tool result alone: the cut moves to
        // the assistant call before it.
        assert_eq!(find_cut(&m, 1000), Some(4));
        // Keeping 1150 tokens reaches the user message at 3.
        assert_eq!(find_cut(&m, 1150), Some(3));
        // Keeping more than everything still summarises the oldest part.
        assert_eq!(find_cut(&m, 1_000_000), Some(4));
        assert_eq!(find_cut(&m[..1], 10), None);
        assert_eq!(find_cut(&[user(4), result(4)], 1), None);
    }

    #[test]
    fn context_tokens_use_reported_usage_then_estimates() {
        let mut a = assistant_calling(40);
        if let Message::Assistant(a) = &mut a {
            let a = std::sync::Arc::make_mut(a);
            a.usage.input = 900;
            a.usage.output = 100;
            a.usage.total_tokens = 1000;
        }
        let m = vec![user(400), a, result(400)];
        assert_eq!(context_tokens(&m), 1000 + 100);
        assert_eq!(context_tokens(&m[..1]), 100);
        let p = CompactionPolicy::default();
        assert_eq!(p.threshold(200_000), 200_000 - 16_384);
        assert_eq!(p.threshold(4_000), 3_000);
    }

    #[test]
    fn transcript_quotes_roles_calls_and_capped_results() {
        let t = transcript(&[user(3), assistant_calling(2), result(3000)]);
        assert!(t.starts_with("[User]: uuu\n\n[Assistant]: aa\n[Assistant tool call]: read({})"));
        assert!(t.contains("[Tool result read]: "));
        assert!(t.trim_end().ends_with("[...]"));
        assert!(t.len() < 2_200);
    }
}
