//! The worktrees of a repository as keel sees them (`git worktree list --porcelain`, those
//! under `.keel/worktrees`), and what `keel worktree list|rm|prune|merge` and the daemon's
//! sweep do with them: how far each is from its base and the checkout, whether a live keel
//! holds it, removing one (never one with uncommitted changes unless forced), unlocking those
//! whose keel died, merging one's branch. Repositories keel made worktrees in are listed in
//! `$KEEL_HOME/worktree-repos` so the daemon's sweep finds them.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{git, parse_reason, WorktreeError, BRANCH_PREFIX, DIR};

/// The file that lists the repositories keel made worktrees in (one main checkout a line).
const REGISTRY: &str = "worktree-repos";

/// One keel worktree of a repository.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    pub name: String,
    pub path: PathBuf,
    /// `keel/NAME`, or `None` (detached).
    pub branch: Option<String>,
    pub head: String,
    /// Locked by a keel process that is still running: its session is live.
    pub live: bool,
    /// The pid of the keel that locked it (alive or not).
    pub owner: Option<i32>,
    pub locked: bool,
    pub index: Option<u32>,
    /// Uncommitted changes (files).
    pub changed: usize,
    /// Commits on its branch that the main checkout's `HEAD` does not have.
    pub ahead: usize,
    /// Commits of the main checkout's `HEAD` that its branch does not have.
    pub behind: usize,
}

/// `git worktree list --porcelain`, one record per worktree.
#[derive(Debug, Default)]
struct Listed {
    path: PathBuf,
    head: String,
    branch: Option<String>,
    locked: Option<String>,
}

fn listed(main: &Path) -> Result<Vec<Listed>, WorktreeError> {
    let text = git::run(main, &["worktree", "list", "--porcelain"])?;
    let mut out = Vec::new();
    for block in text.split("\n\n") {
        let mut l = Listed::default();
        for line in block.lines() {
            let (key, value) = line.split_once(' ').unwrap_or((line, ""));
            match key {
                "worktree" => l.path = PathBuf::from(value),
                "HEAD" => l.head = value.to_string(),
                "branch" => l.branch = Some(value.trim_start_matches("refs/heads/").to_string()),
                "locked" => l.locked = Some(value.to_string()),
                _ => {}
            }
        }
        if !l.path.as_os_str().is_empty() {
            out.push(l);
        }
    }
    Ok(out)
}

/// The keel worktrees of the repository whose main checkout is `main`.
pub fn list(main: &Path) -> Result<Vec<Entry>, WorktreeError> {
    let under = crate::kernel::sandbox::policy::real(&main.join(DIR));
    let mut out = Vec::new();
    for l in listed(main)? {
        let real = crate::kernel::sandbox::policy::real(&l.path);
        let Ok(rel) = real.strip_prefix(&under) else {
            continue;
        };
        let name = rel.to_string_lossy().into_owned();
        let holder = l.locked.as_deref().and_then(parse_reason);
        let (changed, ahead, behind) = match real.is_dir() {
            true => {
                let (changed, _) = dirt(&real, &l.head)?;
                let (ahead, behind) = apart(main, &l.head)?;
                (changed, ahead, behind)
            }
            false => (0, 0, 0),
        };
        out.push(Entry {
            name,
            path: real,
            branch: l.branch,
            head: l.head,
            live: holder.is_some_and(|(h, _)| h.alive()),
            owner: holder.map(|(h, _)| h.pid),
            locked: l.locked.is_some(),
            index: holder.map(|(_, i)| i),
            changed,
            ahead,
            behind,
        });
    }
    Ok(out)
}

/// The lowest index no live keel worktree of `main` holds.
pub(super) fn free_index(main: &Path) -> Result<u32, WorktreeError> {
    let taken: Vec<u32> = listed(main)?
        .iter()
        .filter_map(|l| l.locked.as_deref().and_then(parse_reason))
        .filter(|(h, _)| h.alive())
        .map(|(_, i)| i)
        .collect();
    Ok((0..).find(|i| !taken.contains(i)).unwrap_or(0))
}

/// Uncommitted changes (files) in the worktree at `path`, and its commits beyond `base`.
pub fn dirt(path: &Path, base: &str) -> Result<(usize, usize), WorktreeError> {
    let status = git::run(path, &["status", "--porcelain", "--untracked-files=all"])?;
    let changed = status.lines().filter(|l| !l.is_empty()).count();
    let ahead = git::run(path, &["rev-list", "--count", &format!("{base}..HEAD")])?
        .trim()
        .parse()
        .unwrap_or(0);
    Ok((changed, ahead))
}

/// Commits of `head` not in the main checkout's `HEAD`, and the other way.
fn apart(main: &Path, head: &str) -> Result<(usize, usize), WorktreeError> {
    let counts = git::run(
        main,
        &[
            "rev-list",
            "--left-right",
            "--count",
            &format!("{head}...HEAD"),
        ],
    )
    .unwrap_or_default();
    let mut n = counts.split_whitespace().map(|c| c.parse().unwrap_or(0));
    Ok((n.next().unwrap_or(0), n.next().unwrap_or(0)))
}

/// Removes the worktree at `path` (`force`: with its uncommitted changes) and its branch
/// when that holds nothing the checkout lacks; whether the branch went too.
pub(super) fn remove(
    main: &Path,
    path: &Path,
    branch: &str,
    force: bool,
) -> Result<bool, WorktreeError> {
    let p = path.to_string_lossy();
    let mut args = vec!["worktree", "remove"];
    if force {
        args.extend(["--force", "--force"]);
    }
    args.push(&p);
    git::run(main, &args)?;
    if !branch.starts_with(BRANCH_PREFIX) {
        return Ok(false);
    }
    // `-d`: only a branch whose commits are in `HEAD` (or that has none of its own).
    let gone = git::output(main, &["branch", "-d", branch])?
        .status
        .success();
    Ok(gone)
}

/// `keel worktree rm NAME [--force]`: what was removed (a live one never; one with
/// uncommitted changes only with `force`); whether its branch went too.
pub fn rm(main: &Path, name: &str, force: bool) -> Result<bool, WorktreeError> {
    let entry = list(main)?
        .into_iter()
        .find(|e| e.name == name)
        .ok_or_else(|| WorktreeError::Unknown(name.to_string()))?;
    if entry.live {
        return Err(WorktreeError::Live(name.to_string()));
    }
    if entry.changed > 0 && !force {
        return Err(WorktreeError::Dirty(name.to_string()));
    }
    if entry.locked {
        super::unlock(main, &entry.path);
    }
    let branch = entry.branch.unwrap_or_default();
    remove(main, &entry.path, &branch, force)
}

/// What `prune` did.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Pruned {
    /// Locks of keels that died, released.
    pub unlocked: Vec<String>,
    /// Clean worktrees (no change, nothing the checkout lacks) removed.
    pub removed: Vec<String>,
}

/// Releases the locks of keels that died; removes the unlocked worktrees that are clean and
/// whose last change is older than `older_than` (`None`: any age).
pub fn prune(
    main: &Path,
    older_than: Option<std::time::Duration>,
) -> Result<Pruned, WorktreeError> {
    let mut done = Pruned::default();
    for e in list(main)? {
        if e.live {
            continue;
        }
        if e.locked {
            super::unlock(main, &e.path);
            done.unlocked.push(e.name.clone());
        }
        let old = older_than.is_none_or(|age| {
            std::fs::metadata(&e.path)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|since| since >= age)
        });
        if e.changed == 0 && e.ahead == 0 && old {
            remove(
                main,
                &e.path,
                e.branch.as_deref().unwrap_or_default(),
                false,
            )?;
            done.removed.push(e.name);
        }
    }
    let _ = git::run(main, &["worktree", "prune"]);
    Ok(done)
}

/// `keel worktree merge NAME [--rebase]` in the checkout at `top`: its branch merged into
/// the current one (`--no-edit`), or (`rebase`) rebased onto it and fast-forwarded. Git
/// stops on conflicts and the error says what to do.
pub fn merge(main: &Path, top: &Path, name: &str, rebase: bool) -> Result<String, WorktreeError> {
    let entry = list(main)?
        .into_iter()
        .find(|e| e.name == name)
        .ok_or_else(|| WorktreeError::Unknown(name.to_string()))?;
    if entry.live {
        return Err(WorktreeError::Live(name.to_string()));
    }
    let branch = entry.branch.unwrap_or(entry.head);
    if rebase {
        let current = git::run(top, &["rev-parse", "--abbrev-ref", "HEAD"])?;
        git::run(&entry.path, &["rebase", &current])?;
        git::run(top, &["merge", "--ff-only", &branch])
    } else {
        git::run(top, &["merge", "--no-edit", &branch])
    }
}

/// Notes that keel made a worktree in the repository at `main` (for the daemon's sweep).
pub fn remember(keel_home: &Path, main: &Path) {
    let path = keel_home.join(REGISTRY);
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let line = main.to_string_lossy();
    if text.lines().any(|l| l == line) {
        return;
    }
    let _ = std::fs::create_dir_all(keel_home);
    if let Err(e) = std::fs::write(&path, format!("{text}{line}\n")) {
        tracing::debug!(error = %e, "worktree: the registry was not written");
    }
}

/// The daemon's sweep at its start: in each repository keel made worktrees in, the locks of
/// keels that died are released and clean worktrees older than `older_than` removed.
pub fn sweep(keel_home: &Path, older_than: std::time::Duration) -> Vec<(PathBuf, Pruned)> {
    let text = std::fs::read_to_string(keel_home.join(REGISTRY)).unwrap_or_default();
    text.lines()
        .map(PathBuf::from)
        .filter(|p| p.is_dir())
        .filter_map(|main| {
            let done = prune(&main, Some(older_than)).ok()?;
            Some((main, done))
        })
        .collect()
}
