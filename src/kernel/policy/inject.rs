//! Arithmetic and name injection, for allow rules: bash evaluates a variable's value as an
//! expression in `$((…))`, `((…))`, `[[ … -eq … ]]`, `let`, `declare -i`, array subscripts,
//! `${!x}` and `${x@P}`, and an expression like `a[$(cmd)]` runs `cmd`. A compound command is
//! tainted when it both takes in such a value (a source) and evaluates something (a
//! context); allow rules never allow a tainted command. Both sides are over-approximated
//! from the syntax tree: no value is tracked, so a harmless pair is refused too.

use tree_sitter::Node;

use super::word::Tok;

/// What one walk over a command's tree found.
#[derive(Debug, Clone, Default)]
pub(crate) struct Taint {
    /// A value holding `$(`, a backtick, `[` or `$'…'`, or one read from outside (`read`,
    /// `mapfile`, `readarray`, `getopts`, `printf -v`).
    pub source: bool,
    /// A place where bash evaluates a value as an expression or a name.
    pub context: bool,
    /// The `$(…)` and backtick scripts inside quoted values, which an expression would run.
    pub hidden: Vec<String>,
    /// A value read from outside the text (`read`): what it would run is unknown.
    pub outside: bool,
}

impl Taint {
    pub(crate) fn tainted(&self) -> bool {
        self.source && self.context
    }
}

/// Commands whose variables come from outside the script's text.
const READERS: &[&str] = &["read", "mapfile", "readarray", "getopts"];
/// `[[`/`test` operators that evaluate their operands arithmetically, or a name (`-v`).
const ARITH_OPS: &[&str] = &["-eq", "-ne", "-lt", "-le", "-gt", "-ge", "-v"];

/// Notes what `node` (one node of the tree; the caller walks all of them) adds.
pub(crate) fn visit(node: Node, src: &[u8], t: &mut Taint) {
    let text = node.utf8_text(src).unwrap_or("");
    match node.kind() {
        "variable_assignment" => {
            let value = node.child_by_field_name("value");
            t.source |= value.is_some_and(|v| risky(v.utf8_text(src).unwrap_or("")));
            let name = node.child_by_field_name("name");
            t.context |= name.is_some_and(|n| n.kind() == "subscript");
        }
        "word"
        | "string"
        | "raw_string"
        | "ansi_c_string"
        | "concatenation"
        | "translated_string"
        | "command_substitution"
        | "heredoc_body" => {
            let is_name = node.parent().is_some_and(|p| p.kind() == "command_name");
            if !is_name && risky(text) {
                t.source = true;
                t.hidden.extend(substitutions(&decoded(node, src)));
            }
            t.context |= text.contains("$[");
        }
        "expansion" => {
            t.source |= risky(text.get(2..).unwrap_or(""));
            t.context |= text.contains(['!', '@', '[', ':']);
        }
        "arithmetic_expansion" | "c_style_for_statement" => t.context = true,
        "compound_statement" => t.context |= text.starts_with("(("),
        "test_command" => t.context |= has_arith_op(text),
        "declaration_command" => t.context |= declares_expression(text),
        "unset_command" => t.context |= text.contains(['$', '[']),
        "command" => command(node, src, t),
        _ => {}
    }
}

fn command(node: Node, src: &[u8], t: &mut Taint) {
    let Some(name) = node.child_by_field_name("name") else {
        return;
    };
    let name = name.utf8_text(src).unwrap_or("");
    let mut cursor = node.walk();
    let args: Vec<&str> = node
        .children_by_field_name("argument", &mut cursor)
        .map(|a| a.utf8_text(src).unwrap_or(""))
        .collect();
    let printf_v = name == "printf" && args.iter().any(|a| a.starts_with("-v"));
    t.source |= READERS.contains(&name) || printf_v;
    t.outside |= READERS.contains(&name) || printf_v;
    t.context |= name == "let"
        || (matches!(name, "test" | "[") && args.iter().any(|a| ARITH_OPS.contains(a)))
        || ((READERS.contains(&name) || printf_v) && args.iter().any(|a| a.contains('$')));
}

/// `$(` (not `$((`), a backtick, `[` or `$'`: text that may become code in an expression.
fn risky(text: &str) -> bool {
    let substitution = text
        .match_indices("$(")
        .any(|(at, _)| text.as_bytes().get(at + 2) != Some(&b'('));
    substitution || text.contains(['`', '[']) || text.contains("$'")
}

/// A value's text after quote removal, each expansion a space.
fn decoded(node: Node, src: &[u8]) -> String {
    super::word::decode(node, src)
        .0
        .iter()
        .map(|t| match t {
            Tok::Ch(c) => *c,
            Tok::Any => ' ',
        })
        .collect()
}

/// The scripts of the `$(…)` and `` `…` `` in `text`, outermost first.
fn substitutions(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("$(") {
        let body = &rest[at + 2..];
        let mut depth = 1usize;
        let end = body.char_indices().find_map(|(i, c)| {
            depth = match c {
                '(' => depth + 1,
                ')' => depth - 1,
                _ => depth,
            };
            (depth == 0).then_some(i)
        });
        out.push(body[..end.unwrap_or(body.len())].to_string());
        rest = body;
    }
    let ticks: Vec<&str> = text.split('`').collect();
    out.extend(ticks.iter().skip(1).step_by(2).map(|s| s.to_string()));
    out
}

fn has_arith_op(text: &str) -> bool {
    text.split_whitespace().any(|w| ARITH_OPS.contains(&w))
}

/// `declare -i`/`-n` (and `typeset`, `local`, `export`, `readonly`), or a name from an
/// expansion.
fn declares_expression(text: &str) -> bool {
    let flag = text
        .split_whitespace()
        .skip(1)
        .any(|w| w.starts_with('-') && w.contains(['i', 'n']));
    flag || text.split_whitespace().skip(1).any(|w| {
        let name = w.split_once('=').map_or(w, |(n, _)| n);
        name.contains(['$', '`'])
    })
}
