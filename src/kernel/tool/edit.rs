//! `edit`: replaces one exact, unique occurrence of a text in a file and reports a unified diff.
//! Owns only that in-place replacement; must never change anything else in the file (line
//! endings included), never write when the match is missing or ambiguous, and never load more
//! than `MAX_EDIT_BYTES` or open anything but a regular file.

use std::borrow::Cow;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{json, Value};
use similar::{DiffTag, TextDiff};

use super::args::Field;
use super::details::EditDetails;
use super::file::open_regular;
use super::text::format_size;
use super::{Files, ToolContext, ToolOutput, ToolSpec};
use crate::kernel::abort::AbortSignal;
use crate::kernel::sandbox::SandboxPolicy;

/// The largest file `edit` loads (it holds the file, the edited copy and a diff in memory).
pub(super) const MAX_EDIT_BYTES: u64 = 10 * 1024 * 1024;

pub(super) fn spec() -> ToolSpec {
    ToolSpec {
        name: Cow::Borrowed("edit"),
        description: Cow::Borrowed(
            "Edit a file by replacing an exact text. oldText must match exactly \
                      (including whitespace) and occur exactly once in the file.",
        ),
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

/// `edit`'s arguments, read once; each is checked where it is used (also by the preview).
/// `old_string`/`new_string` are the snake-case aliases of `oldText`/`newText`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct EditArgs {
    path: Field<String>,
    #[serde(rename = "oldText")]
    old_text: Field<String>,
    #[serde(rename = "newText")]
    new_text: Field<String>,
    old_string: Field<String>,
    new_string: Field<String>,
}

pub(super) async fn run(args: &Value, ctx: &ToolContext) -> ToolOutput {
    match edit(super::args::read(args), ctx).await {
        Ok(out) | Err(out) => out,
    }
}

/// Reads `key`, falling back to its snake-case `alias` when only that was sent.
fn aliased(
    (key, value): (&str, Field<String>),
    (alias, fallback): (&str, Field<String>),
) -> Result<String, ToolOutput> {
    if value.is_absent() && !fallback.is_absent() {
        fallback.required(alias)
    } else {
        value.required(key)
    }
}

async fn edit(args: EditArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolOutput> {
    let path = args.path.clone().required("path")?;
    super::guard::write(ctx, &ctx.resolve(&path), &path)?;
    let policy = &ctx.sandbox.policy;
    let p = plan(args, &ctx.cwd, &ctx.files, policy, &ctx.abort).await?;
    let path = p.path.as_str();
    ctx.files
        .write(&p.full, p.updated.clone(), false, policy, &ctx.abort)
        .await
        .map_err(|e| ToolOutput::error(format!("Cannot write {path}: {e}")))?;
    let (diff, first) = unified_diff(&p.content, &p.updated, path);
    Ok(
        ToolOutput::ok(format!("Successfully replaced text in {path}.\n\n{diff}"))
            .with_details(json!(EditDetails {
                path: p.full.display().to_string(),
                diff,
                first_changed_line: first,
                lsp: None,
            }))
            .with_before(Some(p.content)),
    )
}

/// What an edit would do to the file as it is now: the file, its text and the text after
/// the replacement (nothing is written).
pub(super) struct Plan {
    /// The path as the call names it.
    pub path: String,
    pub full: PathBuf,
    pub content: String,
    pub updated: String,
}

/// Reads the file `args` names and applies the replacement in memory: what [`run`] writes
/// and what an approval previews ([`super::preview`]), or the error the call would get.
pub(super) async fn plan(
    args: EditArgs,
    cwd: &Path,
    files: &Files,
    policy: &SandboxPolicy,
    abort: &AbortSignal,
) -> Result<Plan, ToolOutput> {
    let path = args.path.required("path")?;
    let path = path.as_str();
    let old = aliased(("oldText", args.old_text), ("old_string", args.old_string))?;
    let new = aliased(("newText", args.new_text), ("new_string", args.new_string))?;
    let (old, new) = (old.as_str(), new.as_str());
    if old.is_empty() {
        return Err(ToolOutput::error(
            "invalid arguments: `oldText` must not be empty",
        ));
    }
    let full = super::resolve_path(cwd, path);
    // Through the client that holds the files (an editor's buffers), or from the disk.
    let bytes = match files.read(&full, abort).await {
        Some(text) => {
            let text = text.map_err(|e| ToolOutput::error(format!("Cannot edit {path}: {e}")))?;
            if text.len() as u64 > MAX_EDIT_BYTES {
                return Err(too_big(path, text.len() as u64));
            }
            text.into_bytes()
        }
        None => {
            let (full, shown, policy) = (full.clone(), path.to_string(), policy.clone());
            tokio::task::spawn_blocking(move || load(&full, &shown, &policy))
                .await
                .map_err(|e| ToolOutput::error(format!("edit failed: {e}")))??
        }
    };
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
    Ok(Plan {
        path: path.to_string(),
        full,
        content,
        updated,
    })
}

/// Reads the whole file (blocking) if it is a regular file of at most `MAX_EDIT_BYTES` that
/// `policy` lets it read.
pub(super) fn load(full: &Path, path: &str, policy: &SandboxPolicy) -> Result<Vec<u8>, ToolOutput> {
    let too_big = |size: u64| too_big(path, size);
    let (file, meta) = open_regular(full, path, "edit", policy)?;
    if meta.len() > MAX_EDIT_BYTES {
        return Err(too_big(meta.len()));
    }
    // The size may be wrong (a file that grows, /proc): never take more than the cap.
    let mut bytes = Vec::new();
    file.take(MAX_EDIT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| ToolOutput::error(format!("Cannot read {path}: {e}")))?;
    if bytes.len() as u64 > MAX_EDIT_BYTES {
        return Err(too_big(bytes.len() as u64));
    }
    Ok(bytes)
}

/// The refusal of a file larger than `MAX_EDIT_BYTES`.
pub(super) fn too_big(path: &str, size: u64) -> ToolOutput {
    ToolOutput::error(format!(
        "Cannot edit {path}: the file is {}, and edit handles files up to {}. Use bash \
         (e.g. sed) or write for larger files.",
        format_size(usize::try_from(size).unwrap_or(usize::MAX)),
        format_size(MAX_EDIT_BYTES as usize)
    ))
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
pub(super) fn unified_diff(old: &str, new: &str, path: &str) -> (String, usize) {
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

    /// A FIFO used to block `edit` forever; a 300 MB file used to be loaded whole.
    #[tokio::test]
    async fn fifo_and_oversized_files_are_refused() {
        let d = tempfile::tempdir().unwrap();
        nix::unistd::mkfifo(&d.path().join("pipe"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        let args = json!({"path": "pipe", "oldText": "a", "newText": "b"});
        let c = ctx(d.path());
        let out = tokio::time::timeout(std::time::Duration::from_secs(10), run(&args, &c))
            .await
            .expect("edit of a FIFO blocked");
        assert!(out.is_error);
        assert_eq!(
            out.text(),
            "Cannot edit pipe: it is a FIFO (named pipe), not a regular file"
        );

        let p = d.path().join("huge.txt");
        std::fs::write(&p, "needle\n").unwrap();
        let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
        f.set_len(300 * 1024 * 1024).unwrap();
        drop(f);
        let args = json!({"path": "huge.txt", "oldText": "needle", "newText": "pin"});
        let out = run(&args, &ctx(d.path())).await;
        assert!(out.is_error);
        assert_eq!(
            out.text(),
            "Cannot edit huge.txt: the file is 300.0MB, and edit handles files up to 10.0MB. \
             Use bash (e.g. sed) or write for larger files."
        );
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 300 * 1024 * 1024);

        // At the cap exactly, the edit works.
        let mut body = b"needle\n".to_vec();
        let cap = MAX_EDIT_BYTES as usize;
        while body.len() < cap {
            let n = (cap - body.len()).min(100);
            body.extend(std::iter::repeat_n(b'x', n - 1));
            body.push(b'\n');
        }
        assert_eq!(body.len(), cap);
        std::fs::write(&p, &body).unwrap();
        let out = run(&args, &ctx(d.path())).await;
        assert!(!out.is_error, "{}", out.text());
    }
}
