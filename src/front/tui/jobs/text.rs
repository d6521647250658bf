//! A job's output as the `/jobs` tail shows it: bytes (a PTY's escape sequences and carriage
//! returns included) folded into plain lines. Pure: no terminal, no host.

use std::collections::VecDeque;

/// Lines a tail keeps (older ones are dropped).
pub const KEEP_LINES: usize = 1000;

/// Folds output bytes into lines: UTF-8 decoded across chunk boundaries, escape sequences
/// (CSI, OSC, two-byte) dropped, `\r` not followed by `\n` starting its line over (a progress
/// bar shows its last state), other control characters made spaces.
#[derive(Debug, Default, Clone)]
pub struct Lines {
    pub done: VecDeque<String>,
    /// The line being written (no newline yet).
    pub partial: String,
    /// An incomplete UTF-8 sequence at the end of the last chunk.
    pending: Vec<u8>,
    escape: Escape,
    /// A `\r` came last: the next character decides (`\n`: a plain newline).
    cr: bool,
}

/// Where the folder is inside an escape sequence.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Escape {
    #[default]
    None,
    /// After ESC.
    Start,
    /// Inside `ESC [ …` until its final byte.
    Csi,
    /// Inside `ESC ] …` until BEL or `ESC \`.
    Osc,
    /// An ESC inside an OSC (the start of its `ESC \` end).
    OscEsc,
}

impl Lines {
    pub fn push(&mut self, bytes: &[u8]) {
        let mut all = std::mem::take(&mut self.pending);
        all.extend_from_slice(bytes);
        let mut rest: &[u8] = &all;
        loop {
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    self.push_str(s);
                    break;
                }
                Err(e) => {
                    let (good, bad) = rest.split_at(e.valid_up_to());
                    self.push_str(std::str::from_utf8(good).unwrap_or_default());
                    match e.error_len() {
                        // Cut short: the next chunk completes it.
                        None => {
                            self.pending = bad.to_vec();
                            break;
                        }
                        Some(n) => {
                            self.push_char('\u{FFFD}');
                            rest = &bad[n..];
                        }
                    }
                }
            }
        }
        while self.done.len() > KEEP_LINES {
            self.done.pop_front();
        }
    }

    fn push_str(&mut self, s: &str) {
        for c in s.chars() {
            self.push_char(c);
        }
    }

    fn push_char(&mut self, c: char) {
        match self.escape {
            Escape::Start => {
                self.escape = match c {
                    '[' => Escape::Csi,
                    ']' => Escape::Osc,
                    _ => Escape::None,
                };
                return;
            }
            Escape::Csi => {
                if ('\u{40}'..='\u{7e}').contains(&c) {
                    self.escape = Escape::None;
                }
                return;
            }
            Escape::Osc => {
                self.escape = match c {
                    '\u{7}' => Escape::None,
                    '\u{1b}' => Escape::OscEsc,
                    _ => Escape::Osc,
                };
                return;
            }
            Escape::OscEsc => {
                self.escape = Escape::None;
                return;
            }
            Escape::None => {}
        }
        if std::mem::take(&mut self.cr) && c != '\n' {
            self.partial.clear();
        }
        match c {
            '\u{1b}' => self.escape = Escape::Start,
            '\n' => self.done.push_back(std::mem::take(&mut self.partial)),
            '\r' => self.cr = true,
            '\u{8}' => {
                self.partial.pop();
            }
            '\t' => self.partial.push_str("    "),
            c if c.is_control() => {}
            c => self.partial.push(c),
        }
    }

    /// The last `n` lines (the one being written last, when it has anything).
    pub fn last(&self, n: usize) -> Vec<&str> {
        let partial = (!self.partial.is_empty()).then_some(self.partial.as_str());
        let total = self.done.len() + usize::from(partial.is_some());
        let skip = total.saturating_sub(n);
        self.done
            .iter()
            .map(String::as_str)
            .chain(partial)
            .skip(skip)
            .collect()
    }
}

/// A byte count as `ps` says it (see [`crate::text::bytes`]).
pub use crate::text::bytes as size;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_drop_escapes_and_redraw_after_a_carriage_return() {
        let mut l = Lines::default();
        l.push(b"\x1b[1;32mready\x1b[0m\r\n10%\r50%\r100%\n\x1b]0;title\x07tail");
        l.push(&"é".as_bytes()[..1]);
        l.push(&"é".as_bytes()[1..]);
        assert_eq!(l.last(10), vec!["ready", "100%", "tailé"]);
        assert_eq!(l.last(1), vec!["tailé"]);
    }

    #[test]
    fn sizes_read_as_ps_says_them() {
        assert_eq!(size(512), "512 B");
        assert_eq!(size(3 * 1024 + 400), "3.4 KiB");
        assert_eq!(size(12 << 20), "12 MiB");
    }
}
