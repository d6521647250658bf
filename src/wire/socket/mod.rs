//! What the daemon's server and its clients share about the socket: where it lives and who may
//! use it (`paths`), and the one error both report about it (`error`).

mod error;
pub mod lock;
pub mod paths;

pub use error::{DaemonError, DaemonErrorKind};
