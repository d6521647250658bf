//! Following one print or JSON run on its session's [`Link`], in this process or in the
//! daemon: each wire line of the stream goes to the projector until the run settles; signals
//! and a failing stdout abort the run through the link; a link dropped for falling behind,
//! or a remote link that went down, attaches again from the last event seen.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use std::future::Future;
use std::pin::Pin;

use serde_json::{json, Value};

use super::run::{stdout_stop, Stop};
use super::{feed_line, Projector, RunSummary, Settled};
use crate::client::dial::Dial;
use crate::client::link::{Link, LinkError, Lost, Note, Reconnected, Start};
use crate::client::socket::{reconnect_line, Reconnecting};
use crate::output::Output;
use crate::signals::Signals;
use crate::wire::events::{is_rpc_only, ErrorKind, SettledError, TypedEvent};

/// How following a run ended.
pub(crate) enum Ended {
    Settled,
    /// The daemon went away: why.
    Lost(String),
    /// The session in this process ended before the run settled.
    SessionGone,
}

type Answer = Pin<Box<dyn Future<Output = Result<Value, LinkError>> + Send>>;

/// Following one run's events.
pub(crate) struct Follow<'a> {
    pub session: String,
    /// The daemon the session lives in (`None`: this process).
    pub dial: Option<Dial>,
    pub projector: &'a mut dyn Projector,
    pub summary: RunSummary,
    pub stop: Option<Stop>,
    pub epoch: String,
    /// The last `seq` seen.
    pub seq: u64,
    /// `--wait`: lines before the run's `agent_start` are not the run's.
    pub waiting_for_start: bool,
    /// stdout failed: the run is to be aborted.
    abort_due: bool,
    /// The answer to the `abort` sent, while it has not come.
    aborting: Option<Answer>,
}

/// What one note meant for the run.
enum Step {
    Go,
    Settled,
    Lagged,
    Lost(String),
    SessionGone,
}

impl<'a> Follow<'a> {
    pub fn new(session: String, dial: Option<Dial>, projector: &'a mut dyn Projector) -> Self {
        Follow {
            session,
            dial,
            projector,
            summary: RunSummary::default(),
            stop: None,
            epoch: String::new(),
            seq: 0,
            waiting_for_start: false,
            abort_due: false,
            aborting: None,
        }
    }

    /// Sends `prompt` (pi's `prompt` params, if any) and feeds the stream until the run
    /// settles, the daemon goes away or the session ends.
    pub async fn run(
        &mut self,
        link: &mut Link,
        prompt: Option<Value>,
        signals: &mut Signals,
        out: &mut Output,
    ) -> Ended {
        let commands = link.commands();
        let mut prompted: Option<Answer> =
            prompt.map(|p| Box::pin(async move { commands.request("prompt", p).await }) as Answer);
        loop {
            let step = tokio::select! {
                biased;
                note = link.next() => self.batch(note, link, out),
                Some(answer) = wait(&mut prompted) => {
                    prompted = None;
                    match answer {
                        Ok(_) => Step::Go,
                        Err(message) => {
                            self.refused(message);
                            Step::Settled
                        }
                    }
                }
                Some(answer) = wait(&mut self.aborting) => {
                    self.aborting = None;
                    self.aborted(answer)
                }
                n = signals.next() => self.signal(n, link),
            };
            if std::mem::take(&mut self.abort_due) {
                self.send_abort(link);
            }
            match step {
                Step::Go => {}
                Step::Settled => return Ended::Settled,
                Step::SessionGone => return Ended::SessionGone,
                Step::Lagged => {
                    if !self.reattach(link, out).await {
                        return Ended::Lost(
                            "this client fell behind and could not reconnect".into(),
                        );
                    }
                }
                Step::Lost(why) => {
                    let remote = self.dial.as_ref().is_some_and(|d| d.remote().is_some());
                    if !(remote && self.reconnect_remote(&why, link, signals, out).await) {
                        return Ended::Lost(why);
                    }
                }
            }
        }
    }

    /// Handles `first` and every note already there, then flushes stdout once.
    fn batch(&mut self, first: Option<Note>, link: &mut Link, out: &mut Output) -> Step {
        let mut next = first;
        let step = loop {
            let step = match next.take() {
                None if self.dial.is_none() => Step::SessionGone,
                None => Step::Lost(lost_why(&Lost::Closed)),
                Some(note) => self.note(note, out),
            };
            if !matches!(step, Step::Go) {
                break step;
            }
            match link.try_next() {
                Some(note) => next = Some(note),
                None => break Step::Go,
            }
        };
        if out.flush().is_err() {
            self.output_failed(out);
        }
        step
    }

    fn note(&mut self, note: Note, out: &mut Output) -> Step {
        match note {
            Note::Event { seq, line, typed } => self.event(seq, &line, typed.as_ref(), out),
            Note::Lagged { .. } => Step::Lagged,
            Note::Lost(why) => Step::Lost(lost_why(&why)),
            Note::Replaced { .. } | Note::Notice(_) => Step::Go,
        }
    }

    /// Feeds one wire line of the stream (read typed when it comes from a session in this
    /// process).
    fn event(
        &mut self,
        seq: u64,
        line: &str,
        typed: Option<&TypedEvent>,
        out: &mut Output,
    ) -> Step {
        if seq <= self.seq {
            return Step::Go;
        }
        self.seq = seq;
        let kind = match typed {
            Some(t) => std::borrow::Cow::Borrowed(t.kind()),
            None => match kind_of(line) {
                Some(kind) => kind,
                None => return Step::Go,
            },
        };
        if self.waiting_for_start {
            if kind != "agent_start" {
                return Step::Go;
            }
            self.waiting_for_start = false;
        }
        // Print mode reads a few kinds of line: the others are not even parsed.
        let unread = !self.projector.every_line() && !super::fact::read(&kind);
        if unread || is_rpc_only(&kind, line) {
            return Step::Go;
        }
        let fed = feed_line(&kind, line, typed, self.projector, &mut self.summary, out);
        if fed.write_failed {
            self.output_failed(out);
        }
        match fed.settled {
            true => Step::Settled,
            false => Step::Go,
        }
    }

    /// stdout took no more bytes: the run is stopped (the first reason stays).
    fn output_failed(&mut self, out: &Output) {
        if self.stop.is_none() {
            self.stop = Some(stdout_stop(out));
            self.abort_due = true;
        }
    }

    /// The prompt was refused (the session is busy): nothing will run.
    fn refused(&mut self, LinkError { message, .. }: LinkError) {
        self.summary.settled = Some(Settled {
            outcome: "failed".into(),
            error: Some(SettledError {
                kind: ErrorKind::Busy,
                message: format!("the session cannot take a prompt now: {message}"),
            }),
        });
    }

    /// `abort` is answered after the run settled; in the daemon, an answer with no settle
    /// seen means nothing was running (a `--wait` for a run that ended as it was
    /// interrupted). In this process the run's own `agent_settled` always comes.
    fn aborted(&mut self, _answer: Result<Value, LinkError>) -> Step {
        if self.summary.settled.is_some() || self.dial.is_none() {
            return Step::Go;
        }
        self.summary.settled = Some(Settled {
            outcome: "aborted".into(),
            error: None,
        });
        Step::Settled
    }

    /// Signal `n` aborts the run. A second one through the daemon stops waiting for it to
    /// settle; in this process the run is waited for (its session is saved as it settles).
    fn signal(&mut self, n: i32, link: &Link) -> Step {
        if self.stop.is_some() && self.dial.is_some() {
            self.summary.settled.get_or_insert(Settled {
                outcome: "aborted".into(),
                error: None,
            });
            return Step::Settled;
        }
        if self.stop.is_none() {
            self.stop = Some(Stop::Signal(n));
        }
        self.send_abort(link);
        Step::Go
    }

    fn send_abort(&mut self, link: &Link) {
        let commands = link.commands();
        self.aborting = Some(Box::pin(async move {
            commands.request("abort", json!({})).await
        }));
    }

    /// Attaches again from the last event seen, after the link fell behind.
    async fn reattach(&mut self, link: &mut Link, out: &mut Output) -> bool {
        let cursor = (self.epoch.as_str(), self.seq);
        let start = match &self.dial {
            None => match link.reattach_local(cursor).await {
                Some(Ok(start)) => start,
                _ => return false,
            },
            Some(dial) => match Link::daemon(dial, &self.session, Some(cursor), false).await {
                Ok((again, start)) => {
                    *link = again;
                    start
                }
                Err(_) => return false,
            },
        };
        self.started(&start, out);
        true
    }

    /// The link to the remote host dropped: connect again with backoff and attach from the
    /// last event seen, while the run goes on there. False when the daemon no longer holds
    /// the session, after [`crate::client::dial::Backoff::GIVE_UP`], or on a signal (the run
    /// is left running).
    async fn reconnect_remote(
        &mut self,
        why: &str,
        link: &mut Link,
        signals: &mut Signals,
        out: &mut Output,
    ) -> bool {
        let Some(dial) = self.dial.clone() else {
            return false;
        };
        out.err(&reconnect_line(&dial, &Reconnecting::Lost(why)));
        let back = tokio::select! {
            back = link.reconnect() => back,
            _ = signals.next() => return false,
        };
        match back {
            Reconnected::Back { start, attempts } => {
                out.err(&reconnect_line(&dial, &Reconnecting::Back(attempts)));
                if start.snapshot.is_some() {
                    self.missed(start.seq, &start.epoch, out);
                }
                true
            }
            Reconnected::Refused(why) => {
                out.err(&reconnect_line(&dial, &Reconnecting::Refused(&why)));
                false
            }
            Reconnected::GaveUp => false,
        }
    }

    /// Attached again: a snapshot means the events after the cursor are gone.
    fn started(&mut self, start: &Start, out: &mut Output) {
        if start.snapshot.is_some() {
            self.missed(start.seq, &start.epoch, out);
        }
    }

    /// The session no longer holds the events after the cursor: say so, and go on from the
    /// snapshot's `seq` (a `--wait` for a run that already settled ends with its verdict).
    pub fn missed(&mut self, seq: u64, epoch: &str, out: &mut Output) {
        out.err("Warning: the daemon no longer holds this run's earlier events; showing it from now on\n");
        self.seq = seq;
        self.epoch = epoch.to_string();
        self.waiting_for_start = false;
    }

    /// Feeds the last assistant message of `messages` and the run's `agent_settled` line.
    pub fn already_settled(&mut self, messages: &Value, settled: &Value, out: &mut Output) {
        let last = messages
            .as_array()
            .and_then(|m| m.iter().rev().find(|m| m["role"] == "assistant"));
        if let Some(m) = last {
            let line = json!({"type": "message_end", "message": m}).to_string();
            feed_line(
                "message_end",
                &line,
                None,
                self.projector,
                &mut self.summary,
                out,
            );
        }
        feed_line(
            "agent_settled",
            &settled.to_string(),
            None,
            self.projector,
            &mut self.summary,
            out,
        );
    }
}

/// The answer `pending` waits for; never ready without one (its `select!` branch is off).
async fn wait(pending: &mut Option<Answer>) -> Option<Result<Value, LinkError>> {
    match pending {
        Some(answer) => Some(answer.await),
        None => std::future::pending().await,
    }
}

/// Why the daemon went away, as the run's `daemon_lost` error says it.
fn lost_why(why: &Lost) -> String {
    match why {
        Lost::Closed => "it closed the connection".into(),
        Lost::ShuttingDown(_) => "it is shutting down".into(),
    }
}

/// The `type` of a wire line: read from its start when it is written as keel writes it
/// (`{"type":"…",` first), parsed otherwise.
fn kind_of(line: &str) -> Option<std::borrow::Cow<'_, str>> {
    let fast = line
        .strip_prefix("{\"type\":\"")
        .and_then(|rest| rest.split_once('"'))
        .map(|(kind, _)| kind)
        .filter(|kind| !kind.contains('\\'));
    match fast {
        Some(kind) => Some(std::borrow::Cow::Borrowed(kind)),
        None => crate::wire::events::kind_of(line).map(std::borrow::Cow::Owned),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_type_of_a_line_is_read_from_its_start_or_parsed() {
        assert_eq!(
            kind_of(r#"{"type":"message_update","x":1}"#).as_deref(),
            Some("message_update")
        );
        assert_eq!(
            kind_of(r#"{"x":1,"type":"agent_start"}"#).as_deref(),
            Some("agent_start")
        );
        assert_eq!(kind_of(r#"{"x":1}"#), None);
    }

    #[test]
    fn a_lost_daemon_is_named_as_the_run_error_names_it() {
        assert_eq!(lost_why(&Lost::Closed), "it closed the connection");
        assert_eq!(
            lost_why(&Lost::ShuttingDown("stopped".into())),
            "it is shutting down"
        );
    }
}
