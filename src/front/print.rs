//! Print mode: stdout carries exactly the final answer (and a newline), nothing else. Progress
//! (tool calls and their results) and errors go to stderr, one line each, unless `--quiet`.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use serde_json::Value;

use super::fact::{self, Fact};
use super::{Projector, RunSummary};
use crate::exit::Exit;
use crate::kernel::event::Event;
use crate::kernel::message::{Content, Message};
use crate::output::{Output, StdoutClosed};
use crate::text;
use crate::wire::events::wire_events;
use crate::wire::events::{
    CompactionReason, ErrorKind, ShownArgs, ToolDetails, ToolResult, UiMethod,
};

/// Widest activity line, in terminal columns.
const LINE_WIDTH: usize = 120;

/// The print-mode projector.
#[derive(Debug, Default)]
pub struct PrintProjector {
    pub quiet: bool,
}

/// The stderr activity lines for one kernel event (pure): those of its wire events.
pub fn activity(event: &Event) -> Vec<String> {
    let mut lines = Vec::new();
    for w in wire_events(event) {
        let kind = w.kind();
        if let Some(fact) = serde_json::to_string(&w)
            .ok()
            .and_then(|line| fact::parse(kind, &line))
        {
            lines.extend(fact_activity(&fact));
        }
    }
    lines
}

/// The stderr activity lines for one wire fact (pure).
pub fn fact_activity(fact: &Fact) -> Vec<String> {
    let lines = match fact {
        Fact::ToolExecutionStart { tool_name, args } => {
            vec![format!("▸ {tool_name} {}", describe_args(tool_name, args))]
        }
        Fact::ToolExecutionEnd {
            tool_name,
            result,
            is_error,
        } => {
            let mark = if *is_error { "✗" } else { "✓" };
            vec![format!(
                "  {mark} {}",
                summarize(tool_name, result, *is_error)
            )]
        }
        Fact::MessageEnd {
            message: Message::Assistant(m),
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
        Fact::ExtensionUiRequest { method, title } if *method != UiMethod::Notify => {
            vec![format!("? waiting for an answer: {title}")]
        }
        Fact::AutoRetryStart {
            attempt,
            max_attempts,
            delay_ms,
            error_message,
        } => vec![format!(
            "↻ retry {attempt}/{max_attempts} in {:.1}s: {}",
            *delay_ms as f64 / 1000.0,
            first_line(error_message)
        )],
        Fact::CompactionStart { reason } => {
            vec![format!(
                "⇣ compacting the conversation ({})",
                reason_word(reason)
            )]
        }
        Fact::CompactionEnd {
            result: Some(r), ..
        } => vec![format!(
            "  ✓ compacted: ~{} → ~{} tokens",
            r.tokens_before, r.estimated_tokens_after
        )],
        Fact::CompactionEnd {
            error_message: Some(e),
            ..
        } => vec![format!("  ✗ {}", first_line(e))],
        Fact::HookFinished {
            event,
            command,
            decision,
            reason,
            messages,
        } => fact::hook_lines(
            event,
            command,
            decision.as_deref(),
            reason.as_deref(),
            messages,
        )
        .into_iter()
        .map(|l| format!("⚑ {l}"))
        .collect(),
        Fact::SandboxViolation { reason, what } => {
            let what = what.as_ref().map(|w| format!(": {w}")).unwrap_or_default();
            vec![format!("  ⊘ sandbox ({}){what}", reason.replace('_', " "))]
        }
        Fact::MessageEnd { .. }
        | Fact::ExtensionUiRequest { .. }
        | Fact::CompactionEnd { .. }
        | Fact::AgentSettled { .. } => Vec::new(),
    };
    lines
        .into_iter()
        .map(|l| text::truncate(&l, LINE_WIDTH))
        .collect()
}

fn reason_word(reason: &CompactionReason) -> &str {
    match reason {
        CompactionReason::Manual => "asked for",
        CompactionReason::Threshold => "context nearly full",
        CompactionReason::Overflow => "context overflow",
        CompactionReason::Other(other) => other,
    }
}

fn describe_args(tool: &str, args: &Value) -> String {
    let a = ShownArgs::of(args);
    let s = |f: &Option<String>| ShownArgs::str(f).to_string();
    match tool {
        "bash" => s(&a.command),
        "read" | "write" | "edit" | "ls" => s(&a.path),
        "grep" | "find" => format!("{} {}", s(&a.pattern), s(&a.path))
            .trim()
            .to_string(),
        _ => args.to_string(),
    }
}

fn first_line(t: &str) -> String {
    t.trim().lines().next().unwrap_or("").to_string()
}

fn summarize(tool: &str, result: &ToolResult, is_error: bool) -> String {
    if !is_error {
        let details = result.details_of(tool);
        match (tool, details) {
            ("bash", details) => {
                let code = match details {
                    Some(ToolDetails::Bash(b)) => b.exit_code,
                    _ => None,
                };
                let text = result.text();
                let last = text.trim().lines().last().unwrap_or("").to_string();
                return format!("exit {}: {last}", code.unwrap_or(0));
            }
            (_, Some(ToolDetails::Read(r))) => {
                return format!("lines {}-{}", r.start_line, r.end_line)
            }
            (_, Some(ToolDetails::Edit(e))) => {
                let (add, del) = diff_counts(&e.diff);
                return format!("edited (+{add} -{del})");
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
    fn every_line(&self) -> bool {
        false
    }

    fn on_line(
        &mut self,
        _line: &str,
        fact: Option<&Fact>,
        out: &mut Output,
    ) -> Result<(), StdoutClosed> {
        if let (false, Some(fact)) = (self.quiet, fact) {
            for line in fact_activity(fact) {
                out.err(&format!("{line}\n"));
            }
        }
        Ok(())
    }

    fn finish(&mut self, summary: &RunSummary, exit: Exit, _duration_ms: u64, out: &mut Output) {
        if exit == Exit::Success {
            // With an output schema, only the JSON that matched it.
            let mut text = match &summary.structured_output {
                Some(value) => value.to_string(),
                None => summary.final_text.clone(),
            };
            text.push('\n');
            // A failed write is kept by `Output`; the caller turns it into the exit (141 for a
            // closed pipe, 1 for a failing device).
            let _ = out.out(text.as_bytes()).and_then(|_| out.flush());
        } else if let Exit::Signal(crate::exit::SIGPIPE) = exit {
            // stdout went away: end quietly.
        } else if let Some((kind, message)) = summary.error(exit) {
            out.err(&format!("Error: {message}\n"));
            if kind == ErrorKind::ScriptExhausted {
                out.err("Hint: add a turn to the script whose `match` fits this prompt\n");
            }
        }
    }
}
