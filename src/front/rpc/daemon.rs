//! `keel --mode rpc --daemon`: pi's RPC over stdio, with the session living in the daemon.
//! Each stdin request becomes a protocol v1 call with the session's id; its answer is written
//! in pi's envelope, and the session's events exactly as the daemon numbered them (the same
//! lines RPC mode writes in-process). Closing stdin waits for an active run to settle, then
//! exits 0; the session stays live in the daemon. A daemon that goes away ends this with 1.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use std::collections::HashMap;

use serde_json::{json, Map, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

use super::{reader, Input};
use crate::cli::Cli;
use crate::error::StartupError;
use crate::exit::Exit;
use crate::front::signals::Signals;
use crate::mode::Env;
use crate::output::Output;
use crate::wire::jsonl::Frame;
use crate::wire::jsonrpc::{self as j, Id, Incoming};
use crate::wire::rpc;

/// Flags that only concern this client, never the daemon's session.
const CLIENT_FLAGS: &[&str] = &["--daemon", "--rpc", "--json", "-p", "--print"];
const CLIENT_FLAGS_WITH_VALUE: &[&str] = &["--socket", "--mode"];

/// What a sent request waits for: pi's id and command.
struct Waiting {
    id: Option<rpc::Id>,
    command: String,
    /// The order it was sent in.
    n: u64,
}

/// Commands whose answer can come after the answers of later requests (in-process too).
const LATE: &[&str] = &[
    "abort",
    "bash",
    "compact",
    "new_session",
    "switch_session",
    "fork",
    "clone",
];

/// Lines this client wrote itself (a line it could not parse), held until every earlier
/// request that answers at once has been answered, so they keep their in-process place.
struct Held {
    after: u64,
    line: String,
}

fn release(
    held: &mut std::collections::VecDeque<Held>,
    waiting: &HashMap<String, Waiting>,
    out: &mut Output,
) {
    while let Some(h) = held.front() {
        let blocked = waiting
            .values()
            .any(|w| w.n <= h.after && !LATE.contains(&w.command.as_str()));
        if blocked {
            return;
        }
        if let Some(h) = held.pop_front() {
            let _ = out.out(h.line.as_bytes());
        }
    }
}

/// Serves RPC mode against the daemon until stdin closes or a signal arrives.
pub async fn serve(cli: &Cli, env: &Env, out: &mut Output) -> Result<Exit, StartupError> {
    let mut signals = Signals::new()?;
    let socket = crate::front::daemon::socket_for(env, cli.socket.as_deref())?;
    let stream = crate::front::daemon::start(&socket, env).await?;
    let mut client = crate::daemon::client::Client::greet(stream, true).await?;
    let args = session_args(std::env::args().skip(1));
    let vars: Map<String, Value> = env
        .vars
        .iter()
        .filter(|(k, _)| {
            k.starts_with("KEEL_") || k.ends_with("_API_KEY") || k.ends_with("_BASE_URL")
        })
        .map(|(k, v)| (k.clone(), json!(v)))
        .collect();
    let opened = client
        .call(
            "session/open",
            json!({"cwd": env.cwd, "args": args, "env": vars}),
        )
        .await
        .map_err(|e| StartupError::config(format!("the daemon could not open the session: {e}")))?;
    let session = opened["sessionId"].as_str().unwrap_or_default().to_string();
    client
        .call("session/attach", json!({"sessionId": session}))
        .await
        .map_err(|e| StartupError::config(format!("cannot attach to session {session}: {e}")))?;
    // Events that arrived while attaching come first.
    for (method, params) in std::mem::take(&mut client.notifications) {
        if method == "session/event" {
            let _ = out.out(format!("{}\n", params["event"]).as_bytes());
        }
    }
    let (read, mut write) = client.into_parts();
    let mut lines = read.split(b'\n');
    let (input_tx, mut input_rx) = tokio::sync::mpsc::channel::<Input>(4);
    reader::spawn_reader(input_tx);
    let mut waiting: HashMap<String, Waiting> = HashMap::new();
    let mut held = std::collections::VecDeque::new();
    let mut next = 0u64;
    let (mut eof, mut running) = (false, false);
    let exit = loop {
        if eof && !running && waiting.is_empty() && held.is_empty() {
            break Exit::Success;
        }
        tokio::select! {
            biased;
            n = signals.next() => {
                let abort = j::request_line(&Id::from(0), "abort", &json!({"sessionId": session}));
                if let Ok(line) = abort {
                    let _ = write.write_all(line.as_bytes()).await;
                }
                break Exit::Signal(n);
            }
            line = lines.next_segment() => {
                let Ok(Some(line)) = line else {
                    out.err("Error: the keel daemon closed the connection (it stopped or was killed); the session file keeps every completed entry\n");
                    break Exit::Failed;
                };
                match j::parse_line(&line) {
                    Incoming::Notification { method, params } if method == "session/event" => {
                        let Some(params) = params else { continue };
                        if let Ok(p) = serde_json::from_str::<EventParams>(params.get()) {
                            match p.event.get().contains("\"type\":\"agent_start\"") {
                                true => running = true,
                                false if p.event.get().contains("\"type\":\"agent_settled\"") => running = false,
                                false => {}
                            }
                            let _ = out.out(p.event.get().as_bytes());
                            let _ = out.out(b"\n");
                        }
                    }
                    Incoming::Response { id, result } => {
                        let Some(w) = waiting.remove(id.text()) else { continue };
                        let text = match result {
                            Ok(raw) => rpc::ok_raw_line(w.id.as_ref(), &w.command, raw.get()),
                            Err(e) if e.code == j::METHOD_NOT_FOUND => rpc::error_line(
                                w.id.as_ref(),
                                Some(&w.command),
                                &format!("Unknown command: {}", w.command),
                            ),
                            Err(e) => rpc::error_line(w.id.as_ref(), Some(&w.command), &e.message),
                        };
                        if w.command == "prompt" && text.contains("\"disposition\":\"started\"") {
                            running = true; // its events follow: wait for agent_settled
                        }
                        if w.command != "extension_ui_response" {
                            let _ = out.out(text.as_bytes());
                        }
                        release(&mut held, &waiting, out);
                    }
                    Incoming::Notification { method, .. } if method == "daemon/shutdown" => {
                        out.err("Error: the keel daemon is shutting down\n");
                        break Exit::Failed;
                    }
                    _ => {}
                }
            }
            input = input_rx.recv(), if !eof => match input {
                Some(Input::Frames(frames)) => {
                    for frame in frames {
                        let req = match request(frame) {
                            Ok(req) => req,
                            Err(line) => {
                                held.push_back(Held { after: next, line });
                                release(&mut held, &waiting, out);
                                continue;
                            }
                        };
                        next += 1;
                        let id = Id::from(next);
                        let mut params = req.fields().clone();
                        params.insert("sessionId".into(), json!(session));
                        if req.command == "extension_ui_response" {
                            if let Some(dialog) = req.id.as_ref().and_then(rpc::Id::as_string) {
                                params.insert("id".into(), json!(dialog));
                            }
                        }
                        let line = j::request_line(&id, &req.command, &Value::Object(params));
                        let Ok(line) = line else { continue };
                        waiting.insert(
                            id.text().to_string(),
                            Waiting { id: req.id.clone(), command: req.command.clone(), n: next },
                        );
                        if write.write_all(line.as_bytes()).await.is_err() {
                            out.err("Error: the keel daemon closed the connection\n");
                            return Ok(Exit::Failed);
                        }
                    }
                }
                Some(Input::Error(_)) | None => eof = true,
            },
        }
        if out.flush().is_err() {
            break Exit::Signal(crate::exit::SIGPIPE);
        }
    };
    let _ = out.flush();
    Ok(exit)
}

#[derive(serde::Deserialize)]
struct EventParams {
    event: Box<serde_json::value::RawValue>,
}

/// A stdin line as a pi request, or the error line RPC mode writes for it.
fn request(frame: Frame) -> Result<rpc::Request, String> {
    let line = match frame {
        Frame::Line(l) => l,
        Frame::TooLong { bytes } => return Err(super::too_long_line(bytes)),
    };
    let req = rpc::parse_line(&line).map_err(|rejected| rpc::rejected_line(&rejected))?;
    if !crate::host::COMMANDS.contains(&req.command.as_str()) {
        let error = format!("Unknown command: {}", req.command);
        return Err(rpc::error_line(req.id.as_ref(), Some(&req.command), &error));
    }
    Ok(req)
}

/// The command line the daemon's session starts from: this one without the flags that only
/// concern this client.
fn session_args(args: impl Iterator<Item = String>) -> Vec<String> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_flags_stay_with_the_client() {
        let args = [
            "--mode",
            "rpc",
            "--daemon",
            "--socket",
            "/s",
            "--provider",
            "scripted",
            "--script",
            "f.json",
            "--socket=/t",
            "--session-id",
            "x",
        ];
        let got = session_args(args.iter().map(|s| s.to_string()));
        assert_eq!(
            got,
            [
                "--provider",
                "scripted",
                "--script",
                "f.json",
                "--session-id",
                "x"
            ]
        );
    }
}
