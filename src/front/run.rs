//! Print and JSON runs (`-p`, `--json`): one path whether the session lives in this process
//! (a host started here, [`Link::headless`]) or in the daemon (`--daemon`, `--remote`:
//! `session/open` and an attach, [`super::client`]). The prompt is sent as pi's `prompt`
//! command through the session's [`Link`], and the stream's wire lines are projected by the
//! print or JSON projector until the run settles; then the verdict, the final answer or
//! result line, and the exit. Ctrl+C, SIGTERM and SIGHUP abort the run (exit 130/143/129, the
//! session saved); a closed stdout aborts it as SIGPIPE (141), a failing one as `output_write`.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use std::sync::Arc;

use serde_json::Value;

use super::follow::{Ended, Follow};
use super::json::JsonProjector;
use super::print::PrintProjector;
use super::{Projector, RunSummary, Settled};
use crate::client::dial::Dial;
use crate::client::link::Link;
use crate::error::StartupError;
use crate::exit::{Exit, SIGPIPE};
use crate::front::invocation::Invocation;
use crate::kernel::agent::AgentConfig;
use crate::kernel::clock::Clock;
use crate::kernel::op::UserInput;
use crate::kernel::provider::Provider;
use crate::mode::{Env, Mode};
use crate::output::{Output, StdoutFailure};
use crate::setup;
use crate::signals::Signals;
use crate::wire::events::SettledError;

/// How long a session in this process may take to settle and be saved after its run.
const CLOSE_GRACE: std::time::Duration = std::time::Duration::from_secs(3);

/// A run's session, opened and attached, before its prompt is sent.
pub(crate) struct Opened {
    pub link: Link,
    pub id: String,
    pub epoch: String,
    /// Events after this `seq` are the run's.
    pub cursor: u64,
    /// The daemon the session lives in (`None`: this process).
    pub dial: Option<Dial>,
    /// Through the daemon: `session/attach`'s answer and `session/open`'s `lastRun.settled`.
    pub attached: Option<(crate::wire::protocol::session::AttachResult, Value)>,
}

/// What a run in this process has before its prompt is read: the provider and the agent's
/// settings (their warnings already said).
struct Here {
    provider: Arc<dyn Provider>,
    config: AgentConfig,
    skills: Vec<crate::skills::Skill>,
    /// The startup warnings said on stderr: the host publishes them too (`notify`), as a
    /// daemon session's host does, so JSON mode has them as events.
    warnings: Vec<String>,
}

/// Runs `-p`/`--json`, with the session in this process or (`daemon`) in the daemon.
pub async fn run(
    inv: &Invocation,
    settings: &setup::Settings,
    env: &Env,
    mode: Mode,
    clock: &Clock,
    daemon: Option<Dial>,
    out: &mut Output,
) -> Result<Exit, StartupError> {
    setup::check_session_flags(settings, false)?;
    // `-w` in this process: the session is set up in its worktree (the daemon makes a
    // daemon session's).
    let entered = match daemon {
        Some(_) => None,
        None => setup::worktree::enter(settings, env, mode)?,
    };
    let (settings, env) = match &entered {
        Some((s, e)) => (s, e),
        None => (settings, env),
    };
    let here = match &daemon {
        Some(_) => {
            super::client::check_wait(inv)?;
            None
        }
        None => Some(start_here(settings, env, out).await?),
    };
    // Installed before stdin is read: a signal while keel waits for it ends the run like any other.
    let mut signals = Signals::new()?;
    let prompt = match inv.wait && daemon.is_some() {
        true => None,
        false => Some(read_prompt(inv, env, &mut signals).await?),
    };
    let opened = match (daemon, here) {
        (Some(dial), _) => {
            match super::client::open(inv, env, mode, dial, prompt.as_ref(), out).await? {
                Ok(opened) => opened,
                Err(exit) => return Ok(exit),
            }
        }
        (None, Some(here)) => open_here(settings, env, mode, clock, here, out).await?,
        (None, None) => return Err(StartupError::internal("a run with no session")),
    };
    let exit = follow(inv, mode, clock, opened, prompt, &mut signals, out).await;
    // What became of the worktree (its host ended it with the session).
    if let Some(note) = setup::worktree::ended_note(env) {
        out.err(&format!("keel: {note}\n"));
    }
    exit
}

/// The provider and agent settings of a run in this process, their warnings on stderr.
async fn start_here(
    settings: &setup::Settings,
    env: &Env,
    out: &mut Output,
) -> Result<Here, StartupError> {
    let provider = setup::provider(settings, env).await?;
    let (mut config, mut warnings, skills) = setup::agent_config(settings, env, false)?;
    warnings.extend(setup::clamp_thinking(provider.as_ref(), &mut config));
    for w in &warnings {
        out.err(&format!("Warning: {w}\n"));
    }
    Ok(Here {
        provider,
        config,
        skills,
        warnings,
    })
}

/// Opens the session the flags ask for and serves it in this process (JSON mode: the header
/// line is written).
async fn open_here(
    settings: &setup::Settings,
    env: &Env,
    mode: Mode,
    clock: &Clock,
    here: Here,
    out: &mut Output,
) -> Result<Opened, StartupError> {
    let agent = (here.config, here.skills);
    let (host, warnings) =
        setup::headless_host_setup(settings, env, clock, agent, here.provider, here.warnings)?;
    for w in &warnings {
        out.err(&format!("Warning: {w}\n"));
    }
    if mode == Mode::Json {
        let worktree = host.worktree.as_ref().map(|held| {
            let w = held.worktree();
            (w.path.display().to_string(), w.branch)
        });
        let line = super::json::header_line(host.store.header(), worktree.as_ref());
        let _ = out.out(line.as_bytes());
    }
    let link = Link::headless(host)
        .await
        .map_err(|e| StartupError::internal(format!("the session did not start: {e}")))?;
    Ok(Opened {
        id: link.session_id().to_string(),
        link,
        epoch: String::new(),
        cursor: 0,
        dial: None,
        attached: None,
    })
}

/// Sends the prompt (none: `--wait`) and projects the run until it settles; a session in
/// this process is then saved and closed.
async fn follow(
    inv: &Invocation,
    mode: Mode,
    clock: &Clock,
    mut opened: Opened,
    prompt: Option<UserInput>,
    signals: &mut Signals,
    out: &mut Output,
) -> Result<Exit, StartupError> {
    let mut projector: Box<dyn Projector> = match mode {
        Mode::Json => Box::new(JsonProjector::new(Some(opened.id.clone()))),
        _ => Box::new(PrintProjector { quiet: inv.quiet }),
    };
    // The run's duration leaves startup out.
    let started = clock.now_ms();
    let mut follow = Follow::new(opened.id.clone(), opened.dial.clone(), projector.as_mut());
    follow.epoch = std::mem::take(&mut opened.epoch);
    follow.seq = opened.cursor;
    follow.waiting_for_start = prompt.is_none();
    if let Some((attached, settled)) = &opened.attached {
        if super::client::attached(&mut follow, attached, settled, prompt.is_none(), out) {
            let summary = std::mem::take(&mut follow.summary);
            return Ok(conclude(summary, None, projector.as_mut(), 0, out));
        }
    }
    let params = prompt.map(|p| super::client::prompt_params(&opened.id, &p));
    let ended = follow.run(&mut opened.link, params, signals, out).await;
    let (mut summary, stop) = (std::mem::take(&mut follow.summary), follow.stop.take());
    match ended {
        Ended::Settled => {}
        Ended::Lost(why) => summary.settled = Some(super::client::daemon_lost(&why)),
        Ended::SessionGone => {
            out.err("Error: the session recorder crashed; the session file may be incomplete\n");
        }
    }
    // Print mode's answer does not wait for the session file's last writes and syncs: a run
    // here that succeeded prints it now, and a write that fails after that still fails the run
    // (exit 1, the error on stderr).
    let answered = opened.dial.is_none()
        && mode == Mode::Print
        && stop.is_none()
        && summary.exit() == Some(Exit::Success);
    if answered {
        projector.finish(&summary, Exit::Success, 0, out);
    }
    if opened.dial.is_none() {
        // A write that failed after the run settled (its last entries, the final sync) fails it too.
        if let Some(message) = opened.link.commands().close(CLOSE_GRACE).await {
            summary.settled = Some(Settled {
                outcome: "failed".into(),
                error: Some(SettledError {
                    kind: crate::wire::events::ErrorKind::SessionWrite,
                    message,
                }),
            });
        }
    }
    let duration = (clock.now_ms() - started).max(0) as u64;
    if answered && summary.exit() == Some(Exit::Success) {
        return Ok(after_finish(Exit::Success, &summary, out));
    }
    Ok(conclude(summary, stop, projector.as_mut(), duration, out))
}

/// The end of a print or JSON run: the exit its verdict and `stop` call for, the final answer
/// or result line, and the exit once those bytes are out.
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

/// Why a run was stopped before it ended by itself.
pub(crate) enum Stop {
    /// Signal n (SIGPIPE for a closed stdout).
    Signal(i32),
    /// stdout failed for another reason: the failure's message.
    Output(String),
}

/// Why a stdout that took no more bytes stops the run: SIGPIPE for a closed pipe, a failed
/// write otherwise.
pub(crate) fn stdout_stop(out: &Output) -> Stop {
    match out.stdout_failure() {
        Some(failure @ StdoutFailure::Failed(_)) => Stop::Output(failure.message()),
        Some(StdoutFailure::Closed) | None => Stop::Signal(SIGPIPE),
    }
}

/// The most piped stdin print and JSON modes take as part of the prompt (like RPC's line cap).
pub const MAX_STDIN_BYTES: usize = 16 * 1024 * 1024;

/// The first message: piped stdin, a blank line, then the `@file` mentions' blocks and the
/// other arguments (see [`crate::mentions`]). The mentions are read first, so a file that
/// cannot be included fails before stdin is waited for. A signal while stdin is read ends keel
/// with 128 + n.
pub(crate) async fn read_prompt(
    inv: &Invocation,
    env: &Env,
    signals: &mut Signals,
) -> Result<UserInput, StartupError> {
    let home = env.vars.get("HOME").map(std::path::Path::new);
    let expanded = crate::mentions::expand(&inv.prompt, &env.cwd, home)?;
    let mut piped = String::new();
    if !env.stdin_tty {
        tracing::debug!("reading stdin");
        let bytes = tokio::select! {
            read = read_stdin(MAX_STDIN_BYTES) => read?,
            n = signals.next() => {
                let why = RunSummary::default().error(Exit::Signal(n)).map(|(_, why)| why).unwrap_or_default();
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
        options: Default::default(),
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
