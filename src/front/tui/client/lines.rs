//! The TUI on a terminal that cannot move its cursor (`TERM=dumb`): plain lines, like print
//! mode. Each line read from stdin is what Enter would send in the editor (a prompt, a `/`
//! command, `!cmd`, or the answer to an approval question); the finished transcript cells are
//! written as plain text lines as they finish. It never writes an escape sequence, never
//! changes terminal modes, and ends at end of input, `/quit` or a signal.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use std::io::{BufRead, Write};

use crossterm::event::{KeyCode, KeyEvent};
use tokio::sync::mpsc;

use super::Client;
use crate::exit::Exit;
use crate::output::TerminalOut;
use crate::signals::Signals;

/// The width cells are laid out for when the terminal does not say.
const DEFAULT_WIDTH: u16 = 80;

impl Client {
    /// Runs the session as plain lines until end of input, `/quit` or a signal.
    pub(super) async fn run_lines(&mut self, signals: &mut Signals) -> Exit {
        let (tx, mut lines) = mpsc::unbounded_channel();
        spawn_reader(tx);
        self.print_history();
        let mut asked: Option<String> = None;
        while self.stop.is_none() {
            tokio::select! {
                biased;
                n = signals.next() => self.stop = Some(Exit::Signal(n)),
                note = self.link.next() => self.on_note(note).await,
                line = lines.recv() => match line {
                    Some(line) => self.line(&line).await,
                    None => self.stop = Some(Exit::Success),
                },
                Some(back) = self.back_rx.recv() => {
                    self.on_back(back);
                }
            }
            self.print_history();
            let question = self.view.approval_question();
            if question.is_some() && question != asked {
                if let Some(q) = &question {
                    write_plain(&format!("{q} [y = allow once, a = always, n = deny]\n"));
                }
            }
            asked = question;
        }
        self.print_history();
        self.stop.unwrap_or(Exit::Success)
    }

    /// One input line: the answer to a pending approval, else what Enter sends.
    async fn line(&mut self, line: &str) {
        let line = line.trim_end_matches(['\r', '\n']);
        if self.view.approval_question().is_some() {
            let c = line.trim().chars().next().unwrap_or('n');
            if let Some(action) = self.view.on_key(KeyEvent::from(KeyCode::Char(c))) {
                self.act(action).await;
            }
            return;
        }
        if line.trim().is_empty() {
            return;
        }
        self.view.composer.set_text(line);
        if let Some(action) = self.view.on_key(KeyEvent::from(KeyCode::Enter)) {
            self.act(action).await;
        }
        self.view.composer.clear();
    }

    /// Writes the cells finished since the last call, as plain text.
    pub(super) fn print_history(&mut self) {
        let width = crossterm::terminal::size().map_or(DEFAULT_WIDTH, |(c, _)| c.max(20));
        let mut text = String::new();
        for line in self.view.take_history(width) {
            for span in &line.spans {
                text.push_str(&span.content);
            }
            text.push('\n');
        }
        if let Some(hint) = self.view.take_hint() {
            text.push_str(&hint);
            text.push('\n');
        }
        write_plain(&text);
    }
}

/// Writes `text` with every control character but the newline dropped (no escape sequence
/// reaches a dumb terminal, whatever a tool printed).
fn write_plain(text: &str) {
    if text.is_empty() {
        return;
    }
    let clean: String = text
        .chars()
        .filter(|c| *c == '\n' || !c.is_control())
        .collect();
    let mut out = TerminalOut;
    let _ = out.write_all(clean.as_bytes());
    let _ = out.flush();
}

/// Reads stdin lines on a plain thread (a pending read must never hold up exit).
fn spawn_reader(tx: mpsc::UnboundedSender<String>) {
    let spawned = std::thread::Builder::new()
        .name("keel-lines-input".into())
        .spawn(move || {
            let stdin = std::io::stdin();
            for line in stdin.lock().lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
    if let Err(e) = spawned {
        tracing::error!("cannot start the input reader: {e}");
    }
}
