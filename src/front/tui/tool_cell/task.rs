//! How a `task` call (a subagent, `DESIGN.md` §17) looks: while the child runs, its current
//! step (the tool it runs, summarised) and its tool count and session; once it ended, the head
//! of its answer (or why it failed) and its usage line. Pure, like the rest of `tool_cell`.

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

use super::rows::{head, output_lines, plain_rows};
use super::{describe, dim, fg, ToolView, TEXT_HEAD};
use crate::kernel::subagent::SubagentDetails;
use crate::text;
use crate::text::count;

/// The header's summary: `explore: find the config loader`.
pub(super) fn summary(args: &serde_json::Value) -> String {
    let s = |key: &str| {
        args.get(key)
            .and_then(serde_json::Value::as_str)
            .unwrap_or("")
    };
    let kind = match s("subagent_type") {
        "" => "general",
        k => k,
    };
    format!("{kind}: {}", s("description"))
}

/// A running child: its step and how far it got.
pub(super) fn running(view: &ToolView<'_>) -> Vec<Line<'static>> {
    let details = view
        .details
        .and_then(|d| serde_json::from_value::<SubagentDetails>(d.clone()).ok());
    let Some(d) = details else {
        return vec![Line::styled("starting…", dim())];
    };
    let step = match &d.step {
        Some(step) => {
            let bold = Style::default().add_modifier(Modifier::BOLD);
            let mut spans = vec![
                Span::styled("↳ ", fg(Color::Yellow)),
                Span::styled(text::sanitize(&step.tool_name), bold),
            ];
            let what = describe(&step.tool_name, &step.args);
            if !what.is_empty() {
                spans.push(Span::raw(" "));
                spans.push(Span::styled(what, dim()));
            }
            Line::from(spans)
        }
        None => Line::styled("starting…", dim()),
    };
    let session = crate::kernel::session::short_id(&d.session_id);
    let calls = count(u64::from(d.tool_count), "tool call", "tool calls");
    vec![
        step,
        Line::styled(
            format!(
                "{calls} · session {} · Ctrl+G shows it",
                text::sanitize(session)
            ),
            dim(),
        ),
    ]
}

/// A child that ended: the head of its answer (red: why it did not finish) and its usage line
/// (the result's last line, `[explore subagent …: 3 tool calls, 1200 tokens, 2.1 s]`).
pub(super) fn done(view: &ToolView<'_>) -> Vec<Line<'static>> {
    let text = view.text.unwrap_or("").trim_end();
    let (answer, usage) = match text.rsplit_once('\n') {
        Some((answer, last)) if last.starts_with('[') => (answer.trim_end(), Some(last)),
        _ => (text, None),
    };
    let style = if view.is_error {
        fg(Color::Red)
    } else {
        Style::default()
    };
    let mut rows = head(
        plain_rows(&output_lines(answer), style),
        view.limit(TEXT_HEAD),
    );
    if let Some(usage) = usage {
        rows.push(Line::styled(text::sanitize(usage), dim()));
    }
    rows
}
