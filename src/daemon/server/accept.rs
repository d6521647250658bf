//! What the accept loop does when `accept` fails for want of a resource (the fd limit,
//! `EMFILE`/`ENFILE`, or kernel memory): it stops accepting for a while that grows from
//! 100 ms to 2 s, retries, and logs once when such an episode starts and once when it ends,
//! with the count of failed accepts. Never retries at once: the listening socket stays
//! readable while a connection waits, so an immediate retry would spin.

use std::time::{Duration, Instant};

/// The first pause after a failed accept, and the longest.
const FIRST: Duration = Duration::from_millis(100);
const LONGEST: Duration = Duration::from_secs(2);

/// The state of the accept loop's back-off.
#[derive(Debug, Default)]
pub struct Backoff {
    /// The current episode: when it began, failed accepts so far, the pause now in force.
    episode: Option<Episode>,
}

#[derive(Debug)]
struct Episode {
    began: Instant,
    failures: u64,
    pause: Duration,
}

/// What the loop does after an `accept` error.
#[derive(Debug, PartialEq, Eq)]
pub enum After {
    /// Stop accepting for this long, then try again.
    Pause(Duration),
    /// Go on at once (an error about one connection, not about resources).
    Continue,
}

impl Backoff {
    /// A failed accept: starts or extends an episode when resources ran out (logging its
    /// start once), else logs the error.
    pub fn failed(&mut self, e: &std::io::Error) -> After {
        if !exhausted(e) {
            tracing::warn!("accept failed: {e}");
            return After::Continue;
        }
        match &mut self.episode {
            Some(ep) => {
                ep.failures += 1;
                ep.pause = (ep.pause * 2).min(LONGEST);
                After::Pause(ep.pause)
            }
            None => {
                tracing::warn!(
                    "accept failed: {e}; pausing new connections (retrying after {} ms, then \
                     less often) until descriptors are free",
                    FIRST.as_millis()
                );
                self.episode = Some(Episode {
                    began: Instant::now(),
                    failures: 1,
                    pause: FIRST,
                });
                After::Pause(FIRST)
            }
        }
    }

    /// A connection was accepted: ends the episode, if one was going, with one log line.
    pub fn accepted(&mut self) {
        if let Some(ep) = self.episode.take() {
            tracing::warn!(
                "accepts resumed after {} failed accepts in {:.1} s",
                ep.failures,
                ep.began.elapsed().as_secs_f64()
            );
        }
    }
}

/// Whether `accept` failed because the process or the system ran out of something (retrying
/// at once fails the same way).
fn exhausted(e: &std::io::Error) -> bool {
    use nix::errno::Errno;
    let Some(code) = e.raw_os_error() else {
        return false;
    };
    [Errno::EMFILE, Errno::ENFILE, Errno::ENOBUFS, Errno::ENOMEM]
        .iter()
        .any(|n| *n as i32 == code)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn emfile() -> std::io::Error {
        std::io::Error::from_raw_os_error(nix::errno::Errno::EMFILE as i32)
    }

    #[test]
    fn pauses_grow_to_a_cap_and_an_accept_ends_the_episode() {
        let mut b = Backoff::default();
        let pauses: Vec<After> = (0..7).map(|_| b.failed(&emfile())).collect();
        let ms = |n| After::Pause(Duration::from_millis(n));
        assert_eq!(
            pauses,
            [
                ms(100),
                ms(200),
                ms(400),
                ms(800),
                ms(1600),
                ms(2000),
                ms(2000)
            ]
        );
        assert_eq!(b.episode.as_ref().map(|e| e.failures), Some(7));
        b.accepted();
        assert!(b.episode.is_none());
        assert_eq!(b.failed(&emfile()), ms(100));
    }

    #[test]
    fn an_error_about_one_connection_goes_on_at_once() {
        let mut b = Backoff::default();
        let aborted = std::io::Error::from_raw_os_error(nix::errno::Errno::ECONNABORTED as i32);
        assert_eq!(b.failed(&aborted), After::Continue);
        assert!(b.episode.is_none());
    }
}
