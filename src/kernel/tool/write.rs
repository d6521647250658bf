//! `write`: creates or overwrites one file with the given content, creating parent directories.
//! Owns only that write; must never touch any other path, never delete anything, and never
//! write to (or wait on) anything but a regular file.

use serde::Deserialize;
use serde_json::{json, Value};
use std::borrow::Cow;

use super::args::Field;
use super::details::WriteDetails;
use super::file::check_regular;
use super::{ToolContext, ToolOutput, ToolSpec};

pub(super) fn spec() -> ToolSpec {
    ToolSpec {
        name: Cow::Borrowed("write"),
        description: Cow::Borrowed(
            "Write content to a file, creating it (and parent directories) if needed \
                      and overwriting it if it exists.",
        ),
        parameters: json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Path to the file (relative or absolute)"},
                "content": {"type": "string", "description": "The full content to write"}
            },
            "required": ["path", "content"]
        }),
    }
}

/// `write`'s arguments, read once; each is checked where it is used (also by the preview).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct WriteArgs {
    pub(super) path: Field<String>,
    pub(super) content: Field<String>,
}

pub(super) async fn run(args: &Value, ctx: &ToolContext) -> ToolOutput {
    match write(super::args::read(args), ctx).await {
        Ok(out) | Err(out) => out,
    }
}

async fn write(args: WriteArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolOutput> {
    let path = args.path.required("path")?;
    let path = path.as_str();
    let content = args.content.required("content")?;
    let content = content.as_str();
    let full = ctx.resolve(path);
    super::guard::write(ctx, &full, path)?;
    let existed = match tokio::fs::metadata(&full).await {
        Ok(m) => {
            check_regular(&m, path, "write")?;
            Some(m.len())
        }
        Err(_) => None,
    };
    // The text it replaces, for hooks (`originalFile`): only a text file an edit could take,
    // that the call could read.
    let readable = super::guard::read(ctx, &full, path).is_ok();
    let before = match existed {
        Some(len) if readable && len <= super::edit::MAX_EDIT_BYTES => {
            tokio::fs::read_to_string(&full).await.ok()
        }
        _ => None,
    };
    let (dirs, policy) = (full.clone(), ctx.sandbox.policy.clone());
    tokio::task::spawn_blocking(move || super::file::make_parents(&dirs, &policy))
        .await
        .map_err(|e| ToolOutput::error(format!("write failed: {e}")))?
        .map_err(|e| ToolOutput::error(format!("Cannot create directories for {path}: {e}")))?;
    ctx.files
        .write(
            &full,
            content.to_string(),
            true,
            &ctx.sandbox.policy,
            &ctx.abort,
        )
        .await
        .map_err(|e| ToolOutput::error(format!("Cannot write {path}: {e}")))?;
    Ok(
        ToolOutput::ok(format!("Wrote {} bytes to {path}", content.len()))
            .with_details(json!(WriteDetails {
                path: full.display().to_string(),
                bytes: Some(content.len() as u64),
                created: existed.is_none(),
                lsp: None,
            }))
            .with_before(before),
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    use crate::kernel::tool::test_context as ctx;

    #[tokio::test]
    async fn creates_parent_dirs_then_overwrites() {
        let d = tempfile::tempdir().unwrap();
        let args = json!({"path": "a/b/c.txt", "content": "héllo"});
        let out = run(&args, &ctx(d.path())).await;
        assert!(!out.is_error, "{}", out.text());
        assert_eq!(out.text(), "Wrote 6 bytes to a/b/c.txt");
        assert_eq!(
            std::fs::read_to_string(d.path().join("a/b/c.txt")).unwrap(),
            "héllo"
        );
        let det = out.details.unwrap();
        assert_eq!(det["created"], true);
        assert_eq!(det["bytes"], 6);

        let out = run(
            &json!({"path": "a/b/c.txt", "content": "x"}),
            &ctx(d.path()),
        )
        .await;
        assert_eq!(out.details.unwrap()["created"], false);
        assert_eq!(
            std::fs::read_to_string(d.path().join("a/b/c.txt")).unwrap(),
            "x"
        );
    }

    #[tokio::test]
    async fn rejects_missing_content_and_directories() {
        let d = tempfile::tempdir().unwrap();
        let out = run(&json!({"path": "x.txt"}), &ctx(d.path())).await;
        assert!(out.is_error);
        assert!(out.text().contains("`content`"));
        assert!(!d.path().join("x.txt").exists());
        std::fs::create_dir(d.path().join("dir")).unwrap();
        let out = run(&json!({"path": "dir", "content": "x"}), &ctx(d.path())).await;
        assert!(out.is_error);
        assert!(out.text().contains("directory"));
    }

    /// Writing to a FIFO used to wait for a reader forever.
    #[tokio::test]
    async fn a_fifo_is_refused_without_blocking() {
        let d = tempfile::tempdir().unwrap();
        nix::unistd::mkfifo(&d.path().join("pipe"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        let (args, c) = (json!({"path": "pipe", "content": "x"}), ctx(d.path()));
        let out = tokio::time::timeout(std::time::Duration::from_secs(10), run(&args, &c))
            .await
            .expect("write to a FIFO blocked");
        assert!(out.is_error);
        assert_eq!(
            out.text(),
            "Cannot write pipe: it is a FIFO (named pipe), not a regular file"
        );
    }
}
