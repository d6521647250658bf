//! `keel daemon run|start|status|install|stop|bridge`: the daemon's own command line. stdout
//! carries what was asked for (the socket path, the status table or JSON, the unit); errors go
//! to stderr with the usual `Error:`/`Hint:` lines and exit 3. `keel daemon run` builds the
//! server's options and hands them to the server (`daemon::run`).

use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;

use super::{print, Logs};
use crate::cli::args::RemoteArgs;
use crate::cli::invocation::dial_for;
use crate::client::open::{socket_for, start_local};
use crate::client::socket::Client;
use crate::daemon::server::DaemonOptions;
use crate::error::StartupError;
use crate::exit::Exit;
use crate::front::daemon::status_of;
use crate::mode::Env;
use crate::output::Output;
use crate::wire::protocol::daemon::{self as proto, StatusResult, StopParams};
use crate::wire::socket::DaemonErrorKind;

/// `keel daemon …`.
#[derive(Debug, clap::Subcommand)]
pub enum DaemonAction {
    /// Run the daemon in the foreground.
    Run(RunArgs),
    /// Connect to the daemon, or start one; prints the socket path.
    Start {
        #[arg(long, value_name = "PATH")]
        socket: Option<PathBuf>,
    },
    /// Show the daemon and its sessions.
    Status {
        /// Print `daemon/status`'s result as JSON.
        #[arg(long)]
        json: bool,
        #[arg(long, value_name = "PATH")]
        socket: Option<PathBuf>,
        #[command(flatten)]
        remote: RemoteArgs,
    },
    /// Print a unit that starts the daemon at login: a systemd user unit (Linux) or a launchd
    /// agent (macOS).
    Install {
        /// Print it (keel installs nothing itself).
        #[arg(long)]
        print: bool,
        /// A systemd user unit, whatever the system.
        #[arg(long, conflicts_with = "launchd")]
        systemd: bool,
        /// A launchd agent plist, whatever the system.
        #[arg(long)]
        launchd: bool,
    },
    /// Stop the daemon (refused while a run is active, unless --force).
    Stop {
        #[arg(long)]
        force: bool,
        #[arg(long, value_name = "PATH")]
        socket: Option<PathBuf>,
        #[command(flatten)]
        remote: RemoteArgs,
    },
    /// Relay stdin and stdout to the daemon's socket byte for byte (starting the daemon if
    /// none runs): `ssh HOST keel daemon bridge` is a connection to HOST's daemon.
    Bridge {
        #[arg(long, value_name = "PATH")]
        socket: Option<PathBuf>,
    },
}

/// `keel daemon run`'s flags.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Exit after this many seconds with no client, no run and no request (0 = never).
    #[arg(long, value_name = "SECS", default_value_t = 600.0)]
    idle_exit: f64,
    /// Events kept per session for clients that re-attach.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    replay_events: usize,
    /// Bytes kept per session for clients that re-attach.
    #[arg(long, value_name = "N", default_value_t = 8 * 1024 * 1024)]
    replay_bytes: usize,
    /// Set by `keel daemon start`: become a session leader, ignore SIGHUP.
    #[arg(long, hide = true)]
    spawned: bool,
    #[command(flatten)]
    journal: super::journal_flags::JournalArgs,
}

/// `keel daemon …`: runs one command, logs on stderr.
pub fn run(action: DaemonAction) -> Exit {
    super::run(Logs::Stderr, async move |env, out| {
        daemon(action, env, out).await
    })
}

/// Runs one `keel daemon` command.
async fn daemon(action: DaemonAction, env: &Env, out: &mut Output) -> Result<Exit, StartupError> {
    match action {
        DaemonAction::Run(args) => serve(args, env).await,
        DaemonAction::Install {
            print: yes,
            systemd,
            launchd,
        } => install(yes, systemd, launchd, env, out),
        DaemonAction::Start { socket } => {
            let socket = socket_for(env, socket.as_deref())?;
            start_local(&socket, env).await?;
            print(out, &format!("{}\n", socket.display()))
        }
        DaemonAction::Status {
            json,
            socket,
            remote,
        } => {
            let dial = dial_for(env, socket.as_deref(), &remote)?;
            let status = status_of(&dial).await?;
            let text = if json {
                format!("{}\n", json!(status))
            } else {
                status_text(&status, &dial.describe())
            };
            print(out, &text)
        }
        DaemonAction::Bridge { socket } => {
            let socket = socket_for(env, socket.as_deref())?;
            let stream = start_local(&socket, env).await?;
            Ok(crate::client::bridge::relay(stream, out).await)
        }
        DaemonAction::Stop {
            force,
            socket,
            remote,
        } => {
            let dial = dial_for(env, socket.as_deref(), &remote)?;
            let mut client = match Client::dial(&dial, false).await {
                Ok(c) => c,
                // Nothing to stop: what was asked for holds already.
                Err(e) if e.kind == DaemonErrorKind::NotListening => {
                    out.err("no daemon running\n");
                    return Ok(Exit::Success);
                }
                Err(e) => return Err(e.into()),
            };
            client
                .call::<proto::Stop>(&StopParams { force })
                .await
                .map_err(|e| {
                    StartupError::config(format!("the daemon did not stop: {e}"))
                        .hint("pass --force to stop it while a run is active")
                })?;
            print(out, "stopped\n")
        }
    }
}

/// `keel daemon run`: the server's options from the flags and the environment, then the server.
async fn serve(args: RunArgs, env: &Env) -> Result<Exit, StartupError> {
    let RunArgs {
        socket,
        idle_exit,
        replay_events,
        replay_bytes,
        spawned,
        journal,
    } = args;
    let socket = socket_for(env, socket.as_deref())?;
    let journal = journal.options(
        env.vars.get("KEEL_JOURNAL").map(String::as_str),
        &crate::daemon::journal::options::hostname(),
        &env.keel_home,
    )?;
    let options = DaemonOptions {
        socket,
        idle_exit: (idle_exit > 0.0).then(|| Duration::from_secs_f64(idle_exit)),
        ring: (replay_events, replay_bytes),
        keel_home: env.keel_home.clone(),
        vars: env.vars.clone(),
        temp_dir: env.temp_dir.clone(),
        journal,
        convert_schedules: Some(crate::cli::spec::from_task_args),
        worktree_cleanup: Duration::from_secs(86_400 * u64::from(cleanup_days(env))),
    };
    crate::daemon::run::run(options, spawned).await
}

/// `worktree.cleanupDays` of the user's settings (7 when unset or unreadable).
fn cleanup_days(env: &Env) -> u32 {
    let spec = crate::wire::protocol::spec::SessionSpec::default();
    crate::setup::Settings::resolve(&spec, crate::mode::Mode::Print, env)
        .ok()
        .and_then(|s| s.worktree.cleanup_days)
        .unwrap_or(7)
}

/// `keel daemon install --print [--systemd|--launchd]`: the unit's text on stdout.
fn install(
    yes: bool,
    systemd: bool,
    launchd: bool,
    env: &Env,
    out: &mut Output,
) -> Result<Exit, StartupError> {
    if !yes {
        return Err(
            StartupError::usage("keel daemon install only prints the unit: pass --print")
                .hint("keel daemon install --print, then install it as docs/schedules.md says"),
        );
    }
    let exe = std::env::current_exe().map_err(|e| {
        StartupError::config("cannot find the keel executable").cause(e.to_string())
    })?;
    let kind = crate::front::install::Kind::pick(systemd, launchd);
    print(
        out,
        &crate::front::install::unit(kind, &exe, &env.keel_home),
    )
}

/// `keel daemon status`: the daemon, its clients, sessions, scheduled tasks and journal.
fn status_text(status: &StatusResult, place: &str) -> String {
    let uptime = status.uptime_ms / 1000;
    let mut text = format!(
        "keel daemon {} (pid {}) on {}: up {uptime} s, {} client(s), {} session(s)\n",
        status.version,
        status.pid,
        place,
        status.clients,
        status.sessions.len()
    );
    text.push_str(&sandboxes_line(&status.sessions));
    let s = &status.schedules;
    if let Some(e) = &s.error {
        text.push_str(&format!("scheduled tasks: none run: {e}\n"));
    } else if s.tasks > 0 {
        text.push_str(&format!(
            "scheduled tasks: {} ({} active, {} running)\n",
            s.tasks,
            s.active,
            s.running.len()
        ));
    }
    text.push_str(&crate::daemon::journal::status_line(
        status.journal.as_ref(),
    ));
    text
}

/// `keel daemon status`'s line on the sessions' sandboxes: how many run in each, the ones
/// not in force in capitals (`sandbox: 2 workspace-write · net off, 1 OFF`); empty when no
/// session is live.
fn sandboxes_line(sessions: &[proto::LiveSession]) -> String {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for s in sessions {
        let cell = crate::front::daemon::sandbox_cell(s.sandbox.as_ref());
        match counts.iter_mut().find(|(c, _)| *c == cell) {
            Some((_, n)) => *n += 1,
            None => counts.push((cell, 1)),
        }
    }
    if counts.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = counts.iter().map(|(c, n)| format!("{n} {c}")).collect();
    format!("sandbox: {}\n", parts.join(", "))
}
