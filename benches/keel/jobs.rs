//! The jobs rows (KEEL_BENCH_ONLY=jobs): what starting a background job costs against running
//! the same command in the foreground (issue 47: goal ≤ 1.2x). One tool turn of [`CALLS`]
//! `bash` calls of `true` from the scripted provider, `keel -p --no-session` under the default
//! sandbox (bubblewrap where it works): in the foreground, and with `run_in_background: true`
//! (each call returns once its job started). Paired in each round, alternating which goes
//! first; wall time from spawn to exit. The floor is the foreground turn itself.

use std::path::Path;
use std::time::Instant;

use super::{check_status, file, keel_cmd, median, Res, Row, Sandbox};

/// `bash` calls in the timed turn.
const CALLS: usize = 16;

fn script(dir: &Path, background: bool) -> Res<String> {
    let calls: Vec<String> = (0..CALLS)
        .map(|i| {
            format!(
                r#"{{"toolCall":{{"id":"c{i}","name":"bash","arguments":{{"command":"true","run_in_background":{background}}}}}}}"#
            )
        })
        .collect();
    let body = format!(
        r#"{{"turns":[{{"chunks":[{}]}},{{"chunks":[{{"text":"done"}}]}}]}}"#,
        calls.join(",")
    );
    let path = dir.join(format!("jobs-bench-{background}.json"));
    std::fs::write(&path, body).map_err(|e| format!("write script: {e}"))?;
    path.to_str()
        .map(str::to_string)
        .ok_or_else(|| "script path is not UTF-8".into())
}

/// One run of the turn: wall time in ms.
fn timed(keel: &Path, sb: &Sandbox, script: &str) -> Res<f64> {
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
    .args(["--settings", r#"{"jobs":{"maxLive":64}}"#, "go"])
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

/// The jobs rows (see the module's docs).
pub fn jobs_bench(keel: &Path, rows: &mut Vec<Row>, runs: usize) -> Res<()> {
    let sb = Sandbox::new()?;
    let (fg, bg) = (script(&sb.cwd, false)?, script(&sb.cwd, true)?);
    // The KEEL_HOME's first session probes the sandbox: not timed.
    timed(keel, &sb, &fg)?;
    let (mut fore, mut back) = (Vec::new(), Vec::new());
    for round in 0..runs {
        if round % 2 == 0 {
            fore.push(timed(keel, &sb, &fg)?);
            back.push(timed(keel, &sb, &bg)?);
        } else {
            back.push(timed(keel, &sb, &bg)?);
            fore.push(timed(keel, &sb, &fg)?);
        }
    }
    let label = format!("sandboxed tool turn of {CALLS} `bash` calls of `true`, `keel -p`");
    rows.push(Row::stats(
        &format!("{label}, in the foreground (floor): wall time"),
        &fore,
        "ms",
        1,
    ));
    rows.push(Row::stats(
        &format!("{label}, each started as a background job: wall time"),
        &back,
        "ms",
        1,
    ));
    rows.push(Row::single(
        "starting a background job vs the foreground call (goal ≤ 1.2x)",
        median(&back) / median(&fore),
        "x",
        2,
    ));
    Ok(())
}
