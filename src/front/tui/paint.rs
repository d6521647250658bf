//! Styled lines for the TUI: measuring, wrapping, cutting and drawing ratatui `Line`s with the
//! grapheme widths of `crate::text` (so the ambiguous-width setting and ZWJ emoji are measured
//! the same way everywhere). Pure: draws into a `Buffer`, never writes to a terminal.

use std::num::NonZeroU16;

use ratatui::buffer::{Buffer, CellDiffOption, CellWidth};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use unicode_segmentation::UnicodeSegmentation;

use crate::text;

/// Display width of a styled line in columns.
pub fn line_width(line: &Line<'_>) -> usize {
    line.spans.iter().map(|s| text::width(&s.content)).sum()
}

/// The spans of `line` as (sanitized text, effective style) pieces: the line's own style is
/// the base each span's style is patched onto.
fn pieces(line: &Line<'_>) -> Vec<(String, Style)> {
    line.spans
        .iter()
        .map(|s| (text::sanitize(&s.content), line.style.patch(s.style)))
        .collect()
}

fn to_line(pieces: Vec<(String, Style)>) -> Line<'static> {
    Line::from(
        pieces
            .into_iter()
            .map(|(t, s)| Span::styled(t, s))
            .collect::<Vec<_>>(),
    )
}

/// Word-wraps a styled line to `width` columns. Continuation lines start with `indent` spaces
/// (a hanging indent for list items and prefixed cells); the indent is capped so at least half
/// the width stays for text. A word wider than a row is cut at the width and goes on at the
/// start of the next row with nothing added, so a long path or URL copies back whole. Every
/// returned line fits in `width`.
pub fn wrap_line(line: &Line<'_>, width: usize, indent: usize) -> Vec<Line<'static>> {
    let width = width.max(1);
    let indent = indent.min(width / 2);
    let pieces = pieces(line);
    // Most lines fit: measuring them is much cheaper than breaking them into tokens.
    if pieces.iter().map(|(t, _)| text::width(t)).sum::<usize>() <= width {
        return vec![to_line(pieces)];
    }
    text::wrap_hanging(&pieces, width, width - indent)
        .into_iter()
        .enumerate()
        .map(|(i, row)| {
            let mut pieces = row.pieces;
            if i > 0 && indent > 0 && !row.continues_word {
                pieces.insert(0, (" ".repeat(indent), Style::default()));
            }
            to_line(pieces)
        })
        .collect()
}

/// Wraps several lines (see [`wrap_line`]).
pub fn wrap_lines(lines: &[Line<'_>], width: usize, indent: usize) -> Vec<Line<'static>> {
    lines
        .iter()
        .flat_map(|l| wrap_line(l, width, indent))
        .collect()
}

/// Cuts a styled line to at most `max` columns, ending with `…` when something was cut.
pub fn truncate_line(line: &Line<'_>, max: usize) -> Line<'static> {
    let pieces = pieces(line);
    if pieces.iter().map(|(t, _)| text::width(t)).sum::<usize>() <= max {
        return to_line(pieces);
    }
    let mut out: Vec<(String, Style)> = Vec::new();
    let mut used = 0;
    // The ellipsis is ambiguous-width itself: measured, not assumed to be one column.
    let ellipsis = text::width("…");
    let mut last_style = Style::default();
    'outer: for (t, style) in pieces {
        last_style = style;
        let mut kept = String::new();
        for g in t.graphemes(true) {
            let w = text::grapheme_width(g);
            if used + w + ellipsis > max {
                if !kept.is_empty() {
                    out.push((kept, style));
                }
                break 'outer;
            }
            kept.push_str(g);
            used += w;
        }
        if !kept.is_empty() {
            out.push((kept, style));
        }
    }
    if max >= ellipsis {
        out.push(("…".into(), last_style));
    }
    to_line(out)
}

/// Pads `line` with spaces in its last span's style up to `width` columns, so the terminal
/// gets the row written to its last column. The live area's last row is filled this way: on a
/// terminal that reflows, any narrowing then rewraps a row at or below the cursor, so the
/// cursor row it reports tells a reflow (the cursor moved) from a plain cut (it did not).
pub fn fill_line(mut line: Line<'static>, width: usize) -> Line<'static> {
    let used = line_width(&line);
    if used < width {
        let style = line.spans.last().map(|s| s.style).unwrap_or_default();
        line.spans
            .push(Span::styled(" ".repeat(width - used), style));
    }
    line
}

/// Draws `line` into `buf` at (`x`, `y`), cut at `max` columns (a wide cluster that would
/// cross the edge is left out). Cells of a wide cluster after the first are reset, as ratatui
/// does; where `crate::text` counts a cluster wider than ratatui would (ambiguous-width
/// characters on a CJK terminal), the cell's width is forced so the diff never writes over the
/// glyph. Returns the columns used. Positions outside the buffer are ignored.
pub fn put_line(buf: &mut Buffer, x: u16, y: u16, line: &Line<'_>, max: u16) -> u16 {
    let area = buf.area;
    if y < area.y || y >= area.bottom() || x >= area.right() {
        return 0;
    }
    let max = max.min(area.right() - x) as usize;
    let mut col = 0usize;
    for span in &line.spans {
        let style = line.style.patch(span.style);
        let content = span.content.as_ref();
        // Printable ASCII (most of what is drawn): one byte, one cell.
        if content.bytes().all(|b| (0x20..0x7f).contains(&b)) {
            for i in 0..content.len() {
                if col + 1 > max {
                    return col as u16;
                }
                buf[(x + col as u16, y)]
                    .set_symbol(&content[i..i + 1])
                    .set_style(style);
                col += 1;
            }
            continue;
        }
        for g in content.graphemes(true) {
            let clean;
            let g = if g.chars().any(char::is_control) {
                clean = text::sanitize(g);
                clean.as_str()
            } else {
                g
            };
            for sub in g.graphemes(true) {
                let w = text::grapheme_width(sub);
                if w == 0 {
                    // A lone zero-width cluster: attach it to the previous cell.
                    if col > 0 {
                        let prev = &mut buf[(x + col as u16 - 1, y)];
                        let joined = format!("{}{sub}", prev.symbol());
                        prev.set_symbol(&joined);
                    }
                    continue;
                }
                if col + w > max {
                    return col as u16;
                }
                let cx = x + col as u16;
                buf[(cx, y)].set_symbol(sub).set_style(style);
                if w != sub.cell_width() as usize {
                    if let Some(forced) = NonZeroU16::new(w as u16) {
                        buf[(cx, y)].set_diff_option(CellDiffOption::ForcedWidth(forced));
                    }
                }
                for i in 1..w {
                    let cell = &mut buf[(cx + i as u16, y)];
                    cell.reset();
                    cell.set_style(style);
                }
                col += w;
            }
        }
    }
    col as u16
}

/// Fills row `y` of `buf` from `x` to its right edge with spaces in `style`.
pub fn clear_row(buf: &mut Buffer, x: u16, y: u16, style: Style) {
    let area = buf.area;
    if y < area.y || y >= area.bottom() {
        return;
    }
    for cx in x.max(area.x)..area.right() {
        let cell = &mut buf[(cx, y)];
        cell.reset();
        cell.set_style(style);
    }
}

/// The text of one buffer row, for tests and snapshots (skipped and covered cells omitted).
pub fn row_text(buf: &Buffer, y: u16) -> String {
    let mut s = String::new();
    let mut skip = 0usize;
    for x in buf.area.x..buf.area.right() {
        let cell = &buf[(x, y)];
        if skip > 0 {
            skip -= 1;
            continue;
        }
        s.push_str(cell.symbol());
        skip = (cell.cell_width() as usize).saturating_sub(1);
    }
    s.trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::layout::Rect;
    use ratatui::style::{Color, Modifier};

    fn plain(lines: &[Line<'_>]) -> Vec<String> {
        lines
            .iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect()
    }

    #[test]
    fn wrap_keeps_styles_and_indents_continuations() {
        let line = Line::from(vec![
            Span::styled("- ", Style::default().fg(Color::Cyan)),
            Span::raw("one two three four five"),
        ]);
        let wrapped = wrap_line(&line, 10, 2);
        assert_eq!(
            plain(&wrapped),
            ["- one two", "  three", "  four", "  five"]
        );
        assert_eq!(wrapped[0].spans[0].style.fg, Some(Color::Cyan));
        for l in &wrapped {
            assert!(line_width(l) <= 10);
        }
    }

    /// The fast paths (a line that fits, printable ASCII) draw what the general ones draw.
    #[test]
    fn fast_paths_draw_what_the_general_paths_draw() {
        let bold = Style::default().add_modifier(ratatui::style::Modifier::BOLD);
        let line = Line::from(vec![Span::raw("ab cd "), Span::styled("éf", bold)]);
        assert_eq!(wrap_line(&line, 8, 2), vec![line.clone()]);
        let rows = wrap_line(&line, 5, 2);
        let texts: Vec<String> = rows
            .iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect();
        assert_eq!(texts, ["ab cd", "  éf"]);
        // ASCII drawn byte by byte, then the rest by grapheme, cut at `max`, styles kept.
        let mut buf = Buffer::empty(Rect::new(0, 0, 10, 1));
        assert_eq!(put_line(&mut buf, 0, 0, &line, 7), 7);
        assert_eq!(row_text(&buf, 0), "ab cd é");
        assert_eq!(buf[(6, 0)].modifier, ratatui::style::Modifier::BOLD);
        assert_eq!(buf[(2, 0)].modifier, ratatui::style::Modifier::empty());
    }

    /// Regression: re-wrapping the continuation joined the pieces of a cut word with a space.
    #[test]
    fn a_word_wider_than_a_row_is_cut_with_nothing_added() {
        let line = Line::raw("file: /a/very/long/path/name.jsonl end");
        let wrapped = plain(&wrap_line(&line, 12, 2));
        assert_eq!(
            wrapped,
            ["file:", "  /a/very/lo", "ng/path/name", ".jsonl end"]
        );
        let line = Line::raw("see: /a/very/long/path");
        assert_eq!(
            plain(&wrap_line(&line, 10, 2)),
            ["see:", "  /a/very/", "long/path"]
        );
    }

    #[test]
    fn truncate_cuts_wide_text_with_an_ellipsis() {
        let line = Line::from(vec![Span::raw("日本"), Span::raw("語です")]);
        assert_eq!(plain(&[truncate_line(&line, 5)]), ["日本…"]);
        assert_eq!(plain(&[truncate_line(&line, 20)]), ["日本語です"]);
    }

    #[test]
    fn put_line_handles_wide_and_ambiguous_clusters() {
        let mut buf = Buffer::empty(Rect::new(0, 0, 8, 2));
        let used = put_line(&mut buf, 0, 0, &Line::raw("a日b👩\u{200d}💻c"), 8);
        assert_eq!(used, 7);
        assert_eq!(row_text(&buf, 0), "a日b👩\u{200d}💻c");
        // Cut before a wide cluster that would cross the edge.
        let used = put_line(&mut buf, 0, 1, &Line::raw("abcdefg日"), 8);
        assert_eq!(used, 7);
        text::set_ambiguous_wide(true);
        let mut buf = Buffer::empty(Rect::new(0, 0, 6, 1));
        let used = put_line(&mut buf, 0, 0, &Line::raw("±x"), 6);
        text::set_ambiguous_wide(false);
        assert_eq!(used, 3);
        let diff = Buffer::empty(buf.area).diff(&buf);
        let written: Vec<u16> = diff.iter().map(|(x, _, _)| *x).collect();
        assert_eq!(
            written,
            [0, 2],
            "the cell under the wide ± is never written"
        );
        assert_eq!(buf[(2, 0)].symbol(), "x");
    }

    #[test]
    fn put_line_applies_line_style_under_span_style() {
        let mut buf = Buffer::empty(Rect::new(0, 0, 4, 1));
        let line = Line::from(Span::styled("ab", Style::default().fg(Color::Red)))
            .style(Style::default().add_modifier(Modifier::DIM));
        put_line(&mut buf, 0, 0, &line, 4);
        assert_eq!(buf[(0, 0)].fg, Color::Red);
        assert!(buf[(0, 0)].modifier.contains(Modifier::DIM));
    }
}
