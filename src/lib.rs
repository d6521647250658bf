//! keel: a coding-agent harness. One kernel (providers, tools, turn loop, sessions) publishes
//! every fact on one event bus; front ends project it. The library is the SDK: embedders hold a
//! [`kernel::agent::AgentSession`] and read its bus (see `examples/`).
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod app;
pub mod cli;
pub mod client;
pub mod daemon;
pub mod error;
pub mod exit;
pub mod front;
pub mod host;
pub mod kernel;
pub mod mcp;
pub mod mentions;
pub mod mode;
pub mod output;
pub mod prompts;
pub mod schedule;
pub mod setup;
pub mod signals;
pub mod skills;
pub mod text;
pub mod wire;

pub use kernel::agent::{AgentConfig, AgentSession, Permission};
pub use kernel::bus::Bus;
pub use kernel::clock::Clock;
pub use kernel::event::{Event, EventPayload, RunOutcome};
