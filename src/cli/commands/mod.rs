//! One file per subcommand of `keel` (as jj's `commands/`): each holds its clap arguments and
//! its `run`, which returns the `Exit`. A run (the default command) is still `app::run_main`,
//! handed to [`crate::cli::main`]. What every command shares is here: the environment, the
//! logs, the runtime, and how an error ends (`Error:`/`Hint:` lines on stderr, its exit code).

pub mod agents;
pub mod attach;
pub mod completions;
pub mod config;
pub mod daemon;
pub mod debug;
pub mod hooks;
pub mod journal_flags;
pub mod lsp;
pub mod man;
pub mod mcp;
pub mod ps;
pub mod rewind;
pub mod sandbox;
pub mod sandbox_net;
pub mod schedule;
pub mod web;
pub mod worktree;

use crate::error::StartupError;
use crate::exit::Exit;
use crate::mode::Env;
use crate::output::{ColorChoice, Output};

/// Where a subcommand's logs go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Logs {
    /// Nowhere (the command's stdout and stderr are all it says).
    Off,
    /// stderr.
    Stderr,
    /// `$KEEL_HOME/logs/keel.log`: the command draws the TUI.
    File,
}

/// Runs a subcommand's `body` on the single-threaded runtime with the environment and the
/// process's stdout and stderr (no colour); an error it returns is printed on stderr and ends
/// with its exit code. An environment that cannot be read exits 3 before `body` runs.
pub(crate) fn run<F>(logs: Logs, body: F) -> Exit
where
    F: AsyncFnOnce(&Env, &mut Output) -> Result<Exit, StartupError>,
{
    let Some(env) = detect_env() else {
        return Exit::Config;
    };
    let mut out = Output::stdio(ColorChoice::Never);
    if logs != Logs::Off {
        init_logging(&env, logs == Logs::File);
    }
    let Some(runtime) = runtime(&mut out) else {
        return Exit::Internal;
    };
    match runtime.block_on(body(&env, &mut out)) {
        Ok(exit) => exit,
        Err(e) => {
            out.err(&e.render());
            e.exit()
        }
    }
}

/// Writes `text` on stdout: success, or SIGPIPE's exit when stdout took no more bytes.
pub(crate) fn print(out: &mut Output, text: &str) -> Result<Exit, StartupError> {
    match out.out(text.as_bytes()).and_then(|_| out.flush()) {
        Ok(()) => Ok(Exit::Success),
        Err(_) => Ok(Exit::Signal(crate::exit::SIGPIPE)),
    }
}

/// The environment, or `None` after saying why it cannot be read (exit 3).
pub(crate) fn detect_env() -> Option<Env> {
    match Env::detect() {
        Ok(env) => Some(env),
        Err(e) => {
            Output::stdio(ColorChoice::Never).err(&e.render());
            None
        }
    }
}

/// The single-threaded runtime every mode runs on, or `None` after saying why not.
pub(crate) fn runtime(out: &mut Output) -> Option<tokio::runtime::Runtime> {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => Some(rt),
        Err(e) => {
            out.err(&format!("Error: cannot start the async runtime: {e}\n"));
            None
        }
    }
}

/// Logs go to stderr, except in the TUI, which owns the screen: there they go to
/// `$KEEL_HOME/logs/keel.log` (nowhere, if that file cannot be opened).
pub(crate) fn init_logging(env: &Env, tui: bool) {
    // rmcp logs every failed connection at ERROR; keel reports those itself, once.
    let mut filter = match env.log_filter.contains("rmcp") {
        true => env.log_filter.clone(),
        false => format!("{},rmcp=off", env.log_filter),
    };
    // Below info, async-nats logs its server's address in Debug form, the journal URL's
    // password included: keel's logs never show a password (unless async_nats is asked for).
    let verbose = filter
        .split(',')
        .any(|d| matches!(d.trim().to_lowercase().as_str(), "debug" | "trace"));
    if verbose && !filter.contains("async_nats") {
        filter.push_str(",async_nats=info");
    }
    let filter = tracing_subscriber::EnvFilter::try_new(filter.as_str())
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_target(false);
    if tui {
        let dir = env.keel_home.join("logs");
        let file = crate::kernel::private::create_dir_all(&dir)
            .and_then(|_| crate::kernel::private::append_file(&dir.join("keel.log")));
        let _ = match file {
            Ok(f) => builder.with_writer(std::sync::Mutex::new(f)).try_init(),
            Err(_) => builder.with_writer(std::io::sink).try_init(),
        };
        return;
    }
    let _ = builder
        .with_writer(crate::output::log_writer)
        .without_time()
        .try_init();
}
