//! `session/open {cwd, spec, env}`: starts a session in the daemon exactly as a client started
//! with that spec in that directory would (the same startup code as RPC mode), or returns
//! the live one when the spec picks a session the daemon already holds (a session is live in
//! at most one place), with a warning naming the spec's fields it did not apply
//! ([`SessionSpec::differences`]).
//! Opens run concurrently. [`open_session`] is the one path: the scheduler's runs start there
//! too.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Weak};

use serde_json::{json, Value};

use super::server::Shared;
use crate::error::StartupError;
use crate::host::actor;
use crate::kernel::clock::Clock;
use crate::kernel::session;
use crate::mode::Env;
use crate::mode::Mode;
use crate::setup::open::{env_in, prepare};
use crate::setup::Settings;
use crate::wire::jsonrpc::{self as j, ErrorObject};
use crate::wire::protocol::session::{LastRun, OpenParams, OpenResult, SessionHeader};
use crate::wire::protocol::spec::SessionSpec;

/// What a session is opened from, whoever asks: a client's `session/open` or the scheduler.
#[derive(Debug, Clone, Default)]
pub struct Opening {
    /// Absolute directory of the session.
    pub cwd: PathBuf,
    /// What the session is opened with.
    pub spec: SessionSpec,
    /// The client's environment: laid over the daemon's variables, and the one its tools
    /// run in (empty: the daemon's).
    pub env: BTreeMap<String, String>,
    /// Variables the session may read a provider key from, never given to its tools.
    pub keys: BTreeMap<String, String>,
    /// A tool call that needs approval is blocked at once (no dialog).
    pub headless: bool,
    /// Nobody will answer: an approval unanswered after `--approval-timeout` blocks the run.
    pub unattended: bool,
}

/// A session opened (or found live) in the daemon.
pub struct Opened {
    pub id: String,
    pub handle: actor::SessionHandle,
    pub status: Option<actor::Status>,
    /// False: the flags named a session the daemon already held.
    pub created: bool,
    pub warnings: Vec<String>,
}

/// Opens (or finds) the session. A startup error is -32000 whose `data` is the error
/// ([`StartupError::to_json`]), so a client can report it as it would in-process.
pub async fn open(shared: &Arc<Shared>, p: OpenParams) -> Result<OpenResult, ErrorObject> {
    let opening = Opening {
        cwd: p.cwd,
        spec: p.spec,
        env: p.env,
        keys: p.keys,
        headless: p.headless,
        unattended: false,
    };
    let o = open_session(shared, opening).await?;
    Ok(result(&o.id, o.status.as_ref(), o.created, &o.warnings))
}

/// Opens the session `o` describes in the daemon, or finds it live (the one path every
/// session of the daemon starts through). Errors as [`open`]'s.
///
/// Opens run concurrently: the slow part of a startup (a provider that asks its server for its
/// models) holds no lock. Only the last, quick part (the session loaded, its host started and
/// registered) runs one at a time, and looks for the session live again first: two clients
/// opening one session at once get the same live one.
pub async fn open_session(shared: &Arc<Shared>, o: Opening) -> Result<Opened, ErrorObject> {
    let failed = |m: String| ErrorObject::new(j::COMMAND_FAILED, m);
    if !o.cwd.is_absolute() || !o.cwd.is_dir() {
        return Err(failed(format!(
            "cwd {} is not an absolute path of a directory",
            o.cwd.display()
        )));
    }
    let mut env = session_env(shared, &o.cwd, o.env);
    env.vars.extend(o.keys);
    // The settings files of the session's directory, not the daemon's.
    let settings = Settings::resolve(&o.spec, Mode::Print, &env).map_err(|e| startup_failed(&e))?;
    // `-w`: the session is set up in a worktree of its own (a new session, never a live one).
    let (settings, env) = match crate::setup::worktree::enter(&settings, &env, Mode::Print)
        .map_err(|e| startup_failed(&e))?
    {
        Some(entered) => entered,
        None => (settings, env),
    };
    if let Some(live) = found_live(shared, &settings, &env, &o.spec).await {
        return Ok(live);
    }
    let clock = Clock::new(env.fixed_clock, env.seed);
    let provider = prepare(&settings, &env, &clock)
        .await
        .map_err(|e| startup_failed(&e))?;
    let _one_at_a_time = shared.opening.lock().await;
    if let Some(live) = found_live(shared, &settings, &env, &o.spec).await {
        return Ok(live);
    }
    let mut setup = crate::setup::host_setup_with(&settings, &env, &clock, !o.headless, provider)
        .map_err(|e| startup_failed(&e))?;
    setup.unattended = o.unattended;
    if let Some(s) = &mut setup.subagents {
        s.registry = Some(Arc::new(Children(Arc::downgrade(shared))));
    }
    if o.headless {
        // A print or JSON run reads the clock once more after opening its session (its
        // duration leaves startup out): a headless session does too, so that under the test
        // clock its messages get the times they get in-process.
        let _run_started = clock.now_ms();
    }
    let warnings = setup.warnings.clone();
    let tap = shared.journal.as_ref().map(|j| j.tap());
    let handle = actor::spawn_journaled(setup, shared.epoch(), shared.options.ring, tap);
    let status = handle.status().await;
    let id = status
        .as_ref()
        .map(|s| s.summary.session_id.clone())
        .unwrap_or_default();
    if let (Some(j), Some(s)) = (&shared.journal, &status) {
        let sum = &s.summary;
        j.fact(
            "opened",
            &id,
            json!({"cwd": sum.cwd, "sessionFile": sum.file, "name": sum.name, "epoch": s.epoch}),
        );
    }
    shared.register(&id, &handle).await;
    Ok(Opened {
        id,
        handle,
        status,
        created: true,
        warnings,
    })
}

/// The live session the spec picks, if the daemon holds it, with a warning naming the fields
/// asked for now that it was not opened with (it keeps its own settings).
async fn found_live(
    shared: &Shared,
    settings: &Settings,
    env: &Env,
    spec: &SessionSpec,
) -> Option<Opened> {
    let (id, handle) = {
        let sessions = shared.sessions.lock().await;
        find_live(&sessions, settings, env).await
    }?;
    let status = handle.status().await;
    let then = status
        .as_ref()
        .map(|s| s.open_spec.clone())
        .unwrap_or_default();
    let fields = spec.differences(&then);
    let warnings = match fields.as_slice() {
        [] => Vec::new(),
        _ => vec![format!(
            "session {id} is already live in the daemon and keeps the settings it was opened \
             with: {} not applied",
            fields.join(", ")
        )],
    };
    Some(Opened {
        id,
        handle,
        status,
        created: false,
        warnings,
    })
}

/// Files the subagents of the daemon's sessions among its live sessions while they run, so
/// `keel ps` lists them and `keel attach` reaches them.
struct Children(Weak<Shared>);

impl crate::host::subagent::ChildRegistry for Children {
    fn opened(&self, id: &str, parent: &str, handle: &actor::SessionHandle) {
        let Some(shared) = self.0.upgrade() else {
            return;
        };
        let (id, handle) = (id.to_string(), handle.clone());
        if let Some(j) = &shared.journal {
            j.fact("opened", &id, json!({"parentSessionId": parent}));
        }
        tokio::spawn(async move { shared.register(&id, &handle).await });
    }

    fn closed(&self, handle: &actor::SessionHandle) {
        let Some(shared) = self.0.upgrade() else {
            return;
        };
        let handle = handle.clone();
        tokio::spawn(async move { shared.forget(&handle).await });
    }
}

fn startup_failed(e: &StartupError) -> ErrorObject {
    let mut error = ErrorObject::new(j::COMMAND_FAILED, e.render().trim_end().to_string());
    error.data = Some(e.to_json());
    error
}

fn result(
    id: &str,
    status: Option<&actor::Status>,
    created: bool,
    warnings: &[String],
) -> OpenResult {
    let sum = status.map(|s| &s.summary);
    OpenResult {
        session_id: id.to_string(),
        epoch: status.map(|s| s.epoch.clone()),
        seq: status.map_or(0, |s| s.seq),
        created,
        warnings: warnings.to_vec(),
        header: sum.map(|sum| SessionHeader {
            kind: "session".into(),
            version: 3,
            id: sum.session_id.clone(),
            timestamp: sum.timestamp.clone(),
            cwd: sum.cwd.clone(),
            parent_session: sum.parent_session.clone(),
            worktree: sum.worktree.as_ref().map(|w| w.0.clone()),
            branch: sum.worktree.as_ref().map(|w| w.1.clone()),
        }),
        session_file: sum.and_then(|sum| sum.file.clone()),
        last_run: sum
            .and_then(|sum| sum.last_run.as_ref())
            .map(|run| LastRun {
                seq: run.seq,
                settled: run
                    .settled
                    .as_deref()
                    .and_then(|l| serde_json::from_str::<Value>(l).ok()),
            }),
    }
}

/// The environment of a session: the daemon's, overlaid with the client's, in the client's
/// directory.
fn session_env(shared: &Shared, cwd: &std::path::Path, sent: BTreeMap<String, String>) -> Env {
    let o = &shared.options;
    env_in(&o.vars, &o.keel_home, &o.temp_dir, cwd, sent)
}

/// The live session the flags name, if the daemon holds it: `--resume ID` / `--session-id
/// ID` / `--session ID` by id, `--session PATH`, `--resume PATH` and `--continue` by file.
async fn find_live(
    sessions: &std::collections::HashMap<String, actor::SessionHandle>,
    settings: &Settings,
    env: &Env,
) -> Option<(String, actor::SessionHandle)> {
    let by_id = settings
        .resume
        .as_deref()
        .filter(|r| !r.is_empty() && !looks_like_path(r))
        .or(settings.session_id.as_deref())
        .or(settings.session.as_deref().filter(|s| !looks_like_path(s)));
    if let Some(q) = by_id {
        let hits: Vec<_> = sessions
            .iter()
            .filter(|(id, _)| crate::kernel::session::id_matches(id, q))
            .collect();
        if let [(id, h)] = hits.as_slice() {
            return Some(((*id).clone(), (*h).clone()));
        }
    }
    let path = settings.session.as_deref().or(settings.resume.as_deref());
    let file = match (path, settings.continue_) {
        (Some(p), _) if looks_like_path(p) => Some(env.cwd.join(p)),
        (None, true) => {
            let dir = crate::setup::session_dir(settings, env);
            session::find_latest(&dir, &env.cwd.display().to_string())
        }
        _ => None,
    }?;
    let want = file.display().to_string();
    for (id, h) in sessions {
        if h.status().await.and_then(|s| s.summary.file) == Some(want.clone()) {
            return Some((id.clone(), h.clone()));
        }
    }
    None
}

fn looks_like_path(v: &str) -> bool {
    v.contains('/') || v.contains('\\') || v.ends_with(".jsonl")
}
