//! Tool calls in the HTML export, shown as what they do rather than as JSON: a bash command as
//! a highlighted code block, paths as text, `edit` and `write` as coloured diffs (the edit's
//! own diff from its result when there is one, else computed from its arguments), any other
//! argument as a labelled field (multi-line strings as blocks, the rest as compact JSON).

use std::fmt::Write as _;

use serde_json::Value;
use similar::{ChangeTag, TextDiff};

use super::markdown::code_block;
use super::{escape, FOLD_LINES};
use crate::wire::events::{ShownArgs, ToolDetails};

/// Context lines around each change in a diff computed from an edit's arguments.
const DIFF_CONTEXT: usize = 3;

/// Appends the body of a tool call: its arguments, and for `edit`/`write` its diff.
/// `details` are the details of its result, if it has one.
pub fn arguments(out: &mut String, name: &str, args: &Value, details: Option<&Value>) {
    let a = ShownArgs::of(args);
    let Some(map) = args.as_object() else {
        if !args.is_null() {
            field(out, "arguments", args);
        }
        return;
    };
    let shown: &[&str] = match name {
        "bash" => {
            if let Some(command) = &a.command {
                out.push_str(&code_block("bash", command));
            }
            &["command"]
        }
        "edit" => {
            path(out, &a);
            let diff = match details.and_then(|d| ToolDetails::read(name, d)) {
                Some(ToolDetails::Edit(e)) => Some(e.diff),
                _ => None,
            };
            let diff = diff.unwrap_or_else(|| {
                unified(ShownArgs::str(&a.old_text), ShownArgs::str(&a.new_text))
            });
            diff_block(out, &diff);
            &["path", "oldText", "newText", "old_string", "new_string"]
        }
        "write" => {
            path(out, &a);
            diff_block(out, &unified("", ShownArgs::str(&a.content)));
            &["path", "content"]
        }
        _ => &[],
    };
    for (key, value) in map {
        if !shown.contains(&key.as_str()) {
            field(out, key, value);
        }
    }
}

/// Whether a successful result of `name` repeats what [`arguments`] already showed (an
/// edit's diff): then only the result's first paragraph is shown.
pub fn result_repeats_call(name: &str) -> bool {
    name == "edit"
}

fn path(out: &mut String, args: &ShownArgs) {
    if let Some(p) = args.any_path() {
        let _ = write!(
            out,
            "<div class=\"field\"><span class=\"key\">path</span> <span class=\"mono\">{}</span></div>",
            escape(p)
        );
    }
}

/// One labelled argument: a one-line string as text, a multi-line one as a block, anything
/// else as compact JSON.
fn field(out: &mut String, key: &str, value: &Value) {
    let _ = write!(
        out,
        "<div class=\"field\"><span class=\"key\">{}</span> ",
        escape(key)
    );
    match value {
        Value::String(s) if s.contains('\n') => {
            let _ = write!(out, "<pre>{}</pre>", escape(s));
        }
        Value::String(s) => {
            let _ = write!(out, "<span class=\"mono\">{}</span>", escape(s));
        }
        other => {
            let json = serde_json::to_string(other).unwrap_or_default();
            let _ = write!(out, "<span class=\"mono\">{}</span>", escape(&json));
        }
    }
    out.push_str("</div>");
}

/// A unified diff of `old` → `new` (hunks only, no file headers).
fn unified(old: &str, new: &str) -> String {
    let diff = TextDiff::from_lines(old, new);
    let mut text = String::new();
    for group in diff.grouped_ops(DIFF_CONTEXT) {
        let (Some(first), Some(last)) = (group.first(), group.last()) else {
            continue;
        };
        let (o, n) = (first.old_range().start, first.new_range().start);
        let (o_len, n_len) = (last.old_range().end - o, last.new_range().end - n);
        let _ = writeln!(text, "@@ -{},{o_len} +{},{n_len} @@", o + 1, n + 1);
        for op in &group {
            for change in diff.iter_changes(op) {
                let sign = match change.tag() {
                    ChangeTag::Delete => '-',
                    ChangeTag::Insert => '+',
                    ChangeTag::Equal => ' ',
                };
                let line = change.value();
                let _ = writeln!(text, "{sign}{}", line.strip_suffix('\n').unwrap_or(line));
            }
        }
    }
    text
}

/// A unified diff as coloured lines (added, removed, hunk headers, context), without its file
/// headers; folded when long.
fn diff_block(out: &mut String, diff: &str) {
    if diff.trim().is_empty() {
        return;
    }
    let lines = diff.lines().count();
    let folded = lines > FOLD_LINES;
    if folded {
        let _ = write!(out, "<details><summary>{lines} lines of diff</summary>");
    }
    out.push_str("<pre class=\"diff\">");
    let mut in_hunk = false;
    for line in diff.lines() {
        // The `---`/`+++` file headers repeat the path shown above.
        if !in_hunk && (line.starts_with("---") || line.starts_with("+++")) {
            continue;
        }
        in_hunk |= line.starts_with("@@");
        let class = if line.starts_with("@@") {
            "hunk"
        } else if line.starts_with('+') {
            "add"
        } else if line.starts_with('-') {
            "del"
        } else {
            "ctx"
        };
        // Block spans, one a line: no newline between them (it would show as a blank line).
        let _ = write!(out, "<span class=\"{class}\">{}</span>", escape(line));
    }
    out.push_str("</pre>");
    if folded {
        out.push_str("</details>");
    }
}
