//! RPC mode (`--mode rpc`): pi-compatible JSONL over stdio for editor plugins
//! (`pi-protocol.md` §4, `DESIGN.md` §4). One loop owns stdout: it reads request lines, answers
//! each with exactly one response, and writes every bus event as it happens. Long commands
//! (bash, compact) run as tasks that hand their response back to the loop, so events a
//! command caused are always written before its response.
//!
//! What it does better than pi: prompt acceptance is decided under the kernel's lock (two
//! prompts in one write never both start); every request gets one response, including
//! unknown commands, missing fields and oversized or non-JSON lines; bad input never ends the
//! process or loses state.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::front::signals::Signals;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::error::StartupError;
use crate::exit::{Exit, SIGPIPE};
use crate::front::json::JsonProjector;
use crate::front::live::{self, Live, Starting};
use crate::front::Projector;
use crate::kernel::abort::AbortController;
use crate::kernel::agent::AgentConfig;
use crate::kernel::clock::Clock;
use crate::kernel::compaction;
use crate::kernel::event::{ApprovalDecision, Event, EventPayload};
use crate::kernel::message::{user_text, Message};
use crate::kernel::op::{QueueMode, UserInput};
use crate::kernel::provider::model::THINKING_LEVELS;
use crate::kernel::recorder;
use crate::kernel::session::{self, EntryData, SessionHeader, Store};
use crate::output::Output;
use crate::prompts::{self, Template};
use crate::setup::Models;
use crate::wire::events::rpc_extra_events;
use crate::wire::jsonl::{Frame, LineDecoder, MAX_LINE_BYTES};
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
    Frame(Frame),
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
    let (input_tx, mut input_rx) = mpsc::channel::<Input>(64);
    spawn_reader(input_tx);
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
            Step::Input(Some(Input::Frame(frame))) => host.on_frame(frame).await,
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
            // Nobody reads our answers any more: stop the work and save the session.
            host.on_signal(SIGPIPE);
        }
    }
    Ok(host.shutdown(&mut signals).await)
}

/// Reads stdin on a plain thread (a pending read must never hold up process exit) and hands
/// decoded frames to the loop; the channel closing means end of input.
fn spawn_reader(tx: mpsc::Sender<Input>) {
    let spawned = std::thread::Builder::new()
        .name("keel-rpc-stdin".into())
        .spawn(move || {
            use std::io::Read;
            let mut stdin = std::io::stdin().lock();
            let mut decoder = LineDecoder::new(MAX_LINE_BYTES);
            let mut buf = vec![0u8; 64 * 1024];
            let mut frames = Vec::new();
            loop {
                match stdin.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        decoder.push(&buf[..n], &mut frames);
                        for f in frames.drain(..) {
                            if tx.blocking_send(Input::Frame(f)).is_err() {
                                return;
                            }
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        let _ = tx.blocking_send(Input::Error(e.to_string()));
                        return;
                    }
                }
            }
            if let Some(f) = decoder.finish() {
                let _ = tx.blocking_send(Input::Frame(f));
            }
        });
    if let Err(e) = spawned {
        tracing::error!("cannot start the stdin reader: {e}");
    }
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
        self.stop = Some(Exit::Signal(n));
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

    async fn dispatch(&mut self, req: Request) {
        // Everything published so far is written and recorded before this request is served.
        self.drain_events();
        let answer = match req.command.as_str() {
            "prompt" => self.prompt(&req),
            "steer" | "follow_up" => self.queue(&req),
            "abort" => {
                if self.busy() {
                    self.live.session.abort();
                    self.deferred.push(Deferred::Respond(req));
                    return;
                }
                Ok(None)
            }
            "clear_queue" => {
                let (steering, follow_up) = self.live.session.clear_queue();
                Ok(Some(json!({"steering": steering, "followUp": follow_up})))
            }
            "new_session" | "switch_session" | "fork" | "clone" => {
                if self.busy() {
                    // pi aborts the run first; the change happens once it has settled.
                    self.live.session.abort();
                    self.deferred.push(Deferred::Session(req));
                    return;
                }
                let answer = self.change_session(&req).await;
                self.respond(&req, answer);
                return;
            }
            "get_state" => Ok(Some(self.state())),
            "get_messages" => Ok(Some(json!({"messages": self.live.session.messages()}))),
            "set_model" => self.set_model(&req),
            "cycle_model" => Ok(Some(self.cycle_model())),
            "get_available_models" => Ok(Some(json!({"models": self.models.available()}))),
            "set_thinking_level" => self.set_thinking_level(&req),
            "cycle_thinking_level" => Ok(Some(self.cycle_thinking_level())),
            "get_available_thinking_levels" => Ok(Some(
                json!({"levels": self.live.session.provider().info().thinking_levels}),
            )),
            "set_steering_mode" | "set_follow_up_mode" => self.set_queue_mode(&req),
            "compact" => {
                self.compact(req);
                return;
            }
            "set_auto_compaction" => req.bool("enabled").map(|on| {
                self.live.session.set_auto_compaction(on);
                None
            }),
            "set_auto_retry" => req.bool("enabled").map(|on| {
                self.live.session.set_auto_retry(on);
                None
            }),
            "abort_retry" => {
                self.live.session.abort_retry();
                Ok(None)
            }
            "bash" => {
                if let Err(e) = self.bash(&req) {
                    self.respond(&req, Err(e));
                }
                return;
            }
            "abort_bash" => {
                self.abort_bash();
                Ok(None)
            }
            "get_session_stats" => Ok(Some(self.stats())),
            "export_html" => self.export_html(&req),
            "get_fork_messages" => Ok(Some(self.fork_messages())),
            "get_entries" => self.entries(&req),
            "get_tree" => {
                let data = self.tree_json();
                self.drain_events();
                self.write(&rpc::ok_raw_line(req.id.as_ref(), &req.command, &data));
                return;
            }
            "get_last_assistant_text" => Ok(Some(
                json!({"text": self.live.session.last_assistant_text()}),
            )),
            "set_session_name" => self.set_session_name(&req),
            "get_commands" => Ok(Some(self.commands())),
            "extension_ui_response" => {
                self.ui_response(&req);
                return;
            }
            other => Err(format!("Unknown command: {other}")),
        };
        self.respond(&req, answer);
    }

    /// Runs what waited for the active run (or compaction) to end.
    async fn run_deferred(&mut self) {
        if self.deferred.is_empty() || self.busy() {
            return;
        }
        for d in std::mem::take(&mut self.deferred) {
            match d {
                Deferred::Respond(req) => self.respond(&req, Ok(None)),
                Deferred::Session(req) => {
                    let answer = self.change_session(&req).await;
                    self.respond(&req, answer);
                }
            }
        }
    }

    /// The user input of `prompt`/`steer`/`follow_up`, with a `/template` expanded.
    fn input(&self, req: &Request) -> Result<UserInput, String> {
        let message = req.str("message")?;
        let images = req.images()?;
        let text = prompts::expand(message, &self.templates).unwrap_or_else(|| message.to_string());
        Ok(UserInput { text, images })
    }

    fn prompt(&mut self, req: &Request) -> Answer {
        let input = self.input(req)?;
        let behavior = req.choice("streamingBehavior", &["steer", "followUp"])?;
        let session = &self.live.session;
        if session.status().running {
            return match behavior.as_deref() {
                Some("steer") => {
                    session.steer_input(input);
                    Ok(Some(json!({"disposition": "queued"})))
                }
                Some(_) => {
                    session.follow_up_input(input);
                    Ok(Some(json!({"disposition": "queued"})))
                }
                None => Err(BUSY.into()),
            };
        }
        match session.prompt_input(input) {
            Ok(_run) => Ok(Some(json!({"disposition": "started"}))),
            Err(_) if session.status().compacting => Err(
                "The session is being compacted; send the prompt when compaction_end arrives"
                    .into(),
            ),
            Err(_) => Err(BUSY.into()),
        }
    }

    fn queue(&mut self, req: &Request) -> Answer {
        let input = self.input(req)?;
        if req.command == "steer" {
            self.live.session.steer_input(input);
        } else {
            self.live.session.follow_up_input(input);
        }
        Ok(Some(json!({"disposition": "queued"})))
    }

    fn model_json(&self) -> Value {
        serde_json::to_value(self.live.session.provider().info()).unwrap_or(Value::Null)
    }

    fn state(&self) -> Value {
        let session = &self.live.session;
        let status = session.status();
        let (steering, follow_up) = session.queue_modes();
        let store = recorder::lock(&self.live.store);
        let mut m = serde_json::Map::new();
        m.insert("model".into(), self.model_json());
        m.insert("thinkingLevel".into(), json!(session.thinking_level()));
        m.insert("isStreaming".into(), json!(status.running));
        m.insert("isCompacting".into(), json!(status.compacting));
        m.insert("steeringMode".into(), json!(mode_word(steering)));
        m.insert("followUpMode".into(), json!(mode_word(follow_up)));
        if let Some(p) = store.path() {
            m.insert("sessionFile".into(), json!(p.display().to_string()));
        }
        m.insert("sessionId".into(), json!(store.header().id));
        if let Some(name) = store.name() {
            m.insert("sessionName".into(), json!(name));
        }
        m.insert(
            "autoCompactionEnabled".into(),
            json!(status.auto_compaction),
        );
        m.insert("autoRetryEnabled".into(), json!(status.auto_retry));
        m.insert("messageCount".into(), json!(status.message_count));
        m.insert("pendingMessageCount".into(), json!(status.pending_count));
        Value::Object(m)
    }

    fn set_model(&mut self, req: &Request) -> Answer {
        let provider = req.str("provider")?;
        let model_id = req.str("modelId")?;
        let p = self.models.build(provider, model_id)?;
        self.live.session.set_model(p);
        Ok(Some(self.model_json()))
    }

    fn cycle_model(&mut self) -> Value {
        let models = self.models.available();
        if models.len() < 2 {
            return Value::Null;
        }
        let current = self.live.session.provider();
        let at = models
            .iter()
            .position(|m| m.provider == current.name() && m.id == current.model())
            .unwrap_or(0);
        for step in 1..models.len() {
            let next = &models[(at + step) % models.len()];
            if let Ok(p) = self.models.build(&next.provider, &next.id) {
                self.live.session.set_model(p);
                return json!({
                    "model": self.model_json(),
                    "thinkingLevel": self.live.session.thinking_level(),
                    "isScoped": false,
                });
            }
        }
        Value::Null
    }

    fn set_thinking_level(&mut self, req: &Request) -> Answer {
        let mut allowed: Vec<&str> = THINKING_LEVELS.to_vec();
        allowed.push("max");
        let level = req
            .choice("level", &allowed)?
            .ok_or_else(|| "set_thinking_level: field `level` is missing (a string)".to_string())?;
        let level = if level == "max" {
            "xhigh".into()
        } else {
            level
        };
        self.live.session.set_thinking_level(&level);
        Ok(None)
    }

    fn cycle_thinking_level(&mut self) -> Value {
        let levels = self.live.session.provider().info().thinking_levels.clone();
        if levels.len() < 2 {
            return Value::Null;
        }
        let current = self.live.session.thinking_level();
        let at = levels.iter().position(|l| *l == current).unwrap_or(0);
        let next = &levels[(at + 1) % levels.len()];
        let level = self.live.session.set_thinking_level(next);
        json!({"level": level})
    }

    fn set_queue_mode(&mut self, req: &Request) -> Answer {
        let mode = match req.choice("mode", &["all", "one-at-a-time"])?.as_deref() {
            Some("all") => QueueMode::All,
            Some(_) => QueueMode::OneAtATime,
            None => {
                return Err(format!(
                    "{}: field `mode` is missing (a string)",
                    req.command
                ))
            }
        };
        if req.command == "set_steering_mode" {
            self.live.session.set_steering_mode(mode);
        } else {
            self.live.session.set_follow_up_mode(mode);
        }
        Ok(None)
    }

    fn compact(&mut self, req: Request) {
        let instructions = match req.opt_str("customInstructions") {
            Ok(i) => i.map(str::to_string),
            Err(e) => return self.respond(&req, Err(e)),
        };
        let task = self.spawn_task(None);
        let session = self.live.session.clone();
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let line = match session.compact(instructions).await {
                Ok(result) => rpc::ok_line(
                    req.id.as_ref(),
                    "compact",
                    Some(serde_json::to_value(&result).unwrap_or(Value::Null)),
                ),
                Err(e) => rpc::error_line(req.id.as_ref(), Some("compact"), &e.to_string()),
            };
            let _ = tx.send(Internal::Line(line));
            let _ = tx.send(Internal::Done(task));
        });
    }

    fn bash(&mut self, req: &Request) -> Result<(), String> {
        let command = req.str("command")?.to_string();
        let exclude = req.opt_bool("excludeFromContext")?.unwrap_or(false);
        let (controller, signal) = AbortController::new();
        let task = self.spawn_task(Some(controller));
        let session = self.live.session.clone();
        let tx = self.tx.clone();
        let id = req.id.clone();
        tokio::spawn(async move {
            let (ctx, mut crx) = mpsc::unbounded_channel::<Vec<u8>>();
            let run = session.bash(&command, exclude, ctx, signal);
            tokio::pin!(run);
            // Output chunks become `bash_execution_update` deltas, split only between
            // whole characters.
            let mut carry = Vec::new();
            let mut forward = |chunk: &[u8]| {
                let delta = utf8_chunk(&mut carry, chunk);
                if !delta.is_empty() {
                    let line = rpc::bash_update_line(id.as_ref(), &delta);
                    let _ = tx.send(Internal::Line(line));
                }
            };
            let record = loop {
                tokio::select! {
                    record = &mut run => break record,
                    Some(chunk) = crx.recv() => forward(&chunk),
                }
            };
            while let Ok(chunk) = crx.try_recv() {
                forward(&chunk);
            }
            // An incomplete character at the very end is shown as U+FFFD.
            if !carry.is_empty() {
                let rest = String::from_utf8_lossy(&carry).into_owned();
                let _ = tx.send(Internal::Line(rpc::bash_update_line(id.as_ref(), &rest)));
            }
            let mut data = json!({
                "output": record.output,
                "exitCode": record.exit_code,
                "cancelled": record.cancelled,
                "truncated": record.truncated,
            });
            if let (Some(p), Some(m)) = (&record.full_output_path, data.as_object_mut()) {
                m.insert("fullOutputPath".into(), json!(p));
            }
            let _ = tx.send(Internal::Line(rpc::ok_line(
                id.as_ref(),
                "bash",
                Some(data),
            )));
            let _ = tx.send(Internal::Done(task));
        });
        Ok(())
    }

    fn stats(&self) -> Value {
        let store = recorder::lock(&self.live.store);
        let (mut user, mut assistant, mut calls, mut results) = (0u64, 0u64, 0u64, 0u64);
        let mut usage = crate::kernel::message::Usage::default();
        for e in store.entries() {
            match &e.data {
                EntryData::Message(Message::User(_)) => user += 1,
                EntryData::Message(Message::Assistant(a)) => {
                    assistant += 1;
                    calls += a.tool_calls().len() as u64;
                    usage.add(&a.usage);
                }
                EntryData::Message(Message::ToolResult(_)) => results += 1,
                _ => {}
            }
        }
        let provider = self.live.session.provider();
        let window = provider.info().context_window;
        let tokens = compaction::context_tokens(&self.live.session.messages());
        let percent = if window > 0 {
            tokens as f64 * 100.0 / window as f64
        } else {
            0.0
        };
        let mut m = serde_json::Map::new();
        if let Some(p) = store.path() {
            m.insert("sessionFile".into(), json!(p.display().to_string()));
        }
        m.insert("sessionId".into(), json!(store.header().id));
        m.insert("userMessages".into(), json!(user));
        m.insert("assistantMessages".into(), json!(assistant));
        m.insert("toolCalls".into(), json!(calls));
        m.insert("toolResults".into(), json!(results));
        m.insert("totalMessages".into(), json!(user + assistant + results));
        m.insert(
            "tokens".into(),
            json!({
                "input": usage.input,
                "output": usage.output,
                "cacheRead": usage.cache_read,
                "cacheWrite": usage.cache_write,
                "total": usage.input + usage.output + usage.cache_read + usage.cache_write,
            }),
        );
        m.insert("cost".into(), json!(usage.cost.total));
        m.insert(
            "contextUsage".into(),
            json!({"tokens": tokens, "contextWindow": window, "percent": percent}),
        );
        Value::Object(m)
    }

    fn export_html(&self, req: &Request) -> Answer {
        let path = req.opt_str("outputPath")?.map(|p| self.config.cwd.join(p));
        let path = live::export_html(&self.live, &self.config.cwd, path)
            .map_err(|e| format!("export_html: {e}"))?;
        Ok(Some(json!({"path": path.display().to_string()})))
    }

    fn fork_messages(&self) -> Value {
        let store = recorder::lock(&self.live.store);
        let messages: Vec<Value> = store
            .entries()
            .iter()
            .filter_map(|e| match &e.data {
                EntryData::Message(Message::User(u)) => {
                    Some(json!({"entryId": e.id, "text": user_text(u)}))
                }
                _ => None,
            })
            .collect();
        json!({ "messages": messages })
    }

    fn entries(&self, req: &Request) -> Answer {
        let since = req.opt_str("since")?;
        let store = recorder::lock(&self.live.store);
        let all = store.entries();
        let start = match since {
            None => 0,
            Some(id) => {
                all.iter()
                    .position(|e| e.id == id)
                    .ok_or_else(|| format!("Entry not found: {id}"))?
                    + 1
            }
        };
        let entries: Vec<Value> = all[start..]
            .iter()
            .filter_map(|e| e.to_json().ok())
            .collect();
        Ok(Some(json!({"entries": entries, "leafId": store.leaf_id()})))
    }

    /// `get_tree`'s data as JSON text: `{"tree":[{entry,children,label?,labelTimestamp?}],
    /// "leafId"}`. Written with an explicit stack, never as a nested `Value`: a linear
    /// session of 50k entries is a tree 50k levels deep, and building, serializing or
    /// dropping a `Value` that deep recurses once per level and overflows the stack.
    fn tree_json(&self) -> String {
        let store = recorder::lock(&self.live.store);
        let entries = store.entries();
        let index: HashMap<&str, usize> = entries
            .iter()
            .enumerate()
            .map(|(i, e)| (e.id.as_str(), i))
            .collect();
        let mut children: Vec<Vec<usize>> = vec![Vec::new(); entries.len()];
        let mut roots = Vec::new();
        let mut labels: HashMap<&str, (&str, &str)> = HashMap::new();
        for (i, e) in entries.iter().enumerate() {
            if let EntryData::Label { target_id, label } = &e.data {
                match label {
                    Some(l) => labels.insert(target_id, (l, &e.timestamp)),
                    None => labels.remove(target_id.as_str()),
                };
            }
            match e.parent_id.as_deref().and_then(|p| index.get(p)) {
                Some(&parent) if parent < i => children[parent].push(i),
                _ => roots.push(i),
            }
        }
        enum Step {
            /// Write node `n` up to its children; `first`: no comma before it.
            Open(usize, bool),
            /// Close node `n`'s children and write its label.
            Close(usize),
        }
        let mut out = String::from("{\"tree\":[");
        let mut stack: Vec<Step> = roots
            .iter()
            .enumerate()
            .rev()
            .map(|(k, &r)| Step::Open(r, k == 0))
            .collect();
        while let Some(step) = stack.pop() {
            match step {
                Step::Open(n, first) => {
                    if !first {
                        out.push(',');
                    }
                    let entry = entries[n].to_json().unwrap_or(Value::Null);
                    out.push_str("{\"entry\":");
                    out.push_str(&entry.to_string());
                    out.push_str(",\"children\":[");
                    stack.push(Step::Close(n));
                    for (k, &c) in children[n].iter().enumerate().rev() {
                        stack.push(Step::Open(c, k == 0));
                    }
                }
                Step::Close(n) => {
                    out.push(']');
                    if let Some((label, at)) = labels.get(entries[n].id.as_str()) {
                        out.push_str(&format!(
                            ",\"label\":{},\"labelTimestamp\":{}",
                            json!(label),
                            json!(at)
                        ));
                    }
                    out.push('}');
                }
            }
        }
        out.push_str("],\"leafId\":");
        out.push_str(&json!(store.leaf_id()).to_string());
        out.push('}');
        out
    }

    fn set_session_name(&mut self, req: &Request) -> Answer {
        let name = req.str("name")?.trim().to_string();
        if name.is_empty() {
            return Err("Session name cannot be empty".into());
        }
        self.live.session.set_session_name(name);
        Ok(None)
    }

    fn commands(&mut self) -> Value {
        // Re-read so templates added while the editor runs show up.
        let (templates, _) = prompts::load(&self.prompt_dirs.0, &self.prompt_dirs.1);
        self.templates = templates;
        let commands: Vec<Value> = self
            .templates
            .iter()
            .map(|t| {
                let base = t.path.parent().map(|p| p.display().to_string());
                json!({
                    "name": t.name,
                    "description": t.description,
                    "source": "prompt",
                    "sourceInfo": {
                        "path": t.path.display().to_string(),
                        "source": "local",
                        "scope": t.scope.as_str(),
                        "origin": "top-level",
                        "baseDir": base,
                    },
                })
            })
            .collect();
        json!({ "commands": commands })
    }

    fn ui_response(&mut self, req: &Request) {
        let Some(id) = req.id.as_ref().and_then(Value::as_str) else {
            tracing::warn!("extension_ui_response without a string id");
            return;
        };
        let Some(call_id) = self.approvals.remove(id) else {
            tracing::debug!("extension_ui_response for unknown or closed dialog {id}");
            return;
        };
        let allow = req.opt_bool("confirmed").ok().flatten() == Some(true)
            && req.opt_bool("cancelled").ok().flatten() != Some(true);
        let decision = if allow {
            ApprovalDecision::Allow
        } else {
            ApprovalDecision::Deny
        };
        self.live.session.approve(&call_id, decision);
    }

    /// `new_session`, `switch_session`, `fork`, `clone` while idle.
    async fn change_session(&mut self, req: &Request) -> Answer {
        let current_path = recorder::lock(&self.live.store)
            .path()
            .map(Path::to_path_buf);
        let (store, data) = match req.command.as_str() {
            "new_session" => {
                let mut header = self.new_header();
                header.parent_session = req.opt_str("parentSession")?.map(str::to_string);
                (self.new_store(header), json!({"cancelled": false}))
            }
            "switch_session" => {
                let target = self.config.cwd.join(req.str("sessionPath")?);
                if current_path.as_deref() == Some(target.as_path()) {
                    return Ok(Some(json!({"cancelled": false})));
                }
                let target = if target.is_file() {
                    target
                } else {
                    session::resolve(&self.session_dir, req.str("sessionPath")?)
                        .map_err(|e| e.message)?
                };
                let (store, warnings) = Store::open(&target).map_err(|e| e.message)?;
                self.warnings.extend(warnings);
                (store, json!({"cancelled": false}))
            }
            "fork" => {
                let entry_id = req.str("entryId")?;
                let (leaf, text) = {
                    let store = recorder::lock(&self.live.store);
                    let entry = store
                        .entry(entry_id)
                        .ok_or_else(|| format!("Entry not found: {entry_id}"))?;
                    let EntryData::Message(Message::User(u)) = &entry.data else {
                        return Err(format!(
                            "Invalid entry ID for forking: {entry_id} is not a user message"
                        ));
                    };
                    (entry.parent_id.clone(), user_text(u))
                };
                let store = self.fork_store(leaf.as_deref(), current_path.as_deref())?;
                (store, json!({"text": text, "cancelled": false}))
            }
            _ => {
                let leaf = recorder::lock(&self.live.store)
                    .leaf_id()
                    .map(str::to_string)
                    .ok_or("Cannot clone session: no current entry selected")?;
                let store = self.fork_store(Some(&leaf), current_path.as_deref())?;
                (store, json!({"cancelled": false}))
            }
        };
        self.replace(store).await;
        Ok(Some(data))
    }

    fn new_header(&self) -> SessionHeader {
        SessionHeader::new(&self.clock, self.config.cwd.display().to_string())
    }

    fn new_store(&self, header: SessionHeader) -> Store {
        live::new_store(&self.live, &self.session_dir, header)
    }

    fn fork_store(&self, leaf: Option<&str>, parent: Option<&Path>) -> Result<Store, String> {
        live::fork_store(
            &self.live,
            &self.session_dir,
            self.new_header(),
            leaf,
            parent,
        )
    }

    /// Serves `store` from now on. The old session's last events are written and its
    /// recorder finishes (syncing the file and releasing its lock) before this returns.
    async fn replace(&mut self, store: Store) {
        self.drain_events();
        let announce = store.entries().is_empty();
        let old_session = self.live.session.clone();
        let next = Live::start(
            &self.config,
            Some(&old_session),
            Starting {
                store,
                clock: self.clock.clone(),
                provider: old_session.provider(),
                thinking: old_session.thinking_level(),
                announce,
            },
        );
        std::mem::replace(&mut self.live, next).retire().await;
    }
}

fn mode_word(m: QueueMode) -> &'static str {
    match m {
        QueueMode::All => "all",
        QueueMode::OneAtATime => "one-at-a-time",
    }
}

/// Decodes a chunk of command output, keeping an incomplete UTF-8 sequence at its end for
/// the next chunk (invalid bytes become U+FFFD).
fn utf8_chunk(carry: &mut Vec<u8>, chunk: &[u8]) -> String {
    carry.extend_from_slice(chunk);
    let mut out = String::new();
    let mut rest: &[u8] = carry;
    loop {
        match std::str::from_utf8(rest) {
            Ok(s) => {
                out.push_str(s);
                rest = &[];
                break;
            }
            Err(e) => {
                let (good, bad) = rest.split_at(e.valid_up_to());
                out.push_str(std::str::from_utf8(good).unwrap_or_default());
                match e.error_len() {
                    Some(n) => {
                        out.push('\u{FFFD}');
                        rest = &bad[n..];
                    }
                    None => {
                        rest = bad; // incomplete: wait for more bytes
                        break;
                    }
                }
            }
        }
    }
    let kept = rest.to_vec();
    *carry = kept;
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn utf8_chunks_split_inside_characters() {
        let text = "añ日🎉b";
        let bytes = text.as_bytes();
        for cut in 0..=bytes.len() {
            let mut carry = Vec::new();
            let mut out = utf8_chunk(&mut carry, &bytes[..cut]);
            out.push_str(&utf8_chunk(&mut carry, &bytes[cut..]));
            assert_eq!(out, text, "cut at {cut}");
            assert!(carry.is_empty());
        }
        let mut carry = Vec::new();
        assert_eq!(utf8_chunk(&mut carry, b"a\xffb"), "a\u{FFFD}b");
    }
}
