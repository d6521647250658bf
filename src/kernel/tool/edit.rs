//! `edit`: replaces one exact, unique occurrence of a text in a file and reports a unified diff.
//! Owns only that in-place replacement; must never change anything else in the file (line
//! endings included) and never write when the match is missing or ambiguous.

use serde_json::{json, Value};
use similar::{DiffTag, TextDiff};

use super::{str_arg, ToolContext, ToolOutput, ToolSpec};

pub(super) fn spec() -> ToolSpec {
    ToolSpec {
        name: "edit",
        description: "Edit a file by replacing an exact text. oldText must match exactly \
                      (including whitespace) and occur exactly once in the file.",
        parameters: json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Path to the file (relative or absolute)"},
                "oldText": {"type": "string", "description": "Exact text to find (must be unique)"},
                "newText": {"type": "string", "description": "Text to replace it with"}
            },
            "required": ["path", "oldText", "newText"]
        }),
    }
}

pub(super) async fn run(args: &Value, ctx: &ToolContext) -> ToolOutput {
    match edit(args, ctx).await {
        Ok(out) | Err(out) => out,
    }
}

/// Reads `key`, falling back to its snake-case `alias`.
fn aliased<'a>(args: &'a Value, key: &str, alias: &str) -> Result<&'a str, ToolOutput> {
    if args.get(key).is_none() && args.get(alias).is_some() {
        str_arg(args, alias)
    } else {
        str_arg(args, key)
    }
}

async fn edit(args: &Value, ctx: &ToolContext) -> Result<ToolOutput, ToolOutput> {
    let path = str_arg(args, "path")?;
    let old = aliased(args, "oldText", "old_string")?;
    let new = aliased(args, "newText", "new_string")?;
    if old.is_empty() {
        return Err(ToolOutput::error(
            "invalid arguments: `oldText` must not be empty",
        ));
    }
    let full = ctx.resolve(path);
    let bytes = tokio::fs::read(&full).await.map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => ToolOutput::error(format!("File not found: {path}")),
        _ => ToolOutput::error(format!("Cannot read {path}: {e}")),
    })?;
    let content = String::from_utf8(bytes)
        .map_err(|_| ToolOutput::error(format!("Cannot edit {path}: not valid UTF-8 text")))?;
    let (idx, old, new) = locate(&content, path, old, new)?;
    let mut updated = String::with_capacity(content.len() + new.len());
    updated.push_str(&content[..idx]);
    updated.push_str(&new);
    updated.push_str(&content[idx + old.len()..]);
    if updated == content {
        return Err(ToolOutput::error(format!(
            "No changes made to {path}: the replacement is identical to the original text"
        )));
    }
    tokio::fs::write(&full, updated.as_bytes())
        .await
        .map_err(|e| ToolOutput::error(format!("Cannot write {path}: {e}")))?;
    let (diff, first) = unified_diff(&content, &updated, path);
    Ok(
        ToolOutput::ok(format!("Successfully replaced text in {path}.\n\n{diff}")).with_details(
            json!({
                "path": full.display().to_string(),
                "diff": diff,
                "firstChangedLine": first,
            }),
        ),
    )
}

/// Finds the unique occurrence of `old`, returning its byte index and the exact old/new texts
/// used. When the file uses CRLF and the texts use bare LF, they are converted to CRLF so the
/// file's line endings are kept.
fn locate(
    content: &str,
    path: &str,
    old: &str,
    new: &str,
) -> Result<(usize, String, String), ToolOutput> {
    let mut candidates = vec![(old.to_string(), new.to_string())];
    if content.contains("\r\n") && old.contains('\n') && !old.contains('\r') {
        candidates.push((old.replace('\n', "\r\n"), new.replace('\n', "\r\n")));
    }
    for (o, n) in candidates {
        match occurrences(content, &o) {
            (0, _) => continue,
            (1, Some(idx)) => return Ok((idx, o, n)),
            (count, _) => {
                return Err(ToolOutput::error(format!(
                    "Found {count} occurrences of the text in {path}. The text must be unique: \
                     include more surrounding context."
                )))
            }
        }
    }
    Err(ToolOutput::error(format!(
        "Could not find the text in {path}. oldText must match exactly, including all \
         whitespace, indentation and line breaks."
    )))
}

/// Counts (possibly overlapping) occurrences of `needle`; also returns the first index.
fn occurrences(haystack: &str, needle: &str) -> (usize, Option<usize>) {
    let mut count = 0;
    let mut first = None;
    let mut from = 0;
    while let Some(pos) = haystack[from..].find(needle) {
        let at = from + pos;
        first.get_or_insert(at);
        count += 1;
        let step = haystack[at..].chars().next().map_or(1, char::len_utf8);
        from = at + step;
    }
    (count, first)
}

/// A unified diff with 3 lines of context, and the first changed line (1-based) of the new text.
fn unified_diff(old: &str, new: &str, path: &str) -> (String, usize) {
    let diff = TextDiff::from_lines(old, new);
    let first = diff
        .ops()
        .iter()
        .find(|op| op.tag() != DiffTag::Equal)
        .map_or(1, |op| op.new_range().start + 1);
    let text = diff
        .unified_diff()
        .context_radius(3)
        .header(path, path)
        .to_string();
    (text, first)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    use crate::kernel::tool::test_context as ctx;

    #[tokio::test]
    async fn replaces_unique_text_and_reports_diff() {
        let d = tempfile::tempdir().unwrap();
        let body = "a\nb\nc\nd\ne\nf\ng\nh\n";
        std::fs::write(d.path().join("f.txt"), body).unwrap();
        let args = json!({"path": "f.txt", "oldText": "e\n", "newText": "E1\nE2\n"});
        let out = run(&args, &ctx(d.path())).await;
        assert!(!out.is_error, "{}", out.text());
        let now = std::fs::read_to_string(d.path().join("f.txt")).unwrap();
        assert_eq!(now, "a\nb\nc\nd\nE1\nE2\nf\ng\nh\n");
        let det = out.details.clone().unwrap();
        assert_eq!(det["firstChangedLine"], 5);
        let diff = det["diff"].as_str().unwrap();
        assert!(
            diff.starts_with("--- f.txt\n+++ f.txt\n@@ -2,7 +2,8 @@\n"),
            "{diff}"
        );
        assert!(diff.contains("\n-e\n+E1\n+E2\n"));
        assert!(!diff.contains(" a\n"), "context radius is 3");
        assert!(out.text().contains("+E2"));
    }

    #[tokio::test]
    async fn missing_ambiguous_and_empty_old_text_fail_without_writing() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f.txt");
        std::fs::write(&p, "x = 1\nx = 1\n").unwrap();
        let out = run(
            &json!({"path": "f.txt", "oldText": "y", "newText": "z"}),
            &ctx(d.path()),
        )
        .await;
        assert!(out.is_error);
        assert!(out.text().contains("Could not find"));
        assert!(out.text().contains("whitespace"));
        let out = run(
            &json!({"path": "f.txt", "oldText": "x = 1", "newText": "z"}),
            &ctx(d.path()),
        )
        .await;
        assert!(out.is_error);
        assert!(out.text().contains("Found 2 occurrences"));
        let out = run(
            &json!({"path": "f.txt", "oldText": "", "newText": "z"}),
            &ctx(d.path()),
        )
        .await;
        assert!(out.is_error);
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "x = 1\nx = 1\n");
    }

    #[tokio::test]
    async fn accepts_snake_case_aliases_and_keeps_crlf() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("w.txt");
        std::fs::write(&p, "one\r\ntwo\r\nthree\r\n").unwrap();
        let args = json!({"path": "w.txt", "old_string": "one\ntwo", "new_string": "1\n2"});
        let out = run(&args, &ctx(d.path())).await;
        assert!(!out.is_error, "{}", out.text());
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "1\r\n2\r\nthree\r\n");
        assert_eq!(out.details.unwrap()["firstChangedLine"], 1);
    }

    #[test]
    fn overlapping_occurrences_count_as_ambiguous() {
        assert_eq!(occurrences("aaa", "aa"), (2, Some(0)));
        assert_eq!(occurrences("éaé", "é"), (2, Some(0)));
        assert_eq!(occurrences("abc", "x"), (0, None));
    }
}
