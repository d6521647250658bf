//! RPC mode's session on its [`Link`], in this process or in the daemon: its answers handed
//! over in one order with its stream. Each answer carries the stream's `seq` when it was
//! given: the events up to it go first, the later ones after it, as the session queued them.
//! In this process the session is stopped and saved at the end; in the daemon it stays live
//! (`daemon`: reconnecting a remote link, leaving).
#![deny(clippy::print_stdout, clippy::print_stderr)]

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::sync::oneshot;

use super::{Front, Got, Sent};
use crate::client::dial::Dial;
use crate::client::link::{Commands, Link, LinkError, Lost, Note, Reply};
use crate::host::Data;
use crate::output::Output;
use crate::signals::Signals;
use crate::wire::rpc::Request;

/// How long a stopped run may take to settle before the session is saved as it is.
const GRACE: Duration = Duration::from_secs(3);

/// An answer that came, not handed over yet.
struct Ready {
    key: u64,
    result: Result<Data, LinkError>,
    /// The stream's last `seq` when it was given.
    head: u64,
}

/// The link to the session and what is in flight on it.
pub(super) struct Session {
    pub(super) link: Link,
    commands: Commands,
    /// The daemon the session lives in (`None`: this process).
    pub(super) dial: Option<Dial>,
    /// Sent and not answered, in the order sent.
    pending: Vec<(u64, Reply)>,
    ready: Vec<Ready>,
    /// A stream item read but not handed over: answers given before it go first.
    peeked: Option<Note>,
    /// The last `seq` handed over.
    pub(super) last: u64,
    /// Answered once nothing runs, after the input ended.
    idle: Option<oneshot::Receiver<()>>,
    stream_ended: bool,
}

impl Session {
    /// The session on `link` (in the daemon `dial` names, if any), whose stream is handed
    /// over from after `seq`.
    pub(super) fn new(link: Link, dial: Option<Dial>, seq: u64) -> Session {
        Session {
            commands: link.commands(),
            link,
            dial,
            pending: Vec::new(),
            ready: Vec::new(),
            peeked: None,
            last: seq,
            idle: None,
            stream_ended: false,
        }
    }

    pub(super) fn send(&mut self, key: u64, req: Request) -> Sent {
        match self.commands.submit(req) {
            Ok(Some(reply)) => {
                self.pending.push((key, reply));
                Sent::Waiting
            }
            Ok(None) => Sent::NoAnswer,
            Err(_) => Sent::Gone,
        }
    }

    /// stdin ended: in this process open dialogs are closed and [`Got::Idle`] comes once
    /// nothing runs.
    pub(super) fn input_ended(&mut self) {
        self.idle = self.commands.input_ended();
    }

    /// Whether nothing runs in the session any more (the daemon's side cannot tell: its
    /// session stays live there).
    pub(super) fn settled(&self, front: &Front) -> bool {
        self.dial.is_some() || front.idle
    }

    /// The client sent a line that is no request.
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
                    Note::Event { seq, line, .. } => {
                        self.last = seq;
                        return Got::Event { line };
                    }
                    // Nothing to write: requests go to whatever the session serves.
                    Note::Replaced { .. } | Note::Notice(_) => continue,
                    Note::Lost(lost) => return Got::Lost(lost),
                    // The daemon closes the connection next.
                    Note::Lagged { .. } => return Got::Lost(Lost::Closed),
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
            match self.pending[i].1.try_take() {
                None => i += 1,
                Some(r) => {
                    let (key, _) = self.pending.remove(i);
                    take(key, r, &mut self.ready);
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
        Some(Got::Answer {
            key: r.key,
            result: r.result,
        })
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
                    Got::Event { line } => front.event(&line, out),
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

/// Takes an answer; one the session never gave (it ended first, or the connection was lost)
/// is dropped: nothing is written for it.
fn take(key: u64, r: Option<(Result<Data, LinkError>, u64)>, ready: &mut Vec<Ready>) {
    if let Some((result, head)) = r {
        ready.push(Ready { key, result, head });
    }
}

/// Resolves when any pending answer came (moving the ones that did to `ready`).
struct AnyAnswer<'a> {
    pending: &'a mut Vec<(u64, Reply)>,
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
                    take(key, r, this.ready);
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
