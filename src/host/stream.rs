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
use tokio::sync::mpsc::error::TrySendError;

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
    tx: Queue,
    lagged: Arc<Lagged>,
}

/// Where a subscriber's deliveries go: one at a time, or the items of one publish together
/// (a client in this process that writes everything it gets: one hand-over, and at most one
/// wake-up, for a burst of events). A batched queue's capacity counts batches.
#[derive(Debug, Clone)]
pub enum Queue {
    One(mpsc::Sender<Delivery>),
    Batched(mpsc::Sender<Vec<Delivery>>),
}

impl From<mpsc::Sender<Delivery>> for Queue {
    fn from(tx: mpsc::Sender<Delivery>) -> Queue {
        Queue::One(tx)
    }
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

    /// Keeps `events` in the ring and hands them to every subscriber, in order: one at a time
    /// to a [`Queue::One`], together to a [`Queue::Batched`].
    pub fn publish_all(&mut self, events: Vec<Published>) {
        let Some(last) = events.last().map(|e| e.seq) else {
            return;
        };
        let batched: Vec<usize> = (0..self.subscribers.len())
            .filter(|i| matches!(self.subscribers[*i].tx, Queue::Batched(_)))
            .collect();
        if batched.is_empty() {
            for e in events {
                self.publish(e);
            }
            return;
        }
        let batch: Vec<Delivery> = events.iter().map(|e| self.delivery(e)).collect();
        // The others get each event as it is published; the batched ones, all of them after.
        let mut held: Vec<Subscriber> = batched
            .into_iter()
            .rev()
            .map(|i| self.subscribers.swap_remove(i))
            .collect();
        for e in events {
            self.publish(e);
        }
        held.retain(|s| offer_batch(s, batch.clone(), last));
        self.subscribers.append(&mut held);
    }

    /// Keeps `event` in the ring and hands it to every subscriber.
    pub fn publish(&mut self, event: Published) {
        self.head = event.seq;
        self.ring_bytes += event.line.len();
        self.ring.push_back(event.clone());
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
        tx: impl Into<Queue>,
    ) -> (Start, Arc<Lagged>) {
        let tx = tx.into();
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
                let replay = self.ring.iter().filter(|e| e.seq > c.seq);
                if let Queue::Batched(_) = &sub.tx {
                    let batch: Vec<Delivery> = replay.map(|e| self.delivery(e)).collect();
                    if !batch.is_empty() && !offer_batch(&sub, batch, self.head) {
                        return (Start::Replay, lagged);
                    }
                    return self.subscribed(sub, Start::Replay, lagged);
                }
                for e in replay {
                    if !offer(&sub, self.delivery(e), self.head) {
                        return (Start::Replay, lagged);
                    }
                }
                Start::Replay
            }
            _ => Start::Snapshot,
        };
        self.subscribed(sub, start, lagged)
    }

    fn subscribed(
        &mut self,
        sub: Subscriber,
        start: Start,
        lagged: Arc<Lagged>,
    ) -> (Start, Arc<Lagged>) {
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
    let sent = match &s.tx {
        Queue::One(tx) => tx
            .try_send(d)
            .map_err(|e| matches!(e, TrySendError::Full(_))),
        Queue::Batched(tx) => tx
            .try_send(vec![d])
            .map_err(|e| matches!(e, TrySendError::Full(_))),
    };
    lagged_unless_sent(s, sent, head)
}

/// Queues the items of one publish together for a batched `s` (see [`offer`]).
fn offer_batch(s: &Subscriber, batch: Vec<Delivery>, head: u64) -> bool {
    let sent = match &s.tx {
        Queue::Batched(tx) => tx
            .try_send(batch)
            .map_err(|e| matches!(e, TrySendError::Full(_))),
        Queue::One(_) => return batch.into_iter().all(|d| offer(s, d, head)),
    };
    lagged_unless_sent(s, sent, head)
}

/// `Err(true)`: the queue was full (`s` is marked lagged at `head`); `Err(false)`: it is gone.
fn lagged_unless_sent(s: &Subscriber, sent: Result<(), bool>, head: u64) -> bool {
    match sent {
        Ok(()) => true,
        Err(true) => {
            s.lagged.set(head);
            false
        }
        Err(false) => false,
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
    fn a_batched_subscriber_gets_each_publish_in_one_hand_over_in_order() {
        let mut s = Stream::new(1, "s".into(), "e1".into(), 5, 1 << 20);
        s.publish_all(vec![ev(1), ev(2)]);
        let (one_tx, mut one) = mpsc::channel(100);
        let (batch_tx, mut batched) = mpsc::channel::<Vec<Delivery>>(100);
        let cursor = Cursor {
            epoch: "e1".into(),
            seq: 0,
        };
        s.attach(1, Some(&cursor), one_tx);
        s.attach(2, Some(&cursor), Queue::Batched(batch_tx));
        s.publish_all(vec![ev(3), ev(4), ev(5)]);
        s.publish_all(Vec::new());
        s.publish(ev(6));
        assert_eq!(seqs(&mut one), [1, 2, 3, 4, 5, 6]);
        let mut got = Vec::new();
        while let Ok(batch) = batched.try_recv() {
            got.push(batch.iter().map(Delivery::seq).collect::<Vec<_>>());
        }
        assert_eq!(
            got,
            [vec![1, 2], vec![3, 4, 5], vec![6]],
            "the replay, then each publish"
        );
        assert_eq!(s.clients(), 2);
        assert_eq!(s.head(), 6);
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
