//! Starting the TUI: its session in the daemon (this machine's, or a remote host's over ssh),
//! found there when it is already live, or in this process (`--no-daemon`, no provider
//! configured yet, no daemon to be had).
#![deny(clippy::print_stdout, clippy::print_stderr)]

use crate::cli::args::Cli;
use crate::error::StartupError;
use crate::exit::Exit;
use crate::kernel::clock::Clock;
use crate::mode::Env;
use crate::output::Output;
use crate::setup;

/// The TUI: through the daemon unless `--no-daemon` (or `KEEL_NO_DAEMON=1`) asks for the
/// session in this process, or the daemon cannot be started (then it says why, once, and
/// runs here). A session live in a daemon is shown there.
pub async fn start_tui(
    cli: &Cli,
    env: &Env,
    clock: &Clock,
    remote: bool,
    out: &mut Output,
) -> Result<Exit, StartupError> {
    setup::check_session_flags(cli, true)?;
    if remote {
        // The remote host's configuration and trust apply there; nothing runs here.
        if let Some(exit) = attach_if_live(cli, env, out).await? {
            return Ok(exit);
        }
        return match start_tui_in_daemon(cli, env, out).await {
            InDaemon::Ran(result) => result,
            InDaemon::Unavailable(e) => Err(e),
        };
    }
    crate::front::trust::ask(cli, env, out).await;
    // No provider configured: the TUI opens in this process with the first-run panel (a
    // session without a model has nothing to keep alive in the daemon).
    let unconfigured = !setup::is_configured(cli, env);
    let in_process = unconfigured
        || !cli.daemon
            && (cli.no_daemon || env.vars.get("KEEL_NO_DAEMON").is_some_and(|v| v != "0"));
    let mut warnings = Vec::new();
    if !in_process {
        if let Some(exit) = attach_if_live(cli, env, out).await? {
            return Ok(exit);
        }
        match start_tui_in_daemon(cli, env, out).await {
            InDaemon::Ran(result) => return result,
            InDaemon::Unavailable(e) if cli.daemon => return Err(e),
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
    let mut host = match unconfigured {
        true => {
            let none = std::sync::Arc::new(setup::first_run::Unconfigured::new());
            setup::host_setup_with(cli, env, clock, true, none)?
        }
        false => setup::host_setup(cli, env, clock, true).await?,
    };
    host.warnings.extend(warnings);
    let prompt = cli.prompt.join(" ");
    let tui_setup = crate::front::tui::TuiSetup {
        host,
        pick_session: cli.resume.as_deref() == Some(""),
        keel_home: env.keel_home.clone(),
        prompt: (!prompt.trim().is_empty()).then_some(prompt),
        ambiguous_wide: ambiguous_wide(cli, env),
        no_color: env.no_color,
        dumb: env.dumb_terminal(),
        home: env.vars.get("HOME").map(std::path::PathBuf::from),
        welcome: unconfigured.then(setup::first_run::panel),
    };
    crate::front::tui::run(tui_setup, out).await
}

/// `--continue`, `--resume ID` or `--session` naming a session that is live in a running
/// daemon: the TUI attaches to it there (a session is live in one place only) instead of
/// failing on its lock. `None` when no daemon runs or it does not hold that session.
async fn attach_if_live(
    cli: &Cli,
    env: &Env,
    out: &mut Output,
) -> Result<Option<Exit>, StartupError> {
    let by_id = cli.resume.as_deref().filter(|r| !r.is_empty());
    let dial = crate::front::daemon::cli_dial(cli, env)?;
    // A remote daemon finds its own files (`session/open` with the flags).
    let file = match (&cli.session, cli.continue_) {
        _ if dial.remote().is_some() => None,
        (Some(p), _) if p.contains('/') || p.ends_with(".jsonl") => Some(env.cwd.join(p)),
        (None, true) => crate::kernel::session::find_latest(
            &setup::session_dir(cli, env),
            &env.cwd.display().to_string(),
        ),
        _ => None,
    };
    let by_id = by_id.or(cli.session.as_deref().filter(|_| file.is_none()));
    if by_id.is_none() && file.is_none() {
        return Ok(None);
    }
    let Ok(mut client) = crate::client::socket::Client::dial(&dial, false).await else {
        return Ok(None);
    };
    let Ok(status) = client.call("daemon/status", serde_json::json!({})).await else {
        return Ok(None);
    };
    drop(client);
    let want_file = file.map(|f| f.display().to_string());
    let live = status["sessions"].as_array().and_then(|list| {
        let hits: Vec<&serde_json::Value> = list
            .iter()
            .filter(|s| match (by_id, &want_file) {
                (Some(q), _) => s["sessionId"]
                    .as_str()
                    .is_some_and(|id| crate::kernel::session::id_matches(id, q)),
                (None, Some(f)) => s["sessionFile"].as_str() == Some(f.as_str()),
                (None, None) => false,
            })
            .collect();
        match hits.as_slice() {
            [one] => one["sessionId"].as_str().map(str::to_string),
            _ => None,
        }
    });
    let Some(session) = live else { return Ok(None) };
    let prompt = cli.prompt.join(" ");
    let reopen = crate::front::daemon::open_params_for(
        &dial,
        cli,
        env,
        crate::front::daemon::session_args(cli.argv.iter().cloned()),
        false,
    );
    let setup = crate::front::tui::client::AttachSetup {
        dial,
        session,
        prompt: (!prompt.trim().is_empty()).then_some(prompt),
        warnings: vec!["this session is live in the keel daemon: showing it there".into()],
        ambiguous_wide: ambiguous_wide(cli, env),
        reopen,
        env: env.clone(),
        session_dir: setup::session_dir(cli, env),
        pick_session: false,
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
async fn start_tui_in_daemon(cli: &Cli, env: &Env, out: &mut Output) -> InDaemon {
    let dial = match crate::front::daemon::cli_dial(cli, env) {
        Ok(d) => d,
        Err(e) => return InDaemon::Unavailable(e),
    };
    let conn = match crate::front::daemon::start(&dial, env).await {
        Ok(c) => c,
        Err(e) => return InDaemon::Unavailable(e),
    };
    let mut client = match crate::client::socket::Client::greet(conn, true, &dial).await {
        Ok(c) => c,
        Err(e) => return InDaemon::Unavailable(e.into()),
    };
    let pick_session = cli.resume.as_deref() == Some("");
    let mut args = crate::front::daemon::session_args(cli.argv.iter().cloned());
    if pick_session {
        args = without_empty_resume(args);
    }
    // Prompt words among the args are parsed and ignored there: the view sends the prompt.
    let prompt = cli.prompt.join(" ");
    let params = crate::front::daemon::open_params_for(&dial, cli, env, args, false);
    let opened = match client.call("session/open", params.clone()).await {
        Ok(o) => o,
        Err(e) => return InDaemon::Ran(Err(crate::front::client::open_failed_on(&dial, e))),
    };
    drop(client);
    let warnings = opened["warnings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|w| w.as_str().map(str::to_string))
        .collect();
    let setup = crate::front::tui::client::AttachSetup {
        dial,
        session: opened["sessionId"].as_str().unwrap_or_default().to_string(),
        prompt: (!prompt.trim().is_empty()).then_some(prompt),
        warnings,
        ambiguous_wide: ambiguous_wide(cli, env),
        reopen: params,
        env: env.clone(),
        session_dir: setup::session_dir(cli, env),
        pick_session,
    };
    InDaemon::Ran(crate::front::tui::client::run(setup, out).await)
}

/// The args without a `--resume`/`-r` that has no id (the picker runs in the view).
fn without_empty_resume(args: Vec<String>) -> Vec<String> {
    let mut out = Vec::new();
    let mut it = args.into_iter().peekable();
    while let Some(a) = it.next() {
        if a == "--resume" || a == "-r" {
            match it.peek() {
                Some(next) if !next.starts_with('-') => out.push(a),
                _ => {}
            }
            continue;
        }
        if a == "--resume=" {
            continue;
        }
        out.push(a);
    }
    out
}

/// Whether East-Asian ambiguous-width characters take two columns.
pub(crate) fn ambiguous_wide(cli: &Cli, env: &Env) -> bool {
    match cli.ambiguous_width {
        Some(w) => w == crate::cli::args::AmbiguousWidth::Wide,
        None => env
            .vars
            .get("KEEL_AMBIGUOUS_WIDTH")
            .is_some_and(|v| v.eq_ignore_ascii_case("wide")),
    }
}
