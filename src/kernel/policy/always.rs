//! The narrowest rules an "always allow" answer stands for (`DESIGN.md` §13), as Claude Code
//! writes them: for a `bash` call one prefix rule per simple command, its command name and,
//! when the next word reads like a subcommand, that word too (`npm test --foo` gives
//! `Bash(npm test:*)`, `ls -la` gives `Bash(ls:*)`); for `edit` and `write` the file itself,
//! relative to the project (`Edit(/src/a.rs)`; `Edit(//abs)` outside it); for `read`, `grep`,
//! `find` and `ls` the path the same way (`Read(/docs)`); for any other tool its name
//! (`mcp__server__tool`). Pure: it never reads or writes files (the host saves the rules).

use std::path::Path;

use serde_json::Value;

use super::{path, shell, Args};

/// The rules that allow calls like this one of `tool`, made in `cwd`, in a project at `root`;
/// deduplicated, in the order of the call. Empty when no narrow rule can stand for it (a
/// command keel cannot read, a word a rule cannot spell).
pub fn always_rules(tool: &str, args: &Value, cwd: &Path, root: &Path) -> Vec<String> {
    let Ok(args) = <Args as serde::Deserialize>::deserialize(args) else {
        return Vec::new();
    };
    let mut out: Vec<String> = Vec::new();
    let mut push = |rule: String| {
        if !out.contains(&rule) {
            out.push(rule);
        }
    };
    match tool {
        "bash" | "exec_command" => {
            let split = args.command.as_deref().and_then(shell::split);
            // A call rules can never allow (see `Rules::check`) gets no rule.
            let split =
                split.filter(|s| !s.taint.tainted() && s.commands.iter().all(|c| !c.unreadable));
            for c in split.map(|s| s.commands).unwrap_or_default() {
                if let Some(prefix) = prefix(&c) {
                    push(format!("Bash({prefix}:*)"));
                }
            }
        }
        "edit" | "write" => {
            if let Some(p) = args.path.as_deref() {
                push(format!("Edit({})", path_spec(cwd, p, root)));
            }
        }
        "read" | "grep" | "find" | "ls" => {
            let p = args.path.as_deref().unwrap_or(".");
            push(format!("Read({})", path_spec(cwd, p, root)));
        }
        name if spellable(name) => push(name.to_string()),
        _ => {}
    }
    out
}

/// A simple command's assignments, name and subcommand word, joined by spaces; `None` when a
/// word would read as a pattern (`*`).
fn prefix(c: &shell::SimpleCommand) -> Option<String> {
    let assigns = c
        .assigned
        .as_deref()
        .and_then(|a| a.strip_suffix(c.text.as_str()))
        .unwrap_or("");
    let mut words = c.text.split(' ');
    let name = words.next().filter(|n| !n.is_empty())?;
    let mut prefix = format!("{assigns}{name}");
    if let Some(sub) = words.next().filter(|w| subcommand(w)) {
        prefix.push(' ');
        prefix.push_str(sub);
    }
    (!prefix.contains('*')).then_some(prefix)
}

/// A word that reads like a subcommand (`test`, `diff`, `run-script`), not an option, a path
/// or a quoted argument.
fn subcommand(word: &str) -> bool {
    word.starts_with(|c: char| c.is_ascii_alphabetic())
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
}

/// The specifier of a path: `/rel` under the project root, `//abs` elsewhere, its glob
/// characters escaped.
fn path_spec(cwd: &Path, p: &str, root: &Path) -> String {
    let abs = path::normalize(cwd, p);
    match abs.strip_prefix(root) {
        Ok(rel) if rel.as_os_str().is_empty() => "/".to_string(),
        Ok(rel) => format!("/{}", globset::escape(&rel.to_string_lossy())),
        Err(_) => format!("/{}", globset::escape(&abs.to_string_lossy())),
    }
}

/// Whether a tool's name can be a rule as it is (no pattern character, nothing odd).
fn spellable(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use serde_json::json;

    use super::super::{Rules, Verdict};
    use super::*;

    const ROOT: &str = "/p";

    fn bash(command: &str) -> Vec<String> {
        always_rules(
            "bash",
            &json!({ "command": command }),
            Path::new("/p/sub"),
            Path::new(ROOT),
        )
    }

    /// Whether `rules`, as allow rules, let the call run.
    fn allowed(rules: &[String], tool: &str, args: &Value) -> bool {
        let allow: Vec<(String, String)> =
            rules.iter().map(|r| (r.clone(), "t".to_string())).collect();
        let (r, warnings) = Rules::build(&[], &[], &allow, Path::new(ROOT), Path::new("/h"));
        assert_eq!(warnings, [], "{rules:?} parse");
        matches!(r.check(tool, args, Path::new("/p/sub")), Verdict::Allow(_))
    }

    #[test]
    fn a_command_gives_its_name_and_subcommand_as_a_prefix_rule() {
        assert_eq!(bash("npm test --foo"), ["Bash(npm test:*)"]);
        assert_eq!(bash("git diff HEAD~1 -- src"), ["Bash(git diff:*)"]);
        assert_eq!(bash("ls -la"), ["Bash(ls:*)"]);
        assert_eq!(bash("touch x"), ["Bash(touch x:*)"]);
        assert_eq!(bash("cargo"), ["Bash(cargo:*)"]);
        assert_eq!(
            bash("cat ./README.md"),
            ["Bash(cat:*)"],
            "a path is no subcommand"
        );
        assert_eq!(
            bash("'rm' \"-rf\" x"),
            ["Bash(rm:*)"],
            "a quoted word is no subcommand"
        );
        assert_eq!(bash("FOO=1 npm test"), ["Bash(FOO=1 npm test:*)"]);
    }

    #[test]
    fn a_compound_command_gives_one_rule_per_simple_command_and_no_broader_one() {
        assert_eq!(
            bash("npm test && git diff --stat | head -5; npm test"),
            ["Bash(npm test:*)", "Bash(git diff:*)", "Bash(head:*)"]
        );
        assert_eq!(
            bash("echo $(whoami)"),
            ["Bash(echo:*)", "Bash(whoami:*)"],
            "a substitution's command is a command"
        );
        assert_eq!(bash("echo (("), Vec::<String>::new(), "unreadable: no rule");
        assert_eq!(
            bash("$x y && echo a"),
            Vec::<String>::new(),
            "a name keel cannot read: no rule"
        );
        assert_eq!(
            bash("x='a[$(id)]'; echo $((x))"),
            Vec::<String>::new(),
            "rules never allow an arithmetic injection: no rule"
        );
        assert_eq!(bash("ls *.rs"), ["Bash(ls:*)"]);
        assert_eq!(
            bash("./run* x"),
            Vec::<String>::new(),
            "a pattern word is no rule"
        );
    }

    #[test]
    fn the_rules_allow_the_call_they_came_from_and_nothing_much_wider() {
        for command in [
            "npm test --foo",
            "git diff --stat | head -5",
            "FOO=1 npm test",
            "touch x && echo $(whoami)",
        ] {
            let args = json!({ "command": command });
            assert!(allowed(&bash(command), "bash", &args), "{command}");
        }
        let rules = bash("npm test");
        assert!(!allowed(&rules, "bash", &json!({"command": "npm publish"})));
        assert!(!allowed(&rules, "bash", &json!({"command": "npm testing"})));
        assert!(!allowed(
            &rules,
            "bash",
            &json!({"command": "npm test && rm -rf x"})
        ));
    }

    #[test]
    fn file_tools_give_the_file_relative_to_the_project() {
        let cwd = Path::new("/p/sub");
        let edit =
            |tool: &str, p: &str| always_rules(tool, &json!({ "path": p }), cwd, Path::new(ROOT));
        assert_eq!(edit("edit", "a.rs"), ["Edit(/sub/a.rs)"]);
        assert_eq!(edit("write", "../src/[x].rs"), ["Edit(/src/[[]x[]].rs)"]);
        assert_eq!(edit("write", "/etc/hosts"), ["Edit(//etc/hosts)"]);
        assert_eq!(edit("read", "../docs"), ["Read(/docs)"]);
        assert_eq!(
            always_rules("ls", &json!({}), cwd, Path::new(ROOT)),
            ["Read(/sub)"]
        );
        for (tool, p) in [
            ("edit", "a.rs"),
            ("write", "../src/[x].rs"),
            ("write", "/etc/hosts"),
        ] {
            let args = json!({ "path": p });
            assert!(allowed(&edit(tool, p), tool, &args), "{tool} {p}");
        }
        assert!(!allowed(
            &edit("edit", "a.rs"),
            "edit",
            &json!({"path": "b.rs"})
        ));
    }

    #[test]
    fn other_tools_give_their_name() {
        let none = json!({});
        let mcp = always_rules("mcp__srv__get", &none, Path::new("/p"), Path::new(ROOT));
        assert_eq!(mcp, ["mcp__srv__get"]);
        assert!(allowed(&mcp, "mcp__srv__get", &none));
        assert!(!allowed(&mcp, "mcp__srv__put", &none));
        assert_eq!(
            always_rules("odd*name", &none, Path::new("/p"), Path::new(ROOT)),
            Vec::<String>::new()
        );
    }
}
