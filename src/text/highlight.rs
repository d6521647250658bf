//! Syntax highlighting of fenced code, shared by the TUI and the HTML export: a fence's info
//! string picks a language, and each code line becomes runs of (`Class`, text). Front ends map
//! a class to their own styling (terminal colours, CSS classes); nothing here knows either.
//!
//! The grammars are syntect's bundled Sublime syntaxes run by a pure-Rust regex engine (no C),
//! plus a small TOML highlighter of our own (syntect bundles none). The syntax set is loaded
//! once, on the first fence with a language (never at startup), and shared by every thread.

use std::sync::OnceLock;

use syntect::easy::ScopeRegionIterator;
use syntect::parsing::{ParseState, Scope, ScopeStack, SyntaxReference, SyntaxSet};

mod toml;

/// Lines longer than this many bytes are not highlighted (the regex engine is slow on them);
/// the parser state carries on from the line before.
pub const MAX_LINE_BYTES: usize = 4096;

/// What a run of code is, as far as styling goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Class {
    /// Anything without a class of its own (identifiers, operators, punctuation).
    Plain,
    Keyword,
    /// Type names and built-in types.
    Type,
    /// Function names where defined or called.
    Function,
    String,
    Number,
    /// Named constants, `true`/`false`/`null`, escapes, `self`.
    Constant,
    Comment,
    /// Attributes, annotations, decorators, mapping keys.
    Attribute,
    /// Markup tags (HTML/XML), YAML keys.
    Tag,
    /// Added lines of a diff.
    Inserted,
    /// Removed lines of a diff.
    Deleted,
    /// Diff headers and hunk ranges.
    Meta,
}

impl Class {
    /// The CSS class the HTML export uses for this class (`""` for plain text).
    pub fn css(self) -> &'static str {
        match self {
            Class::Plain => "",
            Class::Keyword => "hl-kw",
            Class::Type => "hl-ty",
            Class::Function => "hl-fn",
            Class::String => "hl-st",
            Class::Number => "hl-nu",
            Class::Constant => "hl-co",
            Class::Comment => "hl-cm",
            Class::Attribute => "hl-at",
            Class::Tag => "hl-tg",
            Class::Inserted => "hl-ins",
            Class::Deleted => "hl-del",
            Class::Meta => "hl-meta",
        }
    }
}

/// One highlighted line: runs of text, adjacent runs of the same class joined.
pub type Runs = Vec<(Class, String)>;

/// A highlighter for one code block, fed its lines in order (it carries multi-line strings and
/// comments from one line to the next). Cloning it forks the state (for a half-streamed line).
#[derive(Debug, Clone)]
pub struct Highlighter {
    engine: Engine,
}

#[derive(Debug, Clone)]
enum Engine {
    Syntect {
        parse: Box<ParseState>,
        stack: ScopeStack,
        /// The parser failed once: the rest of the block is plain.
        broken: bool,
    },
    Toml(toml::State),
}

/// The bundled syntaxes, loaded on first use.
fn syntaxes() -> &'static SyntaxSet {
    static SET: OnceLock<SyntaxSet> = OnceLock::new();
    SET.get_or_init(SyntaxSet::load_defaults_newlines)
}

/// The language named by a fence's info string (its first word, `{.rust}` and `rust,ignore`
/// forms included), lowercased and with common aliases resolved.
fn language(info: &str) -> Option<String> {
    let word = info.split_whitespace().next()?;
    let word = word.trim_start_matches('{').trim_start_matches('.');
    let word = word.split([',', '}', '{']).next()?.to_ascii_lowercase();
    let name = match word.as_str() {
        "" => return None,
        "rs" => "rust",
        "py" | "python3" | "py3" => "python",
        "js" | "jsx" | "mjs" | "cjs" | "ts" | "tsx" | "typescript" | "javascript" => "js",
        "sh" | "shell" | "bash" | "zsh" | "console" | "shellscript" => "bash",
        "yml" => "yaml",
        "patch" | "udiff" => "diff",
        "golang" => "go",
        "h" => "c",
        "c++" | "cc" | "hpp" | "cxx" => "cpp",
        "jsonc" | "json5" => "json",
        other => other,
    };
    Some(name.to_string())
}

fn syntax_for(lang: &str) -> Option<&'static SyntaxReference> {
    let set = syntaxes();
    let found = set
        .find_syntax_by_token(lang)
        .or_else(|| set.find_syntax_by_extension(lang))?;
    (found.name != "Plain Text").then_some(found)
}

impl Highlighter {
    /// A highlighter for the language of a fence's info string, or None for no language or
    /// one without a grammar (such code is shown plain). Loads the syntaxes on first use.
    pub fn for_info(info: &str) -> Option<Highlighter> {
        let lang = language(info)?;
        if lang == "toml" {
            return Some(Highlighter {
                engine: Engine::Toml(toml::State::default()),
            });
        }
        let syntax = syntax_for(&lang)?;
        Some(Highlighter {
            engine: Engine::Syntect {
                parse: Box::new(ParseState::new(syntax)),
                stack: ScopeStack::new(),
                broken: false,
            },
        })
    }

    /// Highlights the next line of the block (without its newline).
    pub fn line(&mut self, line: &str) -> Runs {
        match &mut self.engine {
            Engine::Toml(state) => state.line(line),
            Engine::Syntect {
                parse,
                stack,
                broken,
            } => {
                if *broken || line.len() > MAX_LINE_BYTES {
                    return plain(line);
                }
                match syntect_line(parse, stack, line) {
                    Some(runs) => runs,
                    None => {
                        *broken = true;
                        plain(line)
                    }
                }
            }
        }
    }
}

/// Highlights a whole code block: None when its language has no grammar.
pub fn highlight(info: &str, code: &str) -> Option<Vec<Runs>> {
    let mut h = Highlighter::for_info(info)?;
    Some(code.lines().map(|l| h.line(l)).collect())
}

fn plain(line: &str) -> Runs {
    match line.is_empty() {
        true => Vec::new(),
        false => vec![(Class::Plain, line.to_string())],
    }
}

/// Pushes `text` as `class`, joining it to the last run when that has the same class.
fn push(runs: &mut Runs, class: Class, text: &str) {
    if text.is_empty() {
        return;
    }
    match runs.last_mut() {
        Some((c, t)) if *c == class => t.push_str(text),
        _ => runs.push((class, text.to_string())),
    }
}

fn syntect_line(parse: &mut ParseState, stack: &mut ScopeStack, line: &str) -> Option<Runs> {
    // The bundled grammars expect each line with its newline.
    let with_newline = format!("{line}\n");
    let ops = parse.parse_line(&with_newline, syntaxes()).ok()?;
    let mut runs = Vec::new();
    for (piece, op) in ScopeRegionIterator::new(&ops, &with_newline) {
        // Each op takes effect where its piece starts.
        stack.apply(op).ok()?;
        let piece = piece.strip_suffix('\n').unwrap_or(piece);
        push(&mut runs, classify(stack.as_slice(), piece), piece);
    }
    Some(runs)
}

/// Scope prefixes and the class each gives, checked from the innermost scope outwards; the
/// first scope that matches a rule decides (earlier rules win within one scope).
const RULES: [(&str, Class); 30] = [
    ("comment", Class::Comment),
    ("punctuation.definition.comment", Class::Comment),
    ("string", Class::String),
    ("constant.character.escape", Class::Constant),
    ("constant.numeric", Class::Number),
    ("constant", Class::Constant),
    ("markup.inserted", Class::Inserted),
    ("markup.deleted", Class::Deleted),
    ("meta.diff.range", Class::Meta),
    ("meta.diff.header", Class::Meta),
    ("meta.diff.index", Class::Meta),
    ("entity.name.function", Class::Function),
    ("support.function", Class::Function),
    ("variable.function", Class::Function),
    ("entity.name.tag", Class::Tag),
    ("entity.other.attribute-name", Class::Attribute),
    ("meta.annotation", Class::Attribute),
    ("storage.type.function", Class::Keyword),
    ("storage.type.struct", Class::Keyword),
    ("storage.type.enum", Class::Keyword),
    ("storage.type.trait", Class::Keyword),
    ("storage.type.impl", Class::Keyword),
    ("storage.type.class", Class::Keyword),
    ("storage.type.module", Class::Keyword),
    ("storage.type", Class::Type),
    ("storage", Class::Keyword),
    ("keyword.operator.word", Class::Keyword),
    ("keyword.operator", Class::Plain),
    ("keyword", Class::Keyword),
    ("variable.language", Class::Constant),
];

/// Rules checked after [`RULES`] found nothing in any scope.
const LATE_RULES: [(&str, Class); 3] = [
    ("entity.name", Class::Type),
    ("support.type", Class::Type),
    ("support.class", Class::Type),
];

/// Scopes of mapping keys (JSON's keys are strings too, but read better as keys).
const KEY_SCOPES: [&str; 2] = ["meta.mapping.key", "meta.structure.dictionary.key"];

/// Words some grammars scope as types that read as keywords (Rust's `let` is `storage.type`).
const DECLARATION_WORDS: [&str; 6] = ["let", "var", "const", "mut", "static", "type"];

struct Parsed {
    rules: Vec<(Scope, Class)>,
    late: Vec<(Scope, Class)>,
    keys: Vec<Scope>,
}

/// The parsed rules, built once.
fn parsed() -> &'static Parsed {
    static PARSED: OnceLock<Parsed> = OnceLock::new();
    PARSED.get_or_init(|| {
        let parse = |list: &[(&str, Class)]| {
            list.iter()
                .filter_map(|(s, c)| Scope::new(s).ok().map(|s| (s, *c)))
                .collect()
        };
        Parsed {
            rules: parse(&RULES),
            late: parse(&LATE_RULES),
            keys: KEY_SCOPES
                .iter()
                .filter_map(|s| Scope::new(s).ok())
                .collect(),
        }
    })
}

/// The class of `text` under `stack` (outermost scope first).
fn classify(stack: &[Scope], text: &str) -> Class {
    let p = parsed();
    if stack
        .iter()
        .any(|s| p.keys.iter().any(|k| k.is_prefix_of(*s)))
    {
        return Class::Attribute;
    }
    for list in [&p.rules, &p.late] {
        for scope in stack.iter().rev() {
            if let Some((_, class)) = list.iter().find(|(r, _)| r.is_prefix_of(*scope)) {
                return match class {
                    Class::Type if DECLARATION_WORDS.contains(&text.trim()) => Class::Keyword,
                    other => *other,
                };
            }
        }
    }
    Class::Plain
}

#[cfg(test)]
mod tests;
