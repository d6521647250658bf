//! The sole owner of stdout and stderr. Every byte keel writes to either goes through
//! [`Output`]; a closed stdout (broken pipe) is reported to the caller as a value, never a panic.
#![allow(clippy::disallowed_methods)] // the one place allowed to open the standard streams

use std::io::{self, Write};

/// Whether colour escapes may be written (decided once in `mode.rs`).
pub use anstream::ColorChoice;

/// The standard streams, buffered; stdout is flushed by the caller at event boundaries.
pub struct Output {
    stdout: Box<dyn Write + Send>,
    stderr: Box<dyn Write + Send>,
    stdout_closed: bool,
}

/// stdout's reader went away (EPIPE): the run should end quietly with 141.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StdoutClosed;

impl Output {
    /// The process's real streams with an explicit colour choice.
    pub fn stdio(color: ColorChoice) -> Self {
        let stdout = anstream::AutoStream::new(io::stdout(), color);
        let stderr = anstream::AutoStream::new(io::stderr(), color);
        Output {
            stdout: Box::new(io::BufWriter::with_capacity(64 * 1024, stdout)),
            stderr: Box::new(stderr),
            stdout_closed: false,
        }
    }

    /// Writers of the caller's choice (tests, benchmarks).
    pub fn new(stdout: Box<dyn Write + Send>, stderr: Box<dyn Write + Send>) -> Self {
        Output {
            stdout,
            stderr,
            stdout_closed: false,
        }
    }

    /// Writes to stdout; after a broken pipe every call returns `StdoutClosed`.
    pub fn out(&mut self, bytes: &[u8]) -> Result<(), StdoutClosed> {
        if self.stdout_closed {
            return Err(StdoutClosed);
        }
        match self.stdout.write_all(bytes) {
            Ok(()) => Ok(()),
            Err(_) => self.closed(),
        }
    }

    /// Flushes stdout (call when no more events are immediately pending).
    pub fn flush(&mut self) -> Result<(), StdoutClosed> {
        if self.stdout_closed {
            return Err(StdoutClosed);
        }
        match self.stdout.flush() {
            Ok(()) => Ok(()),
            Err(_) => self.closed(),
        }
    }

    /// Any write error on stdout means nobody reads it any more; all count as a closed pipe.
    fn closed(&mut self) -> Result<(), StdoutClosed> {
        self.stdout_closed = true;
        Err(StdoutClosed)
    }

    pub fn is_stdout_closed(&self) -> bool {
        self.stdout_closed
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
