//! The session store's bus subscriber: turns facts into session entries, appends each with one
//! write, and syncs at every turn end, at every settled run and when the bus closes. It owns
//! the `Store` for the life of the run; it never publishes.

use crate::kernel::bus::EventRx;
use crate::kernel::clock::Clock;
use crate::kernel::event::{Event, EventPayload};
use crate::kernel::session::{EntryData, Store};

/// Consumes events until the bus closes, then syncs and hands the store back.
pub async fn record(mut store: Store, mut rx: EventRx, clock: Clock) -> Store {
    while let Some(event) = rx.recv().await {
        apply(&mut store, &event, &clock);
    }
    if let Err(e) = store.sync() {
        tracing::error!("session sync failed: {e}");
    }
    store
}

/// Applies one event to the store.
fn apply(store: &mut Store, event: &Event, clock: &Clock) {
    let data = match &event.payload {
        EventPayload::ModelChanged { provider, model } => Some(EntryData::ModelChange {
            provider: provider.clone(),
            model_id: model.clone(),
        }),
        EventPayload::ThinkingLevelChanged { level } => Some(EntryData::ThinkingLevelChange {
            thinking_level: level.clone(),
        }),
        EventPayload::MessageFinished { message } => Some(EntryData::Message(message.clone())),
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
        | EventPayload::QueueChanged { .. } => None,
    };
    if let Some(data) = data {
        if let Err(e) = store.append(data, clock) {
            tracing::error!("session write failed: {e}");
        }
    }
}
