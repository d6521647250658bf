//! A minimal client for keel's RPC mode, written for editor-plugin authors to copy and adapt.
//!
//! It starts `keel --mode rpc`, sends one prompt, streams the assistant's text to stdout as it
//! arrives, and exits once the run has settled. Only `std` and `serde_json` are used, so the
//! file can be lifted into any project as is.
//!
//! ```text
//! cargo run --example rpc_client -- "PROMPT" [keel args...]
//! cargo run --example rpc_client -- "hi" --no-session --provider scripted \
//!     --script fixtures/providers/hello.json
//! ```
//!
//! Which keel it runs: `$KEEL_BIN` if set, else the `keel` binary cargo built next to this
//! example (`target/<profile>/keel`), else `keel` from `PATH`. `cargo run --example` does not
//! build the `keel` binary itself, so run `cargo build` once first (or set `KEEL_BIN`).
//!
//! Exit status: 0 when keel exited 0, the run settled without being aborted and the last
//! assistant message did not end with `stopReason: "error"`; 1 otherwise; 2 for bad usage.
//!
//! The protocol in brief (pi-compatible, see `pi-protocol.md` §4):
//! - one JSON object per line in both directions, `\n`-terminated;
//! - every request may carry an `"id"`; its single `{"type":"response", ...}` echoes it, and
//!   responses can arrive in any order, so match them by id, never by position;
//! - everything else on stdout is an event (`agent_start`, `message_update`, `agent_settled`,
//!   ...) or a UI request (`extension_ui_request`) that the client may have to answer;
//! - closing keel's stdin asks it to finish and exit 0.
// An example program talks to its user on stdout and stderr by design.
#![allow(clippy::print_stdout, clippy::print_stderr, clippy::disallowed_methods)]

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{ChildStdin, Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::thread;

use serde_json::{json, Value};

/// The id we give our prompt request, so its response can be told apart from everything else.
const PROMPT_ID: &str = "req_1";

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(prompt) = args.next() else {
        eprintln!("usage: rpc_client PROMPT [keel args...]");
        return ExitCode::from(2);
    };
    let keel_args: Vec<String> = args.collect();
    match run(&prompt, &keel_args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("rpc_client: {e}");
            ExitCode::FAILURE
        }
    }
}

/// What we learned about the run from the event stream.
#[derive(Default)]
struct RunState {
    /// `agent_settled` arrived: keel will do no more work for this prompt.
    settled: bool,
    /// `agent_settled.aborted` was true.
    aborted: bool,
    /// `stopReason` of the most recent assistant `message_end`.
    last_stop_reason: Option<String>,
}

/// Runs one prompt through keel; `Ok(true)` means everything went well.
fn run(prompt: &str, keel_args: &[String]) -> Result<bool, Box<dyn std::error::Error>> {
    let keel = keel_binary();
    let mut child = Command::new(&keel)
        .args(["--mode", "rpc"])
        .args(keel_args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        // keel's diagnostics go straight to our stderr; they are never part of the protocol.
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", keel.display()))?;
    let mut stdin = child.stdin.take().ok_or("keel has no stdin pipe")?;
    let stdout = child.stdout.take().ok_or("keel has no stdout pipe")?;

    // Read keel's stdout on its own thread so that a slow consumer never blocks keel and we can
    // keep writing requests (e.g. UI answers) while events stream in. Each parsed line goes to
    // the main thread over a channel; the channel closes when keel closes its stdout.
    let (tx, rx) = mpsc::channel::<Value>();
    let reader = thread::spawn(move || {
        let mut stdout = BufReader::new(stdout);
        let mut line = Vec::new();
        loop {
            line.clear();
            match stdout.read_until(b'\n', &mut line) {
                Ok(0) => break, // EOF: keel is gone or has closed stdout.
                Ok(_) => {}
                Err(e) => {
                    eprintln!("rpc_client: reading keel's stdout: {e}");
                    break;
                }
            }
            let text = String::from_utf8_lossy(&line);
            let text = text.trim_end_matches(['\n', '\r']);
            if text.is_empty() {
                continue;
            }
            match serde_json::from_str::<Value>(text) {
                Ok(value) => {
                    if tx.send(value).is_err() {
                        break; // The main thread has stopped listening.
                    }
                }
                // The protocol is JSON only; anything else is noise worth a warning, not a crash.
                Err(_) => eprintln!("rpc_client: ignoring a non-JSON line from keel: {text}"),
            }
        }
    });

    let request = json!({"id": PROMPT_ID, "type": "prompt", "message": prompt});
    if let Err(e) = send(&mut stdin, &request) {
        // keel most likely exited at startup (bad arguments, no model); its stderr says why,
        // and the loop below ends as soon as its stdout closes.
        eprintln!("rpc_client: cannot send the prompt: {e}");
    }

    let mut state = RunState::default();
    let mut failed_request = false;
    let mut out = std::io::stdout().lock();
    // `recv` fails only when the reader thread has finished, i.e. keel closed its stdout.
    while let Ok(msg) = rx.recv() {
        match msg["type"].as_str().unwrap_or_default() {
            "response" => {
                if msg["id"].as_str() != Some(PROMPT_ID) {
                    // Not ours: e.g. a parse error (which carries no id) for a bad line.
                    eprintln!("rpc_client: unexpected response: {msg}");
                    continue;
                }
                if msg["success"].as_bool() != Some(true) {
                    let error = msg["error"].as_str().unwrap_or("unknown error");
                    eprintln!("rpc_client: prompt rejected: {error}");
                    failed_request = true;
                    break;
                }
                // "started" means a run follows and ends in `agent_settled`. "handled" means a
                // command consumed the prompt and no run will start; there is nothing to wait for.
                if msg["data"]["disposition"].as_str() == Some("handled") {
                    state.settled = true;
                    break;
                }
            }
            "message_update" => {
                // Deltas arrive per content block; a real UI would also look at `contentIndex`,
                // `thinking_delta` and the `*_start`/`*_end` variants. Plain text is enough here.
                let event = &msg["assistantMessageEvent"];
                if event["type"].as_str() == Some("text_delta") {
                    if let Some(delta) = event["delta"].as_str() {
                        out.write_all(delta.as_bytes())?;
                        out.flush()?;
                    }
                }
            }
            "message_end" => {
                // The authoritative final message; it replaces whatever the deltas built up.
                let message = &msg["message"];
                if message["role"].as_str() == Some("assistant") {
                    let reason = message["stopReason"].as_str().unwrap_or_default();
                    if reason == "error" {
                        let detail = message["errorMessage"].as_str().unwrap_or("no details");
                        eprintln!("\nrpc_client: the model call failed: {detail}");
                    }
                    state.last_stop_reason = Some(reason.to_string());
                }
            }
            "tool_execution_start" => {
                let name = msg["toolName"].as_str().unwrap_or("?");
                eprintln!("\n[tool] {name}");
            }
            "extension_ui_request" => answer_ui_request(&mut stdin, &msg)?,
            "agent_settled" => {
                state.settled = true;
                state.aborted = msg["aborted"].as_bool().unwrap_or(false);
                break;
            }
            // agent_start, turn_start/end, message_start, queue_update, ...: not needed here.
            _ => {}
        }
    }
    drop(out);

    // Closing stdin is keel's signal to shut down cleanly (exit 0 once idle).
    drop(stdin);
    let status = child.wait()?;
    // Stop listening first: a reader still blocked on `send` would otherwise never end.
    drop(rx);
    if reader.join().is_err() {
        eprintln!("rpc_client: the reader thread panicked");
    }
    println!();

    if !status.success() {
        eprintln!("rpc_client: keel exited with {status}");
    } else if !failed_request && !state.settled {
        eprintln!("rpc_client: keel closed its output before the run settled");
    } else if state.aborted {
        eprintln!("rpc_client: the run was aborted");
    }
    Ok(status.success()
        && !failed_request
        && state.settled
        && !state.aborted
        && state.last_stop_reason.as_deref() != Some("error"))
}

/// Writes one request as a single JSON line. Flushing matters: keel acts on whole lines only.
fn send(stdin: &mut ChildStdin, request: &Value) -> std::io::Result<()> {
    let mut line = serde_json::to_string(request)?;
    line.push('\n');
    stdin.write_all(line.as_bytes())?;
    stdin.flush()
}

/// keel asks the client things through `extension_ui_request` (for instance `confirm` before a
/// tool runs when approvals are on). Dialog methods expect an `extension_ui_response` with the
/// same id; this non-interactive client declines them all. The rest are one-way notices.
fn answer_ui_request(stdin: &mut ChildStdin, msg: &Value) -> std::io::Result<()> {
    let method = msg["method"].as_str().unwrap_or_default();
    match method {
        "confirm" | "select" | "input" | "editor" => {
            let title = msg["title"].as_str().unwrap_or_default();
            eprintln!("\n[declined {method}] {title}");
            // A plugin would show a dialog and reply with `"confirmed": true/false` (confirm) or
            // `"value": ...` (select, input, editor) instead.
            send(
                stdin,
                &json!({"type": "extension_ui_response", "id": msg["id"], "cancelled": true}),
            )
        }
        "notify" => {
            let text = msg["message"].as_str().unwrap_or_default();
            eprintln!("\n[notify] {text}");
            Ok(())
        }
        // setStatus, setWidget, setTitle, set_editor_text: UI hints a plugin may render.
        _ => Ok(()),
    }
}

/// `$KEEL_BIN`, else the `keel` beside this example (`target/debug/examples/rpc_client` →
/// `target/debug/keel`), else `keel` looked up on `PATH`.
fn keel_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("KEEL_BIN") {
        return PathBuf::from(path);
    }
    let name = format!("keel{}", std::env::consts::EXE_SUFFIX);
    let beside = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.join(&name)));
    match beside {
        Some(path) if path.is_file() => path,
        _ => PathBuf::from(name),
    }
}
