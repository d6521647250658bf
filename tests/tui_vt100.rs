//! The TUI's real bytes: every frame of `tui::draw` fed into a terminal emulator (vt100) while
//! an answer streams and after a resize, and what differential frames save over full redraws.

use keel::front::tui::terminal::InlineTerminal;
use keel::front::tui::view::View;
use keel::front::tui::{self};
use keel::kernel::event::{AssistantDelta, EventPayload};
use keel::kernel::message::{Message, StopReason};

use crate::common::support::snap;
use crate::tui::{assistant, Feed};

/// Feeds every frame's bytes into a vt100 screen.
struct Emulator {
    term: InlineTerminal<Vec<u8>>,
    parser: vt100::Parser,
    frames: Vec<Vec<u8>>,
}

impl Emulator {
    fn new(cols: u16, rows: u16, prompt_rows: &[&str]) -> Emulator {
        let mut parser = vt100::Parser::new(nz(rows), nz(cols), 1000);
        for r in prompt_rows {
            parser.process(format!("{r}\r\n").as_bytes());
        }
        let row = parser.screen().cursor_position().0;
        Emulator {
            term: InlineTerminal::new(Vec::new(), cols, rows, row),
            parser,
            frames: Vec::new(),
        }
    }

    fn draw(&mut self, view: &mut View) {
        tui::draw(view, &mut self.term).unwrap();
        let bytes = std::mem::take(self.term.writer_mut());
        self.parser.process(&bytes);
        self.frames.push(bytes);
    }

    fn resize(&mut self, cols: u16, rows: u16) {
        self.parser.screen_mut().set_size(nz(rows), nz(cols));
        let row = self.parser.screen().cursor_position().0;
        self.term.resize(cols, rows, Some(row));
    }

    /// Scrollback then screen, one string per row, trailing spaces dropped.
    fn all_rows(&mut self) -> Vec<String> {
        let screen = self.parser.screen_mut();
        screen.set_scrollback(usize::MAX);
        let back = screen.scrollback();
        let (_, cols) = screen.size();
        let mut rows: Vec<String> = Vec::new();
        // Scroll up page by page to read the scrollback, oldest first.
        let mut offset = back;
        let mut seen = Vec::new();
        while offset > 0 {
            screen.set_scrollback(offset);
            let visible: Vec<String> = screen.rows(0, cols.get()).collect();
            let take = visible.len().min(offset);
            seen.extend(visible.into_iter().take(take));
            offset -= take;
        }
        screen.set_scrollback(0);
        rows.extend(seen);
        rows.extend(screen.rows(0, cols.get()));
        rows.iter().map(|r| r.trim_end().to_string()).collect()
    }

    fn screen_rows(&self) -> Vec<String> {
        let screen = self.parser.screen();
        let (_, cols) = screen.size();
        screen
            .rows(0, cols.get())
            .map(|r| r.trim_end().to_string())
            .collect()
    }
}

fn nz(n: u16) -> std::num::NonZeroU16 {
    std::num::NonZeroU16::new(n).unwrap()
}

const STREAMED: &str = "Here is the plan:\n\n1. read the loader\n2. fix the split at `,`\n3. add a regression test\n\n日本語も大丈夫です。Done.\n";

#[test]
fn real_bytes_stream_into_scrollback_without_full_clears_and_survive_a_resize() {
    let mut emu = Emulator::new(40, 12, &["$ keel", "(earlier shell output)"]);
    let mut f = Feed::new();
    emu.draw(&mut f.view);
    f.user("plan the fix");
    f.send(EventPayload::MessageStarted {
        message: Message::from(assistant(vec![], StopReason::Pending)),
    });
    f.delta(AssistantDelta::TextStarted { index: 0 });
    for piece in STREAMED.chars().collect::<Vec<_>>().chunks(4) {
        f.delta(AssistantDelta::TextDelta {
            index: 0,
            delta: piece.iter().collect(),
        });
        emu.draw(&mut f.view);
    }
    f.finish(STREAMED);
    emu.draw(&mut f.view);
    for (i, frame) in emu.frames.iter().enumerate() {
        let text = String::from_utf8_lossy(frame);
        assert!(!text.contains("\x1b[2J"), "frame {i} clears the screen");
        assert!(!text.contains("\x1b[3J"), "frame {i} clears the scrollback");
        assert!(text.starts_with("\x1b[?2026h") && text.ends_with("\x1b[?2026l"));
    }
    let rows = emu.all_rows();
    let start = rows.iter().position(|r| r == "$ keel").unwrap();
    let transcript: Vec<&str> = rows[start..].iter().map(String::as_str).collect();
    snap("tui_vt100_streamed_40x12", &transcript.join("\n"));
    // Every answer line is in the scrollback exactly once, in order.
    let answer = [
        "Here is the plan:",
        "1. read the loader",
        "2. fix the split at ,",
        "3. add a regression test",
        "日本語も大丈夫です。Done.",
    ];
    let mut at = 0;
    for want in answer {
        let found = transcript[at..]
            .iter()
            .position(|r| r.trim() == want)
            .unwrap_or_else(|| {
                panic!(
                    "{want:?} missing after row {at}:\n{}",
                    transcript.join("\n")
                )
            });
        at += found + 1;
        assert_eq!(
            transcript.iter().filter(|r| r.trim() == want).count(),
            1,
            "{want:?} twice"
        );
    }
    let before_resize = emu.all_rows();
    let kept = before_resize.len() - 12;
    emu.resize(30, 12);
    emu.draw(&mut f.view);
    let after = emu.screen_rows();
    snap("tui_vt100_after_resize_30x12", &after.join("\n"));
    let last = after.iter().rev().find(|r| !r.is_empty()).unwrap();
    assert!(
        last.starts_with("claude-sonnet-4-5"),
        "status line last: {after:?}"
    );
    assert!(after.iter().all(|r| keel::text::width(r) <= 30));
    let resize_bytes = String::from_utf8_lossy(emu.frames.last().unwrap()).to_string();
    assert!(!resize_bytes.contains("\x1b[2J") && !resize_bytes.contains("\x1b[3J"));
    // The scrollback rows written before the resize are untouched.
    let all = emu.all_rows();
    assert_eq!(
        all[..kept.min(all.len())],
        before_resize[..kept.min(all.len())]
    );
}

#[test]
fn differential_frames_write_far_fewer_bytes_than_full_redraws() {
    let mut diff = Emulator::new(80, 24, &[]);
    let mut full = Emulator::new(80, 24, &[]);
    full.term.set_full_redraw(true);
    let mut fd = Feed::new();
    let mut ff = Feed::new();
    for (f, e) in [(&mut fd, &mut diff), (&mut ff, &mut full)] {
        f.user("go");
        f.stream("", 1);
        e.draw(&mut f.view);
        for _ in 0..50 {
            f.delta(AssistantDelta::TextDelta {
                index: 0,
                delta: "word ".into(),
            });
            e.draw(&mut f.view);
        }
    }
    let bytes = |e: &Emulator| e.frames[1..].iter().map(Vec::len).sum::<usize>();
    let (d, u) = (bytes(&diff), bytes(&full));
    assert!(d * 3 < u, "differential {d} bytes vs full redraw {u} bytes");
    assert_eq!(
        diff.screen_rows(),
        full.screen_rows(),
        "both show the same screen"
    );
}
