//! `keel --export SESSION [OUT.html]`: writes a stored session as a self-contained HTML page
//! and prints the path written. Needs no provider, model or daemon: it only reads the session
//! file (without locking it, so a session open elsewhere can be exported). stdout carries only
//! the path; warnings and errors go to stderr.

use std::path::{Path, PathBuf};

use crate::cli::Cli;
use crate::error::StartupError;
use crate::kernel::session::{self, SessionErrorKind, Store};
use crate::mode::Env;
use crate::output::Output;
use crate::setup;

/// Exports the session `args[0]` (a path, or an id or unique id prefix in this directory's
/// session dir) to `args[1]`, or to `keel-session-<session file name>.html` in the current
/// directory (pi's default name). Returns the path written (the caller prints it).
pub fn run(
    cli: &Cli,
    env: &Env,
    args: &[String],
    out: &mut Output,
) -> Result<PathBuf, StartupError> {
    let query = args.first().map(String::as_str).unwrap_or("");
    if query.trim().is_empty() {
        return Err(
            StartupError::usage("--export needs a session (a path or an id)")
                .hint("keel --export <ID|PATH> [OUT.html]"),
        );
    }
    let source = locate(cli, env, query)?;
    let (store, warnings) = Store::read(&source).map_err(|e| {
        StartupError::config(format!("cannot read the session {}", source.display()))
            .cause(e.message)
    })?;
    for w in warnings {
        out.err(&format!("Warning: {w}\n"));
    }
    let target = match args.get(1) {
        Some(p) => env.cwd.join(p),
        None => env.cwd.join(default_name(&source)),
    };
    let page = crate::host::html::store_page(&store);
    crate::kernel::private::write_file(&target, page.as_bytes()).map_err(|e| {
        StartupError::config(format!("cannot write {}", target.display())).cause(e.to_string())
    })?;
    Ok(target)
}

/// `keel-session-<file name without .jsonl>.html`.
fn default_name(source: &Path) -> String {
    let name = source
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "session".into());
    let stem = name.strip_suffix(".jsonl").unwrap_or(&name);
    format!("keel-session-{stem}.html")
}

/// A session file by path (it must exist) or by id / unique id prefix, as `--session` finds
/// one.
fn locate(cli: &Cli, env: &Env, query: &str) -> Result<PathBuf, StartupError> {
    if query.contains('/') || query.contains('\\') || query.ends_with(".jsonl") {
        let path = env.cwd.join(query);
        if !path.exists() {
            return Err(
                StartupError::config(format!("no session file at {}", path.display()))
                    .hint("pass a session file path or id (keel --resume lists them)"),
            );
        }
        setup::require_regular_file(&path, "the session file")?;
        return Ok(path);
    }
    let dir = setup::session_dir(cli, env);
    session::resolve(&dir, query).map_err(|e| {
        let err = StartupError::config(e.message);
        match e.kind {
            SessionErrorKind::NotFound | SessionErrorKind::Ambiguous => {
                err.hint("pass a longer id prefix, or a session file path")
            }
            _ => err,
        }
    })
}
