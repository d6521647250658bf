//! What the in-process tests of the kernel share (an `AgentSession`, no binary): a
//! current-thread runtime, the scripted provider, a session on the fixed test clock, and one
//! prompt driven until its run settles. Tests wait on events, never on time.

use std::sync::Arc;

use keel::kernel::event::{Event, EventPayload, RunOutcome};
use keel::kernel::message::Message;
use keel::kernel::provider::scripted::ScriptedProvider;
use keel::kernel::provider::Provider;
use keel::{AgentConfig, AgentSession, Bus, Clock};

/// A current-thread runtime with I/O and time.
pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// The scripted provider playing `script` (a script's JSON text).
pub fn scripted(script: &str) -> ScriptedProvider {
    ScriptedProvider::from_script(serde_json::from_str(script).unwrap()).unwrap()
}

/// A session of `config` on `provider`, holding `history`, on the fixed test clock (it starts
/// at 1 and moves 1 ms a reading).
pub fn session(
    config: AgentConfig,
    provider: impl Provider + 'static,
    history: Vec<Message>,
) -> AgentSession {
    let clock = Clock::new(Some(1), Some(1));
    AgentSession::new(
        config,
        Arc::new(provider),
        Bus::new(clock.clone()),
        clock,
        history,
    )
}

/// Prompts and collects events until `AgentSettled`, calling `on` for each event first; the
/// events and the run's outcome.
pub async fn drive(
    s: &AgentSession,
    prompt: &str,
    mut on: impl FnMut(&AgentSession, &Event),
) -> (Vec<Arc<Event>>, RunOutcome) {
    let mut rx = s.subscribe();
    let run = s.prompt(prompt.into()).unwrap();
    let mut events = Vec::new();
    while let Some(ev) = rx.recv().await {
        on(s, &ev);
        let done = matches!(ev.payload, EventPayload::AgentSettled { .. });
        events.push(ev);
        if done {
            break;
        }
    }
    (events, run.await.unwrap())
}
