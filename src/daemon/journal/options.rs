//! The journal's checked configuration and what checking it needs (a URL's shape, a
//! credentials file, a subject token, the host name). The flags that ask for it are
//! `cli::commands::journal_flags`'s. The host name is read here, at the edge.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::StartupError;

/// Defaults of the `KEEL_EVENTS` stream (used when the daemon creates it).
pub const MAX_AGE_SECS: u64 = 7 * 24 * 3600;
pub const MAX_BYTES: u64 = 1024 * 1024 * 1024;
pub const DEDUPE_SECS: u64 = 120;

/// The JetStream stream the journal publishes to.
pub const STREAM: &str = "KEEL_EVENTS";

/// A checked journal configuration.
#[derive(Debug, Clone)]
pub struct JournalOptions {
    pub url: String,
    pub creds: Option<PathBuf>,
    pub host: String,
    pub max_age: Duration,
    pub max_bytes: u64,
    pub dedupe: Duration,
    pub spool_dir: PathBuf,
    pub spool_bytes: u64,
    pub commands: bool,
}

/// NATS credentials read from `--journal-creds`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Creds {
    /// A `.creds` file's text: a user JWT and its NKey seed (as `nsc` writes them).
    Jwt(String),
    /// An NKey user seed (`SU…`) alone, for a server that lists NKey users.
    NKey(String),
}

/// Reads and recognises `--journal-creds FILE`.
pub fn creds(path: &Path) -> Result<Creds, StartupError> {
    let shown = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| {
        StartupError::usage(format!("--journal-creds {shown}: cannot read it: {e}"))
    })?;
    if text.contains("-----BEGIN NATS USER JWT-----") {
        return Ok(Creds::Jwt(text));
    }
    let seed = text.trim();
    if seed.starts_with("SU") && !seed.contains(char::is_whitespace) {
        return Ok(Creds::NKey(seed.to_string()));
    }
    Err(StartupError::usage(format!(
        "--journal-creds {shown}: neither a .creds file (user JWT and seed) nor an NKey user seed (SU…)"
    )))
}

pub fn check_url(url: &str) -> Result<(), StartupError> {
    for one in url.split(',') {
        let rest = one
            .strip_prefix("nats://")
            .or_else(|| one.strip_prefix("tls://"));
        if rest.is_none_or(|r| r.is_empty() || r.contains('/')) {
            let url = crate::kernel::url::redact_url(url);
            return Err(StartupError::usage(format!(
                "--journal {url:?}: expected nats://HOST:PORT or tls://HOST:PORT"
            )));
        }
    }
    Ok(())
}

/// `s` as one subject token: characters other than `[A-Za-z0-9_-]` become `_`.
pub fn token(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// This machine's host name ("" if it cannot be read).
pub fn hostname() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_default()
}
