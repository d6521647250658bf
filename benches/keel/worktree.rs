//! The worktree row of the bench (KEEL_BENCH_ONLY=worktree): making a session's worktree
//! (`keel::worktree::create`: the repository found, the base resolved, the creation lock, a
//! free index, `git worktree add --lock -b`, `.worktreeinclude`) in a 10,000-file repository,
//! against `git worktree add -b` of the same repository (the floor), side by side, each sample
//! removed untimed before the next. Goal: ≤ 1.3x.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use super::{median, Res, Row};

fn git(dir: &Path, args: &[&str]) -> Res<()> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .map_err(|e| e.to_string())?;
    match out.status.success() {
        true => Ok(()),
        false => Err(format!(
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        )),
    }
}

pub fn worktree_bench(rows: &mut Vec<Row>, samples: usize) -> Res<()> {
    eprintln!("[worktree] a session's worktree in a 10,000-file repository x{samples}");
    let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let main = tmp.path().join("repo");
    std::fs::create_dir_all(&main).map_err(|e| e.to_string())?;
    super::checkpoint::make_tree(&main)?;
    git(&main, &["init", "-q"])?;
    git(&main, &["add", "-A"])?;
    git(
        &main,
        &[
            "-c",
            "user.email=b@b",
            "-c",
            "user.name=b",
            "commit",
            "-qm",
            "tree",
        ],
    )?;
    let (mut floor, mut keel) = (Vec::new(), Vec::new());
    for i in 0..samples {
        let path = tmp.path().join(format!("floor{i}"));
        let path_s = path.to_string_lossy().into_owned();
        let t = Instant::now();
        git(
            &main,
            &[
                "worktree",
                "add",
                "--quiet",
                "-b",
                &format!("f{i}"),
                &path_s,
                "HEAD",
            ],
        )?;
        floor.push(t.elapsed().as_secs_f64() * 1e3);
        git(&main, &["worktree", "remove", "--force", &path_s])?;

        let t = Instant::now();
        let (lease, _) = keel::worktree::create(&main, Some(&format!("k{i}")), Default::default())
            .map_err(|e| e.to_string())?;
        keel.push(t.elapsed().as_secs_f64() * 1e3);
        lease.finish().map_err(|e| e.to_string())?;
    }
    rows.push(Row::stats(
        "worktree in a 10,000-file repository: git worktree add -b (floor)",
        &floor,
        "ms",
        1,
    ));
    rows.push(Row::stats("worktree: keel's (-w)", &keel, "ms", 1));
    rows.push(Row::single(
        "worktree: keel / floor (goal ≤ 1.3x)",
        median(&keel) / median(&floor),
        "x",
        2,
    ));
    Ok(())
}
