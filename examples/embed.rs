//! Embedding keel as a library: build an `AgentSession` on the scripted provider, send a prompt,
//! stream the answer's text deltas as they arrive, and report how the run ended.
//!
//! Run it with `cargo run --example embed -- [SCRIPT] [PROMPT]` (defaults: the hello fixture).
// An example program talks to its user on stdout by design.
#![allow(clippy::print_stdout, clippy::print_stderr, clippy::disallowed_methods)]

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use keel::kernel::event::{AssistantDelta, EventPayload};
use keel::kernel::provider::scripted::ScriptedProvider;
use keel::{AgentConfig, AgentSession, Bus, Clock};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let script = args.next().map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/providers/hello.json")
    });
    let prompt = args.next().unwrap_or_else(|| "Say hello".to_string());

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let provider = ScriptedProvider::load(&script)?;
        let cwd = std::env::current_dir()?;
        let config = AgentConfig::new(cwd, std::env::temp_dir());
        let clock = Clock::system();
        let session = AgentSession::new(
            config,
            Arc::new(provider),
            Bus::new(clock.clone()),
            clock,
            Vec::new(),
        );

        // Subscribe before prompting so no event is missed.
        let mut events = session.subscribe();
        let run = session.prompt(prompt)?;
        let mut stdout = std::io::stdout();
        while let Some(event) = events.recv().await {
            match &event.payload {
                EventPayload::MessageDelta {
                    delta: AssistantDelta::TextDelta { delta, .. },
                    ..
                } => {
                    write!(stdout, "{delta}")?;
                    stdout.flush()?;
                }
                EventPayload::ToolCallStarted { tool_name, .. } => eprintln!("[tool] {tool_name}"),
                EventPayload::AgentSettled { outcome, .. } => {
                    println!();
                    eprintln!("[settled] {outcome:?}");
                    break;
                }
                _ => {}
            }
        }
        run.await?;
        Ok(())
    })
}
