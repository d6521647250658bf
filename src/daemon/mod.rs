//! The daemon (`DESIGN.md` §10): a thin Unix-socket transport over shared session hosts.
//! `paths` where its socket lives and who may use it; `spawn` one daemon per socket directory
//! however many clients start at once; `server` the accept loop and lifetime; `connection`
//! protocol v1 on one connection; `open` `session/open`; `client` the commands that talk to it
//! (`keel daemon status|stop|start`, `keel ps`); `install` the unit that starts it at login;
//! `error` what they report.

pub mod client;
pub mod connection;
pub mod error;
pub mod install;
pub mod open;
pub mod paths;
pub mod server;
pub mod spawn;

pub use error::DaemonError;
