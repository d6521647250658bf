//! The event journal (`keel daemon run --journal nats://…`): every `session/event` of every
//! live session, and the sessions' lifecycle facts, published to NATS JetStream. A session's
//! stream hands each delivery to the journal's tap (never dropped for lag); the tap appends it
//! to the on-disk spool at once ([`spool`]); the publisher ([`publish`]) drains the spool to
//! JetStream in order with acks. Both run on a thread (and runtime) of their own. The agent
//! never waits for NATS: the spool is bounded and drops its oldest records (counted) when
//! full. Never writes to stdout.

mod batch;
#[cfg(feature = "journal")]
mod commands;
pub mod facts;
mod feed;
pub mod options;
#[cfg(feature = "journal")]
mod publish;
pub mod spool;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use tokio::sync::{mpsc, Notify};

use crate::kernel::clock::Clock;
use crate::wire::protocol::daemon::JournalStatus;
use feed::{Mark, Taken};
pub use options::JournalOptions;
use spool::{Lines, Record, Spool};

/// The journal's state, shared by the tap, the publisher and `daemon/status`.
pub struct State {
    pub spool: Mutex<Spool>,
    /// Rung after each append (the publisher waits on it when it has sent everything).
    pub appended: Notify,
    /// Rung (all waiters) after each ack.
    pub acked: Notify,
    pub connected: AtomicBool,
    pub last_error: Mutex<Option<String>>,
    /// Where `--journal-commands` hands the requests it gets.
    pub commands: Option<mpsc::UnboundedSender<Command>>,
}

/// A protocol v2 request line that came on `keel.cmd.<host>`, and where its answer (the
/// bytes the socket would write) goes.
pub struct Command {
    pub line: Vec<u8>,
    pub answer: tokio::sync::oneshot::Sender<Vec<u8>>,
}

impl State {
    fn spool(&self) -> std::sync::MutexGuard<'_, Spool> {
        self.spool.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn set_error(&self, e: Option<String>) {
        *self.last_error.lock().unwrap_or_else(|e| e.into_inner()) = e;
    }
}

/// Why the journal did not start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JournalErrorKind {
    /// The on-disk spool cannot be opened.
    Spool,
    /// This keel was built without the `journal` feature.
    NotBuilt,
    /// The journal's thread or runtime cannot be started.
    Thread,
}

/// A journal that did not start: its kind and the sentence the daemon's error shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalError {
    pub kind: JournalErrorKind,
    pub message: String,
}

impl JournalError {
    fn new(kind: JournalErrorKind, message: impl Into<String>) -> Self {
        JournalError {
            kind,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for JournalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for JournalError {}

/// A journal that did not start ends the daemon before it serves: an internal error (exit 70).
impl From<JournalError> for crate::error::StartupError {
    fn from(e: JournalError) -> Self {
        crate::error::StartupError::internal(e.message)
    }
}

/// A running journal. Cheap to clone.
#[derive(Clone)]
pub struct Journal {
    feed: feed::Sender,
    state: Arc<State>,
    options: Arc<JournalOptions>,
}

impl Journal {
    /// Opens the spool under `keel_home/journal/` and starts the tap and the publisher. Fails
    /// only on a spool that cannot be opened, or a build without the `journal` feature; a
    /// NATS server that cannot be reached is retried in the background. With
    /// `--journal-commands`, the requests that come on `keel.cmd.<host>` arrive on the
    /// returned receiver; the caller serves them.
    pub fn start(
        options: JournalOptions,
        clock: Clock,
    ) -> Result<(Journal, Option<mpsc::UnboundedReceiver<Command>>), JournalError> {
        let dir = options.spool_dir.clone();
        let spool = Spool::open(&dir, options.spool_bytes).map_err(|e| {
            JournalError::new(
                JournalErrorKind::Spool,
                format!("cannot open the journal spool {}: {e}", dir.display()),
            )
        })?;
        let (commands, requests) = match options.commands {
            true => {
                let (tx, rx) = mpsc::unbounded_channel();
                (Some(tx), Some(rx))
            }
            false => (None, None),
        };
        let state = Arc::new(State {
            spool: Mutex::new(spool),
            appended: Notify::new(),
            acked: Notify::new(),
            connected: AtomicBool::new(false),
            last_error: Mutex::new(None),
            commands,
        });
        let options = Arc::new(options);
        check_publisher()?;
        let (feed, rx) = feed::feed();
        let tap = Tap {
            state: state.clone(),
            host: options.host.clone(),
            clock,
            facts: facts::Sessions::default(),
            fact_ids: 0,
            instance: format!("{}-{}", std::process::id(), uuid::Uuid::new_v4().simple()),
            prefix: Prefix::default(),
            barriers: Vec::new(),
            lines: Lines::default(),
        };
        // The tap and the publisher have a thread and a runtime each: the daemon's threads
        // only hand items over, and spooling never waits behind publishing. The publisher
        // ends with the tap.
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        on_thread("keel-journal", async move {
            tap.run(rx).await;
            drop(stop);
        })?;
        let (o, s) = (options.clone(), state.clone());
        on_thread("keel-publish", async move {
            tokio::select! {
                _ = run_publisher(o, s) => {}
                _ = stopped => {}
            }
        })?;
        let journal = Journal {
            feed,
            state,
            options,
        };
        Ok((journal, requests))
    }

    /// Where a live session's stream hands its events and renames.
    pub fn tap(&self) -> Arc<dyn crate::host::stream::Tap> {
        Arc::new(self.feed.clone())
    }

    /// Journals a lifecycle fact of session `session` (`opened`, `attached`, `detached`,
    /// `closed`; `settled` and `replaced` come from the stream itself). `extra` is merged in.
    pub fn fact(&self, kind: &str, session: &str, extra: Value) {
        let mut v = json!({"type": kind, "sessionId": session});
        if let (Some(m), Value::Object(e)) = (v.as_object_mut(), extra) {
            m.extend(e);
        }
        self.feed.fact(v);
    }

    /// At the daemon's exit: lets a connected publisher send what is spooled, for at most
    /// `grace` (what is left is sent by the next daemon).
    pub async fn flush(&self, grace: std::time::Duration) {
        let deadline = tokio::time::Instant::now() + grace;
        // The tap (on the journal's thread) may still hold the last facts: wait until what
        // was handed to it is in the spool.
        let (spooled, done) = tokio::sync::oneshot::channel();
        self.feed.barrier(spooled);
        let _ = tokio::time::timeout_at(deadline, done).await;
        loop {
            let acked = self.state.acked.notified();
            if self.state.spool().counts().lag == 0 || !self.state.connected.load(Ordering::Relaxed)
            {
                return;
            }
            if tokio::time::timeout_at(deadline, acked).await.is_err() {
                return;
            }
        }
    }

    /// `daemon/status`'s `journal` object.
    pub fn status(&self) -> JournalStatus {
        let c = self.state.spool().counts();
        let error = self
            .state
            .last_error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        JournalStatus {
            url: crate::kernel::url::redact_url(&self.options.url),
            host: self.options.host.clone(),
            connected: self.state.connected.load(Ordering::Relaxed),
            lag: c.lag,
            spooled: c.spooled,
            published: c.acked,
            dropped: c.dropped,
            spool_bytes: c.bytes,
            last_error: error,
        }
    }
}

#[cfg(feature = "journal")]
fn check_publisher() -> Result<(), JournalError> {
    Ok(())
}

#[cfg(not(feature = "journal"))]
fn check_publisher() -> Result<(), JournalError> {
    Err(JournalError::new(
        JournalErrorKind::NotBuilt,
        "this keel was built without the `journal` feature (cargo build --features journal)",
    ))
}

/// Runs `work` on a thread named `name` with a runtime of its own.
fn on_thread(
    name: &str,
    work: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), JournalError> {
    let thread = |what: &str, e: std::io::Error| {
        JournalError::new(
            JournalErrorKind::Thread,
            format!("cannot start the journal's {what}: {e}"),
        )
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| thread("runtime", e))?;
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || runtime.block_on(work))
        .map(|_| ())
        .map_err(|e| thread("thread", e))
}

/// The publisher, for as long as the daemon runs.
#[cfg(feature = "journal")]
async fn run_publisher(options: Arc<JournalOptions>, state: Arc<State>) {
    publish::run(options, state).await
}

#[cfg(not(feature = "journal"))]
async fn run_publisher(_: Arc<JournalOptions>, _: Arc<State>) {}

/// `keel daemon status`'s journal line for `daemon/status`'s `journal` object ("" when the
/// daemon runs none).
pub fn status_line(j: Option<&JournalStatus>) -> String {
    let Some(j) = j else {
        return String::new();
    };
    let state = if j.connected {
        "connected"
    } else {
        "not connected"
    };
    let mut line = format!(
        "journal {} (host {}): {state}, lag {}, spooled {}, published {}, dropped {}",
        crate::kernel::url::redact_url(&j.url),
        j.host,
        j.lag,
        j.spooled,
        j.published,
        j.dropped,
    );
    if let Some(e) = &j.last_error {
        let e = crate::kernel::url::redact_url(e);
        line.push_str(&format!(" (last error: {e})"));
    }
    line.push('\n');
    line
}

/// `keel.events.<host>.<sessionId>` (a session id's characters other than `[A-Za-z0-9_-]`
/// become `_`; the payload keeps the real id).
pub fn event_subject(host: &str, session: &str) -> String {
    format!("keel.events.{host}.{}", options::token(session))
}

/// `keel.sessions.<host>`.
pub fn fact_subject(host: &str) -> String {
    format!("keel.sessions.{host}")
}

/// While items keep coming, how often the tap takes them.
const BURST_TICK: std::time::Duration = std::time::Duration::from_millis(1);

/// Turns the feed's items into spool records, at once and in order.
struct Tap {
    state: Arc<State>,
    host: String,
    clock: Clock,
    facts: facts::Sessions,
    fact_ids: u64,
    /// Names this daemon in the msg-ids of its facts (unique across restarts).
    instance: String,
    /// The line pieces of the last session and epoch seen (events come in runs of one).
    prefix: Prefix,
    /// Barriers to answer after the next spool write.
    barriers: Vec<tokio::sync::oneshot::Sender<()>>,
    /// The spool lines of a tick, kept with their capacity from one burst to the next (a
    /// tick's lines are a few hundred KB at a high rate).
    lines: Lines,
}

/// What every spool line of one session's events in one epoch starts with, up to its `seq`
/// (`{"subject":…,"msgId":"<session>:<epoch>:`), and what comes between the msg-id's `seq`
/// and the payload's (`","payload":{"sessionId":…,"epoch":…,"seq":`): the escaping is done
/// once per session, not per event. The line is byte for byte what [`Lines::line`] writes
/// with [`crate::daemon::connection::event_params`] as the payload.
#[derive(Default)]
struct Prefix {
    session: String,
    epoch: String,
    head: Vec<u8>,
    mid: Vec<u8>,
}

impl Prefix {
    fn new(host: &str, session: &str, epoch: &str) -> Prefix {
        // Writing into a Vec cannot fail.
        let mut head = b"{\"subject\":".to_vec();
        let _ = serde_json::to_writer(&mut head, &event_subject(host, session));
        head.extend_from_slice(b",\"msgId\":");
        let _ = serde_json::to_writer(&mut head, &format!("{session}:{epoch}:"));
        head.pop(); // the closing quote: the seq and a quote follow
        let mut mid = b"\",\"payload\":".to_vec();
        crate::daemon::connection::event_params_head(session, epoch, &mut mid);
        Prefix {
            session: session.to_string(),
            epoch: epoch.to_string(),
            head,
            mid,
        }
    }

    /// The spool line of event `seq` (whose JSON is `event`) into `out`.
    fn line(&self, seq: u64, event: &[u8], out: &mut Lines) {
        let mut n = itoa::Buffer::new();
        let seq = n.format(seq).as_bytes();
        out.raw(|buf| {
            buf.extend_from_slice(&self.head);
            buf.extend_from_slice(seq);
            buf.extend_from_slice(&self.mid);
            buf.extend_from_slice(seq);
            buf.extend_from_slice(b",\"event\":");
            buf.extend_from_slice(event);
            buf.extend_from_slice(b"}}\n");
        });
    }
}

impl Tap {
    async fn run(mut self, feed: feed::Receiver) {
        let mut taken = Taken::default();
        // Idle: the first item of a burst wakes this thread.
        while feed.idle().await {
            let mut records = std::mem::take(&mut self.lines);
            // Busy: what comes meanwhile is taken every millisecond, with no waker involved,
            // so a session's thread never has to wake this one per event.
            while feed.take(&mut taken) {
                self.records(&mut taken, &mut records);
                taken.clear();
                self.spool(&records);
                records.clear();
                self.release();
                tokio::time::sleep(BURST_TICK).await;
            }
            // Kept, with its capacity, for the next burst.
            self.lines = records;
        }
    }

    /// Answers the barriers: what came before them is spooled.
    fn release(&mut self) {
        for b in self.barriers.drain(..) {
            let _ = b.send(());
        }
    }

    fn spool(&self, records: &Lines) {
        if records.is_empty() {
            return;
        }
        let appended = self.state.spool().append_lines(records);
        if let Err(e) = appended {
            tracing::warn!("journal spool append failed: {e}");
            self.state.set_error(Some(format!("spool: {e}")));
        }
        self.state.appended.notify_one();
    }

    /// The spool lines of what was taken, in order (barriers are kept to answer once these
    /// are spooled).
    fn records(&mut self, taken: &mut Taken, out: &mut Lines) {
        let bytes = &taken.bytes;
        let text = |r: &std::ops::Range<usize>| feed::text(bytes, r);
        for mark in taken.marks.drain(..) {
            match mark {
                Mark::Barrier(b) => self.barriers.push(b),
                Mark::Fact(v) => {
                    let session = v["sessionId"].as_str().unwrap_or("").to_string();
                    let v = self.facts.note(&session, v);
                    out.record(&self.fact_record(v));
                }
                Mark::Event {
                    session,
                    epoch,
                    seq,
                    line,
                } => {
                    let (session, epoch) = (text(&session), text(&epoch));
                    if self.prefix.session != session || self.prefix.epoch != epoch {
                        self.prefix = Prefix::new(&self.host, session, epoch);
                    }
                    let line = &bytes[line];
                    self.prefix.line(seq, line, out);
                    if facts::looks_at(line) {
                        let line = std::str::from_utf8(line).unwrap_or_default();
                        if let Some(fact) = self.facts.event(session, line) {
                            out.record(&self.fact_record(fact));
                        }
                    }
                }
                Mark::Replaced {
                    old,
                    new,
                    epoch,
                    seq,
                } => {
                    let (old, new) = (text(&old), text(&new));
                    let fact = json!({
                        "type": "replaced",
                        "sessionId": old,
                        "newSessionId": new,
                        "epoch": text(&epoch),
                        "seq": seq,
                    });
                    self.facts.rename(old, new);
                    out.record(&self.fact_record(fact));
                }
            }
        }
    }
    fn fact_record(&mut self, mut fact: Value) -> Record {
        self.fact_ids += 1;
        if let Some(m) = fact.as_object_mut() {
            m.insert("host".into(), json!(self.host));
            m.insert("time".into(), json!(self.clock.now_iso()));
        }
        Record {
            subject: fact_subject(&self.host),
            msg_id: format!("{}:fact:{}", self.instance, self.fact_ids),
            payload: fact.to_string(),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::host::Published;

    #[test]
    fn an_event_line_from_the_prefix_is_the_line_with_the_socket_params_byte_for_byte() {
        let event = Published {
            seq: 12345,
            line: r#"{"type":"message_update","delta":"é \"q\" \\ \u0001"}"#.into(),
        };
        for (session, epoch) in [("0195-plain-id", "ep1"), ("odd \"id\" \\ é\u{1}", "e.2/x")] {
            let mut want = Lines::default();
            let msg_id = format!("{session}:{epoch}:{}", event.seq);
            want.line(&event_subject("bench", session), &msg_id, |buf| {
                crate::daemon::connection::event_params(session, epoch, &event, buf)
            });
            let mut got = Lines::default();
            Prefix::new("bench", session, epoch).line(event.seq, event.line.as_bytes(), &mut got);
            assert_eq!(
                String::from_utf8_lossy(&got.buf),
                String::from_utf8_lossy(&want.buf)
            );
            assert_eq!(got.ends, want.ends);
        }
    }

    #[test]
    fn a_spool_that_cannot_be_opened_is_a_spool_error_that_ends_the_daemon_as_internal() {
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("spool");
        std::fs::write(&file, "").unwrap();
        let second = std::time::Duration::from_secs(1);
        let options = JournalOptions {
            url: "nats://127.0.0.1:1".into(),
            creds: None,
            host: "h".into(),
            max_age: second,
            max_bytes: 1 << 20,
            dedupe: second,
            spool_dir: file.clone(),
            spool_bytes: 1 << 20,
            commands: false,
        };
        let Err(e) = Journal::start(options, Clock::new(Some(0), Some(1))) else {
            panic!("a file as the spool directory was opened");
        };
        assert_eq!(e.kind, JournalErrorKind::Spool, "{e}");
        let want = format!("cannot open the journal spool {}: ", file.display());
        assert!(e.message.starts_with(&want), "{e}");
        let e = crate::error::StartupError::from(e);
        assert_eq!(e.exit(), crate::exit::Exit::Internal);
    }

    #[test]
    fn facts_look_only_at_the_three_event_types_they_use() {
        for (line, wanted) in [
            (r#"{"type":"agent_start"}"#, true),
            (r#"{"type":"turn_end","message":{}}"#, true),
            (r#"{"type":"agent_settled","aborted":false}"#, true),
            (r#"{"type":"agent_started"}"#, false),
            (r#"{"type":"message_update"}"#, false),
            (r#"{"kind":"turn_end"}"#, false),
        ] {
            assert_eq!(facts::looks_at(line.as_bytes()), wanted, "{line}");
        }
    }
}
