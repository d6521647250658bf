//! The output side of `bash`: a bounded in-memory tail of what the command printed, the
//! capped full-output file in the session's private directory, and the throttled progress
//! updates. Owns only the bytes; it never touches the child process and never holds more than
//! `KEEP_BYTES` in memory or writes more than `MAX_SPILL_BYTES` to disk.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::text::{self, FullOutput, MAX_BYTES, MAX_LINES};
use super::{Streams, ToolEnv, ToolOutput};

/// At most one progress update per this interval...
pub(super) const PROGRESS_INTERVAL: Duration = Duration::from_millis(100);
/// ...unless this much new output arrived since the last one.
pub(super) const PROGRESS_BYTES: usize = 32 * 1024;
/// What one progress update carries at most: the last lines within these bounds.
pub(super) const PROGRESS_MAX_BYTES: usize = 4 * 1024;
pub(super) const PROGRESS_MAX_LINES: usize = 50;
/// In-memory tail kept once the output spills to a file (must exceed `MAX_BYTES`).
const KEEP_BYTES: usize = 4 * MAX_BYTES;
/// The full-output file keeps at most this many bytes: the start of the output.
pub(super) const MAX_SPILL_BYTES: usize = 32 * 1024 * 1024;

/// The command's output: a bounded in-memory tail plus, once over the caps, a file with (the
/// first `MAX_SPILL_BYTES` of) all of it.
pub(super) struct Output {
    tail: Vec<u8>,
    total_bytes: usize,
    newlines: usize,
    last_byte: Option<u8>,
    temp_dir: PathBuf,
    env: ToolEnv,
    spill: Option<Spill>,
    spill_error: Option<String>,
    spill_cap: usize,
    /// The tails of stdout and of stderr apart (each within `KEEP_BYTES`), for hooks.
    apart: [Vec<u8>; 2],
}

/// Which of the command's pipes a chunk came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stream {
    Stdout = 0,
    Stderr = 1,
}

struct Spill {
    file: std::fs::File,
    path: PathBuf,
    written: usize,
}

impl Output {
    pub(super) fn new(temp_dir: &Path, env: &ToolEnv) -> Self {
        Output {
            tail: Vec::new(),
            total_bytes: 0,
            newlines: 0,
            last_byte: None,
            temp_dir: temp_dir.to_path_buf(),
            env: env.clone(),
            spill: None,
            spill_error: None,
            spill_cap: MAX_SPILL_BYTES,
            apart: [Vec::new(), Vec::new()],
        }
    }

    /// Takes `chunk` from `stream`: into the merged output, and into that stream's own tail.
    pub(super) fn push_from(&mut self, stream: Stream, chunk: &[u8]) {
        self.push(chunk);
        let own = &mut self.apart[stream as usize];
        own.extend_from_slice(chunk);
        if own.len() > KEEP_BYTES {
            let cut = own.len() - KEEP_BYTES;
            own.drain(..cut);
        }
    }

    /// stdout and stderr apart: the last lines of each within the caps, as safe text.
    pub(super) fn streams(&self) -> Streams {
        let [stdout, stderr] = self
            .apart
            .each_ref()
            .map(|b| text::cap_tail(&text::to_text(b), MAX_BYTES, MAX_LINES).text);
        Streams { stdout, stderr }
    }

    fn total_lines(&self) -> usize {
        match self.last_byte {
            Some(b'\n') | None => self.newlines,
            Some(_) => self.newlines + 1,
        }
    }

    pub(super) fn over_caps(&self) -> bool {
        self.total_bytes > MAX_BYTES || self.total_lines() > MAX_LINES
    }

    pub(super) fn push(&mut self, chunk: &[u8]) {
        if chunk.is_empty() {
            return;
        }
        self.total_bytes += chunk.len();
        self.newlines += chunk.iter().filter(|&&b| b == b'\n').count();
        self.last_byte = chunk.last().copied();
        if let Some(spill) = &mut self.spill {
            let room = self.spill_cap.saturating_sub(spill.written);
            let part = &chunk[..room.min(chunk.len())];
            if let Err(e) = spill.file.write_all(part) {
                self.spill_error = Some(e.to_string());
                self.spill = None;
            } else {
                spill.written += part.len();
            }
        }
        self.tail.extend_from_slice(chunk);
        if self.spill.is_none() && self.spill_error.is_none() && self.over_caps() {
            self.start_spill();
        }
        if self.tail.len() > KEEP_BYTES && (self.spill.is_some() || self.spill_error.is_some()) {
            let cut = self.tail.len() - KEEP_BYTES;
            self.tail.drain(..cut);
        }
    }

    /// Creates the full-output file and writes everything so far (all of it is still in `tail`).
    fn start_spill(&mut self) {
        let made = self.env.output_dir(&self.temp_dir).and_then(|dir| {
            let f = tempfile::Builder::new()
                .prefix("bash-")
                .suffix(".log")
                .tempfile_in(dir)?;
            let (mut file, path) = f.keep().map_err(|e| e.error)?;
            let first = &self.tail[..self.tail.len().min(self.spill_cap)];
            file.write_all(first)?;
            Ok(Spill {
                file,
                path,
                written: first.len(),
            })
        });
        match made {
            Ok(spill) => self.spill = Some(spill),
            Err(e) => self.spill_error = Some(e.to_string()),
        }
    }

    pub(super) fn full_path(&self) -> Option<&Path> {
        self.spill.as_ref().map(|s| s.path.as_path())
    }

    /// Whether the full-output file stopped at its cap.
    pub(super) fn spill_capped(&self) -> bool {
        self.spill.is_some() && self.total_bytes > self.spill_cap
    }

    pub(super) fn full_output(&self) -> FullOutput<'_> {
        match &self.spill {
            Some(s) if self.spill_capped() => FullOutput::SavedStart(&s.path, self.spill_cap),
            Some(s) => FullOutput::Saved(&s.path),
            None => FullOutput::Unavailable,
        }
    }

    /// The last lines within the caps, as safe text.
    pub(super) fn tail(&self) -> text::Capped {
        let mut capped = text::cap_tail(&text::to_text(&self.tail), MAX_BYTES, MAX_LINES);
        capped.total_lines = self.total_lines();
        capped
    }

    /// What a progress update shows: the last lines within `PROGRESS_MAX_BYTES` and
    /// `PROGRESS_MAX_LINES`, as safe text.
    pub(super) fn progress_text(&self) -> String {
        let from = self.tail.len().saturating_sub(PROGRESS_MAX_BYTES);
        let mut slice = &self.tail[from..];
        if from > 0 && self.tail[from - 1] != b'\n' {
            // The slice starts inside a line: drop that piece unless it is all there is.
            if let Some(i) = slice.iter().position(|&b| b == b'\n') {
                if i + 1 < slice.len() {
                    slice = &slice[i + 1..];
                }
            }
        }
        text::cap_tail(
            &text::to_text(slice),
            PROGRESS_MAX_BYTES,
            PROGRESS_MAX_LINES,
        )
        .text
    }
}

/// Throttles progress updates: the first data is sent at once, then at most one update per
/// `PROGRESS_INTERVAL` unless `PROGRESS_BYTES` piled up. Each carries `progress_text`, so the
/// stream stays within about `PROGRESS_MAX_BYTES` per `PROGRESS_BYTES` of output plus
/// `PROGRESS_MAX_BYTES` per interval.
pub(super) struct Progress<'a> {
    tx: Option<&'a mpsc::UnboundedSender<ToolOutput>>,
    last: Option<Instant>,
    pub(super) pending: usize,
}

impl<'a> Progress<'a> {
    pub(super) fn new(tx: Option<&'a mpsc::UnboundedSender<ToolOutput>>) -> Self {
        Progress {
            tx,
            last: None,
            pending: 0,
        }
    }

    pub(super) fn flush_at(&self) -> Instant {
        self.last
            .map_or_else(Instant::now, |t| t + PROGRESS_INTERVAL)
    }

    pub(super) fn on_data(&mut self, n: usize, out: &Output) {
        if self.tx.is_none() {
            return;
        }
        self.pending += n;
        if self.pending >= PROGRESS_BYTES || Instant::now() >= self.flush_at() {
            self.send(out);
        }
    }

    pub(super) fn send(&mut self, out: &Output) {
        self.pending = 0;
        self.last = Some(Instant::now());
        if let Some(tx) = self.tx {
            // A closed receiver only means nobody watches progress any more.
            let _ = tx.send(ToolOutput::ok(out.progress_text()));
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn the_full_output_file_stops_at_its_cap_and_the_tail_stays_whole() {
        let d = tempfile::tempdir().unwrap();
        let env = ToolEnv::default();
        let mut out = Output::new(d.path(), &env);
        out.spill_cap = 100 * 1024;
        let line = format!("{}\n", "z".repeat(99));
        for _ in 0..3000 {
            out.push(line.as_bytes());
        }
        out.push(b"last\n");
        assert!(out.spill_capped());
        let path = out.full_path().unwrap().to_path_buf();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 100 * 1024);
        assert!(path.starts_with(d.path()));
        assert!(matches!(
            out.full_output(),
            FullOutput::SavedStart(_, 102_400)
        ));
        assert!(out.tail().text.ends_with("zzz\nlast"));
        drop(out);
        drop(env);
        assert!(!path.exists(), "the session's spill dir goes with the env");
    }

    #[test]
    fn progress_text_is_the_last_lines_within_its_bounds() {
        let d = tempfile::tempdir().unwrap();
        let mut out = Output::new(d.path(), &ToolEnv::default());
        for i in 0..1000 {
            out.push(format!("line {i}\n").as_bytes());
        }
        let p = out.progress_text();
        assert_eq!(p.lines().count(), PROGRESS_MAX_LINES);
        assert!(
            p.starts_with("line 950\n") && p.ends_with("line 999"),
            "{p}"
        );
        let mut wide = Output::new(d.path(), &ToolEnv::default());
        // 3-byte characters: the last 4 KiB start inside one.
        wide.push(&"€".repeat(7_000).into_bytes());
        let p = wide.progress_text();
        assert!(p.len() <= PROGRESS_MAX_BYTES && p.len() > PROGRESS_MAX_BYTES - 4);
        assert!(p.chars().all(|c| c == '€'), "a cut character is dropped");
    }
}
