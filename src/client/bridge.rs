//! `keel daemon bridge`: this process's stdin and stdout relayed to and from the daemon's
//! socket, byte for byte, so that `ssh HOST keel daemon bridge` is a protocol v2 connection to
//! HOST's daemon. The bridge reads nothing it relays: the daemon checks the peer credentials
//! of the bridge's own connection (the user ssh logged in as), as for any local client. The
//! bridge ends when either side closes: stdin's end is passed on as the socket's write end
//! closing, the daemon closing the connection ends the bridge.

use std::io::Read;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::sync::mpsc;

use crate::exit::Exit;
use crate::output::Output;

/// Bytes moved at a time.
const CHUNK: usize = 64 * 1024;

/// Relays until one side closes; `Exit::Success` when the daemon or stdin ended the
/// connection, the stdout failure otherwise.
pub async fn relay(stream: UnixStream, out: &mut Output) -> Exit {
    let (mut from_daemon, mut to_daemon) = stream.into_split();
    let (tx, mut rx) = mpsc::channel::<Vec<u8>>(16);
    let reader = std::thread::Builder::new()
        .name("keel-bridge-stdin".into())
        .spawn(move || {
            let mut stdin = std::io::stdin().lock();
            let mut buf = vec![0u8; CHUNK];
            loop {
                match stdin.read(&mut buf) {
                    Ok(0) => return,
                    Ok(n) => {
                        if tx.blocking_send(buf[..n].to_vec()).is_err() {
                            return;
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        tracing::info!("bridge: stdin failed: {e}");
                        return;
                    }
                }
            }
        });
    if let Err(e) = reader {
        tracing::error!("bridge: cannot start the stdin reader: {e}");
        return Exit::Internal;
    }
    tokio::spawn(async move {
        while let Some(chunk) = rx.recv().await {
            if to_daemon.write_all(&chunk).await.is_err() {
                return;
            }
        }
        // stdin ended: the daemon sees this client's end of input.
        let _ = to_daemon.shutdown().await;
    });
    let mut buf = vec![0u8; CHUNK];
    loop {
        match from_daemon.read(&mut buf).await {
            Ok(0) => return Exit::Success,
            Ok(n) => {
                if out.out(&buf[..n]).and_then(|_| out.flush()).is_err() {
                    return out.stdout_exit();
                }
            }
            Err(e) => {
                tracing::info!("bridge: the daemon connection failed: {e}");
                return Exit::Success;
            }
        }
    }
}
