//! Streaming markdown for the TUI: turns assistant text into styled lines, one complete source
//! line at a time (newline-gated), carrying block state (code fences, list nesting, blank-line
//! collapsing) across lines. Pure: never wraps (callers use `paint::wrap_line` with each line's
//! hanging indent), never draws and never writes to a terminal.

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

use crate::text;

// ---------------------------------------------------------------------------------------------
// Styles: every colour and modifier the renderer uses, in one place.

/// Heading text: level 1 magenta, bold and underlined; level 2 cyan and bold; deeper just bold.
fn heading(level: usize) -> Style {
    match level {
        1 => BOLD.fg(Color::Magenta).add_modifier(Modifier::UNDERLINED),
        2 => BOLD.fg(Color::Cyan),
        _ => BOLD,
    }
}

/// Inline code spans and fenced code lines.
const CODE: Style = Style::new().fg(Color::Yellow);
/// Decorations: fence labels, rules, quote bars, link targets, table delimiter rows.
const DIM: Style = Style::new().add_modifier(Modifier::DIM);
const BOLD: Style = Style::new().add_modifier(Modifier::BOLD);
const ITALIC: Style = Style::new().add_modifier(Modifier::ITALIC);
const STRIKE: Style = Style::new().add_modifier(Modifier::CROSSED_OUT);
/// Link text and autolinks.
const LINK: Style = Style::new().add_modifier(Modifier::UNDERLINED);
/// List bullets, numbers and task boxes.
const MARKER: Style = Style::new();

const BULLET: &str = "• ";
const NESTED_BULLET: &str = "◦ ";
const TASK_OPEN: &str = "☐ ";
const TASK_DONE: &str = "☑ ";
const QUOTE_BAR: &str = "│ ";
const RULE: &str = "─";
const RULE_WIDTH: usize = 20;
/// Left margin of fenced code lines and of the fence's language label.
const CODE_MARGIN: usize = 2;

// ---------------------------------------------------------------------------------------------
// Public API

/// One rendered line plus the hanging indent (columns) for its wrapped continuation lines.
#[derive(Debug, Clone, PartialEq)]
pub struct MdLine {
    /// The styled line, not wrapped.
    pub line: Line<'static>,
    /// Columns of indent for continuation lines when the caller wraps `line`.
    pub indent: usize,
}

/// Renders a finished text. Equals the lines of a [`MarkdownStream`] fed `source` in any
/// number of deltas and then finished.
pub fn render(source: &str) -> Vec<MdLine> {
    let mut stream = MarkdownStream::new();
    let mut out = stream.push(source);
    out.extend(stream.finish());
    out
}

/// Incremental renderer fed by streamed deltas. A source line is rendered once its `\n` has
/// arrived (or at [`MarkdownStream::finish`]); leading blank lines are dropped and runs of
/// blank lines outside code blocks collapse to one empty line.
#[derive(Debug, Default)]
pub struct MarkdownStream {
    /// The unfinished last source line.
    buf: String,
    block: Block,
}

impl MarkdownStream {
    /// An empty stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a delta; returns the lines completed by it (every source line whose `\n`
    /// arrived).
    pub fn push(&mut self, delta: &str) -> Vec<MdLine> {
        self.buf.push_str(delta);
        let Some(end) = self.buf.rfind('\n') else {
            return Vec::new();
        };
        let rest = self.buf.split_off(end + 1);
        let done = std::mem::replace(&mut self.buf, rest);
        done.lines()
            .filter_map(|l| self.block.line(l.strip_suffix('\r').unwrap_or(l)))
            .collect()
    }

    /// The unfinished last source line rendered with the current block state (for the live
    /// area), or None when nothing is pending or the pending text renders to nothing (a
    /// repeated blank line, a fence without a language).
    pub fn pending(&self) -> Option<MdLine> {
        if self.buf.is_empty() {
            return None;
        }
        let l = self.buf.strip_suffix('\r').unwrap_or(&self.buf);
        self.block.clone().line(l)
    }

    /// Ends the stream: renders what is pending (an unclosed code fence just ends) and resets
    /// the stream for a new text.
    pub fn finish(&mut self) -> Vec<MdLine> {
        let buf = std::mem::take(&mut self.buf);
        let l = buf.strip_suffix('\r').unwrap_or(&buf);
        let out = match l.is_empty() {
            true => Vec::new(),
            false => self.block.line(l).into_iter().collect(),
        };
        self.block = Block::default();
        out
    }
}

// ---------------------------------------------------------------------------------------------
// Block level: one source line in, at most one output line out.

/// State carried from one source line to the next.
#[derive(Debug, Default, Clone)]
struct Block {
    fence: Option<Fence>,
    /// Open list items, outermost first.
    lists: Vec<ListLevel>,
    /// Whether something other than blank lines has been seen.
    started: bool,
    /// Whether the previous line was blank (outside code).
    blank: bool,
}

/// An open code fence.
#[derive(Debug, Clone)]
struct Fence {
    ch: char,
    len: usize,
    /// Leading spaces of the opening fence, stripped from code lines.
    indent: usize,
    /// Rendered column the block starts at (the content column of an enclosing list item).
    base: usize,
}

/// An open list item: the source indent of its marker and the column its text starts at.
#[derive(Debug, Clone, Copy)]
struct ListLevel {
    src: usize,
    col: usize,
}

/// A line of the non-empty `spans`.
fn md(spans: Vec<Span<'static>>, indent: usize) -> MdLine {
    let spans: Vec<Span<'static>> = spans
        .into_iter()
        .filter(|s| !s.content.is_empty())
        .collect();
    MdLine {
        line: Line::from(spans),
        indent,
    }
}

/// Leading whitespace in columns (tabs count `text::TAB_WIDTH`) and the text after it.
fn split_lead(line: &str) -> (usize, &str) {
    let rest = line.trim_start_matches([' ', '\t']);
    let lead = line[..line.len() - rest.len()]
        .chars()
        .map(|c| if c == '\t' { text::TAB_WIDTH } else { 1 })
        .sum();
    (lead, rest)
}

impl Block {
    fn line(&mut self, raw: &str) -> Option<MdLine> {
        if self.fence.is_some() {
            return self.code_line(raw);
        }
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
        let other = quote_line(rest).or_else(|| table_line(rest));
        Some(other.unwrap_or_else(|| self.paragraph(lead, rest)))
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
        let base = self.continuation_col(lead);
        self.fence = Some(Fence {
            ch,
            len,
            indent: lead,
            base,
        });
        let margin = base + CODE_MARGIN;
        let label = info.split_whitespace().next();
        Some(label.map(|lang| md(vec![Span::styled(" ".repeat(margin) + lang, DIM)], margin)))
    }

    /// A line inside a fence: the closing fence renders nothing, code renders verbatim.
    fn code_line(&mut self, raw: &str) -> Option<MdLine> {
        let fence = self.fence.as_ref()?;
        let (_, rest) = split_lead(raw);
        let n = run_len(rest, 0, fence.ch);
        if n >= fence.len && rest[n..].trim().is_empty() {
            self.fence = None;
            return None;
        }
        let mut code_text = raw;
        for _ in 0..fence.indent {
            code_text = code_text.strip_prefix(' ').unwrap_or(code_text);
        }
        let margin = fence.base + CODE_MARGIN;
        if code_text.is_empty() {
            return Some(md(Vec::new(), margin));
        }
        let spans = vec![
            Span::raw(" ".repeat(margin)),
            Span::styled(code_text.to_string(), CODE),
        ];
        Some(md(spans, margin))
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
    let mut spans = vec![Span::styled(QUOTE_BAR.repeat(depth), DIM)];
    spans.extend(inline(content.trim_end(), ITALIC));
    Some(md(spans, text::width(QUOTE_BAR) * depth))
}

fn table_line(rest: &str) -> Option<MdLine> {
    if !rest.starts_with('|') {
        return None;
    }
    let row = rest.trim_end().to_string();
    let delimiter = row.contains('-') && row.chars().all(|c| matches!(c, '|' | '-' | ':' | ' '));
    let style = if delimiter { DIM } else { Style::default() };
    Some(md(vec![Span::styled(row, style)], 0))
}

// ---------------------------------------------------------------------------------------------
// Inline level: code spans, emphasis, strikethrough, links, autolinks, escapes.

/// Spans being built; adjacent text in the same style joins one span.
#[derive(Default)]
struct Spans(Vec<Span<'static>>);

impl Spans {
    fn push(&mut self, s: &str, style: Style) {
        if s.is_empty() {
            return;
        }
        match self.0.last_mut() {
            Some(last) if last.style == style => last.content.to_mut().push_str(s),
            _ => self.0.push(Span::styled(s.to_string(), style)),
        }
    }
}

/// Parses the inline markup of `s` on top of `style`.
fn inline(s: &str, style: Style) -> Vec<Span<'static>> {
    let mut out = Spans::default();
    inline_into(s, style, &mut out);
    out.0
}

fn inline_into(s: &str, style: Style, out: &mut Spans) {
    let mut i = 0;
    while let Some(c) = first(&s[i..]) {
        let next = match c {
            '\\' => escape(s, i, style, out),
            '`' => Some(code_span(s, i, style, out)),
            '*' | '_' => Some(emphasis(s, i, c, style, out)),
            '~' => Some(strikethrough(s, i, style, out)),
            '[' => link_span(s, i, style, out),
            '<' => autolink_span(s, i, style, out),
            _ => None,
        };
        i = next.unwrap_or_else(|| {
            out.push(&s[i..i + c.len_utf8()], style);
            i + c.len_utf8()
        });
    }
}

/// The first character of `s`.
fn first(s: &str) -> Option<char> {
    s.chars().next()
}

/// Bytes in the run of `c` (an ASCII character) starting at `i`.
fn run_len(s: &str, i: usize, c: char) -> usize {
    s[i..].chars().take_while(|x| *x == c).count()
}

fn escape(s: &str, i: usize, style: Style, out: &mut Spans) -> Option<usize> {
    let c = first(&s[i + 1..]).filter(char::is_ascii_punctuation)?;
    out.push(&s[i + 1..i + 2], style);
    Some(i + 1 + c.len_utf8())
}

/// The end of the code span opening at `i`, if its closing run exists.
fn code_end(s: &str, i: usize) -> Option<usize> {
    let n = run_len(s, i, '`');
    let mut j = i + n;
    while let Some(k) = s[j..].find('`') {
        let m = run_len(s, j + k, '`');
        if m == n {
            return Some(j + k + m);
        }
        j += k + m;
    }
    None
}

fn code_span(s: &str, i: usize, style: Style, out: &mut Spans) -> usize {
    let n = run_len(s, i, '`');
    let Some(end) = code_end(s, i) else {
        out.push(&s[i..i + n], style);
        return i + n;
    };
    let mut body = &s[i + n..end - n];
    if body.len() >= 2 && body.starts_with(' ') && body.ends_with(' ') && !body.trim().is_empty() {
        body = &body[1..body.len() - 1];
    }
    out.push(body, style.patch(CODE));
    end
}

/// Where the `n` `c`s closing an opener that ends at `from` start. Skips escapes and code
/// spans; inner openers of the same character need their closers first, and a closing run may
/// serve an inner opener and this one at once (`**bold *it***`).
fn find_closer(s: &str, from: usize, c: char, n: usize) -> Option<usize> {
    // Characters of inner openers still waiting for their closers.
    let (mut j, mut open) = (from, 0usize);
    while let Some(ch) = first(&s[j..]) {
        if ch == '\\' {
            j += 1 + first(&s[j + 1..]).map_or(0, char::len_utf8);
            continue;
        }
        if ch == '`' {
            j = code_end(s, j).unwrap_or(j + run_len(s, j, '`'));
            continue;
        }
        if ch != c {
            j += ch.len_utf8();
            continue;
        }
        let m = run_len(s, j, c);
        let before = s[..j].chars().next_back();
        let after = first(&s[j + m..]);
        let word = |x: Option<char>| c == '_' && x.is_some_and(char::is_alphanumeric);
        let closes = j > from && before.is_some_and(|b| !b.is_whitespace()) && !word(after);
        let opens = after.is_some_and(|a| !a.is_whitespace()) && !word(before);
        if closes && m == n + open {
            return Some(j + open);
        }
        if closes && m <= open {
            open -= m;
        } else if opens {
            open += m;
        }
        j += m;
    }
    None
}

fn emphasis(s: &str, i: usize, c: char, style: Style, out: &mut Spans) -> usize {
    let n = run_len(s, i, c);
    let before = s[..i].chars().next_back();
    let after = first(&s[i + n..]);
    let can_open = after.is_some_and(|a| !a.is_whitespace())
        && (c != '_' || !before.is_some_and(char::is_alphanumeric));
    if !can_open || n > 3 {
        out.push(&s[i..i + n], style);
        return i + n;
    }
    let Some(j) = find_closer(s, i + n, c, n) else {
        // Try again one character later (`**a*` is a literal `*` then italic `a`).
        out.push(&s[i..i + 1], style);
        return i + 1;
    };
    let inner = match n {
        1 => ITALIC,
        2 => BOLD,
        _ => BOLD.patch(ITALIC),
    };
    inline_into(&s[i + n..j], style.patch(inner), out);
    j + n
}

fn strikethrough(s: &str, i: usize, style: Style, out: &mut Spans) -> usize {
    let n = run_len(s, i, '~');
    let opens = first(&s[i + n..]).is_some_and(|a| !a.is_whitespace());
    match find_closer(s, i + n, '~', 2).filter(|_| n == 2 && opens) {
        Some(j) => {
            inline_into(&s[i + 2..j], style.patch(STRIKE), out);
            j + 2
        }
        None => {
            out.push(&s[i..i + n], style);
            i + n
        }
    }
}

/// The index of the `]` closing the `[` at `i` (nested brackets, escapes and code skipped).
fn label_end(s: &str, i: usize) -> Option<usize> {
    let (mut j, mut depth) = (i + 1, 0usize);
    while let Some(ch) = first(&s[j..]) {
        match ch {
            '\\' => j += first(&s[j + 1..]).map_or(0, char::len_utf8),
            '`' => j = code_end(s, j).unwrap_or(j + 1) - 1,
            '[' => depth += 1,
            ']' if depth == 0 => return Some(j),
            ']' => depth -= 1,
            _ => {}
        }
        j += ch.len_utf8();
    }
    None
}

/// The index of the `)` closing the `(` at `i` (balanced parentheses inside).
fn target_end(s: &str, i: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (k, ch) in s[i + 1..].char_indices() {
        match ch {
            '(' => depth += 1,
            ')' if depth == 0 => return Some(i + 1 + k),
            ')' => depth -= 1,
            _ => {}
        }
    }
    None
}

fn link_span(s: &str, i: usize, style: Style, out: &mut Spans) -> Option<usize> {
    let close = label_end(s, i)?;
    if !s[close + 1..].starts_with('(') {
        return None;
    }
    let end = target_end(s, close + 1)?;
    let target = s[close + 2..end].split_whitespace().next()?;
    let url = target.trim_start_matches('<').trim_end_matches('>');
    let label = inline(&s[i + 1..close], style.patch(LINK));
    let label_text: String = label.iter().map(|sp| sp.content.as_ref()).collect();
    for span in label {
        out.push(&span.content, span.style);
    }
    if label_text != url && !url.is_empty() {
        out.push(&format!(" ({url})"), style.patch(DIM));
    }
    Some(end + 1)
}

fn autolink_span(s: &str, i: usize, style: Style, out: &mut Spans) -> Option<usize> {
    let end = i + s[i..].find('>')?;
    let url = &s[i + 1..end];
    let scheme = ["http://", "https://", "mailto:"]
        .iter()
        .any(|p| url.starts_with(p));
    if !scheme || url.contains(|c: char| c.is_whitespace() || c == '<') {
        return None;
    }
    out.push(url, style.patch(LINK));
    Some(end + 1)
}

#[cfg(test)]
mod tests {
    use super::super::paint;
    use super::*;

    fn text_of(l: &MdLine) -> String {
        l.line.spans.iter().map(|s| s.content.as_ref()).collect()
    }

    fn texts(lines: &[MdLine]) -> Vec<String> {
        lines.iter().map(text_of).collect()
    }

    /// The rendered texts joined by newlines.
    fn lines(out: &[MdLine]) -> String {
        texts(out).join("\n")
    }

    /// The style of the span whose text is exactly `piece` (panics when there is none).
    fn style_of(l: &MdLine, piece: &str) -> Style {
        let found = l.line.spans.iter().find(|s| s.content == piece);
        found
            .unwrap_or_else(|| panic!("no span {piece:?} in {:?}", l.line))
            .style
    }

    fn has(style: Style, m: Modifier) -> bool {
        style.add_modifier.contains(m)
    }

    #[test]
    fn headings_drop_markers_and_are_styled_by_level() {
        let out = render("# One #\n## Two\n### Three `x`\n#nope\n####### seven");
        assert_eq!(lines(&out), "One\nTwo\nThree x\n#nope\n####### seven");
        let one = style_of(&out[0], "One");
        assert!(has(one, Modifier::BOLD) && has(one, Modifier::UNDERLINED));
        assert_eq!(one.fg, Some(Color::Magenta));
        assert_eq!(style_of(&out[1], "Two").fg, Some(Color::Cyan));
        let three = style_of(&out[2], "Three ");
        assert!(has(three, Modifier::BOLD) && !has(three, Modifier::UNDERLINED));
        assert_eq!(three.fg, None);
        assert_eq!(style_of(&out[2], "x").fg, CODE.fg);
        assert_eq!(style_of(&out[3], "#nope"), Style::default());
    }

    #[test]
    fn nested_lists_get_bullets_and_hanging_indents() {
        let src = "- one\n  - two\n    * three\n  + back\n- [ ] todo\n- [x] done\n1. first\n10) tenth\n   - under";
        let out = render(src);
        assert_eq!(
            lines(&out),
            "• one\n  ◦ two\n    ◦ three\n  ◦ back\n☐ todo\n☑ done\n1. first\n10) tenth\n  ◦ under"
        );
        let indents: Vec<usize> = out.iter().map(|l| l.indent).collect();
        assert_eq!(indents, [2, 4, 6, 4, 2, 2, 3, 4, 4]);
    }

    #[test]
    fn list_continuation_lines_align_with_the_item_text() {
        let out = render("1. step\n\n   more about it\n\nafter");
        assert_eq!(lines(&out), "1. step\n\n   more about it\n\nafter");
        assert_eq!(out[2].indent, 3);
        assert_eq!(out[4].indent, 0);
    }

    #[test]
    fn quotes_rules_and_tables() {
        let out =
            render("> quoted *it*\n> > deeper\n---\n* * *\n| a | b |\n|---|:-:|\n| `x` | **y** |");
        let rule = RULE.repeat(20);
        let want = format!(
            "│ quoted it\n│ │ deeper\n{rule}\n{rule}\n| a | b |\n|---|:-:|\n| `x` | **y** |"
        );
        assert_eq!(lines(&out), want);
        assert!(has(style_of(&out[0], "│ "), Modifier::DIM));
        assert!(has(style_of(&out[0], "quoted it"), Modifier::ITALIC));
        assert_eq!((out[0].indent, out[1].indent), (2, 4));
        assert!(has(out[2].line.spans[0].style, Modifier::DIM));
        assert!(!has(out[4].line.spans[0].style, Modifier::DIM));
        assert!(has(out[5].line.spans[0].style, Modifier::DIM));
    }

    #[test]
    fn code_blocks_are_verbatim_with_a_margin() {
        let src = "````rust\n# not a heading\n- not a list\n> **no** `inline`\n\n\n~~~\n```\n````\n~~~\n```\n~~\n~~~~\nafter";
        let out = render(src);
        assert_eq!(
            lines(&out),
            "  rust\n  # not a heading\n  - not a list\n  > **no** `inline`\n\n\n  ~~~\n  ```\n  ```\n  ~~\nafter"
        );
        assert!(has(style_of(&out[0], "  rust"), Modifier::DIM));
        assert_eq!(style_of(&out[1], "# not a heading"), CODE);
        assert!(out[..10].iter().all(|l| l.indent == 2));
        assert_eq!(style_of(&out[10], "after"), Style::default());
    }

    #[test]
    fn fence_without_language_and_unclosed_fence_at_finish() {
        let mut s = MarkdownStream::new();
        let mut out = s.push("text\n```\nlet a = 1;\n");
        out.extend(s.push("  indented"));
        out.extend(s.finish());
        assert_eq!(lines(&out), "text\n  let a = 1;\n    indented");
        // A finished stream starts fresh: no fence carried over.
        assert_eq!(texts(&s.push("# h\n")), ["h"]);
    }

    #[test]
    fn fenced_code_inside_a_list_item_keeps_its_column() {
        let out = render("1. run:\n   ```sh\n   cargo test\n   ```\n2. done");
        assert_eq!(lines(&out), "1. run:\n     sh\n     cargo test\n2. done");
        assert_eq!(out[2].indent, 5);
    }

    #[test]
    fn blank_lines_collapse_outside_code() {
        let out = render("\n\na\n\n\n\nb\n```\n\n\n```\n");
        assert_eq!(lines(&out), "a\n\nb\n\n");
    }

    #[test]
    fn inline_markup() {
        let out = render("a `c` **b** *i* _u_ ~~s~~ snake_case_name \\*lit\\* **unclosed *x");
        assert_eq!(
            lines(&out),
            "a c b i u s snake_case_name *lit* **unclosed *x"
        );
        let l = &out[0];
        assert_eq!(style_of(l, "c"), CODE);
        assert!(has(style_of(l, "b"), Modifier::BOLD));
        assert!(has(style_of(l, "i"), Modifier::ITALIC));
        assert!(has(style_of(l, "u"), Modifier::ITALIC));
        assert!(has(style_of(l, "s"), Modifier::CROSSED_OUT));
        let plain = render("one__two__three | 2 * 3 * 4 | a ~ b | `` `tick` `` | * | __ | _a_b");
        assert_eq!(
            lines(&plain),
            "one__two__three | 2 * 3 * 4 | a ~ b | `tick` | * | __ | _a_b"
        );
        let spans = &plain[0].line.spans;
        let styled = spans.iter().filter(|s| s.style != Style::default());
        assert_eq!(styled.count(), 1, "only the code span is styled");
        assert_eq!(style_of(&plain[0], "`tick`"), CODE);
    }

    #[test]
    fn nested_emphasis() {
        let out = render("**bold *both* bold** *it **both** it* ***all*** **b *both***");
        let l = &out[0];
        assert_eq!(text_of(l), "bold both bold it both it all b both");
        let both = l.line.spans.iter().filter(|s| s.content == "both");
        let bold_italic =
            |s: &&Span| has(s.style, Modifier::BOLD) && has(s.style, Modifier::ITALIC);
        assert_eq!(both.filter(bold_italic).count(), 3);
        let all = style_of(l, "all");
        assert!(has(all, Modifier::BOLD) && has(all, Modifier::ITALIC));
        assert!(!has(style_of(l, "bold "), Modifier::ITALIC));
    }

    #[test]
    fn links_and_autolinks() {
        let src = "see [the docs](https://x.dev/a_(b)) or [https://y.io](https://y.io), <https://z.org/p>, [no link], <b>";
        let out = render(src);
        assert_eq!(
            lines(&out),
            "see the docs (https://x.dev/a_(b)) or https://y.io, https://z.org/p, [no link], <b>"
        );
        let l = &out[0];
        assert!(has(style_of(l, "the docs"), Modifier::UNDERLINED));
        assert!(has(style_of(l, " (https://x.dev/a_(b))"), Modifier::DIM));
        assert!(has(style_of(l, "https://y.io"), Modifier::UNDERLINED));
        assert!(has(style_of(l, "https://z.org/p"), Modifier::UNDERLINED));
    }

    #[test]
    fn pending_shows_the_half_streamed_line_in_its_block() {
        let mut s = MarkdownStream::new();
        assert_eq!(s.pending(), None);
        assert!(s.push("## Hea").is_empty());
        let p = s.pending().expect("pending heading");
        assert_eq!(text_of(&p), "Hea");
        assert_eq!(style_of(&p, "Hea").fg, Some(Color::Cyan));
        assert_eq!(texts(&s.push("ding\n- it")), ["Heading"]);
        let p = s.pending().expect("pending item");
        assert_eq!((text_of(&p), p.indent), ("• it".to_string(), 2));
        assert_eq!(texts(&s.push("em\n```py\nx = ")), ["• item", "  py"]);
        let p = s.pending().expect("pending code");
        assert_eq!(text_of(&p), "  x = ");
        assert_eq!(style_of(&p, "x = "), CODE);
        assert_eq!(texts(&s.push("1\n")), ["  x = 1"]);
        assert_eq!(s.pending(), None);
    }

    #[test]
    fn pending_matches_what_finish_renders() {
        for doc in DOCS {
            let mut s = MarkdownStream::new();
            s.push(doc);
            let pending = s.pending();
            let finished = s.finish();
            assert_eq!(pending.into_iter().collect::<Vec<_>>(), finished, "{doc:?}");
        }
    }

    const DOCS: [&str; 5] = [
        "# Title\n\nSome **bold** and *it* text with `code`.\n\n- one\n  - two 日本語\n- [x] done\n\n```rust\nfn main() {}\n```\n\nend",
        "> quote 👩\u{200d}💻\n> > nested\n\n1. a\n2) b\n   more\n\n---\n| a | b |\n|---|---|\n~~~\n# lit\n~~~\r\ntrailing",
        "\n\n\ne\u{301}e\u{301} [link](https://example.com/x) <https://a.b> snake_case \\*x\\* ~~gone~~\n```\nunclosed\n\n\ncode",
        "## 見出し\n* 箇条書き **太字**と*斜体*\n  1. 番号 `コード`\n\n\n\n***\n__bold__ _it_ ***both***",
        "plain line without newline at the end, with ```inline``` fence-like text and ``` later",
    ];

    /// A tiny xorshift so the split test is deterministic.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn pick(&mut self, from: &[usize]) -> usize {
            from[self.next() as usize % from.len()]
        }
    }

    #[test]
    fn any_split_into_deltas_renders_like_the_whole_text() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for doc in DOCS {
            let whole = render(doc);
            let bounds: Vec<usize> = doc.char_indices().map(|(i, _)| i).skip(1).collect();
            for _ in 0..250 {
                let n = rng.next() % 12;
                let mut cuts: Vec<usize> = (0..n).map(|_| rng.pick(&bounds)).collect();
                cuts.sort_unstable();
                cuts.dedup();
                let mut s = MarkdownStream::new();
                let (mut out, mut at) = (Vec::new(), 0);
                for cut in cuts.into_iter().chain([doc.len()]) {
                    out.extend(s.push(&doc[at..cut]));
                    at = cut;
                }
                out.extend(s.finish());
                assert_eq!(out, whole, "{doc:?}");
            }
        }
        // Char by char, the finest split.
        for doc in DOCS {
            let mut s = MarkdownStream::new();
            let mut out: Vec<MdLine> = doc.chars().flat_map(|c| s.push(&c.to_string())).collect();
            out.extend(s.finish());
            assert_eq!(out, render(doc));
        }
    }

    #[test]
    fn wrapped_output_never_exceeds_the_width() {
        let long = "- 日本語のテキストと👩\u{200d}💻絵文字 e\u{301}e\u{301} with a **verylongboldwordthatneverends** and [a link](https://example.com/a/very/long/path)\n> 引用 quoted text that goes on and on\n```\n\tcode\twith\ttabs 日本語日本語日本語日本語\n```\n1. 番号付きリストの項目がとても長い場合の折り返し";
        for doc in DOCS.iter().chain([&long]) {
            for l in render(doc) {
                for width in 10..=60 {
                    for w in paint::wrap_line(&l.line, width, l.indent) {
                        let used = paint::line_width(&w);
                        assert!(used <= width, "{:?} is {used} wide at {width}", text_of(&l));
                    }
                }
            }
        }
    }
}
