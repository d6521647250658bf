//! The interactive terminal front end (`DESIGN.md` §9): an inline viewport whose finished
//! cells go once into the terminal's own scrollback and whose live area (streaming line,
//! running tools, queue, editor, status line) is redrawn differentially, at most one frame per
//! 16 ms. This file is the controller: it owns the terminal and the served session, turns
//! keys into `Op`s on the kernel and kernel events into frames: each event becomes the wire
//! lines a host would publish for it (`wire`), and the view is fed only those. It writes only through
//! `output::TerminalOut`; diagnostics go to the log file, never the screen.
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod client;
pub mod composer;
pub mod live_picker;
pub mod markdown;
pub mod paint;
pub mod picker;
pub mod terminal;
pub mod tool_cell;
pub mod transcript;
pub mod tty;
pub mod view;
pub mod wire;

use std::io::{self, Write};
use std::path::PathBuf;
use std::time::Duration;

use crate::front::signals::Signals;
use crossterm::event::Event as TermEvent;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::error::StartupError;
use crate::exit::Exit;
use crate::front::public::PublicEvent;
use crate::host::live::{self, Live, Starting};
use crate::host::models::Models;
use crate::kernel::agent::AgentConfig;
use crate::kernel::clock::Clock;
use crate::kernel::event::Event;
use crate::kernel::recorder;
use crate::kernel::session::{self, SessionHeader, Store};
use crate::output::{Output, TerminalOut};
use crate::prompts::{self, Template};
use terminal::{FrameStats, InlineTerminal};
use transcript::HistoryCell;
use view::{Action, View};

/// The shortest time between two frames while things stream (about 60 frames a second).
pub const FRAME_INTERVAL: Duration = Duration::from_millis(16);
/// How often spinners and timers advance while the agent works.
pub(super) const TICK: Duration = Duration::from_millis(100);

/// Everything the TUI needs from startup.
pub struct TuiSetup {
    pub config: AgentConfig,
    pub models: Models,
    pub clock: Clock,
    pub store: Store,
    /// Record the model and thinking level (a new session, or a different model).
    pub announce: bool,
    /// Open the session picker first (`--resume` without an id).
    pub pick_session: bool,
    pub session_dir: PathBuf,
    pub keel_home: PathBuf,
    pub prompt_dirs: (PathBuf, PathBuf),
    pub warnings: Vec<String>,
    /// Skills for `/skill:NAME`.
    pub skills: Vec<crate::skills::Skill>,
    /// A prompt given on the command line: sent at once.
    pub prompt: Option<String>,
    /// Count East-Asian ambiguous-width characters as two columns.
    pub ambiguous_wide: bool,
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
    Error(String),
}

/// What a terminal input means for a controller (in-process or a daemon client).
pub(super) enum Handled {
    /// Run these (none for a paste or a resize, which the view and terminal took).
    Actions(Vec<Action>),
    /// The terminal cannot be read any more: leave.
    Stop,
}

/// Applies a terminal input to the view and the terminal; keys become actions (with the
/// approvals an "always allow" answered by itself).
pub(super) fn handle_input(
    view: &mut View,
    term: &mut InlineTerminal<TerminalOut>,
    msg: Input,
) -> Handled {
    match msg {
        Input::Term(TermEvent::Key(key)) => {
            let mut actions: Vec<Action> = view.on_key(key).into_iter().collect();
            actions.extend(view.take_auto_approvals());
            return Handled::Actions(actions);
        }
        Input::Term(TermEvent::Paste(text)) => view.on_paste(&text),
        Input::Resize(cols, rows, row) => term.resize(cols, rows, row),
        Input::Term(_) => {}
        Input::Error(e) => {
            tracing::error!("cannot read the terminal: {e}");
            return Handled::Stop;
        }
    }
    Handled::Actions(Vec::new())
}

/// What background tasks hand back.
enum Internal {
    Notice(HistoryCell),
}

/// Runs the TUI until the user quits (exit 0) or a signal ends it (128 + n).
pub async fn run(setup: TuiSetup, out: &mut Output) -> Result<Exit, StartupError> {
    crate::text::set_ambiguous_wide(setup.ambiguous_wide);
    let tty = tty::Tty::enter()
        .map_err(|e| StartupError::internal("cannot set up the terminal").cause(e.to_string()))?;
    let (cols, rows) = crossterm::terminal::size().unwrap_or((80, 24));
    let cursor_row = crossterm::cursor::position()
        .map(|(_, y)| y)
        .unwrap_or(rows.saturating_sub(1));
    let term = InlineTerminal::new(TerminalOut, cols, rows, cursor_row);
    let mut signals = Signals::new()?;
    let (input_tx, input_rx) = mpsc::unbounded_channel();
    spawn_input(input_tx);
    let mut ui = Ui::start(setup, term);
    let exit = ui.run(input_rx, &mut signals).await;
    let id = ui.session_id();
    let saved = ui.shutdown(&mut signals).await;
    drop(tty);
    if saved {
        let _ = out.out(format!("Session saved. Resume it with: keel --resume {id}\n").as_bytes());
        let _ = out.flush();
    }
    Ok(exit)
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

/// The controller's state.
struct Ui {
    view: View,
    term: InlineTerminal<TerminalOut>,
    live: Live,
    config: AgentConfig,
    models: Models,
    clock: Clock,
    session_dir: PathBuf,
    keel_home: PathBuf,
    templates: Vec<Template>,
    skills: Vec<crate::skills::Skill>,
    tx: mpsc::UnboundedSender<Internal>,
    internal_rx: mpsc::UnboundedReceiver<Internal>,
    dirty: bool,
    last_frame: Option<Instant>,
    stop: Option<Exit>,
    /// A prompt to send once the first frame is up.
    first_prompt: Option<String>,
}

enum Step {
    Event(std::sync::Arc<Event>),
    Input(Option<Input>),
    Internal(Internal),
    Signal(i32),
    Frame,
    Tick,
}

impl Ui {
    fn start(setup: TuiSetup, term: InlineTerminal<TerminalOut>) -> Ui {
        let (templates, template_warnings) =
            prompts::load(&setup.prompt_dirs.0, &setup.prompt_dirs.1);
        let provider = setup.models.start_provider();
        let messages = setup.store.context();
        let resumed = !setup.store.entries().is_empty();
        let session_id = setup.store.header().id.clone();
        let live = Live::start(
            &setup.config,
            None,
            Starting {
                store: setup.store,
                clock: setup.clock.clone(),
                provider,
                thinking: setup.config.thinking_level.clone(),
                announce: setup.announce,
            },
        );
        let (tx, internal_rx) = mpsc::unbounded_channel();
        let mut view = View::new();
        view.templates = templates
            .iter()
            .map(|t| (t.name.clone(), t.description.clone()))
            .chain(
                setup
                    .skills
                    .iter()
                    .map(|s| (format!("skill:{}", s.name), s.description.clone())),
            )
            .collect();
        view.composer.set_history(user_history(&messages));
        let mut ui = Ui {
            view,
            term,
            live,
            config: setup.config,
            models: setup.models,
            clock: setup.clock,
            session_dir: setup.session_dir,
            keel_home: setup.keel_home,
            templates,
            skills: setup.skills,
            tx,
            internal_rx,
            dirty: true,
            last_frame: None,
            stop: None,
            first_prompt: setup.prompt,
        };
        ui.sync_model();
        ui.view.notice(HistoryCell::Notice(format!(
            "keel {} · {} · session {}{} · /help for commands",
            env!("CARGO_PKG_VERSION"),
            ui.view.transcript.model,
            short_id(&session_id),
            if resumed { " (resumed)" } else { "" }
        )));
        ui.view.transcript.replay(&messages);
        for w in setup.warnings.iter().chain(&template_warnings) {
            ui.view.notice(HistoryCell::Notice(format!("warning: {w}")));
        }
        if setup.pick_session {
            ui.open_picker();
        }
        ui
    }

    fn session_id(&self) -> String {
        recorder::lock(&self.live.store).header().id.clone()
    }

    /// Model, provider, thinking level and context window from the kernel into the view.
    fn sync_model(&mut self) {
        let provider = self.live.session.provider();
        let t = &mut self.view.transcript;
        t.model = provider.model().to_string();
        t.thinking_level = self.live.session.thinking_level();
        t.session_name = recorder::lock(&self.live.store).name().map(str::to_string);
        self.view.context_window = provider.info().context_window;
    }

    async fn run(
        &mut self,
        mut input: mpsc::UnboundedReceiver<Input>,
        signals: &mut Signals,
    ) -> Exit {
        self.render();
        if let Some(p) = self.first_prompt.take() {
            self.act(Action::Prompt(p)).await;
        }
        while self.stop.is_none() {
            let frame_at = self
                .last_frame
                .map_or_else(Instant::now, |t| t + FRAME_INTERVAL);
            let ticking = self.view.transcript.is_running();
            let step = tokio::select! {
                biased;
                n = signals.next() => Step::Signal(n),
                _ = tokio::time::sleep_until(frame_at), if self.dirty => Step::Frame,
                Some(ev) = self.live.rx.recv() => Step::Event(ev),
                msg = input.recv() => Step::Input(msg),
                Some(msg) = self.internal_rx.recv() => Step::Internal(msg),
                _ = tokio::time::sleep(TICK), if ticking && !self.dirty => Step::Tick,
            };
            match step {
                Step::Signal(n) => self.stop = Some(Exit::Signal(n)),
                Step::Frame => self.render(),
                Step::Tick => {
                    self.view.spinner = self.view.spinner.wrapping_add(1);
                    self.dirty = true;
                }
                Step::Event(ev) => {
                    self.on_event(&ev).await;
                    while let Ok(ev) = self.live.rx.try_recv() {
                        self.on_event(&ev).await;
                    }
                }
                Step::Input(Some(msg)) => self.on_input(msg).await,
                Step::Input(None) => self.stop = Some(Exit::Success),
                Step::Internal(Internal::Notice(cell)) => {
                    self.view.notice(cell);
                    self.dirty = true;
                }
            }
        }
        self.stop.unwrap_or(Exit::Success)
    }

    fn render(&mut self) {
        self.view.now_ms = self.clock.now_ms();
        if let Err(e) = draw(&mut self.view, &mut self.term) {
            tracing::error!("cannot draw: {e}");
            self.stop = Some(Exit::Signal(crate::exit::SIGPIPE));
        }
        self.dirty = false;
        self.last_frame = Some(Instant::now());
    }

    /// A kernel event: recorded, then shown as the public events a host publishes for it.
    async fn on_event(&mut self, ev: &Event) {
        self.live.recorder.apply(ev);
        for public in wire::events_for(ev) {
            for action in self.view.on_event(&public, ev.ts) {
                self.act(action).await;
            }
            if let PublicEvent::ModelChanged { .. } = public {
                self.view.context_window = self.live.session.provider().info().context_window;
            }
        }
        self.dirty = true;
    }

    async fn on_input(&mut self, msg: Input) {
        match handle_input(&mut self.view, &mut self.term, msg) {
            Handled::Actions(actions) => {
                for a in actions {
                    self.act(a).await;
                }
            }
            Handled::Stop => self.stop = Some(Exit::Success),
        }
        self.dirty = true;
    }

    async fn act(&mut self, action: Action) {
        let session = self.live.session.clone();
        match action {
            Action::Prompt(text) => {
                let text = self.expand(text);
                if let Err(e) = session.prompt(text) {
                    self.view.notice(HistoryCell::Error(e.to_string()));
                }
            }
            Action::Steer(text) => session.steer(self.expand(text)),
            Action::FollowUp(text) => session.follow_up(self.expand(text)),
            Action::Abort => {
                let (steering, follow_up) = session.clear_queue();
                session.abort();
                self.view
                    .restore_to_composer(steering.into_iter().chain(follow_up).collect());
            }
            Action::Approve { call_id, decision } => {
                session.approve(&call_id, decision);
            }
            Action::Bash(cmd) => self.bash(cmd),
            Action::Command { name, args } => self.command(&name, &args).await,
            Action::OpenSession(path) => self.open_session(&path).await,
            Action::Quit => self.stop = Some(Exit::Success),
        }
        self.dirty = true;
    }

    /// The user's text with a `/skill:NAME` or a `/template` expanded (as the host does).
    fn expand(&self, text: String) -> String {
        crate::skills::expand(&text, &self.skills)
            .or_else(|| prompts::expand(&text, &self.templates))
            .unwrap_or(text)
    }

    /// `!command`: runs in the shell as the user; the output reaches the model with the next
    /// prompt.
    fn bash(&mut self, cmd: String) {
        let session = self.live.session.clone();
        let (chunks, _ignored) = mpsc::unbounded_channel();
        self.view
            .notice(HistoryCell::Notice(format!("$ {cmd}  (running…)")));
        tokio::spawn(async move {
            let (_keep, signal) = crate::kernel::abort::AbortController::new();
            session.bash(&cmd, false, chunks, signal).await;
        });
    }

    async fn command(&mut self, name: &str, args: &str) {
        let busy = self.view.transcript.is_running();
        match name {
            "quit" | "exit" => self.stop = Some(Exit::Success),
            "detach" => self.view.notice(HistoryCell::Notice(
                "this session runs in this keel process, not in the daemon: /quit ends it \
                 (start keel with --daemon for a session that outlives the window)"
                    .to_string(),
            )),
            "help" => self.view.notice(HistoryCell::Notice(help_text())),
            "model" => self.model_command(args),
            "thinking" => {
                let session = &self.live.session;
                let level = if args.is_empty() {
                    let levels = session.provider().info().thinking_levels.clone();
                    let current = session.thinking_level();
                    let i = levels
                        .iter()
                        .position(|l| *l == current)
                        .map_or(0, |i| i + 1);
                    levels
                        .get(i % levels.len().max(1))
                        .cloned()
                        .unwrap_or_default()
                } else {
                    args.to_string()
                };
                let set = session.set_thinking_level(&level);
                self.view
                    .notice(HistoryCell::Notice(format!("thinking level: {set}")));
            }
            "compact" => {
                let session = self.live.session.clone();
                let tx = self.tx.clone();
                let focus = (!args.is_empty()).then(|| args.to_string());
                tokio::spawn(async move {
                    if let Err(e) = session.compact(focus).await {
                        tracing::info!("compaction did not run: {e}");
                        let _ = tx.send(Internal::Notice(HistoryCell::Notice(format!(
                            "compaction did not run: {e}"
                        ))));
                    }
                });
            }
            "new" | "resume" | "fork" if busy => self.view.notice(HistoryCell::Notice(
                "the agent is working: press Esc to stop it first".into(),
            )),
            "new" => {
                let header = self.new_header();
                let store = live::new_store(&self.live, &self.session_dir, header);
                self.replace(store, "new session").await;
            }
            "resume" => self.open_picker(),
            "fork" => self.fork().await,
            "export" => self.export(args),
            "session" => self.session_info(),
            "name" if args.is_empty() => self
                .view
                .notice(HistoryCell::Notice("usage: /name <session name>".into())),
            "name" => self.live.session.set_session_name(args.to_string()),
            _ => self
                .view
                .notice(HistoryCell::Notice(format!("unknown command /{name}"))),
        }
    }

    fn model_command(&mut self, args: &str) {
        let available = self.models.available();
        if args.is_empty() {
            let mut text = String::from("models you can use (/model provider/id):");
            let current = self.live.session.provider();
            for m in &available {
                let mark = if m.id == current.model() { "●" } else { " " };
                text.push_str(&format!("\n {mark} {}/{}", m.provider, m.id));
            }
            self.view.notice(HistoryCell::Notice(text));
            return;
        }
        let (provider, id) = match args.split_once('/') {
            Some((p, id)) => (p.to_string(), id.to_string()),
            None => match available.iter().find(|m| m.id == args) {
                Some(m) => (m.provider.clone(), m.id.clone()),
                None => {
                    self.view
                        .notice(HistoryCell::Error(format!("unknown model {args}")));
                    return;
                }
            },
        };
        match self.models.build(&provider, &id) {
            Ok(p) => {
                self.live.session.set_model(p);
                self.view
                    .notice(HistoryCell::Notice(format!("model: {provider}/{id}")));
            }
            Err(e) => self.view.notice(HistoryCell::Error(e)),
        }
    }

    fn open_picker(&mut self) {
        let here = session::list(&self.session_dir);
        let all = session::list_all(&self.keel_home);
        self.view
            .open_picker(picker::Picker::new(here, all, self.clock.now_ms()));
    }

    async fn open_session(&mut self, path: &std::path::Path) {
        if self.live.path().as_deref() == Some(path) {
            return;
        }
        match Store::resume(path, &self.clock) {
            Ok((store, warnings)) => {
                for w in warnings {
                    self.view
                        .notice(HistoryCell::Notice(format!("warning: {w}")));
                }
                let messages = store.context();
                self.replace(store, "resumed session").await;
                self.view.composer.set_history(user_history(&messages));
                self.view.transcript.replay(&messages);
            }
            Err(e) => self.view.notice(HistoryCell::Error(e.message)),
        }
    }

    async fn fork(&mut self) {
        let parent = self.live.path();
        let leaf = recorder::lock(&self.live.store)
            .leaf_id()
            .map(str::to_string);
        let header = self.new_header();
        match live::fork_store(
            &self.live,
            &self.session_dir,
            header,
            leaf.as_deref(),
            parent.as_deref(),
        ) {
            Ok(store) => self.replace(store, "forked into session").await,
            Err(e) => self.view.notice(HistoryCell::Error(e)),
        }
    }

    fn export(&mut self, args: &str) {
        let path = (!args.is_empty()).then(|| self.config.cwd.join(args));
        match live::export_html(&self.live, &self.config.cwd, path) {
            Ok(p) => self
                .view
                .notice(HistoryCell::Notice(format!("exported to {}", p.display()))),
            Err(e) => self.view.notice(HistoryCell::Error(e)),
        }
    }

    fn session_info(&mut self) {
        let store = recorder::lock(&self.live.store);
        let u = &self.view.transcript.totals.usage;
        let text =
            format!(
            "session {}\n  file: {}\n  name: {}\n  messages: {}\n  tokens: ↑{} ↓{} · cost ${:.4}",
            store.header().id,
            store
                .path()
                .map_or("(not saved: --no-session)".into(), |p| p.display().to_string()),
            store.name().unwrap_or("(none)"),
            store.context().len(),
            view::fmt_tokens(u.input + u.cache_read + u.cache_write),
            view::fmt_tokens(u.output),
            u.cost.total
        );
        drop(store);
        self.view.notice(HistoryCell::Notice(text));
    }

    fn new_header(&self) -> SessionHeader {
        SessionHeader::new(&self.clock, self.config.cwd.display().to_string())
    }

    /// Serves `store` from now on (the old session's file is synced and released first).
    async fn replace(&mut self, store: Store, what: &str) {
        let announce = store.entries().is_empty();
        let id = store.header().id.clone();
        let old = self.live.session.clone();
        let next = Live::start(
            &self.config,
            Some(&old),
            Starting {
                store,
                clock: self.clock.clone(),
                provider: old.provider(),
                thinking: old.thinking_level(),
                announce,
            },
        );
        std::mem::replace(&mut self.live, next).retire().await;
        // Usage and state start over; cells not yet on screen still go there.
        let pending = self.view.transcript.drain();
        self.view.transcript = transcript::Transcript::new();
        for cell in pending {
            self.view.notice(cell);
        }
        self.sync_model();
        self.view
            .notice(HistoryCell::Notice(format!("── {what} {id} ──")));
    }

    /// Stops the work and saves the session; returns whether it has a file to resume.
    async fn shutdown(mut self, signals: &mut Signals) -> bool {
        if self.live.session.is_running() {
            self.live.session.clear_queue();
            self.live.session.abort();
            // Let the run settle so the aborted answer is recorded; a second signal or 3 s
            // end the wait.
            let wait = async {
                while let Some(ev) = self.live.rx.recv().await {
                    self.live.recorder.apply(&ev);
                    let events = wire::events_for(&ev);
                    for public in &events {
                        self.view.on_event(public, ev.ts);
                    }
                    if events
                        .iter()
                        .any(|e| matches!(e, PublicEvent::AgentSettled { .. }))
                    {
                        break;
                    }
                }
            };
            tokio::select! {
                _ = wait => {}
                _ = signals.next() => {}
                _ = tokio::time::sleep(Duration::from_secs(3)) => {}
            }
        }
        let _ = draw(&mut self.view, &mut self.term);
        let _ = self.term.clear_live();
        let has_file = {
            let store = recorder::lock(&self.live.store);
            store.path().is_some() && store.is_materialized()
        };
        self.live.retire().await;
        has_file
    }
}

/// The user messages of a session, oldest first (the editor's history).
pub(super) fn user_history(messages: &[crate::kernel::message::Message]) -> Vec<String> {
    messages
        .iter()
        .filter_map(|m| match m {
            crate::kernel::message::Message::User(u) => Some(crate::kernel::message::user_text(u)),
            _ => None,
        })
        .collect()
}

pub(super) fn short_id(id: &str) -> &str {
    id.get(..8).unwrap_or(id)
}

pub(super) fn help_text() -> String {
    let mut s = String::from("commands:");
    for (c, d) in view::COMMANDS {
        s.push_str(&format!("\n  /{c:<10} {d}"));
    }
    s.push_str(
        "\nkeys:\n  Enter        send (while the agent works: steer it)\n  Alt+Enter    queue a follow-up for when it is done\n  Ctrl+J       new line (also Shift+Enter, or \\ then Enter)\n  Esc          interrupt; queued messages come back to the editor\n  Up/Down      history\n  Ctrl+T       show or collapse thinking\n  Ctrl+O       expand or collapse tool output\n  Ctrl+C       clear the editor; twice to quit\n  Ctrl+D       quit when the editor is empty\n  !command     run a shell command; its output goes to the model with the next prompt",
    );
    s
}
