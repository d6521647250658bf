//! `keel attach --job ID [SESSION]` (issue 47 point 4): a background job of a daemon's session
//! shown live in this terminal. The screen is cleared and gets what the job wrote from the
//! oldest byte its ring holds, then each `job_output` event's bytes, read with `read_job`
//! from the offset shown so far (no polling). The terminal is in raw mode: keys go to the
//! job as they are (`write_job`), except [`DETACH`], which leaves the job running. The job's
//! terminal gets this one's size on attach and on each SIGWINCH (`resize_job`: the program
//! redraws). When the job ends while shown, `[job N exited with code C]` and exit 0. A job on
//! pipes is shown the same, read-only: a key says once that it takes no input.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use std::io::{Read, Write};

use tokio::sync::mpsc;

use crate::client::dial::Dial;
use crate::client::link::{Commands, Link, Note};
use crate::error::StartupError;
use crate::exit::Exit;
use crate::kernel::jobs::{JobId, JobInfo, JobState};
use crate::output::TerminalOut;
use crate::signals::Signals;
use crate::wire::events::{event_of, WireEvent};
use crate::wire::pi::data::{JobReadData, JobsData};
use crate::wire::pi::Command;

/// The key that detaches: Ctrl+\ (as `dtach` and `abduco`), a byte no program's keyboard
/// input needs from a user who can press Ctrl+C.
pub const DETACH: u8 = 0x1c;
/// How the key is named to the user.
pub const DETACH_NAME: &str = "Ctrl+\\";

/// Shows job `job` of `session` in the daemon `dial` names until the user detaches (exit 0,
/// the job runs on), the job ends (its end said, exit 0), the daemon goes away (exit 1) or a
/// signal ends this client (128 + n).
pub async fn run(dial: &Dial, session: &str, job: JobId) -> Result<Exit, StartupError> {
    let (mut link, _start) = Link::daemon(dial, session, None, false)
        .await
        .map_err(|e| StartupError::config(format!("cannot attach to session {session}: {e}")))?;
    let commands = link.commands();
    let jobs = commands
        .ask::<JobsData>(&Command::GetJobs {})
        .await
        .map_err(|e| StartupError::config(format!("cannot list session {session}'s jobs: {e}")))?;
    let Some(info) = jobs.jobs.into_iter().find(|j| j.id == job) else {
        return Err(
            StartupError::config(format!("session {session} has no background job {job}"))
                .hint("keel ps lists each session's jobs"),
        );
    };
    let mut signals = Signals::new()?;
    let mut winch = crate::signals::listen(tokio::signal::unix::SignalKind::window_change())?;
    let tty = super::tty::Tty::raw()
        .map_err(|e| StartupError::internal("cannot set up the terminal").cause(e.to_string()))?;
    let mut shown = Shown {
        commands,
        info,
        next: 0,
        noted: false,
    };
    shown.write(b"\x1b[H\x1b[2J");
    shown.resize().await;
    shown.catch_up(u64::MAX).await;
    if shown.info.state != JobState::Running {
        return Ok(shown.ended(tty));
    }
    let (keys_tx, mut keys) = mpsc::unbounded_channel();
    spawn_keys(keys_tx);
    loop {
        tokio::select! {
            n = signals.next() => {
                drop(tty);
                return Ok(Exit::Signal(n));
            }
            _ = winch.recv() => shown.resize().await,
            bytes = keys.recv() => {
                let Some(bytes) = bytes else {
                    drop(tty);
                    return Ok(Exit::Success);
                };
                if let Some(at) = bytes.iter().position(|b| *b == DETACH) {
                    shown.type_in(&bytes[..at]).await;
                    drop(tty);
                    let id = shown.info.id;
                    let text = format!(
                        "\r\n[detached from job {id}; it runs on in session {session}: keel attach --job {id} {session}]\r\n"
                    );
                    let _ = TerminalOut.write_all(text.as_bytes());
                    let _ = TerminalOut.flush();
                    return Ok(Exit::Success);
                }
                shown.type_in(&bytes).await;
            }
            note = link.next() => match note {
                Some(Note::Event { line, typed, .. }) => match event_of(&line, typed.as_ref()) {
                    Some(WireEvent::JobOutput { id, next }) if id == job => {
                        shown.catch_up(next).await;
                    }
                    Some(WireEvent::JobEnded { job: ended }) if ended.id == job => {
                        shown.info = ended.into_owned();
                        shown.catch_up(u64::MAX).await;
                        return Ok(shown.ended(tty));
                    }
                    _ => {}
                },
                // Behind on the stream: read what the job wrote since, and go on.
                Some(Note::Lagged { .. }) => {
                    let (again, _) = Link::daemon(dial, session, None, false).await.map_err(|e| {
                        StartupError::config(format!("cannot attach to session {session}: {e}"))
                    })?;
                    link = again;
                    shown.commands = link.commands();
                    shown.catch_up(u64::MAX).await;
                }
                Some(Note::Replaced { .. } | Note::Notice(_)) => {}
                Some(Note::Lost(_)) | None => {
                    drop(tty);
                    let text = format!("\r\n[the keel daemon went away: job {job} ended with it]\r\n");
                    let _ = TerminalOut.write_all(text.as_bytes());
                    return Ok(Exit::Failed);
                }
            },
        }
    }
}

/// The job as this terminal shows it.
struct Shown {
    commands: Commands,
    info: JobInfo,
    /// The offset after the last byte written to the screen.
    next: u64,
    /// A job on pipes: the user was told it takes no input.
    noted: bool,
}

impl Shown {
    fn write(&self, bytes: &[u8]) {
        let mut out = TerminalOut;
        if let Err(e) = out.write_all(bytes).and_then(|()| out.flush()) {
            tracing::warn!("cannot write to the terminal: {e}");
        }
    }

    /// Reads and shows what the job wrote up to `end` (`u64::MAX`: all it holds).
    async fn catch_up(&mut self, end: u64) {
        while self.next < end {
            let read = Command::ReadJob {
                job_id: self.info.id,
                since: Some(self.next),
                max: None,
            };
            let got = match self.commands.ask::<JobReadData>(&read).await {
                Ok(got) => got,
                Err(e) => {
                    tracing::info!("cannot read job {}: {e}", self.info.id);
                    return;
                }
            };
            if got.next <= self.next {
                return;
            }
            self.write(&got.bytes().unwrap_or_default());
            self.next = got.next;
        }
    }

    /// Gives the job's terminal this one's size (a job on pipes has none).
    async fn resize(&self) {
        if !self.info.tty {
            return;
        }
        let Ok((cols, rows)) = crossterm::terminal::size() else {
            return;
        };
        let resize = Command::ResizeJob {
            job_id: self.info.id,
            cols: cols.max(1),
            rows: rows.max(1),
        };
        if let Err(e) = self.commands.send(&resize).await {
            tracing::info!("cannot resize job {}: {e}", self.info.id);
        }
    }

    /// Types `bytes` into the job; a job on pipes refuses, said once.
    async fn type_in(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        if !self.info.tty {
            if !std::mem::replace(&mut self.noted, true) {
                let id = self.info.id;
                self.write(
                    format!(
                        "\r\n[job {id} runs on pipes: it takes no input; {DETACH_NAME} detaches]\r\n"
                    )
                    .as_bytes(),
                );
            }
            return;
        }
        let write = Command::WriteJob {
            job_id: self.info.id,
            data: String::from_utf8_lossy(bytes).into_owned(),
        };
        if let Err(e) = self.commands.send(&write).await {
            tracing::info!("cannot type into job {}: {e}", self.info.id);
        }
    }

    /// The job ended: the terminal is put back and the end said.
    fn ended(self, tty: super::tty::Tty) -> Exit {
        drop(tty);
        let id = self.info.id;
        let how = match (self.info.state, self.info.exit_code, self.info.signal) {
            (JobState::Killed, ..) => "was killed".to_string(),
            (JobState::Lost, ..) => "was lost".to_string(),
            (_, Some(code), _) => format!("exited with code {code}"),
            (_, None, Some(sig)) => format!("ended by signal {sig}"),
            _ => "exited".to_string(),
        };
        self.write(format!("\r\n[job {id} {how}]\r\n").as_bytes());
        Exit::Success
    }
}

/// Reads the terminal's bytes on a plain thread (a pending read must never hold up exit); a
/// multi-byte character cut between two reads goes whole with the second.
fn spawn_keys(tx: mpsc::UnboundedSender<Vec<u8>>) {
    let spawned = std::thread::Builder::new()
        .name("keel-job-keys".into())
        .spawn(move || {
            let mut stdin = std::io::stdin().lock();
            let mut buf = [0u8; 4096];
            let mut held: Vec<u8> = Vec::new();
            loop {
                let n = match stdin.read(&mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => n,
                };
                held.extend_from_slice(&buf[..n]);
                let whole = match std::str::from_utf8(&held) {
                    Ok(_) => held.len(),
                    Err(e) if e.error_len().is_none() => e.valid_up_to(),
                    Err(_) => held.len(),
                };
                let rest = held.split_off(whole);
                if tx.send(std::mem::replace(&mut held, rest)).is_err() {
                    return;
                }
            }
        });
    if let Err(e) = spawned {
        tracing::error!("cannot start the terminal reader: {e}");
    }
}
