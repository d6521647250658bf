//! RPC mode (`--mode rpc`): pi-compatible JSONL over stdio for editor plugins
//! (`pi-protocol.md` §4, `DESIGN.md` §4). One implementation wherever the session lives: a host
//! in this process or the daemon (`daemon`: `--daemon`, `--remote`), both on a
//! [`crate::client::link::Link`] (`session`). This file owns stdin, stdout, signals and pi's framing:
//! it reads request lines, answers each with exactly one response (unknown commands, missing
//! fields, oversized and non-JSON lines too) and writes the session's events as they come, the
//! events a command caused before its response. A line it answers itself keeps its place
//! after the earlier requests that are answered at once; long commands (bash, compact, abort
//! during a run) answer when they finish.
//!
//! What it does better than pi: the session host serves one command at a time and the lines
//! of one read are sent back to back (two prompts in one write never both start); bad input
//! never ends the process or loses state. Closing stdin waits for the session to be idle, then
//! exits 0; a signal ends with 128 + n (in this process after the run is stopped and saved).
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod daemon;
mod session;

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use crate::client::link::{Link, LinkError, LinkErrorKind, Lost};
use crate::error::StartupError;
use crate::exit::Exit;
use crate::front::invocation::Invocation;
use crate::front::stdin::Input;
use crate::host::actor::replaces_session;
use crate::host::Data;
use crate::kernel::clock::Clock;
use crate::mode::Env;
use crate::output::Output;
use crate::signals::Signals;
use crate::wire::jsonl::{Frame, MAX_LINE_BYTES};
use crate::wire::pi::CommandName;
use crate::wire::rpc;
use session::Session;

/// Whether the answer to command `word` can come after the answers of later requests.
fn answers_late(word: &str) -> bool {
    use CommandName::{Abort, Bash, Compact};
    matches!(CommandName::parse(word), Some(Abort | Bash | Compact))
}

/// Serves RPC mode until stdin closes (exit 0) or a signal arrives (128 + n): the session in
/// this process, or in the daemon with `--daemon` or a remote link. Nothing is written to
/// stdout before the first request; startup warnings go to stderr and, after the first
/// request, to the client as `notify`.
pub async fn run(
    inv: &Invocation,
    settings: &crate::setup::Settings,
    env: &Env,
    clock: &Clock,
    remote: bool,
    out: &mut Output,
) -> Result<Exit, StartupError> {
    crate::setup::check_session_flags(settings, false)?;
    if !inv.prompt.is_empty() {
        return Err(StartupError::usage(
            "rpc mode takes no prompt arguments; send {\"type\":\"prompt\",\"message\":...} on stdin",
        ));
    }
    if inv.daemon || remote {
        let signals = Signals::new()?;
        let session = daemon::open(inv, env, out).await?;
        return Ok(serve(session, Front::new(), signals, out).await);
    }
    // `-w` in this process: the session is set up in its worktree.
    let entered = crate::setup::worktree::enter(settings, env, crate::mode::Mode::Rpc)?;
    let (settings, env) = match &entered {
        Some((s, e)) => (s, e),
        None => (settings, env),
    };
    let setup = crate::setup::host_setup(settings, env, clock, true).await?;
    for w in &setup.warnings {
        out.err(&format!("Warning: {w}\n"));
    }
    let signals = Signals::new()?;
    let link = Link::local_from_start(setup)
        .await
        .map_err(|e| StartupError::internal(format!("cannot start the session: {e}")))?;
    Ok(serve(Session::new(link, None, 0), Front::new(), signals, out).await)
}

/// What the session's side hands over, in the order it is to be written.
enum Got {
    /// A line of the session's stream.
    Event { line: Arc<str> },
    /// The answer to request `key`.
    Answer {
        key: u64,
        result: Result<Data, LinkError>,
    },
    /// Nothing runs in the session since the input ended (in this process).
    Idle,
    /// The session in this process ended.
    Closed,
    /// The daemon went away.
    Lost(Lost),
}

/// How sending a request went.
enum Sent {
    /// Its answer will come as [`Got::Answer`].
    Waiting,
    /// It gets no answer (`extension_ui_response` in this process).
    NoAnswer,
    /// The session's side is gone.
    Gone,
}

/// Why the loop ended.
enum End {
    /// stdin closed and the session is idle.
    Done,
    /// A signal (128 + n).
    Signal(i32),
    /// With this exit (stdout failed, the session's side went away).
    Exit(Exit),
}

/// Reads stdin and the session's side until stdin has closed and everything was answered,
/// or a signal, or a failure.
async fn serve(
    mut session: Session,
    mut front: Front,
    mut signals: Signals,
    out: &mut Output,
) -> Exit {
    // Few batches in flight: each holds up to one read's lines (64 KiB) plus one long line.
    let (input_tx, mut input_rx) = tokio::sync::mpsc::channel::<Input>(4);
    crate::front::stdin::spawn_reader(input_tx);
    let mut eof = false;
    let end = loop {
        if eof && front.done() && session.settled(&front) {
            break End::Done;
        }
        tokio::select! {
            biased;
            n = signals.next() => break End::Signal(n),
            got = session.next() => {
                if let Err(exit) = front.got(got, &mut session, out).await {
                    break End::Exit(exit);
                }
            }
            input = input_rx.recv(), if !eof => match input {
                Some(Input::Frames(frames)) => {
                    // Back to back: nothing else is served between lines that arrived together.
                    if let Err(exit) = front.frames(frames, &mut session, out).await {
                        break End::Exit(exit);
                    }
                }
                Some(Input::Error(e)) => {
                    tracing::error!("cannot read stdin: {e}");
                    eof = true;
                    session.input_ended();
                }
                None => {
                    eof = true;
                    session.input_ended();
                }
            },
        }
        if out.flush().is_err() {
            // Our answers can no longer be written: a closed pipe ends as SIGPIPE would (141,
            // quietly); a full or failing device ends with 1 and the failure on stderr.
            break End::Exit(out.stdout_exit());
        }
    };
    match session.dial {
        None => session.stop(&mut front, &mut signals, out).await,
        Some(_) => session.leave(&end).await,
    }
    let _ = out.flush();
    match end {
        End::Done => Exit::Success,
        End::Signal(n) => Exit::Signal(n),
        End::Exit(e) => e,
    }
}

/// A stdin request on its way to the session.
struct Pending {
    /// Its place among the stdin lines.
    order: u64,
    req: rpc::Request,
    /// Its answer may come after those of later requests.
    late: bool,
}

/// A request sent and not answered yet.
struct Waiting {
    /// The order it was sent in: 1, 2, 3, …
    n: u64,
    req: Pending,
}

/// A line this side writes itself (for a line it could not parse), held until every earlier
/// request that answers at once has been answered, so it keeps its place.
struct Held {
    after: u64,
    line: String,
}

/// The client's state between stdio and the session (a session change through the daemon is
/// followed by the link, requests sent meanwhile too).
struct Front {
    waiting: HashMap<u64, Waiting>,
    next: u64,
    /// stdin requests not sent yet.
    queued: VecDeque<Pending>,
    held: VecDeque<Held>,
    /// stdin lines so far.
    order: u64,
    running: bool,
    /// Nothing runs in the session since the input ended ([`Got::Idle`]).
    idle: bool,
}

impl Front {
    fn new() -> Front {
        Front {
            waiting: HashMap::new(),
            next: 0,
            queued: VecDeque::new(),
            held: VecDeque::new(),
            order: 0,
            running: false,
            idle: false,
        }
    }

    /// What the session's side handed over; `Err` ends the loop with that exit.
    async fn got(&mut self, got: Got, session: &mut Session, out: &mut Output) -> Result<(), Exit> {
        match got {
            Got::Event { line } => self.event(&line, out),
            Got::Answer { key, result } => {
                if !self.answer(key, result, session, out).await {
                    out.err(daemon::GONE);
                    return Err(Exit::Failed);
                }
            }
            Got::Idle => self.idle = true,
            Got::Closed => {
                out.err("Error: the session ended unexpectedly\n");
                return Err(Exit::Internal);
            }
            Got::Lost(Lost::Closed) => session.closed(self, out).await?,
            Got::Lost(Lost::ShuttingDown(_)) => {
                out.err("Error: the keel daemon is shutting down\n");
                return Err(Exit::Failed);
            }
        }
        Ok(())
    }

    /// A line of the session's stream goes out as it is.
    fn event(&mut self, line: &str, out: &mut Output) {
        match line.contains("\"type\":\"agent_start\"") {
            true => self.running = true,
            false if line.contains("\"type\":\"agent_settled\"") => self.running = false,
            false => {}
        }
        let _ = out.out(line.as_bytes());
        let _ = out.out(b"\n");
    }

    /// The lines of one read, sent back to back.
    async fn frames(
        &mut self,
        frames: Vec<Frame>,
        session: &mut Session,
        out: &mut Output,
    ) -> Result<(), Exit> {
        for frame in frames {
            match request(frame) {
                Ok(req) => {
                    if !self.submit(req, session).await {
                        out.err("Error: the keel daemon closed the connection\n");
                        return Err(Exit::Failed);
                    }
                }
                Err(Refusal(line)) => {
                    self.hold(line, out);
                    session.heard();
                }
            }
        }
        Ok(())
    }

    /// A stdin request, sent.
    async fn submit(&mut self, req: rpc::Request, session: &mut Session) -> bool {
        self.order += 1;
        // A session change is answered at once when the session is idle, and after the
        // active run has been aborted and has settled otherwise.
        let late =
            answers_late(&req.command) || (replaces_session(&req.command) && self.maybe_busy());
        self.queued.push_back(Pending {
            order: self.order,
            req,
            late,
        });
        self.flush(session).await
    }

    /// A line of this side's own, written in its place.
    fn hold(&mut self, line: String, out: &mut Output) {
        self.held.push_back(Held {
            after: self.order,
            line,
        });
        self.release(out);
    }

    /// Whether a run or a compaction may be active when the next request is served (a
    /// session change then waits for it to settle).
    fn maybe_busy(&self) -> bool {
        let busy = |p: &Pending| {
            let name = CommandName::parse(&p.req.command);
            matches!(name, Some(CommandName::Prompt | CommandName::Compact))
        };
        self.running || self.waiting.values().any(|s| busy(&s.req)) || self.queued.iter().any(busy)
    }

    async fn flush(&mut self, session: &mut Session) -> bool {
        while let Some(req) = self.queued.pop_front() {
            if !self.send(req, session).await {
                return false;
            }
        }
        true
    }

    async fn send(&mut self, req: Pending, session: &mut Session) -> bool {
        self.next += 1;
        match session.send(self.next, req.req.clone()) {
            Sent::Waiting => {
                let waiting = Waiting { n: self.next, req };
                self.waiting.insert(self.next, waiting);
                true
            }
            Sent::NoAnswer => true,
            Sent::Gone => false,
        }
    }

    /// Request `key` was answered: writes pi's response for it. False if the session's side
    /// is gone.
    async fn answer(
        &mut self,
        key: u64,
        result: Result<Data, LinkError>,
        session: &mut Session,
        out: &mut Output,
    ) -> bool {
        self.write_answer(key, result, out);
        self.flush(session).await
    }

    /// Writes pi's response to request `key`.
    fn write_answer(&mut self, key: u64, result: Result<Data, LinkError>, out: &mut Output) {
        let Some(Waiting { req, .. }) = self.waiting.remove(&key) else {
            return;
        };
        let (id, command) = (req.req.id.as_ref(), req.req.command.as_str());
        let text = match result {
            Ok(data) => reply_line(id, command, data),
            Err(e) if e.kind == LinkErrorKind::UnknownCommand => {
                rpc::error_line(id, Some(command), &format!("Unknown command: {command}"))
            }
            Err(e) => rpc::error_line(id, Some(command), &e.message),
        };
        let name = CommandName::parse(command);
        if name == Some(CommandName::Prompt) && text.contains("\"disposition\":\"started\"") {
            self.running = true; // its events follow: wait for agent_settled
        }
        if name != Some(CommandName::ExtensionUiResponse) {
            let _ = out.out(text.as_bytes());
        }
        self.release(out);
    }

    /// Writes the held lines whose earlier requests that answer at once have been answered.
    fn release(&mut self, out: &mut Output) {
        while let Some(h) = self.held.front() {
            let waits = |p: &Pending| p.order <= h.after && !p.late;
            if self.waiting.values().any(|s| waits(&s.req)) || self.queued.iter().any(waits) {
                return;
            }
            if let Some(h) = self.held.pop_front() {
                let _ = out.out(h.line.as_bytes());
            }
        }
    }

    /// Nothing more will be written.
    fn done(&self) -> bool {
        !self.running && self.waiting.is_empty() && self.queued.is_empty() && self.held.is_empty()
    }
}

/// A stdin line as a pi request, or the error line RPC mode writes for it.
fn request(frame: Frame) -> Result<rpc::Request, Refusal> {
    let line = match frame {
        Frame::Line(l) => l,
        Frame::TooLong { bytes } => return Err(Refusal(too_long_line(bytes))),
    };
    let req = rpc::parse_line(&line).map_err(|rejected| Refusal(rpc::rejected_line(&rejected)))?;
    // Checked here: through the daemon, a `type` naming a daemon method must not reach it.
    if CommandName::parse(&req.command).is_none() {
        let error = format!("Unknown command: {}", req.command);
        let line = rpc::error_line(req.id.as_ref(), Some(&req.command), &error);
        return Err(Refusal(line));
    }
    Ok(req)
}

/// A stdin line that is no request this side sends: pi's error line for it, written here.
struct Refusal(String);

/// pi's parse error for a line over the cap (it was skipped).
fn too_long_line(bytes: usize) -> String {
    let msg = format!(
        "Failed to parse command: the line is {bytes} bytes, over the {} MiB limit; it was skipped",
        MAX_LINE_BYTES / (1024 * 1024)
    );
    rpc::error_line(None, Some("parse"), &msg)
}

/// A successful answer in pi's response envelope.
fn reply_line(id: Option<&rpc::Id>, command: &str, data: Data) -> String {
    match data {
        Data::Empty => rpc::ok_line(id, command, None),
        Data::Json(v) => rpc::ok_line(id, command, Some(v)),
        Data::Raw(raw) => rpc::ok_raw_line(id, command, &raw),
    }
}
