//! `keel --export SESSION [OUT.html]`: writes a stored session as a self-contained HTML page
//! and prints the path written. Needs no provider, model or daemon: it only reads the session
//! file (without locking it, so a session open elsewhere can be exported). stdout carries only
//! the path; warnings and errors go to stderr.

use std::path::PathBuf;

use crate::error::StartupError;
use crate::kernel::session::Store;
use crate::mode::Env;
use crate::output::Output;
use crate::setup;

/// Exports the session `args[0]` (a path, or an id or unique id prefix in this directory's
/// session dir) to `args[1]`, or to `keel-session-<session file name>.html` in the current
/// directory (pi's default name). Returns the path written (the caller prints it).
pub fn run(
    settings: &setup::Settings,
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
    let source = setup::locate(&setup::session_dir(settings, env), env, query)?;
    let (store, warnings) = Store::read(&source).map_err(|e| {
        StartupError::config(format!("cannot read the session {}", source.display()))
            .cause(e.message)
    })?;
    for w in warnings {
        out.err(&format!("Warning: {w}\n"));
    }
    let target = match args.get(1) {
        Some(p) => env.cwd.join(p),
        None => env.cwd.join(crate::host::html::default_name(&source)),
    };
    let page = crate::host::html::store_page(&store);
    crate::kernel::private::write_file(&target, page.as_bytes()).map_err(|e| {
        StartupError::config(format!("cannot write {}", target.display())).cause(e.to_string())
    })?;
    Ok(target)
}
