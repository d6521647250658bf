//! How a finished `exit_plan_mode` call looks (`DESIGN.md` §17): the plan the user was asked
//! to approve, rendered as Markdown under the header and kept whole (it is what the run goes
//! on to carry out), then the answer the model got (approved, or kept planning). The approval
//! dialog renders the plan with [`markdown_rows`] too. Pure, like the rest of `tool_cell`.

use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use serde_json::Value;

use super::{dim, fg, fit, header, ToolView, FIRST_PREFIX, REST_PREFIX};
use crate::front::tui::markdown;
use crate::text;
use crate::wire::events::ShownArgs;

/// The tool whose calls carry a plan.
pub const PLAN: &str = "exit_plan_mode";

/// The plan's rows at `width` columns: its Markdown rendered (headings, lists, code), each row
/// at most `width` wide. None when the arguments hold no plan.
pub fn markdown_rows(args: &Value, width: usize) -> Vec<Line<'static>> {
    let shown = ShownArgs::of(args);
    let plan = ShownArgs::str(&shown.plan);
    // Rendered as an answer is (the renderer makes control characters harmless).
    markdown::render(plan.trim())
        .iter()
        .flat_map(|l| l.rows(width.max(1)))
        .collect()
}

/// The header's summary: the plan's first line as text (no `#`, `**` or backticks), with ` …`
/// when more follows.
pub(super) fn title(plan: &str) -> String {
    let mut lines = plan.trim().lines();
    let first = lines.next().unwrap_or("").trim_start_matches('#').trim();
    let first: String = first.chars().filter(|c| !matches!(c, '*' | '`')).collect();
    match lines.next().is_some() {
        true => format!("{first} …"),
        false => first,
    }
}

/// A finished call's lines: the header, the plan, the answer (`None`: no plan to show, the
/// generic cell is drawn).
pub(super) fn done(view: &ToolView<'_>, width: usize) -> Option<Vec<Line<'static>>> {
    let content = width.saturating_sub(text::width(FIRST_PREFIX)).max(1);
    let plan = markdown_rows(view.args, content);
    if plan.is_empty() {
        return None;
    }
    let answer = view.text.unwrap_or("").lines().next().unwrap_or("").trim();
    let style = match view.is_error {
        true => fg(Color::Red),
        false => dim(),
    };
    let answer = (!answer.is_empty()).then(|| Line::styled(text::sanitize(answer), style));
    let mut out = vec![header(view, width)];
    let body = plan.into_iter().chain(answer.iter().flat_map(|a| {
        // A blank row between the plan and what became of it.
        [Line::default()]
            .into_iter()
            .chain(crate::front::tui::paint::wrap_line(a, content, 0))
    }));
    for (i, row) in body.enumerate() {
        let prefix = match i {
            0 => Span::styled(FIRST_PREFIX, dim()),
            _ => Span::raw(REST_PREFIX),
        };
        let mut spans = vec![prefix];
        spans.extend(row.spans);
        out.push(fit(&Line::from(spans).style(Style::default()), width));
    }
    Some(out)
}
