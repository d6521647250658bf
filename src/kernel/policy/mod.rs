//! Permission rules (`DESIGN.md` §13): the `deny`, `ask` and `allow` lists a user writes once,
//! as Claude Code writes them, checked on every tool call in every mode. Lists are checked
//! deny → ask → allow and the first list with a match decides; no match leaves the call to the
//! mode. A `bash` command is split into its simple commands: it is denied (asked) if any of
//! them matches, allowed only if every one does. The kernel seam is `turn::check_permission`;
//! this module never prints and never reads files: lists come in as strings with their origin.

mod always;
mod command;
mod inject;
mod mode;
mod normalize;
mod path;
mod rule;
mod shell;
mod word;

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use rule::{Rule, Spec};

pub use always::always_rules;

/// The three rule lists, parsed.
#[derive(Debug, Clone, Default)]
pub struct Rules {
    deny: Vec<Rule>,
    ask: Vec<Rule>,
    allow: Vec<Rule>,
}

/// The rule that decided, and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matched {
    /// The rule as written (`Bash(rm:*)`).
    pub rule: String,
    /// Where it was read (a settings file's path, a flag).
    pub origin: String,
}

/// What the rules say about one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Refused, whatever the mode.
    Deny(Matched),
    /// Asked, whatever the mode.
    Ask(Matched),
    /// Run without asking (a `read-only` mode still refuses tools that change things).
    Allow(Matched),
    /// No rule matched: the mode decides.
    Unmatched,
}

/// Why a rule was left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WarningKind {
    /// The rule's text is not a rule keel can read.
    Unparsable,
}

/// A rule that was left out, named with its origin (returned, never printed here).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleWarning {
    pub kind: WarningKind,
    pub rule: String,
    pub origin: String,
    /// Why, in a few words.
    pub reason: String,
}

impl fmt::Display for RuleWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "permission rule `{}` (from {}) is ignored: {}",
            self.rule, self.origin, self.reason
        )
    }
}

/// One list as it arrives: `(rule, origin)` pairs.
pub type RuleList = [(String, String)];

impl Rules {
    /// Parses the three lists. `root` anchors `/x` and `./x` paths, `home` anchors `~/x`.
    /// Rules that do not parse are left out and returned as warnings.
    pub fn build(
        deny: &RuleList,
        ask: &RuleList,
        allow: &RuleList,
        root: &Path,
        home: &Path,
    ) -> (Rules, Vec<RuleWarning>) {
        let mut warnings = Vec::new();
        let mut list = |entries: &RuleList, is_deny: bool| -> Vec<Rule> {
            let mut out = Vec::with_capacity(entries.len());
            for (text, origin) in entries {
                match Rule::parse(text, origin, is_deny, root, home) {
                    Ok(rule) => out.push(rule),
                    Err(reason) => warnings.push(RuleWarning {
                        kind: WarningKind::Unparsable,
                        rule: text.clone(),
                        origin: origin.clone(),
                        reason,
                    }),
                }
            }
            out
        };
        let rules = Rules {
            deny: list(deny, true),
            ask: list(ask, false),
            allow: list(allow, false),
        };
        (rules, warnings)
    }

    /// Adds `other`'s rules after these, list by list (a session's "always" answers).
    pub fn extend(&mut self, other: Rules) {
        self.deny.extend(other.deny);
        self.ask.extend(other.ask);
        self.allow.extend(other.allow);
    }

    /// Every rule as `(list, rule, origin)`, deny first, then ask, then allow, each list in
    /// its order (`/permissions`).
    pub fn entries(&self) -> Vec<(&'static str, &str, &str)> {
        let lists = [
            ("deny", &self.deny),
            ("ask", &self.ask),
            ("allow", &self.allow),
        ];
        lists
            .into_iter()
            .flat_map(|(list, rules)| {
                rules
                    .iter()
                    .map(move |r| (list, r.text.as_str(), r.origin.as_str()))
            })
            .collect()
    }

    /// The paths the `Read(…)` deny rules name literally (`Read(./secret.txt)`,
    /// `Read(~/.aws/**)`), absolute and normalised, for the sandbox's unreadable list; a glob
    /// (`Read(**/.env)`, `Read(*.pem)`) cannot be a mount and is left to the rules.
    pub fn read_deny_paths(&self) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = Vec::new();
        for rule in self.deny.iter().filter(|r| r.tools.contains("read")) {
            if let Spec::Path(p) = &rule.spec {
                if let Some(lit) = p.literal().filter(|l| !out.iter().any(|o| o == l)) {
                    out.push(lit.to_path_buf());
                }
            }
        }
        out
    }

    /// The `Read(…)` deny rule that covers reading `path` (absolute, normalised), for walks
    /// (`grep`, `find`, `ls`) to skip what they find under a directory they may read.
    pub fn read_denied(&self, path: &Path) -> Option<Matched> {
        self.deny
            .iter()
            .filter(|r| r.tools.contains("read"))
            .find(|r| match &r.spec {
                Spec::Any => true,
                Spec::Path(p) => p.matches(path),
                Spec::Command(_) => false,
            })
            .map(matched)
    }

    /// No rule at all.
    pub fn is_empty(&self) -> bool {
        self.deny.is_empty() && self.ask.is_empty() && self.allow.is_empty()
    }

    /// What the rules say about a call of `tool` with `args`, made in `cwd`.
    pub fn check(&self, tool: &str, args: &Value, cwd: &Path) -> Verdict {
        if self.is_empty() {
            return Verdict::Unmatched;
        }
        let subject = Subject::of(tool, args, cwd);
        if let Some(r) = any_matches(&self.deny, tool, &subject, true) {
            return Verdict::Deny(r);
        }
        if let Some(r) = any_matches(&self.ask, tool, &subject, true) {
            return Verdict::Ask(r);
        }
        match any_matches(&self.allow, tool, &subject, false) {
            Some(r) => Verdict::Allow(r),
            None => Verdict::Unmatched,
        }
    }
}

/// The typed arguments rules look at.
#[derive(Deserialize)]
struct Args<'a> {
    /// `bash`'s command, or `exec_command`'s (`cmd`: Codex's shape of the same).
    #[serde(borrow, default, alias = "cmd")]
    command: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    path: Option<std::borrow::Cow<'a, str>>,
}

/// What a call is about, as far as specifiers go.
enum Subject<'a> {
    /// A `bash` command, split lazily (only a command rule needs it).
    Command {
        raw: std::borrow::Cow<'a, str>,
        split: std::cell::OnceCell<Option<shell::Split>>,
    },
    /// A file tool's path, absolute and normalised, and where it leads when that differs (a
    /// symlink): deny and ask rules match either, allow rules must match both.
    Path(PathBuf, Option<PathBuf>),
    /// Nothing a specifier can match.
    Opaque,
}

impl<'a> Subject<'a> {
    fn of(tool: &str, args: &'a Value, cwd: &Path) -> Subject<'a> {
        let Ok(args) = Args::deserialize(args) else {
            return Subject::Opaque;
        };
        match tool {
            "bash" | "exec_command" => match args.command {
                Some(raw) => Subject::Command {
                    raw,
                    split: std::cell::OnceCell::new(),
                },
                None => Subject::Opaque,
            },
            "read" | "write" | "edit" => match args.path {
                Some(p) => Subject::path(path::normalize(cwd, &p)),
                None => Subject::Opaque,
            },
            "grep" | "find" | "ls" => {
                Subject::path(path::normalize(cwd, args.path.as_deref().unwrap_or(".")))
            }
            _ => Subject::Opaque,
        }
    }
}

impl Subject<'_> {
    fn path(lexical: PathBuf) -> Subject<'static> {
        let real = std::fs::canonicalize(&lexical)
            .ok()
            .filter(|r| *r != lexical);
        Subject::Path(lexical, real)
    }
}

fn matched(rule: &Rule) -> Matched {
    Matched {
        rule: rule.text.clone(),
        origin: rule.origin.clone(),
    }
}

/// The first rule of `list` that decides the call. For a command, `any` (deny, ask): a rule
/// matching one simple command decides; otherwise (allow) every simple command must be
/// matched, and the rule named is the first command's.
fn any_matches(list: &[Rule], tool: &str, subject: &Subject, any: bool) -> Option<Matched> {
    let mut command_rules = Vec::new();
    for rule in list.iter().filter(|r| r.tools.contains(tool)) {
        match (&rule.spec, subject) {
            (Spec::Any, _) => return Some(matched(rule)),
            (Spec::Path(p), Subject::Path(path, real)) => {
                let target = real.as_ref().map(|r| p.matches(r));
                let hit = match (p.matches(path), target) {
                    (lexical, None) => lexical,
                    (lexical, Some(real)) if any => lexical || real,
                    (lexical, Some(real)) => lexical && real,
                };
                if hit {
                    return Some(matched(rule));
                }
            }
            (Spec::Command(_), Subject::Command { .. }) => command_rules.push(rule),
            _ => {}
        }
    }
    let Subject::Command { raw, split } = subject else {
        return None;
    };
    if command_rules.is_empty() {
        return None;
    }
    match split.get_or_init(|| shell::split(raw)) {
        Some(split) if any => split
            .commands
            .iter()
            .find_map(|c| first_rule(&command_rules, c, true)),
        // A value that may inject code into an arithmetic context: never allowed by rules.
        Some(split) if split.taint.tainted() => None,
        Some(split) => {
            let mut first = None;
            for c in &split.commands {
                let rule = first_rule(&command_rules, c, false)?;
                first.get_or_insert(rule);
            }
            first
        }
        // Unreadable: never allowed; denied (asked) if the raw text or a naive piece of it matches.
        None if any => rough_pieces(raw).find_map(|piece| {
            first_rule(&command_rules, &shell::SimpleCommand::rough(piece), true)
        }),
        None => None,
    }
}

/// The first command rule matching `c`. Deny and ask rules match its words as written, with
/// or without its assignments, and what it runs (wrappers and paths taken off, an expansion
/// standing for any text). Allow rules match its words as written, with its assignments unless
/// each is harmless, and never a command whose name keel cannot read.
fn first_rule(rules: &[&Rule], c: &shell::SimpleCommand, any: bool) -> Option<Matched> {
    let whole = c.assigned.as_deref().unwrap_or(&c.text);
    let bare = c.assigns.iter().all(|a| normalize::harmless_assignment(a));
    if !any && c.unreadable {
        return None;
    }
    rules.iter().find_map(|r| {
        let Spec::Command(p) = &r.spec else {
            return None;
        };
        let hit = p.matches(whole)
            || ((any || bare) && p.matches(&c.text))
            || (any && p.could_match(&c.normal));
        hit.then(|| matched(r))
    })
}

/// The raw text of a command that does not parse, then its pieces between `&&`, `||`, `;`, `|`
/// and newlines, each with its whitespace collapsed.
fn rough_pieces(raw: &str) -> impl Iterator<Item = String> + '_ {
    let collapse = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    std::iter::once(collapse(raw)).chain(
        raw.split(['&', '|', ';', '\n', '(', ')', '`'])
            .map(collapse)
            .filter(|s| !s.is_empty()),
    )
}

#[cfg(test)]
mod tests;
