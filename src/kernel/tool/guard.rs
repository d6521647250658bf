//! The sandbox policy inside keel's own file tools: `read`, `grep`, `find` and `ls` refuse
//! denied paths, `write` and `edit` refuse paths outside the writable roots and protected
//! ones, judged on the real path (symlinks and `..` resolved), so a link in the workspace that
//! points outside does not escape. Owns only these checks (made before a file is opened, with
//! the messages the model sees); the opening itself judges the file it opened, not this name
//! (`kernel::fsx`), so a name swapped since gains nothing. The rules are `kernel::sandbox`'s.

use std::path::{Path, PathBuf};

use super::{ToolContext, ToolOutput};
use crate::kernel::sandbox::policy::real;
use crate::kernel::sandbox::{SandboxPolicy, WriteDenial};

/// Refuses reading `full` (`shown` as the call named it) when the policy denies it.
pub(super) fn read(ctx: &ToolContext, full: &Path, shown: &str) -> Result<(), ToolOutput> {
    match ctx.sandbox.policy.read_denied(&real(full)) {
        None => Ok(()),
        Some(denied) => Err(ToolOutput::error(format!(
            "Cannot read {shown}: the sandbox denies reading {}",
            denied.display()
        ))),
    }
}

/// Refuses writing `full` when the policy does.
pub(super) fn write(ctx: &ToolContext, full: &Path, shown: &str) -> Result<(), ToolOutput> {
    let policy = &ctx.sandbox.policy;
    let why = match policy.write_denied(&real(full)) {
        None => return Ok(()),
        Some(WriteDenial::ReadOnly) => "everything is read-only".to_string(),
        Some(WriteDenial::OutsideRoots) => match policy.worktree_instead(&real(full)) {
            Some(tree) => format!(
                "this session works in the worktree {}: the main checkout is read-only to it; \
                 write the file there instead",
                tree.display()
            ),
            None => {
                let roots: Vec<String> = policy
                    .writable_roots
                    .iter()
                    .map(|r| r.display().to_string())
                    .collect();
                format!("only {} is writable", roots.join(", "))
            }
        },
        Some(WriteDenial::Protected(p)) => format!("{} is protected", p.display()),
        Some(WriteDenial::Secret(p)) => format!("{} is unreadable", p.display()),
    };
    Err(ToolOutput::error(format!(
        "Cannot write {shown}: the sandbox ({}) refuses it: {why}",
        policy.mode.name()
    )))
}

/// For walks under `root`: whether an entry may be looked at (its real path is not denied).
#[derive(Debug, Clone)]
pub(super) struct WalkGuard {
    policy: SandboxPolicy,
    rules: std::sync::Arc<crate::kernel::policy::Rules>,
    root: PathBuf,
    real_root: PathBuf,
}

impl WalkGuard {
    pub(super) fn new(ctx: &ToolContext, root: &Path) -> WalkGuard {
        WalkGuard {
            policy: ctx.sandbox.policy.clone(),
            rules: ctx.rules.clone(),
            root: root.to_path_buf(),
            real_root: real(root),
        }
    }

    /// Entries are not followed through symlinks, so the real root and the relative path
    /// are the entry's real path.
    pub(super) fn allows(&self, path: &Path) -> bool {
        let rel = path.strip_prefix(&self.root).unwrap_or(path);
        let real = self.real_root.join(rel);
        self.policy.read_denied(&real).is_none() && self.rules.read_denied(&real).is_none()
    }
}
