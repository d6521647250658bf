//! The live-session picker of `keel attach` (no id, several sessions live in the daemon): a
//! filterable list of `daemon/status`'s sessions, newest first, one row each with the short id,
//! state, age, clients, name (else first prompt) and cwd. [`LivePicker`] is plain state plus drawing into a
//! `Buffer` (no terminal, clock or environment: sessions and the home directory are passed
//! in); [`choose`] shows it in the terminal's inline viewport until Enter, Esc or a signal.
//! It writes only through `output::TerminalOut` and leaves nothing on screen or on stdout.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use super::picker::rows::Choice;

use crossterm::event::{Event as TermEvent, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use serde_json::Value;

use super::paint;
use super::picker::rows::{
    blank, home_short, put, short_age, split_rest, truncate_left, with, BOLD, DIM, GAP, MARKER,
    REVERSED,
};
use super::terminal::InlineTerminal;
use super::tty::{self, Tty};
use crate::error::StartupError;
use crate::output::TerminalOut;
use crate::signals::Signals;
use crate::text;

/// Below this many columns for the name and cwd, the clients, age and state columns go.
const MIN_TITLE: usize = 10;

/// One live session as `daemon/status` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveSession {
    pub id: String,
    /// `idle`, `running`, … as the daemon says.
    pub state: String,
    pub name: Option<String>,
    pub cwd: String,
    /// How long it has been live in the daemon.
    pub age_ms: u64,
    /// Clients attached to it.
    pub clients: u64,
    /// Its first prompt (`firstPrompt`), shown when it has no name.
    pub first_prompt: Option<String>,
}

impl LiveSession {
    /// One entry of `daemon/status`'s `sessions`; `None` without a `sessionId`.
    pub fn from_status(v: &Value) -> Option<LiveSession> {
        let field = |k: &str| v[k].as_str().unwrap_or_default().to_string();
        Some(LiveSession {
            id: v["sessionId"].as_str()?.to_string(),
            state: field("state"),
            name: v["name"].as_str().map(str::to_string),
            cwd: field("cwd"),
            age_ms: v["ageMs"].as_u64().unwrap_or(0),
            clients: v["clients"].as_u64().unwrap_or(0),
            first_prompt: v["firstPrompt"].as_str().map(str::to_string),
        })
    }
}

/// What the caller should do after a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LiveAction {
    /// Keep the picker open (and redraw it).
    None,
    /// Attach to this session.
    Attach(String),
    /// Leave without attaching.
    Cancel,
}

/// A session with what its row shows and the lowercase text the filter searches.
#[derive(Debug)]
struct Entry {
    session: LiveSession,
    /// The cwd with the home directory as `~`, sanitized.
    cwd: String,
    name: Option<String>,
    /// The first prompt's first line, sanitized, for a session without a name.
    prompt: Option<String>,
    haystack: String,
}

/// The picker's state: the sessions (newest first), the filter and the selection.
#[derive(Debug)]
pub struct LivePicker {
    entries: Vec<Entry>,
    choice: Choice,
    /// `/` was typed on an empty filter: `j`, `k` and `q` are text, not keys.
    typing: bool,
}

impl LivePicker {
    /// `home` shortens cwds to `~/…`. Sessions are shown newest (smallest age) first.
    pub fn new(mut sessions: Vec<LiveSession>, home: Option<&str>) -> LivePicker {
        sessions.sort_by(|a, b| a.age_ms.cmp(&b.age_ms).then_with(|| a.id.cmp(&b.id)));
        let entries = sessions
            .into_iter()
            .map(|session| {
                let cwd = text::sanitize(&home_short(&session.cwd, home));
                let name = session
                    .name
                    .as_deref()
                    .map(|n| {
                        text::sanitize(n.lines().next().unwrap_or(""))
                            .trim()
                            .to_string()
                    })
                    .filter(|n| !n.is_empty());
                let prompt = session
                    .first_prompt
                    .as_deref()
                    .and_then(|p| p.lines().find(|l| !l.trim().is_empty()))
                    .map(|l| text::sanitize(l.trim()));
                let fields = [
                    session.id.as_str(),
                    session.name.as_deref().unwrap_or(""),
                    session.first_prompt.as_deref().unwrap_or(""),
                    &session.cwd,
                    &cwd,
                ];
                // Joined by a newline, which a typed filter never contains, so a match never
                // spans two fields.
                let haystack = fields.join("\n").to_lowercase();
                Entry {
                    session,
                    cwd,
                    name,
                    prompt,
                    haystack,
                }
            })
            .collect();
        let mut picker = LivePicker {
            entries,
            choice: Choice::default(),
            typing: false,
        };
        picker.refilter();
        picker
    }

    /// Applies one key: moving, filter editing, attach or cancel.
    pub fn handle_key(&mut self, key: KeyEvent) -> LiveAction {
        if key.kind == KeyEventKind::Release {
            return LiveAction::None;
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let alt = key.modifiers.contains(KeyModifiers::ALT);
        if self.choice.move_key(&key) {
            return LiveAction::None;
        }
        let keys = self.choice.filter.is_empty() && !self.typing;
        match key.code {
            KeyCode::Char('c') if ctrl && !alt => return LiveAction::Cancel,
            KeyCode::Char('u') if ctrl && !alt => self.edit(String::clear),
            KeyCode::Char('q') if keys && !ctrl && !alt => return LiveAction::Cancel,
            KeyCode::Char('j') if keys && !ctrl && !alt => self.choice.move_by(1),
            KeyCode::Char('k') if keys && !ctrl && !alt => self.choice.move_by(-1),
            KeyCode::Char('/') if keys && !ctrl && !alt => self.typing = true,
            // Ctrl+Alt is AltGr on some keyboards: it types a character.
            KeyCode::Char(c) if ctrl == alt && !c.is_control() => self.edit(|f| f.push(c)),
            KeyCode::Backspace if self.choice.filter.is_empty() => self.typing = false,
            KeyCode::Backspace => self.edit(|f| {
                f.pop();
            }),
            KeyCode::Esc if keys => return LiveAction::Cancel,
            KeyCode::Esc => {
                self.typing = false;
                self.edit(String::clear);
            }
            KeyCode::Enter => {
                return match self.selected() {
                    Some(s) => LiveAction::Attach(s.id.clone()),
                    None => LiveAction::None,
                }
            }
            _ => {}
        }
        LiveAction::None
    }

    /// Pasted text goes into the filter (its first line, control characters dropped).
    pub fn paste(&mut self, pasted: &str) {
        let line = pasted.lines().next().unwrap_or("");
        self.edit(|f| f.extend(line.chars().filter(|c| !c.is_control())));
    }

    /// The highlighted session, if any matches.
    pub fn selected(&self) -> Option<&LiveSession> {
        let idx = self.choice.chosen()?;
        self.entries.get(idx).map(|e| &e.session)
    }

    /// The ids of the sessions that match the filter, in the order shown.
    pub fn shown(&self) -> Vec<&str> {
        let ids = self
            .choice
            .matches
            .iter()
            .map(|&i| self.entries[i].session.id.as_str());
        ids.collect()
    }

    /// Rows `render` wants: title + filter + one per session (at most `max_rows`). Counted
    /// before filtering, so typing never shrinks the viewport.
    pub fn desired_height(&self, max_rows: u16) -> u16 {
        let rows = 2 + self.entries.len().max(1);
        rows.min(max_rows as usize) as u16
    }

    /// Draws the picker into `area` of `buf`: title row, filter row, then the list. Every
    /// cell of the area is redrawn; nothing outside it is touched.
    pub fn render(&self, area: Rect, buf: &mut Buffer) {
        super::picker::rows::frame(
            area,
            buf,
            |w| self.title_line(w),
            |w| self.filter_line(w),
            |list, buf| self.render_list(list, buf),
        );
    }

    fn edit(&mut self, change: impl FnOnce(&mut String)) {
        change(&mut self.choice.filter);
        self.refilter();
    }

    /// Recomputes the matches and puts the selection back on the first one.
    fn refilter(&mut self) {
        let haystacks = self.entries.iter().map(|e| e.haystack.as_str());
        self.choice.refilter(haystacks);
    }

    /// The longest variant of the title row that fits: hints go first, then the prefix.
    fn title_line(&self, w: usize) -> Line<'static> {
        let total = self.entries.len();
        let count = if self.choice.filter.is_empty() {
            format!("{total} live")
        } else {
            format!("{}/{total} live", self.choice.matches.len())
        };
        let hint_sets: [&[&str]; 3] = [&["Enter: attach", "Esc: cancel"], &["Esc: cancel"], &[]];
        for prefix in [true, false] {
            for hints in hint_sets {
                let mut spans = Vec::new();
                if prefix {
                    spans.push(Span::styled("Attach to a session", with(BOLD)));
                    spans.push(Span::styled(" · ", with(DIM)));
                }
                spans.push(Span::raw(count.clone()));
                if !hints.is_empty() {
                    spans.push(Span::styled("  ·  ", with(DIM)));
                    spans.push(Span::styled(hints.join(" · "), with(DIM)));
                }
                let line = Line::from(spans);
                if paint::line_width(&line) <= w {
                    return line;
                }
            }
        }
        Line::raw(count)
    }

    /// `Filter: <text>` with a reversed-cell caret, or a dim hint while no filter is typed.
    fn filter_line(&self, w: usize) -> Line<'static> {
        let label = "Filter: ";
        let caret = Span::styled(" ", with(REVERSED));
        if self.choice.filter.is_empty() && !self.typing {
            let hint = "type to filter · ↑↓ j k move · q quits · / to type j, k or q";
            let dim = with(DIM);
            return Line::from(vec![Span::raw(label), caret, Span::styled(hint, dim)]);
        }
        let room = w.saturating_sub(text::width(label) + 1);
        let shown = truncate_left(&text::sanitize(&self.choice.filter), room);
        Line::from(vec![Span::raw(label), Span::raw(shown), caret])
    }

    fn render_list(&self, area: Rect, buf: &mut Buffer) {
        let rows = area.height as usize;
        if rows == 0 {
            return;
        }
        self.choice.page.set(rows);
        if self.choice.matches.is_empty() {
            let message = if self.choice.filter.is_empty() {
                "No sessions are live".to_string()
            } else {
                let filter = text::sanitize(&self.choice.filter);
                format!("No live session matches \"{filter}\"")
            };
            put(buf, area, area.y, &Line::styled(message, with(DIM)));
            return;
        }
        let cols = self.columns(area.width as usize);
        let top = self.choice.scroll_top(rows);
        for (row, &idx) in self.choice.matches.iter().enumerate().skip(top).take(rows) {
            let y = area.y + (row - top) as u16;
            let selected = row == self.choice.selected;
            if selected {
                blank(buf, area, y, with(REVERSED));
            }
            put(buf, area, y, &row_line(&self.entries[idx], selected, &cols));
        }
    }

    /// Column widths over all matches (so columns do not shift on scroll), with the clients,
    /// age and state columns dropped in that order when the name and cwd would get too little.
    fn columns(&self, width: usize) -> Cols {
        let widest = |cell: &dyn Fn(&Entry) -> String| {
            let cells = self
                .choice
                .matches
                .iter()
                .map(|&i| text::width(&cell(&self.entries[i])));
            cells.max().unwrap_or(0)
        };
        let mut cols = Cols {
            width,
            id: widest(&|e| short_id(&e.session.id)),
            state: widest(&|e| text::sanitize(&e.session.state)),
            age: widest(&|e| short_age(e.session.age_ms)),
            clients: widest(&|e| clients(e.session.clients)),
        };
        for drop in [
            |c: &mut Cols| c.clients = 0,
            |c: &mut Cols| c.age = 0,
            |c: &mut Cols| c.state = 0,
        ] {
            if cols.fixed() + MIN_TITLE > width {
                drop(&mut cols);
            }
        }
        cols
    }
}

/// How rows are laid out: the row width and the fixed columns' widths (0: column hidden).
struct Cols {
    width: usize,
    id: usize,
    state: usize,
    age: usize,
    clients: usize,
}

impl Cols {
    /// Columns before the name: the marker, then each shown column with its gap.
    fn fixed(&self) -> usize {
        let col = |w: usize| if w == 0 { 0 } else { w + GAP };
        text::width(MARKER) + col(self.id) + col(self.state) + col(self.age) + col(self.clients)
    }
}

/// One row: marker, short id, state, right-aligned age and clients, then the name in bold (or
/// the first prompt, in quotes) with the dim cwd at the right edge, or the cwd alone (cut from
/// the left) when the session has neither.
fn row_line(e: &Entry, selected: bool, cols: &Cols) -> Line<'static> {
    let gap = " ".repeat(GAP);
    let marker = if selected {
        MARKER.to_string()
    } else {
        " ".repeat(text::width(MARKER))
    };
    let mut spans = vec![Span::raw(marker)];
    let id = short_id(&e.session.id);
    spans.push(Span::styled(format!("{id:<0$}", cols.id), with(BOLD)));
    spans.push(Span::raw(gap.clone()));
    if cols.state > 0 {
        let state = text::sanitize(&e.session.state);
        spans.push(Span::raw(format!("{state:<0$}{gap}", cols.state)));
    }
    if cols.age > 0 {
        let age = short_age(e.session.age_ms);
        spans.push(Span::raw(format!("{age:>0$}{gap}", cols.age)));
    }
    if cols.clients > 0 {
        let n = clients(e.session.clients);
        spans.push(Span::styled(format!("{n:>0$}", cols.clients), with(DIM)));
        spans.push(Span::raw(gap));
    }
    let rest = cols.width.saturating_sub(cols.fixed());
    // The name in bold, else the first prompt in quotes (cut to fit), then the cwd.
    let title = match (&e.name, &e.prompt) {
        (Some(name), _) => Some(Span::styled(name.clone(), with(BOLD))),
        (None, Some(p)) => Some(Span::raw(format!("\"{p}\""))),
        (None, None) => None,
    };
    match title {
        Some(title) => {
            let (title_max, cwd) = split_rest(rest, text::width(&title.content), &e.cwd);
            let title = Line::from(title);
            let title = paint::truncate_line(&title, title_max);
            let title_w = paint::line_width(&title);
            spans.extend(title.spans);
            if !cwd.is_empty() {
                let pad = rest.saturating_sub(title_w + text::width(&cwd));
                spans.push(Span::raw(" ".repeat(pad)));
                spans.push(Span::styled(cwd, with(DIM)));
            }
        }
        // A path keeps its tail: the directory's own name.
        None => spans.push(Span::raw(truncate_left(&e.cwd, rest))),
    }
    let line = Line::from(spans);
    if selected {
        line.style(with(REVERSED))
    } else {
        line
    }
}

/// The short id (its end, as the TUI's header shows it), sanitized.
fn short_id(id: &str) -> String {
    text::sanitize(crate::kernel::session::short_id(id))
}

/// `1 client`, `0 clients`.
fn clients(n: u64) -> String {
    if n == 1 {
        "1 client".to_string()
    } else {
        format!("{n} clients")
    }
}

/// Shows `picker` in the terminal's inline viewport until Enter (the chosen id), Esc, Ctrl+C
/// or `q` (`Ok(None)`), or a signal (`Err(n)`: the terminal is put back first). The viewport
/// is erased before returning, so the next screen starts where the picker was.
pub async fn choose(picker: LivePicker) -> Result<Result<Option<String>, i32>, StartupError> {
    let mut signals = Signals::new()?;
    let (tx, rx) = tokio::sync::oneshot::channel();
    // The terminal is read on a thread of its own (blocking reads), which ends with the
    // picker: nothing is left reading keys meant for what comes next.
    std::thread::Builder::new()
        .name("keel-live-picker".into())
        .spawn(move || {
            let _ = tx.send(show(picker));
        })
        .map_err(|e| StartupError::internal("cannot start the picker").cause(e.to_string()))?;
    tokio::select! {
        shown = rx => match shown {
            Ok(Ok(choice)) => Ok(Ok(choice)),
            Ok(Err(e)) => Err(StartupError::internal("the terminal failed").cause(e.to_string())),
            Err(_) => Err(StartupError::internal("the picker ended unexpectedly")),
        },
        n = signals.next() => {
            tty::restore();
            Ok(Err(n))
        }
    }
}

/// The picker's terminal loop (blocking).
fn show(mut picker: LivePicker) -> std::io::Result<Option<String>> {
    let _tty = Tty::enter()?;
    let (cols, rows) = crossterm::terminal::size().unwrap_or((80, 24));
    let cursor_row = crossterm::cursor::position()
        .map(|(_, y)| y)
        .unwrap_or(rows.saturating_sub(1));
    let mut term = InlineTerminal::new(TerminalOut, cols, rows, cursor_row);
    let choice = loop {
        let height = picker.desired_height(term.size().1.saturating_sub(1));
        term.frame(&[], height, |buf| picker.render(buf.area, buf), None)?;
        match crossterm::event::read()? {
            TermEvent::Key(key) => match picker.handle_key(key) {
                LiveAction::None => {}
                LiveAction::Attach(id) => break Some(id),
                LiveAction::Cancel => break None,
            },
            TermEvent::Paste(text) => picker.paste(&text),
            TermEvent::Resize(c, r) => {
                let row = crossterm::cursor::position().ok().map(|(_, y)| y);
                term.resize(c, r, row);
            }
            _ => {}
        }
    };
    term.clear_live()?;
    Ok(choice)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
