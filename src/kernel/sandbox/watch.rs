//! The check after every `bash` call (`DESIGN.md` §14: protected whether or not it exists, by
//! what git and keel read): before the call, what each writable root's protected names hold
//! and every git directory under it (hooks, config); after it, what the command created there
//! is removed, what it changed is put back, and a git config that gained a key that runs a
//! program is restored (or, in a git directory new in this call, rewritten without it). Under
//! Landlock this is the only protection of those paths; under bubblewrap it covers the paths
//! that did not exist when the sandbox was built. Owns the record and the repair; every write
//! goes by descriptor beneath the root ([`beneath`]). It never decides the lists (see
//! [`super::policy::PROTECTED`], [`gitdirs`]).

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use super::beneath::{self, Node};
use super::gitdirs;
use super::gitwalk::{self, Tree};
use super::policy::{SandboxMode, SandboxPolicy, PROTECTED};

/// The last walk of each root, any session's (a walk from it reads only what changed; its
/// stamps, not who made it, say what it may be trusted for: [`gitwalk`]).
static TREES: std::sync::LazyLock<std::sync::Mutex<std::collections::HashMap<PathBuf, Tree>>> =
    std::sync::LazyLock::new(Default::default);

/// The last walk of `root`, taken out (a call running beside this one walks it whole).
fn last_walk(root: &Path) -> Option<Tree> {
    TREES.lock().ok()?.remove(root)
}

fn keep_walk(root: &Path, tree: Tree) {
    if let Ok(mut trees) = TREES.lock() {
        trees.insert(root.to_path_buf(), tree);
    }
}

/// What the check did about one path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The path (real, absolute).
    pub path: PathBuf,
    pub what: Repair,
}

/// How a protected path was repaired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repair {
    /// Created by the call: removed (a git hook), or put back as it was.
    Reverted,
    /// A git config gained a key that runs a program: restored without it.
    ConfigRestored,
    /// The workspace's `.git` is no longer the directory it was (renamed and recreated): the
    /// hooks and config of the one there now were checked against the old one's.
    GitReplaced,
}

impl Finding {
    /// The line the model reads (the style of [`super::Sandbox::note`]).
    pub fn note(&self, mode: SandboxMode) -> String {
        let p = self.path.display();
        let why = match self.what {
            Repair::Reverted => format!("{p} is protected: what the command changed was undone"),
            Repair::ConfigRestored => {
                format!("{p} is protected: a key that runs a program was removed")
            }
            Repair::GitReplaced => format!(
                "{p} was replaced: its hooks and config are checked against the repository's"
            ),
        };
        format!("[sandbox ({}): {why}]", mode.name())
    }
}

/// One git directory as it was before the call.
#[derive(Debug, Clone)]
struct GitRecord {
    /// Relative to its root.
    rel: PathBuf,
    id: Option<(u64, u64)>,
    hooks: Node,
    configs: Vec<Option<Vec<u8>>>,
}

/// One writable root as it was before the call.
#[derive(Debug)]
struct RootRecord {
    path: PathBuf,
    fd: OwnedFd,
    /// Each protected name (relative) and what it held.
    names: Vec<(PathBuf, Option<Node>)>,
    git: Vec<GitRecord>,
    /// The files that send git to another directory, and their bytes (see [`pointers`]).
    pointers: BTreeMap<PathBuf, Vec<u8>>,
    dot_git: Option<(u64, u64, bool)>,
    /// The walk that found `git`, for the walk after the call.
    tree: Tree,
}

/// The record taken before one call; [`Before::check`] after it.
#[derive(Debug)]
pub struct Before {
    roots: Vec<RootRecord>,
}

/// The record of `policy`'s writable roots, or `None` when nothing inside them is writable.
pub fn before(policy: &SandboxPolicy) -> Option<Before> {
    if policy.mode != SandboxMode::WorkspaceWrite {
        return None;
    }
    // A linked worktree's git directory is writable (git writes its index and HEAD there)
    // but the files in it that send git elsewhere are protected: recorded as a root's are.
    let admin = policy
        .git_writable
        .iter()
        .filter(|d| d.join("commondir").is_file());
    let roots = policy
        .writable_roots
        .iter()
        .chain(admin)
        .filter_map(|r| record_root(r, policy))
        .collect();
    Some(Before { roots })
}

fn record_root(path: &Path, policy: &SandboxPolicy) -> Option<RootRecord> {
    let fd = beneath::open_root(path).ok()?;
    let (found, tree) = gitwalk::walk(path, last_walk(path));
    let dirs = &found.dirs;
    let mut rels: Vec<PathBuf> = PROTECTED
        .iter()
        .filter(|p| !p.starts_with(".git/"))
        .map(PathBuf::from)
        .collect();
    // The policy's other protected paths in the root (a home it holds: `.gitconfig`, …; a
    // linked worktree's git directory, a root itself, its `commondir`, `gitdir`, …).
    for p in &policy.protected {
        let outside_git = !policy
            .git_dirs
            .iter()
            .any(|g| p.starts_with(g) && !path.starts_with(g));
        if let (Ok(rel), true) = (p.strip_prefix(path), outside_git) {
            if !rels.iter().any(|r| r == rel) {
                rels.push(rel.to_path_buf());
            }
        }
    }
    // `core.hooksPath` directories inside the root are protected names too.
    for dir in dirs {
        for hooks in gitdirs::hooks_dirs(&path.join(dir), path)
            .into_iter()
            .skip(1)
        {
            let rel = hooks.strip_prefix(path).ok().map(Path::to_path_buf);
            rels.extend(rel.filter(|r| !rels.contains(r)));
        }
    }
    let names = rels
        .into_iter()
        .map(|rel| {
            let node = capture_rel(&fd, &rel);
            (rel, node)
        })
        .collect();
    let pointers = pointers(&fd, &found);
    let git = found
        .dirs
        .into_iter()
        .map(|rel| record_git(&fd, rel))
        .collect();
    let dot_git = beneath::identity(&fd, OsStr::new(".git"));
    Some(RootRecord {
        path: path.to_path_buf(),
        fd,
        names,
        git,
        pointers,
        dot_git,
        tree,
    })
}

/// What `rel` beneath `fd` holds.
fn capture_rel(fd: &OwnedFd, rel: &Path) -> Option<Node> {
    let (parent, name) = split(rel)?;
    let dir = beneath::open_dir(fd, parent).ok()?;
    beneath::capture(&dir, name)
}

fn split(rel: &Path) -> Option<(&Path, &OsStr)> {
    Some((rel.parent().unwrap_or(Path::new("")), rel.file_name()?))
}

fn record_git(root: &OwnedFd, rel: PathBuf) -> GitRecord {
    let dir = beneath::open_dir(root, &rel).ok();
    let id = split(&rel).and_then(|(parent, name)| {
        let p = beneath::open_dir(root, parent).ok()?;
        beneath::identity(&p, name).map(|(d, i, _)| (d, i))
    });
    let hooks = dir
        .as_ref()
        .and_then(|d| beneath::capture(d, OsStr::new("hooks")))
        .map_or_else(Node::empty_dir, |n| n.filtered(gitdirs::is_hook));
    let configs = gitdirs::CONFIG_FILES
        .iter()
        .map(|f| {
            let node = dir
                .as_ref()
                .and_then(|d| beneath::capture(d, OsStr::new(f)));
            node.and_then(|n| n.bytes().map(<[u8]>::to_vec))
        })
        .collect();
    GitRecord {
        rel,
        id,
        hooks,
        configs,
    }
}

impl Before {
    /// Compares each root with its record and repairs what the call did; what was repaired.
    pub fn check(mut self) -> Vec<Finding> {
        self.check_kept()
    }

    /// [`Before::check`], keeping the record: a later check compares with the same state
    /// (a call that became a job is checked when it returned and again when the job ended).
    pub fn check_kept(&mut self) -> Vec<Finding> {
        let mut found = Vec::new();
        for root in &mut self.roots {
            check_root(root, &mut found);
        }
        found
    }
}

fn check_root(root: &mut RootRecord, found: &mut Vec<Finding>) {
    for (rel, before) in &root.names {
        let after = capture_rel(&root.fd, rel);
        if after.as_ref() == before.as_ref() {
            continue;
        }
        let Some((parent, name)) = split(rel) else {
            continue;
        };
        if let Ok(dir) = beneath::open_dir(&root.fd, parent) {
            if beneath::restore(&dir, name, before.as_ref(), after.as_ref()) {
                found.push(finding(root, rel, Repair::Reverted));
            }
        }
    }
    let now = beneath::identity(&root.fd, OsStr::new(".git"));
    let replaced = matches!((root.dot_git, now), (Some(a), Some(b)) if a != b);
    if replaced || (root.dot_git.is_some() && now.is_none()) {
        found.push(finding(root, Path::new(".git"), Repair::GitReplaced));
    }
    let prev = std::mem::take(&mut root.tree);
    let (found_now, tree) = gitwalk::walk(&root.path, Some(prev));
    root.tree = tree.clone();
    keep_walk(&root.path, tree);
    check_pointers(root, &pointers(&root.fd, &found_now), found);
    for rel in found_now.dirs {
        let after = record_git(&root.fd, rel);
        let before = root
            .git
            .iter()
            .find(|g| g.id.is_some() && g.id == after.id)
            .or_else(|| root.git.iter().find(|g| g.rel == after.rel));
        check_git(root, before, &after, found);
    }
}

/// The files under a root that send git to another directory, with their bytes: each `.git`
/// file (`gitdir: …`) and each git directory's `commondir` (where its hooks and config are).
fn pointers(fd: &OwnedFd, found: &gitdirs::Found) -> BTreeMap<PathBuf, Vec<u8>> {
    let commondirs = found.dirs.iter().map(|d| d.join("commondir"));
    found
        .files
        .iter()
        .cloned()
        .chain(commondirs)
        .filter_map(|rel| {
            let bytes = capture_rel(fd, &rel)?.bytes()?.to_vec();
            Some((rel, bytes))
        })
        .collect()
}

/// Where a pointer file (`rel`, holding `bytes`) sends git, made real.
fn pointer_target(root: &Path, rel: &Path, bytes: &[u8]) -> Option<PathBuf> {
    let dir = root.join(rel.parent().unwrap_or(Path::new("")));
    match rel.file_name() == Some(OsStr::new(".git")) {
        true => gitdirs::gitdir_in(&dir, bytes),
        false => {
            let text = String::from_utf8_lossy(bytes);
            Some(super::policy::real(&dir.join(text.trim())))
        }
    }
}

/// A pointer file the call made or changed that sends git out of the root (to a directory the
/// check does not see, as the private temp dir) is put back, or removed.
fn check_pointers(root: &RootRecord, now: &BTreeMap<PathBuf, Vec<u8>>, found: &mut Vec<Finding>) {
    for (rel, bytes) in now {
        let before = root.pointers.get(rel);
        if before == Some(bytes) {
            continue;
        }
        let target = pointer_target(&root.path, rel, bytes);
        if target.is_some_and(|t| t.starts_with(&root.path)) {
            continue;
        }
        let Some((parent, name)) = split(rel) else {
            continue;
        };
        let Ok(dir) = beneath::open_dir(&root.fd, parent) else {
            continue;
        };
        let done = match before {
            Some(old) => beneath::replace(&dir, name, old, 0o644),
            None => beneath::remove(std::os::fd::AsFd::as_fd(&dir), name),
        };
        if let Err(e) = done {
            tracing::warn!("cannot put back {}: {e}", rel.display());
        }
        found.push(finding(root, rel, Repair::Reverted));
    }
}

fn finding(root: &RootRecord, rel: &Path, what: Repair) -> Finding {
    Finding {
        path: root.path.join(rel),
        what,
    }
}

/// One git directory now (`after`) against its record (`None`: new in this call).
fn check_git(
    root: &RootRecord,
    before: Option<&GitRecord>,
    after: &GitRecord,
    found: &mut Vec<Finding>,
) {
    let Ok(dir) = beneath::open_dir(&root.fd, &after.rel) else {
        return;
    };
    let empty = Node::empty_dir();
    let hooks_before = before.map_or(&empty, |b| &b.hooks);
    let hooks = OsStr::new("hooks");
    if *hooks_before != after.hooks {
        // Compared without the samples: only hooks git may run are put back or removed.
        let now = beneath::capture(&dir, hooks).map(|n| n.filtered(gitdirs::is_hook));
        if beneath::restore(&dir, hooks, Some(hooks_before), now.as_ref()) {
            found.push(finding(root, &after.rel.join("hooks"), Repair::Reverted));
        }
    }
    for (i, file) in gitdirs::CONFIG_FILES.iter().enumerate() {
        let old = before.and_then(|b| b.configs.get(i).cloned().flatten());
        let new = after.configs.get(i).cloned().flatten();
        if old == new {
            continue;
        }
        let Some(new) = new else {
            continue;
        };
        if let Some(bytes) = safe_config(old.as_deref(), &new) {
            if let Err(e) = beneath::replace(&dir, OsStr::new(file), &bytes, 0o644) {
                tracing::warn!("cannot restore a git config: {e}");
            }
            let path = after.rel.join(file);
            found.push(finding(root, &path, Repair::ConfigRestored));
        }
    }
}

/// What a config that was `old` (`None`: did not exist) and is now `new` must become, or `None`
/// when it gained no key that runs a program: `old` itself, or (when it is new) `new` without
/// those keys. A config git cannot parse counts as unsafe.
fn safe_config(old: Option<&[u8]>, new: &[u8]) -> Option<Vec<u8>> {
    let had: BTreeSet<(String, String)> = old
        .and_then(gitdirs::entries)
        .map(|e| gitdirs::program_keys(&e))
        .unwrap_or_default();
    let entries = gitdirs::entries(new);
    let gained: BTreeSet<(String, String)> = match &entries {
        Some(e) => gitdirs::program_keys(e).difference(&had).cloned().collect(),
        None => BTreeSet::from([(String::new(), String::new())]),
    };
    if gained.is_empty() {
        return None;
    }
    match (old, entries) {
        (Some(old), _) => Some(old.to_vec()),
        (None, Some(e)) => Some(gitdirs::config_without(&e, &gained)),
        (None, None) => Some(b"[core]\n\trepositoryformatversion = 0\n".to_vec()),
    }
}

/// The record taken before one call, shared by its clones: a `bash` call that becomes a
/// background job keeps a clone, so that what the job changes is checked against the state
/// before the call when the call returns and again when the job ended. Checks are one at a
/// time.
#[derive(Debug, Clone, Default)]
pub struct CallRecord(std::sync::Arc<std::sync::Mutex<Option<Before>>>);

impl CallRecord {
    pub fn new(record: Option<Before>) -> CallRecord {
        CallRecord(std::sync::Arc::new(std::sync::Mutex::new(record)))
    }

    /// Repairs what changed since the record (on a blocking thread), keeping it.
    pub async fn repair(&self) -> Vec<Finding> {
        let shared = self.clone();
        tokio::task::spawn_blocking(move || shared.repair_now())
            .await
            .unwrap_or_default()
    }

    /// [`CallRecord::repair`], here and now.
    pub fn repair_now(&self) -> Vec<Finding> {
        let mut held = self.0.lock().unwrap_or_else(|e| e.into_inner());
        held.as_mut().map(Before::check_kept).unwrap_or_default()
    }
}

/// [`before`] on a blocking thread (for a call about to run).
pub async fn record(policy: &SandboxPolicy) -> Option<Before> {
    if policy.mode != SandboxMode::WorkspaceWrite {
        return None;
    }
    let p = policy.clone();
    tokio::task::spawn_blocking(move || before(&p))
        .await
        .ok()
        .flatten()
}

/// [`Before::check`] on a blocking thread (once the call ended).
pub async fn repair(record: Option<Before>) -> Vec<Finding> {
    match record {
        Some(r) => tokio::task::spawn_blocking(move || r.check())
            .await
            .unwrap_or_default(),
        None => Vec::new(),
    }
}

#[cfg(test)]
mod tests;
