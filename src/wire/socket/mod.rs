//! What the daemon's server and its clients share about the socket, as data: where it lives
//! and who may use it (`paths`), the daemon's lock (`lock`), and the one error both report
//! about it (`error`). The I/O is theirs (`client::locate`, `daemon::socket`):
//! `tests/architecture.rs` keeps files, processes and syscalls out of here.

mod error;
pub mod lock;
pub mod paths;

pub use error::{DaemonError, DaemonErrorKind};
