//! The daemon (`DESIGN.md` §10): a thin Unix-socket transport over shared session hosts.
//! `paths` where its socket lives and who may use it; `spawn` one daemon per socket directory
//! however many clients start at once; `server` the accept loop and lifetime; `connection`
//! protocol v1 on one connection; `open` `session/open`; `client` the commands that talk to it
//! (`keel daemon status|stop|start`, `keel ps`); `dial` where a client finds the daemon (its
//! socket, or another host's over ssh) and `bridge` the remote end of that; `install` the unit
//! that starts it at login; `error` what they report.

pub mod bridge;
pub mod client;
pub mod connection;
pub mod dial;
pub mod error;
pub mod install;
pub mod open;
pub mod paths;
pub mod server;
pub mod spawn;

pub use error::{DaemonError, DaemonErrorKind};
