//! RPC mode (`--mode rpc`): pi-compatible JSONL over stdio for editor plugins
//! (`pi-protocol.md` §4, `DESIGN.md` §4). One loop owns stdout: it reads request lines, answers
//! each with exactly one response, and writes every bus event as it happens. Long commands
//! (bash, compact) run as tasks that hand their response back to the loop, so events a
//! command caused are always written before its response.
//!
//! What it does better than pi: prompt acceptance is decided under the kernel's lock and the
//! lines of one read are served back to back (two prompts in one write never both start); every request gets one response, including
//! unknown commands, missing fields and oversized or non-JSON lines; bad input never ends the
//! process or loses state.
//!
//! Layout: this file holds the loop and the host's state; `reader` the stdin thread,
//! `dispatch` the command table, `query` the read-only answers, `session` session changes,
//! `tasks` the background commands (`bash`, `compact`).
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod dispatch;
mod query;
mod reader;
mod session;
mod tasks;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::front::signals::Signals;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::error::StartupError;
use crate::exit::{Exit, SIGPIPE};
use crate::front::json::JsonProjector;
use crate::front::live::{Live, Starting};
use crate::front::Projector;
use crate::kernel::abort::AbortController;
use crate::kernel::agent::AgentConfig;
use crate::kernel::clock::Clock;
use crate::kernel::event::{ApprovalDecision, Event, EventPayload};
use crate::kernel::session::Store;
use crate::output::{Output, StdoutFailure};
use crate::prompts::{self, Template};
use crate::setup::Models;
use crate::wire::events::rpc_extra_events;
use crate::wire::jsonl::{Frame, MAX_LINE_BYTES};
use crate::wire::rpc::{self, Request};

/// pi's refusal text for a prompt while a run is active (clients may match on it).
const BUSY: &str = "Agent is already processing. Specify streamingBehavior ('steer' or 'followUp') to queue the message.";

/// Everything RPC mode needs from startup.
pub struct RpcSetup {
    pub config: AgentConfig,
    pub models: Models,
    pub clock: Clock,
    pub store: Store,
    /// Announce the model and thinking level into the session (new, or a different model).
    pub announce: bool,
    /// Where new sessions (`new_session`, `fork`, `clone`) are created.
    pub session_dir: PathBuf,
    /// `$KEEL_HOME/prompts` and `<cwd>/.keel/prompts`.
    pub prompt_dirs: (PathBuf, PathBuf),
    pub approval_timeout: Duration,
    /// Startup warnings, sent as `notify` after the first request (nothing is written before).
    pub warnings: Vec<String>,
}

/// What the stdin thread delivers.
enum Input {
    /// The complete lines of one read, in order.
    Frames(Vec<Frame>),
    Error(String),
}

/// What tasks hand back to the loop.
enum Internal {
    /// A line to write (a response or a bash update), after the events already published.
    Line(String),
    /// A task finished (after its response was sent).
    Done(u64),
    /// An approval dialog's time ran out.
    ApprovalTimeout(String),
}

/// Work that waits until the active run has settled.
enum Deferred {
    /// `abort`'s response is written after the run stopped (pi's order).
    Respond(Request),
    /// A session change (`new_session`, `switch_session`, `fork`, `clone`) after an abort.
    Session(Request),
}

enum Step {
    Event(Arc<Event>),
    Input(Option<Input>),
    Internal(Internal),
    Signal(i32),
}

/// Serves RPC mode until stdin closes (exit 0) or a signal arrives (128 + n).
pub async fn serve(setup: RpcSetup, out: &mut Output) -> Result<Exit, StartupError> {
    let mut signals = Signals::new()?;
    // Few batches in flight: each holds up to one read's lines (64 KiB) plus one long line.
    let (input_tx, mut input_rx) = mpsc::channel::<Input>(4);
    reader::spawn_reader(input_tx);
    let (tx, internal_rx) = mpsc::unbounded_channel::<Internal>();
    let (templates, template_warnings) = prompts::load(&setup.prompt_dirs.0, &setup.prompt_dirs.1);
    let provider = setup.models.start_provider();
    let thinking = setup.config.thinking_level.clone();
    let live = Live::start(
        &setup.config,
        None,
        Starting {
            store: setup.store,
            clock: setup.clock.clone(),
            provider,
            thinking,
            announce: setup.announce,
        },
    );
    let mut warnings = setup.warnings;
    warnings.extend(template_warnings);
    let mut host = Host {
        out,
        events: JsonProjector::new(None),
        live,
        config: setup.config,
        models: setup.models,
        clock: setup.clock,
        session_dir: setup.session_dir,
        templates,
        prompt_dirs: setup.prompt_dirs,
        approval_timeout: setup.approval_timeout,
        warnings,
        tx,
        internal_rx,
        tasks: HashMap::new(),
        next_task: 0,
        approvals: HashMap::new(),
        deferred: Vec::new(),
        eof: false,
        stop: None,
        write_fault: false,
    };
    loop {
        if host.stop.is_some() || (host.eof && host.idle()) {
            break;
        }
        let step = tokio::select! {
            biased;
            n = signals.next() => Step::Signal(n),
            Some(ev) = host.live.rx.recv() => Step::Event(ev),
            Some(msg) = host.internal_rx.recv() => Step::Internal(msg),
            input = input_rx.recv(), if !host.eof => Step::Input(input),
        };
        match step {
            Step::Event(ev) => {
                host.on_event(&ev);
                // Write whatever else is already published before flushing once.
                while let Ok(ev) = host.live.rx.try_recv() {
                    host.on_event(&ev);
                }
            }
            Step::Input(Some(Input::Frames(frames))) => {
                // Back to back: nothing else runs between lines that arrived together.
                for frame in frames {
                    host.on_frame(frame).await;
                }
            }
            Step::Input(Some(Input::Error(e))) => {
                tracing::error!("cannot read stdin: {e}");
                host.on_eof();
            }
            Step::Input(None) => host.on_eof(),
            Step::Internal(msg) => host.on_internal(msg),
            Step::Signal(n) => host.on_signal(n),
        }
        host.run_deferred().await;
        if host.out.flush().is_err() && host.stop.is_none() {
            // Our answers can no longer be written: stop the work and save the session.
            host.on_stdout_failed();
        }
    }
    Ok(host.shutdown(&mut signals).await)
}

/// The loop's state.
struct Host<'o> {
    out: &'o mut Output,
    /// Writes the event stream exactly as JSON mode does.
    events: JsonProjector,
    live: Live,
    /// Settings for every session this process serves.
    config: AgentConfig,
    models: Models,
    clock: Clock,
    session_dir: PathBuf,
    templates: Vec<Template>,
    prompt_dirs: (PathBuf, PathBuf),
    approval_timeout: Duration,
    /// Sent as `notify` after the first request.
    warnings: Vec<String>,
    tx: mpsc::UnboundedSender<Internal>,
    internal_rx: mpsc::UnboundedReceiver<Internal>,
    /// Running bash and compact tasks; bash ones can be aborted.
    tasks: HashMap<u64, Option<AbortController>>,
    next_task: u64,
    /// Open approval dialogs: request id → tool call id.
    approvals: HashMap<String, String>,
    deferred: Vec<Deferred>,
    eof: bool,
    stop: Option<Exit>,
    /// The client has been told that the session cannot be saved.
    write_fault: bool,
}

type Answer = Result<Option<Value>, String>;

impl Host<'_> {
    fn write(&mut self, line: &str) {
        if !self.out.is_stdout_closed() {
            let _ = self.out.out(line.as_bytes());
        }
    }

    /// Writes every event already published, so a response never overtakes its events.
    fn drain_events(&mut self) {
        while let Ok(ev) = self.live.rx.try_recv() {
            self.on_event(&ev);
        }
    }

    fn respond(&mut self, req: &Request, answer: Answer) {
        self.drain_events();
        let line = match answer {
            Ok(data) => rpc::ok_line(req.id.as_ref(), &req.command, data),
            Err(e) => rpc::error_line(req.id.as_ref(), Some(&req.command), &e),
        };
        self.write(&line);
    }

    fn busy(&self) -> bool {
        let s = self.live.session.status();
        s.running || s.compacting
    }

    /// Nothing running: no run, no compaction, no bash.
    fn idle(&self) -> bool {
        !self.busy() && self.tasks.is_empty()
    }

    fn on_event(&mut self, ev: &Event) {
        self.live.recorder.apply(ev);
        self.report_write_fault();
        if let EventPayload::ApprovalRequested {
            call_id,
            tool_name,
            args,
        } = &ev.payload
        {
            self.ask(call_id, tool_name, args);
            return;
        }
        if !self.out.is_stdout_closed() {
            // JSON mode's writer (one reused buffer), then the events only RPC reports.
            let _ = self.events.on_event(ev, self.out);
            if let Some(extra) = rpc_extra_events(ev) {
                if let Ok(mut line) = serde_json::to_string(&extra) {
                    line.push('\n');
                    let _ = self.out.out(line.as_bytes());
                }
            }
        }
        if matches!(ev.payload, EventPayload::AgentSettled { .. }) {
            self.approvals.clear();
        }
    }

    /// Tells the client (a `notify`) when the session starts or stops failing to save.
    fn report_write_fault(&mut self) {
        let fault = self.live.recorder.health().fault();
        if fault.is_some() == self.write_fault {
            return;
        }
        self.write_fault = fault.is_some();
        let (note, level) = match fault {
            Some(f) => (
                format!(
                    "The session cannot be saved: {f}. The run was stopped; commands that change \
                     the session are refused until it can be saved again."
                ),
                "error",
            ),
            None => ("The session is saved again.".to_string(), "info"),
        };
        let nid = self.clock.short_id("notify-");
        self.write(&rpc::notify_line(&nid, &note, level));
    }

    /// `Err` while the session cannot be saved (after retrying what was held back): commands
    /// that would add to the session are refused with this error.
    fn writable(&mut self) -> Result<(), String> {
        if self.live.recorder.health().fault().is_some() {
            self.live.recorder.sync();
            self.report_write_fault();
        }
        match self.live.recorder.health().fault() {
            Some(f) => Err(format!(
                "The session cannot be saved ({}): {f}",
                crate::kernel::recorder::SESSION_WRITE
            )),
            None => Ok(()),
        }
    }

    /// Opens a confirm dialog for a tool call (`--permission ask`); no answer in time denies it.
    fn ask(&mut self, call_id: &str, tool_name: &str, args: &Value) {
        if self.eof {
            // Nobody can answer any more.
            self.live
                .session
                .approve(call_id, ApprovalDecision::Unanswered);
            return;
        }
        let id = call_id.to_string();
        let message = match (tool_name, args.get("command").and_then(Value::as_str)) {
            ("bash", Some(cmd)) => cmd.to_string(),
            _ => match args.get("path").and_then(Value::as_str) {
                Some(p) => format!("{tool_name} {p}"),
                None => args.to_string(),
            },
        };
        let timeout_ms = self.approval_timeout.as_millis() as u64;
        self.write(&rpc::confirm_line(
            &id,
            &format!("Allow tool `{tool_name}`?"),
            &message,
            timeout_ms,
        ));
        self.approvals.insert(id.clone(), call_id.to_string());
        let tx = self.tx.clone();
        let wait = self.approval_timeout;
        tokio::spawn(async move {
            tokio::time::sleep(wait).await;
            let _ = tx.send(Internal::ApprovalTimeout(id));
        });
    }

    fn on_internal(&mut self, msg: Internal) {
        match msg {
            Internal::Line(line) => {
                self.drain_events();
                self.write(&line);
            }
            Internal::Done(task) => {
                self.tasks.remove(&task);
            }
            Internal::ApprovalTimeout(id) => {
                if let Some(call_id) = self.approvals.remove(&id) {
                    self.live
                        .session
                        .approve(&call_id, ApprovalDecision::Unanswered);
                    let secs = self.approval_timeout.as_secs_f64();
                    let note = format!(
                        "The approval request {id} got no answer within {secs} s; the tool call was denied"
                    );
                    let nid = self.clock.short_id("notify-");
                    self.write(&rpc::notify_line(&nid, &note, "warning"));
                }
            }
        }
    }

    fn on_eof(&mut self) {
        self.eof = true;
        // Open dialogs can never be answered now.
        for (_, call_id) in std::mem::take(&mut self.approvals) {
            self.live
                .session
                .approve(&call_id, ApprovalDecision::Unanswered);
        }
    }

    fn on_signal(&mut self, n: i32) {
        self.halt(Exit::Signal(n));
    }

    /// stdout failed: a closed pipe ends as SIGPIPE would (141, quietly); a full or failing
    /// device ends with 1 and the failure on stderr.
    fn on_stdout_failed(&mut self) {
        match self.out.stdout_failure() {
            Some(failure @ StdoutFailure::Failed(_)) => {
                let message = failure.message();
                self.out.err(&format!("Error: {message}\n"));
                self.halt(Exit::Failed);
            }
            Some(StdoutFailure::Closed) | None => self.halt(Exit::Signal(SIGPIPE)),
        }
    }

    /// Stops the run and shell commands; the loop then shuts down with `exit`.
    fn halt(&mut self, exit: Exit) {
        self.stop = Some(exit);
        self.live.session.abort();
        self.abort_bash();
    }

    fn abort_bash(&mut self) {
        for abort in self.tasks.values().flatten() {
            abort.abort();
        }
    }

    /// Stops work, waits a moment for it to settle, writes the last events and saves the
    /// session. A second signal skips the wait.
    async fn shutdown(mut self, signals: &mut Signals) -> Exit {
        let exit = self.stop.unwrap_or(Exit::Success);
        if self.stop.is_some() {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
            while !self.idle() {
                let step = tokio::select! {
                    Some(ev) = self.live.rx.recv() => Some(Step::Event(ev)),
                    Some(msg) = self.internal_rx.recv() => Some(Step::Internal(msg)),
                    _ = tokio::time::sleep_until(deadline) => None,
                    _ = signals.next() => None,
                };
                match step {
                    Some(Step::Event(ev)) => self.on_event(&ev),
                    Some(Step::Internal(m)) => self.on_internal(m),
                    _ => break,
                }
            }
        }
        self.drain_events();
        self.live.bus.close();
        while let Some(ev) = self.live.rx.recv().await {
            self.on_event(&ev);
        }
        let _ = self.out.flush();
        self.live.recorder.sync();
        exit
    }

    async fn on_frame(&mut self, frame: Frame) {
        let line = match frame {
            Frame::Line(l) => l,
            Frame::TooLong { bytes } => {
                let msg = format!(
                    "Failed to parse command: the line is {bytes} bytes, over the {} MiB limit; it was skipped",
                    MAX_LINE_BYTES / (1024 * 1024)
                );
                self.write(&rpc::error_line(None, Some("parse"), &msg));
                return;
            }
        };
        match rpc::parse_line(&line) {
            Err(rejected) => self.write(&rpc::rejected_line(&rejected)),
            Ok(req) => self.dispatch(req).await,
        }
        if !self.warnings.is_empty() {
            for w in std::mem::take(&mut self.warnings) {
                let id = self.clock.short_id("notify-");
                self.write(&rpc::notify_line(&id, &w, "warning"));
            }
        }
    }

    fn spawn_task(&mut self, abort: Option<AbortController>) -> u64 {
        self.next_task += 1;
        self.tasks.insert(self.next_task, abort);
        self.next_task
    }
}
