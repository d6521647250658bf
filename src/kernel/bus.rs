//! The one event bus: assigns each event its `seq` and hands the same `Arc<Event>` to every
//! subscriber in publish order. Subscribers are unbounded channels, so a slow consumer never
//! makes the kernel drop or reorder an event.

use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;

use crate::kernel::clock::Clock;
use crate::kernel::event::{Event, EventPayload};

/// What a subscriber receives.
pub type EventRx = mpsc::UnboundedReceiver<Arc<Event>>;

#[derive(Debug)]
struct Inner {
    seq: u64,
    subscribers: Vec<mpsc::UnboundedSender<Arc<Event>>>,
}

/// Cloneable handle to the bus.
#[derive(Debug, Clone)]
pub struct Bus {
    inner: Arc<Mutex<Inner>>,
    clock: Clock,
}

impl Bus {
    pub fn new(clock: Clock) -> Self {
        Bus {
            inner: Arc::new(Mutex::new(Inner {
                seq: 0,
                subscribers: Vec::new(),
            })),
            clock,
        }
    }

    /// A new subscriber sees every event published after this call.
    pub fn subscribe(&self) -> EventRx {
        let (tx, rx) = mpsc::unbounded_channel();
        self.lock().subscribers.push(tx);
        rx
    }

    /// Publishes one fact; returns its sequence number.
    pub fn publish(&self, payload: EventPayload) -> u64 {
        let mut inner = self.lock();
        inner.seq += 1;
        let event = Arc::new(Event {
            seq: inner.seq,
            ts: self.clock.now_ms(),
            payload,
        });
        inner.subscribers.retain(|s| s.send(event.clone()).is_ok());
        inner.seq
    }

    /// Like [`Bus::publish`], stamped without advancing a test clock (see
    /// [`crate::kernel::clock::Clock::peek_ms`]).
    pub fn publish_untimed(&self, payload: EventPayload) -> u64 {
        let mut inner = self.lock();
        inner.seq += 1;
        let event = Arc::new(Event {
            seq: inner.seq,
            ts: self.clock.peek_ms(),
            payload,
        });
        inner.subscribers.retain(|s| s.send(event.clone()).is_ok());
        inner.seq
    }

    /// Drops every subscriber channel so their receivers end once drained.
    pub fn close(&self) {
        self.lock().subscribers.clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A poisoned lock only means a publisher panicked mid-send; the data is still valid.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_subscriber_sees_every_event_in_order() {
        let bus = Bus::new(Clock::new(Some(0), Some(1)));
        let mut a = bus.subscribe();
        let mut b = bus.subscribe();
        for _ in 0..3 {
            bus.publish(EventPayload::TurnStarted);
        }
        for rx in [&mut a, &mut b] {
            let seqs: Vec<u64> = (0..3)
                .filter_map(|_| rx.try_recv().ok())
                .map(|e| e.seq)
                .collect();
            assert_eq!(seqs, vec![1, 2, 3]);
        }
    }
}
