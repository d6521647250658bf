//! The TUI's controller: one view of a session, fed the session's public events through a
//! [`Link`], with every action sent as a pi command. The same code serves a session in this
//! process (`--no-daemon`: [`Link::local`]) and one in the daemon (`keel`, `keel attach ID`:
//! [`Link::daemon`]); only leaving differs. In the daemon, closing the window, losing the
//! terminal (SIGHUP) or quitting ends this view only: the run goes on, and `keel attach ID`
//! shows it again (the transcript so far from the attach snapshot, then the live stream,
//! pending dialogs included). In-process, leaving stops the run and saves the session.
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod ask;
mod jobs;
mod lines;
mod pager;
mod rewind;
mod show;
mod snapshot;
mod status;

use show::show;

use std::path::PathBuf;
use std::time::Duration;

use crossterm::event::Event as TermEvent;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::replay::{self, Internals, Replayed};
use super::terminal::InlineTerminal;
use super::transcript::HistoryCell;
use super::view::{Action, View};
use super::{draw, tty, Input, TuiSetup, FRAME_INTERVAL, TICK};
use crate::client::link::{Commands, Link, Note};
use crate::error::StartupError;
use crate::exit::Exit;
use crate::kernel::clock::Clock;
use crate::kernel::event::ApprovalDecision;
use crate::kernel::message::Content;
use crate::kernel::session::SessionSummary;
use crate::output::{Output, TerminalOut};
use crate::signals::Signals;
use crate::wire::events::{event_of, TypedEvent, WireEvent};
use crate::wire::pi::data::{ClearQueueData, State};
use crate::wire::pi::Command;

/// What attaching to a session of the daemon needs.
pub struct AttachSetup {
    /// The daemon: this machine's socket, or a remote host's over ssh.
    pub dial: crate::client::dial::Dial,
    pub session: String,
    /// A prompt given on the command line: sent once the view is up.
    pub prompt: Option<String>,
    pub warnings: Vec<String>,
    pub ambiguous_wide: bool,
    /// How to open the session again in a new daemon if this one dies: `session/open`'s
    /// params (their session flags are replaced by the session's file).
    pub reopen: crate::wire::protocol::session::OpenParams,
    pub env: crate::mode::Env,
    /// The session directory of the cwd (the `/resume` picker).
    pub session_dir: PathBuf,
    /// Open the session picker first (`--resume` without an id).
    pub pick_session: bool,
    /// How to tell the user a run ended or asks while the window is not focused.
    pub notify: crate::setup::settings::NotifyChannel,
    /// The settings' `statusLine`, when it may run here.
    pub status_line: Option<super::status_line::StatusCommand>,
}

/// How long leaving an in-process session waits for its run to settle.
const STOP_GRACE: Duration = Duration::from_secs(3);

/// Answers of commands sent in the background.
pub(super) enum Back {
    Notice(HistoryCell),
    Restore(Vec<String>),
    /// The session was replaced: its conversation and state, to show from the start.
    Replay(String, Vec<Replayed>, Option<State>),
    /// The session's templates and skills (`get_commands`), for the slash menu.
    Commands(Vec<(String, String)>),
    /// The session's state (`get_state`): model, context window, name, file.
    State(State),
    /// Where the session runs, for the status line.
    Place(String),
    /// A `!cmd` the session did not run (pi's error text).
    ShellRefused(String),
    /// The whole conversation, for the transcript pager.
    Transcript(Vec<Replayed>),
    /// A subagent's conversation under a heading, for the pager (Ctrl+G).
    Subtranscript(String, Vec<Replayed>),
    /// The saved sessions a remote daemon holds (`session/list`), for the picker.
    Sessions(Vec<SessionSummary>, Vec<SessionSummary>),
    /// The session's permission mode (`get_permissions`, `set_permission_mode`).
    Permission(crate::kernel::agent::Permission),
    /// The rewind picker's checkpoints, previews and the rewind's outcome.
    Rewind(rewind::RewindBack),
    /// A `statusLine` run's first line of output, or why it has none.
    StatusLine(Result<String, String>),
    /// The jobs panel's lists, reads and kills.
    Jobs(jobs::JobsBack),
}

/// Where the session lives when it is not in this process.
pub(super) struct Daemon {
    pub dial: crate::client::dial::Dial,
    /// The daemon went away: Enter tries to reconnect.
    pub lost: bool,
    /// A remote daemon's link dropped: the next attempt is due then (attempts go on by
    /// themselves, with `backoff`, until one succeeds or the user leaves).
    pub retry_at: Option<Instant>,
    pub backoff: crate::client::dial::Backoff,
    pub reopen: crate::wire::protocol::session::OpenParams,
    pub env: crate::mode::Env,
}

/// What the view needs besides the link.
struct Opening {
    prompt: Option<String>,
    warnings: Vec<String>,
    /// A panel shown first (the first-run advice when no provider is configured).
    welcome: Option<String>,
    pick_session: bool,
    session_dir: PathBuf,
    keel_home: PathBuf,
    cwd: PathBuf,
    home: Option<PathBuf>,
    clock: Clock,
    ambiguous_wide: bool,
    no_color: bool,
    dumb: bool,
    hooks_from: Option<(crate::wire::protocol::spec::SessionSpec, crate::mode::Env)>,
    notify: crate::setup::settings::NotifyChannel,
    status_line: Option<super::status_line::StatusCommand>,
}

pub(super) struct Client {
    pub view: View,
    pub term: InlineTerminal<TerminalOut>,
    pub link: Link,
    pub commands: Commands,
    pub epoch: String,
    pub seq: u64,
    pub clock: Clock,
    pub back_tx: mpsc::UnboundedSender<Back>,
    back_rx: mpsc::UnboundedReceiver<Back>,
    pub dirty: bool,
    last_frame: Option<Instant>,
    pub stop: Option<Exit>,
    /// `None`: the session is served in this process.
    pub daemon: Option<Daemon>,
    /// The session's file (resuming it later, reopening it in a new daemon).
    pub file: Option<String>,
    /// Quitting while a run is active: waiting for "leave it running" or "stop it".
    asking_quit: bool,
    /// Leaving by quitting (not detaching): a daemon's session is closed if nothing else
    /// shows it and no run goes on.
    close: bool,
    /// Where the session picker looks.
    pub session_dir: PathBuf,
    pub keel_home: PathBuf,
    pub cwd: PathBuf,
    /// `$HOME`, for `@~/…` mentions.
    home: Option<PathBuf>,
    /// What the next session change is (`new session`, `forked into session`, …).
    pub replacing: Option<String>,
    /// A rewind this window asked for is under way (its answer shows the branch).
    rewinding: bool,
    /// `/clear` asked for the next session change: the screen is cleared when it comes.
    pub clearing: bool,
    /// `TERM=dumb`: plain lines (`client/lines.rs`), the terminal is never drawn.
    pub plain: bool,
    /// The prompts sent from this directory, across sessions (`history.rs`).
    history: super::history::PromptHistory,
    /// The transcript pager, while it is open (on the alternate screen).
    pub pager: Option<super::pager::Pager>,
    /// The subagent whose transcript the pager shows (Ctrl+G), by session id.
    pub shown_child: Option<String>,
    /// `/hooks` and `/agents` of a session in this process: its spec and the environment.
    pub hooks_from: Option<(crate::wire::protocol::spec::SessionSpec, crate::mode::Env)>,
    /// The pager's screen is out of date (the run's events alone do not change it).
    pager_stale: bool,
    /// Rings or notifies when a run ends or asks while the window is not focused.
    notifier: super::notify::Notifier,
    /// The settings' `statusLine` command, its schedule and last line.
    pub status: Option<super::status_line::Runner>,
}

/// The in-process TUI: serves the session here and shows it until the user quits (exit 0) or
/// a signal ends it (128 + n); leaving stops the run and saves the session.
pub async fn run_local(setup: TuiSetup, out: &mut Output) -> Result<Exit, StartupError> {
    let host = setup.host;
    let opening = Opening {
        prompt: setup.prompt,
        warnings: Vec::new(),
        welcome: setup.welcome,
        pick_session: setup.pick_session,
        session_dir: host.session_dir.clone(),
        keel_home: setup.keel_home,
        cwd: host.config.cwd.clone(),
        home: setup.home,
        clock: host.clock.clone(),
        ambiguous_wide: setup.ambiguous_wide,
        no_color: setup.no_color,
        dumb: setup.dumb,
        hooks_from: setup.hooks_from,
        notify: setup.notify,
        status_line: setup.status_line,
    };
    let (link, start) = Link::local(host, (10_000, 8 << 20))
        .await
        .map_err(|e| StartupError::internal("cannot start the session").cause(e.message))?;
    let (exit, client) = show(link, start, None, opening).await?;
    if let Some(text) = saved_line(&client) {
        let _ = out.out(text.as_bytes());
        let _ = out.flush();
    }
    Ok(exit)
}

/// Attaches the TUI to a session of the daemon until the user leaves (exit 0), the terminal
/// goes away or a signal ends this client (128 + n); the session stays live either way.
pub async fn run(setup: AttachSetup, out: &mut Output) -> Result<Exit, StartupError> {
    let (link, start) = Link::daemon(&setup.dial, &setup.session, None, true)
        .await
        .map_err(|e| {
            StartupError::config(format!("cannot attach to session {}: {e}", setup.session))
        })?;
    let opening = Opening {
        prompt: setup.prompt,
        warnings: setup.warnings,
        welcome: None,
        pick_session: setup.pick_session,
        session_dir: setup.session_dir,
        keel_home: setup.env.keel_home.clone(),
        cwd: setup.env.cwd.clone(),
        home: setup.env.vars.get("HOME").map(PathBuf::from),
        clock: Clock::system(),
        ambiguous_wide: setup.ambiguous_wide,
        no_color: setup.env.no_color,
        dumb: setup.env.dumb_terminal(),
        hooks_from: None,
        notify: setup.notify,
        status_line: setup.status_line,
    };
    let daemon = Daemon {
        dial: setup.dial,
        lost: false,
        retry_at: None,
        backoff: Default::default(),
        reopen: setup.reopen,
        env: setup.env,
    };
    let (exit, client) = show(link, start, Some(daemon), opening).await?;
    let id = client.link.session_id().to_string();
    // Quitting (not detaching) ends a session nobody else shows, as in-process.
    let closed = match client.close && client.view.ended.is_none() {
        true => client
            .commands
            .request("session/close", json!({}))
            .await
            .map_err(|e| e.message),
        false => Err(String::new()),
    };
    let text = match closed {
        Ok(_) => saved_line(&client),
        // A subagent that finished is saved, not live.
        Err(_) if client.view.ended.is_some() => saved_line(&client),
        Err(why) => {
            if !why.is_empty() {
                tracing::info!("session {id} stays live: {why}");
            }
            let state = if client.view.transcript.is_running() {
                "its run goes on in the keel daemon"
            } else {
                "it stays live in the keel daemon"
            };
            Some(format!(
                "Left session {id}; {state}. Come back with: keel attach {id}\n"
            ))
        }
    };
    if let Some(text) = text {
        let _ = out.out(text.as_bytes());
        let _ = out.flush();
    }
    Ok(exit)
}

/// Which of the session's user messages it made itself (compaction summaries, `!cmd`
/// outputs), from its entries; none when they cannot be read (every message shows as sent).
pub(super) async fn internals(commands: &Commands) -> Internals {
    match commands.send(&Command::GetEntries { since: None }).await {
        Ok(answer) => Internals::from_entries(&answer),
        Err(e) => {
            tracing::info!("cannot read the session's entries: {e}");
            Internals::default()
        }
    }
}

/// "Session saved …" once the session's file exists (a session never prompted has none).
fn saved_line(client: &Client) -> Option<String> {
    let file = client.file.as_deref()?;
    std::path::Path::new(file).exists().then(|| {
        let id = client.link.session_id();
        format!("Session saved. Resume it with: keel --resume {id}\n")
    })
}

impl Client {
    /// Takes the answer of a command sent in the background; whether the view changed.
    pub(super) fn on_back(&mut self, back: Back) -> bool {
        match back {
            Back::Notice(cell) => self.view.notice(cell),
            Back::Restore(texts) => self.view.restore_to_composer(texts),
            Back::Replay(id, messages, state) => self.replay(&id, &messages, state.as_ref()),
            Back::Commands(list) => self.view.set_templates(list),
            Back::State(state) => self.take_state(&state),
            Back::ShellRefused(e) => {
                self.view.transcript.shell_refused();
                self.view.notice(HistoryCell::Error(e));
            }
            // A refresh sent before the connection was lost must not hide that it was.
            Back::Place(_) if self.daemon.as_ref().is_some_and(|d| d.lost) => return false,
            Back::Place(text) => {
                let changed = self.view.place.as_deref() != Some(text.as_str());
                self.view.place = Some(text);
                return changed;
            }
            Back::Sessions(here, all) => {
                let now = self.clock.now_ms();
                self.view
                    .open_picker(super::picker::Picker::new(here, all, now));
            }
            Back::Permission(mode) => self.view.permission = Some(mode),
            Back::Rewind(r) => self.on_rewind(r),
            Back::Jobs(j) => self.on_jobs(j),
            Back::Transcript(replayed) => {
                let mut t = super::transcript::Transcript::new();
                t.replay(&replayed);
                self.open_pager(super::pager::Pager::new(t.finish()));
            }
            Back::StatusLine(out) => return self.status_ran(out),
            Back::Subtranscript(heading, replayed) => {
                let mut t = super::transcript::Transcript::new();
                t.push(HistoryCell::Notice(heading));
                t.replay(&replayed);
                self.open_pager(super::pager::Pager::new(t.finish()));
            }
        }
        true
    }

    /// The editor's history: this directory's prompts from earlier sessions, then this
    /// session's own that are not among them.
    fn merged_history(&self, typed: Vec<String>) -> Vec<String> {
        let mut all = self.history.load();
        let known: std::collections::HashSet<String> = all.iter().cloned().collect();
        all.extend(typed.into_iter().filter(|m| !known.contains(m)));
        all
    }

    /// Model, thinking level, name, context window and file from a `get_state` answer.
    pub fn take_state(&mut self, state: &State) {
        self.file = state.session_file.clone();
        let t = &mut self.view.transcript;
        let model = state.model.as_ref();
        t.model = model.map(|m| m.id.clone()).unwrap_or_default();
        t.thinking_level = state.thinking_level.clone();
        t.session_name = state.session_name.clone();
        t.todos = state.todos.clone();
        self.view.context_window = model.map_or(0, |m| m.context_window);
    }

    fn feed(&mut self, event: &Value, at_ms: i64) {
        if let Some(e) = WireEvent::parse(&event.to_string()) {
            let _ = self.view.on_event(&e, at_ms);
        }
    }

    async fn run(
        &mut self,
        mut input: mpsc::UnboundedReceiver<Input>,
        signals: &mut Signals,
    ) -> Exit {
        let mut place_at = Instant::now() + super::commands::PLACE_REFRESH;
        while self.stop.is_none() {
            let frame_at = self
                .last_frame
                .map_or_else(Instant::now, |t| t + FRAME_INTERVAL);
            let lost = self.daemon.as_ref().is_some_and(|d| d.lost);
            // Disconnected, nothing is known to be running: no spinner.
            let ticking = !lost
                && (self.view.transcript.is_running() || self.view.transcript.shell().is_some());
            let retry_at = self.daemon.as_ref().and_then(|d| d.retry_at);
            let status_at = self.status.as_ref().and_then(|r| r.due());
            tokio::select! {
                biased;
                n = signals.next() => self.stop = Some(Exit::Signal(n)),
                _ = tokio::time::sleep_until(frame_at), if self.dirty => self.render(),
                note = self.link.next(), if !lost => self.on_note(note).await,
                msg = input.recv() => match msg {
                    Some(msg) => self.on_input(msg).await,
                    // The terminal went away: leave (a daemon's run goes on).
                    None => self.stop = Some(Exit::Success),
                },
                Some(back) = self.back_rx.recv() => {
                    let changed = self.on_back(back);
                    self.dirty |= changed;
                }
                _ = tokio::time::sleep_until(retry_at.unwrap_or(place_at)), if retry_at.is_some() => {
                    self.retry_remote().await;
                }
                _ = tokio::time::sleep_until(place_at), if self.daemon.is_some() && !lost => {
                    self.show_place();
                    place_at = Instant::now() + super::commands::PLACE_REFRESH;
                }
                _ = tokio::time::sleep_until(status_at.unwrap_or(place_at)), if status_at.is_some() => {
                    self.run_status();
                }
                _ = tokio::time::sleep(TICK), if ticking && !self.dirty => {
                    self.view.spinner = self.view.spinner.wrapping_add(1);
                    self.dirty = true;
                }
            }
        }
        self.render();
        self.stop.unwrap_or(Exit::Success)
    }

    fn render(&mut self) {
        if self.pager.is_some() {
            if std::mem::take(&mut self.pager_stale) {
                self.draw_pager();
            }
            self.dirty = false;
            return;
        }
        // The screen changed size and the input thread has not said so yet: a frame laid out
        // for the old size would land on rows the terminal has moved. The resize comes next.
        if crossterm::terminal::size().is_ok_and(|(c, r)| (c.max(1), r.max(1)) != self.term.size())
        {
            self.last_frame = Some(Instant::now());
            return;
        }
        self.view.now_ms = self.clock.now_ms();
        if let Err(e) = draw(&mut self.view, &mut self.term) {
            tracing::error!("cannot draw: {e}");
            self.stop = Some(Exit::Signal(crate::exit::SIGPIPE));
        }
        self.dirty = false;
        self.last_frame = Some(Instant::now());
    }

    /// Leaving an in-process session: its run is stopped (it settles for at most a few
    /// seconds, or until a second signal), shown, and the session saved.
    async fn stop_here(&mut self, signals: &mut Signals) {
        let commands = self.commands.clone();
        // The user left the prompt (Claude's `prompt_input_exit`); not a signal or a fault.
        let left = matches!(self.stop, None | Some(Exit::Success));
        let stopped = tokio::spawn(async move {
            match left {
                true => commands.exit(STOP_GRACE).await,
                false => commands.stop(STOP_GRACE).await,
            }
        });
        let mut cut = false;
        loop {
            tokio::select! {
                note = self.link.next() => match note {
                    Some(Note::Event { line, typed, .. }) => self.show_line(&line, typed.as_ref()),
                    Some(_) => {}
                    None => break,
                },
                _ = signals.next(), if !cut => cut = true,
            }
            if cut {
                break;
            }
        }
        let _ = stopped.await;
        while let Some(Note::Event { line, typed, .. }) = self.link.try_next() {
            self.show_line(&line, typed.as_ref());
        }
        match self.plain {
            true => self.print_history(),
            false => {
                let _ = draw(&mut self.view, &mut self.term);
            }
        }
    }

    fn show_line(&mut self, line: &str, typed: Option<&TypedEvent>) {
        if let Some(e) = event_of(line, typed) {
            let _ = self.view.on_event(&e, self.clock.now_ms());
        }
    }

    async fn on_note(&mut self, note: Option<Note>) {
        match note {
            Some(Note::Event { seq, line, typed }) => {
                self.seq = seq;
                if let Some(e) = event_of(&line, typed.as_ref()) {
                    let now = self.clock.now_ms();
                    if let Some(bytes) = self.notifier.on_event(&e) {
                        tty::notify(&bytes);
                    }
                    for action in self.view.on_event(&e, now) {
                        self.act(action).await;
                    }
                    self.status_touched(&e);
                    match e {
                        WireEvent::ModelChanged { .. } => self.fetch_state(),
                        WireEvent::SessionEnded { .. } => self.session_ended(),
                        _ => {}
                    }
                }
            }
            Some(Note::Replaced {
                session,
                epoch,
                rewound,
            }) => {
                self.epoch = epoch;
                self.status_stale();
                if rewound && self.rewound_here() {
                    self.show_place();
                    self.dirty = true;
                    return;
                }
                self.in_back(|commands| async move {
                    let (replayed, state) = ask::branch(&commands).await;
                    Some(Back::Replay(session, replayed, state))
                });
                self.fetch_jobs(false);
                self.show_place();
            }
            Some(Note::Lagged { .. }) => self.reconnect().await,
            Some(Note::Lost(why)) => self.lost(&why.to_string()),
            Some(Note::Notice(text)) => self.view.notice(HistoryCell::Notice(text)),
            None if self.daemon.is_some() => self.lost("the connection ended"),
            None => {
                tracing::error!("the in-process session ended");
                self.view
                    .notice(HistoryCell::Error("the session ended unexpectedly".into()));
                self.stop = Some(Exit::Internal);
            }
        }
        self.dirty = true;
    }

    /// Asks for the session's state (model and context window after a model change).
    fn fetch_state(&self) {
        self.in_back(|commands| async move {
            let state = commands.ask::<State>(&Command::GetState {}).await;
            state.ok().map(Back::State)
        });
    }

    /// Another session is shown from now on: the transcript starts over with its messages.
    fn replay(&mut self, id: &str, replayed: &[Replayed], state: Option<&State>) {
        let mut pending = self.view.transcript.drain();
        self.view.transcript = super::transcript::Transcript::new();
        if std::mem::take(&mut self.clearing) {
            pending.clear();
            self.clear_screen();
        }
        if let Some(state) = state {
            self.take_state(state);
        }
        for cell in pending {
            self.view.notice(cell);
        }
        let what = self.replacing.take().unwrap_or_else(|| "session".into());
        self.view
            .notice(HistoryCell::Notice(format!("── {what} {id} ──")));
        self.view.composer.set_history(replay::typed(replayed));
        self.view.transcript.replay(replayed);
        self.dirty = true;
    }

    async fn on_input(&mut self, msg: Input) {
        // Keys see the time they came (a second Ctrl+C within a second quits).
        self.view.now_ms = self.clock.now_ms();
        let msg = match self.pager.is_some() {
            true => match self.pager_input(msg) {
                Some(msg) => msg,
                None => return,
            },
            false => msg,
        };
        let lost = self.daemon.as_ref().is_some_and(|d| d.lost);
        match msg {
            Input::Term(TermEvent::Key(key)) if lost => self.key_while_lost(key).await,
            Input::Term(TermEvent::Key(key)) if self.asking_quit => {
                use crossterm::event::KeyCode;
                self.asking_quit = false;
                self.view.clear_hint();
                match key.code {
                    KeyCode::Char('l') | KeyCode::Char('d') | KeyCode::Enter => {
                        self.stop = Some(Exit::Success)
                    }
                    KeyCode::Char('s') => {
                        // Awaited: the stop must reach the daemon before this client ends
                        // (`abort` is answered once the run has settled).
                        if let Err(e) = self.commands.send(&Command::Abort {}).await {
                            self.view.notice(HistoryCell::Error(e.message));
                        }
                        self.close = true;
                        self.stop = Some(Exit::Success);
                    }
                    _ => {}
                }
            }
            Input::Term(TermEvent::FocusGained) => self.notifier.focus(true),
            Input::Term(TermEvent::FocusLost) => self.notifier.focus(false),
            other => match super::handle_input(&mut self.view, &mut self.term, other) {
                super::Handled::Actions(actions) => {
                    for a in actions {
                        self.act(a).await;
                    }
                }
                super::Handled::Stop => self.stop = Some(Exit::Success),
            },
        }
        self.dirty = true;
    }

    pub async fn act(&mut self, action: Action) {
        if self.refused_when_ended(&action) {
            return;
        }
        let typed = match &action {
            Action::Prompt(t) | Action::Steer(t) | Action::FollowUp(t) => Some(t.clone()),
            Action::Bash(cmd) => Some(format!("!{cmd}")),
            _ => None,
        };
        if let Some(t) = typed {
            self.history.append(&t, self.clock.now_ms());
        }
        match action {
            Action::Prompt(text) => self.send_input(text, |message, images| Command::Prompt {
                message,
                images,
                streaming_behavior: None,
            }),
            Action::Steer(text) => {
                self.send_input(text, |message, images| Command::Steer { message, images })
            }
            Action::FollowUp(text) => self.send_input(text, |message, images| Command::FollowUp {
                message,
                images,
            }),
            Action::Abort => {
                let back = self.back_tx.clone();
                self.in_back(|commands| async move {
                    let cleared = commands
                        .ask::<ClearQueueData>(&Command::ClearQueue {})
                        .await;
                    if let Ok(q) = cleared {
                        // Back in the editor before the abort is sent (not after its answer).
                        let texts = q.steering.into_iter().chain(q.follow_up).collect();
                        let _ = back.send(Back::Restore(texts));
                    }
                    let _ = commands.send(&Command::Abort {}).await;
                    None
                });
            }
            // An approved plan, and edits run without asking from now on.
            Action::Approve {
                call_id,
                decision: ApprovalDecision::AllowAcceptEdits,
            } => self.send(Command::ExtensionUiResponse {
                id: Some(call_id),
                value: Some("accept-edits".into()),
                confirmed: Some(true),
                cancelled: None,
            }),
            Action::Approve { call_id, decision } => {
                let confirmed = decision == ApprovalDecision::Allow;
                self.send(confirm(call_id, confirmed));
            }
            Action::DenyWithMessage { call_id, message } => {
                // The message first: queued as steering, it reaches the model with the refused
                // call's result, before it answers again.
                self.in_back(|commands| async move {
                    let steer = Command::Steer {
                        message,
                        images: Vec::new(),
                    };
                    let steer = commands.send(&steer).await;
                    let denied = commands.send(&confirm(call_id, false)).await;
                    let e = steer.and(denied).err()?;
                    Some(Back::Notice(HistoryCell::Error(e.message)))
                });
            }
            Action::Bash(cmd) => {
                self.view
                    .transcript
                    .shell_started(&cmd, self.clock.now_ms());
                self.in_back(|commands| async move {
                    let bash = Command::Bash {
                        command: cmd,
                        exclude_from_context: None,
                    };
                    let e = commands.send(&bash).await.err()?;
                    Some(Back::ShellRefused(e.message))
                });
            }
            Action::Command { name, args } => self.command(&name, &args),
            Action::OpenSession(path) => {
                self.replacing = Some("resumed session".into());
                let session_path = path.to_string_lossy().into_owned();
                self.send(Command::SwitchSession { session_path });
            }
            Action::Quit => self.quit(),
            Action::SetPermission(mode) => self.set_permission(mode),
            Action::OpenSubagent(child) => self.subagent_transcript(child),
            Action::RewindPreview(entry_id) => self.rewind_preview(entry_id),
            Action::Rewind {
                entry_id,
                prompt,
                restore,
            } => self.rewind(entry_id, prompt, restore),
            Action::ReadJob { id, since } => self.read_job(id, since),
            Action::KillJob(id) => self.kill_job(id),
            Action::AllowAlways { call_id } => self.send(Command::ExtensionUiResponse {
                id: Some(call_id),
                value: Some("always".into()),
                confirmed: Some(true),
                cancelled: None,
            }),
        }
        self.dirty = true;
    }

    /// Sends what the user typed, with the files its `@path` words name (as the CLI's `@file`
    /// arguments); a file that cannot be included is said and the text goes back to the
    /// editor, unsent.
    fn send_input(&mut self, text: String, command: fn(String, Vec<Content>) -> Command) {
        match crate::mentions::expand_text(&text, &self.cwd, self.home.as_deref()) {
            // Refused (a command's model that cannot be used, a busy session): the error is
            // shown and the text goes back to the editor.
            Ok((message, images)) => {
                let back = self.back_tx.clone();
                let sent = command(message, images);
                self.in_back(|commands| async move {
                    let e = commands.send(&sent).await.err()?;
                    let _ = back.send(Back::Notice(HistoryCell::Error(e.message)));
                    Some(Back::Restore(vec![text]))
                });
            }
            Err(crate::mentions::MentionError { message: e, .. }) => {
                self.view.notice(HistoryCell::Error(e));
                self.view.restore_to_composer(vec![text]);
            }
        }
    }

    /// Leaving a daemon's session while a run is active asks whether to leave it running or
    /// stop it; otherwise the view just ends (in-process, that stops the run).
    pub fn quit(&mut self) {
        if self.daemon.is_none() || !self.view.transcript.is_running() {
            self.close = true;
            self.stop = Some(Exit::Success);
            return;
        }
        self.asking_quit = true;
        self.view.set_hint(
            "a run is active: l leaves it running in the daemon · s stops it · Esc stays",
        );
    }
}

/// The answer to approval dialog `call_id`.
fn confirm(call_id: String, confirmed: bool) -> Command {
    Command::ExtensionUiResponse {
        id: Some(call_id),
        value: None,
        confirmed: Some(confirmed),
        cancelled: None,
    }
}
