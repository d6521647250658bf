//! Print and JSON modes as clients of the daemon (`--daemon`, `DESIGN.md` §10.5). The session
//! opens in the daemon and the run happens there; this process feeds the run's wire events to
//! the same projector an in-process run uses, so stdout, stderr and the exit code are the
//! same. Ctrl+C, SIGTERM and SIGHUP abort the run in the daemon (exit 130/143/129); `--detach`
//! leaves it running and prints the session id; `--wait` follows a session's latest run to its
//! end. A daemon that goes away mid-run ends the client with 1 and error kind `daemon_lost`.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use serde::Deserialize;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use super::json::JsonProjector;
use super::print::PrintProjector;
use super::{feed_line, Projector, RunSummary, Settled};
use crate::cli::args::Cli;
use crate::client::dial::{Dial, Reader, Writer};
use crate::client::socket::{reconnect_line, CallError, Client, Reattached, Reconnecting};
use crate::error::StartupError;
use crate::exit::Exit;
use crate::kernel::clock::Clock;
use crate::kernel::op::UserInput;
use crate::mode::{Env, Mode};
use crate::output::Output;
use crate::signals::Signals;
use crate::wire::events::{is_rpc_only, ResultLine, SessionLine, SettledError};
use crate::wire::jsonl::MAX_LINE_BYTES;
use crate::wire::jsonrpc::{self as j, Id, Incoming};

/// The error kind of a run whose daemon went away before it settled.
pub const DAEMON_LOST: &str = "daemon_lost";

/// Runs `-p`/`--json` through the daemon.
pub async fn run(
    cli: &Cli,
    env: &Env,
    mode: Mode,
    clock: &Clock,
    out: &mut Output,
) -> Result<Exit, StartupError> {
    crate::setup::check_session_flags(cli, false)?;
    let picked = cli.continue_ || cli.resume.is_some() || cli.session.is_some();
    if cli.wait && !picked {
        return Err(StartupError::usage("--wait needs the session to follow")
            .hint("keel --json --daemon --resume <ID> --wait"));
    }
    if cli.wait && !cli.prompt.is_empty() {
        return Err(StartupError::usage(
            "--wait takes no prompt: it follows a run already started",
        ));
    }
    let mut signals = Signals::new()?;
    let prompt = match cli.wait {
        true => None,
        false => Some(crate::app::read_prompt(cli, env, &mut signals).await?),
    };
    if let Some(prompt) = &prompt {
        fits_a_line(prompt, MAX_LINE_BYTES)?;
    }
    let dial = super::daemon::cli_dial(cli, env)?;
    let conn = super::daemon::start(&dial, env).await?;
    let mut client = Client::greet(conn, false, &dial).await?;
    version_warning(&client.hello, &dial, out);
    let args = super::daemon::session_args(cli.argv.iter().cloned());
    let params = super::daemon::open_params_for(&dial, cli, env, args, !cli.wait);
    let opened = client
        .call("session/open", params)
        .await
        .map_err(|e| open_failed_on(&dial, e))?;
    let warnings = opened["warnings"].as_array().cloned().unwrap_or_default();
    for w in warnings.iter().filter_map(Value::as_str) {
        out.err(&format!("Warning: {w}\n"));
    }
    let session = opened["sessionId"].as_str().unwrap_or_default().to_string();
    let header = header_line(&opened["header"]);
    let epoch = opened["epoch"].as_str().unwrap_or_default().to_string();
    let mut projector: Box<dyn Projector> = match mode {
        Mode::Json => Box::new(JsonProjector::new(Some(session.clone()))),
        _ => Box::new(PrintProjector { quiet: cli.quiet }),
    };
    let started = clock.now_ms();
    let cursor = match &prompt {
        Some(_) => opened["seq"].as_u64().unwrap_or(0),
        None => {
            let Some(seq) = opened["lastRun"]["seq"].as_u64() else {
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
    if let (true, Some(prompt)) = (cli.detach, &prompt) {
        call_prompt(&mut client, &session, prompt).await?;
        return Ok(detached(mode, &header, &session, out));
    }
    if mode == Mode::Json {
        let _ = out.out(header.as_bytes());
    }
    let attached = client
        .call(
            "session/attach",
            json!({"sessionId": session, "cursor": {"epoch": epoch, "seq": cursor}}),
        )
        .await
        .map_err(|e| StartupError::config(format!("cannot attach to session {session}: {e}")))?;
    let mut follow = Follow {
        session,
        dial,
        projector: projector.as_mut(),
        summary: RunSummary::default(),
        stop: None,
        // Replayed events follow the cursor; a snapshot moves it (see `missed`).
        seq: cursor,
        epoch,
        waiting_for_start: prompt.is_none(),
        abort_due: false,
    };
    if attached["mode"] == "snapshot" {
        follow.missed(&attached, out);
        let streaming = attached["snapshot"]["state"]["isStreaming"].as_bool();
        let settled = &opened["lastRun"]["settled"];
        if prompt.is_none() && streaming == Some(false) && settled.is_object() {
            // The run being waited for is over and its events are gone: its last answer and
            // its verdict are all there is to report.
            follow.already_settled(&attached["snapshot"]["messages"], settled, out);
            let summary = std::mem::take(&mut follow.summary);
            return Ok(crate::app::conclude(
                summary,
                None,
                projector.as_mut(),
                0,
                out,
            ));
        }
    }
    let mut pending: Vec<(String, Value)> = client.notifications.drain(..).collect();
    let (read, mut write) = client.into_parts();
    if let Some(prompt) = prompt {
        let line = j::request_line(
            &Id::string("prompt"),
            "prompt",
            &prompt_params(&follow.session, &prompt),
        )
        .map_err(|e| StartupError::internal(e.to_string()))?;
        if write.write_all(line.as_bytes()).await.is_err() {
            pending.clear();
        }
    }
    let ended = follow.run(pending, read, write, &mut signals, out).await?;
    let mut summary = follow.summary;
    if let Ended::Lost(why) = ended {
        summary.settled = Some(Settled {
            outcome: "failed".into(),
            error: Some(SettledError {
                kind: DAEMON_LOST.into(),
                message: format!(
                    "the keel daemon went away before the run ended ({why}); the session file keeps every completed entry, and `keel --continue` resumes it"
                ),
            }),
        });
    }
    let duration = (clock.now_ms() - started).max(0) as u64;
    Ok(crate::app::conclude(
        summary,
        follow.stop,
        projector.as_mut(),
        duration,
        out,
    ))
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
fn header_line(h: &Value) -> String {
    let s = |k: &str| h[k].as_str().unwrap_or_default();
    let line = SessionLine {
        kind: "session",
        version: 3,
        id: s("id"),
        timestamp: s("timestamp"),
        cwd: s("cwd"),
        parent_session: h["parentSession"].as_str(),
    };
    let mut text = serde_json::to_string(&line).unwrap_or_default();
    text.push('\n');
    text
}

/// pi's `prompt` params for `input` in `session`: `message`, and `images` when it has any.
fn prompt_params(session: &str, input: &UserInput) -> Value {
    let mut params = json!({"sessionId": session, "message": input.text});
    if !input.images.is_empty() {
        params["images"] = json!(input.images);
    }
    params
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
    match client.call("prompt", prompt_params(session, prompt)).await {
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
fn version_warning(hello: &Value, dial: &Dial, out: &mut Output) {
    let theirs = hello["daemon"]["version"].as_str().unwrap_or("?");
    let ours = env!("CARGO_PKG_VERSION");
    if dial.remote().is_some() && theirs != ours {
        out.err(&format!(
            "Warning: the daemon on {} is keel {theirs}, this is keel {ours}\n",
            dial.describe()
        ));
    }
}

/// How following a run ended.
enum Ended {
    Settled,
    /// The daemon went away: why.
    Lost(String),
}

/// Following one run's events.
struct Follow<'a> {
    session: String,
    dial: Dial,
    projector: &'a mut dyn Projector,
    summary: RunSummary,
    stop: Option<crate::app::Stop>,
    epoch: String,
    /// The last `seq` seen.
    seq: u64,
    /// `--wait`: lines before the run's `agent_start` are not the run's.
    waiting_for_start: bool,
    /// stdout failed: the run is to be aborted.
    abort_due: bool,
}

#[derive(Deserialize)]
struct EventParams<'a> {
    #[serde(rename = "sessionId")]
    session_id: std::borrow::Cow<'a, str>,
    seq: u64,
    #[serde(borrow)]
    event: &'a serde_json::value::RawValue,
}

/// What one line from the daemon means for the run.
enum Line {
    Event,
    Settled,
    Lagged,
    Lost(String),
    Other,
}

impl Follow<'_> {
    /// Feeds events until the run settles or the daemon goes away; signals and a failing
    /// stdout abort the run in the daemon. A client dropped for falling behind reconnects with
    /// its cursor.
    async fn run(
        &mut self,
        pending: Vec<(String, Value)>,
        read: BufReader<Reader>,
        write: Writer,
        signals: &mut Signals,
        out: &mut Output,
    ) -> Result<Ended, StartupError> {
        for (method, params) in pending {
            let line = json!({"jsonrpc": "2.0", "method": method, "params": params}).to_string();
            if let Line::Settled = self.line(line.as_bytes(), out) {
                return Ok(Ended::Settled);
            }
        }
        let (mut read, mut write) = (read, write);
        loop {
            let mut buf = Vec::new();
            let got = tokio::select! {
                got = read.read_until(b'\n', &mut buf) => got,
                n = signals.next() => {
                    if self.stop.is_some() {
                        // A second signal: stop waiting for the run to settle.
                        self.summary.settled.get_or_insert(Settled {
                            outcome: "aborted".into(),
                            error: None,
                        });
                        return Ok(Ended::Settled);
                    }
                    self.halt(crate::app::Stop::Signal(n), &mut write).await;
                    continue;
                }
            };
            let what = match got {
                Ok(0) => Line::Lost("it closed the connection".into()),
                Err(e) => Line::Lost(e.to_string()),
                Ok(_) => self.line(buf.strip_suffix(b"\n").unwrap_or(&buf), out),
            };
            if out.flush().is_err() && self.stop.is_none() {
                self.stop = Some(crate::app::stdout_stop(out));
                self.abort_due = true;
            }
            if std::mem::take(&mut self.abort_due) {
                self.send_abort(&mut write).await;
            }
            match what {
                Line::Settled => return Ok(Ended::Settled),
                Line::Lost(why) if self.dial.remote().is_some() => {
                    match self.reconnect_remote(&why, signals, out).await {
                        Some((r, w)) => (read, write) = (r, w),
                        None => return Ok(Ended::Lost(why)),
                    }
                }
                Line::Lost(why) => return Ok(Ended::Lost(why)),
                Line::Lagged => match self.reconnect(out).await {
                    Some((r, w)) => (read, write) = (r, w),
                    None => {
                        return Ok(Ended::Lost(
                            "this client fell behind and could not reconnect".into(),
                        ))
                    }
                },
                Line::Event | Line::Other => {}
            }
        }
    }

    /// Handles one line from the daemon.
    fn line(&mut self, line: &[u8], out: &mut Output) -> Line {
        let (method, params) = match j::parse_line(line) {
            Incoming::Notification { method, params } => (method, params),
            Incoming::Response { id, result: Err(e) } if id == Id::string("prompt") => {
                // The prompt was refused (the session is busy): nothing will run.
                self.summary.settled = Some(Settled {
                    outcome: "failed".into(),
                    error: Some(SettledError {
                        kind: "busy".into(),
                        message: format!("the session cannot take a prompt now: {}", e.message),
                    }),
                });
                return Line::Settled;
            }
            // `abort` is answered after the run settled; an answer with no settle seen means
            // nothing was running (a `--wait` for a run that ended as it was interrupted).
            Incoming::Response { id, .. } if id == Id::string("abort") => {
                if self.summary.settled.is_some() {
                    return Line::Other;
                }
                self.summary.settled = Some(Settled {
                    outcome: "aborted".into(),
                    error: None,
                });
                return Line::Settled;
            }
            _ => return Line::Other,
        };
        match method.as_str() {
            "session/event" => {}
            "daemon/lagged" => return Line::Lagged,
            "daemon/shutdown" => return Line::Lost("it is shutting down".into()),
            _ => return Line::Other,
        }
        let Some(params) = params else {
            return Line::Other;
        };
        let Ok(p) = serde_json::from_str::<EventParams>(params.get()) else {
            return Line::Other;
        };
        if p.session_id != self.session || p.seq <= self.seq {
            return Line::Other;
        }
        self.seq = p.seq;
        let text = p.event.get();
        let Some(kind) = super::public::kind_of(text) else {
            return Line::Other;
        };
        if self.waiting_for_start {
            if kind != "agent_start" {
                return Line::Other;
            }
            self.waiting_for_start = false;
        }
        if is_rpc_only(&kind, text) {
            return Line::Other;
        }
        let fed = feed_line(&kind, text, self.projector, &mut self.summary, out);
        if fed.write_failed && self.stop.is_none() {
            // `run` sends the abort.
            self.stop = Some(crate::app::stdout_stop(out));
            self.abort_due = true;
        }
        match fed.settled {
            true => Line::Settled,
            false => Line::Event,
        }
    }

    /// Aborts the run in the daemon; the first reason given is the one reported.
    async fn halt(&mut self, why: crate::app::Stop, write: &mut Writer) {
        if self.stop.is_none() {
            self.stop = Some(why);
        }
        self.send_abort(write).await;
    }

    async fn send_abort(&self, write: &mut Writer) {
        let params = json!({"sessionId": self.session});
        if let Ok(line) = j::request_line(&Id::string("abort"), "abort", &params) {
            let _ = write.write_all(line.as_bytes()).await;
        }
    }

    /// Connects again after `daemon/lagged` and re-attaches from the last event seen.
    async fn reconnect(&mut self, out: &mut Output) -> Option<(BufReader<Reader>, Writer)> {
        self.attach_again(&self.dial.clone(), out).await.ok()
    }

    /// The link to the remote host dropped: connect again with backoff and attach from the
    /// last event seen, while the run goes on there. `None` when the daemon no longer holds the
    /// session, after [`crate::client::dial::Backoff::GIVE_UP`], or on a signal (the run is
    /// left running).
    async fn reconnect_remote(
        &mut self,
        why: &str,
        signals: &mut Signals,
        out: &mut Output,
    ) -> Option<(BufReader<Reader>, Writer)> {
        out.err(&reconnect_line(&self.dial, &Reconnecting::Lost(why)));
        let cursor = (self.epoch.as_str(), self.seq);
        let back = tokio::select! {
            back = Client::reattach(&self.dial, &self.session, cursor, false) => back,
            _ = signals.next() => return None,
        };
        match back {
            Reattached::Back(client, attached, attempts) => {
                out.err(&reconnect_line(&self.dial, &Reconnecting::Back(attempts)));
                Some(self.resumed(*client, &attached, out))
            }
            Reattached::Refused(why) => {
                out.err(&reconnect_line(&self.dial, &Reconnecting::Refused(&why)));
                None
            }
            Reattached::GaveUp => None,
        }
    }

    /// Connects to `dial` and attaches to the session from the cursor; the events that came
    /// with the answer are fed at once.
    async fn attach_again(
        &mut self,
        dial: &Dial,
        out: &mut Output,
    ) -> Result<(BufReader<Reader>, Writer), CallError> {
        let mut client = Client::dial(dial, false)
            .await
            .map_err(|e| CallError::Lost(e.to_string()))?;
        let attached = client
            .call(
                "session/attach",
                json!({"sessionId": self.session, "cursor": {"epoch": self.epoch, "seq": self.seq}}),
            )
            .await?;
        Ok(self.resumed(client, &attached, out))
    }

    /// Attached again (`attached` is `session/attach`'s answer): a snapshot is said, the events
    /// that came with the answer are fed, and the connection's halves go on.
    fn resumed(
        &mut self,
        mut client: Client,
        attached: &Value,
        out: &mut Output,
    ) -> (BufReader<Reader>, Writer) {
        if attached["mode"] == "snapshot" {
            self.missed(attached, out);
        }
        let pending: Vec<(String, Value)> = client.notifications.drain(..).collect();
        for (method, params) in pending {
            let line = json!({"jsonrpc": "2.0", "method": method, "params": params}).to_string();
            self.line(line.as_bytes(), out);
        }
        client.into_parts()
    }

    /// Feeds the last assistant message of `messages` and the run's `agent_settled` line.
    fn already_settled(&mut self, messages: &Value, settled: &Value, out: &mut Output) {
        let last = messages
            .as_array()
            .and_then(|m| m.iter().rev().find(|m| m["role"] == "assistant"));
        if let Some(m) = last {
            let line = json!({"type": "message_end", "message": m}).to_string();
            feed_line("message_end", &line, self.projector, &mut self.summary, out);
        }
        feed_line(
            "agent_settled",
            &settled.to_string(),
            self.projector,
            &mut self.summary,
            out,
        );
    }

    /// The daemon no longer holds the events after the cursor: say so, and go on from the
    /// snapshot's `seq` (a `--wait` for a run that already settled ends with its verdict).
    fn missed(&mut self, attached: &Value, out: &mut Output) {
        out.err("Warning: the daemon no longer holds this run's earlier events; showing it from now on\n");
        self.seq = attached["seq"].as_u64().unwrap_or(self.seq);
        self.epoch = attached["epoch"].as_str().unwrap_or_default().to_string();
        self.waiting_for_start = false;
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
