//! The rewind picker behind `/rewind` and Esc Esc (DESIGN §16): the session's user messages
//! that have checkpoints, newest first (first line of the prompt, when, files changed), with
//! the host's `rewind_preview` of the highlighted one under the list; Enter offers what to
//! rewind (code and conversation, conversation only, code only, cancel). Pure state plus
//! drawing into a `Buffer`, like the session picker whose rows and selection it shares: the
//! checkpoints, previews and "now" are passed in; it never calls the host and never writes to
//! stdout.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};

use super::picker::rows::{self, blank, put, relative_age, with, Choice, BOLD, DIM, GAP, MARKER};
use crate::kernel::checkpoint::{Listed, PreviewChange, PreviewFile, Restore};
use crate::text::{self, count};
use crate::wire::pi::data::RewindPreviewData;

/// At most this many list rows (the preview needs the rest).
const LIST_ROWS: usize = 8;
/// At most this many preview rows (files beyond are counted in one line).
const PREVIEW_ROWS: usize = 8;

/// What the caller should do after a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RewindKey {
    /// Keep the picker open (and redraw it).
    None,
    /// The highlighted message changed: fetch its preview (`rewind_preview`).
    Preview(String),
    /// Rewind `restore` to before the user message `entry_id` (whose first line is
    /// `prompt`); the picker is done.
    Rewind {
        entry_id: String,
        prompt: String,
        restore: Restore,
    },
    /// Close the picker without rewinding.
    Close,
}

/// The choices Enter offers, in order (`None`: cancel).
pub const CHOICES: [(&str, Option<Restore>); 4] = [
    ("Code and conversation", Some(Restore::Both)),
    ("Conversation only", Some(Restore::Conversation)),
    ("Code only", Some(Restore::Files)),
    ("Cancel", None),
];

/// One user message with a checkpoint.
#[derive(Debug, Clone)]
struct Row {
    entry_id: String,
    /// The prompt's first line, sanitized.
    prompt: String,
    /// When the checkpoint was taken (unix ms; `None`: unreadable timestamp).
    at_ms: Option<i64>,
    /// Files the prompt changed: from its checkpoint to the next (as `keel rewind --list`
    /// counts them).
    files: usize,
}

/// The preview of the highlighted message.
#[derive(Debug, Clone, PartialEq)]
enum Preview {
    Loading,
    Ready(RewindPreviewData),
    Failed(String),
}

/// The picker's state: the messages (newest first), the selection, the preview shown and,
/// after Enter, the highlighted choice.
#[derive(Debug)]
pub struct RewindPicker {
    rows: Vec<Row>,
    choice: Choice,
    now_ms: i64,
    /// The preview and the message it is for.
    preview: Option<(String, Preview)>,
    /// Enter was pressed: which of [`CHOICES`] is highlighted.
    menu: Option<usize>,
}

impl RewindPicker {
    /// `listed`: `get_checkpoints`' list (oldest first); a message with several checkpoints
    /// shows once (a rewind restores its first). `now_ms` is "now" for the ages.
    pub fn new(listed: &[Listed], now_ms: i64) -> RewindPicker {
        let mut rows: Vec<Row> = Vec::new();
        for c in listed {
            if rows.iter().any(|r| r.entry_id == c.entry_id) {
                continue;
            }
            rows.push(Row {
                entry_id: c.entry_id.clone(),
                prompt: text::sanitize(c.prompt.lines().next().unwrap_or("")),
                at_ms: crate::kernel::clock::parse_iso(&c.timestamp),
                files: c.files.len(),
            });
        }
        rows.reverse();
        let mut choice = Choice::default();
        choice.set_matches((0..rows.len()).collect());
        RewindPicker {
            rows,
            choice,
            now_ms,
            preview: None,
            menu: None,
        }
    }

    /// No message has a checkpoint.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The highlighted message.
    fn selected_row(&self) -> Option<&Row> {
        self.rows.get(self.choice.chosen()?)
    }

    /// The highlighted message's entry id.
    pub fn selected(&self) -> Option<&str> {
        self.selected_row().map(|r| r.entry_id.as_str())
    }

    /// A preview came (`Err`: the host's error text); kept only if it is for the message
    /// still highlighted.
    pub fn set_preview(&mut self, entry_id: &str, preview: Result<RewindPreviewData, String>) {
        if self.selected() != Some(entry_id) {
            return;
        }
        let p = match preview {
            Ok(data) => Preview::Ready(data),
            Err(e) => Preview::Failed(e),
        };
        self.preview = Some((entry_id.to_string(), p));
    }

    /// What the highlighted message needs: its preview, unless it is shown or on its way.
    pub fn wanted_preview(&mut self) -> Option<String> {
        let id = self.selected()?.to_string();
        if self.preview.as_ref().is_some_and(|(p, _)| *p == id) {
            return None;
        }
        self.preview = Some((id.clone(), Preview::Loading));
        Some(id)
    }

    /// Applies one key: moving the selection, Enter (then a choice), Esc or Ctrl+C.
    pub fn handle_key(&mut self, key: KeyEvent) -> RewindKey {
        if key.kind == KeyEventKind::Release {
            return RewindKey::None;
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        if ctrl && key.code == KeyCode::Char('c') {
            return RewindKey::Close;
        }
        if let Some(at) = self.menu {
            return self.menu_key(at, key);
        }
        if self.choice.move_key(&key) {
            return match self.wanted_preview() {
                Some(id) => RewindKey::Preview(id),
                None => RewindKey::None,
            };
        }
        match key.code {
            KeyCode::Esc => RewindKey::Close,
            KeyCode::Enter if self.selected().is_some() => {
                self.menu = Some(0);
                RewindKey::None
            }
            _ => RewindKey::None,
        }
    }

    fn menu_key(&mut self, at: usize, key: KeyEvent) -> RewindKey {
        let last = CHOICES.len() - 1;
        let pick = match key.code {
            KeyCode::Up => {
                self.menu = Some(at.saturating_sub(1));
                None
            }
            KeyCode::Down => {
                self.menu = Some((at + 1).min(last));
                None
            }
            KeyCode::Esc => {
                self.menu = None;
                None
            }
            KeyCode::Enter => Some(at),
            KeyCode::Char(c) => c
                .to_digit(10)
                .map(|d| d as usize)
                .filter(|d| (1..=CHOICES.len()).contains(d))
                .map(|d| d - 1),
            _ => None,
        };
        let Some(i) = pick else {
            return RewindKey::None;
        };
        match (CHOICES[i].1, self.selected_row()) {
            (Some(restore), Some(row)) => RewindKey::Rewind {
                entry_id: row.entry_id.clone(),
                prompt: row.prompt.clone(),
                restore,
            },
            _ => RewindKey::Close,
        }
    }

    /// The prompt of the highlighted message (for the report after a rewind).
    pub fn selected_prompt(&self) -> Option<&str> {
        self.selected_row().map(|r| r.prompt.as_str())
    }

    /// Rows `render` wants: title, list (or choices), a blank row, then the preview.
    pub fn desired_height(&self, max_rows: u16) -> u16 {
        let rows = 2 + self.list_rows() as usize + 1 + self.preview_lines(usize::MAX).len();
        rows.min(max_rows as usize) as u16
    }

    /// Draws the picker into `area` of `buf`; every cell of the area is redrawn.
    pub fn render(&self, area: Rect, buf: &mut Buffer) {
        let list_rows = self.list_rows();
        rows::frame(
            area,
            buf,
            |w| self.title_line(w),
            |_| self.subtitle_line(),
            |rest, buf| {
                let list = Rect::new(rest.x, rest.y, rest.width, rest.height.min(list_rows));
                match self.menu {
                    Some(at) => self.render_choices(at, list, buf),
                    None => self.render_list(list, buf),
                }
                let below = rest.height.saturating_sub(list_rows + 1);
                let y = rest.y + list_rows + 1;
                let lines = self.preview_lines(rest.width as usize);
                for (i, line) in lines.iter().take(below as usize).enumerate() {
                    put(buf, rest, y + i as u16, line);
                }
            },
        );
    }

    /// Rows of the list (or, after Enter, of the choices).
    fn list_rows(&self) -> u16 {
        match self.menu {
            Some(_) => CHOICES.len() as u16,
            None => self.rows.len().clamp(1, LIST_ROWS) as u16,
        }
    }

    fn title_line(&self, w: usize) -> Line<'static> {
        let (title, hints) = match self.menu {
            None => (
                format!(
                    "Rewind · {}",
                    count(self.rows.len() as u64, "message", "messages")
                ),
                "Enter: choose what to rewind · Esc: cancel",
            ),
            Some(_) => (
                "Rewind to before this message".to_string(),
                "Enter or 1-4: choose · Esc: back",
            ),
        };
        for hints in [Some(hints), None] {
            let mut spans = vec![Span::styled(title.clone(), with(BOLD))];
            if let Some(h) = hints {
                spans.push(Span::styled(format!("  ·  {h}"), with(DIM)));
            }
            let line = Line::from(spans);
            if crate::front::tui::paint::line_width(&line) <= w {
                return line;
            }
        }
        Line::styled(title, with(BOLD))
    }

    /// The row under the title: the highlighted prompt once Enter was pressed, else what a
    /// rewind does.
    fn subtitle_line(&self) -> Line<'static> {
        match (self.menu, self.selected_prompt()) {
            (Some(_), Some(p)) => Line::from(vec![
                Span::styled("› ", with(DIM)),
                Span::raw(p.to_string()),
            ]),
            _ => Line::styled(
                "Back to before a message; the present is kept, so it can be undone",
                with(DIM),
            ),
        }
    }

    fn render_list(&self, area: Rect, buf: &mut Buffer) {
        let n = area.height as usize;
        if n == 0 {
            return;
        }
        self.choice.page.set(n);
        if self.rows.is_empty() {
            put(
                buf,
                area,
                area.y,
                &Line::styled("No checkpoints yet", with(DIM)),
            );
            return;
        }
        let ages: Vec<String> = self.rows.iter().map(|r| self.age(r)).collect();
        let files: Vec<String> = self
            .rows
            .iter()
            .map(|r| count(r.files as u64, "file", "files"))
            .collect();
        let age_w = ages.iter().map(|a| text::width(a)).max().unwrap_or(0);
        let files_w = files.iter().map(|f| text::width(f)).max().unwrap_or(0);
        let gap = " ".repeat(GAP);
        let top = self.choice.scroll_top(n);
        for (row, &i) in self.choice.matches.iter().enumerate().skip(top).take(n) {
            let y = area.y + (row - top) as u16;
            let selected = row == self.choice.selected;
            let marker = match selected {
                true => MARKER.to_string(),
                false => " ".repeat(text::width(MARKER)),
            };
            let mut line = Line::from(vec![
                Span::raw(marker),
                Span::raw(format!("{:>age_w$}{gap}", ages[i])),
                Span::styled(format!("{:>files_w$}", files[i]), with(DIM)),
                Span::raw(gap.clone()),
                Span::raw(self.rows[i].prompt.clone()),
            ]);
            if selected {
                blank(buf, area, y, with(rows::REVERSED));
                line = line.style(with(rows::REVERSED));
            }
            put(buf, area, y, &line);
        }
    }

    fn render_choices(&self, at: usize, area: Rect, buf: &mut Buffer) {
        for (i, (label, _)) in CHOICES.iter().enumerate().take(area.height as usize) {
            let y = area.y + i as u16;
            let marker = if i == at { MARKER } else { "  " };
            let mut line = Line::raw(format!("{marker}{}. {label}", i + 1));
            if i == at {
                blank(buf, area, y, with(rows::REVERSED));
                line = line.style(with(rows::REVERSED));
            }
            put(buf, area, y, &line);
        }
    }

    fn age(&self, r: &Row) -> String {
        r.at_ms
            .map_or_else(|| "?".to_string(), |t| relative_age(t, self.now_ms))
    }

    /// The preview of the highlighted message: what a rewind of the code would change.
    fn preview_lines(&self, w: usize) -> Vec<Line<'static>> {
        let dim = with(DIM);
        let Some((_, preview)) = &self.preview else {
            return Vec::new();
        };
        let data = match preview {
            Preview::Loading => return vec![Line::styled("Code: looking at the files…", dim)],
            Preview::Failed(e) => {
                let red = Style::default().fg(Color::Red);
                return vec![Line::styled(format!("Code: {}", text::sanitize(e)), red)];
            }
            Preview::Ready(data) => data,
        };
        let files = &data.files;
        if files.is_empty() {
            return vec![Line::styled("Code: no file would change", dim)];
        }
        let mut out = vec![Line::raw(format!(
            "Code: {} would change",
            count(files.len() as u64, "file", "files")
        ))];
        let shown = files.len().min(PREVIEW_ROWS);
        let path_w = files[..shown]
            .iter()
            .map(|f| text::width(&text::sanitize(&f.path)))
            .max()
            .unwrap_or(0)
            .min(w.saturating_sub(24).max(8));
        for f in &files[..shown] {
            out.push(file_line(f, path_w));
        }
        if files.len() > shown {
            out.push(Line::styled(
                format!("  … and {} more", files.len() - shown),
                dim,
            ));
        }
        if files[..shown].iter().any(|f| f.changed_since_snapshot) {
            out.push(Line::styled(
                "  * changed since keel's last checkpoint (by the last turn or outside keel)",
                dim,
            ));
        }
        out
    }
}

/// `  a.txt   +1 -2  recreated *`.
fn file_line(f: &PreviewFile, path_w: usize) -> Line<'static> {
    let path = text::sanitize(&f.path);
    let path = match text::width(&path) > path_w {
        true => rows::truncate_left(&path, path_w),
        false => path,
    };
    let pad = " ".repeat(path_w.saturating_sub(text::width(&path)) + GAP);
    let mut spans = vec![Span::raw(format!("  {path}{pad}"))];
    match (f.added, f.removed) {
        (Some(a), Some(r)) => {
            spans.push(Span::styled(
                format!("+{a}"),
                Style::default().fg(Color::Green),
            ));
            spans.push(Span::raw(" "));
            spans.push(Span::styled(
                format!("-{r}"),
                Style::default().fg(Color::Red),
            ));
        }
        _ => spans.push(Span::styled("binary", with(DIM))),
    }
    let what = match f.change {
        PreviewChange::Added => "  recreated",
        PreviewChange::Removed => "  removed",
        PreviewChange::Modified => "",
    };
    spans.push(Span::styled(what, with(DIM)));
    if f.changed_since_snapshot {
        spans.push(Span::styled(" *", Style::default().fg(Color::Yellow)));
    }
    Line::from(spans)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn listed(id: &str, entry: &str, prompt: &str) -> Listed {
        Listed {
            id: id.into(),
            entry_id: entry.into(),
            timestamp: "2026-12-01T10:00:00.000Z".into(),
            prompt: prompt.into(),
            snapshot: "t".into(),
            files: vec!["a".into()],
        }
    }

    fn key(p: &mut RewindPicker, code: KeyCode) -> RewindKey {
        p.handle_key(KeyEvent::new(code, KeyModifiers::NONE))
    }

    #[test]
    fn newest_first_once_per_message_and_enter_offers_the_choices() {
        let list = [
            listed("c1", "u1", "first"),
            listed("c2", "u2", "second"),
            listed("c3", "u2", "second"),
        ];
        let mut p = RewindPicker::new(&list, 0);
        assert_eq!(p.selected(), Some("u2"));
        assert_eq!(p.wanted_preview().as_deref(), Some("u2"));
        assert_eq!(p.wanted_preview(), None, "asked once");
        assert_eq!(key(&mut p, KeyCode::Down), RewindKey::Preview("u1".into()));
        p.set_preview("u2", Err("late".into()));
        assert_eq!(
            p.preview,
            Some(("u1".into(), Preview::Loading)),
            "a late answer is dropped"
        );
        assert_eq!(key(&mut p, KeyCode::Enter), RewindKey::None);
        key(&mut p, KeyCode::Down);
        key(&mut p, KeyCode::Down);
        let code_only = RewindKey::Rewind {
            entry_id: "u1".into(),
            prompt: "first".into(),
            restore: Restore::Files,
        };
        assert_eq!(key(&mut p, KeyCode::Enter), code_only);
        assert_eq!(key(&mut p, KeyCode::Char('4')), RewindKey::Close, "cancel");
        assert_eq!(
            key(&mut p, KeyCode::Esc),
            RewindKey::None,
            "back to the list"
        );
        assert_eq!(key(&mut p, KeyCode::Esc), RewindKey::Close);
    }
}
