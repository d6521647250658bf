//! What the editor's completion menus share (the `@` file menu and the `/` command menu): the
//! keys that choose in them and their scrolling window of rows with `↑ N more` / `↓ N more`.
//! The selection and scrolling are the pickers' `rows::Choice`. Pure: no terminal.

use crossterm::event::{KeyCode, KeyEvent};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};

use crate::front::tui::paint;
use crate::front::tui::picker::rows::Choice;

/// Entries a menu shows at once (more scroll).
pub const ROWS: usize = 8;

/// What a key does to an open menu.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MenuKey {
    /// The selection moved.
    Moved,
    /// Tab: put the highlighted entry (its index in the list) in the editor.
    Complete(usize),
    /// Enter on the highlighted entry.
    Enter(usize),
    /// Esc.
    Close,
    /// Not a menu key: the editor takes it.
    Pass,
}

/// Up/Down (and PgUp/PgDn) move, Tab completes, Enter takes, Esc closes.
pub fn key(choice: &mut Choice, key: &KeyEvent) -> MenuKey {
    let plain = key.modifiers.is_empty();
    match key.code {
        KeyCode::Up | KeyCode::Down | KeyCode::PageUp | KeyCode::PageDown => {
            choice.page.set(ROWS);
            choice.move_key(key);
            MenuKey::Moved
        }
        KeyCode::Tab if plain => choice.chosen().map_or(MenuKey::Close, MenuKey::Complete),
        KeyCode::Enter if plain => choice.chosen().map_or(MenuKey::Pass, MenuKey::Enter),
        KeyCode::Esc => MenuKey::Close,
        _ => MenuKey::Pass,
    }
}

/// The visible window of a menu: `entry(i, selected)` for each shown match (`i`: its index in
/// the list), then a dim row saying how many are above and below the window (when any are),
/// then `help`. Every row is cut to `w`.
pub fn rows(
    choice: &Choice,
    w: usize,
    help: &str,
    entry: impl Fn(usize, bool) -> Line<'static>,
) -> Vec<Line<'static>> {
    let top = choice.scroll_top(ROWS);
    let shown = choice.matches.len().saturating_sub(top).min(ROWS);
    let mut out: Vec<Line<'static>> = choice.matches[top..top + shown]
        .iter()
        .enumerate()
        .map(|(k, &i)| paint::truncate_line(&entry(i, top + k == choice.selected), w))
        .collect();
    let below = choice.matches.len() - top - shown;
    let mut more = Vec::new();
    if top > 0 {
        more.push(format!("↑ {top} more"));
    }
    if below > 0 {
        more.push(format!("↓ {below} more"));
    }
    let dim = Style::default().add_modifier(Modifier::DIM);
    if !more.is_empty() {
        let line = Line::styled(format!("  {}", more.join(" · ")), dim);
        out.push(paint::truncate_line(&line, w));
    }
    out.push(paint::truncate_line(
        &Line::styled(format!("  {help}"), dim),
        w,
    ));
    out
}

/// The style of an entry: reversed when it is the highlighted one.
pub fn highlight(style: Style, selected: bool) -> Style {
    match selected {
        true => style.add_modifier(Modifier::REVERSED),
        false => style,
    }
}

/// `  label  description` with the label `width` columns wide.
pub fn labelled(
    label: &str,
    width: usize,
    desc: &str,
    style: Style,
    selected: bool,
) -> Line<'static> {
    Line::from(vec![
        Span::raw("  "),
        Span::styled(format!("{label:<width$}"), highlight(style, selected)),
        Span::raw(" "),
        Span::styled(
            desc.to_string(),
            Style::default().add_modifier(Modifier::DIM),
        ),
    ])
}
