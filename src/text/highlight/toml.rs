//! TOML highlighting (syntect bundles no TOML grammar): table headers, keys, strings (with
//! multi-line `"""` / `'''` strings carried across lines), numbers, dates, booleans, comments.

use super::{push, Class, Runs};

/// What carries from one line to the next: an open multi-line string's delimiter.
#[derive(Debug, Clone, Default)]
pub struct State {
    open: Option<&'static str>,
}

impl State {
    pub fn line(&mut self, line: &str) -> Runs {
        let mut runs = Vec::new();
        let mut rest = line;
        if let Some(delim) = self.open {
            match rest.find(delim) {
                Some(end) => {
                    push(&mut runs, Class::String, &rest[..end + delim.len()]);
                    rest = &rest[end + delim.len()..];
                    self.open = None;
                }
                None => {
                    push(&mut runs, Class::String, rest);
                    return runs;
                }
            }
        } else {
            let body = rest.trim_start();
            push(&mut runs, Class::Plain, &rest[..rest.len() - body.len()]);
            rest = body;
            if rest.starts_with('[') {
                let end = rest.find(']').map_or(rest.len(), |i| {
                    i + 1 + usize::from(rest[i + 1..].starts_with(']'))
                });
                push(&mut runs, Class::Type, &rest[..end]);
                rest = &rest[end..];
            } else if let Some(eq) = key_end(rest) {
                push(&mut runs, Class::Attribute, &rest[..eq]);
                rest = &rest[eq..];
            }
        }
        self.values(rest, &mut runs);
        runs
    }

    /// Strings, numbers, booleans and a trailing comment in the rest of a line.
    fn values(&mut self, mut rest: &str, runs: &mut Runs) {
        while let Some(c) = rest.chars().next() {
            let taken = match c {
                '#' => rest.len(),
                '"' | '\'' => self.string(rest, c),
                _ if c.is_ascii_digit() || ((c == '+' || c == '-') && starts_digit(&rest[1..])) => {
                    rest.find(|x: char| !(x.is_ascii_alphanumeric() || "+-._:".contains(x)))
                        .unwrap_or(rest.len())
                }
                _ if word_at(rest, "true") || word_at(rest, "false") => {
                    if rest.starts_with('t') {
                        4
                    } else {
                        5
                    }
                }
                _ => c.len_utf8(),
            };
            let class = match c {
                '#' => Class::Comment,
                '"' | '\'' => Class::String,
                't' | 'f' if taken > 1 => Class::Constant,
                _ if taken > 1 || c.is_ascii_digit() => Class::Number,
                _ => Class::Plain,
            };
            push(runs, class, &rest[..taken]);
            rest = &rest[taken..];
        }
    }

    /// The length of the string starting `rest` (to the line's end when it stays open).
    fn string(&mut self, rest: &str, quote: char) -> usize {
        let triple: &'static str = if quote == '"' { "\"\"\"" } else { "'''" };
        if rest.starts_with(triple) {
            return match rest[3..].find(triple) {
                Some(end) => 3 + end + 3,
                None => {
                    self.open = Some(triple);
                    rest.len()
                }
            };
        }
        let mut escaped = false;
        for (i, ch) in rest.char_indices().skip(1) {
            match ch {
                '\\' if quote == '"' && !escaped => escaped = true,
                _ if ch == quote && !escaped => return i + 1,
                _ => escaped = false,
            }
        }
        rest.len()
    }
}

/// Where the key of a `key = value` line ends (before the `=`), quotes respected.
fn key_end(s: &str) -> Option<usize> {
    let mut quote = None;
    for (i, ch) in s.char_indices() {
        match (quote, ch) {
            (None, '"' | '\'') => quote = Some(ch),
            (Some(q), _) if ch == q => quote = None,
            (None, '=') => return Some(s[..i].trim_end().len()).filter(|n| *n > 0),
            (None, '#') => return None,
            _ => {}
        }
    }
    None
}

fn starts_digit(s: &str) -> bool {
    s.chars().next().is_some_and(|c| c.is_ascii_digit())
}

/// Whether `s` starts with the word `w` (not followed by a letter, digit or `_`).
fn word_at(s: &str, w: &str) -> bool {
    s.starts_with(w)
        && !s[w.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
}
