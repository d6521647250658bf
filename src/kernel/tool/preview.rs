//! What a file-changing call (`edit`, `write`) would do, computed against the file as it is
//! now, for an approval dialog: exactly the unified diff the tool applies (the edit tool's own
//! diff, 3 lines of context, hunk headers with line numbers) and whether a write overwrites a
//! file or creates one. Reads only; must never write or create anything.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{args, edit, write::WriteArgs, Files, ToolOutput};
use crate::kernel::abort::AbortSignal;
use crate::kernel::sandbox::SandboxPolicy;

/// The largest diff a preview carries (it travels in one event line to every client); a
/// larger change is previewed by its kind and size only.
pub const MAX_PREVIEW_BYTES: usize = 1 << 20;

/// What a call would change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// `edit`: one replacement in an existing file.
    Edit,
    /// `write` over a file that exists: its whole content is replaced.
    Overwrite,
    /// `write` of a file that does not exist yet.
    Create,
}

/// The preview of a file-changing call (`extension_ui_request`'s `preview`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Preview {
    pub change: Change,
    /// The path as the call names it.
    pub path: String,
    /// The unified diff the call would apply (for a new file: every line added).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    /// Why the call would fail as the file is now (an edit whose text is not found); the
    /// tool's own message, and no diff.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The preview of call `name(args)` in `cwd`; `None` for a tool that changes no file (or
/// arguments without a path).
pub async fn preview(
    name: &str,
    args: &Value,
    cwd: &Path,
    files: &Files,
    policy: &SandboxPolicy,
    abort: &AbortSignal,
) -> Option<Preview> {
    let WriteArgs { path, .. } = args::read(args);
    let path = path.required("path").ok()?;
    let mut p = of(name, args, (cwd, files, policy), abort, path).await?;
    if let Some(diff) = p.diff.take_if(|d| d.len() > MAX_PREVIEW_BYTES) {
        p.error = Some(format!(
            "the diff is too large to show ({} bytes)",
            diff.len()
        ));
    }
    Some(p)
}

/// Where a preview reads: the cwd, the files and the policy a read is judged by.
type Place<'a> = (&'a Path, &'a Files, &'a SandboxPolicy);

async fn of(
    name: &str,
    args: &Value,
    place: Place<'_>,
    abort: &AbortSignal,
    path: String,
) -> Option<Preview> {
    let (cwd, files, policy) = place;
    match name {
        "edit" => Some(
            match edit::plan(args::read(args), cwd, files, policy, abort).await {
                Ok(p) => Preview {
                    change: Change::Edit,
                    diff: Some(edit::unified_diff(&p.content, &p.updated, &p.path).0),
                    path,
                    error: None,
                },
                Err(e) => failed(Change::Edit, path, &e),
            },
        ),
        "write" => Some(write(args, place, abort, path).await),
        _ => None,
    }
}

async fn write(args: &Value, place: Place<'_>, abort: &AbortSignal, path: String) -> Preview {
    let (cwd, files, policy) = place;
    let WriteArgs { content, .. } = args::read(args);
    let content = match content.required("content") {
        Ok(c) => c,
        Err(e) => return failed(Change::Create, path, &e),
    };
    let full = super::resolve_path(cwd, &path);
    let exists = tokio::fs::symlink_metadata(&full).await.is_ok();
    let read = match files.read(&full, abort).await {
        // A client that holds the files may know a file the disk has not (yet).
        Some(Ok(text)) => Ok(text),
        Some(Err(_)) | None if !exists => Ok(String::new()),
        Some(Err(e)) => Err(ToolOutput::error(format!("Cannot read {path}: {e}"))),
        None => {
            let (full, shown, policy) = (full.clone(), path.clone(), policy.clone());
            match tokio::task::spawn_blocking(move || edit::load(&full, &shown, &policy)).await {
                Ok(Ok(bytes)) => String::from_utf8(bytes)
                    .map_err(|_| ToolOutput::error(format!("{path} is not UTF-8 text"))),
                Ok(Err(e)) => Err(e),
                Err(e) => Err(ToolOutput::error(format!("Cannot read {path}: {e}"))),
            }
        }
    };
    let change = if exists {
        Change::Overwrite
    } else {
        Change::Create
    };
    match read {
        Ok(old) => Preview {
            change,
            diff: Some(edit::unified_diff(&old, &content, &path).0),
            path,
            error: None,
        },
        Err(e) => failed(change, path, &e),
    }
}

fn failed(change: Change, path: String, e: &ToolOutput) -> Preview {
    Preview {
        change,
        path,
        diff: None,
        error: Some(e.text()),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    use crate::kernel::tool::{execute, test_context as ctx};

    /// The approval preview of an edit used to diff only oldText against newText (`@@ -1 +1
    /// @@`, no context): it is now exactly the diff the edit reports once it ran.
    /// The preview of a call in the context `c`.
    async fn show(name: &str, args: &Value, c: &crate::kernel::tool::ToolContext) -> Preview {
        let policy = &c.sandbox.policy;
        preview(name, args, &c.cwd, &c.files, policy, &c.abort)
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn an_edit_preview_is_the_diff_the_edit_then_reports() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("f.txt"), "a\nb\nc\nd\ne\nf\ng\nh\n").unwrap();
        let args = json!({"path": "f.txt", "oldText": "e\n", "newText": "E1\nE2\n"});
        let c = ctx(d.path());
        let p = show("edit", &args, &c).await;
        assert_eq!(p.change, Change::Edit);
        let shown = p.diff.unwrap();
        assert!(
            shown.contains("@@ -2,7 +2,8 @@\n b\n c\n d\n-e\n"),
            "{shown}"
        );
        let out = execute("edit", &args, &c).await;
        assert_eq!(out.details.unwrap()["diff"].as_str(), Some(shown.as_str()));
    }

    #[tokio::test]
    async fn a_write_preview_says_whether_it_overwrites_or_creates() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("old.txt"), "one\ntwo\nthree\n").unwrap();
        let c = ctx(d.path());
        let over = json!({"path": "old.txt", "content": "one\n2\nthree\n"});
        let p = show("write", &over, &c).await;
        assert_eq!(p.change, Change::Overwrite);
        assert!(
            p.diff
                .unwrap()
                .contains("@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n"),
            "the diff against the file as it is now"
        );
        let new = json!({"path": "new.txt", "content": "x\ny\n"});
        let p = show("write", &new, &c).await;
        assert_eq!(p.change, Change::Create);
        assert!(p.diff.unwrap().contains("@@ -0,0 +1,2 @@\n+x\n+y\n"));
        assert!(
            !d.path().join("new.txt").exists(),
            "a preview writes nothing"
        );
    }

    #[tokio::test]
    async fn an_edit_that_would_fail_says_why_instead_of_a_diff() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("f.txt"), "a\n").unwrap();
        let c = ctx(d.path());
        let args = json!({"path": "f.txt", "oldText": "zzz", "newText": "y"});
        let p = show("edit", &args, &c).await;
        assert!(p.diff.is_none());
        assert!(p.error.unwrap().contains("Could not find the text"));
    }

    #[tokio::test]
    async fn a_diff_too_large_for_an_event_line_is_left_out() {
        let d = tempfile::tempdir().unwrap();
        let c = ctx(d.path());
        let big = "x\n".repeat(MAX_PREVIEW_BYTES);
        let args = json!({"path": "big.txt", "content": big});
        let p = show("write", &args, &c).await;
        assert_eq!((p.change, p.diff), (Change::Create, None));
        assert!(p.error.unwrap().contains("too large to show"));
    }
}
