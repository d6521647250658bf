//! The composition root: reads the command line once and hands it to `cli`; for a run, resolves
//! the mode and hands the run to its front end (print and JSON: `front::run`, in this process or
//! through the daemon), and returns the `Exit`. It never prints directly (all output goes
//! through `Output`) and never exits the process (main does).

use crate::cli::args::Cli;
use crate::cli::commands::{detect_env, init_logging, runtime};
use crate::error::StartupError;
use crate::exit::Exit;
use crate::front::json::result_line;
use crate::front::RunSummary;
use crate::kernel::clock::Clock;
use crate::mode::{Env, Mode};
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

/// Reads the command line (the only read of `std::env::args()`) and runs what it names.
fn main_inner() -> Exit {
    // The sandbox's cgroup helper hands on bubblewrap's argv, whose paths need not be UTF-8.
    if let Some(exit) = crate::cli::commands::sandbox::cgroup_helper(std::env::args_os()) {
        return exit;
    }
    // A job's command entering its cgroup, the same.
    if let Some(exit) = crate::cli::commands::sandbox::job_cgroup_helper(std::env::args_os()) {
        return exit;
    }
    // A job's command on its terminal, the same (it execs what it was given).
    if let Some(exit) = crate::cli::commands::sandbox::tty_helper(std::env::args_os()) {
        return exit;
    }
    crate::cli::main(std::env::args(), run_main)
}

/// `keel [FLAGS] [PROMPT]…`: a run, in the mode the flags and terminal call for.
pub(crate) fn run_main(cli: Cli) -> Exit {
    let Some(env) = detect_env() else {
        return Exit::Config;
    };
    let mode = crate::cli::invocation::mode(&cli, &env);
    let color = crate::cli::invocation::color(&cli, &env);
    let mut out = match mode {
        Mode::Json | Mode::Rpc | Mode::Acp => Output::stdio_json(color),
        Mode::Tui | Mode::Print => Output::stdio(color),
    };
    init_logging(&env, mode == Mode::Tui);
    let Some(runtime) = runtime(&mut out) else {
        return Exit::Internal;
    };
    runtime.block_on(run(cli, env, &mut out))
}

pub async fn run(cli: Cli, env: Env, out: &mut Output) -> Exit {
    let mode = crate::cli::invocation::mode(&cli, &env);
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
    // The flags resolved into the run's spec and the client's choices, once; the spec over the
    // settings files, once: nothing below reads a flag.
    let mut inv = crate::cli::invocation::invocation(cli, env)?;
    let env = &crate::cli::invocation::with_keys(&inv, env);
    let settings = setup::Settings::resolve(&inv.spec, mode, env)?;
    if let Some(args) = &cli.export {
        let path = crate::front::export::run(&settings, env, args, out)?;
        let line = format!("{}\n", path.display());
        return Ok(match out.out(line.as_bytes()).and_then(|_| out.flush()) {
            Ok(()) => Exit::Success,
            Err(_) => out.stdout_exit(),
        });
    }
    if let Some(pattern) = &cli.list_models {
        let table = setup::model_list(&settings, env, pattern, mode == Mode::Json).await?;
        return Ok(match out.out(table.as_bytes()).and_then(|_| out.flush()) {
            Ok(()) => Exit::Success,
            Err(_) => out.stdout_exit(),
        });
    }
    if mode == Mode::Acp {
        // ACP sessions ask for approvals unless `--permission` was given.
        return crate::front::acp::serve(&inv, &settings, env, clock, out).await;
    }
    // `--remote` (or KEEL_REMOTE) means the daemon over there: never a session here.
    let dial = crate::cli::invocation::cli_dial(cli, env)?;
    let remote = dial.remote().is_some();
    let daemon = (cli.daemon || remote).then(|| dial.clone());
    inv.dial = Some(dial);
    if mode == Mode::Rpc {
        return crate::front::rpc::run(&inv, &settings, env, clock, remote, out).await;
    }
    if mode == Mode::Tui {
        return crate::front::tui::start::start_tui(&inv, &settings, env, clock, remote, out).await;
    }
    crate::front::run::run(&inv, &settings, env, mode, clock, daemon, out).await
}
