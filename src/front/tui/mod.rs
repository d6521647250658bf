//! The interactive terminal front end (`DESIGN.md` §9): an inline viewport whose finished
//! cells go once into the terminal's own scrollback and whose live area (streaming line,
//! running tools, queue, editor, status line) is redrawn differentially, at most one frame per
//! 16 ms. The view renders only the public events (the wire lines a host publishes); the
//! controller (`client`) feeds it from a session's link, in this process or in the daemon,
//! and sends the user's actions as pi commands. It writes only through
//! `output::TerminalOut`; diagnostics go to the log file, never the screen.
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod attach_job;
pub mod client;
mod commands;
pub mod composer;
pub mod files;
pub mod history;
pub mod jobs;
pub mod live_picker;
pub mod markdown;
pub mod notify;
pub mod pager;
pub mod paint;
pub mod permissions;
pub mod picker;
mod reconnect;
pub mod replay;
pub mod rewind;
pub mod start;
pub mod status_line;
pub mod terminal;
pub mod tool_cell;
pub mod transcript;
pub mod tty;
pub mod view;
pub mod wire;

use std::io::{self, Write};
use std::path::PathBuf;
use std::time::Duration;

use crossterm::event::Event as TermEvent;
use tokio::sync::mpsc;

use crate::error::StartupError;
use crate::exit::Exit;
use crate::output::{Output, TerminalOut};
use terminal::{FrameStats, InlineTerminal};
use view::{Action, View};

/// The shortest time between two frames while things stream (about 60 frames a second).
pub const FRAME_INTERVAL: Duration = Duration::from_millis(16);
/// How often spinners and timers advance while the agent works.
pub(super) const TICK: Duration = Duration::from_millis(100);

/// Everything the in-process TUI needs from startup.
pub struct TuiSetup {
    /// The session, served by a host in this process.
    pub host: crate::host::HostSetup,
    /// Open the session picker first (`--resume` without an id).
    pub pick_session: bool,
    pub keel_home: PathBuf,
    /// A prompt given on the command line: sent at once.
    pub prompt: Option<String>,
    /// Count East-Asian ambiguous-width characters as two columns.
    pub ambiguous_wide: bool,
    /// `NO_COLOR`: no colours (bold, dim and reverse stay).
    pub no_color: bool,
    /// `TERM=dumb`: plain lines instead of the inline viewport (`client/lines.rs`).
    pub dumb: bool,
    /// `$HOME`, for `@~/…` mentions.
    pub home: Option<PathBuf>,
    /// A panel shown first (the first-run advice when no provider is configured).
    pub welcome: Option<String>,
    /// What `/hooks` and `/agents` read: the session's spec and environment.
    pub hooks_from: Option<(crate::wire::protocol::spec::SessionSpec, crate::mode::Env)>,
    /// How to tell the user a run ended or asks while the window is not focused.
    pub notify: crate::setup::settings::NotifyChannel,
    /// The settings' `statusLine`, when it may run (`status_line::configured`).
    pub status_line: Option<status_line::StatusCommand>,
}

/// Lays out one frame of `view` and writes it through `term`: the history finished since the
/// last frame goes to the scrollback, then the live area is drawn differentially. The same
/// function serves the real terminal, the tests (bytes into a terminal emulator) and the
/// benchmarks.
pub fn draw<W: Write>(view: &mut View, term: &mut InlineTerminal<W>) -> io::Result<FrameStats> {
    let (cols, rows) = term.size();
    let history = view.take_history(cols);
    let frame = view.layout_live(cols, rows.saturating_sub(1));
    term.frame(
        &history,
        frame.height,
        |buf| view.paint(&frame, buf),
        frame.cursor,
    )
}

/// What the input thread delivers.
pub(super) enum Input {
    Term(TermEvent),
    /// A resize, with the cursor row the terminal reports after it (reflowing terminals move
    /// the live area).
    Resize(u16, u16, Option<u16>),
    /// Ctrl+Z: suspend; once continued, send the reader the channel it answers with the
    /// cursor row it then asks the terminal for.
    Suspend(std::sync::mpsc::Sender<std::sync::mpsc::Sender<Option<u16>>>),
    Error(String),
}

/// What a terminal input means for a controller (in-process or a daemon client).
pub(super) enum Handled {
    /// Run these (none for a paste or a resize, which the view and terminal took).
    Actions(Vec<Action>),
    /// The terminal cannot be read any more: leave.
    Stop,
}

/// Applies a terminal input to the view and the terminal; keys become actions.
pub(super) fn handle_input(
    view: &mut View,
    term: &mut InlineTerminal<TerminalOut>,
    msg: Input,
) -> Handled {
    match msg {
        Input::Term(TermEvent::Key(key)) => {
            let actions: Vec<Action> = view.on_key(key).into_iter().collect();
            return Handled::Actions(actions);
        }
        Input::Term(TermEvent::Paste(text)) => view.on_paste(&text),
        Input::Resize(cols, rows, row) => term.resize(cols, rows, row),
        Input::Suspend(reader) => suspend(term, &reader),
        Input::Term(_) => {}
        Input::Error(e) => {
            tracing::error!("cannot read the terminal: {e}");
            return Handled::Stop;
        }
    }
    Handled::Actions(Vec::new())
}

/// Ctrl+Z: the live area is erased (the shell's lines follow the transcript), the terminal
/// is given back and the process stopped; once continued (`fg`), the live area starts again
/// at the row the cursor is on and is drawn in full.
fn suspend(term: &mut InlineTerminal<TerminalOut>, reader: &std::sync::mpsc::Sender<Ask>) {
    if let Err(e) = term.clear_live() {
        tracing::warn!("cannot erase the live area: {e}");
    }
    if let Err(e) = tty::suspend() {
        tracing::error!("cannot suspend: {e}");
    }
    // The reader thread owns the terminal's answers: it asks where the cursor is now.
    let (tx, rx) = std::sync::mpsc::channel();
    let row = match reader.send(tx) {
        Ok(()) => rx.recv_timeout(Duration::from_secs(2)).ok().flatten(),
        Err(_) => None,
    };
    let (cols, rows) = crossterm::terminal::size().unwrap_or(term.size());
    term.start_at(cols, rows, row.unwrap_or(rows.saturating_sub(1)));
}

/// The channel the reader thread answers a cursor-row question on.
type Ask = std::sync::mpsc::Sender<Option<u16>>;

/// Runs the in-process TUI until the user quits (exit 0) or a signal ends it (128 + n).
pub async fn run(setup: TuiSetup, out: &mut Output) -> Result<Exit, StartupError> {
    client::run_local(setup, out).await
}

/// Reads terminal events on a plain thread (a pending read must never hold up exit).
pub(super) fn spawn_input(tx: mpsc::UnboundedSender<Input>) {
    let spawned = std::thread::Builder::new()
        .name("keel-tui-input".into())
        .spawn(move || loop {
            let msg = match crossterm::event::read() {
                Ok(TermEvent::Resize(c, r)) => {
                    // Asked here, on the thread that reads the terminal's answers.
                    let row = crossterm::cursor::position().ok().map(|(_, y)| y);
                    Input::Resize(c, r, row)
                }
                Ok(TermEvent::Key(k)) if is_suspend(&k) => {
                    let (tx_ask, rx_ask) = std::sync::mpsc::channel::<Ask>();
                    if tx.send(Input::Suspend(tx_ask)).is_err() {
                        return;
                    }
                    // Continued: answer where the cursor is (asked on this thread).
                    if let Ok(answer) = rx_ask.recv() {
                        let row = crossterm::cursor::position().ok().map(|(_, y)| y);
                        let _ = answer.send(row);
                    }
                    continue;
                }
                Ok(ev) => Input::Term(ev),
                Err(e) => {
                    let _ = tx.send(Input::Error(e.to_string()));
                    return;
                }
            };
            if tx.send(msg).is_err() {
                return;
            }
        });
    if let Err(e) = spawned {
        tracing::error!("cannot start the terminal reader: {e}");
    }
}

/// Ctrl+Z (a press; raw mode delivers it as a key, not as SIGTSTP).
fn is_suspend(k: &crossterm::event::KeyEvent) -> bool {
    use crossterm::event::{KeyCode, KeyEventKind, KeyModifiers};
    k.kind != KeyEventKind::Release
        && k.modifiers.contains(KeyModifiers::CONTROL)
        && matches!(k.code, KeyCode::Char('z') | KeyCode::Char('Z'))
}

pub(super) use crate::kernel::session::short_id;

/// `/help`: the commands (`/detach` only in a window `attached` to the daemon) and the keys.
pub fn help_text(attached: bool) -> String {
    let mut s = String::from("commands:");
    for (c, d) in view::commands(attached) {
        s.push_str(&format!("\n  /{c:<10} {d}"));
    }
    s.push_str(&format!(
        "\nkeys:\n  Enter        send (while the agent works: steer it)\n  Alt+Enter    queue a follow-up for when it is done\n  Shift+Enter  new line (also Ctrl+J, or \\ then Enter)\n  Esc          interrupt; queued messages come back to the editor\n  Esc Esc      on an empty editor, nothing running: rewind to before a prompt\n  Shift+Tab    the permission mode: {cycle}\n  Up/Down      history (this directory's prompts, across sessions)\n  Ctrl+T       show or collapse thinking\n  Ctrl+O       expand or collapse tool output\n  Ctrl+G       a subagent's transcript, latest first (again: the one before)\n  Ctrl+C       interrupt a run, twice within a second to quit; idle: clear the editor, twice to quit\n  Ctrl+D       quit when the editor is empty\n  Ctrl+Z       suspend keel (fg brings it back)\n  paste        more than 5 lines or 1000 characters shows as [Pasted N lines], sent in full\n  !command     run a shell command; its output goes to the model with the next prompt",
        cycle = permissions::cycle(),
    ));
    s
}
