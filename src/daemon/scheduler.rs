//! The daemon side of scheduled tasks: reads the store (at start, on `schedule/reload`, and
//! on its own tick when the file changed), starts the runs that are due through the same
//! `session/open` path a client uses, follows each run to its `agent_settled`, records the
//! outcome in the store, runs `--on-failure` and sends `daemon/notice` when it was not a
//! success. The clock is injected ([`Clock`]); nothing here writes to stdout.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Local};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use crate::daemon::open::{open_session, Opening};
use crate::daemon::server::Shared;
use crate::error::StartupError;
use crate::exit::Exit;
use crate::host::actor::{Call, SessionHandle};
use crate::host::stream::{Delivery, Item, QUEUE};
use crate::report::{fact, RunSummary};
use crate::schedule::due::{self, Due};
use crate::schedule::{Store, Task, TaskState};
use crate::wire::events::ErrorKind;
use crate::wire::jsonrpc::{self as j, ErrorObject};
use crate::wire::pi::Command;
use crate::wire::protocol::daemon::ScheduleStatus;
use crate::wire::protocol::notify::Notice;
use crate::wire::protocol::schedule::{ReloadResult, RunParams, RunResult};
use crate::wire::protocol::spec::{SessionPick, SessionSpec};

/// How long `--on-failure` may run before it is killed.
pub const ON_FAILURE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a settled run's session gets to save when it is closed.
const CLOSE_GRACE: Duration = Duration::from_secs(3);

/// Where the scheduler reads the time.
pub trait Clock: Send + Sync {
    fn now(&self) -> DateTime<Local>;
}

/// The system clock, in the local zone.
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Local> {
        Local::now()
    }
}

/// The tasks as last read, the read error, and the runs going on.
pub struct Scheduler {
    store: Store,
    clock: Box<dyn Clock>,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    tasks: Vec<Task>,
    /// The store could not be read: nothing runs until it can.
    error: Option<String>,
    stamp: Option<(std::time::SystemTime, u64)>,
    running: HashSet<String>,
}

impl Scheduler {
    pub fn new(store: Store, clock: Box<dyn Clock>) -> Scheduler {
        Scheduler {
            store,
            clock,
            inner: Mutex::new(Inner::default()),
        }
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reads the store (always when `force`, else only if the file changed); the number of
    /// tasks, or why the file cannot be used (then nothing runs from it).
    pub fn reload(&self, force: bool) -> Result<usize, String> {
        let stamp = self.store.stamp();
        let mut inner = self.inner();
        if !force && stamp == inner.stamp {
            return match &inner.error {
                Some(e) => Err(e.clone()),
                None => Ok(inner.tasks.len()),
            };
        }
        inner.stamp = stamp;
        match self.store.load() {
            Ok(tasks) => {
                if inner.error.take().is_some() {
                    tracing::info!("{} can be read again", self.store.path.display());
                }
                inner.tasks = tasks;
                Ok(inner.tasks.len())
            }
            Err(e) => {
                let e = e.to_string();
                if inner.error.as_ref() != Some(&e) {
                    tracing::error!("{e}; no scheduled task runs until it is fixed");
                }
                inner.tasks.clear();
                inner.error = Some(e.clone());
                Err(e)
            }
        }
    }

    /// Reads the store when the daemon starts; a run recorded as `running` was cut by the
    /// end of an earlier daemon: it is recorded as `interrupted`.
    pub fn start(&self) {
        if self.reload(true).is_err() {
            return;
        }
        let cut: Vec<String> = self
            .inner()
            .tasks
            .iter()
            .filter(|t| t.state.last_outcome.as_deref() == Some("running"))
            .map(|t| t.name.clone())
            .collect();
        for name in cut {
            self.record(&name, |s| {
                s.last_outcome = Some(Exit::Signal(crate::exit::SIGTERM).outcome().into());
                s.last_exit = None;
                s.last_error = Some("the daemon ended before the run settled".into());
            });
        }
    }

    /// Whether the daemon must stay up: a task that is not paused exists.
    pub fn keeps_alive(&self) -> bool {
        let inner = self.inner();
        !inner.running.is_empty() || inner.tasks.iter().any(|t| !t.paused)
    }

    /// `daemon/status`'s `schedules`: `{tasks, active, running, error?}`.
    pub fn status(&self) -> ScheduleStatus {
        let inner = self.inner();
        let mut running: Vec<String> = inner.running.iter().cloned().collect();
        running.sort();
        ScheduleStatus {
            tasks: inner.tasks.len(),
            active: inner.tasks.iter().filter(|t| !t.paused).count(),
            running,
            error: inner.error.clone(),
        }
    }

    /// The runs to start now (each is marked running, with its start recorded); a task whose
    /// run is still going has this slot skipped and counted. Re-reads a changed store first.
    pub fn tick(&self) -> Vec<(Task, DateTime<Local>)> {
        let now = self.clock.now();
        if self.reload(false).is_err() {
            return Vec::new();
        }
        let due = {
            let inner = self.inner();
            due::due_now(&inner.tasks, &inner.running, &now)
        };
        let mut start = Vec::new();
        for (name, what) in due {
            match what {
                Due::Skip => {
                    tracing::warn!(
                        "scheduled task {name}: its previous run is still going; this slot is skipped"
                    );
                    self.record(&name, |s| {
                        s.skipped += 1;
                        s.skipped_at = Some(now.to_rfc3339());
                    });
                }
                Due::Run => start.extend(self.begin_at(&name, now).ok()),
            }
        }
        start
    }

    /// Marks task `name` running from now (`schedule/run`): the task, or why not.
    pub fn begin(&self, name: &str) -> Result<(Task, DateTime<Local>), ErrorObject> {
        self.begin_at(name, self.clock.now())
    }

    fn begin_at(
        &self,
        name: &str,
        now: DateTime<Local>,
    ) -> Result<(Task, DateTime<Local>), ErrorObject> {
        {
            let mut inner = self.inner();
            if let Some(e) = &inner.error {
                return Err(ErrorObject::new(j::COMMAND_FAILED, e.clone()));
            }
            if !inner.tasks.iter().any(|t| t.name == name) {
                return Err(ErrorObject::new(
                    j::INVALID_PARAMS,
                    format!("Invalid params: no scheduled task {name}"),
                ));
            }
            if !inner.running.insert(name.to_string()) {
                return Err(ErrorObject::new(
                    j::SESSION_BUSY,
                    format!("scheduled task {name} is running already"),
                ));
            }
        }
        tracing::info!("scheduled task {name}: run starts");
        let task = self.record(name, |s| {
            s.last_run = Some(now.to_rfc3339());
            s.last_outcome = Some("running".into());
            s.last_exit = None;
            s.last_error = None;
            s.last_session = None;
            s.last_warnings.clear();
            s.last_violations.clear();
        });
        match task {
            Some(t) => Ok((t, now)),
            None => {
                self.finish(name);
                Err(ErrorObject::new(
                    j::COMMAND_FAILED,
                    format!("no task {name}"),
                ))
            }
        }
    }

    /// The run of `name` is over.
    fn finish(&self, name: &str) {
        self.inner().running.remove(name);
    }

    /// Changes the state of task `name` in memory and in the store; the task as it is now.
    fn record(&self, name: &str, f: impl Fn(&mut TaskState)) -> Option<Task> {
        if let Err(e) = self.store.set_state(name, &f) {
            tracing::error!("scheduled task {name}: cannot record its state: {e}");
        }
        // The stamp is left as it was: the next tick reads the file again, with this change
        // and any other process's that came before it.
        let mut inner = self.inner();
        let task = inner.tasks.iter_mut().find(|t| t.name == name)?;
        f(&mut task.state);
        Some(task.clone())
    }
}

/// The server's tick: starts the runs that are due.
pub fn spawn_due(shared: &Arc<Shared>) {
    for (task, at) in shared.scheduler.tick() {
        let shared = shared.clone();
        tokio::spawn(async move {
            let _ = launch(&shared, task, at).await;
        });
    }
}

/// `schedule/reload {}` → `{tasks}`; a store that cannot be read is -32000 naming the file.
pub fn reload_method(shared: &Shared) -> Result<ReloadResult, ErrorObject> {
    match shared.scheduler.reload(true) {
        Ok(tasks) => Ok(ReloadResult { tasks }),
        Err(e) => Err(ErrorObject::new(j::COMMAND_FAILED, e)),
    }
}

/// `schedule/run {name}` → `{task, sessionId}` once the run's session is open and prompted.
pub async fn run_method(shared: &Arc<Shared>, r: RunParams) -> Result<RunResult, ErrorObject> {
    let _ = shared.scheduler.reload(true);
    let (task, at) = shared.scheduler.begin(&r.name)?;
    match launch(shared, task, at).await {
        Ok(session_id) => Ok(RunResult {
            task: r.name,
            session_id,
        }),
        Err(e) => Err(ErrorObject::new(j::COMMAND_FAILED, e)),
    }
}

/// The spec a run opens its session with: the task's, with a fresh session id unless it
/// picks a session itself.
fn run_spec(task: &Task) -> SessionSpec {
    let mut spec = task.spec.clone();
    if spec.session.is_new() {
        spec.session = SessionPick::Id(uuid::Uuid::now_v7().to_string());
    }
    spec
}

/// Opens the run's session (named `schedule:NAME TIME`), attaches to it and sends the
/// prompt; the rest of the run is followed in its own task. The session id, or why the run
/// could not start (recorded as its outcome).
async fn launch(shared: &Arc<Shared>, task: Task, at: DateTime<Local>) -> Result<String, String> {
    let opening = Opening {
        cwd: task.cwd.clone(),
        spec: run_spec(&task),
        env: task.env.clone(),
        keys: Default::default(),
        headless: false,
        unattended: true,
    };
    let started = Instant::now();
    let opened = match open_session(shared, opening).await {
        Ok(o) => o,
        Err(e) => {
            settle(shared, &task, Report::not_started(&e)).await;
            return Err(e.message);
        }
    };
    let id = opened.id.clone();
    let handle = opened.handle;
    for w in &opened.warnings {
        tracing::warn!("scheduled task {}: {w}", task.name);
    }
    shared
        .scheduler
        .record(&task.name, |s| s.last_warnings = opened.warnings.clone());
    let client = shared.next();
    let (queue, rx) = mpsc::channel::<Delivery>(shared.options.ring.0 + QUEUE);
    let (reply, attached) = oneshot::channel();
    handle.send(Call::Attach {
        client,
        interactive: false,
        cursor: None,
        queue,
        reply,
    });
    let from = attached.await.map(|a| a.seq).unwrap_or(0);
    let name = format!("schedule:{} {}", task.name, at.format("%Y-%m-%d %H:%M"));
    let _ = handle
        .request(Command::SetSessionName { name }.to_request())
        .await;
    shared
        .scheduler
        .record(&task.name, |s| s.last_session = Some(id.clone()));
    let prompt = Command::Prompt {
        message: task.prompt.clone(),
        images: Vec::new(),
        streaming_behavior: None,
    }
    .to_request();
    if let (Err(crate::host::CommandError { message: e, .. }), _) = handle.request(prompt).await {
        handle.send(Call::Detach { client });
        settle(shared, &task, Report::refused(&id, &e)).await;
        return Err(e);
    }
    tracing::info!("scheduled task {}: session {id}", task.name);
    let follow = Follow {
        shared: shared.clone(),
        task,
        id: id.clone(),
        handle,
        client,
        from,
        started,
    };
    tokio::spawn(follow.run(rx));
    Ok(id)
}

/// A run being followed to its end.
struct Follow {
    shared: Arc<Shared>,
    task: Task,
    id: String,
    handle: SessionHandle,
    client: u64,
    /// Events up to this `seq` came before the run.
    from: u64,
    started: Instant,
}

impl Follow {
    async fn run(self, mut rx: mpsc::Receiver<Delivery>) {
        let mut summary = RunSummary::default();
        let mut violations = Vec::new();
        let mut begun = false;
        while let Some(d) = rx.recv().await {
            let Item::Event(ev) = &d.item else { continue };
            if ev.seq <= self.from {
                continue;
            }
            let Some(kind) = fact::kind_of(&ev.line) else {
                continue;
            };
            begun |= kind == "agent_start";
            if !begun {
                continue;
            }
            if let Some(fact) = fact::parse(&kind, &ev.line) {
                if let fact::Fact::SandboxViolation { reason, what } = &fact {
                    let line = fact::violation_line(reason, what.as_deref());
                    tracing::warn!("scheduled task {}: {line}", self.task.name);
                    violations.push(line);
                }
                summary.observe(&fact);
            }
            if kind == "agent_settled" {
                break;
            }
        }
        self.handle.send(Call::Detach {
            client: self.client,
        });
        let (exit, cut) = match summary.exit() {
            Some(exit) => (exit, None),
            None => (
                Exit::Signal(crate::exit::SIGTERM),
                Some((
                    ErrorKind::Interrupted.as_str(),
                    "the session ended before the run settled",
                )),
            ),
        };
        let ms = self.started.elapsed().as_millis() as u64;
        let line = crate::report::result_line(&summary, exit, Some(&self.id), ms, cut);
        let error = cut
            .map(|(_, m)| m.to_string())
            .or_else(|| summary.error(exit).map(|(_, m)| m));
        close_if_unwatched(&self.shared, &self.handle).await;
        let report = Report {
            exit,
            session: Some(self.id.clone()),
            error,
            line,
            violations,
        };
        settle(&self.shared, &self.task, report).await;
    }
}

/// A settled run's session is saved and closed, unless a client is attached (it stays live
/// until that client closes it, as any daemon session).
async fn close_if_unwatched(shared: &Shared, handle: &SessionHandle) {
    let Some(status) = handle.status().await else {
        return;
    };
    if status.clients > 0 || status.summary.running {
        return;
    }
    shared.forget(handle).await;
    handle.stop(CLOSE_GRACE).await;
}

/// How a run ended.
struct Report {
    exit: Exit,
    session: Option<String>,
    error: Option<String>,
    /// The run's JSON-mode `result` line (with its newline).
    line: String,
    /// What the sandbox stopped.
    violations: Vec<String>,
}

impl Report {
    /// The session could not be opened: the startup error (`session/open`'s) decides.
    fn not_started(e: &ErrorObject) -> Report {
        let err = StartupError::from_json(e.data.as_ref().unwrap_or(&Value::Null))
            .unwrap_or_else(|| StartupError::config(e.message.clone()));
        let exit = err.exit();
        let error = Some((err.kind_word(), err.message.as_str()));
        Report {
            exit,
            session: None,
            error: Some(err.message.clone()),
            line: crate::report::result_line(&RunSummary::default(), exit, None, 0, error),
            violations: Vec::new(),
        }
    }

    /// The session would not take the prompt (a run of another client was going on).
    fn refused(id: &str, why: &str) -> Report {
        let message = format!("the session cannot take a prompt now: {why}");
        let error = Some((ErrorKind::Busy.as_str(), message.as_str()));
        Report {
            exit: Exit::Failed,
            session: Some(id.to_string()),
            line: crate::report::result_line(
                &RunSummary::default(),
                Exit::Failed,
                Some(id),
                0,
                error,
            ),
            error: Some(message),
            violations: Vec::new(),
        }
    }
}

/// Records the outcome; unless it was a success, runs `--on-failure` and tells every client.
async fn settle(shared: &Shared, task: &Task, r: Report) {
    let outcome = r.exit.outcome();
    match r.exit {
        Exit::Success => tracing::info!("scheduled task {}: {outcome} (exit 0)", task.name),
        _ => tracing::warn!(
            "scheduled task {}: {outcome} (exit {}){}",
            task.name,
            r.exit.code(),
            r.error
                .as_deref()
                .map_or(String::new(), |e| format!(": {e}"))
        ),
    }
    shared.scheduler.record(&task.name, |s| {
        s.last_outcome = Some(outcome.into());
        s.last_exit = Some(r.exit.code());
        s.last_error = r.error.clone();
        s.last_violations = r.violations.clone();
        if r.session.is_some() {
            s.last_session = r.session.clone();
        }
        s.runs += 1;
    });
    shared.scheduler.finish(&task.name);
    if r.exit == Exit::Success {
        return;
    }
    let session = r
        .session
        .as_deref()
        .map_or(String::new(), |s| format!("; session {s}"));
    let why = r
        .error
        .as_deref()
        .map_or(String::new(), |e| format!(": {e}"));
    let _ = shared.notices.send(Notice {
        level: "warning".into(),
        message: format!(
            "scheduled task {} ended {outcome} (exit {}){why}{session}",
            task.name,
            r.exit.code()
        ),
        task: Some(task.name.clone()),
        session_id: r.session.clone(),
        outcome: Some(outcome.to_string()),
        exit_code: Some(r.exit.code()),
    });
    if let Some(cmd) = &task.on_failure {
        on_failure(task, cmd, outcome, r.session.as_deref(), &r.line).await;
    }
}

/// Runs `sh -c CMD` in the task's directory with the result line on stdin (at most
/// [`ON_FAILURE_TIMEOUT`]); its output goes to the daemon log.
async fn on_failure(task: &Task, cmd: &str, outcome: &str, session: Option<&str>, line: &str) {
    use std::process::Stdio;
    use tokio::io::AsyncWriteExt;
    let name = &task.name;
    let spawned = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .current_dir(&task.cwd)
        .env("KEEL_SCHEDULE_TASK", name)
        .env("KEEL_SCHEDULE_OUTCOME", outcome)
        .env("KEEL_SCHEDULE_SESSION", session.unwrap_or(""))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn();
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            tracing::error!("scheduled task {name}: --on-failure cannot start: {e}");
            return;
        }
    };
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(line.as_bytes()).await;
    }
    match tokio::time::timeout(ON_FAILURE_TIMEOUT, child.wait_with_output()).await {
        Ok(Ok(out)) => {
            for l in String::from_utf8_lossy(&out.stdout)
                .lines()
                .chain(String::from_utf8_lossy(&out.stderr).lines())
            {
                tracing::info!("scheduled task {name}: --on-failure: {l}");
            }
            match out.status.success() {
                true => tracing::info!("scheduled task {name}: --on-failure ended: {}", out.status),
                false => {
                    tracing::warn!("scheduled task {name}: --on-failure ended: {}", out.status)
                }
            }
        }
        Ok(Err(e)) => tracing::error!("scheduled task {name}: --on-failure failed: {e}"),
        Err(_) => tracing::error!(
            "scheduled task {name}: --on-failure killed after {} s",
            ON_FAILURE_TIMEOUT.as_secs()
        ),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    /// A clock the test moves.
    #[derive(Clone)]
    struct Fake(Arc<Mutex<DateTime<Local>>>);

    impl Clock for Fake {
        fn now(&self) -> DateTime<Local> {
            *self.0.lock().unwrap()
        }
    }

    impl Fake {
        fn set(&self, t: DateTime<Local>) {
            *self.0.lock().unwrap() = t;
        }
    }

    fn at(secs: i64) -> DateTime<Local> {
        Local.timestamp_opt(1_796_000_000 + secs, 0).unwrap()
    }

    fn scheduler(dir: &std::path::Path, task: Task) -> (Scheduler, Fake) {
        let store = Store::new(dir);
        store
            .update(|t| {
                t.push(task);
                Ok::<_, crate::schedule::StoreError>(())
            })
            .unwrap();
        let clock = Fake(Arc::new(Mutex::new(at(0))));
        let s = Scheduler::new(store, Box::new(clock.clone()));
        s.start();
        (s, clock)
    }

    fn every(secs: u64, created: DateTime<Local>) -> Task {
        Task {
            name: "t".into(),
            every: Some(secs),
            cron: None,
            cwd: "/tmp".into(),
            spec: SessionSpec::default(),
            args: Vec::new(),
            prompt: "p".into(),
            env: Default::default(),
            on_failure: None,
            paused: false,
            created: created.to_rfc3339(),
            state: TaskState::default(),
        }
    }

    fn names(started: &[(Task, DateTime<Local>)]) -> Vec<&str> {
        started.iter().map(|(t, _)| t.name.as_str()).collect()
    }

    #[test]
    fn a_daemon_that_was_down_runs_a_missed_task_once_then_on_schedule() {
        let dir = tempfile::tempdir().unwrap();
        let mut task = every(60, at(-86_400));
        task.state.last_run = Some(at(-86_400).to_rfc3339());
        let (s, clock) = scheduler(dir.path(), task);
        assert_eq!(names(&s.tick()), ["t"], "1440 missed slots, one run");
        s.finish("t");
        for secs in [1, 30, 59] {
            clock.set(at(secs));
            assert!(s.tick().is_empty(), "at +{secs}s");
        }
        clock.set(at(60));
        assert_eq!(
            names(&s.tick()),
            ["t"],
            "one interval after the catch-up run"
        );
        let stored = Store::new(dir.path()).load().unwrap();
        assert_eq!(
            stored[0].state.last_run.as_deref(),
            Some(&*at(60).to_rfc3339())
        );
        assert_eq!(stored[0].state.last_outcome.as_deref(), Some("running"));
    }

    #[test]
    fn a_slot_that_comes_while_the_run_goes_on_is_skipped_and_counted() {
        let dir = tempfile::tempdir().unwrap();
        let (s, clock) = scheduler(dir.path(), every(60, at(-60)));
        assert_eq!(names(&s.tick()), ["t"]);
        for secs in [60, 61, 119, 120] {
            clock.set(at(secs));
            assert!(s.tick().is_empty(), "still running at +{secs}s");
        }
        let state = &Store::new(dir.path()).load().unwrap()[0].state;
        assert_eq!((state.skipped, state.runs), (2, 0), "{state:?}");
        s.finish("t");
        clock.set(at(150));
        assert!(
            s.tick().is_empty(),
            "the skip at +120 s counts as that slot"
        );
        clock.set(at(180));
        assert_eq!(names(&s.tick()), ["t"]);
        assert!(s.begin("t").is_err(), "never two runs at once");
    }

    #[test]
    fn a_corrupt_store_runs_nothing_and_says_why() {
        let dir = tempfile::tempdir().unwrap();
        let (s, clock) = scheduler(dir.path(), every(60, at(-600)));
        std::fs::write(dir.path().join(crate::schedule::FILE), "not json").unwrap();
        clock.set(at(1));
        assert!(s.tick().is_empty());
        let status = s.status();
        assert!(
            status.error.as_deref().unwrap().contains("schedules.json"),
            "{status:?}"
        );
        assert!(!s.keeps_alive());
        assert!(s.begin("t").is_err());
    }

    #[test]
    fn a_hand_edited_store_is_read_again_on_the_next_tick() {
        let dir = tempfile::tempdir().unwrap();
        let mut paused = every(60, at(-600));
        paused.paused = true;
        let (s, clock) = scheduler(dir.path(), paused);
        clock.set(at(1));
        assert!(s.tick().is_empty(), "paused");
        assert!(!s.keeps_alive(), "a paused task keeps nobody up");
        // Another process (an editor, `keel schedule resume`) rewrites the file.
        Store::new(dir.path())
            .update(|t| {
                t[0].paused = false;
                t.push(Task {
                    name: "new".into(),
                    ..every(60, at(-600))
                });
                Ok::<_, crate::schedule::StoreError>(())
            })
            .unwrap();
        let ticked = s.tick();
        let mut started = names(&ticked);
        started.sort();
        assert_eq!(started, ["new", "t"]);
        assert!(s.keeps_alive());
        assert_eq!(s.status().tasks, 2);
    }

    #[test]
    fn a_change_another_process_made_before_the_scheduler_wrote_is_not_lost() {
        let dir = tempfile::tempdir().unwrap();
        let (s, clock) = scheduler(dir.path(), every(60, at(-600)));
        // `keel schedule pause` writes the file; before the daemon looks, it records a run.
        Store::new(dir.path())
            .update(|t| {
                t[0].paused = true;
                Ok::<_, crate::schedule::StoreError>(())
            })
            .unwrap();
        s.begin("t").unwrap();
        s.finish("t");
        clock.set(at(1000));
        assert!(s.tick().is_empty(), "the pause was read");
        let stored = &Store::new(dir.path()).load().unwrap()[0];
        assert!(
            stored.paused && stored.state.last_run.is_some(),
            "{stored:?}"
        );
    }

    #[test]
    fn a_run_cut_by_the_end_of_the_daemon_is_recorded_as_interrupted() {
        let dir = tempfile::tempdir().unwrap();
        let mut task = every(3600, at(-60));
        task.state.last_outcome = Some("running".into());
        let (_s, _clock) = scheduler(dir.path(), task);
        let state = &Store::new(dir.path()).load().unwrap()[0].state;
        assert_eq!(state.last_outcome.as_deref(), Some("interrupted"));
    }
}
