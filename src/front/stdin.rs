//! The stdin of the line protocols (RPC mode, ACP): a plain thread that reads newline-delimited
//! lines and hands them to the loop.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use tokio::sync::mpsc;

use crate::wire::jsonl::{Frame, LineDecoder, MAX_LINE_BYTES};

/// What the stdin thread delivers.
pub enum Input {
    /// The complete lines of one read, in order.
    Frames(Vec<Frame>),
    Error(String),
}

/// Reads stdin on a plain thread (a pending read must never hold up process exit) and hands
/// decoded frames to the loop; the channel closing means end of input.
///
/// The frames of one read go to the loop as one batch, which it serves back to back: handed
/// over one by one, the loop could run the first prompt's whole run between two lines the
/// client wrote together, and the second prompt would start as well.
pub fn spawn_reader(tx: mpsc::Sender<Input>) {
    let spawned = std::thread::Builder::new()
        .name("keel-stdin".into())
        .spawn(move || {
            use std::io::Read;
            let mut stdin = std::io::stdin().lock();
            let mut decoder = LineDecoder::new(MAX_LINE_BYTES);
            let mut buf = vec![0u8; 64 * 1024];
            let mut frames = Vec::new();
            loop {
                match stdin.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        decoder.push(&buf[..n], &mut frames);
                        if !frames.is_empty()
                            && tx
                                .blocking_send(Input::Frames(std::mem::take(&mut frames)))
                                .is_err()
                        {
                            return;
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        let _ = tx.blocking_send(Input::Error(e.to_string()));
                        return;
                    }
                }
            }
            if let Some(f) = decoder.finish() {
                let _ = tx.blocking_send(Input::Frames(vec![f]));
            }
        });
    if let Err(e) = spawned {
        tracing::error!("cannot start the stdin reader: {e}");
    }
}
