//! The task list above the editor (`todo_write`, `DESIGN.md` §17): one row per item, the item
//! in progress highlighted with its `activeForm`, done items struck through; hidden once every
//! item is done. Pure: rows from the list.

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

use crate::front::tui::paint;
use crate::kernel::tool::todo::{TodoItem, TodoStatus};

/// Items shown at most; the rest are counted.
const MAX_ITEMS: usize = 8;

/// The list's rows at width `w` (none while it is empty or all done).
pub(super) fn rows(todos: &[TodoItem], w: usize) -> Vec<Line<'static>> {
    let done = todos
        .iter()
        .filter(|t| t.status == TodoStatus::Completed)
        .count();
    if todos.is_empty() || done == todos.len() {
        return Vec::new();
    }
    let dim = Style::default().add_modifier(Modifier::DIM);
    let mut out = vec![Line::styled(
        format!("  Todos ({done}/{} done)", todos.len()),
        dim,
    )];
    for t in todos.iter().take(MAX_ITEMS) {
        let (mark, text, style) = match t.status {
            TodoStatus::Pending => ("☐", t.content.clone(), Style::default()),
            TodoStatus::InProgress => (
                "▶",
                format!("{}…", t.active_form.trim_end_matches('…')),
                Style::default()
                    .fg(Color::Yellow)
                    .add_modifier(Modifier::BOLD),
            ),
            TodoStatus::Completed => (
                "☒",
                t.content.clone(),
                dim.add_modifier(Modifier::CROSSED_OUT),
            ),
        };
        let line = Line::from(vec![
            Span::styled(format!("  {mark} "), style),
            Span::styled(crate::text::sanitize(&text).replace('\n', " "), style),
        ]);
        out.push(paint::truncate_line(&line, w));
    }
    if todos.len() > MAX_ITEMS {
        out.push(Line::styled(
            format!("  … {} more", todos.len() - MAX_ITEMS),
            dim,
        ));
    }
    out
}
