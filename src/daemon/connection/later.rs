//! The requests of one connection that are answered later (pi commands, `session/open`, each
//! in its own task) and the bound on what a connection holds for its client: at most
//! [`IN_FLIGHT`] such requests at once and [`OUT_BYTES`] of answers not yet taken. Past either
//! the connection takes no more requests, and so reads no more of them, until answers are
//! written: a client that pipes requests and never reads costs the daemon a bounded amount of
//! memory, whatever it sends (`DESIGN.md` §10.4: a slow client never makes the daemon buffer
//! without limit).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use super::super::server::Shared;
use crate::host::actor::{self, Answer, Answered};
use crate::host::Data;
use crate::wire::jsonrpc::{self as j, Id};

/// Requests of one connection being served in tasks at once. An answer can be large (a
/// `get_messages` of a long session, held as a JSON value and then as its line: about three
/// times its size), so this bounds the memory of answers being made; 4 keeps a client that
/// pipes 2 MB answers and never reads at about +25 MiB (`benches/keel/daemon_load.rs`). The
/// session serves one request at a time anyway; a client with 4 slow ones unanswered (`bash`
/// commands still running, say) has its next request read once one of them is answered.
pub const IN_FLIGHT: usize = 4;
/// Bytes of answers a connection holds for its client before it takes no more requests.
pub const OUT_BYTES: usize = 4 << 20;

/// An answer on its way back to its connection, as the line to write.
pub enum Back {
    /// A pi command's: written after the events of its session's stream `stream` up to `seq`
    /// `head` (published before it), and before the later ones.
    Pi {
        stream: u64,
        head: u64,
        line: String,
    },
    /// Another request's (`session/open`): written as it comes.
    Line(String),
}

impl Back {
    fn len(&self) -> usize {
        match self {
            Back::Pi { line, .. } | Back::Line(line) => line.len(),
        }
    }
}

/// A connection's side of its later answers.
pub struct Later {
    tx: mpsc::Sender<Back>,
    /// Requests handed to tasks whose answers the connection has not taken yet.
    in_flight: usize,
    /// Bytes of answers sent back and not taken yet.
    queued: Arc<AtomicUsize>,
}

impl Later {
    /// A connection's later answers, and where they arrive.
    pub fn new() -> (Later, mpsc::Receiver<Back>) {
        // Never full: at most IN_FLIGHT answers are ever on their way.
        let (tx, rx) = mpsc::channel(IN_FLIGHT);
        let later = Later {
            tx,
            in_flight: 0,
            queued: Arc::default(),
        };
        (later, rx)
    }

    /// Whether the connection may take another request, `out` bytes being about to be written.
    pub fn room(&self, out: usize) -> bool {
        self.in_flight < IN_FLIGHT && self.queued.load(Ordering::Relaxed) + out < OUT_BYTES
    }

    /// The connection took `back` (it writes it now).
    pub fn taken(&mut self, back: &Back) {
        self.in_flight = self.in_flight.saturating_sub(1);
        self.queued.fetch_sub(back.len(), Ordering::Relaxed);
    }

    /// Sends the answer of a pi command (request `id` on stream `stream`) back when it comes.
    pub fn pi(
        &mut self,
        shared: &Arc<Shared>,
        id: Id,
        stream: u64,
        answer: oneshot::Receiver<Answered>,
    ) {
        self.spawn(shared, async move {
            let (answer, head) = actor::answered(answer.await);
            let line = answer_line(&id, answer);
            Back::Pi { stream, head, line }
        });
    }

    /// Runs `session/open` (request `id`) in a task, so that what it waits on (a server asked
    /// for its models) holds up neither this connection nor any other; answered back when done.
    pub fn open(
        &mut self,
        shared: &Arc<Shared>,
        id: Id,
        params: Option<Box<serde_json::value::RawValue>>,
    ) {
        let s = shared.clone();
        self.spawn(shared, async move {
            // A session's old id (after a change) must not name it any more.
            s.rekey().await;
            Back::Line(
                match super::super::open::open(&s, params.as_deref()).await {
                    Ok(v) => j::result_line(&id, &v),
                    Err(e) => j::error_object_line(Some(&id), &e),
                },
            )
        });
    }

    /// Serves `answer` in a task counted as a pending request (idle exit waits for it).
    fn spawn(
        &mut self,
        shared: &Arc<Shared>,
        answer: impl std::future::Future<Output = Back> + Send + 'static,
    ) {
        self.in_flight += 1;
        shared.pending.fetch_add(1, Ordering::Relaxed);
        let (tx, queued, shared) = (self.tx.clone(), self.queued.clone(), shared.clone());
        tokio::spawn(async move {
            let back = answer.await;
            queued.fetch_add(back.len(), Ordering::Relaxed);
            let _ = tx.send(back).await;
            shared.pending.fetch_sub(1, Ordering::Relaxed);
        });
    }
}

/// The response line of request `id` for a pi command's answer.
fn answer_line(id: &Id, answer: Answer) -> String {
    match answer {
        Ok(Data::Empty) => j::raw_result_line(id, "{}"),
        Ok(Data::Json(v)) => j::result_line(id, &v),
        Ok(Data::Raw(raw)) => j::raw_result_line(id, &raw),
        Err(e) => j::error_line(Some(id), j::COMMAND_FAILED, &e.message, None),
    }
}
