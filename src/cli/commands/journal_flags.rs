//! The journal's flags on `keel daemon run` (`--journal URL`, `KEEL_JOURNAL`, credentials,
//! host name, stream and spool limits, `--journal-commands`) and their checks: a bad value is a
//! clear usage error before the daemon starts.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::daemon::journal::options::{
    check_url, creds, token, JournalOptions, DEDUPE_SECS, MAX_AGE_SECS, MAX_BYTES,
};
use crate::error::StartupError;

/// `keel daemon run`'s journal flags.
#[derive(Debug, Clone, clap::Args)]
pub struct JournalArgs {
    /// Publish every session event to NATS JetStream at this URL (nats://HOST:PORT or
    /// tls://HOST:PORT; default $KEEL_JOURNAL).
    #[arg(long, value_name = "URL")]
    pub journal: Option<String>,
    /// A NATS credentials file (.creds: user JWT and NKey seed).
    #[arg(long, value_name = "FILE")]
    pub journal_creds: Option<PathBuf>,
    /// The <host> token of the journal's subjects (default: this machine's host name).
    #[arg(long, value_name = "NAME")]
    pub journal_host: Option<String>,
    /// KEEL_EVENTS, when the daemon creates it: drop messages older than this.
    #[arg(long, value_name = "SECS", default_value_t = MAX_AGE_SECS)]
    pub journal_max_age: u64,
    /// KEEL_EVENTS, when the daemon creates it: keep at most this many bytes.
    #[arg(long, value_name = "N", default_value_t = MAX_BYTES)]
    pub journal_max_bytes: u64,
    /// KEEL_EVENTS, when the daemon creates it: the duplicate window (re-sends after an outage
    /// shorter than this are deduplicated).
    #[arg(long, value_name = "SECS", default_value_t = DEDUPE_SECS)]
    pub journal_dedupe: u64,
    /// The on-disk spool's cap; when full the oldest records are dropped (and counted).
    #[arg(long, value_name = "N", default_value_t = crate::daemon::journal::spool::SPOOL_BYTES)]
    pub journal_spool_bytes: u64,
    /// Serve protocol v2 requests on keel.cmd.<host> (needs --journal-creds).
    #[arg(long)]
    pub journal_commands: bool,
}

impl JournalArgs {
    /// The journal to run, if any: `--journal`, else `KEEL_JOURNAL` (empty = none). `hostname`
    /// is this machine's name (the default `<host>`).
    pub fn options(
        &self,
        keel_journal: Option<&str>,
        hostname: &str,
        keel_home: &Path,
    ) -> Result<Option<JournalOptions>, StartupError> {
        let url = self
            .journal
            .clone()
            .or_else(|| keel_journal.map(str::to_string))
            .filter(|u| !u.trim().is_empty());
        let Some(url) = url else {
            if self.journal_commands || self.journal_creds.is_some() {
                return Err(StartupError::usage(
                    "--journal-commands and --journal-creds need --journal URL (or KEEL_JOURNAL)",
                ));
            }
            return Ok(None);
        };
        if cfg!(not(feature = "journal")) {
            return Err(StartupError::usage(
                "--journal: this keel was built without the `journal` feature",
            )
            .hint("build it with `cargo build --features journal` (on by default)"));
        }
        check_url(&url)?;
        if let Some(path) = &self.journal_creds {
            creds(path)?;
        }
        if self.journal_commands && self.journal_creds.is_none() {
            return Err(StartupError::usage(
                "--journal-commands needs --journal-creds FILE: commands are only served on an \
                 authenticated NATS connection",
            )
            .hint("create a NATS user for this daemon (nsc add user) and pass its .creds file"));
        }
        let host = match &self.journal_host {
            Some(h) if token(h) != *h || h.is_empty() => {
                return Err(StartupError::usage(format!(
                    "--journal-host {h:?}: use only letters, digits, '_' and '-'"
                )))
            }
            Some(h) => h.clone(),
            None => match token(hostname) {
                h if h.is_empty() => "localhost".to_string(),
                h => h,
            },
        };
        if self.journal_dedupe == 0 || self.journal_max_age == 0 || self.journal_max_bytes == 0 {
            return Err(StartupError::usage(
                "--journal-dedupe, --journal-max-age and --journal-max-bytes must be positive",
            ));
        }
        if self.journal_dedupe > self.journal_max_age {
            return Err(StartupError::usage(
                "--journal-dedupe must not be longer than --journal-max-age",
            ));
        }
        if self.journal_spool_bytes < 4096 {
            return Err(StartupError::usage(
                "--journal-spool-bytes must be at least 4096",
            ));
        }
        Ok(Some(JournalOptions {
            url,
            creds: self.journal_creds.clone(),
            host,
            max_age: Duration::from_secs(self.journal_max_age),
            max_bytes: self.journal_max_bytes,
            dedupe: Duration::from_secs(self.journal_dedupe),
            spool_dir: keel_home.join("journal"),
            spool_bytes: self.journal_spool_bytes,
            commands: self.journal_commands,
        }))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        j: JournalArgs,
    }

    fn parse(args: &[&str], env: Option<&str>) -> Result<Option<JournalOptions>, String> {
        let t = T::try_parse_from(std::iter::once("t").chain(args.iter().copied())).unwrap();
        t.j.options(env, "box.example.org", Path::new("/h"))
            .map_err(|e| e.render().to_string())
    }

    #[test]
    fn journal_flags_are_checked_before_the_daemon_starts() {
        assert!(parse(&[], None).unwrap().is_none());
        assert!(parse(&[], Some("")).unwrap().is_none());
        let o = parse(&[], Some("nats://127.0.0.1:4222")).unwrap().unwrap();
        assert_eq!(o.host, "box_example_org");
        assert_eq!(o.dedupe, Duration::from_secs(120));
        assert_eq!(o.spool_dir, Path::new("/h/journal"));
        let o = parse(&["--journal", "tls://n:1", "--journal-host", "ci-7"], None);
        assert_eq!(o.unwrap().unwrap().host, "ci-7");
        for (args, says) in [
            (&["--journal", "http://x"][..], "expected nats://HOST:PORT"),
            (
                &["--journal", "nats://x", "--journal-host", "a.b"],
                "--journal-host",
            ),
            (
                &["--journal", "nats://x", "--journal-commands"],
                "needs --journal-creds",
            ),
            (&["--journal-commands"], "need --journal URL"),
            (
                &["--journal", "nats://x", "--journal-creds", "/no/such"],
                "cannot read it",
            ),
            (
                &["--journal", "nats://x", "--journal-creds", "Cargo.toml"],
                "neither a .creds",
            ),
            (
                &["--journal", "nats://x", "--journal-dedupe", "0"],
                "must be positive",
            ),
            (
                &["--journal", "nats://x", "--journal-spool-bytes", "10"],
                "at least 4096",
            ),
        ] {
            let e = parse(args, None).unwrap_err();
            assert!(e.contains(says), "{args:?}: {e}");
        }
    }
}
