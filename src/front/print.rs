//! Print mode: stdout carries exactly the final answer (and a newline), nothing else. Progress
//! (tool calls and their results) and errors go to stderr, one line each, unless `--quiet`.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use serde_json::Value;

use super::{Projector, RunSummary};
use crate::exit::Exit;
use crate::kernel::event::{CompactionReason, Event, EventPayload};
use crate::kernel::message::{Content, Message};
use crate::output::{Output, StdoutClosed};
use crate::text;

/// Widest activity line, in terminal columns.
const LINE_WIDTH: usize = 120;

/// The print-mode projector.
#[derive(Debug, Default)]
pub struct PrintProjector {
    pub quiet: bool,
}

/// The stderr activity lines for one event (pure).
pub fn activity(event: &Event) -> Vec<String> {
    let lines = match &event.payload {
        EventPayload::ToolCallStarted {
            tool_name, args, ..
        } => vec![format!("▸ {tool_name} {}", describe_args(tool_name, args))],
        EventPayload::ToolCallFinished {
            tool_name, result, ..
        } => {
            let mark = if result.is_error { "✗" } else { "✓" };
            vec![format!("  {mark} {}", summarize(tool_name, result))]
        }
        EventPayload::MessageFinished {
            message: Message::Assistant(m),
            ..
        } if !m.tool_calls().is_empty() => m
            .content
            .iter()
            .filter_map(|c| match c {
                Content::Text { text } if !text.trim().is_empty() => {
                    Some(format!("· {}", first_line(text)))
                }
                _ => None,
            })
            .collect(),
        EventPayload::ApprovalRequested { tool_name, .. } => {
            vec![format!("? {tool_name} waits for approval")]
        }
        EventPayload::RetryScheduled {
            attempt,
            max_attempts,
            delay_ms,
            error_message,
        } => vec![format!(
            "↻ retry {attempt}/{max_attempts} in {:.1}s: {}",
            *delay_ms as f64 / 1000.0,
            first_line(error_message)
        )],
        EventPayload::CompactionStarted { reason } => {
            vec![format!(
                "⇣ compacting the conversation ({})",
                reason_word(*reason)
            )]
        }
        EventPayload::CompactionFinished {
            result: Some(r), ..
        } => vec![format!(
            "  ✓ compacted: ~{} → ~{} tokens",
            r.tokens_before, r.estimated_tokens_after
        )],
        EventPayload::CompactionFinished {
            error_message: Some(e),
            ..
        } => vec![format!("  ✗ {}", first_line(e))],
        EventPayload::ModelChanged { .. }
        | EventPayload::ThinkingLevelChanged { .. }
        | EventPayload::BashExecuted { .. }
        | EventPayload::SessionNamed { .. }
        | EventPayload::AgentStarted
        | EventPayload::AgentFinished { .. }
        | EventPayload::AgentSettled { .. }
        | EventPayload::TurnStarted
        | EventPayload::TurnFinished { .. }
        | EventPayload::MessageStarted { .. }
        | EventPayload::MessageDelta { .. }
        | EventPayload::MessageFinished { .. }
        | EventPayload::ToolCallUpdated { .. }
        | EventPayload::QueueChanged { .. }
        | EventPayload::RetryFinished { .. }
        | EventPayload::CompactionFinished { .. } => Vec::new(),
    };
    lines
        .into_iter()
        .map(|l| text::truncate(&l, LINE_WIDTH))
        .collect()
}

fn reason_word(r: CompactionReason) -> &'static str {
    match r {
        CompactionReason::Manual => "asked for",
        CompactionReason::Threshold => "context nearly full",
        CompactionReason::Overflow => "context overflow",
    }
}

fn describe_args(tool: &str, args: &Value) -> String {
    let s = |k: &str| {
        args.get(k)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    match tool {
        "bash" => s("command"),
        "read" | "write" | "edit" | "ls" => s("path"),
        "grep" | "find" => format!("{} {}", s("pattern"), s("path")).trim().to_string(),
        _ => args.to_string(),
    }
}

fn first_line(t: &str) -> String {
    t.trim().lines().next().unwrap_or("").to_string()
}

fn summarize(tool: &str, result: &crate::kernel::tool::ToolOutput) -> String {
    let d = result.details.as_ref();
    let num = |k: &str| d.and_then(|d| d.get(k)).and_then(Value::as_i64);
    if !result.is_error {
        match tool {
            "bash" => {
                let text = result.text();
                let last = text.trim().lines().last().unwrap_or("").to_string();
                return format!("exit {}: {last}", num("exitCode").unwrap_or(0));
            }
            "read" => {
                if let (Some(a), Some(b)) = (num("startLine"), num("endLine")) {
                    return format!("lines {a}-{b}");
                }
            }
            "edit" => {
                if let Some(diff) = d.and_then(|d| d.get("diff")).and_then(Value::as_str) {
                    let (add, del) = diff_counts(diff);
                    return format!("edited (+{add} -{del})");
                }
            }
            _ => {}
        }
    }
    first_line(&result.text())
}

fn diff_counts(diff: &str) -> (usize, usize) {
    let mut add = 0;
    let mut del = 0;
    for l in diff.lines() {
        if l.starts_with('+') && !l.starts_with("+++") {
            add += 1;
        } else if l.starts_with('-') && !l.starts_with("---") {
            del += 1;
        }
    }
    (add, del)
}

impl Projector for PrintProjector {
    fn on_event(&mut self, event: &Event, out: &mut Output) -> Result<(), StdoutClosed> {
        if !self.quiet {
            for line in activity(event) {
                out.err(&format!("{line}\n"));
            }
        }
        Ok(())
    }

    fn finish(&mut self, summary: &RunSummary, exit: Exit, _duration_ms: u64, out: &mut Output) {
        if exit == Exit::Success {
            let mut text = summary.final_text.clone();
            text.push('\n');
            // A failed write is kept by `Output`; the caller turns it into the exit (141 for a
            // closed pipe, 1 for a failing device).
            let _ = out.out(text.as_bytes()).and_then(|_| out.flush());
        } else if let Exit::Signal(crate::exit::SIGPIPE) = exit {
            // stdout went away: end quietly.
        } else if let Some((kind, message)) = summary.error(exit) {
            out.err(&format!("Error: {message}\n"));
            if kind == "script_exhausted" {
                out.err("Hint: add a turn to the script whose `match` fits this prompt\n");
            }
        }
    }
}
