#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::kernel::sandbox::policy::Places;

fn git(dir: &Path, args: &[&str]) -> bool {
    std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn policy(root: &Path) -> SandboxPolicy {
    let places = Places {
        cwd: root.to_path_buf(),
        ..Places::default()
    };
    SandboxPolicy::new(SandboxMode::WorkspaceWrite, &places, &[], &[], &[], false)
}

#[test]
fn what_a_call_planted_is_undone_and_what_it_did_otherwise_stays() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().canonicalize().unwrap();
    if !git(&root, &["init", "-q"]) {
        return; // no git here
    }
    std::fs::write(root.join(".git/hooks/pre-push"), "#!/bin/sh\n").unwrap();
    let config = std::fs::read(root.join(".git/config")).unwrap();
    let record = before(&policy(&root)).unwrap();
    // The call: a new settings file, a new hook, a changed one, fsmonitor, a nested repository
    // with a pager, and ordinary work.
    std::fs::create_dir_all(root.join(".keel")).unwrap();
    std::fs::write(root.join(".keel/settings.json"), "{}").unwrap();
    std::fs::write(root.join(".git/hooks/pre-commit"), "evil").unwrap();
    std::fs::write(root.join(".git/hooks/pre-push"), "evil").unwrap();
    assert!(git(&root, &["config", "core.fsmonitor", "touch /x"]));
    assert!(git(&root, &["config", "user.name", "kept?"]));
    assert!(git(&root, &["init", "-q", "sub"]));
    assert!(git(&root.join("sub"), &["config", "core.pager", "evil"]));
    assert!(git(&root.join("sub"), &["config", "user.name", "kept"]));
    std::fs::write(root.join("work.txt"), "ok").unwrap();
    let found = record.check();
    assert!(!root.join(".keel").join("settings.json").exists());
    assert!(!root.join(".git/hooks/pre-commit").exists());
    assert_eq!(
        std::fs::read(root.join(".git/hooks/pre-push")).unwrap(),
        b"#!/bin/sh\n"
    );
    assert_eq!(std::fs::read(root.join(".git/config")).unwrap(), config);
    let sub = gitdirs::entries(&std::fs::read(root.join("sub/.git/config")).unwrap()).unwrap();
    assert!(sub.iter().all(|(k, _)| k != "core.pager"), "{sub:?}");
    assert!(
        sub.iter().any(|(k, v)| k == "user.name" && v == "kept"),
        "{sub:?}"
    );
    assert!(root.join("work.txt").exists());
    assert_eq!(found.len(), 4, "{found:?}");
}

#[test]
fn a_renamed_and_recreated_dot_git_is_reported_and_neutralised() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().canonicalize().unwrap();
    if !git(&root, &["init", "-q"]) {
        return;
    }
    let record = before(&policy(&root)).unwrap();
    std::fs::rename(root.join(".git"), root.join(".g")).unwrap();
    assert!(git(&root, &["init", "-q"]));
    std::fs::write(root.join(".git/hooks/pre-commit"), "evil").unwrap();
    std::fs::write(root.join(".g/hooks/post-commit"), "evil").unwrap();
    let found = record.check();
    assert!(
        found.iter().any(|f| f.what == Repair::GitReplaced),
        "{found:?}"
    );
    assert!(!root.join(".git/hooks/pre-commit").exists());
    assert!(!root.join(".g/hooks/post-commit").exists());
}

/// A `.git` file or a `commondir` that sends git out of the root (to a directory the check
/// does not see, as the private temp dir, with hooks of its own) is removed; one that stays
/// inside (a submodule's) is kept.
#[test]
fn a_pointer_out_of_the_root_is_removed() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().canonicalize().unwrap().join("w");
    std::fs::create_dir_all(root.join("a")).unwrap();
    std::fs::create_dir_all(root.join("b")).unwrap();
    let record = before(&policy(&root)).unwrap();
    std::fs::write(root.join(".git"), "gitdir: ../elsewhere\n").unwrap();
    std::fs::write(root.join("a/.git"), "gitdir: ../b\n").unwrap();
    for p in ["c/objects", "c/refs"] {
        std::fs::create_dir_all(root.join(p)).unwrap();
    }
    std::fs::write(root.join("c/HEAD"), "ref: x\n").unwrap();
    std::fs::write(root.join("c/commondir"), "../../elsewhere\n").unwrap();
    let found = record.check();
    assert!(!root.join(".git").exists(), "{found:?}");
    assert!(!root.join("c/commondir").exists(), "{found:?}");
    assert!(root.join("a/.git").exists(), "{found:?}");
    assert_eq!(found.len(), 2, "{found:?}");
}

/// A repository's own `core.hooksPath` (husky's `.husky`, a `.githooks`) is protected as its
/// `hooks` is: a changed hook there is put back.
#[test]
fn the_hooks_path_of_a_repository_is_protected_too() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().canonicalize().unwrap();
    if !git(&root, &["init", "-q"]) || !git(&root, &["config", "core.hooksPath", ".githooks"]) {
        return;
    }
    std::fs::create_dir_all(root.join(".githooks")).unwrap();
    std::fs::write(root.join(".githooks/pre-commit"), "lint").unwrap();
    let p = policy(&root);
    assert!(
        p.protected.contains(&root.join(".githooks")),
        "{:?}",
        p.protected
    );
    let record = before(&p).unwrap();
    std::fs::write(root.join(".githooks/pre-commit"), "evil").unwrap();
    let found = record.check();
    assert_eq!(
        std::fs::read(root.join(".githooks/pre-commit")).unwrap(),
        b"lint"
    );
    assert_eq!(found.len(), 1, "{found:?}");
}

#[test]
#[ignore]
fn cost_on_20k_files() {
    let d = tempfile::tempdir_in("/var/tmp").unwrap();
    let root = d.path().canonicalize().unwrap();
    git(&root, &["init", "-q"]);
    for i in 0..2000 {
        let dir = root.join(format!("d{}/e{}", i / 100, i));
        std::fs::create_dir_all(&dir).unwrap();
        for j in 0..10 {
            std::fs::write(dir.join(format!("f{j}.rs")), "x").unwrap();
        }
    }
    let p = policy(&root);
    let mut times = Vec::new();
    for _ in 0..10 {
        let t = std::time::Instant::now();
        let r = before(&p).unwrap();
        let mid = t.elapsed();
        let found = r.check();
        assert!(found.is_empty());
        times.push((mid, t.elapsed()));
    }
    let t = std::time::Instant::now();
    let _ = policy(&root);
    // The figures, on request (the kernel prints nothing): KEEL_SHOW_COST=1 makes this fail
    // with them as its message.
    assert!(
        std::env::var_os("KEEL_SHOW_COST").is_none(),
        "policy {:?}; before/total {times:?}",
        t.elapsed()
    );
}
