//! The command patterns of `Bash(…)` rules: exact (`git status`), wildcard (`git diff *`, where
//! `*` is any run of characters, spaces included) and Claude's legacy prefix form
//! (`npm run test:*`, the same as `npm run test *`). A pattern ending in ` *` also matches the
//! bare command (`ls *` matches `ls` and `ls -la`, not `lsof`). Matching never allocates.

use super::word::Tok;

/// One compiled command pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CommandPattern {
    /// The literal pieces between `*`s.
    parts: Vec<String>,
    /// The pattern ended in ` *`: the pieces without it (the bare command) match too.
    bare: Option<Vec<String>>,
}

impl CommandPattern {
    /// Compiles a `Bash(…)` specifier; `Err` says why it is not one.
    pub(crate) fn parse(spec: &str) -> Result<CommandPattern, String> {
        let spec = spec.trim();
        if spec.is_empty() {
            return Err("an empty command pattern".into());
        }
        let pattern = match spec.find(":*") {
            Some(at) if at + 2 == spec.len() => {
                let head = spec[..at].trim_end();
                if head.is_empty() {
                    return Err("`:*` needs a command before it".into());
                }
                format!("{head} *")
            }
            Some(_) => return Err("`:*` is allowed only at the end".into()),
            None => spec.to_string(),
        };
        let parts = split(&pattern);
        let bare = pattern.strip_suffix(" *").map(split);
        Ok(CommandPattern { parts, bare })
    }

    /// Whether `command` (words separated by single spaces) matches.
    pub(crate) fn matches(&self, command: &str) -> bool {
        glob(&self.parts, command) || self.bare.as_ref().is_some_and(|b| glob(b, command))
    }
}

impl CommandPattern {
    /// Whether some text `command` may stand for matches: each [`Tok::Any`] is any text.
    pub(crate) fn could_match(&self, command: &[Tok]) -> bool {
        overlap(&self.parts, command) || self.bare.as_ref().is_some_and(|b| overlap(b, command))
    }
}

fn split(pattern: &str) -> Vec<String> {
    pattern.split('*').map(str::to_string).collect()
}

/// `parts` joined by `*` matches the whole of `s`. Greedy left to right is exact for `*` alone.
fn glob(parts: &[String], s: &str) -> bool {
    let [first, middle @ .., last] = parts else {
        return parts.first().is_some_and(|p| p == s);
    };
    let Some(mut rest) = s.strip_prefix(first.as_str()) else {
        return false;
    };
    for part in middle {
        match rest.find(part.as_str()) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last.as_str())
}

/// Whether the pattern `parts` (joined by `*`) and `command` match a common text: a table over
/// the pattern's characters (`None` for `*`) and the command's tokens, from the ends back.
fn overlap(parts: &[String], command: &[Tok]) -> bool {
    let mut pattern: Vec<Option<char>> = Vec::new();
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            pattern.push(None);
        }
        pattern.extend(part.chars().map(Some));
    }
    let (p, s) = (pattern.len(), command.len());
    // `next[j]`: pattern[i + 1..] and command[j..] can match; `row[j]`: the same for i.
    let mut next: Vec<bool> = (0..=s)
        .map(|j| command[j..].iter().all(|t| *t == Tok::Any))
        .collect();
    for i in (0..p).rev() {
        let mut row = vec![false; s + 1];
        row[s] = pattern[i].is_none() && next[s];
        for j in (0..s).rev() {
            row[j] = match (pattern[i], command[j]) {
                (None, _) | (_, Tok::Any) => next[j] || row[j + 1],
                (Some(a), Tok::Ch(b)) => a == b && next[j + 1],
            };
        }
        next = row;
    }
    next[0]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(pattern: &str, command: &str) -> bool {
        CommandPattern::parse(pattern).unwrap().matches(command)
    }

    #[test]
    fn exact_prefix_and_wildcard_forms() {
        assert!(m("git status", "git status"));
        assert!(!m("git status", "git status -s"));
        assert!(m("npm run test:*", "npm run test"));
        assert!(m("npm run test:*", "npm run test -- --watch"));
        assert!(!m("npm run test:*", "npm run testing"));
        assert!(m("git diff *", "git diff HEAD~1 -- src"));
        assert!(m("git diff *", "git diff"));
        assert!(!m("git diff *", "git difftool"));
        assert!(m("ls*", "lsof -i"));
        assert!(m("ls *", "ls -la"));
        assert!(!m("ls *", "lsof"));
        assert!(m("git * main", "git push origin main"));
        assert!(!m("git * main", "git push origin main2"));
        assert!(m("*", "anything at all"));
        assert!(m("* --version", "cargo --version"));
    }

    /// `$x` stands for any text: `*` below.
    fn could(pattern: &str, command: &str) -> bool {
        let toks: Vec<Tok> = command
            .chars()
            .map(|c| if c == '*' { Tok::Any } else { Tok::Ch(c) })
            .collect();
        CommandPattern::parse(pattern).unwrap().could_match(&toks)
    }

    #[test]
    fn an_unknown_part_matches_whatever_it_could_be() {
        assert!(could("rm:*", "* -rf /"));
        assert!(could("rm:*", "*"));
        assert!(could("rm -rf:*", "r* -rf x"));
        assert!(could("git push *", "git *"));
        assert!(!could("git status", "* -la"));
        assert!(!could("rm:*", "echo *"));
        assert!(could("git * main", "* main"));
        assert!(!could("git * main", "* main2"));
        assert!(
            could("rm:*", "rm x"),
            "known text matches as `matches` does"
        );
    }

    #[test]
    fn a_prefix_marker_not_at_the_end_is_refused() {
        assert!(CommandPattern::parse("npm:* test").is_err());
        assert!(CommandPattern::parse(":*").is_err());
        assert!(CommandPattern::parse("  ").is_err());
    }
}
