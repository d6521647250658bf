//! The session a run opens: where a directory's sessions live, finding one by id or path, and
//! opening it new, continued, resumed or forked, with errors that say where sessions are kept.

use std::path::{Path, PathBuf};

use super::{OpenedSession, Settings};
use crate::error::StartupError;
use crate::kernel::clock::Clock;
use crate::kernel::session::{self, SessionErrorKind, SessionHeader, Store};
use crate::mode::Env;

pub fn session_dir(settings: &Settings, env: &Env) -> PathBuf {
    session_dir_in(settings.session_dir.as_deref(), env)
}

/// The directory sessions of `env.cwd` live in, `--session-dir` (`dir`) if given.
pub fn session_dir_in(dir: Option<&Path>, env: &Env) -> PathBuf {
    match dir {
        Some(d) => env.cwd.join(d),
        None => session::session_dir(&env.keel_home, &env.cwd),
    }
}

fn new_header(clock: &Clock, env: &Env, id: Option<String>) -> SessionHeader {
    SessionHeader {
        id: id.unwrap_or_else(|| clock.session_id()),
        timestamp: clock.now_iso(),
        cwd: env.cwd.display().to_string(),
        parent_session: None,
    }
}

fn looks_like_path(v: &str) -> bool {
    v.contains('/') || v.contains('\\') || v.ends_with(".jsonl")
}

/// A session error as a startup error, with the hint that fits it (sessions are kept per
/// directory, a longer prefix, …).
pub(crate) fn session_error(e: session::SessionError) -> StartupError {
    session_error_for(e, None)
}

/// A session error; for `Locked`, the hint names commands that work on that session.
fn session_error_for(e: session::SessionError, query: Option<&str>) -> StartupError {
    let hint = match e.kind {
        SessionErrorKind::Locked => Some(match query {
            Some(q) => format!(
                "wait for the other keel process to end, or branch off a copy: keel --fork {q}; \
                 if a keel daemon holds it, use it there: keel --daemon --resume {q} (with -p, --json or --mode rpc)"
            ),
            None => "wait for the other keel process to end, or branch off a copy with \
                     keel --fork <ID>"
                .to_string(),
        }),
        SessionErrorKind::NotFound => Some(
            "sessions are kept per directory: run keel in the session's own directory, or pass \
             the session file's path"
                .to_string(),
        ),
        SessionErrorKind::Ambiguous => {
            Some("pass a longer id prefix, or a session file path".to_string())
        }
        _ => None,
    };
    let err = StartupError::config(e.message);
    match hint {
        Some(h) => err.hint(h),
        None => err,
    }
}

/// Finds a session file by path or id (exact, a unique prefix or a unique end).
pub fn locate(dir: &Path, env: &Env, query: &str) -> Result<PathBuf, StartupError> {
    if looks_like_path(query) {
        let p = env.cwd.join(query);
        if p.exists() {
            require_regular_file(&p, "the session file")?;
        }
        return if p.is_file() {
            Ok(p)
        } else {
            Err(StartupError::config(format!(
                "no session file at {}",
                p.display()
            )))
        };
    }
    session::resolve(dir, query).map_err(session_error)
}

fn open(path: &Path, clock: &Clock, query: &str) -> Result<OpenedSession, StartupError> {
    let (store, warnings) =
        Store::resume(path, clock).map_err(|e| session_error_for(e, Some(query)))?;
    Ok(OpenedSession {
        store,
        is_new: false,
        warnings,
    })
}

fn fresh(store: Store) -> OpenedSession {
    OpenedSession {
        store,
        is_new: true,
        warnings: Vec::new(),
    }
}

/// Opens or creates the session the flags ask for (`DESIGN.md` §3, §6), with a warning when
/// keel's directories are readable by other users.
pub fn open_session(
    settings: &Settings,
    env: &Env,
    clock: &Clock,
) -> Result<OpenedSession, StartupError> {
    let mut opened = open_session_inner(settings, env, clock)?;
    let sessions = env.keel_home.join("sessions");
    let logs = env.keel_home.join("logs");
    let dirs = [env.keel_home.as_path(), sessions.as_path(), logs.as_path()];
    if let Some(w) = crate::kernel::private::loose_dir_warning(&dirs) {
        opened.warnings.insert(0, w);
    }
    Ok(opened)
}

fn open_session_inner(
    settings: &Settings,
    env: &Env,
    clock: &Clock,
) -> Result<OpenedSession, StartupError> {
    let dir = session_dir(settings, env);
    if settings.no_session {
        return Ok(fresh(Store::in_memory(new_header(clock, env, None))));
    }
    if let Some(q) = &settings.session {
        if looks_like_path(q) {
            let p = env.cwd.join(q);
            if !p.exists() {
                // Claimed at once (created and locked): two processes starting with the same
                // new path get one session and one "in use" error, never two conversations
                // in one file or one that is silently not saved.
                let store = Store::create(p, new_header(clock, env, None))
                    .map_err(|e| session_error_for(e, Some(q)))?;
                return Ok(fresh(store));
            }
            require_regular_file(&p, "the --session file")?;
            return open(&p, clock, q);
        }
        return open(&locate(&dir, env, q)?, clock, q);
    }
    if let Some(q) = settings.resume.as_deref().filter(|q| !q.is_empty()) {
        return open(&locate(&dir, env, q)?, clock, q);
    }
    if let Some(id) = &settings.session_id {
        return open_or_create_id(&dir, env, clock, id);
    }
    if let Some(q) = &settings.fork {
        // Forking only reads the source, so a session another process holds can be forked.
        let source = locate(&dir, env, q)?;
        let (src, warnings) = Store::read(&source).map_err(session_error)?;
        let mut header = new_header(clock, env, None);
        header.parent_session = Some(source.display().to_string());
        let path = dir.join(session::file_name(&header));
        let mut store = src.fork_to(path, header).map_err(session_error)?;
        let mut warnings = warnings;
        warnings.extend(
            store
                .close_unfinished_tool_calls(clock)
                .map_err(session_error)?,
        );
        return Ok(OpenedSession {
            store,
            is_new: false,
            warnings,
        });
    }
    if settings.continue_ {
        if let Some(p) = session::find_latest(&dir, &env.cwd.display().to_string()) {
            return open(&p, clock, &p.display().to_string());
        }
    }
    let header = new_header(clock, env, None);
    let path = dir.join(session::file_name(&header));
    Ok(fresh(Store::new_file(path, header)))
}

/// `--session-id ID`: opens this directory's session with that id, or creates it. The lookup
/// and the creation happen under an exclusive lock on the directory, so two processes
/// starting with the same new id get one file: the second finds it and is told it is in use.
fn open_or_create_id(
    dir: &Path,
    env: &Env,
    clock: &Clock,
    id: &str,
) -> Result<OpenedSession, StartupError> {
    let io = |what: &str, e: std::io::Error| {
        StartupError::config(format!("cannot {what} {}", dir.display())).cause(e.to_string())
    };
    crate::kernel::private::create_dir_all(dir).map_err(|e| io("create", e))?;
    let guard = std::fs::File::open(dir).map_err(|e| io("open", e))?;
    guard.lock().map_err(|e| io("lock", e))?;
    if let Some(found) = session::list(dir).into_iter().find(|s| s.id == id) {
        return open(&found.path, clock, id);
    }
    let header = new_header(clock, env, Some(id.to_string()));
    let path = dir.join(session::file_name(&header));
    let store = Store::create(path, header).map_err(|e| session_error_for(e, Some(id)))?;
    drop(guard);
    Ok(fresh(store))
}

/// Refuses a path that is not a regular file (after following symlinks) before anything opens
/// it: opening a FIFO blocks until a writer appears, and reading `/dev/zero` never ends.
pub fn require_regular_file(path: &Path, what: &str) -> Result<(), StartupError> {
    let meta = std::fs::metadata(path).map_err(|e| {
        StartupError::config(format!("cannot read {what} {}", path.display())).cause(e.to_string())
    })?;
    match crate::kernel::tool::file::irregular_kind(&meta) {
        None => Ok(()),
        Some(kind) => Err(StartupError::config(format!(
            "{what} {} is {kind}, not a regular file",
            path.display()
        ))
        .hint("pass the path of a regular file")),
    }
}
