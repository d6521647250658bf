//! The composition root of a run: given its flags (parsed by `cli`), resolves the mode,
//! builds the kernel, session store and projector, pumps events until the run settles, and
//! returns the `Exit`. It never prints directly (all output goes through `Output`) and never
//! exits the process (main does).

use crate::cli::args::Cli;
use crate::cli::commands::{detect_env, init_logging, runtime};
use crate::error::StartupError;
use crate::exit::{Exit, SIGPIPE};
use crate::front::json::{header_line, result_line, JsonProjector};
use crate::front::print::PrintProjector;
use crate::front::{feed_event, Projector, RunSummary};
use crate::kernel::agent::AgentSession;
use crate::kernel::bus::Bus;
use crate::kernel::clock::Clock;
use crate::kernel::op::UserInput;
use crate::kernel::recorder;
use crate::mode::{self, Env, Mode};
use crate::output::{ColorChoice, Output, StdoutFailure};
use crate::setup;
use crate::signals::Signals;

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

/// Reads the command line (the only read of `std::env::args()`) and runs what it names.
fn main_inner() -> Exit {
    crate::cli::main(std::env::args(), run_main)
}

/// `keel [FLAGS] [PROMPT]…`: a run, in the mode the flags and terminal call for.
pub(crate) fn run_main(cli: Cli) -> Exit {
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
    let remote = crate::client::open::cli_dial(cli, env)?.remote().is_some();
    if mode == Mode::Rpc {
        return crate::front::rpc::run(cli, env, clock, remote, out).await;
    }
    if (cli.daemon || remote) && mode != Mode::Tui {
        return crate::front::client::run(cli, env, mode, clock, out).await;
    }
    if mode == Mode::Tui {
        return crate::front::tui::start::start_tui(cli, env, clock, remote, out).await;
    }
    setup::check_session_flags(cli, false)?;
    let provider = setup::provider(cli, env).await?;
    let (mut config, warnings, _skills) = setup::agent_config(cli, env, false)?;
    for w in warnings
        .into_iter()
        .chain(setup::clamp_thinking(provider.as_ref(), &mut config))
    {
        out.err(&format!("Warning: {w}\n"));
    }
    // Installed before stdin is read: a signal while keel waits for it ends the run like any other.
    let mut signals = Signals::new()?;
    let prompt = read_prompt(cli, env, &mut signals).await?;
    let opened = setup::open_session(cli, env, clock)?;
    for w in &opened.warnings {
        out.err(&format!("Warning: {w}\n"));
    }
    let header = opened.store.header().clone();
    config.session_id = Some(header.id.clone());
    let history = opened.store.context_entries();
    let model_changed = opened.store.last_model() != Some((provider.name(), provider.model()));
    let bus = Bus::new(clock.clone());
    let writer = recorder::Recorder::new(
        std::sync::Arc::new(std::sync::Mutex::new(opened.store)),
        clock,
    );
    let health = writer.health();
    let recorder = tokio::spawn(recorder::record(writer, bus.subscribe()));
    let session = AgentSession::with_entries(config, provider, bus.clone(), clock.clone(), history);
    session.watch_store(&health);
    let mut projector: Box<dyn Projector> = match mode {
        Mode::Json => {
            let _ = out.out(header_line(&header).as_bytes());
            Box::new(JsonProjector::new(Some(header.id.clone())))
        }
        _ => Box::new(PrintProjector { quiet: cli.quiet }),
    };
    let rx = session.subscribe();
    if opened.is_new || model_changed {
        session.announce_model();
    }
    let started = clock.now_ms();
    let (mut summary, stop) =
        pump(&session, rx, projector.as_mut(), out, prompt, &mut signals).await?;
    bus.close();
    drop(session);
    if recorder.await.is_err() {
        out.err("Error: the session recorder crashed; the session file may be incomplete\n");
    }
    // A write that failed after the run settled (its last entries, the final sync) fails it too.
    if let Some(message) = health.fault() {
        summary.settled = Some(crate::front::Settled {
            outcome: crate::wire::events::Outcome::Failed,
            error: Some(crate::wire::events::SettledError {
                kind: recorder::SESSION_WRITE.into(),
                message,
            }),
        });
    }
    let duration = (clock.now_ms() - started).max(0) as u64;
    Ok(conclude(summary, stop, projector.as_mut(), duration, out))
}

/// The end of a print or JSON run, in this process or through the daemon: the exit its
/// verdict and `stop` call for, the final answer or result line, and the exit once those
/// bytes are out.
pub(crate) fn conclude(
    mut summary: RunSummary,
    stop: Option<Stop>,
    projector: &mut dyn Projector,
    duration_ms: u64,
    out: &mut Output,
) -> Exit {
    let exit = match (summary.exit(), stop) {
        (None, _) => Exit::Internal,
        (Some(_), Some(Stop::Signal(n))) => Exit::Signal(n),
        (Some(_), Some(Stop::Output(message))) => {
            summary.output_error = Some(message);
            Exit::Failed
        }
        (Some(exit), None) => exit,
    };
    projector.finish(&summary, exit, duration_ms, out);
    after_finish(exit, &summary, out)
}

/// The exit once the last bytes are out: a write that failed in `finish` (print mode's
/// answer, JSON mode's result line) turns the exit into 141 for a closed pipe, or 1 with a
/// message on stderr for a full or failing device. A signal's exit stays.
fn after_finish(exit: Exit, summary: &RunSummary, out: &mut Output) -> Exit {
    if summary.output_error.is_some() || matches!(exit, Exit::Signal(_)) {
        return exit;
    }
    match out.stdout_failure() {
        None => exit,
        Some(_) => out.stdout_exit(),
    }
}

/// The most piped stdin print and JSON modes take as part of the prompt (like RPC's line cap).
pub const MAX_STDIN_BYTES: usize = 16 * 1024 * 1024;

/// The first message: piped stdin, a blank line, then the `@file` mentions' blocks and the
/// other arguments (see [`crate::mentions`]). The mentions are read first, so a file that
/// cannot be included fails before stdin is waited for. A signal while stdin is read ends keel
/// with 128 + n.
pub(crate) async fn read_prompt(
    cli: &Cli,
    env: &Env,
    signals: &mut Signals,
) -> Result<UserInput, StartupError> {
    let home = env.vars.get("HOME").map(std::path::Path::new);
    let expanded = crate::mentions::expand(&cli.prompt, &env.cwd, home)?;
    let mut piped = String::new();
    if !env.stdin_tty {
        tracing::debug!("reading stdin");
        let bytes = tokio::select! {
            read = read_stdin(MAX_STDIN_BYTES) => read?,
            n = signals.next() => {
                let (_, why) = RunSummary::default().error(Exit::Signal(n)).unwrap_or_default();
                return Err(StartupError::interrupted(n, format!("{why} while reading stdin")));
            }
        };
        piped = String::from_utf8_lossy(&bytes).trim_end().to_string();
    }
    let text = crate::mentions::compose(&piped, &expanded.files, &expanded.words);
    if text.trim().is_empty() {
        return Err(StartupError::usage("no prompt given")
            .hint("pass the prompt as an argument: keel -p \"what does this project do?\"")
            .hint("or pipe it on stdin: echo \"question\" | keel -p"));
    }
    Ok(UserInput {
        text,
        images: expanded.images,
    })
}

/// Reads stdin to its end, up to `cap` bytes, on a plain thread: a read that never returns
/// must not hold up the exit (a tokio stdin read would keep the runtime from shutting down).
async fn read_stdin(cap: usize) -> Result<Vec<u8>, StartupError> {
    use std::io::Read;
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("keel-stdin".into())
        .spawn(move || {
            let mut bytes = Vec::new();
            let read = std::io::stdin()
                .lock()
                .take(cap as u64 + 1)
                .read_to_end(&mut bytes);
            let _ = tx.send(read.map(|_| bytes));
        })
        .map_err(|e| {
            StartupError::internal("cannot start the stdin reader").cause(e.to_string())
        })?;
    let bytes = match rx.await {
        Ok(Ok(bytes)) => bytes,
        // A closed stdin (EBADF, as under some supervisors) carries no input.
        Ok(Err(e)) if e.raw_os_error() == Some(9) => Vec::new(),
        Ok(Err(e)) => return Err(StartupError::config("cannot read stdin").cause(e.to_string())),
        Err(_) => return Err(StartupError::internal("the stdin reader stopped")),
    };
    if bytes.len() > cap {
        return Err(StartupError::usage(format!(
            "piped stdin is over the {} MiB limit",
            cap / (1024 * 1024)
        ))
        .hint("pipe less, or name the file in the prompt and let the agent read it"));
    }
    Ok(bytes)
}

/// Why the pump stopped a run before it ended by itself.
pub(crate) enum Stop {
    /// Signal n (SIGPIPE for a closed stdout).
    Signal(i32),
    /// stdout failed for another reason: the failure's message.
    Output(String),
}

/// Feeds every event to the projector until the run settles; handles signals and a failing
/// stdout by aborting the run (the session is saved either way).
async fn pump(
    session: &AgentSession,
    mut rx: crate::kernel::bus::EventRx,
    projector: &mut dyn Projector,
    out: &mut Output,
    prompt: UserInput,
    signals: &mut Signals,
) -> Result<(RunSummary, Option<Stop>), StartupError> {
    let run = session
        .prompt_input(prompt)
        .map_err(|e| StartupError::internal(e.to_string()))?;
    let mut summary = RunSummary::default();
    let mut stop: Option<Stop> = None;
    let mut settled = false;
    let mut buf = Vec::with_capacity(4096);
    while !settled {
        let first = tokio::select! {
            ev = rx.recv() => ev,
            n = signals.next() => { halt(session, &mut stop, Stop::Signal(n)); continue }
        };
        let Some(first) = first else { break };
        let mut next = Some(first);
        while let Some(ev) = next.take() {
            let fed = feed_event(&ev, &mut buf, projector, &mut summary, out);
            if fed.write_failed {
                output_failed(session, &mut stop, out);
            }
            settled |= fed.settled;
            if !settled {
                next = rx.try_recv().ok();
            }
        }
        if out.flush().is_err() {
            output_failed(session, &mut stop, out);
        }
    }
    if let Err(e) = run.await {
        return Err(StartupError::internal(format!(
            "the agent run crashed: {e}"
        )));
    }
    Ok((summary, stop))
}

/// stdout took no more bytes: a closed pipe stops the run as SIGPIPE, anything else as a
/// failed write.
fn output_failed(session: &AgentSession, stop: &mut Option<Stop>, out: &Output) {
    halt(session, stop, stdout_stop(out));
}

/// Why a stdout that took no more bytes stops the run: SIGPIPE for a closed pipe, a failed
/// write otherwise.
pub(crate) fn stdout_stop(out: &Output) -> Stop {
    match out.stdout_failure() {
        Some(failure @ StdoutFailure::Failed(_)) => Stop::Output(failure.message()),
        Some(StdoutFailure::Closed) | None => Stop::Signal(SIGPIPE),
    }
}

/// Aborts the run; the first reason given is the one reported.
fn halt(session: &AgentSession, stop: &mut Option<Stop>, why: Stop) {
    if stop.is_none() {
        *stop = Some(why);
    }
    session.abort();
}
