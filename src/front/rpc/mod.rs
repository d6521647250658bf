//! RPC mode (`--mode rpc`): pi-compatible JSONL over stdio for editor plugins
//! (`pi-protocol.md` §4, `DESIGN.md` §4). One loop owns stdout: it reads request lines, answers
//! each with exactly one response, and writes every bus event as it happens. Long commands
//! (bash, compact) run as tasks that hand their response back to the loop, so events a
//! command caused are always written before its response.
//!
//! What it does better than pi: prompt acceptance is decided under the kernel's lock and the
//! lines of one read are served back to back (two prompts in one write never both start); every request gets one response, including
//! unknown commands, missing fields and oversized or non-JSON lines; bad input never ends the
//! process or loses state.
//!
//! It is a thin transport over the session host (`crate::host`), which executes every command:
//! this file owns stdin, stdout, signals and pi's framing of replies; `reader` is the stdin
//! thread.
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod daemon;

use std::time::Duration;

use crate::error::StartupError;
use crate::exit::Exit;
use crate::front::stdin::Input;
use crate::host::{Data, Host, HostSetup, Out, Reply};
use crate::output::Output;
use crate::signals::Signals;
use crate::wire::jsonl::{Frame, MAX_LINE_BYTES};
use crate::wire::rpc;

/// Everything RPC mode needs from startup: the host's setup.
pub type RpcSetup = HostSetup;

/// Serves RPC mode until stdin closes (exit 0) or a signal arrives (128 + n).
pub async fn serve(setup: RpcSetup, out: &mut Output) -> Result<Exit, StartupError> {
    let mut signals = Signals::new()?;
    // Few batches in flight: each holds up to one read's lines (64 KiB) plus one long line.
    let (input_tx, mut input_rx) = tokio::sync::mpsc::channel::<Input>(4);
    crate::front::stdin::spawn_reader(input_tx);
    let mut rpc = Stdio {
        host: Host::new(setup),
        out,
        stop: None,
    };
    loop {
        if rpc.stop.is_some() || (rpc.host.input_ended() && rpc.host.idle()) {
            break;
        }
        let eof = rpc.host.input_ended();
        tokio::select! {
            biased;
            n = signals.next() => rpc.halt(Exit::Signal(n)),
            Some(step) = rpc.host.next_step() => rpc.host.apply(step),
            input = input_rx.recv(), if !eof => match input {
                Some(Input::Frames(frames)) => {
                    // Back to back: nothing else runs between lines that arrived together.
                    for frame in frames {
                        rpc.on_frame(frame).await;
                    }
                }
                Some(Input::Error(e)) => {
                    tracing::error!("cannot read stdin: {e}");
                    rpc.host.on_eof();
                }
                None => rpc.host.on_eof(),
            },
        }
        rpc.host.run_deferred().await;
        rpc.write_out();
        if rpc.out.flush().is_err() && rpc.stop.is_none() {
            // Our answers can no longer be written: stop the work and save the session.
            rpc.on_stdout_failed();
        }
    }
    Ok(rpc.shutdown(&mut signals).await)
}

/// The transport's state: the host it serves and stdout.
struct Stdio<'o> {
    host: Host,
    out: &'o mut Output,
    stop: Option<Exit>,
}

impl Stdio<'_> {
    fn write(&mut self, line: &str) {
        if !self.out.is_stdout_closed() {
            let _ = self.out.out(line.as_bytes());
        }
    }

    /// Writes the host's outbox: events as JSON lines, replies in pi's envelope.
    fn write_out(&mut self) {
        let items: Vec<Out> = self.host.take_out().collect();
        for item in items {
            match item {
                Out::Event(p) => {
                    if !self.out.is_stdout_closed() {
                        let _ = self.out.out(p.line.as_bytes());
                        let _ = self.out.out(b"\n");
                    }
                }
                Out::Reply(reply) => {
                    let line = reply_line(&reply);
                    self.write(&line);
                }
            }
        }
    }

    /// stdout failed: a closed pipe ends as SIGPIPE would (141, quietly); a full or failing
    /// device ends with 1 and the failure on stderr.
    fn on_stdout_failed(&mut self) {
        let exit = self.out.stdout_exit();
        self.halt(exit);
    }

    /// Stops the run and shell commands; the loop then shuts down with `exit`.
    fn halt(&mut self, exit: Exit) {
        self.stop = Some(exit);
        self.host.halt();
    }

    /// Stops work, waits a moment for it to settle, writes the last events and saves the
    /// session. A second signal skips the wait.
    async fn shutdown(mut self, signals: &mut Signals) -> Exit {
        let exit = self.stop.unwrap_or(Exit::Success);
        if self.stop.is_some() {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
            while !self.host.idle() {
                let step = tokio::select! {
                    step = self.host.next_step() => step,
                    _ = tokio::time::sleep_until(deadline) => None,
                    _ = signals.next() => None,
                };
                match step {
                    Some(step) => self.host.apply(step),
                    None => break,
                }
            }
        }
        self.host.close().await;
        self.write_out();
        let _ = self.out.flush();
        exit
    }

    async fn on_frame(&mut self, frame: Frame) {
        let line = match frame {
            Frame::Line(l) => l,
            Frame::TooLong { bytes } => {
                self.write_out();
                self.write(&too_long_line(bytes));
                self.host.publish_warnings();
                self.write_out();
                return;
            }
        };
        match rpc::parse_line(&line) {
            Err(rejected) => {
                self.write_out();
                self.write(&rpc::rejected_line(&rejected));
                self.host.publish_warnings();
            }
            Ok(req) => self.host.request(req).await,
        }
        self.write_out();
    }
}

/// pi's parse error for a line over the cap (it was skipped).
fn too_long_line(bytes: usize) -> String {
    let msg = format!(
        "Failed to parse command: the line is {bytes} bytes, over the {} MiB limit; it was skipped",
        MAX_LINE_BYTES / (1024 * 1024)
    );
    rpc::error_line(None, Some("parse"), &msg)
}

/// A reply in pi's response envelope.
fn reply_line(reply: &Reply) -> String {
    let id = reply.id.as_ref();
    match &reply.result {
        Ok(Data::Empty) => rpc::ok_line(id, &reply.command, None),
        Ok(Data::Json(v)) => rpc::ok_line(id, &reply.command, Some(v.clone())),
        Ok(Data::Raw(raw)) => rpc::ok_raw_line(id, &reply.command, raw),
        Err(e) => rpc::error_line(id, Some(&reply.command), e),
    }
}
