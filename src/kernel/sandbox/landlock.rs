//! The Landlock half of the fallback: restricts the calling process (the `__sandbox-exec`
//! helper, just before it execs the command) to reading everything but the denied paths and
//! writing only the writable roots, the private temp dir and the harmless devices
//! ([`DEVICES`]). Owns only the ruleset;
//! it never execs. Landlock cannot make a path read-only under a writable one: protected paths
//! inside the roots are enforced only by bubblewrap and the file tools.

use std::path::{Path, PathBuf};

use landlock::{
    path_beneath_rules, Access, AccessFs, CompatLevel, Compatible, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetError, RulesetStatus, Scope, ABI,
};

use super::policy::{SandboxMode, SandboxPolicy};

const ABI_USED: ABI = ABI::V7;

/// The devices a command may write (and `ioctl`): not a disk, not another terminal (the
/// user's `/dev/pts/N`), not the host's shared `/dev/shm`. `/dev/tty` is the command's own
/// controlling terminal, and it has none (the helper left the user's session).
const DEVICES: [&str; 6] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
];

/// Whether this kernel enforces Landlock (a ruleset can be created; nothing is restricted).
pub fn available() -> bool {
    Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(ABI::V1))
        .and_then(|r| r.create())
        .is_ok()
}

/// Restricts this process and its future children to `policy`, `tmp` writable.
pub fn restrict_self(policy: &SandboxPolicy, tmp: &Path) -> Result<(), RulesetError> {
    let mut readable = Vec::new();
    readable_beneath(Path::new("/"), &policy.deny_read, &mut readable);
    readable.extend(policy.allow_read.iter().cloned());
    let mut writable = vec![tmp.to_path_buf()];
    writable.extend(DEVICES.iter().map(PathBuf::from));
    if policy.mode == SandboxMode::WorkspaceWrite {
        writable.extend(policy.writable_roots.iter().cloned());
        writable.extend(policy.git_writable.iter().cloned());
    }
    let read = AccessFs::from_read(ABI_USED);
    let status = Ruleset::default()
        .handle_access(AccessFs::from_all(ABI_USED))?
        .scope(Scope::from_all(ABI_USED))?
        .create()?
        .add_rules(path_beneath_rules(&readable, read))?
        .add_rules(path_beneath_rules(&writable, AccessFs::from_all(ABI_USED)))?
        .restrict_self()?;
    if status.ruleset == RulesetStatus::NotEnforced {
        tracing::warn!("landlock: the ruleset is not enforced by this kernel");
    }
    Ok(())
}

/// The largest paths under `dir` that hold no denied path: `dir` itself when none is under
/// it, else its entries, recursively (only the ancestors of denied paths are listed). A
/// symlink among those entries is left out: a rule on it would be a rule on its target (the
/// rule's path is opened), and `/var/run` → `/run` would grant all of `/run`, denied paths and
/// all. What it points to is readable or not by the target's own rules.
fn readable_beneath(dir: &Path, deny: &[PathBuf], out: &mut Vec<PathBuf>) {
    if deny.iter().any(|d| d == dir) {
        return;
    }
    if !deny.iter().any(|d| d.starts_with(dir)) {
        out.push(dir.to_path_buf());
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| !t.is_symlink()) {
            readable_beneath(&entry.path(), deny, out);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn only_the_ancestors_of_denied_paths_are_split() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        for p in ["a/secret", "a/open", "b"] {
            std::fs::create_dir_all(root.join(p)).unwrap();
        }
        // A symlink beside a denied path (as `/var/run` → `/run`) is no rule of its own.
        std::os::unix::fs::symlink(root, root.join("a/up")).unwrap();
        let mut out = Vec::new();
        readable_beneath(root, &[root.join("a/secret")], &mut out);
        out.sort();
        assert_eq!(out, [root.join("a/open"), root.join("b")]);
    }
}
