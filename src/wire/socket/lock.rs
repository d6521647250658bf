//! The contract between a client that spawns the daemon and the daemon it starts, as data: the
//! daemon's life lock `daemon.lock` (its PID inside), what a client reads in it, how long a
//! starting daemon waits for it, and the flag a spawned daemon gets. The daemon takes the lock
//! (`daemon::socket`); the client reads it (`client::locate`).

use std::time::Duration;

/// Lock file held by a running daemon for its whole life, its PID inside.
pub const DAEMON_LOCK: &str = "daemon.lock";
/// How long the daemon retries a held `daemon.lock` before it concludes that a daemon holds
/// it: a client's probe takes a free lock for an instant, and a daemon starting at that
/// instant must not give up.
pub const LOCK_GRACE: Duration = Duration::from_millis(100);
/// Flag `daemon_command` adds so the daemon knows it was spawned and must leave the terminal's
/// session and ignore SIGHUP first.
pub const SPAWNED_FLAG: &str = "--spawned";

/// Whether a daemon holds `daemon.lock` in a directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockState {
    Free,
    /// Held, with the PID written in the file (`None` while the daemon has not written it yet).
    Held(Option<u32>),
}
