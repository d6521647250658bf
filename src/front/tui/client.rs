//! The TUI as a client of the daemon (`keel --daemon` at a terminal, `keel attach ID`): the
//! same view, fed the session's public events through a [`Link`], with every action sent as a
//! pi command. Closing the window, losing the terminal (SIGHUP) or quitting only ends this
//! view: the run goes on in the daemon, and `keel attach ID` shows it again (the transcript so
//! far from the attach snapshot, then the live stream, pending dialogs included).
#![deny(clippy::print_stdout, clippy::print_stderr)]

use std::path::PathBuf;

use crossterm::event::Event as TermEvent;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::terminal::InlineTerminal;
use super::transcript::HistoryCell;
use super::view::{Action, View};
use super::{draw, short_id, spawn_input, tty, user_history, Input, FRAME_INTERVAL, TICK};
use crate::error::StartupError;
use crate::exit::Exit;
use crate::front::link::{Commands, Link, Note, Start};
use crate::front::public::PublicEvent;
use crate::front::signals::Signals;
use crate::kernel::clock::Clock;
use crate::kernel::event::ApprovalDecision;
use crate::kernel::message::Message;
use crate::output::{Output, TerminalOut};

/// What attaching needs.
pub struct AttachSetup {
    pub socket: PathBuf,
    pub session: String,
    /// A prompt given on the command line: sent once the view is up.
    pub prompt: Option<String>,
    pub warnings: Vec<String>,
    pub ambiguous_wide: bool,
    /// How to open the session again in a new daemon if this one dies: `session/open`'s
    /// params (their session flags are replaced by the session's file).
    pub reopen: Value,
    pub env: crate::mode::Env,
    /// The session directory of the cwd (the `/resume` picker).
    pub session_dir: PathBuf,
}

/// Answers of commands sent in the background.
enum Back {
    Notice(HistoryCell),
    Restore(Vec<String>),
    /// The session was replaced: its messages, to show from the start.
    Replay(String, Vec<Message>),
    /// The session's templates and skills (`get_commands`), for the slash menu.
    Commands(Vec<(String, String)>),
}

struct Client {
    view: View,
    term: InlineTerminal<TerminalOut>,
    link: Link,
    commands: Commands,
    socket: PathBuf,
    epoch: String,
    seq: u64,
    clock: Clock,
    back_tx: mpsc::UnboundedSender<Back>,
    back_rx: mpsc::UnboundedReceiver<Back>,
    dirty: bool,
    last_frame: Option<Instant>,
    stop: Option<Exit>,
    /// The daemon went away: Enter tries to reconnect.
    lost: bool,
    reopen: Value,
    env: crate::mode::Env,
    /// The session's file, for reopening it in a new daemon.
    file: Option<String>,
    /// Quitting while a run is active: waiting for "leave it running" or "stop it".
    asking_quit: bool,
    /// Where the session picker looks.
    session_dir: PathBuf,
}

/// Attaches the TUI to a session of the daemon until the user leaves (exit 0), the terminal
/// goes away or a signal ends this client (128 + n); the session stays live either way.
pub async fn run(setup: AttachSetup, out: &mut Output) -> Result<Exit, StartupError> {
    crate::text::set_ambiguous_wide(setup.ambiguous_wide);
    let (link, start) = Link::daemon(&setup.socket, &setup.session, None, true)
        .await
        .map_err(|e| {
            StartupError::config(format!("cannot attach to session {}: {e}", setup.session))
        })?;
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
    let (back_tx, back_rx) = mpsc::unbounded_channel();
    let commands = link.commands();
    let mut client = Client {
        view: View::new(),
        term,
        link,
        commands,
        socket: setup.socket,
        epoch: start.epoch.clone(),
        seq: start.seq,
        clock: Clock::system(),
        back_tx,
        back_rx,
        dirty: true,
        last_frame: None,
        stop: None,
        lost: false,
        reopen: setup.reopen,
        env: setup.env,
        file: None,
        asking_quit: false,
        session_dir: setup.session_dir,
    };
    client.load(&start, &setup.warnings);
    client.fetch_commands();
    client.render();
    if let Some(p) = setup.prompt {
        client.act(Action::Prompt(p)).await;
    }
    let exit = client.run(input_rx, &mut signals).await;
    let id = client.link.session_id().to_string();
    let running = client.view.transcript.is_running();
    drop(client);
    drop(tty);
    let state = if running {
        "its run goes on in the keel daemon"
    } else {
        "it stays live in the keel daemon"
    };
    let text = format!("Left session {id}; {state}. Come back with: keel attach {id}\n");
    let _ = out.out(text.as_bytes());
    let _ = out.flush();
    Ok(exit)
}

impl Client {
    /// The state at attach time: the transcript so far, the model and name, a streaming
    /// message and pending dialogs.
    fn load(&mut self, start: &Start, warnings: &[String]) {
        let Some(snap) = &start.snapshot else { return };
        let messages: Vec<Message> = snap["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| serde_json::from_value(m.clone()).ok())
            .collect();
        let state = &snap["state"];
        self.file = state["sessionFile"].as_str().map(str::to_string);
        let t = &mut self.view.transcript;
        t.model = state["model"]["id"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        t.thinking_level = state["thinkingLevel"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        t.session_name = state["sessionName"].as_str().map(str::to_string);
        self.view.context_window = state["model"]["contextWindow"].as_u64().unwrap_or(0);
        self.view.composer.set_history(user_history(&messages));
        let id = self.link.session_id().to_string();
        self.view.notice(HistoryCell::Notice(format!(
            "keel {} · {} · session {} in the keel daemon · /detach leaves it running · /help",
            env!("CARGO_PKG_VERSION"),
            self.view.transcript.model,
            short_id(&id),
        )));
        self.view.transcript.replay(&messages);
        for w in warnings {
            self.view
                .notice(HistoryCell::Notice(format!("warning: {w}")));
        }
        let now = self.clock.now_ms();
        if state["isStreaming"] == true {
            self.feed(&json!({"type": "agent_start"}), now);
            if let Some(m) = snap["streaming"]["message"].as_object() {
                self.feed(&json!({"type": "message_start", "message": m}), now);
            }
            for tool in snap["streaming"]["tools"].as_array().into_iter().flatten() {
                let mut start = tool.clone();
                start["type"] = json!("tool_execution_start");
                self.feed(&start, now);
            }
        }
        for dialog in snap["pendingUi"].as_array().into_iter().flatten() {
            self.feed(dialog, now);
        }
    }

    fn feed(&mut self, event: &Value, at_ms: i64) {
        if let Some(e) = PublicEvent::parse(&event.to_string()) {
            let _ = self.view.on_event(&e, at_ms);
        }
    }

    async fn run(
        &mut self,
        mut input: mpsc::UnboundedReceiver<Input>,
        signals: &mut Signals,
    ) -> Exit {
        while self.stop.is_none() {
            let frame_at = self
                .last_frame
                .map_or_else(Instant::now, |t| t + FRAME_INTERVAL);
            let ticking = self.view.transcript.is_running();
            tokio::select! {
                biased;
                n = signals.next() => self.stop = Some(Exit::Signal(n)),
                _ = tokio::time::sleep_until(frame_at), if self.dirty => self.render(),
                note = self.link.next(), if !self.lost => self.on_note(note).await,
                msg = input.recv() => match msg {
                    Some(msg) => self.on_input(msg).await,
                    // The terminal went away: leave, the run goes on.
                    None => self.stop = Some(Exit::Success),
                },
                Some(back) = self.back_rx.recv() => {
                    match back {
                        Back::Notice(cell) => self.view.notice(cell),
                        Back::Restore(texts) => self.view.restore_to_composer(texts),
                        Back::Replay(id, messages) => self.replay(&id, &messages),
                        Back::Commands(list) => self.view.templates = list,
                    }
                    self.dirty = true;
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
        self.view.now_ms = self.clock.now_ms();
        if let Err(e) = draw(&mut self.view, &mut self.term) {
            tracing::error!("cannot draw: {e}");
            self.stop = Some(Exit::Signal(crate::exit::SIGPIPE));
        }
        self.dirty = false;
        self.last_frame = Some(Instant::now());
    }

    async fn on_note(&mut self, note: Option<Note>) {
        match note {
            Some(Note::Event { seq, line }) => {
                self.seq = seq;
                if let Some(e) = PublicEvent::parse(&line) {
                    let now = self.clock.now_ms();
                    for action in self.view.on_event(&e, now) {
                        self.act(action).await;
                    }
                }
            }
            Some(Note::Replaced { session, epoch }) => {
                self.epoch = epoch;
                let commands = self.commands.clone();
                let back = self.back_tx.clone();
                tokio::spawn(async move {
                    let got = commands.request("get_messages", json!({})).await;
                    let messages: Vec<Message> = got
                        .ok()
                        .and_then(|v| serde_json::from_value(v["messages"].clone()).ok())
                        .unwrap_or_default();
                    let _ = back.send(Back::Replay(session, messages));
                });
            }
            Some(Note::Lagged { .. }) => self.reconnect().await,
            Some(Note::Lost(why)) => self.lost(&why),
            None => self.lost("the connection ended"),
        }
        self.dirty = true;
    }

    /// Another session is shown from now on: the transcript starts over with its messages.
    fn replay(&mut self, id: &str, messages: &[Message]) {
        let (model, thinking) = (
            self.view.transcript.model.clone(),
            self.view.transcript.thinking_level.clone(),
        );
        let pending = self.view.transcript.drain();
        self.view.transcript = super::transcript::Transcript::new();
        self.view.transcript.model = model;
        self.view.transcript.thinking_level = thinking;
        for cell in pending {
            self.view.notice(cell);
        }
        self.view
            .notice(HistoryCell::Notice(format!("── session {id} ──")));
        self.view.composer.set_history(user_history(messages));
        self.view.transcript.replay(messages);
        self.dirty = true;
    }

    fn lost(&mut self, why: &str) {
        self.lost = true;
        self.view.notice(HistoryCell::Error(format!(
            "The connection to the keel daemon was lost ({why}). Press Enter to reconnect; the \
             session's file keeps every completed entry."
        )));
        self.view
            .set_hint("daemon connection lost · Enter reconnects");
    }

    /// Attaches again from the last event seen: a replay, or a snapshot if the daemon no longer
    /// holds what followed.
    async fn reconnect(&mut self) {
        let cursor = Some((self.epoch.as_str(), self.seq));
        let session = self.link.session_id().to_string();
        match Link::daemon(&self.socket, &session, cursor, true).await {
            Ok((link, start)) => {
                self.link = link;
                self.commands = self.link.commands();
                self.lost = false;
                self.epoch = start.epoch.clone();
                if start.snapshot.is_some() {
                    self.view.notice(HistoryCell::Notice(
                        "reconnected; the daemon no longer held the events in between, so the \
                         state below is its snapshot"
                            .into(),
                    ));
                    let old = std::mem::take(&mut self.view);
                    self.view.composer = old.composer;
                    self.load(&start, &[]);
                } else {
                    self.view
                        .notice(HistoryCell::Notice("reconnected to the keel daemon".into()));
                }
                self.seq = start.seq;
                self.view.set_hint("");
            }
            Err(_)
                if !self.socket.exists()
                    || std::os::unix::net::UnixStream::connect(&self.socket).is_err() =>
            {
                self.restart().await
            }
            Err(e) => {
                self.lost = true;
                self.view
                    .notice(HistoryCell::Error(format!("cannot reconnect: {e}")));
            }
        }
    }

    /// The daemon is gone: start a new one and open the session there again from its file.
    async fn restart(&mut self) {
        let Some(file) = self.file.clone() else {
            self.view.notice(HistoryCell::Error(
                "the keel daemon is gone and this session has no file to resume".into(),
            ));
            return;
        };
        match reopen(&self.socket, &self.env, &self.reopen, &file).await {
            Ok((id, link, start)) => {
                self.link = link;
                self.commands = self.link.commands();
                self.lost = false;
                self.epoch = start.epoch.clone();
                self.seq = start.seq;
                let old = std::mem::take(&mut self.view);
                self.view.composer = old.composer;
                self.load(&start, &[]);
                self.view.notice(HistoryCell::Notice(format!(
                    "the keel daemon had stopped: a new one resumed session {} from its file",
                    short_id(&id)
                )));
                self.view.set_hint("");
            }
            Err(e) => {
                self.lost = true;
                self.view.notice(HistoryCell::Error(format!(
                    "cannot start a new keel daemon: {e}"
                )));
            }
        }
    }

    async fn on_input(&mut self, msg: Input) {
        match msg {
            Input::Term(TermEvent::Key(key)) if self.lost => {
                if key.code == crossterm::event::KeyCode::Enter {
                    self.reconnect().await;
                } else if let Some(Action::Quit) = self.view.on_key(key) {
                    self.stop = Some(Exit::Success);
                }
            }
            Input::Term(TermEvent::Key(key)) if self.asking_quit => {
                use crossterm::event::KeyCode;
                self.asking_quit = false;
                self.view.set_hint("");
                match key.code {
                    KeyCode::Char('l') | KeyCode::Char('d') | KeyCode::Enter => {
                        self.stop = Some(Exit::Success)
                    }
                    KeyCode::Char('s') => {
                        // Awaited: the stop must reach the daemon before this client ends
                        // (`abort` is answered once the run has settled).
                        if let Err(e) = self.commands.request("abort", json!({})).await {
                            self.view.notice(HistoryCell::Error(e));
                        }
                        self.stop = Some(Exit::Success);
                    }
                    _ => {}
                }
            }
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

    /// Sends a command in the background; its error (pi's text) becomes a notice.
    fn send(&self, command: &'static str, params: Value) {
        let commands = self.commands.clone();
        let back = self.back_tx.clone();
        tokio::spawn(async move {
            if let Err(e) = commands.request(command, params).await {
                let _ = back.send(Back::Notice(HistoryCell::Error(e)));
            }
        });
    }

    /// Asks the session for its templates and skills, for the slash menu.
    fn fetch_commands(&self) {
        let commands = self.commands.clone();
        let back = self.back_tx.clone();
        tokio::spawn(async move {
            let Ok(v) = commands.request("get_commands", json!({})).await else {
                return;
            };
            let list = v["commands"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| {
                    let name = c["name"].as_str()?.to_string();
                    Some((name, c["description"].as_str().unwrap_or("").to_string()))
                })
                .collect();
            let _ = back.send(Back::Commands(list));
        });
    }

    /// Sends a command in the background and shows `say(data)`, or pi's error text.
    fn ask_and_tell(
        &self,
        command: &'static str,
        params: Value,
        say: impl FnOnce(&Value) -> String + Send + 'static,
    ) {
        let commands = self.commands.clone();
        let back = self.back_tx.clone();
        tokio::spawn(async move {
            let cell = match commands.request(command, params).await {
                Ok(v) => HistoryCell::Notice(say(&v)),
                Err(e) => HistoryCell::Error(e),
            };
            let _ = back.send(Back::Notice(cell));
        });
    }

    async fn act(&mut self, action: Action) {
        match action {
            Action::Prompt(text) => self.send("prompt", json!({"message": text})),
            Action::Steer(text) => self.send("steer", json!({"message": text})),
            Action::FollowUp(text) => self.send("follow_up", json!({"message": text})),
            Action::Abort => {
                let commands = self.commands.clone();
                let back = self.back_tx.clone();
                tokio::spawn(async move {
                    if let Ok(q) = commands.request("clear_queue", json!({})).await {
                        let texts: Vec<String> = ["steering", "followUp"]
                            .iter()
                            .flat_map(|k| q[*k].as_array().cloned().unwrap_or_default())
                            .filter_map(|v| v.as_str().map(str::to_string))
                            .collect();
                        let _ = back.send(Back::Restore(texts));
                    }
                    let _ = commands.request("abort", json!({})).await;
                });
            }
            Action::Approve { call_id, decision } => {
                let confirmed = decision == ApprovalDecision::Allow;
                self.send(
                    "extension_ui_response",
                    json!({"id": call_id, "confirmed": confirmed}),
                );
            }
            Action::Bash(cmd) => {
                self.view
                    .notice(HistoryCell::Notice(format!("$ {cmd}  (running…)")));
                self.send("bash", json!({"command": cmd}));
            }
            Action::Command { name, args } => self.command(&name, &args),
            Action::OpenSession(path) => {
                self.send("switch_session", json!({"sessionPath": path}));
            }
            Action::Quit => self.quit(),
        }
        self.dirty = true;
    }

    /// Leaving while a run is active asks whether to leave it running or stop it; otherwise
    /// the view just ends (the session stays live in the daemon).
    fn quit(&mut self) {
        if !self.view.transcript.is_running() {
            self.stop = Some(Exit::Success);
            return;
        }
        self.asking_quit = true;
        self.view.set_hint(
            "a run is active: l leaves it running in the daemon · s stops it · Esc stays",
        );
    }

    fn command(&mut self, name: &str, args: &str) {
        match name {
            "detach" => self.stop = Some(Exit::Success),
            "quit" | "exit" => self.quit(),
            "help" => self.view.notice(HistoryCell::Notice(super::help_text())),
            "name" if !args.is_empty() => self.send("set_session_name", json!({"name": args})),
            "compact" => {
                let params = match args.is_empty() {
                    true => json!({}),
                    false => json!({"customInstructions": args}),
                };
                self.send("compact", params);
            }
            "thinking" if args.is_empty() => self.send("cycle_thinking_level", json!({})),
            "thinking" => self.send("set_thinking_level", json!({"level": args})),
            "model" if !args.is_empty() => {
                let (provider, model) = args.split_once('/').unwrap_or(("", args));
                let what = args.to_string();
                self.ask_and_tell(
                    "set_model",
                    json!({"provider": provider, "modelId": model}),
                    move |_| format!("model: {what}"),
                );
            }
            "new" | "resume" | "fork" if self.view.transcript.is_running() => self.view.notice(
                HistoryCell::Notice("the agent is working: press Esc to stop it first".into()),
            ),
            "new" => self.send("new_session", json!({})),
            "resume" => {
                let here = crate::kernel::session::list(&self.session_dir);
                let all = crate::kernel::session::list_all(&self.env.keel_home);
                self.view
                    .open_picker(super::picker::Picker::new(here, all, self.clock.now_ms()));
            }
            // A copy of the session as it stands, continued from here (this one stays).
            "fork" => self.send("clone", json!({})),
            "export" => {
                let params = match args.is_empty() {
                    true => json!({}),
                    false => json!({"outputPath": self.env.cwd.join(args)}),
                };
                self.ask_and_tell("export_html", params, |v| {
                    format!("exported to {}", v["path"].as_str().unwrap_or("?"))
                });
            }
            "name" if args.is_empty() => self
                .view
                .notice(HistoryCell::Notice("usage: /name <session name>".into())),
            "model" if args.is_empty() => {
                self.ask_and_tell("get_available_models", json!({}), |v| {
                    let mut text = String::from("models you can use (/model provider/id):");
                    for m in v["models"].as_array().into_iter().flatten() {
                        text.push_str(&format!(
                            "\n   {}/{}",
                            m["provider"].as_str().unwrap_or(""),
                            m["id"].as_str().unwrap_or("")
                        ));
                    }
                    text
                })
            }
            "session" => {
                let id = self.link.session_id().to_string();
                let socket = self.socket.display().to_string();
                let commands = self.commands.clone();
                let back = self.back_tx.clone();
                tokio::spawn(async move {
                    let status = commands.request("daemon/status", json!({})).await;
                    let status = status.unwrap_or_default();
                    let me = status["sessions"]
                        .as_array()
                        .and_then(|l| l.iter().find(|s| s["sessionId"] == id.as_str()).cloned())
                        .unwrap_or_default();
                    let text = format!(
                        "session {id} · file {} · runs in the keel daemon (pid {}, {socket}) · windows attached: {} · leave with /detach, come back with: keel attach {id}",
                        me["sessionFile"].as_str().unwrap_or("(none)"),
                        status["pid"],
                        me["clients"],
                    );
                    let _ = back.send(Back::Notice(HistoryCell::Notice(text)));
                });
            }
            other => self.view.notice(HistoryCell::Notice(format!(
                "/{other} is not available through the daemon yet (keel without --daemon has it)"
            ))),
        }
    }
}

/// Session flags (and their values) that pick a session: replaced when reopening by file.
const SESSION_FLAGS: &[&str] = &["--continue", "-c", "--no-session"];
const SESSION_FLAGS_WITH_VALUE: &[&str] =
    &["--resume", "-r", "--session", "--session-id", "--fork"];

/// `args` without the flags that pick a session, then `--session FILE`.
fn args_for_file(args: &[Value], file: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut skip = false;
    for a in args.iter().filter_map(Value::as_str) {
        if std::mem::take(&mut skip) {
            continue;
        }
        let flag = a.split('=').next().unwrap_or(a);
        if SESSION_FLAGS_WITH_VALUE.contains(&a) {
            skip = true;
            continue;
        }
        if SESSION_FLAGS.contains(&a) || SESSION_FLAGS_WITH_VALUE.contains(&flag) {
            continue;
        }
        out.push(a.to_string());
    }
    out.extend(["--session".to_string(), file.to_string()]);
    out
}

/// Starts (or finds) a daemon on `socket`, opens `file` there with `params`' other flags and
/// attaches.
async fn reopen(
    socket: &std::path::Path,
    env: &crate::mode::Env,
    params: &Value,
    file: &str,
) -> Result<(String, Link, Start), String> {
    let stream = crate::front::daemon::start(socket, env)
        .await
        .map_err(|e| e.message)?;
    let mut client = crate::daemon::client::Client::greet(stream, true)
        .await
        .map_err(|e| e.to_string())?;
    let mut params = params.clone();
    let args = params["args"].as_array().cloned().unwrap_or_default();
    params["args"] = json!(args_for_file(&args, file));
    let opened = client
        .call("session/open", params)
        .await
        .map_err(|e| e.to_string())?;
    drop(client);
    let id = opened["sessionId"].as_str().unwrap_or_default().to_string();
    let (link, start) = Link::daemon(socket, &id, None, true).await?;
    Ok((id, link, start))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reopening_by_file_drops_the_flags_that_picked_the_session() {
        let args: Vec<Value> = [
            "--provider",
            "p",
            "--session-id",
            "x",
            "--continue",
            "--resume=y",
            "-m",
            "m",
        ]
        .iter()
        .map(|s| json!(s))
        .collect();
        assert_eq!(
            args_for_file(&args, "/f.jsonl"),
            ["--provider", "p", "-m", "m", "--session", "/f.jsonl"]
        );
    }
}
