//! `keel worktree list|rm|prune|merge` (issue 48, point 3) on worktrees that `keel -w` runs
//! left behind: listed with branch, state, ahead/behind and changes; one with uncommitted
//! changes is removed only with `--force`; a branch with commits the checkout lacks outlives
//! its worktree's removal; merge brings a kept branch in, and stops on a conflict for the
//! user with git's words (exit 1); outside a repository every command is a usage error.

use serde_json::Value;

use crate::common::support::{Run, Sandbox};
use crate::sandbox::{bash, keel_as, mechanisms, world, User};
use crate::worktrees::{git, repository};

/// `keel -p -w NAME` whose model runs `command` in its worktree; the run.
fn session(sb: &Sandbox, name: &str, command: &str) -> Run {
    let mut cmd = keel_as(
        sb,
        User::Me,
        mechanisms()[0],
        &[bash(command)],
        &["-p", "--no-session", "-w", name],
    );
    sb.finish(cmd.output().unwrap())
}

fn listed(sb: &Sandbox) -> Vec<Value> {
    let run = sb.run(&["worktree", "list", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    serde_json::from_str::<Value>(&run.stdout)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

#[test]
fn list_rm_prune_and_merge_work_on_what_sessions_left() {
    let sb = world();
    repository(&sb);
    let w = sb.work();
    git(&w, &["commit", "-qam", "the user's own work"]);
    let dirty = session(&sb, "dirty", "echo half >> a.txt");
    assert_eq!(dirty.code, 0, "{}", dirty.stderr);
    let done = session(
        &sb,
        "done",
        "echo feature > f.txt && git add f.txt && git commit -qm feature",
    );
    assert_eq!(done.code, 0, "{}", done.stderr);
    let clash = session(&sb, "clash", "echo theirs > a.txt && git commit -qam clash");
    assert_eq!(clash.code, 0, "{}", clash.stderr);

    let all = listed(&sb);
    let find = |name: &str| all.iter().find(|e| e["name"] == name).cloned().unwrap();
    assert_eq!(all.len(), 3, "{all:?}");
    let d = find("dirty");
    assert_eq!(
        (
            d["branch"].as_str(),
            d["changed"].as_u64(),
            d["ahead"].as_u64()
        ),
        (Some("keel/dirty"), Some(1), Some(0)),
        "{d}"
    );
    assert_eq!(
        (d["live"].as_bool(), d["locked"].as_bool()),
        (Some(false), Some(false)),
        "{d}"
    );
    let f = find("done");
    assert_eq!(
        (
            f["changed"].as_u64(),
            f["ahead"].as_u64(),
            f["behind"].as_u64()
        ),
        (Some(0), Some(1), Some(0)),
        "{f}"
    );
    let table = sb.run(&["worktree", "list"]);
    assert!(
        table.stdout.starts_with("NAME\tBRANCH\tSTATE"),
        "{}",
        table.stdout
    );
    assert!(
        table.stdout.contains("dirty\tkeel/dirty\tkept\t"),
        "{}",
        table.stdout
    );

    // Uncommitted changes: only with --force.
    let refused = sb.run(&["worktree", "rm", "dirty"]);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("has uncommitted changes"),
        "{}",
        refused.stderr
    );
    assert!(w.join(".keel/worktrees/dirty/a.txt").exists());
    let forced = sb.run(&["worktree", "rm", "dirty", "--force", "--json"]);
    assert_eq!(forced.code, 0, "{}", forced.stderr);
    let said: Value = serde_json::from_str(&forced.stdout).unwrap();
    assert_eq!(said["branchRemoved"], true, "{said}");
    assert!(!w.join(".keel/worktrees/dirty").exists());

    // A conflict stops the merge for the user, with git's words and a hint.
    std::fs::write(w.join("a.txt"), "mine\n").unwrap();
    git(&w, &["commit", "-qam", "mine"]);
    let stopped = sb.run(&["worktree", "merge", "clash"]);
    assert_eq!(stopped.code, 1, "{}", stopped.stderr);
    assert!(stopped.stderr.contains("CONFLICT"), "{}", stopped.stderr);
    assert!(
        stopped.stderr.contains("Hint: git stopped"),
        "{}",
        stopped.stderr
    );
    git(&w, &["merge", "--abort"]);

    // Merged, then removed with its branch (its commit is in HEAD now).
    let merged = sb.run(&["worktree", "merge", "done"]);
    assert_eq!(merged.code, 0, "{}", merged.stderr);
    assert_eq!(
        std::fs::read_to_string(w.join("f.txt")).unwrap(),
        "feature\n"
    );
    let rm = sb.run(&["worktree", "rm", "done"]);
    assert_eq!(rm.code, 0, "{}", rm.stderr);
    assert!(
        rm.stdout
            .contains("removed worktree done and branch keel/done"),
        "{}",
        rm.stdout
    );

    // A branch with commits the checkout lacks stays when its worktree goes.
    let rm = sb.run(&["worktree", "rm", "clash"]);
    assert_eq!(rm.code, 0, "{}", rm.stderr);
    assert!(
        rm.stdout.contains("branch keel/clash kept"),
        "{}",
        rm.stdout
    );
    assert_eq!(
        git(&w, &["log", "-1", "--format=%s", "keel/clash"]),
        "clash"
    );

    let pruned = sb.run(&["worktree", "prune", "--json"]);
    assert_eq!(pruned.code, 0, "{}", pruned.stderr);
    assert!(listed(&sb).is_empty());
    let unknown = sb.run(&["worktree", "rm", "nope"]);
    assert_eq!(unknown.code, 2, "{}", unknown.stderr);
    assert!(
        unknown.stderr.contains("no keel worktree named nope"),
        "{}",
        unknown.stderr
    );
}

#[test]
fn outside_a_repository_the_commands_are_usage_errors() {
    let sb = Sandbox::new();
    for args in [
        &["worktree", "list"][..],
        &["worktree", "prune"],
        &["worktree", "rm", "x"],
    ] {
        let run = sb.run(args);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(
            run.stderr.contains("is not in a git repository"),
            "{}",
            run.stderr
        );
    }
}
