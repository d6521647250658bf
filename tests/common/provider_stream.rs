//! One streamed call of a real HTTP provider against a test server, its events collected, for
//! the recorded-stream tests of each API (`tests/responses.rs`, `tests/gemini_stream.rs`).

use std::time::Duration;

use keel::kernel::abort::AbortController;
use keel::kernel::provider::http::{HttpOptions, HttpProvider};
use keel::kernel::provider::model::ModelInfo;
use keel::kernel::provider::{ModelRequest, Provider, ProviderEvent};

/// Every event of one call of `model` (served by the test server) with `key`, until the
/// stream ends; 5 s connect and idle timeouts.
pub fn events(model: ModelInfo, key: &str, request: ModelRequest) -> Vec<ProviderEvent> {
    let options = HttpOptions {
        connect_timeout: Duration::from_secs(5),
        idle_timeout: Duration::from_secs(5),
        ..HttpOptions::default()
    };
    let p = HttpProvider::new(model, Some(key.into()), options).unwrap();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let (_c, signal) = AbortController::new();
            let mut rx = p.stream(request, signal);
            let mut out = Vec::new();
            while let Some(ev) = rx.recv().await {
                out.push(ev);
            }
            out
        })
}

/// Joins runs of text and thinking, so sequences can be written out whatever the chunking.
pub fn merged(events: Vec<ProviderEvent>) -> Vec<ProviderEvent> {
    use ProviderEvent as E;
    let mut out: Vec<E> = Vec::new();
    for ev in events {
        match (out.last_mut(), ev) {
            (Some(E::Text(a)), E::Text(b)) => a.push_str(&b),
            (Some(E::Thinking(a)), E::Thinking(b)) => a.push_str(&b),
            (_, ev) => out.push(ev),
        }
    }
    out
}
