//! `ls`: lists the entries of one directory (dotfiles included, dirs with a trailing `/`).
//! Owns only that listing; must never recurse and never modify anything. The directory is
//! opened by descriptor and judged by where it really is (`kernel::fsx`), then listed from it.

use std::borrow::Cow;
use std::path::Path;

use rustix::fs::{AtFlags, FileType};
use rustix::io::Errno;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::kernel::fsx::{self, FsxError};
use crate::kernel::sandbox::SandboxPolicy;

use super::args::Field;
use super::{ToolContext, ToolOutput, ToolSpec};

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

/// `ls`'s arguments, read once; each is checked where it is used.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct LsArgs {
    path: Field<String>,
    limit: Field<u64>,
}

pub(super) async fn run(args: &Value, ctx: &ToolContext) -> ToolOutput {
    match ls(super::args::read(args), ctx).await {
        Ok(out) | Err(out) => out,
    }
}

async fn ls(args: LsArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolOutput> {
    let path = args.path.optional("path")?;
    let path = path.as_deref().unwrap_or(".");
    let limit = args
        .limit
        .optional("limit")?
        .map_or(DEFAULT_LIMIT, |l| usize::try_from(l).unwrap_or(usize::MAX))
        .max(1);
    let dir = ctx.resolve(path);
    super::guard::read(ctx, &dir, path)?;
    let policy = ctx.sandbox.policy.clone();
    let mut entries = tokio::task::spawn_blocking(move || read_entries(&dir, &policy))
        .await
        .map_err(|e| ToolOutput::error(format!("ls failed: {e}")))?
        .map_err(|e| match e {
            FsxError::Io(e) if e.kind() == std::io::ErrorKind::NotFound => {
                ToolOutput::error(format!("Path not found: {path}"))
            }
            FsxError::Io(e) if e.raw_os_error() == Some(Errno::NOTDIR.raw_os_error()) => {
                ToolOutput::error(format!("Not a directory: {path}"))
            }
            FsxError::Io(e) => ToolOutput::error(format!("Cannot list {path}: {e}")),
            e => super::file::refused(path, "list", &e),
        })?;
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

/// Entry names of `dir`, directories (symlinks followed) suffixed with `/` (blocking). The
/// directory is opened once and judged by where it really is; entries are read from it.
fn read_entries(dir: &Path, policy: &SandboxPolicy) -> Result<Vec<String>, FsxError> {
    let file = fsx::open_read(dir, true, true, policy)?;
    let mut out = Vec::new();
    for entry in rustix::fs::Dir::read_from(&file)? {
        let entry = entry?;
        let name = entry.file_name();
        if name == c"." || name == c".." {
            continue;
        }
        let is_dir = match rustix::fs::statat(&file, name, AtFlags::empty()) {
            Ok(st) => FileType::from_raw_mode(st.st_mode) == FileType::Directory,
            Err(_) => entry.file_type() == FileType::Directory,
        };
        let name = name.to_string_lossy();
        out.push(if is_dir {
            format!("{name}/")
        } else {
            name.into_owned()
        });
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
