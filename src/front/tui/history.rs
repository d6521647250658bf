//! The editor's prompt history across sessions: `$KEEL_HOME/history.jsonl`, owner-only (0600),
//! one JSON object a line (`{"cwd": …, "text": …, "ts": unix ms}`), appended as each prompt is
//! sent. Reading keeps the last [`PER_PROJECT`] entries of the directory asked for and skips
//! lines that do not parse (a torn last line after a crash); the file is rewritten with only
//! those entries per directory once it passes [`TRIM_BYTES`]. Never fails the TUI: an error is
//! logged and the history is just shorter.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::kernel::private;

/// Entries kept (and offered by Up) per project directory.
pub const PER_PROJECT: usize = 1000;
/// Past this size the file is rewritten with the last [`PER_PROJECT`] entries of each
/// directory.
pub const TRIM_BYTES: u64 = 1 << 20;

#[derive(Serialize, Deserialize)]
struct Entry {
    cwd: String,
    text: String,
    ts: i64,
}

/// The history file as one project (its working directory) sees it.
pub struct PromptHistory {
    path: PathBuf,
    cwd: String,
}

impl PromptHistory {
    pub fn new(keel_home: &Path, cwd: &Path) -> PromptHistory {
        PromptHistory {
            path: keel_home.join("history.jsonl"),
            cwd: cwd.display().to_string(),
        }
    }

    /// This project's prompts, oldest first (at most [`PER_PROJECT`]).
    pub fn load(&self) -> Vec<String> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
            Err(e) => {
                tracing::warn!("cannot read {}: {e}", self.path.display());
                return Vec::new();
            }
        };
        let mut mine: Vec<String> = parse(&text)
            .filter(|e| e.cwd == self.cwd)
            .map(|e| e.text)
            .collect();
        let extra = mine.len().saturating_sub(PER_PROJECT);
        mine.drain(..extra);
        mine
    }

    /// Appends one prompt (`ts`: unix ms); a torn last line is ended first so the new entry
    /// stands on its own line.
    pub fn append(&self, text: &str, ts: i64) {
        if text.trim().is_empty() {
            return;
        }
        if let Err(e) = self.try_append(text, ts) {
            tracing::warn!("cannot write {}: {e}", self.path.display());
        }
    }

    fn try_append(&self, text: &str, ts: i64) -> std::io::Result<()> {
        if let Some(dir) = self.path.parent() {
            private::create_dir_all(dir)?;
        }
        let mut file = private::append_file(&self.path)?;
        let len = file.metadata()?.len();
        let mut line = String::new();
        if len > 0 {
            let mut last = [0u8; 1];
            let mut reader = std::fs::File::open(&self.path)?;
            reader.seek(SeekFrom::Start(len - 1))?;
            reader.read_exact(&mut last)?;
            if last[0] != b'\n' {
                line.push('\n');
            }
        }
        let entry = Entry {
            cwd: self.cwd.clone(),
            text: text.to_string(),
            ts,
        };
        line.push_str(&serde_json::to_string(&entry).map_err(std::io::Error::other)?);
        line.push('\n');
        file.write_all(line.as_bytes())?;
        if len + line.len() as u64 > TRIM_BYTES {
            self.trim()?;
        }
        Ok(())
    }

    /// Rewrites the file with the last [`PER_PROJECT`] entries of every directory.
    fn trim(&self) -> std::io::Result<()> {
        let text = std::fs::read_to_string(&self.path)?;
        let entries: Vec<Entry> = parse(&text).collect();
        let mut left: HashMap<&str, usize> = HashMap::new();
        let mut keep = vec![false; entries.len()];
        for (i, e) in entries.iter().enumerate().rev() {
            let n = left.entry(e.cwd.as_str()).or_insert(PER_PROJECT);
            if *n > 0 {
                *n -= 1;
                keep[i] = true;
            }
        }
        let mut out = String::new();
        for (e, _) in entries.iter().zip(&keep).filter(|(_, k)| **k) {
            out.push_str(&serde_json::to_string(e).map_err(std::io::Error::other)?);
            out.push('\n');
        }
        let tmp = self.path.with_extension("jsonl.tmp");
        private::write_file(&tmp, out.as_bytes())?;
        std::fs::rename(&tmp, &self.path)
    }
}

/// The entries of the file that parse, in order.
fn parse(text: &str) -> impl Iterator<Item = Entry> + '_ {
    text.lines()
        .filter_map(|l| serde_json::from_str::<Entry>(l).ok())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn trimming_keeps_the_last_entries_of_each_directory() {
        let dir = tempfile::tempdir().unwrap();
        let a = PromptHistory::new(dir.path(), Path::new("/a"));
        let b = PromptHistory::new(dir.path(), Path::new("/b"));
        for i in 0..PER_PROJECT + 5 {
            a.append(&format!("a{i}"), i as i64);
        }
        b.append("b0", 0);
        a.trim().unwrap();
        let text = std::fs::read_to_string(dir.path().join("history.jsonl")).unwrap();
        assert_eq!(text.lines().count(), PER_PROJECT + 1);
        assert_eq!(a.load().first().map(String::as_str), Some("a5"));
        assert_eq!(b.load(), ["b0"]);
    }
}
