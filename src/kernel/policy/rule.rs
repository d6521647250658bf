//! One permission rule as Claude Code writes it, `Tool` or `Tool(specifier)`, parsed once into
//! the tools it names and what it says about their calls. Claude's tool names map onto keel's
//! (`Bash` = `bash`, `Edit` = `edit` + `write`, `Read` = `read` + `grep` + `find` + `ls`),
//! keel's own names name one tool, `mcp__server`, `mcp__server__*` and `mcp__server__tool`
//! name MCP tools, and any other name is an external tool's exact name.

use std::path::Path;

use super::command::CommandPattern;
use super::path::PathPattern;

/// Which tools a rule names.
#[derive(Debug, Clone)]
pub(crate) enum Tools {
    /// A fixed set of built-in tools.
    Set(&'static [&'static str]),
    /// Exactly this name (an external tool's).
    Exact(String),
    /// Every tool whose name starts with this (`mcp__server__`).
    Prefix(String),
    /// Names matching a `*` pattern (`mcp__server__get_*`).
    Wild(CommandPattern),
}

impl Tools {
    pub(crate) fn contains(&self, name: &str) -> bool {
        match self {
            Tools::Set(set) => set.contains(&name),
            Tools::Exact(n) => n == name,
            Tools::Prefix(p) => name.starts_with(p.as_str()),
            Tools::Wild(w) => w.matches(name),
        }
    }
}

/// What a rule says about the calls of the tools it names.
#[derive(Debug, Clone)]
pub(crate) enum Spec {
    /// Every call (`Tool`, `Tool(*)`).
    Any,
    /// `bash` calls whose simple commands match.
    Command(CommandPattern),
    /// File-tool calls whose path matches.
    Path(PathPattern),
}

/// A parsed rule, with its text and where it came from.
#[derive(Debug, Clone)]
pub(crate) struct Rule {
    pub text: String,
    pub origin: String,
    pub tools: Tools,
    pub spec: Spec,
}

const READ_FAMILY: &[&str] = &["read", "grep", "find", "ls"];
/// A `Read` deny also stops writes to the path (as in Claude Code).
const READ_FAMILY_AND_WRITES: &[&str] = &["read", "grep", "find", "ls", "edit", "write"];

/// What a tool name's specifier is: a command, a path, or nothing keel can read.
#[derive(Clone, Copy, PartialEq, Eq)]
enum SpecKind {
    Command,
    Path,
    None,
}

/// The tools a name covers and how its specifier reads. `deny` widens `Read` to writes.
fn tools_of(name: &str, deny: bool) -> Result<(Tools, SpecKind), String> {
    let set = |s: &'static [&'static str], k| Ok((Tools::Set(s), k));
    match name {
        // `exec_command` is Codex's shape of `bash`: the same rules hold it.
        "Bash" | "bash" => set(&["bash", "exec_command"], SpecKind::Command),
        "Edit" | "MultiEdit" => set(&["edit", "write"], SpecKind::Path),
        "Write" | "write" => set(&["write"], SpecKind::Path),
        "edit" => set(&["edit"], SpecKind::Path),
        "Read" if deny => set(READ_FAMILY_AND_WRITES, SpecKind::Path),
        "Read" => set(READ_FAMILY, SpecKind::Path),
        "read" => set(&["read"], SpecKind::Path),
        "Grep" | "grep" => set(&["grep"], SpecKind::Path),
        "Glob" | "find" => set(&["find"], SpecKind::Path),
        "LS" | "ls" => set(&["ls"], SpecKind::Path),
        _ => mcp_or_exact(name),
    }
}

fn mcp_or_exact(name: &str) -> Result<(Tools, SpecKind), String> {
    let valid = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '*' | '.');
    if name.is_empty() || !name.chars().all(valid) {
        return Err(format!("`{name}` is not a tool name"));
    }
    if let Some(rest) = name.strip_prefix("mcp__") {
        let server_only = !rest.is_empty() && !rest.contains("__") && !rest.contains('*');
        if server_only {
            return Ok((Tools::Prefix(format!("{name}__")), SpecKind::None));
        }
        if let Some(server) = name.strip_suffix("__*") {
            if !server.contains('*') {
                return Ok((Tools::Prefix(format!("{server}__")), SpecKind::None));
            }
        }
    }
    if name.contains('*') {
        return Ok((Tools::Wild(CommandPattern::parse(name)?), SpecKind::None));
    }
    Ok((Tools::Exact(name.to_string()), SpecKind::None))
}

impl Rule {
    /// Parses `text` for the list `deny` or another; `Err` says why it is no rule.
    pub(crate) fn parse(
        text: &str,
        origin: &str,
        deny: bool,
        root: &Path,
        home: &Path,
    ) -> Result<Rule, String> {
        let trimmed = text.trim();
        let (name, inner) = match trimmed.find('(') {
            None => (trimmed, None),
            Some(open) => {
                let Some(inner) = trimmed[open + 1..].strip_suffix(')') else {
                    return Err("a specifier must end with `)`".into());
                };
                (&trimmed[..open], Some(inner))
            }
        };
        let (tools, kind) = tools_of(name, deny)?;
        let spec = match inner.map(str::trim) {
            None | Some("*") => Spec::Any,
            Some("") => return Err("an empty specifier (write the tool's name alone)".into()),
            Some(s) => match kind {
                SpecKind::Command => Spec::Command(CommandPattern::parse(s)?),
                SpecKind::Path => Spec::Path(PathPattern::parse(s, root, home)?),
                SpecKind::None => {
                    return Err(format!("keel cannot read a specifier for `{name}`"));
                }
            },
        };
        Ok(Rule {
            text: text.to_string(),
            origin: origin.to_string(),
            tools,
            spec,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Rule, String> {
        Rule::parse(text, "test", false, Path::new("/p"), Path::new("/h"))
    }

    fn names(text: &str, deny: bool) -> Vec<&'static str> {
        let r = Rule::parse(text, "t", deny, Path::new("/p"), Path::new("/h")).unwrap();
        [
            "read",
            "write",
            "edit",
            "bash",
            "exec_command",
            "grep",
            "find",
            "ls",
            "mcp__s__x",
            "mcp__s2__x",
        ]
        .into_iter()
        .filter(|n| r.tools.contains(n))
        .collect()
    }

    #[test]
    fn claude_and_keel_names_cover_the_right_tools() {
        assert_eq!(names("Bash", false), ["bash", "exec_command"]);
        assert_eq!(names("bash", false), ["bash", "exec_command"]);
        assert_eq!(names("Edit", false), ["write", "edit"]);
        assert_eq!(names("Write", false), ["write"]);
        assert_eq!(names("Read", false), ["read", "grep", "find", "ls"]);
        assert_eq!(
            names("Read", true),
            ["read", "write", "edit", "grep", "find", "ls"]
        );
        assert_eq!(names("read", true), ["read"]);
        assert_eq!(names("Glob", false), ["find"]);
        assert_eq!(names("mcp__s", false), ["mcp__s__x"]);
        assert_eq!(names("mcp__s__*", false), ["mcp__s__x"]);
        assert_eq!(names("mcp__s__x", false), ["mcp__s__x"]);
        assert_eq!(names("mcp__*", false), ["mcp__s__x", "mcp__s2__x"]);
    }

    #[test]
    fn malformed_rules_say_why() {
        for (bad, why) in [
            ("Bash(ls", "must end with `)`"),
            ("Bash()", "empty specifier"),
            ("Bash(npm:* x)", "only at the end"),
            ("Read(./a[)", "not a path pattern"),
            ("WebFetch(domain:x.com)", "cannot read a specifier"),
            ("Bad Name", "not a tool name"),
            ("", "not a tool name"),
        ] {
            let err = parse(bad).err().unwrap_or_else(|| panic!("{bad:?} parsed"));
            assert!(err.contains(why), "{bad:?}: {err}");
        }
        assert!(parse("Bash(*)").is_ok_and(|r| matches!(r.spec, Spec::Any)));
        assert!(
            parse("WebFetch").is_ok(),
            "an unknown tool is an exact name"
        );
    }
}
