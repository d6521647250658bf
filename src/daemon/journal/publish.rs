//! The journal's publisher: drains the spool to JetStream in order. It connects (with
//! backoff), creates the `KEEL_EVENTS` stream if missing, then publishes batches from the
//! spool's acked position (pipelined, each with `Nats-Msg-Id`, one JetStream ack per batch) and
//! acks in the spool what JetStream stored. On any failure the connection is abandoned and a new one re-publishes
//! from the first unacked record, so the stream keeps each session's order and the duplicate
//! window removes what was stored but not acked. The client's own reconnect is switched off
//! for that reason: it would send messages queued on a dead connection after a lost one.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::{self, stream};
use tokio::sync::Notify;

use super::options::Creds;
use super::{JournalOptions, State};

/// Records published before their acks are awaited.
const BATCH: usize = 512;
/// How long a publish and its ack may take before the connection counts as lost.
const ACK_TIMEOUT: Duration = Duration::from_secs(5);
/// Reconnect backoff: from the first to the longest wait, doubling.
const BACKOFF_FIRST: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// Runs for as long as the daemon: connect, publish, and on failure wait and start again.
pub async fn run(options: Arc<JournalOptions>, state: Arc<State>) {
    let mut wait = BACKOFF_FIRST;
    loop {
        let mut up = false;
        // Its errors may quote the URL: never with the password.
        let e = crate::kernel::url::redact_url(&session(&options, &state, &mut up).await);
        state.connected.store(false, Ordering::Relaxed);
        tracing::warn!("journal: {e}");
        state.set_error(Some(e));
        if up {
            wait = BACKOFF_FIRST;
        }
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(BACKOFF_MAX);
    }
}

/// One connection's life; returns why it ended. `up`: it connected and had the stream.
async fn session(options: &JournalOptions, state: &State, up: &mut bool) -> String {
    let lost = Arc::new(Notify::new());
    let client = match connect(options, lost.clone()).await {
        Ok(c) => c,
        Err(e) => return format!("cannot connect to {}: {e}", options.url),
    };
    let mut js = jetstream::new(client.clone());
    js.set_timeout(ACK_TIMEOUT);
    if let Err(e) = ensure_stream(&js, options).await {
        return format!("stream {}: {e}", super::options::STREAM);
    }
    // Served on this connection while it lives (dropped with it).
    let _commands = match &state.commands {
        Some(tx) => match super::commands::serve(&client, &options.host, tx.clone()).await {
            Ok(service) => Some(service),
            Err(e) => return e,
        },
        None => None,
    };
    *up = true;
    state.connected.store(true, Ordering::Relaxed);
    state.set_error(None);
    let mut subjects = Subjects::default();
    loop {
        let batch = match state.spool().read(BATCH) {
            Ok(b) => b,
            Err(e) => return format!("spool read failed: {e}"),
        };
        if batch.is_empty() {
            tokio::select! {
                _ = state.appended.notified() => continue,
                _ = lost.notified() => return "connection lost".to_string(),
            }
        }
        // A lost connection ends the wait for acks at once (the unacked are sent again).
        let (stored, failure) = tokio::select! {
            sent = send(&client, &js, &batch, &mut subjects) => sent,
            _ = lost.notified() => (0, Some("connection lost".to_string())),
        };
        if let Err(e) = state.spool().ack(&batch, stored) {
            return format!("spool ack failed: {e}");
        }
        state.acked.notify_waiters();
        if let Some(e) = failure {
            return e;
        }
    }
}

/// The last subject published, kept as the client's type (events come in runs of one
/// session: no new subject per message).
#[derive(Default)]
struct Subjects(Option<async_nats::Subject>);

impl Subjects {
    fn get(&mut self, subject: &str) -> async_nats::Subject {
        match &self.0 {
            Some(s) if s.as_str() == subject => s.clone(),
            _ => self.0.insert(async_nats::Subject::from(subject)).clone(),
        }
    }
}

/// Publishes `batch` in order: every record but the last as a plain NATS message (the stream
/// captures its subject; `Nats-Msg-Id` still deduplicates), the last through JetStream with its
/// ack. JetStream stores one connection's messages in the order they came, so that ack says the
/// whole batch went in. Returns how many records were stored (all or none) and the failure.
/// One ack per batch instead of one per message: a JetStream publish costs a reply inbox and a
/// parsed ack each, several microseconds per event. Payloads go out as views of the spool's
/// read, not copies.
async fn send(
    client: &async_nats::Client,
    js: &jetstream::Context,
    batch: &super::spool::Batch,
    subjects: &mut Subjects,
) -> (usize, Option<String>) {
    let n = batch.len();
    let headers = |msg_id: &str| {
        let mut h = async_nats::HeaderMap::new();
        h.insert("Nats-Msg-Id", msg_id);
        h
    };
    let mut it = batch.iter();
    for r in it.by_ref().take(n.saturating_sub(1)) {
        let (subject, h) = (subjects.get(r.subject), headers(r.msg_id));
        if let Err(e) = client.publish_with_headers(subject, h, r.payload).await {
            return (0, Some(format!("publish failed: {e}")));
        }
    }
    let Some(last) = it.next() else {
        return (0, None);
    };
    let (subject, h) = (subjects.get(last.subject), headers(last.msg_id));
    let sent = js.publish_with_headers(subject, h, last.payload);
    let ack = match tokio::time::timeout(ACK_TIMEOUT, sent).await {
        Ok(Ok(ack)) => ack,
        Ok(Err(e)) => return (0, Some(format!("publish failed: {e}"))),
        Err(_) => return (0, Some("publish timed out".to_string())),
    };
    match ack.await {
        Ok(_) => (n, None),
        Err(e) => (0, Some(format!("no ack from JetStream: {e}"))),
    }
}

/// A client whose connection, once lost, stays lost (`lost` is notified): the publisher makes
/// a new one.
async fn connect(
    options: &JournalOptions,
    lost: Arc<Notify>,
) -> Result<async_nats::Client, String> {
    let creds = match &options.creds {
        Some(path) => Some(super::options::creds(path).map_err(|e| e.message)?),
        None => None,
    };
    let mut opts = match creds {
        Some(Creds::Jwt(text)) => async_nats::ConnectOptions::with_credentials(&text)
            .map_err(|e| format!("credentials: {e}"))?,
        Some(Creds::NKey(seed)) => async_nats::ConnectOptions::with_nkey(seed),
        None => async_nats::ConnectOptions::new(),
    };
    let connected = Arc::new(AtomicBool::new(false));
    let seen = connected.clone();
    // The first connect is tried at once; a reconnect never (about a century), so nothing
    // queued on the lost connection is sent later, out of order.
    opts = opts
        .name(format!("keel daemon {}", options.host))
        .connection_timeout(ACK_TIMEOUT)
        .reconnect_delay_callback(move |_| {
            if seen.load(Ordering::Relaxed) {
                Duration::from_secs(100 * 365 * 24 * 3600)
            } else {
                Duration::ZERO
            }
        })
        .event_callback(move |event| {
            let lost = lost.clone();
            async move {
                if matches!(event, async_nats::Event::Disconnected) {
                    lost.notify_one();
                }
            }
        });
    let client = opts
        .connect(options.url.as_str())
        .await
        .map_err(|e| e.to_string())?;
    connected.store(true, Ordering::Relaxed);
    Ok(client)
}

/// Creates `KEEL_EVENTS` on `keel.events.>` and `keel.sessions.>` with the configured limits,
/// or uses the one that exists as it is.
async fn ensure_stream(js: &jetstream::Context, options: &JournalOptions) -> Result<(), String> {
    let config = stream::Config {
        name: super::options::STREAM.to_string(),
        subjects: vec!["keel.events.>".to_string(), "keel.sessions.>".to_string()],
        max_age: options.max_age,
        max_bytes: i64::try_from(options.max_bytes).unwrap_or(i64::MAX),
        duplicate_window: options.dedupe,
        storage: stream::StorageType::File,
        ..Default::default()
    };
    js.get_or_create_stream(config)
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}
