//! A job's output and input on their file descriptors: the one reader that drains its pipe or
//! PTY master as the kernel says there is something (no polling), the log file it feeds up
//! to its cap, and, for a terminal job, the writer that hands its input to the master as the
//! PTY takes it. Owns only that I/O; what the bytes become (the ring, the events) is its
//! caller's.

use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::Path;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::pipe;
use tokio::sync::mpsc;

/// How much one read takes at most.
const READ_BYTES: usize = 64 * 1024;

/// A job's log file, written until it holds `cap` bytes, then noted as cut.
pub(super) struct Log {
    file: std::fs::File,
    written: u64,
    cap: u64,
    cut: bool,
}

impl Log {
    /// Creates (or empties) `path`, private to this user.
    pub fn create(path: &Path, cap: u64) -> std::io::Result<Log> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(path)?;
        Ok(Log {
            file,
            written: 0,
            cap,
            cut: false,
        })
    }

    /// Appends what fits under the cap; past it, one line says the log stops there (the ring
    /// keeps the latest output whatever the log holds).
    pub fn write(&mut self, bytes: &[u8]) {
        if self.cut {
            return;
        }
        let room = usize::try_from(self.cap - self.written).unwrap_or(usize::MAX);
        let fits = &bytes[..bytes.len().min(room)];
        let ok = self.file.write_all(fits).is_ok();
        self.written += fits.len() as u64;
        if !ok || fits.len() < bytes.len() {
            self.cut = true;
            let note = format!(
                "\n[keel: the log stops here: it reached its cap of {} bytes; the job's latest \
                 output is in its ring]\n",
                self.cap
            );
            let _ = self.file.write_all(note.as_bytes());
        }
    }
}

/// Where a job's output comes from: the read end of its pipe or its PTY's master, or, for a
/// `bash` call that became a job, the chunks that call's readers go on forwarding.
pub(super) enum Source {
    Fd(OwnedFd),
    Chunks(mpsc::Receiver<Vec<u8>>),
}

/// Reads `source` to its end, each chunk to `sink` (see [`pump_fd`]).
pub(super) async fn pump(
    source: Source,
    tty: bool,
    mut sink: impl FnMut(&[u8]),
) -> std::io::Result<()> {
    match source {
        Source::Fd(fd) => pump_fd(fd, tty, sink).await,
        Source::Chunks(mut rx) => {
            while let Some(chunk) = rx.recv().await {
                sink(&chunk);
            }
            Ok(())
        }
    }
}

/// Reads `fd` (non-blocking: a pipe's read end, or a PTY master) to its end, each chunk to
/// `sink`: the end of a pipe, or `EIO` on a master whose slave every process closed. A master
/// is read through tokio's pipe type as an fd it does not check (it registers the fd with the
/// reactor and reads it, as it would a pipe; no `unsafe`, no deprecated `AsyncFd` call).
async fn pump_fd(fd: OwnedFd, tty: bool, mut sink: impl FnMut(&[u8])) -> std::io::Result<()> {
    let mut reader = match tty {
        true => pipe::Receiver::from_owned_fd_unchecked(fd)?,
        false => pipe::Receiver::from_owned_fd(fd)?,
    };
    let mut buf = vec![0u8; READ_BYTES];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) => return Ok(()),
            Ok(n) => sink(&buf[..n]),
            Err(e) if e.raw_os_error() == Some(libc::EIO) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Writes what arrives on `input` to the PTY `master` (non-blocking, written as [`pump`]
/// reads one), in order, as the terminal takes it; ends when the job does (the channel
/// closes) or the terminal is gone.
pub(super) async fn feed(master: OwnedFd, mut input: mpsc::UnboundedReceiver<Vec<u8>>) {
    let Ok(mut writer) = pipe::Sender::from_owned_fd_unchecked(master) else {
        return;
    };
    while let Some(bytes) = input.recv().await {
        if writer.write_all(&bytes).await.is_err() {
            return;
        }
    }
}

/// Up to `max` bytes of a log file from offset `since` (a lost job's output: its ring went
/// with the keel that held it). `end`: the offset after its last byte.
pub(super) fn read_log(path: &Path, end: u64, since: u64, max: usize) -> super::JobChunk {
    use std::io::{Read, Seek, SeekFrom};
    let from = since.min(end);
    let want = usize::try_from(end - from).unwrap_or(usize::MAX).min(max);
    let mut bytes = Vec::new();
    let read = std::fs::File::open(path).and_then(|mut f| {
        f.seek(SeekFrom::Start(from))?;
        f.take(want as u64).read_to_end(&mut bytes)
    });
    if let Err(e) = read {
        tracing::debug!(path = %path.display(), error = %e, "jobs: the log was not read");
    }
    super::JobChunk {
        from,
        next: from + bytes.len() as u64,
        bytes,
        dropped: 0,
    }
}
