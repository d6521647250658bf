//! The composition root: parses flags, resolves the mode, builds the kernel, session store and
//! projector, pumps events until the run settles, and returns the `Exit`. It never prints
//! directly (all output goes through `Output`) and never exits the process (main does).

use std::sync::Arc;

use clap::Parser;
use tokio::io::AsyncReadExt;
use tokio::signal::unix::SignalKind;

use crate::cli::Cli;
use crate::error::StartupError;
use crate::exit::{Exit, SIGHUP, SIGINT, SIGPIPE, SIGTERM};
use crate::front::json::{header_line, result_line, JsonProjector};
use crate::front::print::PrintProjector;
use crate::front::{Projector, RunSummary};
use crate::kernel::agent::AgentSession;
use crate::kernel::bus::Bus;
use crate::kernel::clock::Clock;
use crate::kernel::event::{Event, EventPayload};
use crate::kernel::recorder;
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

fn main_inner() -> Exit {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return clap_exit(e),
    };
    let env = match Env::detect() {
        Ok(env) => env,
        Err(e) => {
            Output::stdio(ColorChoice::Never).err(&e.render());
            return e.exit();
        }
    };
    let mut out = Output::stdio(mode::color(&cli, &env));
    init_logging(&env, mode::resolve(&cli, &env) == Mode::Tui);
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            out.err(&format!("Error: cannot start the async runtime: {e}\n"));
            return Exit::Internal;
        }
    };
    runtime.block_on(run(cli, env, &mut out))
}

fn clap_exit(e: clap::Error) -> Exit {
    use clap::error::ErrorKind;
    let mut out = Output::stdio(ColorChoice::Never);
    let text = e.render().to_string();
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = out.out(text.as_bytes()).and_then(|_| out.flush());
            Exit::Success
        }
        _ => {
            // A script that asked for JSON still gets its one result line.
            if json_requested(std::env::args().skip(1)) {
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
fn json_requested(args: impl Iterator<Item = String>) -> bool {
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
    let filter = tracing_subscriber::EnvFilter::try_new(env.log_filter.as_str())
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
    if let Some(pattern) = &cli.list_models {
        let table = setup::model_list(cli, env, pattern, mode == Mode::Json).await?;
        return Ok(match out.out(table.as_bytes()).and_then(|_| out.flush()) {
            Ok(()) => Exit::Success,
            Err(_) => Exit::Signal(crate::exit::SIGPIPE),
        });
    }
    if mode == Mode::Rpc {
        return start_rpc(cli, env, clock, out).await;
    }
    if mode == Mode::Tui {
        return start_tui(cli, env, clock, out).await;
    }
    setup::check_session_flags(cli, false)?;
    let provider = setup::provider(cli, env).await?;
    let mut config = setup::agent_config(cli, env, false)?;
    if let Some(w) = setup::clamp_thinking(provider.as_ref(), &mut config) {
        out.err(&format!("Warning: {w}\n"));
    }
    let prompt = read_prompt(cli, env).await?;
    let opened = setup::open_session(cli, env, clock)?;
    for w in &opened.warnings {
        out.err(&format!("Warning: {w}\n"));
    }
    let header = opened.store.header().clone();
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
    let (summary, signal) = pump(&session, rx, projector.as_mut(), out, prompt).await?;
    bus.close();
    drop(session);
    if recorder.await.is_err() {
        out.err("Error: the session recorder crashed; the session file may be incomplete\n");
    }
    let mut summary = summary;
    // A write that failed after the run settled (its last entries, the final sync) fails it too.
    if let Some(message) = health.fault() {
        summary.outcome = Some(crate::kernel::event::RunOutcome::Failed {
            kind: recorder::SESSION_WRITE.into(),
            message,
        });
    }
    let exit = match &summary.outcome {
        Some(outcome) => Exit::for_run(outcome, signal),
        None => Exit::Internal,
    };
    let duration = (clock.now_ms() - started).max(0) as u64;
    projector.finish(&summary, exit, duration, out);
    Ok(exit)
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
    let provider = setup::provider(cli, env).await?;
    let mut config = setup::agent_config(cli, env, true)?;
    let mut warnings: Vec<String> = setup::clamp_thinking(provider.as_ref(), &mut config)
        .into_iter()
        .collect();
    let approval_timeout = setup::seconds(cli.approval_timeout, "--approval-timeout")?;
    let models = setup::Models::new(cli, env, provider)?;
    let opened = setup::open_session(cli, env, clock)?;
    warnings.extend(opened.warnings);
    for w in &warnings {
        out.err(&format!("Warning: {w}\n"));
    }
    let rpc_setup = crate::front::rpc::RpcSetup {
        config,
        models,
        clock: clock.clone(),
        store: opened.store,
        announce: opened.is_new,
        session_dir: setup::session_dir(cli, env),
        prompt_dirs: (
            env.keel_home.join("prompts"),
            env.cwd.join(".keel").join("prompts"),
        ),
        approval_timeout,
        warnings,
    };
    crate::front::rpc::serve(rpc_setup, out).await
}

async fn start_tui(
    cli: &Cli,
    env: &Env,
    clock: &Clock,
    out: &mut Output,
) -> Result<Exit, StartupError> {
    setup::check_session_flags(cli, true)?;
    let provider = setup::provider(cli, env).await?;
    let mut config = setup::agent_config(cli, env, true)?;
    let mut warnings: Vec<String> = setup::clamp_thinking(provider.as_ref(), &mut config)
        .into_iter()
        .collect();
    let models = setup::Models::new(cli, env, provider)?;
    let opened = setup::open_session(cli, env, clock)?;
    warnings.extend(opened.warnings);
    let prompt = cli.prompt.join(" ");
    let ambiguous_wide = match cli.ambiguous_width {
        Some(w) => w == crate::cli::AmbiguousWidth::Wide,
        None => env
            .vars
            .get("KEEL_AMBIGUOUS_WIDTH")
            .is_some_and(|v| v.eq_ignore_ascii_case("wide")),
    };
    let tui_setup = crate::front::tui::TuiSetup {
        config,
        models,
        clock: clock.clone(),
        store: opened.store,
        announce: opened.is_new,
        pick_session: cli.resume.as_deref() == Some(""),
        session_dir: setup::session_dir(cli, env),
        keel_home: env.keel_home.clone(),
        prompt_dirs: (
            env.keel_home.join("prompts"),
            env.cwd.join(".keel").join("prompts"),
        ),
        warnings,
        prompt: (!prompt.trim().is_empty()).then_some(prompt),
        ambiguous_wide,
    };
    crate::front::tui::run(tui_setup, out).await
}

/// The prompt from arguments and piped stdin (stdin first, a blank line between).
async fn read_prompt(cli: &Cli, env: &Env) -> Result<String, StartupError> {
    let args = cli.prompt.join(" ");
    let mut piped = String::new();
    if !env.stdin_tty {
        let mut bytes = Vec::new();
        match tokio::io::stdin().read_to_end(&mut bytes).await {
            Ok(_) => {}
            // A closed stdin (EBADF, as under some supervisors) carries no input.
            Err(e) if e.raw_os_error() == Some(9) => bytes.clear(),
            Err(e) => return Err(StartupError::config("cannot read stdin").cause(e.to_string())),
        }
        piped = String::from_utf8_lossy(&bytes).trim_end().to_string();
    }
    let prompt = match (piped.trim().is_empty(), args.trim().is_empty()) {
        (true, true) => {
            return Err(StartupError::usage("no prompt given")
                .hint("pass the prompt as an argument: keel -p \"what does this project do?\"")
                .hint("or pipe it on stdin: echo \"question\" | keel -p"))
        }
        (true, false) => args,
        (false, true) => piped,
        (false, false) => format!("{piped}\n\n{args}"),
    };
    Ok(prompt)
}

/// Feeds every event to the projector until the run settles; handles signals and a closed
/// stdout by aborting the run (the session is saved either way).
async fn pump(
    session: &AgentSession,
    mut rx: crate::kernel::bus::EventRx,
    projector: &mut dyn Projector,
    out: &mut Output,
    prompt: String,
) -> Result<(RunSummary, Option<i32>), StartupError> {
    let mut sigint = crate::front::signals::listen(SignalKind::interrupt())?;
    let mut sigterm = crate::front::signals::listen(SignalKind::terminate())?;
    let mut sighup = crate::front::signals::listen(SignalKind::hangup())?;
    let run = session
        .prompt(prompt)
        .map_err(|e| StartupError::internal(e.to_string()))?;
    let mut summary = RunSummary::default();
    let mut stop_signal: Option<i32> = None;
    let mut settled = false;
    while !settled {
        let first = tokio::select! {
            ev = rx.recv() => ev,
            _ = sigint.recv() => { interrupt(session, &mut stop_signal, SIGINT); continue }
            _ = sigterm.recv() => { interrupt(session, &mut stop_signal, SIGTERM); continue }
            _ = sighup.recv() => { interrupt(session, &mut stop_signal, SIGHUP); continue }
        };
        let Some(first) = first else { break };
        let mut next = Some(first);
        while let Some(ev) = next.take() {
            settled |= deliver(&ev, projector, out, &mut summary, session, &mut stop_signal);
            if !settled {
                next = rx.try_recv().ok();
            }
        }
        if out.flush().is_err() {
            interrupt(session, &mut stop_signal, SIGPIPE);
        }
    }
    if let Err(e) = run.await {
        return Err(StartupError::internal(format!(
            "the agent run crashed: {e}"
        )));
    }
    Ok((summary, stop_signal))
}

fn deliver(
    ev: &Arc<Event>,
    projector: &mut dyn Projector,
    out: &mut Output,
    summary: &mut RunSummary,
    session: &AgentSession,
    stop_signal: &mut Option<i32>,
) -> bool {
    summary.observe(ev);
    if !out.is_stdout_closed() && projector.on_event(ev, out).is_err() {
        interrupt(session, stop_signal, SIGPIPE);
    }
    matches!(ev.payload, EventPayload::AgentSettled { .. })
}

fn interrupt(session: &AgentSession, stop_signal: &mut Option<i32>, n: i32) {
    if stop_signal.is_none() {
        *stop_signal = Some(n);
    }
    session.abort();
}
