//! The test helpers, in one home: every `tests/common/*.rs` module is declared here.

pub mod daemon;
pub mod http_server;
pub mod kernel;
pub mod provider_stream;
pub mod pty;
pub mod rpc;
pub use keel_testkit::sshd;
pub mod support;
