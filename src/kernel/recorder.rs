//! The session store's bus subscriber: turns facts into session entries, appends each with one
//! write, and syncs at every turn end, at every settled run and when the bus closes. It owns
//! the `Store` for the life of the run; it never publishes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::kernel::bus::EventRx;
use crate::kernel::clock::Clock;
use crate::kernel::event::{Event, EventPayload};
use crate::kernel::session::{EntryData, Store};

/// A store the recorder writes and front ends read (entries, tree, stats) between events.
pub type SharedStore = Arc<Mutex<Store>>;

/// Locks a shared store (a panic elsewhere never makes the session unreadable).
pub fn lock(store: &SharedStore) -> std::sync::MutexGuard<'_, Store> {
    store.lock().unwrap_or_else(|e| e.into_inner())
}

/// Writes events into a session store. A front end that must read the store consistently
/// between events (RPC mode) applies each event itself; others run [`record`] as a task.
#[derive(Debug)]
pub struct Recorder {
    store: SharedStore,
    clock: Clock,
    /// Ids that collided with an older entry of the file and were redrawn.
    remap: HashMap<String, String>,
}

impl Recorder {
    pub fn new(store: SharedStore, clock: &Clock) -> Recorder {
        Recorder {
            store,
            // Entry ids the recorder draws itself (model changes, session names) come from
            // their own stream, and entry times from the events: a run is byte-for-byte
            // repeatable however the recorder interleaves with the kernel.
            clock: clock.derive(0x7265_636f_7264),
            remap: HashMap::new(),
        }
    }

    /// Records one event (most record nothing).
    pub fn apply(&mut self, event: &Event) {
        apply(&mut lock(&self.store), event, &self.clock, &mut self.remap);
    }

    /// Flushes the file to disk.
    pub fn sync(&self) {
        if let Err(e) = lock(&self.store).sync() {
            tracing::error!("session sync failed: {e}");
        }
    }
}

/// Consumes events until the bus closes, then syncs.
pub async fn record(store: SharedStore, mut rx: EventRx, clock: Clock) {
    let mut recorder = Recorder::new(store, &clock);
    while let Some(event) = rx.recv().await {
        recorder.apply(&event);
    }
    recorder.sync();
}

/// Applies one event to the store. Entries keep the ids the kernel gave them; `remap` holds
/// the rare ids that collided with an older entry of the file and were redrawn.
fn apply(store: &mut Store, event: &Event, clock: &Clock, remap: &mut HashMap<String, String>) {
    let mut wanted: Option<(&str, Option<i64>)> = None;
    let data = match &event.payload {
        EventPayload::ModelChanged { provider, model } => Some(EntryData::ModelChange {
            provider: provider.clone(),
            model_id: model.clone(),
        }),
        EventPayload::ThinkingLevelChanged { level } => Some(EntryData::ThinkingLevelChange {
            thinking_level: level.clone(),
        }),
        EventPayload::MessageFinished { message, entry_id } => {
            wanted = Some((entry_id, None));
            Some(EntryData::Message(message.clone()))
        }
        EventPayload::CompactionFinished {
            result: Some(r), ..
        } => {
            wanted = Some((&r.entry_id, Some(r.timestamp)));
            Some(EntryData::Compaction {
                summary: r.summary.clone(),
                first_kept_entry_id: remap
                    .get(&r.first_kept_entry_id)
                    .cloned()
                    .unwrap_or_else(|| r.first_kept_entry_id.clone()),
                tokens_before: r.tokens_before,
                details: None,
            })
        }
        EventPayload::BashExecuted { record, entry_id } => {
            wanted = Some((entry_id, Some(record.timestamp)));
            Some(EntryData::RawMessage(record.to_json()))
        }
        EventPayload::SessionNamed { name } => Some(EntryData::SessionInfo { name: name.clone() }),
        EventPayload::TurnFinished { .. } | EventPayload::AgentSettled { .. } => {
            if let Err(e) = store.sync() {
                tracing::error!("session sync failed: {e}");
            }
            None
        }
        EventPayload::AgentStarted
        | EventPayload::AgentFinished { .. }
        | EventPayload::TurnStarted
        | EventPayload::MessageStarted { .. }
        | EventPayload::MessageDelta { .. }
        | EventPayload::ToolCallStarted { .. }
        | EventPayload::ToolCallUpdated { .. }
        | EventPayload::ToolCallFinished { .. }
        | EventPayload::ApprovalRequested { .. }
        | EventPayload::QueueChanged { .. }
        | EventPayload::RetryScheduled { .. }
        | EventPayload::RetryFinished { .. }
        | EventPayload::CompactionStarted { .. }
        | EventPayload::CompactionFinished { .. } => None,
    };
    let Some(data) = data else { return };
    let (id, at) = wanted.unzip();
    let at = at.flatten().unwrap_or(event.ts);
    match store.append_as(id, Some(at), data, clock) {
        Ok(entry) => {
            if let Some(id) = id.filter(|id| *id != entry.id) {
                remap.insert(id.to_string(), entry.id.clone());
            }
        }
        Err(e) => tracing::error!("session write failed: {e}"),
    }
}
