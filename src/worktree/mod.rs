//! Worktrees (DESIGN §20, issue 48): a session that must not trample the user's checkout runs
//! in a git worktree of its own, `.keel/worktrees/NAME` on branch `keel/NAME`, made from the
//! checkout's `HEAD` (or the remote's default branch) without its uncommitted changes. The
//! worktree is locked (`git worktree lock`, the reason naming the keel process that holds it)
//! while its session lives ([`Lease`]); when the session ends a clean one (no change, no
//! commit beyond its base) is removed with its branch, a dirty one kept and reported. Owns the
//! git side of that (through the `git` program, the floor the benchmark measures against) and
//! the variables tools see; the session's setup decides when, the CLI lists and removes them
//! ([`manage`]).

mod git;
mod include;
pub mod manage;
mod names;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::kernel::jobs::HostPid;

/// Where worktrees go, under the main checkout's root.
pub const DIR: &str = ".keel/worktrees";
/// Their branches' prefix.
pub const BRANCH_PREFIX: &str = "keel/";
/// How a lock's reason starts when keel holds it.
const LOCK_TAG: &str = "keel";
/// How long fetching the remote's default branch may take (`worktree.base: fresh`).
const FETCH_CAP: std::time::Duration = std::time::Duration::from_secs(5);

/// What a worktree is made from (setting `worktree.base`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Base {
    /// The checkout's `HEAD` (a detached one too).
    #[default]
    Head,
    /// The remote's default branch (`origin/HEAD`), fetched first (at most 5 s; on failure
    /// what the last fetch left).
    Fresh,
}

/// Why a worktree could not be made, found or removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorktreeError {
    /// The directory is not in a git repository.
    NotARepo(PathBuf),
    /// A bare repository has no checkout to make a worktree of.
    Bare(PathBuf),
    /// `HEAD` names no commit yet.
    NoCommit,
    BadName(String),
    /// A worktree or branch of that name exists.
    Exists(String),
    Unknown(String),
    /// It has uncommitted changes (`--force` removes it anyway).
    Dirty(String),
    /// A live keel session holds it.
    Live(String),
    NoGit,
    Git {
        command: String,
        stderr: String,
    },
    Io(String),
}

impl std::fmt::Display for WorktreeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WorktreeError::NotARepo(d) => {
                write!(
                    f,
                    "{} is not in a git repository: a worktree needs one",
                    d.display()
                )
            }
            WorktreeError::Bare(d) => write!(
                f,
                "{} is a bare repository: run keel -w in a checkout of it",
                d.display()
            ),
            WorktreeError::NoCommit => {
                f.write_str("the repository has no commit yet: commit once, then use a worktree")
            }
            WorktreeError::BadName(n) => write!(
                f,
                "{n:?} is not a worktree name: letters, digits, '.', '_' and '-', at most 64, \
                 not starting with '.' or '-'"
            ),
            WorktreeError::Exists(n) => write!(
                f,
                "worktree {n} exists already (its branch keel/{n} too): pick another name, or \
                 `keel worktree rm {n}`"
            ),
            WorktreeError::Unknown(n) => write!(f, "no keel worktree named {n}"),
            WorktreeError::Dirty(n) => write!(
                f,
                "worktree {n} has uncommitted changes: commit them, or remove it with --force"
            ),
            WorktreeError::Live(n) => write!(f, "worktree {n} belongs to a live keel session"),
            WorktreeError::NoGit => f.write_str("git is not installed: worktrees need it"),
            WorktreeError::Git { command, stderr } => write!(f, "{command} failed: {stderr}"),
            WorktreeError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for WorktreeError {}

/// A repository as seen from a directory in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repo {
    /// The main checkout's root (where `.keel/worktrees` is).
    pub main: PathBuf,
    /// The shared git directory.
    pub common: PathBuf,
    /// The checkout the directory is in (the main one, or a linked worktree).
    pub top: PathBuf,
    /// The directory relative to `top`.
    pub prefix: PathBuf,
}

/// The repository `dir` is in.
pub fn repo_of(dir: &Path) -> Result<Repo, WorktreeError> {
    let args = [
        "rev-parse",
        "--path-format=absolute",
        "--is-bare-repository",
        "--git-common-dir",
        "--show-toplevel",
        "--show-prefix",
    ];
    let out = git::output(dir, &args)?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut lines = text.lines();
    let bare = lines.next();
    let common = lines.next().map(PathBuf::from);
    match (out.status.success(), bare, common) {
        (_, Some("true"), _) => Err(WorktreeError::Bare(dir.to_path_buf())),
        (true, Some(_), Some(common)) => {
            let top = PathBuf::from(lines.next().unwrap_or_default());
            let prefix = PathBuf::from(lines.next().unwrap_or_default());
            let main = match common.file_name().is_some_and(|n| n == ".git") {
                true => common
                    .parent()
                    .map(Path::to_path_buf)
                    .unwrap_or(top.clone()),
                false => top.clone(),
            };
            Ok(Repo {
                main,
                common,
                top,
                prefix,
            })
        }
        _ => Err(WorktreeError::NotARepo(dir.to_path_buf())),
    }
}

/// A worktree keel made for a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Worktree {
    pub name: String,
    pub path: PathBuf,
    pub branch: String,
    /// The commit it was made from.
    pub base: String,
    /// Its place among the repository's live keel worktrees (0…N): `KEEL_WORKTREE_INDEX`.
    pub index: u32,
    /// The main checkout it belongs to.
    pub repo: PathBuf,
}

impl Worktree {
    /// What the session's tools see: `KEEL_WORKTREE`, `KEEL_WORKTREE_INDEX` and
    /// `KEEL_PORT_OFFSET` (100 more per index, from 100: parallel dev servers add it to their
    /// port, and none of them takes the main checkout's).
    pub fn vars(&self) -> Vec<(String, String)> {
        vec![
            ("KEEL_WORKTREE".into(), self.path.display().to_string()),
            ("KEEL_WORKTREE_INDEX".into(), self.index.to_string()),
            (
                "KEEL_PORT_OFFSET".into(),
                ((self.index + 1) * 100).to_string(),
            ),
        ]
    }
}

/// Who holds a worktree: this keel process.
fn lock_reason(index: u32) -> String {
    let pid = std::process::id();
    let start = i32::try_from(pid)
        .ok()
        .and_then(HostPid::of)
        .map_or(0, |h| h.start);
    format!("{LOCK_TAG} pid={pid} start={start} index={index}")
}

/// A keel lock's holder and index, from its reason.
fn parse_reason(reason: &str) -> Option<(HostPid, u32)> {
    let rest = reason.strip_prefix(LOCK_TAG)?.trim();
    let mut pid = None;
    let mut start = None;
    let mut index = None;
    for kv in rest.split_whitespace() {
        match kv.split_once('=') {
            Some(("pid", v)) => pid = v.parse().ok(),
            Some(("start", v)) => start = v.parse().ok(),
            Some(("index", v)) => index = v.parse().ok(),
            _ => {}
        }
    }
    Some((
        HostPid {
            pid: pid?,
            start: start?,
        },
        index?,
    ))
}

/// Makes the worktree a session in `cwd` runs in: `.keel/worktrees/NAME` of its repository
/// (a name made up when `name` is `None`), on a new branch `keel/NAME` from `base`, locked
/// for this process, the files `.worktreeinclude` names copied in. The lease, and the
/// directory the session starts in (`cwd`'s place in the new worktree).
pub fn create(
    cwd: &Path,
    name: Option<&str>,
    base: Base,
) -> Result<(Lease, PathBuf), WorktreeError> {
    let repo = repo_of(cwd)?;
    let name = match name {
        Some(n) => valid(n)?,
        None => names::fresh(&repo.main),
    };
    let commit = base_commit(&repo, base)?;
    let _turn = git::serialize(&repo.common)?;
    let path = repo.main.join(DIR).join(&name);
    let branch = format!("{BRANCH_PREFIX}{name}");
    let taken = path.exists()
        || git::output(
            &repo.main,
            &[
                "rev-parse",
                "--verify",
                "--quiet",
                &format!("refs/heads/{branch}"),
            ],
        )?
        .status
        .success();
    if taken {
        return Err(WorktreeError::Exists(name));
    }
    exclude(&repo.common)?;
    let index = manage::free_index(&repo.main)?;
    let reason = lock_reason(index);
    let path_s = path.to_string_lossy().into_owned();
    git::run(
        &repo.main,
        &[
            "worktree", "add", "--quiet", "--lock", "--reason", &reason, "-b", &branch, &path_s,
            &commit,
        ],
    )?;
    let worktree = Worktree {
        name,
        path: crate::kernel::sandbox::policy::real(&path),
        branch,
        base: commit,
        index,
        repo: repo.main.clone(),
    };
    let notes = notes(&path);
    let lease = Lease {
        worktree,
        done: false,
        notes,
    };
    include::copy(&repo.top, &lease.worktree.path)?;
    // `join("")` would end the path with a slash (and name the session's directory so).
    let start_in = match repo.prefix.as_os_str().is_empty() {
        true => lease.worktree.path.clone(),
        false => lease.worktree.path.join(&repo.prefix),
    };
    let start_in = match start_in.is_dir() {
        true => start_in,
        false => lease.worktree.path.clone(),
    };
    Ok((lease, start_in))
}

/// What a session in the new worktree at `path` should know: submodules git left out, LFS
/// files left as pointers.
fn notes(path: &Path) -> Vec<String> {
    let mut notes = Vec::new();
    if path.join(".gitmodules").is_file() {
        notes.push(
            "the repository has submodules: a new worktree has them empty (git worktree add \
             does not check them out); run `git submodule update --init` in it if the work \
             needs them"
                .to_string(),
        );
    }
    let attributes = std::fs::read_to_string(path.join(".gitattributes")).unwrap_or_default();
    if attributes.contains("filter=lfs")
        && !git::output(path, &["lfs", "version"]).is_ok_and(|o| o.status.success())
    {
        notes.push(
            "the repository tracks files with Git LFS and git-lfs is not installed: those \
             files are pointer files in the worktree"
                .to_string(),
        );
    }
    notes
}

/// `name`, if it is one a worktree and a branch may have.
pub fn valid(name: &str) -> Result<String, WorktreeError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with(['.', '-'])
        && !name.ends_with(".lock")
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        && !name.contains("..");
    match ok {
        true => Ok(name.to_string()),
        false => Err(WorktreeError::BadName(name.to_string())),
    }
}

/// The commit `base` names.
fn base_commit(repo: &Repo, base: Base) -> Result<String, WorktreeError> {
    let head = || {
        git::run(
            &repo.top,
            &["rev-parse", "--verify", "--quiet", "HEAD^{commit}"],
        )
        .map_err(|_| WorktreeError::NoCommit)
    };
    match base {
        Base::Head => head(),
        Base::Fresh => {
            fetch_default(&repo.top);
            git::run(
                &repo.top,
                &[
                    "rev-parse",
                    "--verify",
                    "--quiet",
                    "refs/remotes/origin/HEAD^{commit}",
                ],
            )
            .or_else(|_| head())
        }
    }
}

/// `git fetch origin` of its default branch, given at most [`FETCH_CAP`] (then left running
/// no longer: killed).
fn fetch_default(dir: &Path) {
    let mut cmd = std::process::Command::new("git");
    cmd.arg("-C")
        .arg(dir)
        .args(["fetch", "--quiet", "origin"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let Ok(mut child) = cmd.spawn() else {
        return;
    };
    let until = std::time::Instant::now() + FETCH_CAP;
    while std::time::Instant::now() < until {
        match child.try_wait() {
            Ok(Some(_)) => return,
            Ok(None) => std::thread::sleep(std::time::Duration::from_millis(20)),
            Err(_) => break,
        }
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Keeps `.keel/worktrees/` out of the main checkout's `git status` (`info/exclude`).
fn exclude(common: &Path) -> Result<(), WorktreeError> {
    let line = format!("/{DIR}/");
    let path = common.join("info").join("exclude");
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    if text.lines().any(|l| l.trim() == line) {
        return Ok(());
    }
    let io = |e: std::io::Error| WorktreeError::Io(format!("{}: {e}", path.display()));
    std::fs::create_dir_all(common.join("info")).map_err(io)?;
    let sep = match text.is_empty() || text.ends_with('\n') {
        true => "",
        false => "\n",
    };
    std::fs::write(&path, format!("{text}{sep}{line}\n")).map_err(io)
}

/// What became of a session's worktree when it ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "outcome")]
pub enum Ended {
    /// Clean: removed with its branch.
    Removed { name: String },
    /// Changed or committed to: kept (unlocked) for the user.
    Kept {
        name: String,
        path: PathBuf,
        branch: String,
        /// Files changed, added or deleted and not committed.
        changed: usize,
        /// Commits beyond its base.
        ahead: usize,
    },
}

impl Ended {
    /// One line for the user.
    pub fn describe(&self) -> String {
        match self {
            Ended::Removed { name } => format!("worktree {name} was clean: removed"),
            Ended::Kept {
                path,
                branch,
                changed,
                ahead,
                ..
            } => format!(
                "worktree kept: {} (branch {branch}): {changed} uncommitted change(s), {ahead} \
                 commit(s) ahead; `keel worktree merge` brings it in, `keel worktree rm` drops it",
                path.display()
            ),
        }
    }
}

/// A session's hold on its worktree: locked until [`Lease::finish`] (or its drop, which
/// unlocks it and keeps it).
#[derive(Debug)]
pub struct Lease {
    worktree: Worktree,
    done: bool,
    notes: Vec<String>,
}

impl Lease {
    pub fn worktree(&self) -> &Worktree {
        &self.worktree
    }

    /// What the session should be told of its new worktree (submodules, LFS).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// The session ended: unlocked, then removed with its branch when clean, else kept.
    pub fn finish(mut self) -> Result<Ended, WorktreeError> {
        self.done = true;
        let wt = &self.worktree;
        unlock(&wt.repo, &wt.path);
        let (changed, ahead) = manage::dirt(&wt.path, &wt.base)?;
        if changed > 0 || ahead > 0 {
            return Ok(Ended::Kept {
                name: wt.name.clone(),
                path: wt.path.clone(),
                branch: wt.branch.clone(),
                changed,
                ahead,
            });
        }
        manage::remove(&wt.repo, &wt.path, &wt.branch, false)?;
        Ok(Ended::Removed {
            name: wt.name.clone(),
        })
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if !self.done {
            unlock(&self.worktree.repo, &self.worktree.path);
        }
    }
}

/// A session's lease, shared by the setup that made it and the host that ends it with the
/// session ([`Held::finish`]); what became of it is kept for whoever reports it after.
#[derive(Debug, Clone)]
pub struct Held(std::sync::Arc<std::sync::Mutex<HeldState>>);

#[derive(Debug)]
struct HeldState {
    worktree: Worktree,
    lease: Option<Lease>,
    ended: Option<Result<Ended, WorktreeError>>,
}

impl Held {
    pub fn new(lease: Lease) -> Held {
        Held(std::sync::Arc::new(std::sync::Mutex::new(HeldState {
            worktree: lease.worktree.clone(),
            lease: Some(lease),
            ended: None,
        })))
    }

    fn state(&self) -> std::sync::MutexGuard<'_, HeldState> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn worktree(&self) -> Worktree {
        self.state().worktree.clone()
    }

    /// Ends the lease (once; on a blocking thread: git runs): what became of the worktree.
    pub async fn finish(&self) -> Option<Result<Ended, WorktreeError>> {
        let lease = self.state().lease.take()?;
        let ended = tokio::task::spawn_blocking(move || lease.finish())
            .await
            .unwrap_or_else(|e| Err(WorktreeError::Io(e.to_string())));
        self.state().ended = Some(ended.clone());
        Some(ended)
    }

    /// What [`Held::finish`] found, once it ran.
    pub fn ended(&self) -> Option<Result<Ended, WorktreeError>> {
        self.state().ended.clone()
    }
}

/// `git worktree unlock` (best effort: it may be unlocked already).
fn unlock(repo: &Path, path: &Path) {
    let path = path.to_string_lossy();
    if let Err(e) = git::run(repo, &["worktree", "unlock", &path]) {
        tracing::debug!(error = %e, "worktree: unlock");
    }
}

#[cfg(test)]
mod tests;
