//! Unit tests of the TUI markdown renderer: block and inline markup, streaming, tables, code.

use super::*;

/// The line as one row (laid out wide enough not to wrap).
fn line_of(l: &MdLine) -> Line<'static> {
    let rows = l.rows(10_000);
    assert!(rows.len() <= 1, "{l:?} is not one line");
    rows.into_iter().next().unwrap_or_default()
}

/// The hanging indent of a line's wrapped rows.
fn indent(l: &MdLine) -> usize {
    match l {
        MdLine::Text { indent, .. } => *indent,
        MdLine::Quote { depth, .. } => 2 * depth,
        MdLine::Table(_) => 0,
    }
}

fn text_of(l: &MdLine) -> String {
    line_of(l)
        .spans
        .iter()
        .map(|s| s.content.as_ref())
        .collect()
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
    let line = line_of(l);
    let found = line.spans.iter().find(|s| s.content == piece);
    found
        .unwrap_or_else(|| panic!("no span {piece:?} in {line:?}"))
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
    let indents: Vec<usize> = out.iter().map(indent).collect();
    assert_eq!(indents, [2, 4, 6, 4, 2, 2, 3, 4, 4]);
}

#[test]
fn list_continuation_lines_align_with_the_item_text() {
    let out = render("1. step\n\n   more about it\n\nafter");
    assert_eq!(lines(&out), "1. step\n\n   more about it\n\nafter");
    assert_eq!(indent(&out[2]), 3);
    assert_eq!(indent(&out[4]), 0);
}

#[test]
fn quotes_and_rules() {
    let out = render("> quoted *it*\n> > deeper\n---\n* * *\nnot | a table");
    let rule = "─".repeat(20);
    let want = format!("│ quoted it\n│ │ deeper\n{rule}\n{rule}\nnot | a table");
    assert_eq!(lines(&out), want);
    assert!(has(style_of(&out[0], "│ "), Modifier::DIM));
    assert!(has(style_of(&out[0], "quoted it"), Modifier::ITALIC));
    assert_eq!((indent(&out[0]), indent(&out[1])), (2, 4));
    assert!(has(line_of(&out[2]).spans[0].style, Modifier::DIM));
}

#[test]
fn code_blocks_are_verbatim_with_a_margin() {
    let src = "````text\n# not a heading\n- not a list\n> **no** `inline`\n\n\n~~~\n```\n````\n~~~\n```\n~~\n~~~~\nafter";
    let out = render(src);
    assert_eq!(
        lines(&out),
        "  text\n  # not a heading\n  - not a list\n  > **no** `inline`\n\n\n  ~~~\n  ```\n  ```\n  ~~\nafter"
    );
    assert!(has(style_of(&out[0], "  text"), Modifier::DIM));
    assert_eq!(style_of(&out[1], "# not a heading"), CODE);
    assert!(out[..10].iter().all(|l| indent(l) == 2));
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
    assert_eq!(indent(&out[2]), 5);
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
    let spans = &line_of(&plain[0]).spans;
    let styled = spans.iter().filter(|s| s.style != Style::default());
    assert_eq!(styled.count(), 1, "only the code span is styled");
    assert_eq!(style_of(&plain[0], "`tick`"), CODE);
}

#[test]
fn nested_emphasis() {
    let out = render("**bold *both* bold** *it **both** it* ***all*** **b *both***");
    let l = &out[0];
    assert_eq!(text_of(l), "bold both bold it both it all b both");
    let line = line_of(l);
    let both = line.spans.iter().filter(|s| s.content == "both");
    let bold_italic = |s: &&Span| has(s.style, Modifier::BOLD) && has(s.style, Modifier::ITALIC);
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
    assert!(s.pending().is_empty());
    assert!(s.push("## Hea").is_empty());
    let p = s.pending().pop().expect("pending heading");
    assert_eq!(text_of(&p), "Hea");
    assert_eq!(style_of(&p, "Hea").fg, Some(Color::Cyan));
    assert_eq!(texts(&s.push("ding\n- it")), ["Heading"]);
    let p = s.pending().pop().expect("pending item");
    assert_eq!((text_of(&p), indent(&p)), ("• it".to_string(), 2));
    assert_eq!(
        texts(&s.push("em\n```pseudo\nx = ")),
        ["• item", "  pseudo"]
    );
    let p = s.pending().pop().expect("pending code");
    assert_eq!(text_of(&p), "  x = ");
    assert_eq!(style_of(&p, "x = "), CODE);
    assert_eq!(texts(&s.push("1\n")), ["  x = 1"]);
    assert!(s.pending().is_empty());
}

#[test]
fn pending_matches_what_finish_renders() {
    for doc in DOCS {
        let mut s = MarkdownStream::new();
        s.push(doc);
        let pending = s.pending();
        let finished = s.finish();
        assert_eq!(pending, finished, "{doc:?}");
    }
}

const DOCS: [&str; 6] = [
    "# Title\n\nSome **bold** and *it* text with `code`.\n\n- one\n  - two 日本語\n- [x] done\n\n```rust\nfn main() {}\n```\n\nend",
    "> quote 👩\u{200d}💻\n> > nested\n\n1. a\n2) b\n   more\n\n---\n| a | b |\n|---|---|\n~~~\n# lit\n~~~\r\ntrailing",
    "\n\n\ne\u{301}e\u{301} [link](https://example.com/x) <https://a.b> snake_case \\*x\\* ~~gone~~\n```\nunclosed\n\n\ncode",
    "## 見出し\n* 箇条書き **太字**と*斜体*\n  1. 番号 `コード`\n\n\n\n***\n__bold__ _it_ ***both***",
    "plain line without newline at the end, with ```inline``` fence-like text and ``` later",
    "| Name | 説明 | n |\n|:--|:-:|--:|\n| keel 👩\u{200d}💻 | 日本語のテキスト | 1 |\n| `x` \\| y | **bold** text that wraps | 12345 |\n> a quote long enough to wrap on a narrow terminal\na | b\nnot a table\n| h |\n|---|\n",
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
        // Tables and quotes fit down to 2 columns (the widest grapheme); the rest from 10.
        let narrowest = if doc.starts_with("| Name") { 2 } else { 10 };
        for l in render(doc) {
            // Narrower than a wide grapheme: no panic (rows may not fit).
            let _ = (l.rows(0), l.rows(1));
            for width in narrowest..=60 {
                for w in l.rows(width) {
                    let used = paint::line_width(&w);
                    assert!(used <= width, "{:?} is {used} wide at {width}", text_of(&l));
                }
            }
        }
    }
}

/// The rows of `out` at `width`, as text.
fn rows_at(out: &[MdLine], width: usize) -> Vec<String> {
    out.iter()
        .flat_map(|l| l.rows(width))
        .map(|r| r.spans.iter().map(|s| s.content.as_ref()).collect())
        .collect()
}

#[test]
fn a_table_is_box_drawn_with_the_delimiter_rows_alignment() {
    let out = render("| a | b | c |\n|:--|:-:|--:|\n| 1 | **22** | 333 |\n| x \\| y |");
    assert_eq!(out.len(), 1);
    assert_eq!(
        rows_at(&out, 80),
        [
            "┌───────┬────┬─────┐",
            "│ a     │ b  │   c │",
            "├───────┼────┼─────┤",
            "│ 1     │ 22 │ 333 │",
            "│ x | y │    │     │",
            "└───────┴────┴─────┘",
        ]
    );
    let rows = out[0].rows(80);
    let header = rows[1].spans.iter().find(|s| s.content == "a").unwrap();
    assert!(has(header.style, Modifier::BOLD));
    let bold = rows[3].spans.iter().find(|s| s.content == "22").unwrap();
    assert!(has(bold.style, Modifier::BOLD));
    assert!(has(rows[0].spans[0].style, Modifier::DIM));
}

#[test]
fn a_table_too_wide_wraps_its_widest_column_and_falls_back_to_fields_when_narrow() {
    let out = render("| k | text |\n|---|---|\n| one | alpha beta gamma delta epsilon |");
    assert_eq!(
        rows_at(&out, 24),
        [
            "┌─────┬────────────────┐",
            "│ k   │ text           │",
            "├─────┼────────────────┤",
            "│ one │ alpha beta     │",
            "│     │ gamma delta    │",
            "│     │ epsilon        │",
            "└─────┴────────────────┘",
        ]
    );
    assert_eq!(
        rows_at(&out, 12),
        [
            "────────────",
            "k: one",
            "text:",
            "  alpha beta",
            "  gamma",
            "  delta",
            "  epsilon",
            "────────────",
        ]
    );
}

#[test]
fn a_streamed_table_is_held_until_it_ends_and_shown_live_meanwhile() {
    let mut s = MarkdownStream::new();
    assert!(s.push("| a | b |\n").is_empty(), "a possible header waits");
    assert_eq!(texts(&s.pending()), ["| a | b |"]);
    assert!(s.push("|---|---|\n| 1 | 2 |\n| 3").is_empty());
    let live = s.pending();
    assert!(matches!(live.as_slice(), [MdLine::Table(_)]));
    assert_eq!(rows_at(&live, 40)[4], "│ 3 │   │");
    let done = s.push(" | 4 |\nafter\n");
    assert_eq!(done.len(), 2);
    assert_eq!(rows_at(&done[..1], 40)[4], "│ 3 │ 4 │");
    assert_eq!(text_of(&done[1]), "after");
    assert!(s.pending().is_empty());
}

#[test]
fn a_pipe_line_without_a_delimiter_row_is_a_paragraph() {
    let out = render("a | b\nnext\n| c |\n|-|-|\n");
    assert_eq!(lines(&out), "a | b\nnext\n| c |\n|-|-|");
    assert!(out.iter().all(|l| matches!(l, MdLine::Text { .. })));
    // Past the column cap, a header row stays text; at the cap it is a table.
    for (n, table) in [(64, true), (65, false)] {
        let doc = format!("{}|\n{}|\n", "| h ".repeat(n), "|---".repeat(n));
        let out = render(&doc);
        assert_eq!(matches!(out[0], MdLine::Table(_)), table, "{n} columns");
    }
}

#[test]
fn quote_bars_start_every_wrapped_row() {
    let out = render("> > one two three four five six seven eight");
    let rows = rows_at(&out, 16);
    assert!(rows.len() > 2, "{rows:?}");
    for row in &rows {
        assert!(row.starts_with("│ │ "), "{row:?}");
        assert!(text::width(row) <= 16);
    }
    // Too narrow for both bars: as many as fit in half the width.
    assert!(rows_at(&out, 5)
        .iter()
        .all(|r| r.starts_with("│ ") && !r.starts_with("│ │")));
}

#[test]
fn code_of_a_known_language_is_highlighted_and_unknown_is_plain() {
    let out = render("```rust\nfn main() { \"hi\" } // c\n```\n```zzz\nfn main()\n```");
    assert_eq!(
        lines(&out),
        "  rust\n  fn main() { \"hi\" } // c\n  zzz\n  fn main()"
    );
    assert_eq!(style_of(&out[1], "fn").fg, Some(Color::Magenta));
    assert_eq!(style_of(&out[1], "\"hi\"").fg, Some(Color::Green));
    assert!(has(style_of(&out[1], "// c"), Modifier::ITALIC));
    assert_eq!(style_of(&out[3], "fn main()"), CODE);
}
