//! The print-run rows (KEEL_BENCH_ONLY=print): a local OpenAI-compatible server streams the same
//! 200-token answer to `keel -p` with the session saved (under the default sandbox, and with
//! `--sandbox off`, alternating which goes first), to `keel -p --no-session`, and to the floor,
//! a std-only client that streams it and prints it (benches/bin/sse_floor.rs), in turn each
//! round with `keel --version` (what starting and ending the binary costs); wall time from
//! spawn to exit, stdout read through a pipe and checked. Each round's `$KEEL_HOME` is fresh
//! and has one untimed run first, which probes bubblewrap as a user's first session does: the
//! timed runs know it, as every later session of a user does.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use super::{check_status, file, keel_cmd, median, openai, Res, Row, Sandbox};

/// Tokens in the streamed answer.
pub const PRINT_TOKENS: u64 = 200;

const FLOOR: &str = env!("CARGO_BIN_EXE_keel-sse-floor");

/// What every client must print: the tokens `t0 t1 … t9 t0 …`, trimmed.
fn expected() -> String {
    let text: String = (0..PRINT_TOKENS).map(|i| format!("t{} ", i % 10)).collect();
    text.trim().to_string()
}

/// Runs `cmd` to its end with stdout piped; returns the wall time in ms after checking it
/// printed the answer.
fn timed(cmd: Command, stderr_path: &Path, what: &str) -> Res<f64> {
    timed_answer(cmd, stderr_path, what).map(|(exit, _)| exit)
}

/// [`timed`], and the time the whole answer (its last line) was on stdout, in ms.
fn timed_answer(mut cmd: Command, stderr_path: &Path, what: &str) -> Res<(f64, f64)> {
    cmd.stdout(Stdio::piped()).stderr(file(stderr_path)?);
    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot spawn {what}: {e}"))?;
    let mut stdout = child.stdout.take().ok_or("no stdout pipe")?;
    let (mut bytes, mut buf, mut answered) = (Vec::new(), [0u8; 8192], None);
    loop {
        let n = stdout
            .read(&mut buf)
            .map_err(|e| format!("read stdout: {e}"))?;
        if n == 0 {
            break;
        }
        bytes.extend_from_slice(&buf[..n]);
        if answered.is_none() && bytes.ends_with(b"\n") {
            answered = Some(start.elapsed().as_secs_f64() * 1e3);
        }
    }
    let status = child.wait().map_err(|e| format!("wait: {e}"))?;
    let ms = start.elapsed().as_secs_f64() * 1e3;
    check_status(status, stderr_path)?;
    let out = String::from_utf8_lossy(&bytes);
    if out.trim() != expected() {
        return Err(format!("{what} printed {:?}", out));
    }
    Ok((ms, answered.unwrap_or(ms)))
}

pub fn print_bench(keel: &Path, rows: &mut Vec<Row>, runs: usize) -> Res<()> {
    let (url, server) = openai::serve(openai::openai_stream(PRINT_TOKENS), 5 * runs)?;
    let (mut floor, mut saved, mut unsaved) = (Vec::new(), Vec::new(), Vec::new());
    let (mut version, mut off) = (Vec::new(), Vec::new());
    let (mut saved_answer, mut unsaved_answer) = (Vec::new(), Vec::new());
    let run = ["-p", "--base-url", &url, "--model", "bench"];
    for round in 0..runs {
        let sb = Sandbox::new()?;
        let stderr = sb.cwd.join("keel.stderr");
        let mut cmd = keel_cmd(keel, &sb.cwd, &sb.home);
        cmd.args(run).args(["--no-session", "probe"]);
        timed(cmd, &stderr, "keel -p (the home's first run)")?;
        let stderr = sb.cwd.join("floor.stderr");
        let mut cmd = Command::new(FLOOR);
        cmd.arg(&url).stdin(Stdio::null());
        floor.push(timed(cmd, &stderr, "the floor client")?);
        let stderr = sb.cwd.join("keel.stderr");
        for sandboxed in [round % 2 == 0, round % 2 == 1] {
            let mut cmd = keel_cmd(keel, &sb.cwd, &sb.home);
            cmd.args(run);
            if sandboxed {
                cmd.arg("go");
                let (exit, answer) = timed_answer(cmd, &stderr, "keel -p")?;
                saved.push(exit);
                saved_answer.push(answer);
            } else {
                cmd.args(["--sandbox", "off", "go"]);
                off.push(timed(cmd, &stderr, "keel -p --sandbox off")?);
            }
        }
        let mut cmd = keel_cmd(keel, &sb.cwd, &sb.home);
        cmd.args(run).args(["--no-session", "go"]);
        let (exit, answer) = timed_answer(cmd, &stderr, "keel -p --no-session")?;
        unsaved.push(exit);
        unsaved_answer.push(answer);
        version.push(sb.time_run(keel, &["--version"])?.as_secs_f64() * 1e3);
    }
    server.join().map_err(|_| "the bench server panicked")??;
    let label = format!("print run, {PRINT_TOKENS} tokens over local HTTP");
    rows.push(Row::stats(
        &format!("{label}: floor, a std-only SSE client that prints them: wall time"),
        &floor,
        "ms",
        2,
    ));
    rows.push(Row::stats(
        &format!("{label}: `keel -p`, session saved: wall time"),
        &saved,
        "ms",
        2,
    ));
    rows.push(Row::stats(
        &format!("{label}: `keel -p --sandbox off`, session saved: wall time"),
        &off,
        "ms",
        2,
    ));
    rows.push(Row::stats(
        &format!("{label}: `keel -p --no-session`: wall time"),
        &unsaved,
        "ms",
        2,
    ));
    rows.push(Row::stats(
        &format!("{label}: `keel -p`, session saved: the answer on stdout"),
        &saved_answer,
        "ms",
        2,
    ));
    rows.push(Row::stats(
        &format!("{label}: `keel -p --no-session`: the answer on stdout"),
        &unsaved_answer,
        "ms",
        2,
    ));
    rows.push(Row::stats(
        "print run rounds: `keel --version`: wall time",
        &version,
        "ms",
        2,
    ));
    rows.push(Row::single(
        "print run: `keel -p` (session saved) vs the floor (goal ≤ 1.3x)",
        median(&saved) / median(&floor),
        "x",
        2,
    ));
    rows.push(Row::single(
        "print run: `keel -p` (session saved) vs the same with `--sandbox off` (goal ≤ 1.05x)",
        median(&saved) / median(&off),
        "x",
        2,
    ));
    Ok(())
}
