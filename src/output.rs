//! The sole owner of stdout and stderr. Every byte keel writes to either goes through
//! [`Output`]; a stdout that fails (a closed pipe, a full or failing device) is reported to the
//! caller as a value, never a panic, and the first failure is kept so the exit can name it.
#![allow(clippy::disallowed_methods)] // the one place allowed to open the standard streams

use std::io::{self, Write};

/// Whether colour escapes may be written (decided once in `mode.rs`).
pub use anstream::ColorChoice;

/// The standard streams, buffered; stdout is flushed by the caller at event boundaries.
pub struct Output {
    stdout: Box<dyn Write + Send>,
    stderr: Box<dyn Write + Send>,
    stdout_failure: Option<StdoutFailure>,
}

/// stdout can no longer be written (see [`Output::stdout_failure`] for why).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StdoutClosed;

/// Why stdout stopped taking bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StdoutFailure {
    /// Its reader went away (EPIPE): the run ends quietly with 141.
    Closed,
    /// Any other write error (a full disk, `/dev/full`, an I/O error), as the system words it:
    /// the run fails with exit 1 and error kind `output_write`.
    Failed(String),
}

impl StdoutFailure {
    /// The sentence for stderr and the JSON result's `error.message`.
    pub fn message(&self) -> String {
        match self {
            StdoutFailure::Closed => "stdout was closed".into(),
            StdoutFailure::Failed(e) => format!("cannot write to stdout: {e}"),
        }
    }
}

impl Output {
    /// The process's real streams with an explicit colour choice.
    pub fn stdio(color: ColorChoice) -> Self {
        let stdout = anstream::AutoStream::new(io::stdout(), color);
        let stderr = anstream::AutoStream::new(io::stderr(), color);
        Output {
            stdout: Box::new(io::BufWriter::with_capacity(64 * 1024, stdout)),
            stderr: Box::new(stderr),
            stdout_failure: None,
        }
    }

    /// The real streams for a mode whose stdout carries only JSON lines (JSON, RPC, ACP):
    /// stdout is written as it is, since JSON escapes every control byte and there is no
    /// escape sequence to strip (scanning every byte for one cost a fifth of a JSON run's
    /// time); stderr as [`Output::stdio`].
    pub fn stdio_json(color: ColorChoice) -> Self {
        let stderr = anstream::AutoStream::new(io::stderr(), color);
        Output {
            stdout: Box::new(io::BufWriter::with_capacity(64 * 1024, io::stdout())),
            stderr: Box::new(stderr),
            stdout_failure: None,
        }
    }

    /// Writers of the caller's choice (tests, benchmarks).
    pub fn new(stdout: Box<dyn Write + Send>, stderr: Box<dyn Write + Send>) -> Self {
        Output {
            stdout,
            stderr,
            stdout_failure: None,
        }
    }

    /// Writes to stdout; after the first failure every call returns `StdoutClosed`.
    pub fn out(&mut self, bytes: &[u8]) -> Result<(), StdoutClosed> {
        if self.stdout_failure.is_some() {
            return Err(StdoutClosed);
        }
        match self.stdout.write_all(bytes) {
            Ok(()) => Ok(()),
            Err(e) => self.failed(e),
        }
    }

    /// Flushes stdout (call when no more events are immediately pending).
    pub fn flush(&mut self) -> Result<(), StdoutClosed> {
        if self.stdout_failure.is_some() {
            return Err(StdoutClosed);
        }
        match self.stdout.flush() {
            Ok(()) => Ok(()),
            Err(e) => self.failed(e),
        }
    }

    /// Keeps the first failure: stdout takes nothing more after it.
    fn failed(&mut self, e: io::Error) -> Result<(), StdoutClosed> {
        self.stdout_failure = Some(if e.kind() == io::ErrorKind::BrokenPipe {
            StdoutFailure::Closed
        } else {
            StdoutFailure::Failed(e.to_string())
        });
        Err(StdoutClosed)
    }

    /// Whether stdout failed (for any reason) and takes no more bytes.
    pub fn is_stdout_closed(&self) -> bool {
        self.stdout_failure.is_some()
    }

    /// Why stdout failed, if it did.
    pub fn stdout_failure(&self) -> Option<&StdoutFailure> {
        self.stdout_failure.as_ref()
    }

    /// The exit for a stdout that took no more bytes: 141 (as SIGPIPE would), quietly, when
    /// its reader went away; otherwise 1, with the failure on stderr.
    pub fn stdout_exit(&mut self) -> crate::exit::Exit {
        match self.stdout_failure.clone() {
            Some(failure @ StdoutFailure::Failed(_)) => {
                self.err(&format!("Error: {}\n", failure.message()));
                crate::exit::Exit::Failed
            }
            Some(StdoutFailure::Closed) | None => crate::exit::Exit::Signal(crate::exit::SIGPIPE),
        }
    }

    /// Writes diagnostics to stderr; failures are ignored (there is nowhere else to report).
    pub fn err(&mut self, text: &str) {
        let _ = self.stderr.write_all(text.as_bytes());
        let _ = self.stderr.flush();
    }
}

/// The terminal on stdout, for the TUI. Unbuffered: the TUI builds each frame in memory and
/// writes it once, then flushes.
#[derive(Debug, Default)]
pub struct TerminalOut;

impl Write for TerminalOut {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        io::stdout().lock().write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        io::stdout().lock().write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        io::stdout().lock().flush()
    }
}

/// A writer for `tracing` that goes to stderr (print, json and rpc modes log there).
pub fn log_writer() -> io::Stderr {
    io::stderr()
}

/// Whether stdin, stdout and stderr are terminals (asked once, by `mode.rs`).
pub fn terminals() -> (bool, bool, bool) {
    use std::io::IsTerminal;
    (
        io::stdin().is_terminal(),
        io::stdout().is_terminal(),
        io::stderr().is_terminal(),
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// A stdout whose every write fails with `kind`.
    struct Failing(io::ErrorKind);

    impl Write for Failing {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::Error::from(self.0))
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn output(kind: io::ErrorKind) -> Output {
        Output::new(Box::new(Failing(kind)), Box::new(io::sink()))
    }

    /// Regression: every write error counted as a closed pipe, so a full disk ended as a quiet 141.
    #[test]
    fn a_broken_pipe_is_closed_and_any_other_error_is_a_failure() {
        let mut out = output(io::ErrorKind::BrokenPipe);
        assert_eq!(out.out(b"x"), Err(StdoutClosed));
        assert_eq!(out.stdout_failure(), Some(&StdoutFailure::Closed));
        let mut out = output(io::ErrorKind::StorageFull);
        assert_eq!(out.out(b"x"), Err(StdoutClosed));
        let failure = out.stdout_failure().cloned().unwrap();
        assert!(matches!(failure, StdoutFailure::Failed(_)), "{failure:?}");
        assert!(failure.message().starts_with("cannot write to stdout: "));
        // The first failure is kept; nothing more is attempted.
        assert_eq!(out.flush(), Err(StdoutClosed));
        assert_eq!(out.stdout_failure(), Some(&failure));
        assert!(out.is_stdout_closed());
    }
}
