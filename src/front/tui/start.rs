//! Starting the TUI: its session in the daemon (this machine's, or a remote host's over ssh),
//! found there when it is already live, or in this process (`--no-daemon`, no provider
//! configured yet, no daemon to be had).
#![deny(clippy::print_stdout, clippy::print_stderr)]

use crate::error::StartupError;
use crate::exit::Exit;
use crate::front::invocation::Invocation;
use crate::kernel::clock::Clock;
use crate::mode::Env;
use crate::output::Output;
use crate::setup;

/// The TUI: through the daemon unless `--no-daemon` (or `KEEL_NO_DAEMON=1`) asks for the
/// session in this process, or the daemon cannot be started (then it says why, once, and
/// runs here). A session live in a daemon is shown there.
pub async fn start_tui(
    inv: &Invocation,
    settings: &setup::Settings,
    env: &Env,
    clock: &Clock,
    remote: bool,
    out: &mut Output,
) -> Result<Exit, StartupError> {
    setup::check_session_flags(settings, true)?;
    if remote {
        // The remote host's configuration and trust apply there; nothing runs here.
        if let Some(exit) = attach_if_live(inv, settings, env, out).await? {
            return Ok(exit);
        }
        return match start_tui_in_daemon(inv, settings, env, out).await {
            InDaemon::Ran(result) => result,
            InDaemon::Unavailable(e) => Err(e),
        };
    }
    crate::front::trust::ask(settings, env, out).await;
    // No provider configured: the TUI opens in this process with the first-run panel (a
    // session without a model has nothing to keep alive in the daemon).
    let unconfigured = !setup::is_configured(settings, env);
    let in_process = unconfigured
        || !inv.daemon
            && (inv.no_daemon || env.vars.get("KEEL_NO_DAEMON").is_some_and(|v| v != "0"));
    let mut warnings = Vec::new();
    if !in_process {
        if let Some(exit) = attach_if_live(inv, settings, env, out).await? {
            return Ok(exit);
        }
        match start_tui_in_daemon(inv, settings, env, out).await {
            InDaemon::Ran(result) => return result,
            InDaemon::Unavailable(e) if inv.daemon => return Err(e),
            InDaemon::Unavailable(e) => {
                tracing::warn!("running the TUI in-process: {}", e.message);
                warnings.push(format!(
                    "the keel daemon cannot be started ({}): this session runs in this \
                     process and ends with it",
                    e.message
                ));
            }
        }
    }
    // `-w` in this process: the session is set up in its worktree.
    let entered = setup::worktree::enter(settings, env, crate::mode::Mode::Tui)?;
    let (settings, env) = match &entered {
        Some((s, e)) => (s, e),
        None => (settings, env),
    };
    let mut host = match unconfigured {
        true => {
            let none = std::sync::Arc::new(setup::first_run::Unconfigured::new());
            setup::host_setup_with(settings, env, clock, true, none)?
        }
        false => setup::host_setup(settings, env, clock, true).await?,
    };
    host.warnings.extend(warnings);
    let prompt = inv.prompt.join(" ");
    let tui_setup = crate::front::tui::TuiSetup {
        host,
        pick_session: settings.resume.as_deref() == Some(""),
        keel_home: env.keel_home.clone(),
        prompt: (!prompt.trim().is_empty()).then_some(prompt),
        ambiguous_wide: ambiguous_wide(inv, env),
        no_color: env.no_color,
        dumb: env.dumb_terminal(),
        home: env.vars.get("HOME").map(std::path::PathBuf::from),
        welcome: unconfigured.then(setup::first_run::panel),
        hooks_from: Some((inv.spec.clone(), env.clone())),
        notify: crate::front::tui::notify::channel(settings),
        status_line: crate::setup::status_line::configured(settings, env),
    };
    crate::front::tui::run(tui_setup, out).await
}

/// `--continue`, `--resume ID` or `--session` naming a session that is live in a running
/// daemon: the TUI attaches to it there (a session is live in one place only) instead of
/// failing on its lock. `None` when no daemon runs or it does not hold that session.
async fn attach_if_live(
    inv: &Invocation,
    settings: &setup::Settings,
    env: &Env,
    out: &mut Output,
) -> Result<Option<Exit>, StartupError> {
    let by_id = settings.resume.as_deref().filter(|r| !r.is_empty());
    let dial = inv.dial()?;
    // A remote daemon finds its own files (`session/open` with the spec).
    let file = match (&settings.session, settings.continue_) {
        _ if dial.remote().is_some() => None,
        (Some(p), _) if p.contains('/') || p.ends_with(".jsonl") => Some(env.cwd.join(p)),
        (None, true) => crate::kernel::session::find_latest(
            &setup::session_dir(settings, env),
            &env.cwd.display().to_string(),
        ),
        _ => None,
    };
    let by_id = by_id.or(settings.session.as_deref().filter(|_| file.is_none()));
    if by_id.is_none() && file.is_none() {
        return Ok(None);
    }
    let Ok(mut client) = crate::client::socket::Client::dial(&dial, false).await else {
        return Ok(None);
    };
    let status =
        client.call::<crate::wire::protocol::daemon::Status>(&crate::wire::protocol::NoParams);
    let Ok(status) = status.await else {
        return Ok(None);
    };
    drop(client);
    let want_file = file.map(|f| f.display().to_string());
    let hits: Vec<_> = status
        .sessions
        .iter()
        .filter(|s| match (by_id, &want_file) {
            (Some(q), _) => crate::kernel::session::id_matches(&s.session_id, q),
            (None, Some(f)) => s.session_file.as_ref() == Some(f),
            (None, None) => false,
        })
        .collect();
    let live = match hits.as_slice() {
        [one] => Some(one.session_id.clone()),
        _ => None,
    };
    let Some(session) = live else { return Ok(None) };
    let prompt = inv.prompt.join(" ");
    let reopen = inv.open_params(&dial, env, inv.spec.clone(), false);
    let status_line = status_line(&dial, settings, env);
    let setup = crate::front::tui::client::AttachSetup {
        dial,
        session,
        prompt: (!prompt.trim().is_empty()).then_some(prompt),
        warnings: vec!["this session is live in the keel daemon: showing it there".into()],
        ambiguous_wide: ambiguous_wide(inv, env),
        reopen,
        env: env.clone(),
        session_dir: setup::session_dir(settings, env),
        pick_session: false,
        notify: crate::front::tui::notify::channel(settings),
        status_line,
    };
    crate::front::tui::client::run(setup, out).await.map(Some)
}

/// How showing the TUI's session in the daemon went.
enum InDaemon {
    /// The TUI ran (or the session could not be opened there: its startup error).
    Ran(Result<Exit, StartupError>),
    /// No daemon could be reached or started.
    Unavailable(StartupError),
}

/// The TUI with its session in the daemon: opened (or found) there with this command line's
/// flags, then shown by the attached client. `--resume` without an id opens a new session
/// and the picker, as in-process.
async fn start_tui_in_daemon(
    inv: &Invocation,
    settings: &setup::Settings,
    env: &Env,
    out: &mut Output,
) -> InDaemon {
    let dial = match inv.dial() {
        Ok(d) => d,
        Err(e) => return InDaemon::Unavailable(e),
    };
    let conn = match crate::client::open::start(&dial, env).await {
        Ok(c) => c,
        Err(e) => return InDaemon::Unavailable(e),
    };
    let mut client = match crate::client::socket::Client::greet(conn, true, &dial).await {
        Ok(c) => c,
        Err(e) => return InDaemon::Unavailable(e.into()),
    };
    let pick_session = settings.resume.as_deref() == Some("");
    let mut spec = inv.spec.clone();
    if pick_session {
        // The picker runs in the view: a new session is opened meanwhile.
        spec.session = crate::wire::protocol::spec::SessionPick::New;
    }
    let prompt = inv.prompt.join(" ");
    let params = inv.open_params(&dial, env, spec, false);
    let opened = client.call::<crate::wire::protocol::session::Open>(&params);
    let opened = match opened.await {
        Ok(o) => o,
        Err(e) => return InDaemon::Ran(Err(crate::front::client::open_failed_on(&dial, e))),
    };
    drop(client);
    let warnings = opened.warnings;
    let status_line = status_line(&dial, settings, env);
    let setup = crate::front::tui::client::AttachSetup {
        dial,
        session: opened.session_id,
        prompt: (!prompt.trim().is_empty()).then_some(prompt),
        warnings,
        ambiguous_wide: ambiguous_wide(inv, env),
        reopen: params,
        env: env.clone(),
        session_dir: setup::session_dir(settings, env),
        pick_session,
        notify: crate::front::tui::notify::channel(settings),
        status_line,
    };
    InDaemon::Ran(crate::front::tui::client::run(setup, out).await)
}

/// The `statusLine` a window runs: none for a session on a remote host (its settings and
/// trust are there).
fn status_line(
    dial: &crate::client::dial::Dial,
    settings: &setup::Settings,
    env: &Env,
) -> Option<crate::setup::status_line::StatusCommand> {
    match dial.remote() {
        Some(_) => None,
        None => crate::setup::status_line::configured(settings, env),
    }
}

/// Whether East-Asian ambiguous-width characters take two columns.
pub(crate) fn ambiguous_wide(inv: &Invocation, env: &Env) -> bool {
    inv.ambiguous_wide
        .unwrap_or_else(|| crate::front::daemon::ambiguous_wide(env))
}
