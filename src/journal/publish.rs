//! The journal's publisher: drains the spool to JetStream in order. It connects (with
//! backoff), creates the `KEEL_EVENTS` stream if missing, then publishes batches from the
//! spool's acked position (pipelined, each with `Nats-Msg-Id`) and acks in the spool what
//! JetStream stored. On any failure the connection is abandoned and a new one re-publishes
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
        let e = session(&options, &state, &mut up).await;
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
    loop {
        let mut batch = match state.spool().read(BATCH) {
            Ok(b) => b,
            Err(e) => return format!("spool read failed: {e}"),
        };
        if batch.records.is_empty() {
            tokio::select! {
                _ = state.appended.notified() => continue,
                _ = lost.notified() => return "connection lost".to_string(),
            }
        }
        // A lost connection ends the wait for acks at once (the unacked are sent again).
        let (stored, failure) = tokio::select! {
            sent = send(&js, std::mem::take(&mut batch.records)) => sent,
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

/// Publishes `records` pipelined, then awaits their acks in order: how many were stored
/// (a prefix), and the first failure.
async fn send(
    js: &jetstream::Context,
    records: Vec<super::spool::Record>,
) -> (usize, Option<String>) {
    let mut acks = Vec::with_capacity(records.len());
    let mut failure = None;
    for r in records {
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("Nats-Msg-Id", r.msg_id.as_str());
        let sent = js.publish_with_headers(r.subject, headers, r.payload.into());
        match tokio::time::timeout(ACK_TIMEOUT, sent).await {
            Ok(Ok(ack)) => acks.push(ack),
            Ok(Err(e)) => {
                failure = Some(format!("publish failed: {e}"));
                break;
            }
            Err(_) => {
                failure = Some("publish timed out".to_string());
                break;
            }
        }
    }
    let mut stored = 0;
    for ack in acks {
        match ack.await {
            Ok(_) => stored += 1,
            Err(e) => {
                failure.get_or_insert(format!("no ack from JetStream: {e}"));
                break;
            }
        }
    }
    (stored, failure)
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
