//! The signals that end a process's loop (SIGINT, SIGTERM, SIGHUP), as one source a loop can wait
//! on. A leaf shared by the front ends and the daemon's server.

use tokio::signal::unix::{signal, Signal, SignalKind};

use crate::error::StartupError;
use crate::exit::{SIGHUP, SIGINT, SIGTERM};

/// SIGINT, SIGTERM and SIGHUP handlers, installed together.
pub struct Signals {
    int: Signal,
    term: Signal,
    hup: Signal,
}

impl Signals {
    /// Installs the three handlers (from now on these signals no longer kill the process).
    pub fn new() -> Result<Signals, StartupError> {
        Ok(Signals {
            int: listen(SignalKind::interrupt())?,
            term: listen(SignalKind::terminate())?,
            hup: listen(SignalKind::hangup())?,
        })
    }

    /// The next signal's number.
    pub async fn next(&mut self) -> i32 {
        tokio::select! {
            _ = self.int.recv() => SIGINT,
            _ = self.term.recv() => SIGTERM,
            _ = self.hup.recv() => SIGHUP,
        }
    }
}

/// One signal handler, or a startup error saying it could not be installed.
pub fn listen(kind: SignalKind) -> Result<Signal, StartupError> {
    signal(kind)
        .map_err(|e| StartupError::internal("cannot install a signal handler").cause(e.to_string()))
}
