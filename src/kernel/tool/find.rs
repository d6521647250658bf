//! `find`: lists files under a root whose root-relative path matches a glob, honouring
//! `.gitignore`. Owns only that walk; must never read file contents or modify anything. What
//! the walk found is kept only if it is still beneath the root opened by descriptor before it,
//! without a symlink on the way (`kernel::fsx`).

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use ignore::overrides::{Override, OverrideBuilder};
use ignore::WalkBuilder;
use rustix::fs::OFlags;
use rustix::io::Errno;

use super::guard::WalkGuard;
use serde::Deserialize;
use serde_json::{json, Value};

use super::args::Field;
use super::{ToolContext, ToolOutput, ToolSpec};
use crate::kernel::fsx::{self, Beneath, FsxError};

const DEFAULT_LIMIT: usize = 1000;

pub(super) fn spec() -> ToolSpec {
    ToolSpec {
        name: Cow::Borrowed("find"),
        description: Cow::Borrowed(
            "Find files by glob pattern (e.g. '*.rs', '**/*.md', 'src/**/test_*.py') \
                      relative to the search path. Respects .gitignore. Returns sorted relative \
                      paths, default limit 1000.",
        ),
        parameters: json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "Glob pattern to match file paths"},
                "path": {"type": "string", "description": "Directory to search (default: current directory)"},
                "limit": {"type": "integer", "minimum": 1, "description": "Maximum number of results (default 1000)"}
            },
            "required": ["pattern"]
        }),
    }
}

/// `find`'s arguments, read once; each is checked where it is used.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct FindArgs {
    pattern: Field<String>,
    path: Field<String>,
    limit: Field<u64>,
}

pub(super) async fn run(args: &Value, ctx: &ToolContext) -> ToolOutput {
    match find(super::args::read(args), ctx).await {
        Ok(out) | Err(out) => out,
    }
}

async fn find(args: FindArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolOutput> {
    let pattern = args.pattern.required("pattern")?;
    let pattern = pattern.as_str();
    let path = args.path.optional("path")?;
    let path = path.as_deref().unwrap_or(".");
    let limit = args
        .limit
        .optional("limit")?
        .map_or(DEFAULT_LIMIT, |l| usize::try_from(l).unwrap_or(usize::MAX))
        .max(1);
    let root = ctx.resolve(path);
    if !root.exists() {
        return Err(ToolOutput::error(format!("Path not found: {path}")));
    }
    super::guard::read(ctx, &root, path)?;
    let guard = super::guard::WalkGuard::new(ctx, &root);
    let glob = OverrideBuilder::new(&root)
        .add(pattern)
        .and_then(|b| b.build())
        .map_err(|e| ToolOutput::error(format!("Invalid glob pattern `{pattern}`: {e}")))?;
    let cancel = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&cancel);
    let policy = ctx.sandbox.policy.clone();
    let task = tokio::task::spawn_blocking(move || {
        // Opened before the walk and judged by where it is; what the walk found is kept only
        // if it is still there beneath it, without a symlink on the way.
        let top = fsx::open_read(&root, true, true, &policy).map(|f| Beneath::from_file(f, &root));
        let mut found = walk(&root, &glob, &guard, &flag);
        found.sort();
        match top {
            Ok(top) => Ok(still_beneath(&top, found, limit)),
            Err(FsxError::Io(e)) if e.raw_os_error() == Some(Errno::NOTDIR.raw_os_error()) => {
                Ok(found)
            }
            Err(e) => Err(e),
        }
    });
    let found = tokio::select! {
        r = task => r.map_err(|e| ToolOutput::error(format!("find failed: {e}")))?
            .map_err(|e| super::file::refused(path, "search", &e))?,
        _ = ctx.abort.aborted() => {
            cancel.store(true, Ordering::Relaxed);
            return Err(ToolOutput::error("find aborted"));
        }
    };
    let empty = format!("No files found matching pattern: {pattern}");
    Ok(super::text::listing(
        found,
        limit,
        &empty,
        "results limit reached",
        ", or refine the pattern",
    ))
}

/// Walks `root` (hidden files included, `.git` and ignored paths skipped) and returns the
/// root-relative paths of the files matching `glob`.
fn walk(root: &Path, glob: &Override, guard: &WalkGuard, cancel: &AtomicBool) -> Vec<String> {
    let guard = guard.clone();
    let walker = WalkBuilder::new(root)
        .hidden(false)
        .require_git(false)
        .filter_entry(move |e| e.file_name() != ".git" && guard.allows(e.path()))
        .build();
    let mut out = Vec::new();
    for entry in walker.flatten() {
        if cancel.load(Ordering::Relaxed) {
            break;
        }
        if entry.file_type().is_none_or(|t| t.is_dir()) {
            continue;
        }
        let rel = relative(root, entry.path());
        if glob.matched(&rel, false).is_whitelist() {
            out.push(rel.to_string_lossy().into_owned());
        }
    }
    out
}

/// The first `limit + 1` of `found` (sorted, relative to `top`) that are still beneath `top`
/// with no symlink on the way: a directory swapped for a symlink during the walk lists what
/// is behind it, and none of that is kept.
fn still_beneath(top: &Beneath, found: Vec<String>, limit: usize) -> Vec<String> {
    let mut kept = Vec::new();
    for rel in found {
        if kept.len() > limit {
            break;
        }
        if top.open_at(Path::new(&rel), OFlags::PATH).is_ok() {
            kept.push(rel);
        }
    }
    kept
}

/// The path relative to the root; a root that is itself a file yields its file name.
pub(super) fn relative(root: &Path, path: &Path) -> PathBuf {
    match path.strip_prefix(root) {
        Ok(rel) if !rel.as_os_str().is_empty() => rel.to_path_buf(),
        _ => path
            .file_name()
            .map_or_else(|| path.to_path_buf(), PathBuf::from),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    use crate::kernel::tool::test_context as ctx;

    fn tree(files: &[&str]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for f in files {
            let p = d.path().join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "x\n").unwrap();
        }
        d
    }

    #[tokio::test]
    async fn glob_matches_relative_paths_and_respects_gitignore() {
        let d = tree(&[
            "src/main.rs",
            "src/kernel/mod.rs",
            "README.md",
            "target/out.rs",
            "skip.rs",
        ]);
        std::fs::write(d.path().join(".gitignore"), "target/\nskip.rs\n").unwrap();
        let out = run(&json!({"pattern": "*.rs"}), &ctx(d.path())).await;
        assert!(!out.is_error, "{}", out.text());
        assert_eq!(out.text(), "src/kernel/mod.rs\nsrc/main.rs");
        assert_eq!(out.details.unwrap()["count"], 2);

        let out = run(&json!({"pattern": "src/*.rs"}), &ctx(d.path())).await;
        assert_eq!(out.text(), "src/main.rs");
        let out = run(&json!({"pattern": "**/*.md", "path": "."}), &ctx(d.path())).await;
        assert_eq!(out.text(), "README.md");
        let out = run(
            &json!({"pattern": "*.rs", "path": "src/kernel"}),
            &ctx(d.path()),
        )
        .await;
        assert_eq!(out.text(), "mod.rs");
    }

    #[tokio::test]
    async fn limit_no_match_and_errors() {
        let d = tree(&["a.txt", "b.txt", "c.txt"]);
        let out = run(&json!({"pattern": "*.txt", "limit": 2}), &ctx(d.path())).await;
        assert!(out
            .text()
            .starts_with("a.txt\nb.txt\n\n[2 results limit reached."));
        assert_eq!(out.details.unwrap()["truncated"], true);
        let out = run(&json!({"pattern": "*.zig"}), &ctx(d.path())).await;
        assert!(!out.is_error);
        assert!(out.text().starts_with("No files found"));
        let out = run(&json!({"pattern": "a[.txt"}), &ctx(d.path())).await;
        assert!(out.is_error);
        let out = run(&json!({"pattern": "*", "path": "missing"}), &ctx(d.path())).await;
        assert!(out.is_error);
        assert!(out.text().contains("missing"));
    }
}
