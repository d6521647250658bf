//! Inline markdown: code spans, emphasis, strikethrough, links, autolinks and escapes, parsed
//! into styled spans on top of a base style. Pure.

use ratatui::style::Style;
use ratatui::text::Span;

use super::{BOLD, CODE, DIM, ITALIC, LINK, STRIKE};

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
pub(super) fn inline(s: &str, style: Style) -> Vec<Span<'static>> {
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
pub(super) fn first(s: &str) -> Option<char> {
    s.chars().next()
}

/// Bytes in the run of `c` (an ASCII character) starting at `i`.
pub(super) fn run_len(s: &str, i: usize, c: char) -> usize {
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
