//! Markdown block level: one source line in, the lines it completes out (usually one; a table
//! comes out whole when it ends), with the state carried between lines: the open fence, list
//! nesting, a held-back table header, the table being read, blank-line collapsing.

use ratatui::style::Style;
use ratatui::text::Span;

use super::code::Fence;
use super::inline::{first, inline, run_len};
use super::table;
use super::{heading, md, MdLine, DIM, ITALIC, MARKER};
use crate::text;

const BULLET: &str = "• ";
const NESTED_BULLET: &str = "◦ ";
const TASK_OPEN: &str = "☐ ";
const TASK_DONE: &str = "☑ ";
const RULE: &str = "─";
const RULE_WIDTH: usize = 20;

/// State carried from one source line to the next.
#[derive(Debug, Default, Clone)]
pub(super) struct Block {
    fence: Option<Fence>,
    /// Open list items, outermost first.
    lists: Vec<ListLevel>,
    /// Whether something other than blank lines has been seen.
    started: bool,
    /// Whether the previous line was blank (outside code).
    blank: bool,
    /// A paragraph line with a `|`, held until the next line says whether it heads a table.
    candidate: Option<String>,
    /// The table being read.
    table: Option<table::Builder>,
}

/// An open list item: the source indent of its marker and the column its text starts at.
#[derive(Debug, Clone, Copy)]
struct ListLevel {
    src: usize,
    col: usize,
}

/// Leading whitespace in columns (tabs count `text::TAB_WIDTH`) and the text after it.
pub(super) fn split_lead(line: &str) -> (usize, &str) {
    let rest = line.trim_start_matches([' ', '\t']);
    let lead = line[..line.len() - rest.len()]
        .chars()
        .map(|c| if c == '\t' { text::TAB_WIDTH } else { 1 })
        .sum();
    (lead, rest)
}

impl Block {
    /// Renders one complete source line into `out`.
    pub(super) fn line(&mut self, raw: &str, out: &mut Vec<MdLine>) {
        if let Some(fence) = &mut self.fence {
            match fence.line(raw) {
                Some(line) => out.extend(line),
                None => self.fence = None,
            }
            return;
        }
        if let Some(t) = &mut self.table {
            if table::is_row(raw) {
                t.push_row(raw);
                return;
            }
            self.flush(out);
        }
        if let Some(header) = self.candidate.take() {
            if let Some(builder) = table::Builder::start(&header, raw) {
                let (lead, _) = split_lead(&header);
                self.table = Some(builder.at(self.continuation_col(lead)));
                return;
            }
            out.extend(self.block_line(&header, false));
        }
        out.extend(self.block_line(raw, true));
    }

    /// Releases what is held back: a table being read, a possible header row.
    pub(super) fn flush(&mut self, out: &mut Vec<MdLine>) {
        if let Some(t) = self.table.take() {
            out.push(MdLine::Table(t.finish()));
        }
        if let Some(header) = self.candidate.take() {
            out.extend(self.block_line(&header, false));
        }
    }

    /// A line outside code and tables. With `hold`, a paragraph line that may head a table is
    /// kept back (rendered by the next line or the flush).
    fn block_line(&mut self, raw: &str, hold: bool) -> Option<MdLine> {
        let (lead, rest) = split_lead(raw);
        if rest.trim().is_empty() {
            let skip = self.blank || !self.started;
            self.blank = true;
            return (!skip).then(|| md(Vec::new(), 0));
        }
        self.started = true;
        self.blank = false;
        let item = list_item(rest);
        if lead == 0 && item.is_none() {
            self.lists.clear();
        }
        if let Some(out) = self.open_fence(lead, rest) {
            return out;
        }
        if let Some(out) = heading_line(rest).or_else(|| rule_line(rest)) {
            return Some(out);
        }
        if let Some((kind, content)) = item {
            return Some(self.list_line(lead, kind, content));
        }
        if let Some(out) = quote_line(rest) {
            return Some(out);
        }
        if hold && table::may_be_header(rest) {
            self.candidate = Some(raw.to_string());
            return None;
        }
        Some(self.paragraph(lead, rest))
    }

    /// A paragraph line; indented under a list item, it lines up with the item's text.
    fn paragraph(&self, lead: usize, rest: &str) -> MdLine {
        let col = self.continuation_col(lead);
        let mut spans = vec![Span::raw(" ".repeat(col))];
        spans.extend(inline(rest, Style::default()));
        md(spans, col)
    }

    /// The text column of the innermost list item a line indented by `lead` continues.
    fn continuation_col(&self, lead: usize) -> usize {
        match lead {
            0 => 0,
            _ => self
                .lists
                .iter()
                .rev()
                .find(|l| l.src < lead)
                .map_or(0, |l| l.col),
        }
    }

    /// Opens a fence: `Some(label)` when `rest` is an opening fence line.
    fn open_fence(&mut self, lead: usize, rest: &str) -> Option<Option<MdLine>> {
        let ch = first(rest).filter(|c| *c == '`' || *c == '~')?;
        let len = run_len(rest, 0, ch);
        let info = rest[len..].trim();
        if len < 3 || (ch == '`' && info.contains('`')) {
            return None;
        }
        let (fence, label) = Fence::open(ch, len, lead, self.continuation_col(lead), info);
        self.fence = Some(fence);
        Some(label)
    }

    fn list_line(&mut self, lead: usize, kind: Item, content: &str) -> MdLine {
        while self.lists.last().is_some_and(|l| l.src >= lead) {
            self.lists.pop();
        }
        let level = self.lists.len();
        let (mark, content) = match kind {
            Item::Bullet => match task_box(content) {
                Some((mark, after)) => (mark.to_string(), after),
                None if level == 0 => (BULLET.to_string(), content),
                None => (NESTED_BULLET.to_string(), content),
            },
            Item::Ordered(n) => (format!("{n} "), content),
        };
        let pad = "  ".repeat(level);
        let col = text::width(&pad) + text::width(&mark);
        self.lists.push(ListLevel { src: lead, col });
        let mut spans = vec![Span::raw(pad), Span::styled(mark, MARKER)];
        spans.extend(inline(content, Style::default()));
        md(spans, col)
    }
}

/// The kind of list marker a line starts with.
enum Item {
    Bullet,
    /// The number with its delimiter, as written (`3.` or `3)`).
    Ordered(String),
}

/// A list marker at the start of `rest` followed by whitespace: its kind and the item text.
fn list_item(rest: &str) -> Option<(Item, &str)> {
    let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    let (kind, after) = match rest.chars().next()? {
        '-' | '*' | '+' => (Item::Bullet, &rest[1..]),
        _ if (1..=9).contains(&digits) && rest[digits..].starts_with(['.', ')']) => (
            Item::Ordered(rest[..=digits].to_string()),
            &rest[digits + 1..],
        ),
        _ => return None,
    };
    after
        .starts_with([' ', '\t'])
        .then(|| (kind, after.trim_start()))
}

/// `[ ] ` or `[x] ` at the start of an item: the box to draw and the text after it.
fn task_box(content: &str) -> Option<(&'static str, &str)> {
    let mark = match content.get(..3)? {
        "[ ]" => TASK_OPEN,
        "[x]" | "[X]" => TASK_DONE,
        _ => return None,
    };
    let after = &content[3..];
    (after.is_empty() || after.starts_with(' ')).then(|| (mark, after.trim_start()))
}

fn heading_line(rest: &str) -> Option<MdLine> {
    let level = run_len(rest, 0, '#');
    let after = &rest[level..];
    if !(1..=6).contains(&level) || !(after.is_empty() || after.starts_with([' ', '\t'])) {
        return None;
    }
    // An optional closing run of `#` (after a space) is not part of the text.
    let mut content = after.trim();
    let unhashed = content.trim_end_matches('#');
    if unhashed.is_empty() || unhashed.ends_with([' ', '\t']) {
        content = unhashed.trim_end();
    }
    Some(md(inline(content, heading(level)), 0))
}

fn rule_line(rest: &str) -> Option<MdLine> {
    let ch = first(rest).filter(|c| matches!(c, '-' | '*' | '_'))?;
    let body = rest.trim_end();
    let count = body.chars().filter(|c| *c == ch).count();
    let only = body.chars().all(|c| c == ch || c == ' ' || c == '\t');
    (only && count >= 3).then(|| md(vec![Span::styled(RULE.repeat(RULE_WIDTH), DIM)], 0))
}

/// A `>` line: its depth and its text (italic), the bars drawn on every wrapped row.
fn quote_line(rest: &str) -> Option<MdLine> {
    let mut content = rest.strip_prefix('>')?;
    let mut depth = 1;
    loop {
        content = content.strip_prefix(' ').unwrap_or(content);
        match content.strip_prefix('>') {
            Some(inner) => (content, depth) = (inner, depth + 1),
            None => break,
        }
    }
    let spans = super::non_empty(inline(content.trim_end(), ITALIC));
    Some(MdLine::Quote {
        depth,
        line: spans.into(),
    })
}
