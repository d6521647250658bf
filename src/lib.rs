//! keel: a coding-agent harness. One kernel (providers, tools, turn loop, sessions) publishes
//! every fact on one event bus; front ends project it. The library is the SDK: embedders hold a
//! [`kernel::agent::AgentSession`] and read its bus (see `examples/`), speak the typed protocol
//! ([`wire`]) and drive sessions through the [`client`]. The modules the integration tests
//! still reach (`cli`, `front`, `host`, `mode`, `setup`, `text`) are public for them; the rest
//! is crate-private. [`main`] is the `keel` binary's whole body.
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub(crate) mod agents;
pub(crate) mod app;
pub mod cli;
pub mod client;
pub(crate) mod daemon;
pub(crate) mod error;
pub(crate) mod exit;
pub mod front;
pub mod host;
pub mod kernel;
pub(crate) mod mcp;
pub(crate) mod mentions;
pub mod mode;
pub(crate) mod output;
pub(crate) mod prompts;
pub mod report;
pub(crate) mod schedule;
pub(crate) mod settings;
pub mod setup;
pub(crate) mod signals;
pub(crate) mod skills;
pub mod text;
pub(crate) mod web;
pub mod wire;
pub mod worktree;

pub use app::main;
pub use kernel::agent::{AgentConfig, AgentSession, Permission};
pub use kernel::bus::Bus;
pub use kernel::clock::Clock;
pub use kernel::event::{Event, EventPayload, RunOutcome};
