//! The checkpoint rows of the bench (KEEL_BENCH_ONLY=checkpoint): on a 10,000-file tree,
//! keel's snapshot after one change and its first snapshot against `git add -A && git
//! write-tree` with a separate index (the floor), a restore of 100 changed files against
//! `git read-tree && git checkout-index -a -f`, and an in-process tool turn with checkpoints
//! on against off. Goals: ≤ 1.2x, ≤ 1.5x, ≤ 1.2x, ≤ 1.1x.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use keel::kernel::checkpoint::{Caps, Checkpoints};
use keel::kernel::event::EventPayload;
use keel::kernel::provider::scripted::ScriptedProvider;
use keel::{AgentConfig, AgentSession, Bus, Clock, Permission};
use serde_json::json;

use super::{median, Res, Row};

const FILES: usize = 10_000;
const CHANGED: usize = 100;

fn git_path() -> Res<PathBuf> {
    let path = std::env::var_os("PATH").ok_or("PATH is not set")?;
    std::env::split_paths(&path)
        .map(|d| d.join("git"))
        .find(|p| p.is_file())
        .ok_or_else(|| "git is not on PATH".into())
}

pub(super) fn make_tree(root: &Path) -> Res<Vec<PathBuf>> {
    let mut files = Vec::new();
    for i in 0..FILES {
        let dir = root.join(format!("d{:03}", i / 100));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let f = dir.join(format!("f{i:05}.txt"));
        std::fs::write(&f, format!("line {i}\n").repeat(5 + i % 50)).map_err(|e| e.to_string())?;
        files.push(f);
    }
    Ok(files)
}

/// `git args` on the floor's own store and index.
fn floor(git: &Path, store: &Path, work: &Path, index: &Path, args: &[&str]) -> Res<()> {
    let out = Command::new(git)
        .env_clear()
        .env("GIT_DIR", store)
        .env("GIT_WORK_TREE", work)
        .env("GIT_INDEX_FILE", index)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("HOME", store)
        .args(args)
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

fn ms(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1e3
}

pub fn checkpoint_bench(rows: &mut Vec<Row>, samples: usize) -> Res<()> {
    eprintln!("[checkpoint] a {FILES}-file tree x{samples}");
    let git = git_path()?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let work = dir.path().join("work");
    let files = make_tree(&work)?;
    let store = dir.path().join("floor.git");
    Command::new(&git)
        .args(["init", "-q", "--bare"])
        .arg(&store)
        .output()
        .map_err(|e| e.to_string())?;
    let fi = store.join("index");
    let checkpoints = Checkpoints {
        git: git.clone(),
        root: dir.path().join("checkpoints"),
        caps: Caps::default(),
    };
    let (mut first_floor, mut first_keel) = (Vec::new(), Vec::new());
    for n in 0..samples.min(3) {
        let _ = std::fs::remove_file(&fi);
        let t = Instant::now();
        floor(&git, &store, &work, &fi, &["add", "-A"])?;
        floor(&git, &store, &work, &fi, &["write-tree"])?;
        first_floor.push(ms(t));
        let shadow = checkpoints.shadow(&work, &format!("first{n}"));
        let t = Instant::now();
        shadow.snapshot().map_err(|e| e.message)?;
        first_keel.push(ms(t));
    }
    let shadow = checkpoints.shadow(&work, "bench");
    let base = shadow.snapshot().map_err(|e| e.message)?.tree;
    let (mut one_floor, mut one_keel) = (Vec::new(), Vec::new());
    for i in 0..samples {
        std::fs::write(&files[i % FILES], format!("changed {i}\n")).map_err(|e| e.to_string())?;
        let t = Instant::now();
        floor(&git, &store, &work, &fi, &["add", "-A"])?;
        floor(&git, &store, &work, &fi, &["write-tree"])?;
        one_floor.push(ms(t));
        let t = Instant::now();
        shadow.snapshot().map_err(|e| e.message)?;
        one_keel.push(ms(t));
    }
    let (mut restore_floor, mut restore_keel) = (Vec::new(), Vec::new());
    let ri = store.join("index-restore");
    let base_floor = {
        floor(&git, &store, &work, &fi, &["add", "-A"])?;
        let out = Command::new(&git)
            .env("GIT_DIR", &store)
            .env("GIT_INDEX_FILE", &fi)
            .args(["write-tree"])
            .output()
            .map_err(|e| e.to_string())?;
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    for i in 0..samples {
        for f in &files[..CHANGED] {
            std::fs::write(f, format!("edit {i}\n")).map_err(|e| e.to_string())?;
        }
        let t = Instant::now();
        floor(&git, &store, &work, &ri, &["read-tree", &base_floor])?;
        floor(&git, &store, &work, &ri, &["checkout-index", "-a", "-f"])?;
        restore_floor.push(ms(t));
        for f in &files[..CHANGED] {
            std::fs::write(f, format!("edit again {i}\n")).map_err(|e| e.to_string())?;
        }
        let present = shadow.snapshot().map_err(|e| e.message)?.tree;
        let t = Instant::now();
        shadow
            .restore(&present, &base, &[])
            .map_err(|e| e.message)?;
        restore_keel.push(ms(t));
    }
    let ratio = |a: &[f64], b: &[f64]| median(a) / median(b);
    rows.push(Row::stats(
        &format!("first snapshot of {FILES} files: git add -A && write-tree (floor)"),
        &first_floor,
        "ms",
        1,
    ));
    rows.push(Row::stats("first snapshot: keel", &first_keel, "ms", 1));
    rows.push(Row::single(
        "first snapshot: keel / floor (goal ≤ 1.5x)",
        ratio(&first_keel, &first_floor),
        "x",
        2,
    ));
    rows.push(Row::stats(
        "snapshot after one change: floor",
        &one_floor,
        "ms",
        1,
    ));
    rows.push(Row::stats(
        "snapshot after one change: keel",
        &one_keel,
        "ms",
        1,
    ));
    rows.push(Row::single(
        "snapshot after one change: keel / floor (goal ≤ 1.2x)",
        ratio(&one_keel, &one_floor),
        "x",
        2,
    ));
    rows.push(Row::stats(
        &format!("restore {CHANGED} changed files: read-tree && checkout-index -a -f"),
        &restore_floor,
        "ms",
        1,
    ));
    rows.push(Row::stats(
        &format!("restore {CHANGED} changed files: keel"),
        &restore_keel,
        "ms",
        1,
    ));
    rows.push(Row::single(
        "restore: keel / floor (goal ≤ 1.2x)",
        ratio(&restore_keel, &restore_floor),
        "x",
        2,
    ));
    let demo = dir.path().join("demo");
    std::fs::create_dir_all(&demo).map_err(|e| e.to_string())?;
    for i in 0..50 {
        std::fs::write(demo.join(format!("f{i}.txt")), "demo\n").map_err(|e| e.to_string())?;
    }
    let (mut off, mut on) = (Vec::new(), Vec::new());
    for _ in 0..samples {
        off.push(tool_turn(&demo, None)?);
        on.push(tool_turn(&demo, Some(Arc::new(checkpoints.clone())))?);
    }
    rows.push(Row::stats(
        "tool turn in-process (bash edits a file), checkpoints off",
        &off,
        "ms",
        2,
    ));
    rows.push(Row::stats(
        "tool turn in-process, checkpoints on",
        &on,
        "ms",
        2,
    ));
    rows.push(Row::single(
        "tool turn: on / off (goal ≤ 1.1x)",
        ratio(&on, &off),
        "x",
        2,
    ));
    Ok(())
}

/// The median wall time of 10 prompts, each a `bash` call changing a file and an answer.
fn tool_turn(dir: &Path, checkpoints: Option<Arc<Checkpoints>>) -> Res<f64> {
    const TURNS: usize = 10;
    let turns: Vec<_> = (0..TURNS)
        .flat_map(|i| {
            let m = format!("^p{i}$");
            let cmd = format!("echo {i} >> f{i}.txt");
            [
                json!({"match": m, "chunks": [{"toolCall": {"id": format!("c{i}"), "name": "bash", "arguments": {"command": cmd}}}]}),
                json!({"match": m, "chunks": [{"text": "ok"}]}),
            ]
        })
        .collect();
    let provider = ScriptedProvider::from_script(
        serde_json::from_value(json!({ "turns": turns })).map_err(|e| e.to_string())?,
    )
    .map_err(|e| e.to_string())?;
    let mut c = AgentConfig::new(dir.to_path_buf(), dir.to_path_buf());
    c.bash_timeout = Duration::from_secs(30);
    c.permission = Permission::Auto;
    c.checkpoints = checkpoints;
    let clock = Clock::new(None, None);
    let s = AgentSession::new(
        c,
        Arc::new(provider),
        Bus::new(clock.clone()),
        clock,
        Vec::new(),
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async {
        let mut times = Vec::new();
        for i in 0..TURNS {
            let mut rx = s.subscribe();
            let start = Instant::now();
            let run = s.prompt(format!("p{i}")).map_err(|e| format!("{e:?}"))?;
            while let Some(ev) = rx.recv().await {
                if matches!(ev.payload, EventPayload::AgentSettled { .. }) {
                    break;
                }
            }
            run.await.map_err(|e| e.to_string())?;
            times.push(start.elapsed().as_secs_f64() * 1e3);
        }
        Ok(median(&times))
    })
}
