//! The words of a simple command as bash sees them after quote removal, for deny rules: quotes
//! dropped, backslashes and ANSI-C escapes (`$'\x72m'`) decoded, and every part bash would
//! expand (`$x`, `${x}`, `$(…)`, backticks, `$((…))`, globs, braces) replaced by a wildcard
//! that stands for any text, spaces included (an unquoted expansion may be several words).

use tree_sitter::Node;

/// One character of a word, or a part whose text is not known until bash runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tok {
    Ch(char),
    Any,
}

/// A word: known characters and unknown runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Word(pub Vec<Tok>);

impl Word {
    /// A word of known text.
    pub(crate) fn lit(s: &str) -> Word {
        Word(s.chars().map(Tok::Ch).collect())
    }

    /// The word's text, when no part of it is an expansion.
    pub(crate) fn literal(&self) -> Option<String> {
        self.0
            .iter()
            .map(|t| match t {
                Tok::Ch(c) => Some(*c),
                Tok::Any => None,
            })
            .collect()
    }

    fn push_str(&mut self, s: &str) {
        self.0.extend(s.chars().map(Tok::Ch));
    }

    fn push_any(&mut self) {
        if self.0.last() != Some(&Tok::Any) {
            self.0.push(Tok::Any);
        }
    }
}

/// `words` joined by single spaces.
pub(crate) fn join(words: &[Word]) -> Vec<Tok> {
    let mut out = Vec::new();
    for (i, w) in words.iter().enumerate() {
        if i > 0 {
            out.push(Tok::Ch(' '));
        }
        out.extend_from_slice(&w.0);
    }
    out
}

/// The word a `command_name` or argument node stands for.
pub(crate) fn decode(node: Node, src: &[u8]) -> Word {
    let mut w = Word::default();
    decode_into(node, src, &mut w);
    w
}

fn decode_into(node: Node, src: &[u8], w: &mut Word) {
    let text = node.utf8_text(src).unwrap_or("");
    match node.kind() {
        "command_name" | "concatenation" => parts(node, src, w, 0, unquoted),
        "string" | "translated_string" => parts(node, src, w, 1, double_quoted),
        "string_content" => double_quoted(text, w),
        "raw_string" => w.push_str(strip(text, "'", "'")),
        "ansi_c_string" => ansi_c(strip(text, "$'", "'"), w),
        "word" if text.contains('{') && (text.contains(',') || text.contains("..")) => {
            w.push_any();
        }
        "word" | "number" => unquoted(text, w),
        "simple_expansion"
        | "expansion"
        | "command_substitution"
        | "process_substitution"
        | "arithmetic_expansion"
        | "brace_expression" => w.push_any(),
        _ if text.contains(['$', '`']) => w.push_any(),
        _ => unquoted(text, w),
    }
}

/// A container's children in order, and the text between them (`gap`-decoded); `quote`
/// bytes at each end are delimiters.
fn parts(node: Node, src: &[u8], w: &mut Word, quote: usize, gap: fn(&str, &mut Word)) {
    let end = node.end_byte().saturating_sub(quote);
    let mut pos = node.start_byte() + quote;
    let mut cursor = node.walk();
    for child in node.named_children(&mut cursor) {
        if child.start_byte() > pos {
            gap(slice(src, pos, child.start_byte()), w);
        }
        decode_into(child, src, w);
        pos = child.end_byte();
    }
    if end > pos {
        gap(slice(src, pos, end), w);
    }
}

fn slice(src: &[u8], from: usize, to: usize) -> &str {
    src.get(from..to)
        .and_then(|b| std::str::from_utf8(b).ok())
        .unwrap_or("")
}

fn strip<'a>(text: &'a str, open: &str, close: &str) -> &'a str {
    let inner = text.strip_prefix(open).unwrap_or(text);
    inner.strip_suffix(close).unwrap_or(inner)
}

/// Unquoted text: a backslash keeps the next character; glob characters, `$` and backticks
/// are unknown (a brace expansion is unknown as a whole, above).
fn unquoted(text: &str, w: &mut Word) {
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(n) = chars.next() {
                    w.0.push(Tok::Ch(n));
                }
            }
            '*' | '?' | '[' | '$' | '`' => w.push_any(),
            '"' | '\'' => {}
            _ => w.0.push(Tok::Ch(c)),
        }
    }
}

/// Text inside double quotes: `\` escapes only `$`, `` ` ``, `"`, `\` and a newline.
fn double_quoted(text: &str, w: &mut Word) {
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, chars.peek().copied()) {
            ('\\', Some('\n')) => {
                chars.next();
            }
            ('\\', Some(n @ ('$' | '`' | '"' | '\\'))) => {
                chars.next();
                w.0.push(Tok::Ch(n));
            }
            ('$' | '`', _) => w.push_any(),
            _ => w.0.push(Tok::Ch(c)),
        }
    }
}

/// The body of `$'…'`, decoded as bash does; a NUL ends the word.
fn ansi_c(body: &str, w: &mut Word) {
    let mut chars = body.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            w.0.push(Tok::Ch(c));
            continue;
        }
        let Some(e) = chars.next() else {
            w.0.push(Tok::Ch('\\'));
            break;
        };
        let decoded = match e {
            'a' => Some('\x07'),
            'b' => Some('\x08'),
            'e' | 'E' => Some('\x1b'),
            'f' => Some('\x0c'),
            'n' => Some('\n'),
            'r' => Some('\r'),
            't' => Some('\t'),
            'v' => Some('\x0b'),
            '\\' | '\'' | '"' | '?' => Some(e),
            'c' => chars.next().map(|x| char::from((x as u8) & 0x1f)),
            '0'..='7' => Some(number(e, &mut chars, 8, 2)),
            'x' => Some(number('0', &mut chars, 16, 2)),
            'u' => Some(number('0', &mut chars, 16, 4)),
            'U' => Some(number('0', &mut chars, 16, 8)),
            other => {
                w.0.push(Tok::Ch('\\'));
                Some(other)
            }
        };
        match decoded {
            Some('\0') | None => break,
            Some(ch) => w.0.push(Tok::Ch(ch)),
        }
    }
}

/// A number of up to `more` further digits in `radix` after `first`, as a character.
fn number(
    first: char,
    chars: &mut std::iter::Peekable<std::str::Chars>,
    radix: u32,
    more: usize,
) -> char {
    let mut n = first.to_digit(radix).unwrap_or(0);
    for _ in 0..more {
        match chars.peek().and_then(|c| c.to_digit(radix)) {
            Some(d) => {
                n = n.saturating_mul(radix).saturating_add(d);
                chars.next();
            }
            None => break,
        }
    }
    char::from_u32(n).unwrap_or('\u{fffd}')
}
