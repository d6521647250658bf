//! `ls`: lists the entries of one directory (dotfiles included, dirs with a trailing `/`).
//! Owns only that listing; must never recurse and never modify anything.

use serde_json::{json, Value};
use std::borrow::Cow;

use super::{str_arg, u64_arg, ToolContext, ToolOutput, ToolSpec};

const DEFAULT_LIMIT: usize = 500;

pub(super) fn spec() -> ToolSpec {
    ToolSpec {
        name: Cow::Borrowed("ls"),
        description: Cow::Borrowed(
            "List a directory's entries sorted alphabetically, directories with a \
                      trailing '/'. Includes dotfiles. Default limit 500 entries.",
        ),
        parameters: json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Directory to list (default: current directory)"},
                "limit": {"type": "integer", "minimum": 1, "description": "Maximum number of entries (default 500)"}
            }
        }),
    }
}

pub(super) async fn run(args: &Value, ctx: &ToolContext) -> ToolOutput {
    match ls(args, ctx).await {
        Ok(out) | Err(out) => out,
    }
}

async fn ls(args: &Value, ctx: &ToolContext) -> Result<ToolOutput, ToolOutput> {
    let path = match args.get("path") {
        None | Some(Value::Null) => ".",
        Some(_) => str_arg(args, "path")?,
    };
    let limit = u64_arg(args, "limit")?
        .map_or(DEFAULT_LIMIT, |l| usize::try_from(l).unwrap_or(usize::MAX))
        .max(1);
    let dir = ctx.resolve(path);
    super::guard::read(ctx, &dir, path)?;
    match tokio::fs::metadata(&dir).await {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Err(ToolOutput::error(format!("Not a directory: {path}"))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ToolOutput::error(format!("Path not found: {path}")));
        }
        Err(e) => return Err(ToolOutput::error(format!("Cannot list {path}: {e}"))),
    }
    let mut entries = read_entries(&dir)
        .await
        .map_err(|e| ToolOutput::error(format!("Cannot list {path}: {e}")))?;
    entries.sort_by(|a, b| {
        a.to_lowercase()
            .cmp(&b.to_lowercase())
            .then_with(|| a.cmp(b))
    });
    Ok(super::text::listing(
        entries,
        limit,
        "(empty directory)",
        "entries limit reached",
        "",
    ))
}

/// Entry names, directories (symlinks followed) suffixed with `/`.
async fn read_entries(dir: &std::path::Path) -> std::io::Result<Vec<String>> {
    let mut rd = tokio::fs::read_dir(dir).await?;
    let mut out = Vec::new();
    while let Some(entry) = rd.next_entry().await? {
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_dir = match tokio::fs::metadata(entry.path()).await {
            Ok(m) => m.is_dir(),
            Err(_) => entry.file_type().await.is_ok_and(|t| t.is_dir()),
        };
        out.push(if is_dir { format!("{name}/") } else { name });
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    use crate::kernel::tool::test_context as ctx;

    #[tokio::test]
    async fn lists_sorted_with_dirs_and_dotfiles() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("src")).unwrap();
        std::fs::write(d.path().join("b.txt"), "").unwrap();
        std::fs::write(d.path().join("A.md"), "").unwrap();
        std::fs::write(d.path().join(".env"), "").unwrap();
        let out = run(&json!({}), &ctx(d.path())).await;
        assert!(!out.is_error);
        assert_eq!(out.text(), ".env\nA.md\nb.txt\nsrc/");
        assert_eq!(out.details.unwrap()["count"], 4);
    }

    #[tokio::test]
    async fn limit_marker_and_errors() {
        let d = tempfile::tempdir().unwrap();
        for n in ["c", "a", "b"] {
            std::fs::write(d.path().join(n), "").unwrap();
        }
        let out = run(&json!({"path": ".", "limit": 2}), &ctx(d.path())).await;
        assert_eq!(
            out.text(),
            "a\nb\n\n[2 entries limit reached. Use limit=4 for more.]"
        );
        assert_eq!(out.details.unwrap()["truncated"], true);
        let out = run(&json!({"path": "a"}), &ctx(d.path())).await;
        assert!(out.is_error);
        assert_eq!(out.text(), "Not a directory: a");
        let out = run(&json!({"path": "zzz"}), &ctx(d.path())).await;
        assert!(out.is_error);
        assert!(out.text().contains("zzz"));
        let empty = d.path().join("e");
        std::fs::create_dir(&empty).unwrap();
        let out = run(&json!({"path": "e"}), &ctx(d.path())).await;
        assert_eq!(out.text(), "(empty directory)");
    }
}
