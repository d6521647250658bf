//! The session host (`DESIGN.md` §10.1): one live session, the pi command set executed against
//! it, and its output as an ordered outbox of numbered wire events and replies. Transport
//! neutral: it never touches stdio, sockets or terminals. A transport (RPC over stdio, the
//! daemon's socket connections through `actor`, the TUI and ACP in-process) feeds it requests,
//! drives its loop (`next_step`, `apply`) and writes what `take_out` hands back, in order.
//!
//! Order is the contract: every event a command caused is in the outbox before that command's
//! reply (replies drain the bus first), and long commands (bash, compact) run as tasks that hand
//! their reply back through the loop. Each published line gets the next `seq` of the host's
//! stream, so a transport can number, replay and fan it out without interpreting it.
//!
//! Layout: this file holds the host's state, the outbox and the event path; `approvals` the
//! open approval dialogs and their timers; `dispatch` the command table, `query` the read-only
//! answers, `session` session changes, `tasks` the background commands, `live` the served
//! session, `models` the models a session can switch to, `snapshot` what an attaching client
//! is shown, `stream` the numbered replay ring and fan-out, `actor` the task that serves one
//! host to many clients, `html` the HTML export.
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod actor;
mod always;
mod approvals;
mod dispatch;
pub mod error;
mod expand;
pub mod jobs;
mod permissions;
pub use error::{CommandError, CommandErrorKind};
pub mod html;
pub mod live;
pub mod models;
mod query;
pub mod relay;
mod rewind;
mod session;
pub mod snapshot;
pub mod stream;
pub mod subagent;
mod tasks;
mod worktree;

use crate::kernel::failure::ErrorKind;
use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::mpsc;

use crate::host::live::{Live, Starting};
use crate::host::models::Models;
use crate::kernel::abort::AbortController;
use crate::kernel::agent::AgentConfig;
use crate::kernel::clock::Clock;
use crate::kernel::event::{ApprovalDecision, Event, EventPayload, RunOutcome};
use crate::kernel::session::Store;
use crate::kernel::tool::preview::Preview;
use crate::prompts::{self, Template};
use crate::wire::events::{stream_events, NotifyType, TypedEvent, WireEvent};
use crate::wire::pi::CommandName;
use crate::wire::protocol::snapshot::Snapshot;
use crate::wire::rpc::{self, Request};

/// pi's refusal text for a prompt while a run is active (clients may match on it).
const BUSY: &str = "Agent is already processing. Specify streamingBehavior ('steer' or 'followUp') to queue the message.";

/// Everything the host needs from startup.
pub struct HostSetup {
    pub config: AgentConfig,
    pub models: Models,
    pub clock: Clock,
    pub store: Store,
    /// Announce the model and thinking level into the session (new, or a different model).
    pub announce: bool,
    /// Where new sessions (`new_session`, `fork`, `clone`) are created.
    pub session_dir: PathBuf,
    /// Where prompt templates are read from (keel's and Claude Code's directories).
    pub prompt_dirs: prompts::Dirs,
    pub approval_timeout: Duration,
    /// Nobody will ever be at the keyboard (a scheduled run): an approval that gets no answer
    /// within `approval_timeout` blocks the run (outcome `blocked`) instead of denying the
    /// call and letting the model go on.
    pub unattended: bool,
    /// Startup warnings, published as `notify` after the first request.
    pub warnings: Vec<String>,
    /// Skills: `/skill:NAME` and `/NAME` commands and `get_commands` entries.
    pub skills: Vec<crate::skills::Skill>,
    /// Warnings found after startup (an MCP server that failed or crashed), published as
    /// `notify` lines as they come.
    pub late_warnings: Option<mpsc::UnboundedReceiver<String>>,
    /// The spec the session was opened with (`session/open`'s `spec`), handed to attaching
    /// clients in the snapshot's `openSpec`: a window that outlives its daemon reopens the
    /// session from its file with it.
    pub open_spec: crate::wire::protocol::spec::SessionSpec,
    /// Called with the session's cwd and the rules an "always" answer saved to the project's
    /// local settings file, once saved (setup keeps the trust store up to date with it).
    pub on_saved_rules: Option<SavedRules>,
    /// Subagents (`DESIGN.md` §17): the definitions, how deep children nest and where they
    /// are filed; `None`: the session has no `task` tool.
    pub subagents: Option<subagent::SubagentSetup>,
    /// The worktree the session runs in (`-w`, DESIGN §20): its lease is ended when the
    /// session closes (removed when nothing changed, else kept and said).
    pub worktree: Option<crate::worktree::Held>,
}

/// See [`HostSetup::on_saved_rules`].
pub type SavedRules = std::sync::Arc<dyn Fn(&std::path::Path, &[String]) + Send + Sync>;

/// One line of the host's stream: a wire event (pi vocabulary plus keel's additions), a dialog
/// request or a `bash_execution_update`, as compact JSON without a newline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    /// 1, 2, 3, … for this host's stream, never repeated.
    pub seq: u64,
    pub line: Arc<str>,
    /// The event typed, for a client in this process (`None` for a line made as text: a
    /// notice, a dialog; and in the replay ring, which keeps only lines).
    pub typed: Option<TypedEvent>,
}

/// What a reply carries on success.
#[derive(Debug, Clone, PartialEq)]
pub enum Data {
    /// No `data` member.
    Empty,
    Json(Value),
    /// Already serialized JSON (large trees are written without building a `Value`).
    Raw(String),
}

/// The answer to one request: pi's response fields, for the transport to frame.
#[derive(Debug, Clone)]
pub struct Reply {
    pub id: Option<rpc::Id>,
    pub command: String,
    /// `Err` carries pi's error text.
    pub result: Result<Data, CommandError>,
}

/// The outbox, in the order the transport must write it.
#[derive(Debug, Clone)]
pub enum Out {
    Event(Published),
    Reply(Reply),
    /// The served session's conversation moved to another branch in the same file (a rewind
    /// or its undo): what clients have applied of the stream no longer matches it, so the
    /// stream starts a new epoch (every subscriber is told, as for a session change).
    Moved,
}

/// What tasks hand back to the loop.
pub enum Internal {
    /// A stream line (a bash update), after the events already published.
    Publish(String),
    /// A task's reply, after the events already published.
    Reply(Reply),
    /// A task finished (after its reply was queued).
    Done(u64),
    /// An approval dialog's timer ran out: the dialog and the timer's generation (a stale
    /// timer, cancelled or restarted since, is ignored).
    ApprovalTimeout(String, u64),
    /// A subagent's host said something (its dialogs are shown to this session's clients).
    Child(relay::ChildNote),
}

/// Work that waits until the active run has settled.
enum Deferred {
    /// `abort`'s reply comes after the run stopped (pi's order).
    Respond(Request),
    /// A session change (`new_session`, `switch_session`, `fork`, `clone`) after an abort,
    /// with its fields as decoded (a field error is answered then too).
    Session(Request, Result<crate::wire::pi::Command, rpc::ParamError>),
}

/// What `daemon/status` and `keel ps` show of a served session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    pub session_id: String,
    pub cwd: String,
    pub name: Option<String>,
    pub file: Option<String>,
    pub running: bool,
    /// The session header's `timestamp` and `parentSession`.
    pub timestamp: String,
    pub parent_session: Option<String>,
    /// The id of the session that started this one as a subagent (`task`).
    pub parent_session_id: Option<String>,
    /// The latest run of this host's session, if one started.
    pub last_run: Option<LastRun>,
    /// The text of the session's first prompt (at most [`FIRST_PROMPT_CHARS`] characters):
    /// what `keel ps` and the attach picker show of a session without a name.
    pub first_prompt: Option<String>,
    /// The sandbox its model's commands run in.
    pub sandbox: crate::wire::protocol::snapshot::SandboxState,
    /// Its background jobs, running and ended, by id.
    pub jobs: Vec<crate::kernel::jobs::JobInfo>,
    /// The worktree it runs in (`-w`): its path and branch.
    pub worktree: Option<(String, String)>,
}

/// How much of a session's first prompt its summary keeps.
pub const FIRST_PROMPT_CHARS: usize = 200;

/// Where the latest run of a session is in the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastRun {
    /// The `seq` of its `agent_start`.
    pub seq: u64,
    /// Its `agent_settled` line, once it settled.
    pub settled: Option<Arc<str>>,
}

/// Something the host's loop must handle next (see [`Host::next_step`]).
pub enum Step {
    Event(Arc<Event>),
    Internal(Internal),
    /// A warning found after startup (`HostSetup::late_warnings`).
    Late(String),
}

/// The first user message's text in `store`, cut to [`FIRST_PROMPT_CHARS`] characters.
fn first_prompt(store: &Store) -> Option<String> {
    use crate::kernel::message::{user_text, Message};
    use crate::kernel::session::EntryData;
    store.entries().iter().find_map(|e| match &e.data {
        EntryData::Message(Message::User(u)) => {
            Some(user_text(u).chars().take(FIRST_PROMPT_CHARS).collect())
        }
        _ => None,
    })
}

/// The next late warning; `None` (the select's branch is then off) once there are none.
async fn recv_late(late: &mut Option<mpsc::UnboundedReceiver<String>>) -> Option<String> {
    let w = late.as_mut()?.recv().await;
    if w.is_none() {
        *late = None;
    }
    w
}

type Answer = Result<Option<Value>, CommandError>;

/// The host's state.
pub struct Host {
    live: Live,
    /// Settings for every session this host serves.
    config: AgentConfig,
    models: Models,
    clock: Clock,
    session_dir: PathBuf,
    templates: Vec<Template>,
    skills: Vec<crate::skills::Skill>,
    prompt_dirs: prompts::Dirs,
    approval_timeout: Duration,
    /// See [`HostSetup::unattended`].
    unattended: bool,
    /// Published as `notify` after the first request.
    warnings: Vec<String>,
    tx: mpsc::UnboundedSender<Internal>,
    internal_rx: mpsc::UnboundedReceiver<Internal>,
    /// Running bash and compact tasks; bash ones can be aborted.
    tasks: HashMap<u64, Option<AbortController>>,
    next_task: u64,
    /// Open approval dialogs (request id → tool call id) and their timers.
    approvals: approvals::Approvals,
    deferred: Vec<Deferred>,
    /// Nobody can answer dialogs any more (the input ended).
    eof: bool,
    /// Clients have been told that the session cannot be saved.
    write_fault: bool,
    /// The stream's last `seq`.
    seq: u64,
    out: VecDeque<Out>,
    /// The streaming message and running tools, for snapshots.
    in_flight: snapshot::InFlight,
    /// Open dialog requests by id, as published (re-sent in snapshots).
    open_dialogs: std::collections::BTreeMap<String, Arc<str>>,
    /// The latest run of the served session.
    last_run: Option<LastRun>,
    /// `bash_execution_end` lines recorded while a `bash` task still forwards output: written
    /// right before that command's reply, so they follow its last `bash_execution_update`.
    held_bash: Vec<(String, TypedEvent)>,
    late_warnings: Option<mpsc::UnboundedReceiver<String>>,
    /// See [`HostSetup::open_spec`].
    open_spec: crate::wire::protocol::spec::SessionSpec,
    /// The tool and arguments of each call an open dialog asks about (for an "always" answer).
    asked: HashMap<String, (String, Value)>,
    /// See [`HostSetup::on_saved_rules`].
    on_saved_rules: Option<SavedRules>,
    /// The parent of a subagent's session.
    parent_id: Option<String>,
    /// A subagent's line to its parent's host (its dialogs are shown there too).
    relay: Option<relay::Relay>,
    /// This session's live subagents and the dialogs of theirs it shows.
    children: relay::Children,
    /// See [`HostSetup::worktree`].
    worktree: Option<crate::worktree::Held>,
}

impl Host {
    /// The flags the session was opened with (empty when not opened by the daemon).
    pub fn open_spec(&self) -> &crate::wire::protocol::spec::SessionSpec {
        &self.open_spec
    }

    /// Starts serving the session of `setup`.
    pub fn new(mut setup: HostSetup) -> Host {
        let (tx, internal_rx) = mpsc::unbounded_channel::<Internal>();
        setup.config.subagents = subagent::subagents(&setup, tx.clone());
        let (templates, template_warnings) = prompts::load_dirs(&setup.prompt_dirs);
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
        Host {
            live,
            late_warnings: setup.late_warnings,
            config: setup.config,
            models: setup.models,
            clock: setup.clock,
            session_dir: setup.session_dir,
            templates,
            skills: setup.skills,
            prompt_dirs: setup.prompt_dirs,
            approval_timeout: setup.approval_timeout,
            unattended: setup.unattended,
            warnings,
            tx,
            internal_rx,
            tasks: HashMap::new(),
            next_task: 0,
            approvals: approvals::Approvals::default(),
            deferred: Vec::new(),
            eof: false,
            write_fault: false,
            seq: 0,
            out: VecDeque::new(),
            in_flight: snapshot::InFlight::default(),
            open_dialogs: std::collections::BTreeMap::new(),
            last_run: None,
            held_bash: Vec::new(),
            open_spec: setup.open_spec,
            asked: HashMap::new(),
            on_saved_rules: setup.on_saved_rules,
            relay: setup.subagents.as_ref().and_then(|s| s.relay.clone()),
            parent_id: setup.subagents.and_then(|s| s.parent_id),
            children: relay::Children::default(),
            worktree: setup.worktree,
        }
    }

    /// The materialised state as of the last published `seq` (`DESIGN.md` §10.4).
    pub fn snapshot(&mut self) -> Snapshot {
        self.drain_events();
        let mut header = snapshot::header(crate::kernel::recorder::lock(&self.live.store).header());
        (header.worktree, header.branch) = self.worktree_place().unzip();
        let pending: Vec<Value> = self
            .open_dialogs
            .values()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect();
        Snapshot {
            header,
            messages: self.live.session.messages(),
            state: self.state(),
            streaming: self.in_flight.streaming(),
            pending_ui: pending,
            run_started_at: self.in_flight.run_started(),
            open_spec: self.open_spec.clone(),
            sandbox: Some(crate::wire::protocol::snapshot::SandboxState::of(
                &self.config.sandbox,
            )),
        }
    }

    /// Queues every event published so far.
    pub fn flush(&mut self) {
        self.drain_events();
    }

    /// Whether dialog `id` is open (not answered, timed out or closed by the run's end).
    pub fn dialog_open(&self, id: &str) -> bool {
        self.open_dialogs.contains_key(id)
    }

    /// The id, cwd, name and file of the served session, and whether a run is active.
    pub fn summary(&self) -> Summary {
        let store = crate::kernel::recorder::lock(&self.live.store);
        Summary {
            session_id: store.header().id.clone(),
            cwd: store.header().cwd.clone(),
            name: store.name().map(str::to_string),
            file: store.path().map(|p| p.display().to_string()),
            running: self.busy(),
            timestamp: store.header().timestamp.clone(),
            parent_session: store.header().parent_session.clone(),
            parent_session_id: self.parent_id.clone(),
            last_run: self.last_run.clone(),
            first_prompt: first_prompt(&store),
            sandbox: crate::wire::protocol::snapshot::SandboxState::of(&self.config.sandbox),
            jobs: self.live.jobs.list(),
            worktree: self.worktree_place(),
        }
    }

    /// Hands over everything queued for the transport, in order.
    pub fn take_out(&mut self) -> impl Iterator<Item = Out> + '_ {
        self.out.drain(..)
    }

    /// The next event or task message; cancel-safe (select it against other inputs).
    pub async fn next_step(&mut self) -> Option<Step> {
        tokio::select! {
            biased;
            // First: a warning sent before the kernel's next event is published before it.
            Some(w) = recv_late(&mut self.late_warnings) => Some(Step::Late(w)),
            Some(ev) = self.live.rx.recv() => Some(Step::Event(ev)),
            Some(msg) = self.internal_rx.recv() => Some(Step::Internal(msg)),
            else => None,
        }
    }

    /// Handles a step; an event also takes everything else already published with it.
    pub fn apply(&mut self, step: Step) {
        match step {
            Step::Event(ev) => {
                self.on_event(ev);
                self.drain_events();
            }
            Step::Internal(msg) => self.on_internal(msg),
            Step::Late(w) => {
                // Not after the events still queued: they came later than the warning.
                let id = self.clock.short_id("notify-");
                self.publish(&rpc::notify_line(&id, &w, NotifyType::Warning));
            }
        }
    }

    /// Queues a stream line (a trailing newline is dropped) under the next `seq`.
    fn publish(&mut self, line: &str) {
        self.publish_typed(line, None);
    }

    /// [`Self::publish`], with the event typed for a client in this process.
    fn publish_typed(&mut self, line: &str, typed: Option<TypedEvent>) {
        self.seq += 1;
        let line = line.strip_suffix('\n').unwrap_or(line);
        self.out.push_back(Out::Event(Published {
            seq: self.seq,
            line: line.into(),
            typed,
        }));
    }

    /// Queues every event already published, so a reply never overtakes its events.
    fn drain_events(&mut self) {
        while let Ok(ev) = self.live.rx.try_recv() {
            self.on_event(ev);
        }
    }

    fn respond(&mut self, req: &Request, answer: Answer) {
        let result = answer.map(|data| data.map_or(Data::Empty, Data::Json));
        self.reply(req, result);
    }

    fn reply(&mut self, req: &Request, result: Result<Data, CommandError>) {
        self.drain_events();
        self.out.push_back(Out::Reply(Reply {
            id: req.id.clone(),
            command: req.command.clone(),
            result,
        }));
    }

    fn busy(&self) -> bool {
        let s = self.live.session.status();
        s.running || s.compacting
    }

    /// Nothing running: no run, no compaction, no bash.
    pub fn idle(&self) -> bool {
        !self.busy() && self.tasks.is_empty()
    }

    /// Whether the input has ended.
    pub fn input_ended(&self) -> bool {
        self.eof
    }

    fn on_event(&mut self, ev: Arc<Event>) {
        self.live.recorder.apply(&ev);
        // Shared with the typed events handed to clients in this process.
        let ev = &self.write_failed(&ev).map(Arc::new).unwrap_or(ev);
        self.in_flight.observe(ev);
        self.report_write_fault();
        if let EventPayload::ApprovalRequested {
            call_id,
            tool_name,
            args,
            preview,
        } = &ev.payload
        {
            self.ask(call_id, tool_name, args, preview.as_ref());
            return;
        }
        // The kernel records a shell command as soon as it exits; its bash task may still
        // hold output not yet written, which must come first.
        let bash_running = self.tasks.values().any(Option::is_some);
        for (i, w) in stream_events(ev).iter().enumerate() {
            if let Ok(line) = serde_json::to_string(w) {
                let typed = TypedEvent::new(ev.clone(), i, w.kind());
                if bash_running && matches!(w, WireEvent::BashExecutionEnd(_)) {
                    self.held_bash.push((line, typed));
                    continue;
                }
                self.publish_typed(&line, Some(typed));
                match w.kind() {
                    "agent_start" => {
                        self.last_run = Some(LastRun {
                            seq: self.seq,
                            settled: None,
                        })
                    }
                    "agent_settled" => {
                        if let Some(run) = &mut self.last_run {
                            run.settled = Some(line.into());
                        }
                    }
                    _ => {}
                }
            }
        }
        if matches!(ev.payload, EventPayload::AgentSettled { .. }) {
            self.approvals.close_all();
            self.close_dialogs();
            self.asked.clear();
        }
    }

    /// A run that settles while its session cannot be saved (its last entries, the final
    /// sync) failed with `session_write`, whatever the kernel concluded before the recorder
    /// here met the failure: the `agent_settled` event to publish instead of `ev`. Print and
    /// JSON runs in this process conclude the same way (`app.rs`).
    fn write_failed(&self, ev: &Event) -> Option<Event> {
        let EventPayload::AgentSettled { outcome, .. } = &ev.payload else {
            return None;
        };
        if matches!(
            outcome,
            RunOutcome::Failed {
                kind: ErrorKind::SessionWrite,
                ..
            }
        ) {
            return None;
        }
        let mut failed = ev.clone();
        failed.payload = EventPayload::AgentSettled {
            aborted: false,
            outcome: self.live.recorder.health().failed_run()?,
            structured_output: None,
        };
        Some(failed)
    }

    /// Tells clients (a `notify`) when the session starts or stops failing to save.
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
                NotifyType::Error,
            ),
            None => ("The session is saved again.".to_string(), NotifyType::Info),
        };
        let nid = self.clock.short_id("notify-");
        self.publish(&rpc::notify_line(&nid, &note, level));
    }

    /// `Err` while the session cannot be saved (after retrying what was held back): commands
    /// that would add to the session are refused with this error.
    fn writable(&mut self) -> Result<(), CommandError> {
        if self.live.recorder.health().fault().is_some() {
            self.live.recorder.sync();
            self.report_write_fault();
        }
        match self.live.recorder.health().fault() {
            Some(f) => Err(CommandError::new(
                CommandErrorKind::SessionWrite,
                format!(
                    "The session cannot be saved ({}): {f}",
                    ErrorKind::SessionWrite
                ),
            )),
            None => Ok(()),
        }
    }

    /// Opens a confirm dialog for a tool call (`--permission ask`); no answer in time denies
    /// it, where the time counts only while no interactive client watches (`set_watched`).
    fn ask(&mut self, call_id: &str, tool_name: &str, args: &Value, preview: Option<&Preview>) {
        if self.eof {
            // Nobody can answer any more.
            self.live
                .session
                .approve(call_id, ApprovalDecision::Unanswered);
            return;
        }
        let id = call_id.to_string();
        let timeout_ms = self.approval_timeout.as_millis() as u64;
        let line = rpc::approval_line(&id, tool_name, args, preview, Some(timeout_ms));
        self.asked
            .insert(id.clone(), (tool_name.to_string(), args.clone()));
        self.open_dialogs
            .insert(id.clone(), line.trim_end().to_string().into());
        self.publish(&line);
        if let Some(r) = &self.relay {
            r.opened(&id, (tool_name, args, preview), timeout_ms);
        }
        if let Some(timer) = self.approvals.open(&id, call_id) {
            self.start_timer(timer);
        }
    }

    /// Whether at least one interactive client is attached (a transport with attachments
    /// says so when that changes; RPC over stdio never does, so its dialogs always time out).
    /// While watched, open dialogs wait with no timer; when the last watcher leaves, each open
    /// dialog gets the full `--approval-timeout` again from now.
    pub fn set_watched(&mut self, watched: bool) {
        self.children_watched(watched);
        for timer in self.approvals.set_watched(watched) {
            self.start_timer(timer);
        }
    }

    fn start_timer(&self, timer: approvals::Timer) {
        let tx = self.tx.clone();
        let wait = self.approval_timeout;
        tokio::spawn(async move {
            tokio::time::sleep(wait).await;
            let _ = tx.send(Internal::ApprovalTimeout(timer.dialog, timer.generation));
        });
    }

    fn on_internal(&mut self, msg: Internal) {
        match msg {
            Internal::Publish(line) => {
                self.drain_events();
                self.publish(&line);
            }
            Internal::Reply(reply) => {
                self.drain_events();
                if CommandName::parse(&reply.command) == Some(CommandName::Bash) {
                    self.release_bash();
                }
                self.out.push_back(Out::Reply(reply));
            }
            Internal::Done(task) => {
                self.tasks.remove(&task);
                if !self.tasks.values().any(Option::is_some) {
                    self.release_bash();
                }
            }
            Internal::ApprovalTimeout(id, generation) => {
                if let Some(call_id) = self.approvals.fire(&id, generation) {
                    self.open_dialogs.remove(&id);
                    self.relay_closed(&id);
                    let (decision, what) = match self.unattended {
                        true => (ApprovalDecision::Blocked, "the run is blocked"),
                        false => (ApprovalDecision::Unanswered, "the tool call was denied"),
                    };
                    self.live.session.approve(&call_id, decision);
                    let secs = self.approval_timeout.as_secs_f64();
                    let note =
                        format!("The approval request {id} got no answer within {secs} s; {what}");
                    let nid = self.clock.short_id("notify-");
                    self.publish(&rpc::notify_line(&nid, &note, NotifyType::Warning));
                }
            }
            Internal::Child(note) => self.on_child(note),
        }
    }

    /// Closes every open dialog (the parent of a subagent is told).
    fn close_dialogs(&mut self) {
        self.forget_shown();
        for id in std::mem::take(&mut self.open_dialogs).into_keys() {
            self.relay_closed(&id);
        }
    }

    /// The input ended: open dialogs can never be answered now, and new ones are denied.
    pub fn on_eof(&mut self) {
        self.eof = true;
        self.close_dialogs();
        for call_id in self.approvals.close_all() {
            self.live
                .session
                .approve(&call_id, ApprovalDecision::Unanswered);
        }
    }

    /// Stops the run and shell commands (a signal, a transport that cannot write).
    pub fn halt(&mut self) {
        self.live.session.abort();
        self.abort_bash();
    }

    fn abort_bash(&mut self) {
        for abort in self.tasks.values().flatten() {
            abort.abort();
        }
    }

    /// Ends serving: fires `SessionEnd` (`reason`), ends its background jobs (TERM, then KILL
    /// after their grace period), queues the last events, closes the bus and saves the session.
    pub async fn close(&mut self, reason: &str) {
        self.live.session.end_hooks(reason).await;
        self.live.jobs.kill_all().await;
        self.end_worktree().await;
        self.drain_events();
        self.live.bus.close();
        while let Some(ev) = self.live.rx.recv().await {
            self.on_event(ev);
        }
        self.release_bash();
        // A subagent's session is over with its task: the windows attached to it say so.
        if self.parent_id.is_some() {
            self.publish(&rpc::session_ended_line("subagent_finished"));
        }
        self.live.recorder.sync();
    }

    /// Why the session cannot be saved (its last write or sync failed), while it cannot.
    pub fn save_fault(&self) -> Option<String> {
        self.live.recorder.health().fault()
    }

    /// Serves one request (its reply may come later, through the loop).
    pub async fn request(&mut self, req: Request) {
        self.dispatch(req).await;
        self.publish_warnings();
    }

    /// Startup warnings become `notify` lines once a client has spoken (after every request,
    /// and after a line the transport could not parse).
    pub fn publish_warnings(&mut self) {
        for w in std::mem::take(&mut self.warnings) {
            let id = self.clock.short_id("notify-");
            self.publish(&rpc::notify_line(&id, &w, NotifyType::Warning));
        }
    }

    /// Writes the held `bash_execution_end` lines.
    fn release_bash(&mut self) {
        for (line, typed) in std::mem::take(&mut self.held_bash) {
            self.publish_typed(&line, Some(typed));
        }
    }

    fn spawn_task(&mut self, abort: Option<AbortController>) -> u64 {
        self.next_task += 1;
        self.tasks.insert(self.next_task, abort);
        self.next_task
    }
}
