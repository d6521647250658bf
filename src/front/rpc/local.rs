//! RPC mode's session in this process: a host served by `host::actor` through a
//! [`Link`], its answers handed over in one order with its stream. Each answer carries the
//! stream's `seq` when it was given: the events up to it go first, the later ones after it,
//! as the host queued them.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::sync::oneshot;

use super::{Front, Got, Sent};
use crate::client::link::{Commands, Link, Note};
use crate::error::StartupError;
use crate::host::actor::{Answer, Answered};
use crate::host::HostSetup;
use crate::output::Output;
use crate::signals::Signals;
use crate::wire::jsonrpc::{self as j, ErrorObject};
use crate::wire::pi::CommandName;
use crate::wire::rpc::Request;

/// How long a stopped run may take to settle before the session is saved as it is.
const GRACE: Duration = Duration::from_secs(3);

/// An answer that came, not handed over yet.
struct Ready {
    key: u64,
    result: Answer,
    /// The stream's last `seq` when it was given.
    head: u64,
}

/// The link to the session in this process and what is in flight on it.
pub(super) struct Local {
    link: Link,
    commands: Commands,
    /// Sent and not answered, in the order sent.
    pending: Vec<(u64, oneshot::Receiver<Answered>)>,
    ready: Vec<Ready>,
    /// A stream item read but not handed over: answers given before it go first.
    peeked: Option<Note>,
    /// The last `seq` handed over.
    last: u64,
    /// Answered once nothing runs, after the input ended.
    idle: Option<oneshot::Receiver<()>>,
    stream_ended: bool,
}

impl Local {
    /// Serves `setup` in this process.
    pub(super) async fn start(setup: HostSetup) -> Result<Local, StartupError> {
        let link = Link::local_from_start(setup)
            .await
            .map_err(|e| StartupError::internal(format!("cannot start the session: {e}")))?;
        Ok(Local {
            commands: link.commands(),
            link,
            pending: Vec::new(),
            ready: Vec::new(),
            peeked: None,
            last: 0,
            idle: None,
            stream_ended: false,
        })
    }

    pub(super) fn send(&mut self, key: u64, req: Request) -> Sent {
        if CommandName::parse(&req.command) == Some(CommandName::ExtensionUiResponse) {
            // pi never answers it; its `id` names the dialog.
            self.commands.tell(req);
            return Sent::NoAnswer;
        }
        match self.commands.submit(req) {
            Some(rx) => {
                self.pending.push((key, rx));
                Sent::Waiting
            }
            None => Sent::Gone,
        }
    }

    pub(super) fn input_ended(&mut self) {
        self.idle = self.commands.input_ended();
    }

    pub(super) fn heard(&self) {
        self.commands.heard();
    }

    /// The next thing to write, in the host's order. Cancel-safe: what was read is kept.
    pub(super) async fn next(&mut self) -> Got {
        loop {
            if self.scan() {
                // Everything answered before what the first scan found is visible now.
                self.scan();
            }
            if let Some(got) = self.due() {
                return got;
            }
            if let Some(note) = self.peeked.take() {
                match note {
                    Note::Event { seq, line } => {
                        self.last = seq;
                        return Got::Event {
                            epoch: None,
                            seq,
                            line,
                        };
                    }
                    // Nothing to write: requests go to whatever the host serves.
                    Note::Replaced { .. } => continue,
                    other => {
                        tracing::warn!("rpc: unexpected item from the session: {other:?}");
                        continue;
                    }
                }
            }
            if self.stream_ended && self.pending.is_empty() && self.idle.is_none() {
                return Got::Closed;
            }
            tokio::select! {
                biased;
                note = self.link.next(), if !self.stream_ended => match note {
                    Some(n) => self.peeked = Some(n),
                    None => self.stream_ended = true,
                },
                () = AnyAnswer { pending: &mut self.pending, ready: &mut self.ready } => {}
                () = idle(&mut self.idle) => {
                    self.idle = None;
                    return Got::Idle;
                }
            }
        }
    }

    /// Moves the answers that came to `ready`; true if any did.
    fn scan(&mut self) -> bool {
        let before = self.ready.len();
        let mut i = 0;
        while i < self.pending.len() {
            match self.pending[i].1.try_recv() {
                Err(oneshot::error::TryRecvError::Empty) => i += 1,
                r => {
                    let (key, _) = self.pending.remove(i);
                    take(key, r.ok(), &mut self.ready);
                }
            }
        }
        self.ready.len() > before
    }

    /// The answer to hand over before the next stream item: the earliest given (by `seq`,
    /// then by the order sent) whose events have all been handed over.
    fn due(&mut self) -> Option<Got> {
        let bound = match &self.peeked {
            Some(Note::Event { seq, .. }) => seq.saturating_sub(1),
            _ if self.stream_ended => u64::MAX,
            _ => self.last,
        };
        let (i, _) = self
            .ready
            .iter()
            .enumerate()
            .filter(|(_, r)| r.head <= bound)
            .min_by_key(|(_, r)| (r.head, r.key))?;
        let r = self.ready.remove(i);
        let result = r
            .result
            .map_err(|e| ErrorObject::new(j::COMMAND_FAILED, e.to_string()));
        Some(Got::Answer { key: r.key, result })
    }

    /// Ends the session: its run stopped (settling for a moment; a second signal cuts that
    /// short) and saved, and the last events and answers written.
    pub(super) async fn stop(mut self, front: &mut Front, signals: &mut Signals, out: &mut Output) {
        let commands = self.commands.clone();
        let again = self.commands.clone();
        let stop = commands.stop(GRACE);
        tokio::pin!(stop);
        let mut stopping = true;
        loop {
            tokio::select! {
                biased;
                () = &mut stop, if stopping => stopping = false,
                n = signals.next(), if stopping => {
                    tracing::info!("signal {n} while stopping: the session is saved as it is");
                    let again = again.clone();
                    tokio::spawn(async move { again.stop(Duration::ZERO).await });
                }
                got = self.next() => match got {
                    Got::Event { epoch, seq, line } => front.event(epoch, seq, &line, out),
                    Got::Answer { key, result } => {
                        front.write_answer(key, result, out);
                    }
                    Got::Closed => break,
                    _ => {}
                },
            }
        }
    }
}

/// Takes an answer; one the session never gave (it ended first) is dropped: nothing is
/// written for it.
fn take(key: u64, r: Option<Answered>, ready: &mut Vec<Ready>) {
    if let Some((result, head)) = r {
        if head != u64::MAX {
            ready.push(Ready { key, result, head });
        }
    }
}

/// Resolves when any pending answer came (moving the ones that did to `ready`).
struct AnyAnswer<'a> {
    pending: &'a mut Vec<(u64, oneshot::Receiver<Answered>)>,
    ready: &'a mut Vec<Ready>,
}

impl Future for AnyAnswer<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        let mut came = false;
        let mut i = 0;
        while i < this.pending.len() {
            match Pin::new(&mut this.pending[i].1).poll(cx) {
                Poll::Ready(r) => {
                    let (key, _) = this.pending.remove(i);
                    take(key, r.ok(), this.ready);
                    came = true;
                }
                Poll::Pending => i += 1,
            }
        }
        match came {
            true => Poll::Ready(()),
            false => Poll::Pending,
        }
    }
}

/// Resolves once the session is idle (never without a receiver).
async fn idle(rx: &mut Option<oneshot::Receiver<()>>) {
    match rx {
        Some(rx) => {
            let _ = rx.await;
        }
        None => std::future::pending().await,
    }
}
