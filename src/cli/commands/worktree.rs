//! `keel worktree list|rm|prune|merge`: the worktrees keel made for sessions of this
//! repository (`-w`, DESIGN §20), found from the current directory (the main checkout or any
//! worktree of it). `list` shows each with its branch, state, index, ahead/behind and
//! uncommitted changes; `rm NAME [--force]` removes one and its branch (never a live one; one
//! with uncommitted changes only with `--force`; a branch with commits the checkout lacks is
//! kept); `prune` unlocks those whose keel died and removes the clean ones; `merge NAME
//! [--rebase]` brings one's branch into the current one with git, which stops on conflicts.

use serde_json::json;

use super::{print, Logs};
use crate::error::StartupError;
use crate::exit::Exit;
use crate::mode::Env;
use crate::worktree::{self, manage, WorktreeError};

/// `keel worktree`'s commands.
#[derive(Debug, clap::Subcommand)]
pub enum WorktreeCommand {
    /// keel's worktrees of this repository: name, branch, state, ahead/behind, changes.
    List {
        /// One JSON array of objects.
        #[arg(long)]
        json: bool,
    },
    /// Remove a worktree and its branch (the branch stays when it has commits the checkout
    /// lacks).
    Rm {
        name: String,
        /// Remove it even with uncommitted changes (they are lost).
        #[arg(long)]
        force: bool,
        /// What was removed, as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Unlock the worktrees whose keel died; remove the clean ones (no change, no commit
    /// the checkout lacks).
    Prune {
        /// What was done, as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Merge a worktree's branch into the current branch (git stops on conflicts).
    Merge {
        name: String,
        /// Rebase the worktree's branch onto the current one, then fast-forward.
        #[arg(long)]
        rebase: bool,
    },
}

/// Why a command did not do what it was asked.
enum Failure {
    /// Asked wrong (no repository, no such worktree, a live or dirty one): exit 2.
    Usage(StartupError),
    /// git (or the disk) failed, a merge stopped on conflicts: exit 1 after git's words.
    Git(String, Option<&'static str>),
}

/// Runs one `keel worktree` command.
pub fn run(command: WorktreeCommand) -> Exit {
    super::run(Logs::Off, async move |env, out| match act(command, env) {
        Ok(text) => print(out, &text),
        Err(Failure::Usage(e)) => Err(e),
        Err(Failure::Git(message, hint)) => {
            out.err(&format!("Error: {message}\n"));
            if let Some(hint) = hint {
                out.err(&format!("Hint: {hint}\n"));
            }
            Ok(Exit::Failed)
        }
    })
}

/// What the command prints on success.
fn act(command: WorktreeCommand, env: &Env) -> Result<String, Failure> {
    let repo = worktree::repo_of(&env.cwd).map_err(usage)?;
    let main = &repo.main;
    match command {
        WorktreeCommand::List { json } => {
            let all = manage::list(main).map_err(failed)?;
            Ok(match json {
                true => format!("{}\n", json!(all)),
                false => table(&all),
            })
        }
        WorktreeCommand::Rm { name, force, json } => {
            let branch_gone = manage::rm(main, &name, force).map_err(refused)?;
            let branch = format!("{}{name}", worktree::BRANCH_PREFIX);
            Ok(match (json, branch_gone) {
                (true, _) => format!(
                    "{}\n",
                    json!({"removed": name, "branch": branch, "branchRemoved": branch_gone})
                ),
                (false, true) => format!("removed worktree {name} and branch {branch}\n"),
                (false, false) => format!(
                    "removed worktree {name}; branch {branch} kept (it has commits this \
                     checkout lacks: `git branch -D {branch}` drops them)\n"
                ),
            })
        }
        WorktreeCommand::Prune { json } => {
            let done = manage::prune(main, None).map_err(failed)?;
            Ok(match json {
                true => format!("{}\n", json!(done)),
                false => format!(
                    "unlocked: {}\nremoved: {}\n",
                    words(&done.unlocked),
                    words(&done.removed)
                ),
            })
        }
        WorktreeCommand::Merge { name, rebase } => {
            let said = manage::merge(main, &repo.top, &name, rebase).map_err(|e| match e {
                WorktreeError::Git { .. } => Failure::Git(
                    e.to_string(),
                    Some(
                        "git stopped: resolve the conflicts and commit (or `git merge --abort` \
                         / `git rebase --abort`)",
                    ),
                ),
                e => refused(e),
            })?;
            Ok(match said.is_empty() {
                true => format!("merged {}{name}\n", worktree::BRANCH_PREFIX),
                false => format!("{said}\n"),
            })
        }
    }
}

fn words(names: &[String]) -> String {
    match names.is_empty() {
        true => "none".to_string(),
        false => names.join(" "),
    }
}

/// The table `keel worktree list` prints.
fn table(all: &[manage::Entry]) -> String {
    if all.is_empty() {
        return "no keel worktrees in this repository\n".to_string();
    }
    let mut out = String::from("NAME\tBRANCH\tSTATE\tINDEX\tAHEAD\tBEHIND\tCHANGED\tPATH\n");
    for e in all {
        let state = match (e.live, e.locked, e.owner) {
            (true, _, Some(pid)) => format!("live (pid {pid})"),
            (true, _, None) => "live".to_string(),
            (false, true, _) => "locked, its keel gone".to_string(),
            (false, false, _) => "kept".to_string(),
        };
        let index = e.index.map_or("-".to_string(), |i| i.to_string());
        out.push_str(&format!(
            "{}\t{}\t{state}\t{index}\t{}\t{}\t{}\t{}\n",
            e.name,
            e.branch.as_deref().unwrap_or("(detached)"),
            e.ahead,
            e.behind,
            e.changed,
            e.path.display()
        ));
    }
    out
}

/// Not in a repository (or a bare one): a usage error.
fn usage(e: WorktreeError) -> Failure {
    Failure::Usage(StartupError::usage(format!("keel worktree: {e}")))
}

/// A worktree that may not be touched, or is not there: a usage error naming why.
fn refused(e: WorktreeError) -> Failure {
    match e {
        WorktreeError::Git { .. } | WorktreeError::Io(_) | WorktreeError::NoGit => failed(e),
        e => Failure::Usage(StartupError::usage(e.to_string())),
    }
}

/// git or the file system failed.
fn failed(e: WorktreeError) -> Failure {
    Failure::Git(e.to_string(), None)
}
