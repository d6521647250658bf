//! Splits a `bash` tool call's command into the simple commands it runs, with tree-sitter's bash
//! grammar: lists (`&&`, `||`, `;`, `&`, newlines), pipelines, subshells, groups, control
//! structures, function bodies, and the commands inside `$(…)`, backticks and `<(…)`, at any
//! depth; `bash -c '…'` (and `sh`, `zsh`, `dash`) scripts too. A command the grammar does not
//! accept is `None`: rules can never allow what keel cannot read.

use std::cell::RefCell;

use tree_sitter::{Node, Parser};

use super::inject::{self, Taint};
use super::normalize::{self, Inner};
use super::word::{self, Tok, Word};

/// One simple command as rules see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SimpleCommand {
    /// The command name (unquoted) and its arguments as written, without assignments and
    /// redirections, joined by single spaces.
    pub text: String,
    /// `VAR=value … text` when the command sets variables first (allow rules must match this
    /// unless every assignment is harmless: see `normalize::harmless_assignment`).
    pub assigned: Option<String>,
    /// Each leading assignment as written (`FOO=1`).
    pub assigns: Vec<String>,
    /// What it runs, wrappers and paths taken off, each expansion a wildcard (deny and ask
    /// rules match this too).
    pub normal: Vec<Tok>,
    /// Its name is an expansion, a glob or empty: no allow rule allows it.
    pub unreadable: bool,
}

impl SimpleCommand {
    /// A command keel cannot read at all (`eval "$x"`): it could be anything.
    fn unknown(text: &str) -> SimpleCommand {
        SimpleCommand {
            text: text.to_string(),
            assigned: None,
            assigns: Vec::new(),
            normal: vec![Tok::Any],
            unreadable: true,
        }
    }

    /// A piece of a command that does not parse, for deny and ask rules only.
    /// Its words are split at spaces and normalised as a parsed command's are.
    pub(crate) fn rough(text: String) -> SimpleCommand {
        let words: Vec<Word> = text.split(' ').map(Word::lit).collect();
        let normal = word::join(&normalize::normalize(&words).words);
        SimpleCommand {
            text,
            assigned: None,
            assigns: Vec::new(),
            normal,
            unreadable: true,
        }
    }

    /// A command whose words are all it has (a builtin keyword, `find -exec`'s command).
    fn plain(text: String, words: &[Word]) -> SimpleCommand {
        let normal = normalize::normalize(words);
        SimpleCommand {
            text,
            assigned: None,
            assigns: Vec::new(),
            normal: word::join(&normal.words),
            unreadable: normal.unreadable,
        }
    }
}

/// A command split: its simple commands in source order, and whether it may inject code
/// through an arithmetic context (see [`inject`]).
#[derive(Debug, Clone, Default)]
pub(crate) struct Split {
    pub commands: Vec<SimpleCommand>,
    pub taint: Taint,
}

/// How deep `eval` and `bash -c` scripts nest before the inner one counts as unknown.
const MAX_DEPTH: usize = 3;

thread_local! {
    static PARSER: RefCell<Option<Parser>> = const { RefCell::new(None) };
}

/// The simple commands of `script`, in source order; `None` when it does not parse.
/// A tainted command (see [`inject`]) also runs the substitutions hidden in its quoted values,
/// and, when a value comes from outside, an unknown command: deny rules see them.
pub(crate) fn split(script: &str) -> Option<Split> {
    let mut out = Split::default();
    if !split_into(script, 0, &mut out) {
        return None;
    }
    if out.taint.tainted() {
        for hidden in std::mem::take(&mut out.taint.hidden) {
            run_inner(Inner::Script(hidden), 0, &mut out);
        }
        if out.taint.outside {
            out.commands.push(SimpleCommand::unknown(""));
        }
    }
    Some(out)
}

fn split_into(script: &str, depth: usize, out: &mut Split) -> bool {
    let Some(tree) = parse(script) else {
        return false;
    };
    let root = tree.root_node();
    if root.has_error() {
        return false;
    }
    let src = script.as_bytes();
    let mut stack = vec![root];
    let mut inner = Vec::new();
    while let Some(node) = stack.pop() {
        inject::visit(node, src, &mut out.taint);
        match node.kind() {
            "command" => {
                if let Some((cmd, runs)) = simple(node, src) {
                    out.commands.push(cmd);
                    inner.extend(runs);
                }
            }
            "declaration_command" | "unset_command" | "test_command" => {
                let text = words(node, src);
                let ws: Vec<Word> = text.split(' ').map(Word::lit).collect();
                out.commands.push(SimpleCommand::plain(text, &ws));
            }
            _ => {}
        }
        let mut cursor = node.walk();
        let children: Vec<Node> = node.named_children(&mut cursor).collect();
        stack.extend(children.into_iter().rev());
    }
    for runs in inner {
        run_inner(runs, depth, out);
    }
    true
}

/// Splits what a command runs besides itself into `out`; what cannot be read is unknown.
fn run_inner(runs: Inner, depth: usize, out: &mut Split) {
    match runs {
        Inner::Script(s) if depth < MAX_DEPTH && split_into(&s, depth + 1, out) => {}
        Inner::Script(s) => out.commands.push(SimpleCommand::unknown(&s)),
        Inner::Words(ws) => {
            let text = ws.iter().map(render).collect::<Vec<_>>().join(" ");
            let cmd = SimpleCommand::plain(text, &ws);
            let nested = normalize::normalize(&ws).inner;
            out.commands.push(cmd);
            if let Some(nested) = nested.filter(|_| depth < MAX_DEPTH) {
                run_inner(nested, depth + 1, out);
            }
        }
        Inner::Unknown => out.commands.push(SimpleCommand::unknown("")),
    }
}

/// A word as text, an unknown part as `*`.
fn render(w: &Word) -> String {
    w.0.iter()
        .map(|t| match t {
            Tok::Ch(c) => *c,
            Tok::Any => '*',
        })
        .collect()
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

/// A `command` node as a [`SimpleCommand`], and what it runs besides itself.
fn simple(node: Node, src: &[u8]) -> Option<(SimpleCommand, Option<Inner>)> {
    let mut assigns: Vec<String> = Vec::new();
    let mut parts: Vec<String> = Vec::new();
    let mut decoded: Vec<Word> = Vec::new();
    let mut cursor = node.walk();
    if cursor.goto_first_child() {
        loop {
            let child = cursor.node();
            match cursor.field_name() {
                Some("name") => {
                    let name = word::decode(child, src);
                    parts.push(name.literal().unwrap_or_else(|| unquote(text(child, src))));
                    decoded.push(name);
                }
                Some("argument") => {
                    parts.push(text(child, src).to_string());
                    decoded.push(word::decode(child, src));
                }
                Some(_) => {}
                None if child.kind() == "variable_assignment" => {
                    assigns.push(text(child, src).to_string());
                }
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
    let normal = normalize::normalize(&decoded);
    let cmd = SimpleCommand {
        text,
        assigned,
        assigns,
        normal: word::join(&normal.words),
        unreadable: normal.unreadable,
    };
    Some((cmd, normal.inner))
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
            .commands
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
            ["echo \"in $(curl x | sh) quotes\"", "curl x", "sh", ""],
            "`sh` reading its script from stdin runs an unknown command"
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
        let c = split("FOO=1 npm test > out.txt 2>&1").unwrap().commands;
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
        assert!(split("echo ((").is_none());
        assert!(split("echo 'unterminated").is_none());
        let inner = split("bash -c 'echo (('").unwrap().commands;
        assert!(
            inner[1].unreadable,
            "an inner script that does not parse is unknown"
        );
    }
}
