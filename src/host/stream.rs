//! A session's numbered event stream as several clients see it (`DESIGN.md` §10.4): a replay
//! ring bounded by count and bytes, and fan-out to subscribers through bounded queues. A
//! subscriber whose queue is full is dropped and marked lagged, so a slow client never blocks
//! the agent or the other clients. When the host starts serving another session (`new_session`,
//! `switch_session`, `fork`, `clone`) the stream is renamed and starts a new epoch; `seq` goes
//! on from where it was, so it never goes backwards on one subscription. Transport neutral: a
//! subscriber is a channel.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::mpsc;

use super::Published;

/// Default ring bounds (`--replay-events`, `--replay-bytes`).
pub const RING_EVENTS: usize = 10_000;
pub const RING_BYTES: usize = 8 * 1024 * 1024;

/// Default queue of one subscriber (items it has not read yet).
pub const QUEUE: usize = 4096;

/// What a subscriber receives, in order: an item of a session's numbered stream. One queue
/// may serve a client's subscriptions to several sessions.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// Which stream this came from ([`Stream::id`]; it survives a rename).
    pub stream: u64,
    /// The session id (the stream's name when the item was queued).
    pub session: Arc<str>,
    /// The stream's epoch (for `Replaced`, the new one).
    pub epoch: Arc<str>,
    pub item: Item,
}

/// One item of a stream.
#[derive(Debug, Clone)]
pub enum Item {
    Event(Published),
    /// The stream serves session `new` from now on (`Delivery::session` is the old id), in a
    /// new epoch whose events follow `seq`.
    Replaced {
        new: Arc<str>,
        seq: u64,
    },
}

impl Delivery {
    /// The event's `seq`, or for `Replaced` the last `seq` before the new epoch.
    pub fn seq(&self) -> u64 {
        match &self.item {
            Item::Event(e) => e.seq,
            Item::Replaced { seq, .. } => *seq,
        }
    }
}

/// A client's place on the stream: the epoch and the last `seq` it applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    pub epoch: String,
    pub seq: u64,
}

/// Set when a subscriber was dropped for not reading: the `seq` it had reached.
#[derive(Debug, Default)]
pub struct Lagged(AtomicU64);

impl Lagged {
    /// The `seq` at which the subscriber was dropped, if it was.
    pub fn at(&self) -> Option<u64> {
        match self.0.load(Ordering::Acquire) {
            0 => None,
            n => Some(n - 1),
        }
    }

    fn set(&self, seq: u64) {
        self.0.store(seq + 1, Ordering::Release);
    }
}

/// Where a stream also hands every item, in order, never dropped for lag (the daemon's event
/// journal). Called on the publishing thread for each item: an implementation copies what it
/// needs and returns at once (no waiting, no I/O). False: it is gone, and gets nothing more.
pub trait Tap: Send + Sync {
    /// Event `event` of session `session` in `epoch`.
    fn event(&self, session: &str, epoch: &str, event: &Published) -> bool;
    /// The stream serves session `new` from now on, in `epoch`, after `seq` (see
    /// [`Item::Replaced`]).
    fn replaced(&self, old: &str, new: &str, epoch: &str, seq: u64) -> bool;
}

struct Subscriber {
    client: u64,
    tx: mpsc::Sender<Delivery>,
    lagged: Arc<Lagged>,
}

/// The ring and the subscribers of one session.
pub struct Stream {
    /// Names this stream in deliveries for as long as it lives (the session id may change).
    pub id: u64,
    /// The session id, sent with every delivery.
    pub name: Arc<str>,
    pub epoch: String,
    /// The epoch as sent with deliveries.
    epoch_tag: Arc<str>,
    ring: VecDeque<Published>,
    ring_bytes: usize,
    max_events: usize,
    max_bytes: usize,
    /// The last `seq` published.
    head: u64,
    subscribers: Vec<Subscriber>,
    /// The daemon's journal, if it runs one: every item, never dropped for lag.
    journal: Option<Arc<dyn Tap>>,
}

/// How an attach starts.
#[derive(Debug, PartialEq, Eq)]
pub enum Start {
    /// The events after the cursor were queued from the ring.
    Replay,
    /// The client needs the materialised state as of the current head.
    Snapshot,
}

impl Stream {
    pub fn new(
        id: u64,
        name: Arc<str>,
        epoch: String,
        max_events: usize,
        max_bytes: usize,
    ) -> Stream {
        Stream {
            id,
            name,
            epoch_tag: epoch.as_str().into(),
            epoch,
            ring: VecDeque::new(),
            ring_bytes: 0,
            max_events: max_events.max(1),
            max_bytes,
            head: 0,
            subscribers: Vec::new(),
            journal: None,
        }
    }

    /// Hands every later item of this stream to `journal` as well.
    pub fn journal(&mut self, journal: Arc<dyn Tap>) {
        self.journal = Some(journal);
    }

    /// The last `seq` published.
    pub fn head(&self) -> u64 {
        self.head
    }

    /// How many clients are attached.
    pub fn clients(&self) -> usize {
        self.subscribers.len()
    }

    /// Keeps `event` in the ring and hands it to every subscriber.
    pub fn publish(&mut self, event: Published) {
        self.head = event.seq;
        self.ring_bytes += event.line.len();
        // The ring keeps lines only: a typed event would keep its kernel event alive.
        self.ring.push_back(Published {
            seq: event.seq,
            line: event.line.clone(),
            typed: None,
        });
        while self.ring.len() > self.max_events
            || (self.ring_bytes > self.max_bytes && self.ring.len() > 1)
        {
            if let Some(old) = self.ring.pop_front() {
                self.ring_bytes -= old.line.len();
            }
        }
        let head = self.head;
        if let Some(j) = &self.journal {
            if !j.event(&self.name, &self.epoch, &event) {
                self.journal = None;
            }
        }
        let d = self.delivery(&event);
        self.subscribers.retain(|s| offer(s, d.clone(), head));
    }

    /// The stream serves session `name` from now on, in `epoch`: every subscriber is told
    /// (`Item::Replaced`) and stays subscribed; the ring is emptied (its events belong to the
    /// old epoch, so a cursor of it gets a snapshot); `seq` goes on from the head.
    pub fn rename(&mut self, name: Arc<str>, epoch: String) {
        let old = std::mem::replace(&mut self.name, name.clone());
        self.epoch_tag = epoch.as_str().into();
        self.epoch = epoch;
        self.ring.clear();
        self.ring_bytes = 0;
        let head = self.head;
        if let Some(j) = &self.journal {
            if !j.replaced(&old, &name, &self.epoch, head) {
                self.journal = None;
            }
        }
        let d = Delivery {
            stream: self.id,
            session: old,
            epoch: self.epoch_tag.clone(),
            item: Item::Replaced {
                new: name,
                seq: head,
            },
        };
        self.subscribers.retain(|s| offer(s, d.clone(), head));
    }

    /// Attaches a client. With a cursor of this epoch whose next event is still in the ring,
    /// the events after it are queued first (`Replay`); otherwise the caller sends a snapshot
    /// of the state at [`Stream::head`] (`Snapshot`). Either way live events follow with no
    /// gap and no duplicate: nothing is published between this call and the next one.
    pub fn attach(
        &mut self,
        client: u64,
        cursor: Option<&Cursor>,
        tx: mpsc::Sender<Delivery>,
    ) -> (Start, Arc<Lagged>) {
        self.detach(client);
        let lagged = Arc::new(Lagged::default());
        let sub = Subscriber {
            client,
            tx,
            lagged: lagged.clone(),
        };
        let first = self.ring.front().map_or(self.head + 1, |e| e.seq);
        let start = match cursor {
            Some(c) if c.epoch == self.epoch && c.seq <= self.head && c.seq + 1 >= first => {
                for e in self.ring.iter().filter(|e| e.seq > c.seq) {
                    if !offer(&sub, self.delivery(e), self.head) {
                        return (Start::Replay, lagged);
                    }
                }
                Start::Replay
            }
            _ => Start::Snapshot,
        };
        self.subscribers.push(sub);
        (start, lagged)
    }

    /// Whether `client` is subscribed (not detached, nor dropped for a full or closed queue).
    pub fn has(&self, client: u64) -> bool {
        self.subscribers.iter().any(|s| s.client == client)
    }

    /// Removes a client's subscription.
    pub fn detach(&mut self, client: u64) {
        self.subscribers.retain(|s| s.client != client);
    }

    fn delivery(&self, event: &Published) -> Delivery {
        Delivery {
            stream: self.id,
            session: self.name.clone(),
            epoch: self.epoch_tag.clone(),
            item: Item::Event(event.clone()),
        }
    }
}

/// Queues `d` for `s`; false (and `s` marked lagged) when its queue is full or gone.
fn offer(s: &Subscriber, d: Delivery, head: u64) -> bool {
    match s.tx.try_send(d) {
        Ok(()) => true,
        Err(mpsc::error::TrySendError::Full(_)) => {
            s.lagged.set(head);
            false
        }
        Err(mpsc::error::TrySendError::Closed(_)) => false,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn ev(seq: u64) -> Published {
        Published {
            seq,
            line: format!("{{\"n\":{seq}}}").into(),
            typed: None,
        }
    }

    fn seqs(rx: &mut mpsc::Receiver<Delivery>) -> Vec<u64> {
        let mut out = Vec::new();
        while let Ok(d) = rx.try_recv() {
            assert_eq!(&*d.session, "s");
            assert!(matches!(d.item, Item::Event(_)), "{d:?}");
            out.push(d.seq());
        }
        out
    }

    #[test]
    fn a_cursor_in_the_ring_replays_exactly_what_follows_it() {
        let mut s = Stream::new(1, "s".into(), "e1".into(), 5, 1 << 20);
        for n in 1..=8 {
            s.publish(ev(n));
        }
        let (tx, mut rx) = mpsc::channel(100);
        let cursor = Cursor {
            epoch: "e1".into(),
            seq: 5,
        };
        let (start, _) = s.attach(1, Some(&cursor), tx);
        assert_eq!(start, Start::Replay);
        s.publish(ev(9));
        assert_eq!(seqs(&mut rx), [6, 7, 8, 9], "no gap, no duplicate");
        let cursor = Cursor {
            epoch: "e1".into(),
            seq: 3,
        };
        let (tx, _rx) = mpsc::channel(100);
        assert_eq!(s.attach(2, Some(&cursor), tx).0, Start::Snapshot, "too old");
        let other = Cursor {
            epoch: "e0".into(),
            seq: 8,
        };
        let (tx, _rx) = mpsc::channel(100);
        assert_eq!(
            s.attach(3, Some(&other), tx).0,
            Start::Snapshot,
            "other epoch"
        );
        let (tx, _rx) = mpsc::channel(100);
        assert_eq!(s.attach(4, None, tx).0, Start::Snapshot, "no cursor");
        let at_head = Cursor {
            epoch: "e1".into(),
            seq: 9,
        };
        let (tx, mut rx) = mpsc::channel(100);
        assert_eq!(s.attach(5, Some(&at_head), tx).0, Start::Replay);
        assert!(seqs(&mut rx).is_empty());
    }

    #[test]
    fn the_ring_is_bounded_by_bytes_too() {
        let mut s = Stream::new(1, "s".into(), "e".into(), 1000, 20);
        for n in 1..=10 {
            s.publish(ev(n)); // 8 or 9 bytes each
        }
        assert!(s.ring_bytes <= 20, "{}", s.ring_bytes);
        assert_eq!(s.ring.back().unwrap().seq, 10);
    }

    #[test]
    fn a_stalled_subscriber_is_dropped_and_marked_while_others_get_everything() {
        let mut s = Stream::new(1, "s".into(), "e".into(), 100, 1 << 20);
        let (slow_tx, _slow_rx) = mpsc::channel(3);
        let (fast_tx, mut fast_rx) = mpsc::channel(100);
        let (_, slow) = s.attach(1, None, slow_tx);
        let (_, fast) = s.attach(2, None, fast_tx);
        for n in 1..=10 {
            s.publish(ev(n));
        }
        assert_eq!(slow.at(), Some(4), "dropped when the 4th event did not fit");
        assert_eq!(fast.at(), None);
        assert_eq!(s.clients(), 1);
        assert_eq!(seqs(&mut fast_rx), (1..=10).collect::<Vec<_>>());
    }

    #[test]
    fn the_journal_gets_every_delivery_and_the_rename_while_a_stalled_client_is_dropped() {
        let mut s = Stream::new(1, "old".into(), "e1".into(), 100, 1 << 20);
        let journal = Arc::new(Taken::default());
        s.journal(journal.clone());
        let (slow_tx, _slow_rx) = mpsc::channel(2);
        let (_, slow) = s.attach(1, None, slow_tx);
        for n in 1..=50 {
            s.publish(ev(n));
        }
        s.rename("new".into(), "e2".into());
        s.publish(ev(51));
        assert!(slow.at().is_some(), "the client was dropped");
        let got = journal.0.lock().unwrap().clone();
        let mut want: Vec<(String, String, u64, bool)> = (1..=50)
            .map(|n| ("old".to_string(), "e1".to_string(), n, false))
            .collect();
        want.push(("old→new".into(), "e2".into(), 50, true));
        want.push(("new".into(), "e2".into(), 51, false));
        assert_eq!(got, want);
    }

    /// A tap that keeps what it was handed: (session, epoch, seq, replaced).
    #[derive(Default)]
    struct Taken(std::sync::Mutex<Vec<(String, String, u64, bool)>>);

    impl Tap for Taken {
        fn event(&self, session: &str, epoch: &str, event: &Published) -> bool {
            let row = (session.to_string(), epoch.to_string(), event.seq, false);
            self.0.lock().unwrap().push(row);
            true
        }

        fn replaced(&self, old: &str, new: &str, epoch: &str, seq: u64) -> bool {
            let row = (format!("{old}→{new}"), epoch.to_string(), seq, true);
            self.0.lock().unwrap().push(row);
            true
        }
    }

    #[test]
    fn a_renamed_stream_tells_its_subscribers_and_starts_a_new_epoch_where_seq_left_off() {
        let mut s = Stream::new(1, "old".into(), "e1".into(), 100, 1 << 20);
        let (tx, mut rx) = mpsc::channel(100);
        s.attach(1, None, tx);
        s.publish(ev(1));
        s.publish(ev(2));
        s.rename("new".into(), "e2".into());
        s.publish(ev(3));
        let got: Vec<(String, String, u64, bool)> = std::iter::from_fn(|| rx.try_recv().ok())
            .map(|d| {
                let replaced = match &d.item {
                    Item::Replaced { new, .. } => {
                        assert_eq!(&**new, "new");
                        true
                    }
                    Item::Event(_) => false,
                };
                (
                    d.session.to_string(),
                    d.epoch.to_string(),
                    d.seq(),
                    replaced,
                )
            })
            .collect();
        let row = |s: &str, e: &str, n, r| (s.to_string(), e.to_string(), n, r);
        assert_eq!(
            got,
            [
                row("old", "e1", 1, false),
                row("old", "e1", 2, false),
                row("old", "e2", 2, true), // the old id, the new epoch and its base
                row("new", "e2", 3, false),
            ],
            "told once, in order; seq goes on"
        );
        assert_eq!(s.clients(), 1, "still subscribed");
        let old = Cursor {
            epoch: "e1".into(),
            seq: 2,
        };
        let (tx, _rx) = mpsc::channel(100);
        assert_eq!(s.attach(2, Some(&old), tx).0, Start::Snapshot, "old epoch");
        let base = Cursor {
            epoch: "e2".into(),
            seq: 2,
        };
        let (tx, mut rx) = mpsc::channel(100);
        assert_eq!(s.attach(3, Some(&base), tx).0, Start::Replay);
        let replayed: Vec<u64> = std::iter::from_fn(|| rx.try_recv().ok())
            .map(|d| d.seq())
            .collect();
        assert_eq!(replayed, [3], "only the new epoch's events are in the ring");
    }
}
