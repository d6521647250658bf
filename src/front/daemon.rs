//! `keel daemon run|start|status|stop`, `keel ps` and `keel attach`: the daemon's own command
//! line. stdout carries what was asked for (the socket path, the status table or JSON, the
//! session list; `keel attach` hands the terminal to the TUI client, after the live-session
//! picker when several sessions are live); errors go to stderr with the usual
//! `Error:`/`Hint:` lines and exit 3.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use crate::cli::args::RemoteArgs;
use crate::cli::{DaemonAction, DaemonTop};
use crate::client::dial::{Conn, Dial, Remote};
use crate::client::socket::Client;
use crate::client::spawn;
use crate::daemon::server::{self, DaemonOptions, Ending};
use crate::error::StartupError;
use crate::exit::Exit;
use crate::front::tui::picker::rows::short_age;
use crate::mode::Env;
use crate::output::Output;
use crate::wire::socket::{paths, DaemonError};

/// Runs one daemon command.
pub async fn run(command: DaemonTop, env: &Env, out: &mut Output) -> Result<Exit, StartupError> {
    match command {
        DaemonTop::Attach { id, socket, remote } => {
            let dial = dial_for(env, socket.as_deref(), &remote)?;
            let status = status_of(&dial).await?;
            let session = match attach_target(&status, id.as_deref(), env, out).await? {
                Ok(session) => session,
                Err(exit) => return Ok(exit),
            };
            if !env.stdin_tty || !env.stdout_tty {
                return Err(StartupError::usage("keel attach needs a terminal"));
            }
            let cwd = sessions(&status)
                .iter()
                .find(|s| s["sessionId"] == session.as_str())
                .and_then(|s| s["cwd"].as_str().map(PathBuf::from))
                .unwrap_or_else(|| env.cwd.clone());
            let remote_env = dial.remote().is_some();
            let setup = crate::front::tui::client::AttachSetup {
                dial,
                session,
                prompt: None,
                warnings: Vec::new(),
                ambiguous_wide: ambiguous_wide(env),
                reopen: {
                    let mut here = env.clone();
                    here.cwd = cwd;
                    let mut params = open_params(&here, Vec::new(), false);
                    if remote_env {
                        // The remote daemon runs with its own environment.
                        params["env"] = json!({});
                    }
                    params
                },
                env: env.clone(),
                session_dir: crate::kernel::session::session_dir(&env.keel_home, &env.cwd),
                pick_session: false,
            };
            crate::front::tui::client::run(setup, out).await
        }
        DaemonTop::Schedule { action } => crate::front::schedule::run(action, env, out).await,
        DaemonTop::Ps {
            json,
            socket,
            remote,
        } => {
            let status = status_of(&dial_for(env, socket.as_deref(), &remote)?).await?;
            let text = if json {
                ps_json(&status)
            } else {
                ps_table(&status)
            };
            print(out, &text)
        }
        DaemonTop::Daemon { action } => match action {
            DaemonAction::Run {
                socket,
                idle_exit,
                replay_events,
                replay_bytes,
                spawned,
                journal,
            } => {
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
                };
                run_daemon(options, spawned).await
            }
            DaemonAction::Install {
                print: yes,
                systemd,
                launchd,
            } => {
                if !yes {
                    return Err(StartupError::usage(
                        "keel daemon install only prints the unit: pass --print",
                    )
                    .hint("keel daemon install --print, then install it as the README says"));
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
                    format!("{status}\n")
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
                let mut client = Client::dial(&dial, false).await?;
                client
                    .call("daemon/stop", json!({"force": force}))
                    .await
                    .map_err(|e| {
                        StartupError::config(format!("the daemon did not stop: {e}"))
                            .hint("pass --force to stop it while a run is active")
                    })?;
                print(out, "stopped\n")
            }
        },
    }
}

/// The live session `keel attach [ID]` shows: the one whose id starts or ends with `ID`, the only one
/// live, or (several, no id, at a terminal) the one chosen in the live-session picker.
/// `Err(exit)`: nothing to attach, end with this code (the picker was left, or a signal).
async fn attach_target(
    status: &Value,
    id: Option<&str>,
    env: &Env,
    out: &mut Output,
) -> Result<Result<String, Exit>, StartupError> {
    let live: Vec<&str> = sessions(status)
        .iter()
        .filter_map(|s| s["sessionId"].as_str())
        .collect();
    let hits: Vec<&str> = match id {
        Some(q) => {
            let named = |s: &&str| crate::kernel::session::id_matches(s, q);
            live.iter().copied().filter(named).collect()
        }
        None => live,
    };
    match (hits.as_slice(), id) {
        ([one], _) => Ok(Ok((*one).to_string())),
        ([], Some(q)) => Err(StartupError::config(format!(
            "no session {q} is live in the keel daemon"
        ))
        .hint("keel ps lists them; a saved session opens with keel --daemon --resume <ID>")),
        ([], None) => Err(
            StartupError::config("no session is live in the keel daemon")
                .hint("start one with: keel --daemon"),
        ),
        (_, None) if env.stdin_tty && env.stdout_tty => {
            use crate::front::tui::live_picker::{choose, LivePicker, LiveSession};
            crate::text::set_ambiguous_wide(ambiguous_wide(env));
            let list = sessions(status).iter().filter_map(LiveSession::from_status);
            let picker = LivePicker::new(list.collect(), env.vars.get("HOME").map(String::as_str));
            Ok(match choose(picker).await? {
                Ok(Some(session)) => Ok(session),
                Ok(None) => Err(Exit::Success),
                Err(signal) => Err(Exit::Signal(signal)),
            })
        }
        (_, _) => {
            let _ = out.out(ps_table(status).as_bytes());
            Err(StartupError::usage("several sessions are live; name one")
                .hint("keel attach <ID> (a unique prefix is enough)"))
        }
    }
}

/// `KEEL_AMBIGUOUS_WIDTH=wide`: ambiguous-width characters take two columns.
fn ambiguous_wide(env: &Env) -> bool {
    env.vars
        .get("KEEL_AMBIGUOUS_WIDTH")
        .is_some_and(|v| v.eq_ignore_ascii_case("wide"))
}

fn print(out: &mut Output, text: &str) -> Result<Exit, StartupError> {
    match out.out(text.as_bytes()).and_then(|_| out.flush()) {
        Ok(()) => Ok(Exit::Success),
        Err(_) => Ok(Exit::Signal(crate::exit::SIGPIPE)),
    }
}

/// The socket: `--socket`, `$KEEL_SOCKET`, the runtime directory, `$KEEL_HOME/run/`, or (when
/// that path is too long) `/tmp/keel-<uid>/`.
pub fn socket_for(env: &Env, flag: Option<&Path>) -> Result<PathBuf, StartupError> {
    let var = |k: &str| env.vars.get(k).map(PathBuf::from);
    let choice = paths::socket_path(
        var("KEEL_SOCKET").as_deref(),
        flag,
        var("XDG_RUNTIME_DIR").as_deref(),
        &env.keel_home,
        paths::euid(),
    )?;
    if let Some(why) = &choice.fallback {
        tracing::info!("not using XDG_RUNTIME_DIR: {why}");
    }
    Ok(choice.path)
}

/// The daemon a client command talks to: `--remote`/`KEEL_REMOTE` over ssh (where `--socket`
/// names the remote daemon's socket), else the local socket.
pub fn dial_for(
    env: &Env,
    socket: Option<&Path>,
    remote: &RemoteArgs,
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

/// Connects to the daemon, or starts one and waits until it accepts (a remote daemon is
/// started by its bridge).
pub async fn start(dial: &Dial, env: &Env) -> Result<Conn, StartupError> {
    match dial {
        Dial::Local(socket) => start_local(socket, env).await.map(Conn::from),
        Dial::Remote(_) => Ok(dial.connect().await?),
    }
}

/// Connects to the daemon on this machine's `socket`, or starts one and waits until it
/// accepts. Only starting one needs `$KEEL_HOME/logs` (its log is made then).
pub async fn start_local(socket: &Path, env: &Env) -> Result<tokio::net::UnixStream, StartupError> {
    let exe = std::env::current_exe().map_err(|e| {
        StartupError::config("cannot find the keel executable to start the daemon")
            .cause(e.to_string())
    })?;
    let log = env.keel_home.join("logs").join("daemon.log");
    let daemon = socket.to_path_buf();
    let spawn = move || {
        let command = spawn::daemon_command(&exe, &daemon, &log, Vec::<String>::new())
            .map_err(|e| std::io::Error::other(e.message))?;
        tokio::process::Command::from(command).spawn().map(drop)
    };
    let (stream, _spawned) = spawn::connect_or_spawn(socket, spawn, spawn::SPAWN_DEADLINE).await?;
    Ok(stream)
}

async fn run_daemon(options: DaemonOptions, spawned: bool) -> Result<Exit, StartupError> {
    if spawned {
        crate::wire::socket::lock::become_session_leader()
            .map_err(|e| StartupError::internal(format!("setsid failed: {e}")))?;
    }
    // Spawned or in the foreground (a systemd unit, a terminal that closes): SIGHUP must not
    // end the daemon, its sessions and their running tools.
    crate::wire::socket::lock::ignore_sighup()
        .map_err(|e| StartupError::internal(e.to_string()))?;
    let dir = options
        .socket
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("/"));
    let Some(lock) = crate::wire::socket::lock::DaemonLock::acquire(&dir)? else {
        tracing::info!("another keel daemon holds {}; exiting", dir.display());
        return Ok(Exit::Success);
    };
    // With daemon.lock held no other daemon serves this directory: a socket file left here
    // is stale.
    if std::fs::symlink_metadata(&options.socket).is_ok_and(|m| {
        use std::os::unix::fs::FileTypeExt;
        m.file_type().is_socket()
    }) {
        let _ = std::fs::remove_file(&options.socket);
    }
    let listener = paths::bind(&options.socket)?;
    match server::serve(options, listener, lock).await {
        Ok(Ending::Idle | Ending::Stopped) => Ok(Exit::Success),
        Ok(Ending::Signal(n)) => Ok(Exit::Signal(n)),
        Err(e) => Err(StartupError::internal(e)),
    }
}

async fn status_of(dial: &Dial) -> Result<Value, StartupError> {
    let mut client = Client::dial(dial, false).await?;
    client
        .call("daemon/status", json!({}))
        .await
        .map_err(|e| DaemonError::new(format!("daemon/status failed: {e}")).into())
}

fn sessions(status: &Value) -> &[Value] {
    status["sessions"].as_array().map_or(&[], Vec::as_slice)
}

fn status_text(status: &Value, place: &str) -> String {
    let uptime = status["uptimeMs"].as_u64().unwrap_or(0) / 1000;
    let mut text = format!(
        "keel daemon {} (pid {}) on {}: up {uptime} s, {} client(s), {} session(s)\n",
        status["version"].as_str().unwrap_or("?"),
        status["pid"],
        place,
        status["clients"],
        sessions(status).len()
    );
    let s = &status["schedules"];
    if let Some(e) = s["error"].as_str() {
        text.push_str(&format!("scheduled tasks: none run: {e}\n"));
    } else if s["tasks"].as_u64().is_some_and(|n| n > 0) {
        text.push_str(&format!(
            "scheduled tasks: {} ({} active, {} running)\n",
            s["tasks"],
            s["active"],
            s["running"].as_array().map_or(0, Vec::len)
        ));
    }
    text.push_str(&crate::daemon::journal::status_line(&status["journal"]));
    text
}

fn ps_json(status: &Value) -> String {
    sessions(status).iter().map(|s| format!("{s}\n")).collect()
}

/// How many columns `keel ps` gives what a session is about (its name or first prompt).
const ABOUT_COLUMNS: usize = 48;

/// `keel ps`: one row per live session of `daemon/status`: id, state, clients, age, what it
/// is about (its name, else its first prompt in quotes, cut to [`ABOUT_COLUMNS`]) and cwd,
/// each column as wide as its widest cell (measured in terminal columns).
pub fn ps_table(status: &Value) -> String {
    let head = ["SESSION", "STATE", "CLIENTS", "AGE", "ABOUT", "CWD"].map(String::from);
    let mut rows = vec![head];
    for s in sessions(status) {
        let text = |k: &str| crate::text::sanitize(s[k].as_str().unwrap_or(""));
        let about = match (s["name"].as_str(), s["firstPrompt"].as_str()) {
            (Some(name), _) => crate::text::truncate(name, ABOUT_COLUMNS),
            (None, Some(p)) => {
                let first = p.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
                let cut = crate::text::truncate(first.trim(), ABOUT_COLUMNS - 2);
                format!("\"{cut}\"")
            }
            (None, None) => "-".to_string(),
        };
        rows.push([
            text("sessionId"),
            text("state"),
            s["clients"].as_u64().unwrap_or(0).to_string(),
            short_age(s["ageMs"].as_u64().unwrap_or(0)),
            about,
            text("cwd"),
        ]);
    }
    let widths: Vec<usize> = (0..6)
        .map(|c| {
            rows.iter()
                .map(|r| crate::text::width(&r[c]))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in &rows {
        let mut line = String::new();
        for (c, cell) in r.iter().enumerate() {
            let pad = " ".repeat(widths[c].saturating_sub(crate::text::width(cell)));
            // Counts and ages are right-aligned; the last column is not padded.
            match c {
                2 | 3 => line.push_str(&format!("{pad}{cell}  ")),
                5 => line.push_str(cell),
                _ => line.push_str(&format!("{cell}{pad}  ")),
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Flags that only concern a client of the daemon, never the session it opens there.
const CLIENT_FLAGS: &[&str] = &[
    "--daemon",
    "--no-daemon",
    "--rpc",
    "--json",
    "-p",
    "--print",
    "--detach",
    "--wait",
];
const CLIENT_FLAGS_WITH_VALUE: &[&str] = &[
    "--socket",
    "--mode",
    "--remote",
    "--ssh-opt",
    "--remote-keel",
    "--cwd",
];

/// The command line a daemon session starts from: this client's, without the flags that
/// only concern the client.
pub fn session_args(args: impl Iterator<Item = String>) -> Vec<String> {
    let mut out = Vec::new();
    let mut skip_value = false;
    for a in args {
        if skip_value {
            skip_value = false;
            continue;
        }
        if CLIENT_FLAGS_WITH_VALUE.contains(&a.as_str()) {
            skip_value = true;
            continue;
        }
        let flag = a.split('=').next().unwrap_or("");
        if CLIENT_FLAGS.contains(&a.as_str()) || CLIENT_FLAGS_WITH_VALUE.contains(&flag) {
            continue;
        }
        out.push(a);
    }
    out
}

/// Session flags (and their values) that pick a session.
const SESSION_FLAGS: &[&str] = &["--continue", "-c", "--no-session"];
const SESSION_FLAGS_WITH_VALUE: &[&str] =
    &["--resume", "-r", "--session", "--session-id", "--fork"];

/// `args` without the flags that pick a session (a client that names its session itself:
/// reopening by file, ACP).
pub fn without_session_flags(args: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut skip = false;
    for a in args {
        if std::mem::take(&mut skip) {
            continue;
        }
        let flag = a.split('=').next().unwrap_or(a);
        if SESSION_FLAGS_WITH_VALUE.contains(&a.as_str()) {
            skip = true;
            continue;
        }
        if SESSION_FLAGS.contains(&a.as_str()) || SESSION_FLAGS_WITH_VALUE.contains(&flag) {
            continue;
        }
        out.push(a.clone());
    }
    out
}

/// The daemon of a session command line (`--remote` and its companions, `--socket`); `--cwd`
/// names the remote directory and needs `--remote`.
pub fn cli_dial(cli: &crate::cli::args::Cli, env: &Env) -> Result<Dial, StartupError> {
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

/// `session/open`'s params for the daemon `dial` names. A remote daemon gets the session's
/// directory there (`--cwd`, else this directory's path) and none of this machine's
/// environment: it runs with its own keys and configuration.
pub fn open_params_for(
    dial: &Dial,
    cli: &crate::cli::args::Cli,
    env: &Env,
    args: Vec<String>,
    headless: bool,
) -> Value {
    let mut params = open_params(env, args, headless);
    if dial.remote().is_some() {
        params["cwd"] = json!(cli.cwd.as_deref().unwrap_or(&env.cwd));
        params["env"] = json!({});
    }
    params
}

/// `session/open`'s params for a client started with `args` in `env`: its directory, its
/// session flags and its whole environment (the session reads its provider keys, URLs and
/// `KEEL_*` variables; its tools run in it, less the provider keys, as they would here).
/// Relative paths in `args` stay relative: the session resolves them from `cwd`, as this
/// process would.
pub fn open_params(env: &Env, args: Vec<String>, headless: bool) -> Value {
    json!({"cwd": env.cwd, "args": args, "env": env.vars, "headless": headless})
}

#[cfg(test)]
mod client_flag_tests {
    use super::*;

    #[test]
    fn client_flags_stay_with_the_client() {
        let args = [
            "-p",
            "--daemon",
            "--detach",
            "--socket",
            "/s",
            "--provider",
            "scripted",
            "--wait",
            "--socket=/t",
            "--mode",
            "json",
            "--session-id",
            "x",
            "hello",
        ];
        let got = session_args(args.iter().map(|s| s.to_string()));
        assert_eq!(
            got,
            ["--provider", "scripted", "--session-id", "x", "hello"]
        );
    }
}
