//! Worktrees made, held and ended in real repositories in temp dirs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;

use super::*;

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A repository with one commit of `a.txt`, and an uncommitted change to it.
fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    git(d, &["init", "-q", "-b", "main"]);
    git(d, &["config", "user.email", "t@example.com"]);
    git(d, &["config", "user.name", "t"]);
    std::fs::write(d.join("a.txt"), "one\n").unwrap();
    std::fs::write(d.join(".gitignore"), ".env\nbuild/\n").unwrap();
    git(d, &["add", "."]);
    git(d, &["commit", "-q", "-m", "one"]);
    std::fs::write(d.join("a.txt"), "uncommitted\n").unwrap();
    dir
}

#[test]
fn a_worktree_is_made_from_head_without_uncommitted_changes_and_removed_when_clean() {
    let dir = repo();
    let d = dir.path();
    let status = git(d, &["status", "--porcelain"]);
    let (lease, cwd) = create(d, Some("a"), Base::Head).unwrap();
    let wt = lease.worktree().clone();
    assert_eq!(wt.branch, "keel/a");
    assert_eq!(cwd, wt.path);
    assert!(wt.path.ends_with(".keel/worktrees/a"));
    assert_eq!(
        std::fs::read_to_string(wt.path.join("a.txt")).unwrap(),
        "one\n"
    );
    assert_eq!(
        git(d, &["status", "--porcelain"]),
        status,
        "the main checkout changed"
    );
    let listed = manage::list(d).unwrap();
    assert_eq!(listed.len(), 1);
    assert!(listed[0].live && listed[0].locked, "{listed:?}");
    assert_eq!(listed[0].index, Some(0));
    assert_eq!(lease.finish().unwrap(), Ended::Removed { name: "a".into() });
    assert!(!wt.path.exists());
    assert_eq!(git(d, &["branch", "--list", "keel/a"]), "");
}

#[test]
fn a_dirty_worktree_is_kept_and_rm_needs_force() {
    let dir = repo();
    let d = dir.path();
    let (lease, _) = create(d, Some("b"), Base::Head).unwrap();
    let path = lease.worktree().path.clone();
    std::fs::write(path.join("a.txt"), "changed\n").unwrap();
    let ended = lease.finish().unwrap();
    assert!(
        matches!(
            ended,
            Ended::Kept {
                changed: 1,
                ahead: 0,
                ..
            }
        ),
        "{ended:?}"
    );
    assert!(path.exists());
    assert_eq!(
        manage::rm(d, "b", false),
        Err(WorktreeError::Dirty("b".into()))
    );
    assert_eq!(
        manage::rm(d, "nope", false),
        Err(WorktreeError::Unknown("nope".into()))
    );
    manage::rm(d, "b", true).unwrap();
    assert!(!path.exists());
}

#[test]
fn names_indices_and_worktreeinclude() {
    let dir = repo();
    let d = dir.path();
    std::fs::write(d.join(".env"), "KEY=1\n").unwrap();
    std::fs::write(d.join(".worktreeinclude"), ".env\n").unwrap();
    let (first, _) = create(d, None, Base::Head).unwrap();
    let (second, _) = create(d, Some("two"), Base::Head).unwrap();
    assert_eq!(first.worktree().index, 0);
    assert_eq!(second.worktree().index, 1);
    assert_eq!(
        std::fs::read_to_string(second.worktree().path.join(".env")).unwrap(),
        "KEY=1\n"
    );
    assert_eq!(
        create(d, Some("two"), Base::Head).unwrap_err(),
        WorktreeError::Exists("two".into())
    );
    assert!(matches!(
        create(d, Some("../x"), Base::Head),
        Err(WorktreeError::BadName(_))
    ));
    let vars = second.worktree().vars();
    assert_eq!(vars[1], ("KEEL_WORKTREE_INDEX".into(), "1".into()));
    assert_eq!(vars[2], ("KEEL_PORT_OFFSET".into(), "200".into()));
}

#[test]
fn no_repository_a_bare_one_and_a_detached_head() {
    let plain = tempfile::tempdir().unwrap();
    assert!(matches!(
        create(plain.path(), Some("x"), Base::Head),
        Err(WorktreeError::NotARepo(_))
    ));
    let bare = tempfile::tempdir().unwrap();
    git(bare.path(), &["init", "-q", "--bare"]);
    assert!(matches!(
        create(bare.path(), Some("x"), Base::Head),
        Err(WorktreeError::Bare(_))
    ));
    let dir = repo();
    let d = dir.path();
    let head = git(d, &["rev-parse", "HEAD"]);
    git(d, &["checkout", "-q", "--detach"]);
    let (lease, _) = create(d, Some("det"), Base::Head).unwrap();
    assert_eq!(lease.worktree().base, head);
    lease.finish().unwrap();
}
