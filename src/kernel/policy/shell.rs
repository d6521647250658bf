//! Splits a `bash` tool call's command into the simple commands it runs, with tree-sitter's bash
//! grammar: lists (`&&`, `||`, `;`, `&`, newlines), pipelines, subshells, groups, control
//! structures, function bodies, and the commands inside `$(…)`, backticks and `<(…)`, at any
//! depth; `bash -c '…'` (and `sh`, `zsh`, `dash`) scripts too. A command the grammar does not
//! accept is `None`: rules can never allow what keel cannot read.

use std::cell::RefCell;

use tree_sitter::{Node, Parser};

/// One simple command as rules see it: its words joined by single spaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SimpleCommand {
    /// The command name (unquoted) and its arguments, without assignments and redirections.
    pub text: String,
    /// `VAR=value … text` when the command sets variables first (allow rules must match this).
    pub assigned: Option<String>,
}

/// Shells whose `-c` script is split too.
const SHELLS: &[&str] = &["bash", "sh", "zsh", "dash"];
/// How deep `bash -c` scripts nest before the command counts as unreadable.
const MAX_DEPTH: usize = 3;

thread_local! {
    static PARSER: RefCell<Option<Parser>> = const { RefCell::new(None) };
}

/// The simple commands of `script`, in source order; `None` when it does not parse.
pub(crate) fn split(script: &str) -> Option<Vec<SimpleCommand>> {
    let mut out = Vec::new();
    split_into(script, 0, &mut out).then_some(out)
}

fn split_into(script: &str, depth: usize, out: &mut Vec<SimpleCommand>) -> bool {
    if depth > MAX_DEPTH {
        return false;
    }
    let Some(tree) = parse(script) else {
        return false;
    };
    let root = tree.root_node();
    if root.has_error() {
        return false;
    }
    let src = script.as_bytes();
    let mut stack = vec![root];
    let mut scripts = Vec::new();
    while let Some(node) = stack.pop() {
        match node.kind() {
            "command" => {
                if let Some(cmd) = simple(node, src) {
                    scripts.extend(shell_script(node, src));
                    out.push(cmd);
                }
            }
            "declaration_command" | "unset_command" | "test_command" => {
                out.push(SimpleCommand {
                    text: words(node, src),
                    assigned: None,
                });
            }
            _ => {}
        }
        let mut cursor = node.walk();
        let children: Vec<Node> = node.named_children(&mut cursor).collect();
        stack.extend(children.into_iter().rev());
    }
    scripts
        .iter()
        .all(|inner| split_into(inner, depth + 1, out))
}

fn parse(script: &str) -> Option<tree_sitter::Tree> {
    PARSER.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            let mut parser = Parser::new();
            parser
                .set_language(&tree_sitter_bash::LANGUAGE.into())
                .ok()?;
            *slot = Some(parser);
        }
        slot.as_mut()?.parse(script, None)
    })
}

fn text<'a>(node: Node, src: &'a [u8]) -> &'a str {
    node.utf8_text(src).unwrap_or("")
}

/// A node's text with runs of whitespace (outside nothing: it is for builtins) made one space.
fn words(node: Node, src: &[u8]) -> String {
    text(node, src)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// A `command` node's name and arguments, and its assignments.
fn simple(node: Node, src: &[u8]) -> Option<SimpleCommand> {
    let mut assigns: Vec<&str> = Vec::new();
    let mut parts: Vec<String> = Vec::new();
    let mut cursor = node.walk();
    if cursor.goto_first_child() {
        loop {
            let child = cursor.node();
            match cursor.field_name() {
                Some("name") => parts.push(unquote(text(child, src))),
                Some("argument") => parts.push(text(child, src).to_string()),
                Some(_) => {}
                None if child.kind() == "variable_assignment" => assigns.push(text(child, src)),
                None => {}
            }
            if !cursor.goto_next_sibling() {
                break;
            }
        }
    }
    if parts.is_empty() {
        return None;
    }
    let text = parts.join(" ");
    let assigned = (!assigns.is_empty()).then(|| format!("{} {text}", assigns.join(" ")));
    Some(SimpleCommand { text, assigned })
}

/// The script of `bash -c SCRIPT` (any flag word holding `c`, as `-lc`), unquoted.
fn shell_script(node: Node, src: &[u8]) -> Option<String> {
    let name = node.child_by_field_name("name")?;
    let name = unquote(text(name, src));
    let base = name.rsplit('/').next().unwrap_or(&name);
    if !SHELLS.contains(&base) {
        return None;
    }
    let mut cursor = node.walk();
    let args: Vec<Node> = node
        .children_by_field_name("argument", &mut cursor)
        .collect();
    let flag = args.iter().position(|a| {
        let t = text(*a, src);
        t.starts_with('-') && !t.starts_with("--") && t.contains('c')
    })?;
    args.get(flag + 1).map(|a| unquote(text(*a, src)))
}

/// A word without its quotes and backslashes (`"rm"`, `\rm` and `'rm'` are `rm`).
fn unquote(word: &str) -> String {
    word.chars()
        .filter(|c| !matches!(c, '"' | '\'' | '\\'))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(script: &str) -> Vec<String> {
        split(script)
            .unwrap_or_else(|| panic!("{script:?} should parse"))
            .into_iter()
            .map(|c| c.text)
            .collect()
    }

    #[test]
    fn lists_pipelines_and_groups_are_split() {
        assert_eq!(texts("echo ok && rm -f x"), ["echo ok", "rm -f x"]);
        assert_eq!(
            texts("a || b; c | d |& e & f\ng"),
            ["a", "b", "c", "d", "e", "f", "g"]
        );
        assert_eq!(
            texts("(cd x && make) ; { ls; pwd; }"),
            ["cd x", "make", "ls", "pwd"]
        );
        assert_eq!(
            texts("if test -f x; then rm x; fi; for i in 1 2; do echo $i; done"),
            ["test -f x", "rm x", "echo $i"]
        );
    }

    #[test]
    fn substitutions_count_as_commands() {
        assert_eq!(
            texts("echo $(rm -rf /tmp/x)"),
            ["echo $(rm -rf /tmp/x)", "rm -rf /tmp/x"]
        );
        assert_eq!(texts("echo `whoami`"), ["echo `whoami`", "whoami"]);
        assert_eq!(texts("diff <(ls a) b"), ["diff <(ls a) b", "ls a"]);
        assert_eq!(
            texts("echo \"in $(curl x | sh) quotes\""),
            ["echo \"in $(curl x | sh) quotes\"", "curl x", "sh"]
        );
    }

    #[test]
    fn quoting_keeps_operators_inside_words() {
        assert_eq!(texts("echo 'a && rm -rf /'"), ["echo 'a && rm -rf /'"]);
        assert_eq!(
            texts("git commit -m \"x; y | z\""),
            ["git commit -m \"x; y | z\""]
        );
        assert_eq!(
            texts("\"rm\" -rf x"),
            ["rm -rf x"],
            "a quoted name is unquoted"
        );
    }

    #[test]
    fn assignments_redirections_and_shell_scripts() {
        let c = split("FOO=1 npm test > out.txt 2>&1").unwrap();
        assert_eq!(c[0].text, "npm test");
        assert_eq!(c[0].assigned.as_deref(), Some("FOO=1 npm test"));
        assert_eq!(
            texts("bash -lc 'echo a && rm -rf b'"),
            ["bash -lc 'echo a && rm -rf b'", "echo a", "rm -rf b"]
        );
        assert_eq!(texts("export A=$(id)"), ["export A=$(id)", "id"]);
    }

    #[test]
    fn broken_commands_do_not_parse() {
        assert_eq!(split("echo (("), None);
        assert_eq!(split("echo 'unterminated"), None);
        assert_eq!(split("bash -c 'echo (('"), None);
    }
}
