//! The TUI rows of the bench, in process: the same `tui::draw` the binary uses, writing into a
//! `Vec<u8>`: bytes per streamed token (differential vs full redraw) and time per frame.

use std::time::Instant;

use super::{Res, Row};

/// A 30-line rust block for the highlighting rows.
fn rust_block() -> String {
    (0..10)
        .map(|i| {
            format!(
                "/// Doc {i}.\npub fn f{i}(s: &str) -> Vec<String> {{ s.split(',').map(|p| format!(\"{{p}}-{i}\")).collect() }}\n\n"
            )
        })
        .collect()
}

/// The grammars load on the first fenced block with a language (once per process, never at
/// startup): that first block, then the same block with the grammars loaded.
fn highlight_bench(rows: &mut Vec<Row>, samples: usize) {
    let code = rust_block();
    let t0 = Instant::now();
    let lines = keel::text::highlight::highlight("rust", &code).map_or(0, |l| l.len());
    let first = t0.elapsed().as_secs_f64() * 1e3;
    rows.push(Row::single(
        &format!("tui: first highlighted code block ({lines}-line rust, loads the grammars)"),
        first,
        "ms",
        1,
    ));
    let mut times = Vec::new();
    for _ in 0..samples.max(5) {
        let t0 = Instant::now();
        let _ = keel::text::highlight::highlight("rust", &code);
        times.push(t0.elapsed().as_secs_f64() * 1e3);
    }
    rows.push(Row::stats(
        &format!("tui: highlighting the same {lines}-line block again"),
        &times,
        "ms",
        2,
    ));
}

/// Streamed tokens per TUI sample.
const TUI_TOKENS: usize = 2000;
/// Transcript lines already in the scrollback for the frame-time benchmark.
const TUI_TRANSCRIPT_LINES: usize = 10_000;

/// A TUI view fed like the kernel feeds it, with a terminal that writes into memory.
struct TuiRig {
    view: keel::front::tui::view::View,
    term: keel::front::tui::terminal::InlineTerminal<Vec<u8>>,
    seq: u64,
}

impl TuiRig {
    fn new(full_redraw: bool) -> TuiRig {
        let mut term = keel::front::tui::terminal::InlineTerminal::new(Vec::new(), 120, 40, 0);
        term.set_full_redraw(full_redraw);
        let mut rig = TuiRig {
            view: keel::front::tui::view::View::new(),
            term,
            seq: 0,
        };
        rig.send(keel::EventPayload::ModelChanged {
            provider: "anthropic".into(),
            model: "claude-sonnet-4-5".into(),
        });
        rig
    }

    /// A kernel event as the TUI's controller feeds it: through its wire lines.
    fn send(&mut self, payload: keel::EventPayload) {
        self.seq += 1;
        let event = keel::Event {
            seq: self.seq,
            ts: 0,
            payload,
        };
        for e in keel::front::tui::wire::events_for(&event) {
            self.view.on_event(&e, event.ts);
        }
    }

    fn token(&mut self, text: &str) {
        use keel::kernel::event::AssistantDelta;
        self.send(keel::EventPayload::MessageDelta {
            usage: Default::default(),
            delta: AssistantDelta::TextDelta {
                index: 0,
                delta: text.into(),
            },
        });
    }

    /// Starts a run and an answer's text block.
    fn start_answer(&mut self) {
        use keel::kernel::event::AssistantDelta;
        use keel::kernel::message::Message;
        self.send(keel::EventPayload::AgentStarted);
        self.send(keel::EventPayload::MessageStarted {
            message: Message::user("explain the parser", 0),
        });
        self.send(keel::EventPayload::MessageDelta {
            usage: Default::default(),
            delta: AssistantDelta::TextStarted { index: 0 },
        });
    }

    /// Draws one frame; returns the bytes it wrote.
    fn draw(&mut self) -> Res<usize> {
        keel::front::tui::draw(&mut self.view, &mut self.term).map_err(|e| e.to_string())?;
        let n = self.term.writer().len();
        self.term.writer_mut().clear();
        Ok(n)
    }
}

/// The `i`-th streamed token: words, with a line break every 12 tokens (so lines are
/// committed to the scrollback while the answer streams).
fn tui_token(i: usize) -> &'static str {
    const WORDS: [&str; 6] = ["the ", "parser ", "drops ", "a ", "field ", "here "];
    if i % 12 == 11 {
        "end.\n"
    } else {
        WORDS[i % WORDS.len()]
    }
}

/// Bytes written per streamed token (one frame per token, the worst case: the 16 ms frame
/// limit would merge several), differential vs full redraw; and the time to lay out and write
/// one frame with an empty transcript vs a 10,000-line one.
pub fn tui_bench(rows: &mut Vec<Row>, samples: usize) -> Res<()> {
    highlight_bench(rows, samples);
    let mut per_token = [0f64; 2];
    for (k, full) in [false, true].into_iter().enumerate() {
        let mut rig = TuiRig::new(full);
        rig.start_answer();
        rig.draw()?;
        let mut bytes = 0usize;
        for i in 0..TUI_TOKENS {
            rig.token(tui_token(i));
            bytes += rig.draw()?;
        }
        per_token[k] = bytes as f64 / TUI_TOKENS as f64;
    }
    rows.push(Row::single(
        &format!(
            "tui: bytes written per streamed token, differential ({TUI_TOKENS} tokens, 120x40)"
        ),
        per_token[0],
        "bytes",
        1,
    ));
    rows.push(Row::single(
        "tui: bytes written per streamed token, full redraw of the live area",
        per_token[1],
        "bytes",
        1,
    ));
    rows.push(Row::single(
        "tui: full redraw ÷ differential",
        per_token[1] / per_token[0],
        "x",
        1,
    ));
    for lines in [0, TUI_TRANSCRIPT_LINES] {
        let mut times = Vec::new();
        for _ in 0..samples {
            let mut rig = TuiRig::new(false);
            rig.start_answer();
            for i in 0..lines {
                rig.token(&format!(
                    "{i}: an earlier line of the transcript, already written\n"
                ));
            }
            rig.draw()?;
            let t0 = Instant::now();
            for i in 0..TUI_TOKENS {
                rig.token(tui_token(i));
                rig.draw()?;
            }
            times.push(t0.elapsed().as_secs_f64() * 1e6 / TUI_TOKENS as f64);
        }
        rows.push(Row::stats(
            &format!(
                "tui: time per frame (token + layout + diff + write), {lines}-line transcript"
            ),
            &times,
            "µs",
            1,
        ));
    }
    Ok(())
}
