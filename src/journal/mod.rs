//! The event journal (`keel daemon run --journal nats://…`): every `session/event` of every
//! live session, and the sessions' lifecycle facts, published to NATS JetStream. A session's
//! stream hands each delivery to the journal's tap (never dropped for lag); the tap appends it
//! to the on-disk spool at once ([`spool`]); the publisher ([`publish`]) drains the spool to
//! JetStream in order with acks. Both run on a thread (and runtime) of their own. The agent
//! never waits for NATS: the spool is bounded and drops its oldest records (counted) when
//! full. Never writes to stdout.

#[cfg(feature = "journal")]
mod commands;
pub mod facts;
pub mod options;
#[cfg(feature = "journal")]
mod publish;
pub mod spool;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use tokio::sync::{mpsc, Notify};

use crate::host::stream::{Delivery, Item};
use crate::kernel::clock::Clock;
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

/// A protocol v1 request line that came on `keel.cmd.<host>`, and where its answer (the
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

/// What goes into the tap, in the order it must be journaled.
enum Input {
    Delivery(Delivery),
    Fact(Value),
    /// Answered once everything handed to the tap before it is in the spool.
    Barrier(tokio::sync::oneshot::Sender<()>),
}

/// A running journal. Cheap to clone.
#[derive(Clone)]
pub struct Journal {
    tx: mpsc::UnboundedSender<Input>,
    deliveries: mpsc::UnboundedSender<Delivery>,
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
    ) -> Result<(Journal, Option<mpsc::UnboundedReceiver<Command>>), String> {
        let dir = options.spool_dir.clone();
        let spool = Spool::open(&dir, options.spool_bytes)
            .map_err(|e| format!("cannot open the journal spool {}: {e}", dir.display()))?;
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
        let (tx, rx) = mpsc::unbounded_channel();
        let (deliveries, deliveries_rx) = mpsc::unbounded_channel();
        let tap = Tap {
            state: state.clone(),
            host: options.host.clone(),
            clock,
            facts: facts::Sessions::default(),
            fact_ids: 0,
            instance: format!("{}-{}", std::process::id(), uuid::Uuid::new_v4().simple()),
            subject: (None, String::new()),
            barriers: Vec::new(),
            lines: Lines::default(),
        };
        // The journal's work (spooling, publishing) has a thread and a runtime of its own:
        // the daemon's thread only hands each delivery over.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the journal's runtime: {e}"))?;
        let (o, s) = (options.clone(), state.clone());
        std::thread::Builder::new()
            .name("keel-journal".into())
            .spawn(move || {
                runtime.block_on(async move {
                    run_publisher(o, s);
                    tap.run(rx, deliveries_rx).await;
                })
            })
            .map_err(|e| format!("cannot start the journal's thread: {e}"))?;
        let journal = Journal {
            tx,
            deliveries,
            state,
            options,
        };
        Ok((journal, requests))
    }

    /// The channel a live session's stream hands its deliveries to.
    pub fn tap(&self) -> mpsc::UnboundedSender<Delivery> {
        self.deliveries.clone()
    }

    pub fn options(&self) -> &JournalOptions {
        &self.options
    }

    /// Journals a lifecycle fact of session `session` (`opened`, `attached`, `detached`,
    /// `closed`; `settled` and `replaced` come from the stream itself). `extra` is merged in.
    pub fn fact(&self, kind: &str, session: &str, extra: Value) {
        let mut v = json!({"type": kind, "sessionId": session});
        if let (Some(m), Value::Object(e)) = (v.as_object_mut(), extra) {
            m.extend(e);
        }
        let _ = self.tx.send(Input::Fact(v));
    }

    /// At the daemon's exit: lets a connected publisher send what is spooled, for at most
    /// `grace` (what is left is sent by the next daemon).
    pub async fn flush(&self, grace: std::time::Duration) {
        let deadline = tokio::time::Instant::now() + grace;
        // The tap (on the journal's thread) may still hold the last facts: wait until what
        // was handed to it is in the spool.
        let (spooled, done) = tokio::sync::oneshot::channel();
        if self.tx.send(Input::Barrier(spooled)).is_ok() {
            let _ = tokio::time::timeout_at(deadline, done).await;
        }
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
    pub fn status(&self) -> Value {
        let c = self.state.spool().counts();
        let error = self
            .state
            .last_error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        json!({
            "url": self.options.url,
            "host": self.options.host,
            "connected": self.state.connected.load(Ordering::Relaxed),
            "lag": c.lag,
            "spooled": c.spooled,
            "published": c.acked,
            "dropped": c.dropped,
            "spoolBytes": c.bytes,
            "lastError": error,
        })
    }
}

#[cfg(feature = "journal")]
fn check_publisher() -> Result<(), String> {
    Ok(())
}

#[cfg(not(feature = "journal"))]
fn check_publisher() -> Result<(), String> {
    Err("this keel was built without the `journal` feature (cargo build --features journal)".into())
}

/// Starts the publisher on the journal's runtime.
#[cfg(feature = "journal")]
fn run_publisher(options: Arc<JournalOptions>, state: Arc<State>) {
    tokio::spawn(publish::run(options, state));
}

#[cfg(not(feature = "journal"))]
fn run_publisher(_: Arc<JournalOptions>, _: Arc<State>) {}

/// `keel daemon status`'s journal line for `daemon/status`'s `journal` object ("" when the
/// daemon runs none).
pub fn status_line(j: &Value) -> String {
    if !j.is_object() {
        return String::new();
    }
    let state = if j["connected"] == true {
        "connected"
    } else {
        "not connected"
    };
    let mut line = format!(
        "journal {} (host {}): {state}, lag {}, spooled {}, published {}, dropped {}",
        j["url"].as_str().unwrap_or("?"),
        j["host"].as_str().unwrap_or("?"),
        j["lag"],
        j["spooled"],
        j["published"],
        j["dropped"],
    );
    if let Some(e) = j["lastError"].as_str() {
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

/// While deliveries keep coming, how often the tap takes them.
const BURST_TICK: std::time::Duration = std::time::Duration::from_millis(1);

/// Turns deliveries and facts into spool records, at once and in order.
struct Tap {
    state: Arc<State>,
    host: String,
    clock: Clock,
    facts: facts::Sessions,
    fact_ids: u64,
    /// Names this daemon in the msg-ids of its facts (unique across restarts).
    instance: String,
    /// The subject of the last session seen (events come in runs of one session).
    subject: (Option<Arc<str>>, String),
    /// Barriers to answer after the next spool write.
    barriers: Vec<tokio::sync::oneshot::Sender<()>>,
    /// The spool lines of a tick, kept with their capacity from one burst to the next (a
    /// tick's lines are a few hundred KB at a high rate).
    lines: Lines,
}

impl Tap {
    async fn run(
        mut self,
        mut inputs: mpsc::UnboundedReceiver<Input>,
        mut deliveries: mpsc::UnboundedReceiver<Delivery>,
    ) {
        loop {
            // Idle: the first delivery of a burst wakes this thread.
            let input = tokio::select! {
                biased;
                Some(i) = inputs.recv() => i,
                Some(d) = deliveries.recv() => Input::Delivery(d),
                else => break,
            };
            let mut records = std::mem::take(&mut self.lines);
            self.records(input, &mut records);
            // Busy: what comes meanwhile is taken every millisecond, with no waker registered,
            // so a session's thread never has to wake this one per event.
            loop {
                while let Ok(i) = inputs.try_recv() {
                    self.records(i, &mut records);
                }
                while let Ok(d) = deliveries.try_recv() {
                    self.records(Input::Delivery(d), &mut records);
                }
                if records.is_empty() {
                    self.release();
                    // Kept, with its capacity, for the next burst.
                    self.lines = records;
                    break;
                }
                self.spool(&records);
                records.clear();
                self.release();
                tokio::time::sleep(BURST_TICK).await;
            }
        }
    }

    /// Answers the barriers: what came before them is spooled.
    fn release(&mut self) {
        for b in self.barriers.drain(..) {
            let _ = b.send(());
        }
    }

    fn spool(&self, records: &Lines) {
        let appended = self.state.spool().append_lines(records);
        if let Err(e) = appended {
            tracing::warn!("journal spool append failed: {e}");
            self.state.set_error(Some(format!("spool: {e}")));
        }
        self.state.appended.notify_one();
    }

    fn records(&mut self, input: Input, out: &mut Lines) {
        match input {
            Input::Barrier(b) => self.barriers.push(b),
            Input::Fact(v) => {
                let session = v["sessionId"].as_str().unwrap_or("").to_string();
                let v = self.facts.note(&session, v);
                out.record(&self.fact_record(v));
            }
            Input::Delivery(d) => match &d.item {
                Item::Event(e) => {
                    if self.subject.0.as_ref() != Some(&d.session) {
                        self.subject = (
                            Some(d.session.clone()),
                            event_subject(&self.host, &d.session),
                        );
                    }
                    let msg_id = format!("{}:{}:{}", d.session, d.epoch, e.seq);
                    // The socket's params bytes, written straight into the spool line.
                    out.line(&self.subject.1, &msg_id, |buf| {
                        crate::daemon::connection::event_params(&d.session, &d.epoch, e, buf)
                    });
                    if let Some(fact) = self.facts.event(&d.session, &e.line) {
                        out.record(&self.fact_record(fact));
                    }
                }
                Item::Replaced { new, seq } => {
                    let fact = json!({
                        "type": "replaced",
                        "sessionId": &*d.session,
                        "newSessionId": &**new,
                        "epoch": &*d.epoch,
                        "seq": seq,
                    });
                    self.facts.rename(&d.session, new);
                    out.record(&self.fact_record(fact));
                }
            },
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
