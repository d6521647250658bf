//! What the calls of one turn share when some run concurrently (`task` calls): whether one
//! was blocked (the calls after it are skipped) and a hook's stop, and a join of futures that
//! borrow the turn (no task is spawned: the calls share the session by reference).

use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::Poll;

use crate::kernel::event::RunOutcome;

/// A turn's blocked call and hook stop, shared by its calls.
#[derive(Default)]
pub(super) struct Shared {
    state: Mutex<(Option<RunOutcome>, Option<String>)>,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, (Option<RunOutcome>, Option<String>)> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn is_blocked(&self) -> bool {
        self.lock().0.is_some()
    }

    /// The first blocked call wins.
    pub(super) fn block(&self, outcome: RunOutcome) {
        let mut s = self.lock();
        s.0 = s.0.take().or(Some(outcome));
    }

    /// The first stop wins.
    pub(super) fn stop(&self, reason: Option<String>) {
        let mut s = self.lock();
        s.1 = s.1.take().or(reason);
    }

    pub(super) fn take(self) -> (Option<RunOutcome>, Option<String>) {
        self.state.into_inner().unwrap_or_else(|e| e.into_inner())
    }
}

/// Polls every future until all are done; their outputs in the given order.
pub(super) async fn join_all<F: Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut futures: Vec<Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut out: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (f, slot) in futures.iter_mut().zip(out.iter_mut()) {
            if slot.is_none() {
                match f.as_mut().poll(cx) {
                    Poll::Ready(v) => *slot = Some(v),
                    Poll::Pending => pending = true,
                }
            }
        }
        match pending {
            true => Poll::Pending,
            false => Poll::Ready(()),
        }
    })
    .await;
    out.into_iter().flatten().collect()
}
