//! Print and JSON runs with their session in the daemon (`--daemon`, `--remote`,
//! `DESIGN.md` §10.5): `session/open` and an attach on one connection, which then carries the
//! session's [`Link`] ([`super::run`] follows the run on it, as it follows one in this
//! process). `--detach` leaves the run going and prints the session id; `--wait` follows a
//! session's latest run to its end. Also the errors of an open, as the other front ends of the
//! daemon report them.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use serde_json::{json, Value};

use crate::wire::protocol::daemon::HelloResult;
use crate::wire::protocol::session::SessionHeader;
use crate::wire::protocol::session::{self as proto, AttachMode, AttachResult};

use super::follow::Follow;
use super::run::Opened;
use super::Settled;
use crate::client::dial::Dial;
use crate::client::link::Link;
use crate::client::socket::{CallError, Client};
use crate::error::StartupError;
use crate::exit::Exit;
use crate::front::invocation::Invocation;
use crate::kernel::op::UserInput;
use crate::mode::{Env, Mode};
use crate::output::Output;
use crate::wire::events::{ErrorKind, Outcome, ResultLine, SessionLine, SettledError};
use crate::wire::jsonl::MAX_LINE_BYTES;
use crate::wire::jsonrpc::{self as j, Id};
use crate::wire::pi::Command;

/// `--wait` follows a session's run: it needs the session, and takes no prompt.
pub(crate) fn check_wait(inv: &Invocation) -> Result<(), StartupError> {
    if inv.wait && !inv.picks_a_session() {
        return Err(StartupError::usage("--wait needs the session to follow")
            .hint("keel --json --daemon --resume <ID> --wait"));
    }
    if inv.wait && !inv.prompt.is_empty() {
        return Err(StartupError::usage(
            "--wait takes no prompt: it follows a run already started",
        ));
    }
    Ok(())
}

/// Opens the session in the daemon `dial` names and attaches to it (JSON mode: the header
/// line is written first). `Err(exit)`: the run ended here (`--detach`).
pub(crate) async fn open(
    inv: &Invocation,
    env: &Env,
    mode: Mode,
    dial: Dial,
    prompt: Option<&UserInput>,
    out: &mut Output,
) -> Result<Result<Opened, Exit>, StartupError> {
    if let Some(prompt) = prompt {
        fits_a_line(prompt, MAX_LINE_BYTES)?;
    }
    let conn = crate::client::open::start(&dial, env).await?;
    let mut client = Client::greet(conn, false, &dial).await?;
    version_warning(&client.hello, &dial, out);
    let params = inv.open_params(&dial, env, inv.spec.clone(), !inv.wait);
    let opened = client
        .call::<proto::Open>(&params)
        .await
        .map_err(|e| open_failed_on(&dial, e))?;
    for w in &opened.warnings {
        out.err(&format!("Warning: {w}\n"));
    }
    let session = opened.session_id.clone();
    let header = header_line(opened.header.as_ref());
    let epoch = opened.epoch.clone().unwrap_or_default();
    let cursor = match prompt {
        Some(_) => opened.seq,
        None => {
            let Some(seq) = opened.last_run.as_ref().map(|r| r.seq) else {
                return Err(StartupError::config(format!(
                    "session {session} has no run in the daemon to wait for"
                ))
                .hint(
                    "--wait follows a run started with --detach while the daemon still holds it",
                ));
            };
            seq - 1
        }
    };
    if let (true, Some(prompt)) = (inv.detach, prompt) {
        call_prompt(&mut client, &session, prompt).await?;
        return Ok(Err(detached(mode, &header, &session, out)));
    }
    if mode == Mode::Json {
        let _ = out.out(header.as_bytes());
    }
    let (link, attached) = Link::attach(client, &dial, &session, Some((&epoch, cursor)))
        .await
        .map_err(|e| StartupError::config(format!("cannot attach to session {session}: {e}")))?;
    Ok(Ok(Opened {
        link,
        id: session,
        epoch,
        cursor,
        dial: Some(dial),
        attached: Some((
            attached,
            opened.last_run.and_then(|r| r.settled).unwrap_or_default(),
        )),
    }))
}

/// Reads `session/attach`'s answer: a snapshot means the events after the cursor are gone.
/// True when the run `--wait` follows is over already: its last answer and its verdict
/// (`settled`, `session/open`'s `lastRun.settled`) are fed, and all there is to report.
pub(crate) fn attached(
    follow: &mut Follow<'_>,
    attached: &AttachResult,
    settled: &Value,
    waiting: bool,
    out: &mut Output,
) -> bool {
    if attached.mode != AttachMode::Snapshot {
        return false;
    }
    follow.missed(attached.seq, &attached.epoch, out);
    let Some(snapshot) = &attached.snapshot else {
        return false;
    };
    if waiting && !snapshot.state.is_streaming && settled.is_object() {
        let messages = serde_json::to_value(&snapshot.messages).unwrap_or_default();
        follow.already_settled(&messages, settled, out);
        return true;
    }
    false
}

/// The verdict of a run whose daemon went away (why) before it settled.
pub(crate) fn daemon_lost(why: &str) -> Settled {
    Settled {
        outcome: Outcome::Failed,
        error: Some(SettledError {
            kind: ErrorKind::DaemonLost,
            message: format!(
                "the keel daemon went away before the run ended ({why}); the session file keeps every completed entry, and `keel --continue` resumes it"
            ),
        }),
    }
}

/// A `session/open` error as the error a client started in-process would have reported.
pub(crate) fn open_failed(e: CallError) -> StartupError {
    match e {
        CallError::Rpc(e) => e
            .data
            .as_ref()
            .and_then(StartupError::from_json)
            .unwrap_or_else(|| {
                StartupError::config(format!(
                    "the daemon could not open the session: {}",
                    e.message
                ))
            }),
        CallError::Lost(why) => StartupError::config(format!(
            "the daemon went away while opening the session: {why}"
        )),
    }
}

/// [`open_failed`] for the daemon `dial` names: a remote one is named, and a directory missing
/// there gets the way to name another.
pub(crate) fn open_failed_on(dial: &Dial, e: CallError) -> StartupError {
    let Some(remote) = dial.remote() else {
        return open_failed(e);
    };
    let no_dir = matches!(&e, CallError::Rpc(r) if r.message.starts_with("cwd "));
    let mut err = open_failed(e);
    err.message = err
        .message
        .replace("the daemon ", &format!("the daemon on {} ", remote.host));
    if no_dir {
        err = err.hint(format!(
            "--cwd DIR names the session's directory on {} (the default is this directory's path)",
            remote.host
        ));
    }
    err
}

/// The JSON-mode header line for `session/open`'s `header`.
fn header_line(h: Option<&SessionHeader>) -> String {
    let s = |f: fn(&SessionHeader) -> &str| h.map_or("", f);
    let line = SessionLine {
        kind: "session",
        version: 3,
        id: s(|h| &h.id),
        timestamp: s(|h| &h.timestamp),
        cwd: s(|h| &h.cwd),
        parent_session: h.and_then(|h| h.parent_session.as_deref()),
        worktree: h.and_then(|h| h.worktree.as_deref()),
        branch: h.and_then(|h| h.branch.as_deref()),
    };
    let mut text = serde_json::to_string(&line).unwrap_or_default();
    text.push('\n');
    text
}

/// pi's `prompt` params for `input` in `session`: `message`, and `images` when it has any.
pub(crate) fn prompt_params(session: &str, input: &UserInput) -> Value {
    let prompt = Command::Prompt {
        message: input.text.clone(),
        images: input.images.clone(),
        streaming_behavior: None,
    };
    let mut params = serde_json::Map::new();
    params.insert("sessionId".into(), json!(session));
    params.extend(prompt.fields());
    Value::Object(params)
}

/// The most a session id adds to a `prompt` line, besides what [`prompt_params`] writes for an
/// empty one.
const SESSION_ID_ROOM: usize = 1024;

/// Whether the `prompt` request for `input` fits one line of at most `cap` bytes: a longer one
/// the daemon would refuse without an id to answer, so it is a usage error here, before a
/// session is opened.
fn fits_a_line(input: &UserInput, cap: usize) -> Result<(), StartupError> {
    let line = j::request_line(&Id::string("prompt"), "prompt", &prompt_params("", input))
        .map_err(|e| StartupError::internal(e.to_string()))?;
    if line.len() + SESSION_ID_ROOM <= cap {
        return Ok(());
    }
    Err(StartupError::usage(format!(
        "the prompt is over the daemon's {} MiB line limit ({} bytes with its files, in JSON)",
        cap / (1024 * 1024),
        line.len()
    ))
    .hint("send less, or run without --daemon"))
}

async fn call_prompt(
    client: &mut Client,
    session: &str,
    prompt: &UserInput,
) -> Result<(), StartupError> {
    let busy = |m: String| {
        StartupError::config(format!("the session cannot take a prompt now: {m}")).hint(format!(
            "follow its run with: keel --daemon --resume {session} --wait"
        ))
    };
    match client
        .call_raw("prompt", prompt_params(session, prompt))
        .await
    {
        Ok(_) => Ok(()),
        Err(CallError::Rpc(e)) => Err(busy(e.message)),
        Err(CallError::Lost(why)) => Err(StartupError::config(format!(
            "the daemon went away before the run started: {why}"
        ))),
    }
}

/// `--detach`: the session id (print mode), or the header and a `detached` result line.
fn detached(mode: Mode, header: &str, session: &str, out: &mut Output) -> Exit {
    let text = match mode {
        Mode::Json => {
            let line = ResultLine {
                kind: "result",
                outcome: "detached",
                exit_code: 0,
                session_id: Some(session),
                final_text: "",
                usage: &Default::default(),
                duration_ms: 0,
                error: None,
                structured_output: None,
            };
            format!(
                "{header}{}\n",
                serde_json::to_string(&line).unwrap_or_default()
            )
        }
        _ => format!("{session}\n"),
    };
    match out.out(text.as_bytes()).and_then(|_| out.flush()) {
        Ok(()) => Exit::Success,
        Err(_) => Exit::Signal(crate::exit::SIGPIPE),
    }
}

/// A remote daemon of another keel version is named once on stderr (the protocol is the same
/// major version, or `hello` would have failed).
fn version_warning(hello: &HelloResult, dial: &Dial, out: &mut Output) {
    let theirs = hello.daemon.version.as_str();
    let ours = env!("CARGO_PKG_VERSION");
    if dial.remote().is_some() && theirs != ours {
        out.err(&format!(
            "Warning: the daemon on {} is keel {theirs}, this is keel {ours}\n",
            dial.describe()
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::message::Content;

    fn with_image() -> UserInput {
        UserInput {
            text: "<file name=\"/w/p.png\"></file>\nwhat is this?".into(),
            images: vec![Content::Image {
                data: "iVBORw0KGgo=".into(),
                mime_type: "image/png".into(),
            }],
            options: Default::default(),
        }
    }

    #[test]
    fn the_prompt_request_carries_images_as_pi_sends_them() {
        assert_eq!(
            prompt_params("s1", &with_image()),
            json!({
                "sessionId": "s1",
                "message": "<file name=\"/w/p.png\"></file>\nwhat is this?",
                "images": [{"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}],
            })
        );
        assert_eq!(
            prompt_params("s1", &UserInput::text("hi")),
            json!({"sessionId": "s1", "message": "hi"})
        );
    }

    #[test]
    fn a_prompt_over_the_daemon_line_limit_is_a_usage_error() {
        let input = with_image();
        let line =
            j::request_line(&Id::string("prompt"), "prompt", &prompt_params("", &input)).unwrap();
        let room = line.len() + SESSION_ID_ROOM;
        assert!(fits_a_line(&input, room).is_ok());
        let e = fits_a_line(&input, room - 1).unwrap_err();
        assert_eq!(e.exit(), Exit::Usage);
        assert!(e.message.contains("line limit"), "{e:?}");
    }
}
