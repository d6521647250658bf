//! The daemon's mechanism: where its socket lives and who may use it (`paths`), one daemon per
//! socket directory however many clients start at once (`spawn`), and the error both report
//! (`error`). No server loop, no protocol and no command line live here.

pub mod error;
pub mod paths;
pub mod spawn;

pub use error::DaemonError;
