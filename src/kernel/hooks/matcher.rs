//! A hook group's `matcher`, with Claude Code's semantics: `*`, empty or absent match
//! everything; a value made only of name characters (letters, digits, `_`, `-`, space, `,`,
//! `|`) is an exact name or a `|`/`,` list of names; anything else is an unanchored regular
//! expression (`Edit.*`, `mcp__github__.*`).

use regex::Regex;

/// What a group's hooks apply to.
#[derive(Debug, Clone)]
pub enum Matcher {
    /// `*`, `""` or no matcher.
    All,
    /// Exact names.
    Names(Vec<String>, String),
    /// An unanchored regular expression.
    Pattern(Regex),
}

impl Matcher {
    /// Reads a matcher; a regular expression that does not compile is an error naming it.
    pub fn parse(text: &str) -> Result<Matcher, String> {
        let trimmed = text.trim();
        if trimmed.is_empty() || trimmed == "*" {
            return Ok(Matcher::All);
        }
        let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | ' ' | ',' | '|');
        if trimmed.chars().all(plain) {
            let names = trimmed
                .split(['|', ','])
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(str::to_string)
                .collect();
            return Ok(Matcher::Names(names, text.to_string()));
        }
        Regex::new(trimmed)
            .map(Matcher::Pattern)
            .map_err(|e| format!("`{trimmed}` is not a valid regular expression ({e})"))
    }

    /// Whether `subject` (a tool name, a start source, …) is matched.
    pub fn matches(&self, subject: &str) -> bool {
        match self {
            Matcher::All => true,
            Matcher::Names(names, _) => names.iter().any(|n| n == subject),
            Matcher::Pattern(re) => re.is_match(subject),
        }
    }

    /// The matcher as written (`*` for all).
    pub fn source(&self) -> &str {
        match self {
            Matcher::All => "*",
            Matcher::Names(_, text) => text,
            Matcher::Pattern(re) => re.as_str(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(text: &str) -> Matcher {
        Matcher::parse(text).unwrap()
    }

    #[test]
    fn empty_and_star_match_everything() {
        for text in ["", "*", "  "] {
            assert!(m(text).matches("Bash"), "{text:?}");
        }
    }

    #[test]
    fn plain_values_are_exact_names_or_lists() {
        assert!(m("Bash").matches("Bash"));
        assert!(!m("Bash").matches("BashOutput"));
        assert!(!m("Bash").matches("bash"));
        let list = m("Edit|Write");
        assert!(list.matches("Edit") && list.matches("Write") && !list.matches("Read"));
        assert!(m("Edit, Write").matches("Write"));
    }

    #[test]
    fn other_values_are_unanchored_regular_expressions() {
        assert!(m("Edit.*").matches("NotebookEdit"));
        assert!(m("mcp__github__.*").matches("mcp__github__create_issue"));
        assert!(!m("mcp__github__.*").matches("mcp__gitlab__x"));
        assert!(m("^Bash$").matches("Bash") && !m("^Bash$").matches("xBash"));
    }

    #[test]
    fn a_broken_expression_is_an_error_naming_it() {
        let err = Matcher::parse("Edit(").unwrap_err();
        assert!(err.contains("`Edit(`"), "{err}");
    }
}
