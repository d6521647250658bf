//! One file per subcommand of `keel` (as jj's `commands/`): each holds its clap arguments and
//! its `run`, which returns the `Exit`. A run (the default command) is still `app::run_main`.
//! What the subcommands share is here: the environment, their logs, the runtime, and how an
//! error ends (`Error:`/`Hint:` lines on stderr, its exit code).

pub mod attach;
pub mod daemon;
pub mod debug;
pub mod mcp;
pub mod ps;
pub mod schedule;

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
    let Some(env) = crate::app::detect_env() else {
        return Exit::Config;
    };
    let mut out = Output::stdio(ColorChoice::Never);
    if logs != Logs::Off {
        crate::app::init_logging(&env, logs == Logs::File);
    }
    let Some(runtime) = crate::app::runtime(&mut out) else {
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
