//! `--journal-commands`: a NATS request/reply service on `keel.cmd.<host>`. Each request's
//! payload is one protocol v2 request line; the daemon serves it through the socket's own
//! dispatch and the reply is the line the socket would have written. Only started on a
//! connection that authenticated with credentials (the daemon refuses the flag otherwise).

use futures_util::StreamExt;
use tokio::sync::{mpsc, oneshot};

use super::Command;

/// The running service; it stops when dropped (with the connection it serves on).
pub struct Service(tokio::task::JoinHandle<()>);

impl Drop for Service {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Subscribes to `keel.cmd.<host>` on `client` and hands each request to `requests`.
pub async fn serve(
    client: &async_nats::Client,
    host: &str,
    requests: mpsc::UnboundedSender<Command>,
) -> Result<Service, String> {
    let subject = format!("keel.cmd.{host}");
    let mut sub = client
        .subscribe(subject.clone())
        .await
        .map_err(|e| format!("cannot serve {subject}: {e}"))?;
    let client = client.clone();
    let task = tokio::spawn(async move {
        while let Some(msg) = sub.next().await {
            let Some(reply) = msg.reply else {
                continue; // a request without a reply subject cannot be answered
            };
            let (answer, rx) = oneshot::channel();
            let line = msg.payload.to_vec();
            if requests.send(Command { line, answer }).is_err() {
                return;
            }
            let client = client.clone();
            tokio::spawn(async move {
                if let Ok(out) = rx.await {
                    if let Err(e) = client.publish(reply, out.into()).await {
                        tracing::warn!("journal commands: reply failed: {e}");
                    }
                }
            });
        }
    });
    tracing::info!("journal: serving protocol v2 requests on {subject}");
    Ok(Service(task))
}
