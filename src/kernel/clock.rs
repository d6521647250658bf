//! Time and id sources, injected so that runs can be made deterministic (tests, snapshots).
//! The kernel never reads the system clock or randomness except through these.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Where "now" and fresh ids come from.
#[derive(Clone, Debug)]
pub struct Clock {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// `Some(start)`: a fake clock that starts at `start` ms and advances 1 ms per reading.
    fixed: Option<u64>,
    ticks: AtomicU64,
    /// `Some(seed)`: ids come from a counter mixed with the seed instead of the OS RNG.
    seed: Option<u64>,
    ids: AtomicU64,
}

impl Clock {
    /// The real clock and real randomness.
    pub fn system() -> Self {
        Self::new(None, None)
    }

    /// `fixed`: fake start time in Unix ms; `seed`: deterministic ids.
    pub fn new(fixed: Option<u64>, seed: Option<u64>) -> Self {
        Clock {
            inner: Arc::new(Inner {
                fixed,
                ticks: AtomicU64::new(0),
                seed,
                ids: AtomicU64::new(0),
            }),
        }
    }

    /// An independent id stream for another consumer (the session recorder): seeded from
    /// this clock's seed and `salt`, so its ids do not depend on how its calls interleave
    /// with other tasks'. Time stays this clock's start (fixed clocks tick on their own).
    pub fn derive(&self, salt: u64) -> Clock {
        Clock::new(
            self.inner.fixed,
            self.inner
                .seed
                .map(|s| s ^ salt.wrapping_mul(0x9E37_79B9_7F4A_7C15)),
        )
    }

    /// A duration measured on the host's monotonic clock, as this clock reports durations:
    /// whole milliseconds, or 0 on a test clock (repeatable output).
    pub fn duration_ms(&self, measured: std::time::Duration) -> u64 {
        match self.inner.fixed {
            Some(_) => 0,
            None => u64::try_from(measured.as_millis()).unwrap_or(u64::MAX),
        }
    }

    /// Unix milliseconds.
    pub fn now_ms(&self) -> i64 {
        match self.inner.fixed {
            Some(start) => (start + self.inner.ticks.fetch_add(1, Ordering::Relaxed)) as i64,
            None => chrono::Utc::now().timestamp_millis(),
        }
    }

    /// The time now without advancing a test clock: for facts that must not shift the
    /// timestamps of the events around them (a checkpoint, on or off).
    pub fn peek_ms(&self) -> i64 {
        match self.inner.fixed {
            Some(start) => (start + self.inner.ticks.load(Ordering::Relaxed)) as i64,
            None => chrono::Utc::now().timestamp_millis(),
        }
    }

    /// ISO-8601 UTC with milliseconds, as pi writes entry timestamps.
    pub fn now_iso(&self) -> String {
        iso(self.now_ms())
    }

    fn next_u128(&self) -> u128 {
        match self.inner.seed {
            Some(seed) => {
                let n = self.inner.ids.fetch_add(1, Ordering::Relaxed) + 1;
                // splitmix64 of (seed, n): spread bits so ids look like ids
                let mut z = seed ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
                z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                z ^= z >> 31;
                ((z as u128) << 64) | n as u128
            }
            None => uuid::Uuid::new_v4().as_u128(),
        }
    }

    /// A random number in [0, 1) (backoff jitter); deterministic when seeded.
    pub fn random_unit(&self) -> f64 {
        let bits = (self.next_u128() >> 64) as u64 >> 11;
        bits as f64 / (1u64 << 53) as f64
    }

    /// An 8-hex-digit session entry id.
    pub fn entry_id(&self) -> String {
        format!("{:08x}", (self.next_u128() >> 96) as u32)
    }

    /// A UUIDv7 session id (time-ordered).
    pub fn session_id(&self) -> String {
        let ms = self.now_ms() as u64;
        let rand = self.next_u128();
        match self.inner.seed {
            Some(_) => {
                let bytes = rand.to_be_bytes();
                let mut b = [0u8; 10];
                b.copy_from_slice(&bytes[..10]);
                uuid::Builder::from_unix_timestamp_millis(ms, &b)
                    .into_uuid()
                    .to_string()
            }
            None => {
                let nanos = ((ms % 1000) * 1_000_000) as u32;
                let ts = uuid::Timestamp::from_unix_time(ms / 1000, nanos, 0, 0);
                uuid::Uuid::new_v7(ts).to_string()
            }
        }
    }

    /// A short id for tool calls and similar.
    pub fn short_id(&self, prefix: &str) -> String {
        format!(
            "{prefix}{:012x}",
            (self.next_u128() >> 80) as u64 & 0xffff_ffff_ffff
        )
    }
}

/// Formats Unix milliseconds as `2026-11-30T02:39:46.717Z`.
pub fn iso(ms: i64) -> String {
    match chrono::DateTime::from_timestamp_millis(ms) {
        Some(t) => t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(),
        None => "1970-01-01T00:00:00.000Z".to_string(),
    }
}

/// Parses an ISO timestamp back to Unix milliseconds.
pub fn parse_iso(s: &str) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.timestamp_millis())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_clock_is_deterministic() {
        let a = Clock::new(Some(1_700_000_000_000), Some(7));
        let b = Clock::new(Some(1_700_000_000_000), Some(7));
        assert_eq!(a.session_id(), b.session_id());
        assert_eq!(a.entry_id(), b.entry_id());
        assert_eq!(a.now_iso(), b.now_iso());
        assert_ne!(a.entry_id(), a.entry_id());
    }

    #[test]
    fn iso_round_trips() {
        let ms = 1_796_006_211_841;
        assert_eq!(iso(ms), "2026-11-30T02:36:51.841Z");
        assert_eq!(parse_iso(&iso(ms)), Some(ms));
    }
}
