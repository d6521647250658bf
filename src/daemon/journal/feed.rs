//! How the journal gets what it spools, in order: the streams' events and renames (as the
//! host's [`Tap`]) and the daemon's facts and barriers. A session's thread copies each event's
//! bytes into a buffer under an uncontended lock and goes on; the journal's thread swaps the
//! whole buffer out about once a millisecond while a burst lasts. Nothing is shared with the
//! session after the copy (no reference counts bumped per event on two threads, no channel
//! node per event), and the journal's thread is woken only by the first item after it went
//! idle.

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;
use tokio::sync::{oneshot, Notify};

use crate::host::stream::Tap;
use crate::host::Published;

/// One item, its strings kept in [`Taken::bytes`].
pub enum Mark {
    Event {
        session: Range<usize>,
        epoch: Range<usize>,
        seq: u64,
        line: Range<usize>,
    },
    Replaced {
        old: Range<usize>,
        new: Range<usize>,
        epoch: Range<usize>,
        seq: u64,
    },
    Fact(Value),
    /// Answered once everything handed over before it is in the spool.
    Barrier(oneshot::Sender<()>),
}

/// What the journal's thread takes at once: items in the order they were handed over.
#[derive(Default)]
pub struct Taken {
    pub bytes: Vec<u8>,
    pub marks: Vec<Mark>,
}

/// The string at `r` of [`Taken::bytes`] (every range was pushed from a `&str`, whole).
pub fn text<'a>(bytes: &'a [u8], r: &Range<usize>) -> &'a str {
    std::str::from_utf8(&bytes[r.clone()]).unwrap_or_default()
}

impl Taken {
    #[cfg(test)]
    fn str(&self, r: &Range<usize>) -> &str {
        text(&self.bytes, r)
    }

    pub fn clear(&mut self) {
        self.bytes.clear();
        self.marks.clear();
    }

    fn push(&mut self, s: &str) -> Range<usize> {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(s.as_bytes());
        start..self.bytes.len()
    }
}

#[derive(Default)]
struct Pending {
    taken: Taken,
    /// The journal's thread waits for [`Feed::wake`] (set by it, under the lock).
    idle: bool,
    /// No sender is left: the journal's thread ends once it has spooled what is here.
    closed: bool,
}

#[derive(Default)]
struct Feed {
    pending: Mutex<Pending>,
    wake: Notify,
    senders: AtomicUsize,
}

impl Feed {
    fn lock(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds one item; wakes the journal's thread if it went idle.
    fn hand(&self, add: impl FnOnce(&mut Taken)) {
        let wake = {
            let mut p = self.lock();
            add(&mut p.taken);
            std::mem::take(&mut p.idle)
        };
        if wake {
            self.wake.notify_one();
        }
    }
}

/// The sending side: cheap to clone; the feed closes when the last one is dropped.
pub struct Sender(Arc<Feed>);

impl Clone for Sender {
    fn clone(&self) -> Self {
        self.0.senders.fetch_add(1, Ordering::Relaxed);
        Sender(self.0.clone())
    }
}

impl Drop for Sender {
    fn drop(&mut self) {
        if self.0.senders.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.lock().closed = true;
            self.0.wake.notify_one();
        }
    }
}

impl Sender {
    pub fn fact(&self, fact: Value) {
        self.0.hand(|t| t.marks.push(Mark::Fact(fact)));
    }

    pub fn barrier(&self, done: oneshot::Sender<()>) {
        self.0.hand(|t| t.marks.push(Mark::Barrier(done)));
    }
}

impl Tap for Sender {
    fn event(&self, session: &str, epoch: &str, event: &Published) -> bool {
        self.0.hand(|t| {
            let mark = Mark::Event {
                session: t.push(session),
                epoch: t.push(epoch),
                seq: event.seq,
                line: t.push(&event.line),
            };
            t.marks.push(mark);
        });
        true
    }

    fn replaced(&self, old: &str, new: &str, epoch: &str, seq: u64) -> bool {
        self.0.hand(|t| {
            let mark = Mark::Replaced {
                old: t.push(old),
                new: t.push(new),
                epoch: t.push(epoch),
                seq,
            };
            t.marks.push(mark);
        });
        true
    }
}

/// The journal thread's side.
pub struct Receiver(Arc<Feed>);

/// A new feed: its first sender and its receiver.
pub fn feed() -> (Sender, Receiver) {
    let feed = Arc::new(Feed::default());
    feed.senders.store(1, Ordering::Relaxed);
    (Sender(feed.clone()), Receiver(feed))
}

impl Receiver {
    /// Swaps what was handed over into `into` (which must be empty, and keeps its buffers for
    /// the senders). False when nothing was there: then [`Receiver::idle`] may wait.
    pub fn take(&self, into: &mut Taken) -> bool {
        let mut p = self.0.lock();
        if p.taken.marks.is_empty() {
            return false;
        }
        std::mem::swap(&mut p.taken, into);
        true
    }

    /// Waits until something is handed over; false once every sender is gone and nothing is
    /// left.
    pub async fn idle(&self) -> bool {
        loop {
            let wait = self.0.wake.notified();
            {
                let mut p = self.0.lock();
                if !p.taken.marks.is_empty() {
                    return true;
                }
                if p.closed {
                    return false;
                }
                p.idle = true;
            }
            // A sender that came between the unlock and here left a permit: no wake is lost.
            wait.await;
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn event(seq: u64, line: &str) -> Published {
        Published {
            seq,
            line: line.into(),
            typed: None,
        }
    }

    #[tokio::test]
    async fn items_come_in_order_with_their_bytes_and_the_feed_ends_with_its_last_sender() {
        let (tx, rx) = feed();
        let other = tx.clone();
        tx.event("s1", "e1", &event(1, r#"{"type":"a"}"#));
        other.fact(serde_json::json!({"type": "opened"}));
        tx.replaced("s1", "s2", "e2", 1);
        other.event("s2", "e2", &event(2, r#"{"type":"b"}"#));
        assert!(rx.idle().await, "items are waiting");
        let mut t = Taken::default();
        assert!(rx.take(&mut t));
        let got: Vec<String> = t
            .marks
            .iter()
            .map(|m| match m {
                Mark::Event {
                    session,
                    epoch,
                    seq,
                    line,
                } => format!("{} {} {seq} {}", t.str(session), t.str(epoch), t.str(line)),
                Mark::Replaced {
                    old,
                    new,
                    epoch,
                    seq,
                } => format!("{}→{} {} {seq}", t.str(old), t.str(new), t.str(epoch)),
                Mark::Fact(v) => v.to_string(),
                Mark::Barrier(_) => "barrier".into(),
            })
            .collect();
        assert_eq!(
            got,
            [
                r#"s1 e1 1 {"type":"a"}"#,
                r#"{"type":"opened"}"#,
                "s1→s2 e2 1",
                r#"s2 e2 2 {"type":"b"}"#,
            ]
        );
        t.clear();
        assert!(!rx.take(&mut t), "nothing more");
        drop(tx);
        other.event("s2", "e2", &event(3, "{}"));
        drop(other);
        assert!(
            rx.idle().await,
            "what came before the last sender went is still taken"
        );
        assert!(rx.take(&mut t));
        assert_eq!(t.marks.len(), 1);
        t.clear();
        assert!(!rx.idle().await, "closed and empty");
    }

    #[tokio::test]
    async fn an_idle_receiver_is_woken_by_a_sender_on_another_thread() {
        let (tx, rx) = feed();
        let sent = std::thread::spawn(move || {
            tx.fact(serde_json::json!({"n": 1}));
            tx
        });
        assert!(rx.idle().await);
        let mut t = Taken::default();
        assert!(rx.take(&mut t));
        assert_eq!(t.marks.len(), 1);
        drop(sent.join().unwrap());
    }
}
