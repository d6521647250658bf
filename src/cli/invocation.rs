//! The command line resolved, once, into what a run needs: its front end and colours, the
//! daemon it talks to, and the [`Invocation`] (its session's typed spec and the client's own
//! choices) the front ends read instead of the flags.

use std::path::Path;

use crate::cli::args::{Cli, ColorFlag, ModeFlag};
use crate::client::dial::{Dial, Remote};
use crate::client::open::socket_for;
use crate::error::StartupError;
use crate::front::invocation::Invocation;
use crate::mode::{Env, Mode};
use crate::output::ColorChoice;

/// The settings of a session `cli` would open in `env`'s directory (a debug command's view of
/// a run): its spec over the settings files.
pub fn settings(cli: &Cli, env: &Env) -> Result<crate::setup::Settings, StartupError> {
    let inv = invocation(cli, env)?;
    let env = with_keys(&inv, env);
    crate::setup::Settings::resolve(&inv.spec, mode(cli, &env), &env)
}

/// `env` with the keys the command line handed over (`--api-key`), where the spec's `apiKey`
/// names them: a session in this process reads its key from there.
pub fn with_keys(inv: &Invocation, env: &Env) -> Env {
    let mut env = env.clone();
    env.vars.extend(inv.keys.clone());
    env
}

/// The request of `cli` in `env`: its spec resolved (see [`crate::cli::spec::of`]); the dial
/// is left to [`cli_dial`] (`app` sets it where a front end may use the daemon).
pub fn invocation(cli: &Cli, env: &Env) -> Result<Invocation, StartupError> {
    Ok(Invocation {
        spec: crate::cli::spec::of(cli, &env.cwd)?,
        keys: crate::cli::spec::key(cli).into_iter().collect(),
        prompt: cli.prompt.clone(),
        quiet: cli.quiet,
        daemon: cli.daemon,
        no_daemon: cli.no_daemon,
        detach: cli.detach,
        wait: cli.wait,
        dial: None,
        socket: cli.socket.clone(),
        remote_cwd: cli.cwd.clone(),
        ambiguous_wide: cli
            .ambiguous_width
            .map(|w| w == crate::cli::args::AmbiguousWidth::Wide),
    })
}

/// The daemon a client command talks to: `--remote`/`KEEL_REMOTE` over ssh (where `--socket`
/// names the remote daemon's socket), else the local socket.
pub fn dial_for(
    env: &Env,
    socket: Option<&Path>,
    remote: &crate::cli::args::RemoteArgs,
) -> Result<Dial, StartupError> {
    let remote = Remote::from_flags(
        remote.remote.as_deref(),
        &env.vars,
        &remote.ssh_opt,
        remote.remote_keel.as_deref(),
        socket,
    );
    match remote {
        Some(r) => Ok(Dial::Remote(r)),
        None => Ok(Dial::Local(socket_for(env, socket)?)),
    }
}

/// The daemon of a session command line (`--remote` and its companions, `--socket`); `--cwd`
/// names the remote directory and needs `--remote`.
pub fn cli_dial(cli: &Cli, env: &Env) -> Result<Dial, StartupError> {
    let dial = dial_for(env, cli.socket.as_deref(), &cli.remote)?;
    if cli.no_daemon && dial.remote().is_some() {
        return Err(StartupError::usage(
            "--no-daemon runs the session in this process; --remote (or KEEL_REMOTE) runs it on \
             another host: give one of them",
        ));
    }
    if cli.cwd.is_some() && dial.remote().is_none() {
        return Err(StartupError::usage(
            "--cwd names the session's directory on the remote host: it needs --remote",
        )
        .hint("run keel in that directory instead"));
    }
    Ok(dial)
}

/// Resolves the front end (`DESIGN.md` §3): rpc, json, then print when `-p` or either stream is
/// not a terminal, else the TUI.
pub fn mode(cli: &Cli, env: &Env) -> Mode {
    let flag = if cli.acp {
        Some(ModeFlag::Acp)
    } else if cli.rpc {
        Some(ModeFlag::Rpc)
    } else if cli.json {
        Some(ModeFlag::Json)
    } else {
        cli.mode
    };
    match flag {
        Some(ModeFlag::Rpc) => Mode::Rpc,
        Some(ModeFlag::Acp) => Mode::Acp,
        Some(ModeFlag::Json) => Mode::Json,
        _ if cli.print || !env.stdin_tty || !env.stdout_tty => Mode::Print,
        _ => Mode::Tui,
    }
}

/// The colour choice for stderr diagnostics.
pub fn color(cli: &Cli, env: &Env) -> ColorChoice {
    match cli.color {
        ColorFlag::Always => ColorChoice::Always,
        ColorFlag::Never => ColorChoice::Never,
        ColorFlag::Auto if env.no_color || !env.stderr_tty => ColorChoice::Never,
        ColorFlag::Auto => ColorChoice::Auto,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use std::path::PathBuf;

    fn env(stdin_tty: bool, stdout_tty: bool) -> Env {
        Env {
            stdin_tty,
            stdout_tty,
            stderr_tty: false,
            no_color: false,
            cwd: PathBuf::from("/w"),
            keel_home: PathBuf::from("/h"),
            fixed_clock: None,
            seed: None,
            temp_dir: PathBuf::from("/tmp"),
            log_filter: "warn".into(),
            test_panic: false,
            vars: Default::default(),
            retry_base_ms: None,
            tool_vars: None,
            worktree: None,
        }
    }

    fn mode_of_args(args: &[&str], stdin: bool, stdout: bool) -> Mode {
        let cli = Cli::try_parse_from(std::iter::once("keel").chain(args.iter().copied())).unwrap();
        mode(&cli, &env(stdin, stdout))
    }

    #[test]
    fn resolution_follows_design_order() {
        assert_eq!(mode_of_args(&["--mode", "rpc"], true, true), Mode::Rpc);
        assert_eq!(mode_of_args(&["--rpc", "-p"], false, false), Mode::Rpc);
        assert_eq!(mode_of_args(&["--mode", "acp"], false, false), Mode::Acp);
        assert_eq!(mode_of_args(&["--acp"], true, true), Mode::Acp);
        assert_eq!(mode_of_args(&["--json", "x"], true, true), Mode::Json);
        assert_eq!(
            mode_of_args(&["--mode", "json", "-p", "x"], true, true),
            Mode::Json
        );
        assert_eq!(mode_of_args(&["-p", "x"], true, true), Mode::Print);
        assert_eq!(mode_of_args(&["x"], false, true), Mode::Print);
        assert_eq!(mode_of_args(&["x"], true, false), Mode::Print);
        assert_eq!(
            mode_of_args(&["--mode", "text", "x"], true, true),
            Mode::Tui
        );
        assert_eq!(mode_of_args(&["x"], true, true), Mode::Tui);
    }
}
