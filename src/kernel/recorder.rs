//! The session store's bus subscriber: turns facts into session entries, appends each with one
//! write, and syncs at every turn end, at every settled run and when the bus closes. It owns
//! the `Store` for the life of the run; it never publishes.

use crate::kernel::failure::ErrorKind;
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

type Hook = Box<dyn Fn() + Send + Sync>;

#[derive(Default)]
struct HealthInner {
    fault: Mutex<Option<String>>,
    hooks: Mutex<Vec<Hook>>,
}

/// Whether the session store has saved everything recorded so far. The recorder sets it; the
/// agent watches it and ends its run when the store fails; front ends report it. It clears
/// once a later write saves everything that was held back.
#[derive(Clone, Default)]
pub struct StoreHealth {
    inner: Arc<HealthInner>,
}

impl std::fmt::Debug for StoreHealth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreHealth")
            .field("fault", &self.fault())
            .finish()
    }
}

impl StoreHealth {
    /// The last write or sync error (path and OS error), while the store is failing.
    pub fn fault(&self) -> Option<String> {
        self.inner
            .fault
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The outcome of a run that settles while the store fails: failed with
    /// [`ErrorKind::SessionWrite`] and the fault's text (the kernel's and the host's conclusion alike).
    pub fn failed_run(&self) -> Option<crate::kernel::event::RunOutcome> {
        self.fault()
            .map(|message| crate::kernel::event::RunOutcome::Failed {
                kind: ErrorKind::SessionWrite,
                message,
            })
    }

    /// Calls `hook` after every failed write or sync.
    pub fn on_fault(&self, hook: impl Fn() + Send + Sync + 'static) {
        self.inner
            .hooks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Box::new(hook));
    }

    /// Records a write outcome: an error sets the fault and runs the hooks; success clears it
    /// once nothing is held back.
    fn update(&self, result: Result<(), String>, all_saved: bool) {
        let failed = {
            let mut fault = self.inner.fault.lock().unwrap_or_else(|e| e.into_inner());
            match result {
                Err(e) => {
                    if fault.is_none() {
                        tracing::debug!("session write failed: {e}");
                    }
                    *fault = Some(e);
                    true
                }
                Ok(()) => {
                    if all_saved {
                        *fault = None;
                    }
                    false
                }
            }
        };
        if failed {
            for hook in self
                .inner
                .hooks
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
            {
                hook();
            }
        }
    }
}

/// Writes events into a session store. A front end that must read the store consistently
/// between events (RPC mode) applies each event itself; others run [`record`] as a task.
#[derive(Debug)]
pub struct Recorder {
    store: SharedStore,
    clock: Clock,
    /// Ids that collided with an older entry of the file and were redrawn.
    remap: HashMap<String, String>,
    health: StoreHealth,
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
            health: StoreHealth::default(),
        }
    }

    /// The store's health, shared with whoever watches it (the agent, the front end).
    pub fn health(&self) -> StoreHealth {
        self.health.clone()
    }

    /// Records one event (most record nothing).
    pub fn apply(&mut self, event: &Event) {
        let (result, all_saved) = {
            let mut store = lock(&self.store);
            let r = apply(&mut store, event, &self.clock, &mut self.remap);
            (r, !store.has_unsaved())
        };
        // Outside the store lock: a fault hook aborts the agent's run.
        if let Some(result) = result {
            self.health.update(result, all_saved);
        }
    }

    /// Writes what is held back and flushes the file to disk.
    pub fn sync(&self) {
        let (result, all_saved) = {
            let mut store = lock(&self.store);
            let r = store.sync().map_err(|e| e.message);
            (r, !store.has_unsaved())
        };
        self.health.update(result, all_saved);
    }
}

/// Consumes events until the bus closes, then syncs.
pub async fn record(mut recorder: Recorder, mut rx: EventRx) {
    while let Some(event) = rx.recv().await {
        recorder.apply(&event);
    }
    recorder.sync();
}

/// Applies one event to the store; `None` when the event writes nothing. Entries keep the ids
/// the kernel gave them; `remap` holds the rare ids that collided with an older entry of the
/// file and were redrawn.
fn apply(
    store: &mut Store,
    event: &Event,
    clock: &Clock,
    remap: &mut HashMap<String, String>,
) -> Option<Result<(), String>> {
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
        EventPayload::CheckpointCreated { checkpoint } => Some(checkpoint.to_entry()),
        EventPayload::TodosUpdated { todos } => Some(
            crate::kernel::tool::todo::Todos {
                todos: todos.clone(),
            }
            .to_entry(),
        ),
        EventPayload::HookStarted { .. }
        | EventPayload::HookFinished { .. }
        | EventPayload::SandboxViolation { .. }
        | EventPayload::CheckpointFailed { .. }
        | EventPayload::PermissionChanged { .. }
        | EventPayload::Job(_) => None,
        EventPayload::TurnFinished { .. } | EventPayload::AgentSettled { .. } => {
            return Some(store.sync().map_err(|e| e.message));
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
    let data = data?;
    let (id, at) = wanted.unzip();
    let at = at.flatten().unwrap_or(event.ts);
    let before = store.entries().len();
    let result = store.append_as(id, Some(at), data, clock).map(|_| ());
    // A failed write still keeps the entry (held back for the next write): its id is known.
    if let (Some(id), Some(entry)) = (id, store.entries().get(before)) {
        if id != entry.id {
            remap.insert(id.to_string(), entry.id.clone());
        }
    }
    Some(result.map_err(|e| e.message))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::kernel::event::RunOutcome;
    use crate::kernel::message::{AssistantMessage, Content, Message, StopReason, Usage};
    use crate::kernel::private::{DATA_SYNCS, DIR_SYNCS};
    use crate::kernel::session::SessionHeader;

    const T0: i64 = 1_796_006_400_000;

    fn answer(text: &str) -> AssistantMessage {
        AssistantMessage {
            content: vec![Content::text(text)],
            api: "openai-completions".into(),
            provider: "mock".into(),
            model: "mock-1".into(),
            usage: Usage::default(),
            stop_reason: StopReason::Stop,
            error_message: None,
            duration_ms: Some(12),
            timestamp: T0,
        }
    }

    /// The payloads of one run of one turn: prompt `n`, its answer, settled.
    fn run(n: usize) -> Vec<EventPayload> {
        let ok = answer(&format!("answer {n}"));
        vec![
            EventPayload::AgentStarted,
            EventPayload::MessageFinished {
                message: Message::user(format!("prompt {n}"), T0),
                entry_id: format!("u{n}"),
            },
            EventPayload::TurnStarted,
            EventPayload::MessageFinished {
                message: Message::from(ok.clone()),
                entry_id: format!("a{n}"),
            },
            EventPayload::TurnFinished {
                message: ok,
                tool_results: Vec::new(),
            },
            EventPayload::AgentFinished {
                messages: Vec::new(),
                will_retry: false,
            },
            EventPayload::AgentSettled {
                aborted: false,
                outcome: RunOutcome::Completed,
                structured_output: None,
            },
        ]
    }

    /// (file data syncs, directory syncs) made by this thread so far.
    fn syncs() -> (usize, usize) {
        (DATA_SYNCS.with(|n| n.get()), DIR_SYNCS.with(|n| n.get()))
    }

    #[test]
    fn a_turn_is_written_entry_by_entry_and_synced_once_at_its_end() {
        // kill -9 loses nothing: each entry is in the file as soon as it is recorded. Only
        // the fdatasync waits for the turn's end (a power cut mid-turn may lose that turn);
        // a settle or close with nothing new written syncs nothing.
        let dir = tempfile::tempdir().unwrap();
        let clock = Clock::new(Some(1_796_006_400_000), Some(1));
        let path = dir.path().join("project/s.jsonl");
        let store = Store::new_file(path.clone(), SessionHeader::new(&clock, "/p"));
        let mut recorder = Recorder::new(Arc::new(Mutex::new(store)), &clock);
        let lines = || std::fs::read_to_string(&path).unwrap().lines().count();
        let start = syncs();
        let synced = || (syncs().0 - start.0, syncs().1 - start.1);
        let mut seq = 0;
        for n in 1..=2 {
            for payload in run(n) {
                if matches!(payload, EventPayload::TurnFinished { .. }) {
                    assert_eq!(
                        lines(),
                        1 + 2 * n,
                        "every entry is written before the turn ends"
                    );
                    let earlier = (n - 1, (n - 1).min(1));
                    assert_eq!(synced(), earlier, "turn {n}: no sync within the turn");
                }
                seq += 1;
                let ts = T0 + seq as i64;
                recorder.apply(&Event { seq, ts, payload });
            }
            recorder.sync(); // as when the bus closes
            assert_eq!(
                synced(),
                (n, 1),
                "turn {n}: one sync per turn, and one of the new file's directory"
            );
        }
        assert_eq!(recorder.health().fault(), None);
    }
}
