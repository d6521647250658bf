//! A cloneable abort signal: set once by the session handle, awaited by providers and tools.

use tokio::sync::watch;

/// The sending side, owned by the run.
#[derive(Debug)]
pub struct AbortController {
    tx: watch::Sender<bool>,
}

/// The receiving side; cheap to clone.
#[derive(Debug, Clone)]
pub struct AbortSignal {
    rx: watch::Receiver<bool>,
}

impl AbortController {
    pub fn new() -> (Self, AbortSignal) {
        let (tx, rx) = watch::channel(false);
        (AbortController { tx }, AbortSignal { rx })
    }

    pub fn abort(&self) {
        self.tx.send_replace(true);
    }

    pub fn signal(&self) -> AbortSignal {
        AbortSignal {
            rx: self.tx.subscribe(),
        }
    }
}

impl AbortSignal {
    /// A signal that never fires.
    pub fn never() -> Self {
        let (_c, s) = AbortController::new();
        // keep the value false forever; a dropped sender leaves `changed()` erroring, which
        // `aborted()` treats as "never".
        s
    }

    pub fn is_aborted(&self) -> bool {
        *self.rx.borrow()
    }

    /// Resolves when abort is requested; pends forever if it never is.
    pub async fn aborted(&self) {
        let mut rx = self.rx.clone();
        loop {
            if *rx.borrow_and_update() {
                return;
            }
            if rx.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}
