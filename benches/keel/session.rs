//! The session-load rows of the bench: a generated 50,000-entry session opened in-process
//! (`Store::open`, wall time and peak RSS of a helper process) and by the release binary
//! (`--json --continue`, wall time and peak RSS relative to the file size).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use super::{median, path_str, Res, Row, Sandbox, CHILD_ENV};

pub(super) use keel_testkit::session_gen;

/// Entries in the generated session.
pub const SESSION_ENTRIES: usize = 50_000;
const SESSION_ID: &str = "01a22a4d-c23c-773e-be8a-b1dc1a1a060b";
/// `CHILD_ENV` value of the helper that opens a store and prints its peak RSS.
pub const OPEN_CHILD: &str = "open";

/// Where `--continue` in `sb.cwd` finds a session (pi's directory naming).
fn session_path(sb: &Sandbox) -> Res<PathBuf> {
    let cwd = path_str(&sb.cwd)?;
    let trimmed = cwd
        .strip_prefix('/')
        .or_else(|| cwd.strip_prefix('\\'))
        .unwrap_or(cwd);
    let safe = trimmed.replace(['/', '\\', ':'], "-");
    let dir = sb.home.join("sessions").join(format!("--{safe}--"));
    fs::create_dir_all(&dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
    Ok(dir.join(format!(
        "{}_{SESSION_ID}.jsonl",
        session_gen::SESSION_TS.replace([':', '.'], "-")
    )))
}

/// Lines of the file at `path`.
fn lines(path: &Path) -> Res<usize> {
    Ok(fs::read(path)
        .map_err(|e| format!("read session: {e}"))?
        .iter()
        .filter(|b| **b == b'\n')
        .count())
}

/// Helper mode: opens the session file in argv[1] with `Store::open`, checks it holds
/// [`SESSION_ENTRIES`] entries, and prints this process's peak RSS (VmHWM) in KiB.
pub fn open_child() -> Res<()> {
    let path = std::env::args_os()
        .nth(1)
        .ok_or("helper needs <session file>")?;
    let (store, warnings) =
        keel::kernel::session::Store::open(Path::new(&path)).map_err(|e| e.message)?;
    if store.entries().len() != SESSION_ENTRIES || !warnings.is_empty() {
        return Err(format!(
            "opened {} entries with warnings {warnings:?}",
            store.entries().len()
        ));
    }
    println!("{}", peak_kib()?);
    Ok(())
}

/// VmHWM of this process, KiB (Linux).
fn peak_kib() -> Res<f64> {
    let status = fs::read_to_string("/proc/self/status").map_err(|e| format!("status: {e}"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| "no VmHWM in /proc/self/status".into())
}

/// Runs `cmd` (a helper that prints one number of KiB) and returns that number.
fn helper_kib(mut cmd: Command) -> Res<f64> {
    let out = cmd
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot spawn helper: {e}"))?;
    if !out.status.success() {
        return Err(format!("helper failed ({})", out.status));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    text.trim()
        .parse()
        .map_err(|_| format!("helper printed {text:?}"))
}

/// The session rows: `Store::open` time and memory, then the binary's `--continue` run.
pub fn session_bench(keel: &Path, hello: &str, rows: &mut Vec<Row>, runs: usize) -> Res<()> {
    let sb = Sandbox::new()?;
    let path = session_path(&sb)?;
    let text = session_gen::session_text(path_str(&sb.cwd)?, SESSION_ID, SESSION_ENTRIES);
    fs::write(&path, &text).map_err(|e| format!("write {}: {e}", path.display()))?;
    let size = text.len() as f64;
    drop(text);
    let mib = size / (1024.0 * 1024.0);

    let mut t = Vec::new();
    for _ in 0..runs {
        let start = Instant::now();
        let (store, _) = keel::kernel::session::Store::open(&path).map_err(|e| e.message)?;
        t.push(start.elapsed().as_secs_f64() * 1e3);
        if store.entries().len() != SESSION_ENTRIES {
            return Err(format!(
                "Store::open read {} entries",
                store.entries().len()
            ));
        }
    }
    rows.push(Row::stats(
        &format!("open a {SESSION_ENTRIES}-entry session ({mib:.1} MiB), `Store::open`"),
        &t,
        "ms",
        1,
    ));
    let me = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let mut kib = Vec::new();
    for _ in 0..runs {
        let mut cmd = Command::new(&me);
        cmd.env(CHILD_ENV, OPEN_CHILD).arg(&path);
        kib.push(helper_kib(cmd)?);
    }
    rows.push(Row::single(
        "`Store::open` peak RSS ÷ file size",
        median(&kib) * 1024.0 / size,
        "x",
        2,
    ));

    let args = [
        "--json",
        "--continue",
        "-p",
        "--provider",
        "scripted",
        "--script",
        hello,
        "hi",
    ];
    let mut wall = Vec::new();
    let mut rss = Vec::new();
    for i in 0..runs * 2 {
        let run = Sandbox::new()?;
        let copy = session_path(&run)?;
        // The generated text names its cwd in the header: regenerate it for this sandbox.
        let text = session_gen::session_text(path_str(&run.cwd)?, SESSION_ID, SESSION_ENTRIES);
        fs::write(&copy, text).map_err(|e| format!("write {}: {e}", copy.display()))?;
        if i % 2 == 0 {
            wall.push(run.time_run(keel, &args)?.as_secs_f64() * 1e3);
        } else {
            let mut cmd = Command::new(&me);
            cmd.env(CHILD_ENV, "1")
                .arg(keel)
                .arg(&run.cwd)
                .arg(&run.home)
                .args(args);
            rss.push(helper_kib(cmd)?);
        }
        // The run must have loaded and extended the generated session, not started a new one.
        let n = lines(&copy)?;
        if n <= SESSION_ENTRIES + 1 {
            return Err(format!("--continue did not extend the session ({n} lines)"));
        }
    }
    let mut baseline = Vec::new();
    for _ in 0..runs {
        let run = Sandbox::new()?;
        baseline.push(run.time_run(keel, &args)?.as_secs_f64() * 1e3);
    }
    rows.push(Row::stats(
        &format!("`--json --continue -p hi`, {SESSION_ENTRIES}-entry session: wall time"),
        &wall,
        "ms",
        1,
    ));
    rows.push(Row::stats(
        "`--json --continue -p hi`, no session (baseline): wall time",
        &baseline,
        "ms",
        1,
    ));
    rows.push(Row::single(
        "session load cost (median difference)",
        median(&wall) - median(&baseline),
        "ms",
        1,
    ));
    rows.push(Row::stats(
        &format!("`--json --continue -p hi`, {SESSION_ENTRIES}-entry session: peak RSS"),
        &rss,
        "KiB",
        0,
    ));
    rows.push(Row::single(
        "`--json --continue -p hi` peak RSS ÷ file size",
        median(&rss) * 1024.0 / size,
        "x",
        2,
    ));
    Ok(())
}
