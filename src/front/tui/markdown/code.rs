//! Fenced code in the TUI: the open fence's state, its language label, and each code line,
//! highlighted by `crate::text::highlight` when the info string names a language it knows
//! (plain, in the inline-code colour, when not). Colours are foreground only; comments are
//! dim and italic, so code stays legible when colours are dropped.

use ratatui::style::{Color, Style};
use ratatui::text::Span;

use super::block::split_lead;
use super::inline::run_len;
use super::{md, MdLine, CODE, DIM, ITALIC};
use crate::text::highlight::{Class, Highlighter};

/// Left margin of fenced code lines and of the fence's language label.
const CODE_MARGIN: usize = 2;

/// An open code fence.
#[derive(Debug, Clone)]
pub(super) struct Fence {
    ch: char,
    len: usize,
    /// Leading spaces of the opening fence, stripped from code lines.
    indent: usize,
    /// Rendered column the block starts at (the content column of an enclosing list item).
    base: usize,
    /// The language's highlighter; None for no language or one without a grammar.
    highlighter: Option<Highlighter>,
}

/// The terminal style of a highlight class.
pub(super) fn style(class: Class) -> Style {
    let fg = |c: Color| Style::new().fg(c);
    match class {
        Class::Plain => Style::new(),
        Class::Keyword => fg(Color::Magenta),
        Class::Type | Class::Attribute | Class::Meta => fg(Color::Cyan),
        Class::Function | Class::Tag => fg(Color::Blue),
        Class::String | Class::Inserted => fg(Color::Green),
        Class::Number | Class::Constant => fg(Color::Yellow),
        Class::Comment => DIM.patch(ITALIC),
        Class::Deleted => fg(Color::Red),
    }
}

impl Fence {
    /// Opens a fence of `len` `ch`s indented by `indent`, drawn from column `base`, with the
    /// info string `info`; returns it with the label line (the language, dim) if there is one.
    pub(super) fn open(
        ch: char,
        len: usize,
        indent: usize,
        base: usize,
        info: &str,
    ) -> (Fence, Option<MdLine>) {
        let margin = base + CODE_MARGIN;
        let label = info
            .split_whitespace()
            .next()
            .map(|lang| md(vec![Span::styled(" ".repeat(margin) + lang, DIM)], margin));
        let fence = Fence {
            ch,
            len,
            indent,
            base,
            highlighter: Highlighter::for_info(info),
        };
        (fence, label)
    }

    /// A line inside the fence: None for the closing fence, else the code line (an empty
    /// line for an empty one), verbatim.
    pub(super) fn line(&mut self, raw: &str) -> Option<Option<MdLine>> {
        let (_, rest) = split_lead(raw);
        let n = run_len(rest, 0, self.ch);
        if n >= self.len && rest[n..].trim().is_empty() {
            return None;
        }
        let mut code_text = raw;
        for _ in 0..self.indent {
            code_text = code_text.strip_prefix(' ').unwrap_or(code_text);
        }
        let margin = self.base + CODE_MARGIN;
        if code_text.is_empty() {
            return Some(Some(md(Vec::new(), margin)));
        }
        let mut spans = vec![Span::raw(" ".repeat(margin))];
        match &mut self.highlighter {
            Some(h) => spans.extend(
                h.line(code_text)
                    .into_iter()
                    .map(|(class, t)| Span::styled(t, style(class))),
            ),
            None => spans.push(Span::styled(code_text.to_string(), CODE)),
        }
        Some(Some(md(spans, margin)))
    }
}
