//! The sandbox row (KEEL_BENCH_ONLY=sandbox): one tool turn of 20 `bash` calls from the
//! scripted provider, `keel -p --no-session` under the default sandbox (bubblewrap where it
//! works) and with `--sandbox off`, paired in each round and alternating which goes first; wall
//! time from spawn to exit. The first sandboxed session of each fresh `$KEEL_HOME` (bubblewrap
//! probed) is its own row; the floor is one bubblewrap start with the zygote's namespaces.
//! The watch rows: the same sandboxed turn in a workspace of [`TREE_DIRS`] directories
//! against an empty one, which prices the walk before and after each call (the check that no
//! git directory, hook or config appeared: `kernel::sandbox::watch`, `gitwalk`); its floor is
//! an `lstat` of each of those directories twice per call, by this process (what a walk of an
//! unchanged tree must do at least).

use std::path::Path;
use std::time::Instant;

use super::{check_status, file, keel_cmd, median, Res, Row, Sandbox};

/// `bash` calls in the timed turn.
const CALLS: usize = 20;
/// Directories (of [`TREE_FILES`] files each) in the watch rows' big workspace.
const TREE_DIRS: usize = 2_000;
const TREE_FILES: usize = 10;

fn script(dir: &Path) -> Res<String> {
    let calls: Vec<String> = (0..CALLS)
        .map(|i| {
            format!(
                r#"{{"toolCall":{{"id":"c{i}","name":"bash","arguments":{{"command":"echo {i}"}}}}}}"#
            )
        })
        .collect();
    let body = format!(
        r#"{{"turns":[{{"chunks":[{}]}},{{"chunks":[{{"text":"done"}}]}}]}}"#,
        calls.join(",")
    );
    let path = dir.join("sandbox-bench.json");
    std::fs::write(&path, body).map_err(|e| format!("write script: {e}"))?;
    path.to_str()
        .map(str::to_string)
        .ok_or_else(|| "script path is not UTF-8".into())
}

/// One run of the turn with `--sandbox mode`: wall time in ms.
fn timed(keel: &Path, sb: &Sandbox, script: &str, mode: &str) -> Res<f64> {
    let stderr = sb.cwd.join("keel.stderr");
    let mut cmd = keel_cmd(keel, &sb.cwd, &sb.home);
    cmd.args([
        "-p",
        "--no-session",
        "--provider",
        "scripted",
        "--script",
        script,
    ])
    .args(["--sandbox", mode, "go"])
    .stdout(std::process::Stdio::null())
    .stderr(file(&stderr)?);
    let start = Instant::now();
    let status = cmd
        .status()
        .map_err(|e| format!("cannot spawn keel: {e}"))?;
    let ms = start.elapsed().as_secs_f64() * 1e3;
    check_status(status, &stderr)?;
    Ok(ms)
}

/// One start of bubblewrap with the zygote's namespaces and mounts, running `true`: what a
/// sandbox costs a session at least (the floor). `None` without bubblewrap.
fn bwrap_start() -> Option<f64> {
    let bwrap = ["/usr/bin/bwrap", "/bin/bwrap", "/usr/local/bin/bwrap"]
        .into_iter()
        .find(|p| Path::new(p).exists())?;
    let start = Instant::now();
    let status = std::process::Command::new(bwrap)
        .args([
            "--new-session",
            "--die-with-parent",
            "--unshare-pid",
            "--unshare-net",
        ])
        .args([
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--",
            "true",
        ])
        .status()
        .ok()?;
    status
        .success()
        .then(|| start.elapsed().as_secs_f64() * 1e3)
}

pub fn sandbox_bench(keel: &Path, rows: &mut Vec<Row>, runs: usize) -> Res<()> {
    let (mut boxed, mut open, mut cold, mut floor) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 0..runs {
        let sb = Sandbox::new()?;
        let script = script(&sb.cwd)?;
        // The first sandboxed session of a `$KEEL_HOME` probes bubblewrap (and writes down what
        // it found); every later one, as on a user's machine, starts without waiting for it.
        cold.push(timed(keel, &sb, &script, "workspace-write")?);
        if round % 2 == 0 {
            boxed.push(timed(keel, &sb, &script, "workspace-write")?);
            open.push(timed(keel, &sb, &script, "off")?);
        } else {
            open.push(timed(keel, &sb, &script, "off")?);
            boxed.push(timed(keel, &sb, &script, "workspace-write")?);
        }
        floor.extend(bwrap_start());
    }
    let label = format!("tool turn of {CALLS} `bash` calls, `keel -p`");
    rows.push(Row::stats(
        &format!("{label}, sandboxed: wall time"),
        &boxed,
        "ms",
        1,
    ));
    rows.push(Row::stats(
        &format!("{label}, --sandbox off: wall time"),
        &open,
        "ms",
        1,
    ));
    rows.push(Row::single(
        "sandboxed tool turn vs --sandbox off (goal ≤ 1.3x)",
        median(&boxed) / median(&open),
        "x",
        2,
    ));
    rows.push(Row::stats(
        &format!("{label}, sandboxed, first session of a KEEL_HOME (bubblewrap probed)"),
        &cold,
        "ms",
        1,
    ));
    rows.push(Row::single(
        "first sandboxed session vs --sandbox off",
        median(&cold) / median(&open),
        "x",
        2,
    ));
    if !floor.is_empty() {
        rows.push(Row::stats(
            "one bubblewrap start (the zygote's namespaces and mounts, `true`): the floor",
            &floor,
            "ms",
            1,
        ));
        rows.push(Row::single(
            "floor: (--sandbox off + one bubblewrap start) / --sandbox off",
            (median(&open) + median(&floor)) / median(&open),
            "x",
            2,
        ));
    }
    Ok(())
}

/// Fills `root` with [`TREE_DIRS`] directories (nested two deep) of [`TREE_FILES`] files each.
fn fill(root: &Path) -> Res<()> {
    for d in 0..TREE_DIRS {
        let dir = root.join(format!("p{}", d / 50)).join(format!("d{d}"));
        std::fs::create_dir_all(&dir).map_err(|e| format!("mkdir: {e}"))?;
        for f in 0..TREE_FILES {
            std::fs::write(dir.join(format!("f{f}.rs")), "x").map_err(|e| format!("write: {e}"))?;
        }
    }
    Ok(())
}

/// Every directory under `root`.
fn dirs(root: &Path) -> Vec<std::path::PathBuf> {
    let mut all = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(entry.path());
            }
        }
        all.push(dir);
    }
    all
}

/// One `lstat` of each of `dirs` (what a walk of an unchanged tree must do at least): ms.
fn stat_all(dirs: &[std::path::PathBuf]) -> f64 {
    let start = Instant::now();
    for d in dirs {
        let _ = std::fs::symlink_metadata(d);
    }
    start.elapsed().as_secs_f64() * 1e3
}

/// The watch rows (see the module's docs).
pub fn watch_bench(keel: &Path, rows: &mut Vec<Row>, runs: usize) -> Res<()> {
    let (big, empty) = (Sandbox::new()?, Sandbox::new()?);
    fill(&big.cwd)?;
    // A workspace as a user has it: its directories older than the walk's racy window (a
    // directory changed within it is read again by every walk, as git re-reads a racily
    // clean index).
    std::thread::sleep(std::time::Duration::from_secs(4));
    let (big_script, empty_script) = (script(&big.cwd)?, script(&empty.cwd)?);
    let tree = dirs(&big.cwd);
    // Each KEEL_HOME's first session probes bubblewrap: not timed here.
    timed(keel, &big, &big_script, "workspace-write")?;
    timed(keel, &empty, &empty_script, "workspace-write")?;
    let (mut in_big, mut in_empty, mut floor) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..runs {
        if round % 2 == 0 {
            in_big.push(timed(keel, &big, &big_script, "workspace-write")?);
            in_empty.push(timed(keel, &empty, &empty_script, "workspace-write")?);
        } else {
            in_empty.push(timed(keel, &empty, &empty_script, "workspace-write")?);
            in_big.push(timed(keel, &big, &big_script, "workspace-write")?);
        }
        floor.push((0..2 * CALLS).map(|_| stat_all(&tree)).sum::<f64>());
    }
    let label = format!("sandboxed tool turn of {CALLS} `bash` calls, `keel -p`");
    rows.push(Row::stats(
        &format!("{label}, workspace of {TREE_DIRS} directories: wall time"),
        &in_big,
        "ms",
        1,
    ));
    rows.push(Row::stats(
        &format!("{label}, empty workspace: wall time"),
        &in_empty,
        "ms",
        1,
    ));
    rows.push(Row::single(
        "after-call check: extra ms per `bash` call in that workspace",
        (median(&in_big) - median(&in_empty)) / CALLS as f64,
        "ms",
        2,
    ));
    rows.push(Row::stats(
        &format!(
            "floor: an lstat of each of the {TREE_DIRS} directories twice per call, {CALLS} calls"
        ),
        &floor,
        "ms",
        1,
    ));
    rows.push(Row::single(
        "after-call check's cost vs its floor (goal ≤ 2x)",
        (median(&in_big) - median(&in_empty)) / median(&floor),
        "x",
        2,
    ));
    Ok(())
}
