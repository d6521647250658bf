//! Markdown in the TUI (issue 16, point 11) as screens fed public events: tables box-drawn
//! (wide cells, wider than the terminal, streaming), fenced code highlighted by language
//! (styles from the drawn cells), blockquote bars on every wrapped row.

use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::style::Color;
use ratatui::Terminal;

use crate::common::support::snap;
use crate::tui::Feed;

fn answer(text: &str) -> Feed {
    let mut f = Feed::new();
    f.user("Show me");
    f.stream(text, 5);
    f.finish(text);
    f
}

/// The drawn screen as a buffer (cells with their styles).
fn buffer(f: &mut Feed, w: u16, h: u16) -> Buffer {
    let mut terminal = Terminal::new(TestBackend::new(w, h)).unwrap();
    terminal
        .draw(|fr| f.view.render_screen(fr.buffer_mut()))
        .unwrap();
    terminal.backend().buffer().clone()
}

fn rows(buf: &Buffer) -> Vec<String> {
    (0..buf.area.height)
        .map(|y| keel::front::tui::paint::row_text(buf, y))
        .collect()
}

/// The display columns of the vertical borders in `row`.
fn bar_columns(row: &str) -> Vec<usize> {
    let mut col = 0;
    let mut out = Vec::new();
    for g in unicode_segmentation::UnicodeSegmentation::graphemes(row, true) {
        if g == "│" || g == "┼" || g == "┬" || g == "┴" {
            out.push(col);
        }
        col += keel::text::width(g);
    }
    out
}

fn assert_fits(screen: &str, width: usize) {
    for line in screen.lines() {
        assert!(
            keel::text::width(line) <= width,
            "wider than {width}: {line:?}"
        );
    }
}

const WIDE_TABLE: &str = "Here is the comparison:\n\n| Tool | 説明 | Status |\n|:-----|:----:|-------:|\n| keel 👩\u{200d}💻 | 日本語のテキスト | ✓ ok |\n| `grep` | 中文 and **bold** | 12 |\n\nThat is all.\n";

#[test]
fn a_table_with_wide_cells_is_box_drawn_with_aligned_borders() {
    Feed::snap_both(|| answer(WIDE_TABLE), "md_table_wide_cells");
    let screen = answer(WIDE_TABLE).screen(80, 24);
    let table: Vec<&str> = screen
        .lines()
        .filter(|l| l.starts_with(['┌', '│', '├', '└']))
        .collect();
    assert_eq!(table.len(), 6, "{screen}");
    let columns = bar_columns(table[1]);
    assert_eq!(columns.len(), 4, "{}", table[1]);
    for row in &table {
        assert_eq!(
            keel::text::width(row),
            keel::text::width(table[0]),
            "{row:?}"
        );
        if row.starts_with('│') {
            assert_eq!(bar_columns(row), columns, "borders out of line: {row:?}");
        }
    }
    // Centred and right-aligned columns, as the delimiter row says.
    assert!(table[3].contains("│ 日本語のテキスト │"), "{}", table[3]);
    assert!(table[4].contains("│     12 │"), "{}", table[4]);
}

const LONG_TABLE: &str = "| name | what it does |\n|---|---|\n| resize | redraws the live area at the new width without leaving any stale rows behind |\n| paste | shows a large paste as a placeholder chip that expands when the prompt is sent |\n";

#[test]
fn a_table_wider_than_the_terminal_wraps_its_cells_and_stays_readable_when_narrow() {
    let mut f = answer(LONG_TABLE);
    let screen = f.screen(40, 16);
    snap("tui_md_table_wider_than_terminal_40x16", &screen);
    assert_fits(&screen, 40);
    let words: String = screen.replace(['│', ' '], "");
    for word in LONG_TABLE.split(['|', ' ', '\n', '-']) {
        assert!(words.contains(word), "{word:?} lost in\n{screen}");
    }
    let narrow = answer(LONG_TABLE).screen(14, 30);
    snap("tui_md_table_narrow_fields_14x30", &narrow);
    assert_fits(&narrow, 14);
    assert!(narrow.contains("name: resize"), "{narrow}");
    for width in 2..=40u16 {
        assert_fits(&answer(LONG_TABLE).screen(width, 40), width as usize);
    }
}

#[test]
fn a_table_being_streamed_is_drawn_in_the_live_area() {
    let mut f = Feed::new();
    f.user("Show me");
    f.stream("| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | ", 4);
    let screen = f.screen(40, 12);
    snap("tui_md_table_streaming_40x12", &screen);
    assert!(screen.contains("│ 3 │"), "{screen}");
    // Finished, the table is committed once.
    f.delta(keel::kernel::event::AssistantDelta::TextDelta {
        index: 0,
        delta: "4 |".into(),
    });
    f.finish("| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |");
    let screen = f.screen(40, 12);
    assert_eq!(screen.matches("┌───┬───┐").count(), 1, "{screen}");
    assert!(screen.contains("│ 3 │ 4 │"), "{screen}");
}

const RUST: &str =
    "```rust\nfn parse(s: &str) -> Vec<&str> { // split it\n    s.split(\",\").collect()\n}\n```\n";

#[test]
fn a_rust_block_is_highlighted_and_its_text_is_intact() {
    let mut f = answer(RUST);
    let buf = buffer(&mut f, 80, 24);
    let rows = rows(&buf);
    let y = rows
        .iter()
        .position(|r| r.trim_start().starts_with("fn parse"))
        .expect("code row");
    assert_eq!(rows[y], "  fn parse(s: &str) -> Vec<&str> { // split it");
    assert_eq!(rows[y + 1], "      s.split(\",\").collect()");
    let fg = |x: usize, y: usize| buf[(x as u16, y as u16)].fg;
    assert_eq!(fg(2, y), Color::Magenta, "`fn` is a keyword");
    assert_eq!(fg(5, y), Color::Blue, "`parse` is a function name");
    let comment = rows[y].find("//").unwrap();
    assert!(buf[(comment as u16, y as u16)]
        .modifier
        .contains(ratatui::style::Modifier::ITALIC));
    let string = rows[y + 1].find('"').unwrap();
    assert_eq!(fg(string, y + 1), Color::Green, "the string literal");
    let colours: std::collections::HashSet<Color> = (2..44).map(|x| fg(x, y)).collect();
    assert!(
        colours.len() >= 3,
        "several styles on one line: {colours:?}"
    );
}

#[test]
fn a_block_of_an_unknown_language_is_plain() {
    let mut f = answer("```zzz\nfn parse(s) { \"x\" }\n```\n");
    let buf = buffer(&mut f, 80, 24);
    let rows = rows(&buf);
    let y = rows.iter().position(|r| r.contains("fn parse")).unwrap();
    assert_eq!(rows[y], "  fn parse(s) { \"x\" }");
    assert!(
        rows[y - 1].ends_with("zzz"),
        "the label stays: {:?}",
        rows[y - 1]
    );
    for x in 2..rows[y].len() {
        assert_eq!(buf[(x as u16, y as u16)].fg, Color::Yellow, "column {x}");
    }
}

const QUOTE: &str = "> Nothing the live area drew may survive a resize, on terminals that reflow and on those that don't.\n> > Nested quotes keep both bars on every row they wrap to.\n";

#[test]
fn a_wrapped_blockquote_keeps_its_bars_on_every_row() {
    Feed::snap_both(|| answer(QUOTE), "md_wrapped_quote");
    let screen = answer(QUOTE).screen(40, 12);
    let quote: Vec<&str> = screen
        .lines()
        .skip_while(|l| !l.starts_with("│ Nothing"))
        .take_while(|l| !l.starts_with('─'))
        .filter(|l| !l.is_empty())
        .collect();
    assert!(quote.len() >= 5, "{screen}");
    for row in &quote {
        assert!(
            row.starts_with("│ "),
            "a quote row without its bar: {row:?}"
        );
    }
    let nested = quote.iter().filter(|r| r.starts_with("│ │ ")).count();
    assert!(
        nested >= 2,
        "the nested quote wraps with both bars: {quote:?}"
    );
}
