//! The composition root: parses flags, resolves the mode, hands the run to its front end
//! (print and JSON: `front::run`, in this process or through the daemon), and returns the
//! `Exit`. It never prints
//! directly (all output goes through `Output`) and never exits the process (main does).

use clap::Parser;

use crate::cli::args::Cli;
use crate::error::StartupError;
use crate::exit::Exit;
use crate::front::json::result_line;
use crate::front::RunSummary;
use crate::kernel::clock::Clock;
use crate::mode::{self, Env, Mode};
use crate::output::{ColorChoice, Output};
use crate::setup;

/// Runs keel with the process's arguments and streams; returns how it ended. A panic anywhere
/// on the main thread becomes `Exit::Internal` (70) with its message on stderr.
pub fn main() -> Exit {
    std::panic::set_hook(Box::new(|info| {
        // The TUI's terminal modes go first, so the message is readable and the shell usable.
        crate::front::tui::tty::restore();
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        let place = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        Output::stdio(ColorChoice::Never).err(&format!(
            "Error: internal error (a bug in keel): {msg}{place}\nHint: please report it with the command that caused it\n"
        ));
    }));
    std::panic::catch_unwind(main_inner).unwrap_or(Exit::Internal)
}

/// Parses the command line once (the only read of `std::env::args()`) and runs what it names.
fn main_inner() -> Exit {
    use crate::cli::{Command, DebugCommand, Keel};
    let args = crate::cli::args::normalize(std::env::args());
    let keel = match Keel::try_parse_from(&args) {
        Ok(keel) => keel,
        Err(e) => return clap_exit(e, &args),
    };
    match keel.command {
        None => {
            let mut cli = keel.run;
            cli.argv = args.into_iter().skip(1).collect();
            run_main(cli)
        }
        Some(Command::Daemon(command)) => daemon_main(command),
        Some(Command::Mcp(command)) => mcp_main(command),
        Some(Command::Debug { command }) => match command {
            DebugCommand::Prompt { run } => debug_main(*run),
            DebugCommand::Unknown(words) => clap_exit(crate::cli::unknown_debug(&words), &args),
        },
    }
}

/// `keel [FLAGS] [PROMPT]…`: a run, in the mode the flags and terminal call for.
fn run_main(cli: Cli) -> Exit {
    let Some(env) = detect_env() else {
        return Exit::Config;
    };
    let mut out = Output::stdio(mode::color(&cli, &env));
    init_logging(&env, mode::resolve(&cli, &env) == Mode::Tui);
    let Some(runtime) = runtime(&mut out) else {
        return Exit::Internal;
    };
    runtime.block_on(run(cli, env, &mut out))
}

/// The environment, or `None` after saying why it cannot be read (exit 3).
fn detect_env() -> Option<Env> {
    match Env::detect() {
        Ok(env) => Some(env),
        Err(e) => {
            Output::stdio(ColorChoice::Never).err(&e.render());
            None
        }
    }
}

/// The single-threaded runtime every mode runs on, or `None` after saying why not.
fn runtime(out: &mut Output) -> Option<tokio::runtime::Runtime> {
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

/// `keel debug prompt [--json] [run flags…]`: the system prompt and tools a run with those
/// flags would send, and the context files behind it.
fn debug_main(cli: Cli) -> Exit {
    let mut out = Output::stdio(ColorChoice::Never);
    let Some(env) = detect_env() else {
        return Exit::Config;
    };
    let Some(rt) = runtime(&mut out) else {
        return Exit::Internal;
    };
    match rt.block_on(crate::setup::debug_prompt(&cli, &env)) {
        Ok(text) => match out.out(text.as_bytes()).and_then(|_| out.flush()) {
            Ok(()) => Exit::Success,
            Err(_) => out.stdout_exit(),
        },
        Err(e) => {
            out.err(&e.render());
            e.exit()
        }
    }
}

/// `keel mcp list [--json]` and `keel mcp tools NAME`: the configured MCP servers.
fn mcp_main(cli: crate::cli::McpCli) -> Exit {
    let Some(env) = detect_env() else {
        return Exit::Config;
    };
    let mut out = Output::stdio(ColorChoice::Never);
    init_logging(&env, false);
    let Some(runtime) = runtime(&mut out) else {
        return Exit::Internal;
    };
    match runtime.block_on(crate::setup::mcp::command(&cli, &env)) {
        Ok((text, ok)) => match out.out(text.as_bytes()).and_then(|_| out.flush()) {
            Ok(()) if ok => Exit::Success,
            Ok(()) => Exit::Failed,
            Err(_) => out.stdout_exit(),
        },
        Err(e) => {
            out.err(&e.render());
            e.exit()
        }
    }
}

/// `keel daemon …`, `keel ps`, `keel attach` and `keel schedule …`.
fn daemon_main(command: crate::cli::DaemonTop) -> Exit {
    let Some(env) = detect_env() else {
        return Exit::Config;
    };
    let mut out = Output::stdio(ColorChoice::Never);
    // `keel attach` draws the TUI: logs go to the log file, never the screen.
    let tui = matches!(command, crate::cli::DaemonTop::Attach { .. });
    init_logging(&env, tui);
    let Some(runtime) = runtime(&mut out) else {
        return Exit::Internal;
    };
    match runtime.block_on(crate::front::daemon::run(command, &env, &mut out)) {
        Ok(exit) => exit,
        Err(e) => {
            out.err(&e.render());
            e.exit()
        }
    }
}

/// A parse that ended in help, a version or a usage error: `args` is the command line it read.
fn clap_exit(e: clap::Error, args: &[String]) -> Exit {
    use clap::error::ErrorKind;
    let mut out = Output::stdio(ColorChoice::Never);
    let text = e.render().to_string();
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            match out.out(text.as_bytes()).and_then(|_| out.flush()) {
                Ok(()) => Exit::Success,
                Err(_) => out.stdout_exit(),
            }
        }
        _ => {
            // A script that asked for JSON still gets its one result line.
            if json_requested(args.iter().skip(1)) {
                let line = result_line(
                    &RunSummary::default(),
                    Exit::Usage,
                    None,
                    0,
                    Some(("usage", text.lines().next().unwrap_or("bad arguments"))),
                );
                let _ = out.out(line.as_bytes()).and_then(|_| out.flush());
            }
            out.err(&text);
            Exit::Usage
        }
    }
}

/// Whether raw arguments ask for JSON mode (used only when flag parsing failed).
fn json_requested<'a>(args: impl Iterator<Item = &'a String>) -> bool {
    let mut prev_mode = false;
    for a in args {
        if a == "--" {
            return false;
        }
        if a == "--json" || a == "--mode=json" || (prev_mode && a == "json") {
            return true;
        }
        prev_mode = a == "--mode";
    }
    false
}

/// Logs go to stderr, except in the TUI, which owns the screen: there they go to
/// `$KEEL_HOME/logs/keel.log` (nowhere, if that file cannot be opened).
fn init_logging(env: &Env, tui: bool) {
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

pub async fn run(cli: Cli, env: Env, out: &mut Output) -> Exit {
    let mode = mode::resolve(&cli, &env);
    if env.test_panic {
        panic!("KEEL_TEST_PANIC is set");
    }
    let clock = Clock::new(env.fixed_clock, env.seed);
    let started = clock.now_ms();
    match start(&cli, &env, mode, &clock, out).await {
        Ok(exit) => exit,
        Err(e) => {
            if mode == Mode::Json {
                let summary = RunSummary::default();
                let dur = (clock.now_ms() - started).max(0) as u64;
                let line = result_line(
                    &summary,
                    e.exit(),
                    None,
                    dur,
                    Some((e.kind_word(), &e.message)),
                );
                let _ = out.out(line.as_bytes()).and_then(|_| out.flush());
            }
            out.err(&e.render());
            e.exit()
        }
    }
}

async fn start(
    cli: &Cli,
    env: &Env,
    mode: Mode,
    clock: &Clock,
    out: &mut Output,
) -> Result<Exit, StartupError> {
    if let Some(args) = &cli.export {
        let path = crate::front::export::run(cli, env, args, out)?;
        let line = format!("{}\n", path.display());
        return Ok(match out.out(line.as_bytes()).and_then(|_| out.flush()) {
            Ok(()) => Exit::Success,
            Err(_) => out.stdout_exit(),
        });
    }
    if let Some(pattern) = &cli.list_models {
        let table = setup::model_list(cli, env, pattern, mode == Mode::Json).await?;
        return Ok(match out.out(table.as_bytes()).and_then(|_| out.flush()) {
            Ok(()) => Exit::Success,
            Err(_) => out.stdout_exit(),
        });
    }
    if mode == Mode::Acp {
        // ACP sessions ask for approvals unless `--permission` was given (clap cannot tell).
        let explicit = cli
            .argv
            .iter()
            .any(|a| a == "--permission" || a.starts_with("--permission="));
        return crate::front::acp::serve(cli, env, clock, explicit, out).await;
    }
    // `--remote` (or KEEL_REMOTE) means the daemon over there: never a session here.
    let dial = crate::front::daemon::cli_dial(cli, env)?;
    let remote = dial.remote().is_some();
    if mode == Mode::Rpc {
        if cli.daemon || remote {
            setup::check_session_flags(cli, false)?;
            return crate::front::rpc::daemon::serve(cli, env, out).await;
        }
        return start_rpc(cli, env, clock, out).await;
    }
    if mode == Mode::Tui {
        return crate::front::tui::start::start_tui(cli, env, clock, remote, out).await;
    }
    let daemon = (cli.daemon || remote).then_some(dial);
    crate::front::run::run(cli, env, mode, clock, daemon, out).await
}

/// RPC mode: the same startup as the other modes (flags, model, session), then the request
/// loop. Nothing is written to stdout before the first request; warnings go to stderr and,
/// after the first request, to the client as `notify`.
async fn start_rpc(
    cli: &Cli,
    env: &Env,
    clock: &Clock,
    out: &mut Output,
) -> Result<Exit, StartupError> {
    setup::check_session_flags(cli, false)?;
    if !cli.prompt.is_empty() {
        return Err(StartupError::usage(
            "rpc mode takes no prompt arguments; send {\"type\":\"prompt\",\"message\":...} on stdin",
        ));
    }
    let rpc_setup = setup::host_setup(cli, env, clock, true).await?;
    for w in &rpc_setup.warnings {
        out.err(&format!("Warning: {w}\n"));
    }
    crate::front::rpc::serve(rpc_setup, out).await
}
