//! The daemon's memory under a client that pipelines requests and never reads (issue 27 §7):
//! VmRSS with a 2 MB session open (the baseline), its peak while one client pipes 3,000
//! `get_messages` of that session and reads nothing, and VmRSS once that client has left and
//! the daemon is quiet again. The goal: peak ≤ baseline + 64 MiB. Every daemon is killed by
//! its guard; the session file lives in a temp dir.

use std::fs;
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;

use super::daemon::Daemon;
use super::session::session_gen;
use super::{median, path_str, Res, Row, Sandbox};

/// Requests the client pipes without reading.
const PIPELINED: usize = 3_000;
/// Entries of the generated session (about 2 MB on disk).
const ENTRIES: usize = 1_200;
/// How long the daemon's CPU time must stand still for it to count as done with a client.
const QUIET: Duration = Duration::from_secs(1);
/// The longest a sample waits for that.
const CAP: Duration = Duration::from_secs(90);
/// Growth past the baseline at which a sample stops watching and lets the client go, so that a
/// daemon that buffers without limit cannot take the machine's memory (KiB).
const GROWTH_CAP: f64 = 1024.0 * 1024.0;

/// One sample, in KiB: (baseline, peak, after), and the session file's and one answer's size.
struct Sample {
    baseline: f64,
    peak: f64,
    after: f64,
    file: usize,
    answer: usize,
    /// The daemon grew past [`GROWTH_CAP`]: the peak is where the bench stopped watching.
    capped: bool,
}

/// The rows: baseline, peak, peak − baseline and after, `runs` samples each.
pub fn pipelining_bench(keel: &Path, hello: &str, rows: &mut Vec<Row>, runs: usize) -> Res<()> {
    let mut samples = Vec::new();
    for _ in 0..runs {
        samples.push(sample(keel, hello)?);
    }
    let mib =
        |f: fn(&Sample) -> f64| -> Vec<f64> { samples.iter().map(|s| f(s) / 1024.0).collect() };
    let (file, answer) = samples.first().map_or((0, 0), |s| (s.file, s.answer));
    let what = format!(
        "{:.1} MiB session, {PIPELINED} get_messages of {:.1} MiB each",
        file as f64 / 1048576.0,
        answer as f64 / 1048576.0
    );
    rows.push(Row::stats(
        &format!("daemon: VmRSS baseline ({what})"),
        &mib(|s| s.baseline),
        "MiB",
        1,
    ));
    rows.push(Row::stats(
        "daemon: VmRSS peak while a client pipes them and never reads",
        &mib(|s| s.peak),
        "MiB",
        1,
    ));
    rows.push(Row::stats(
        "daemon: VmRSS peak − baseline (goal ≤ 64 MiB)",
        &mib(|s| s.peak - s.baseline),
        "MiB",
        1,
    ));
    rows.push(Row::stats(
        "daemon: VmRSS after that client left",
        &mib(|s| s.after),
        "MiB",
        1,
    ));
    let grew = mib(|s| s.after - s.baseline);
    rows.push(Row::single(
        "daemon: VmRSS after − baseline (median)",
        median(&grew),
        "MiB",
        1,
    ));
    let capped = samples.iter().filter(|s| s.capped).count();
    rows.push(Row::single(
        &format!(
            "daemon: samples stopped at {:.0} MiB over the baseline (of {runs})",
            GROWTH_CAP / 1024.0
        ),
        capped as f64,
        "samples",
        0,
    ));
    Ok(())
}

fn sample(keel: &Path, hello: &str) -> Res<Sample> {
    let sb = Sandbox::new()?;
    let path = sb
        .home
        .parent()
        .ok_or("sandbox has no root")?
        .join("big.jsonl");
    let text = session_gen::session_text(
        path_str(&sb.cwd)?,
        "01a22a4d-c23c-773e-be8a-b1dc1a1a0707",
        ENTRIES,
    );
    fs::write(&path, &text).map_err(|e| format!("write session: {e}"))?;
    let d = Daemon::start(keel, &sb)?;
    let mut c = d.connect()?;
    let opened = c.call(
        "session/open",
        json!({"cwd": path_str(&sb.cwd)?, "args": ["--provider", "scripted", "--script", hello, "--session", path_str(&path)?]}),
    )?;
    let id = opened["sessionId"]
        .as_str()
        .ok_or("no sessionId")?
        .to_string();
    let answer = c
        .call("get_messages", json!({"sessionId": id}))?
        .to_string()
        .len();
    let baseline = d.rss_kib()?;
    let (a, writer) = pipe_unread(&d, &id)?;
    let (peak, capped) = watch(&d, baseline, GROWTH_CAP)?;
    a.shutdown(std::net::Shutdown::Both)
        .map_err(|e| format!("shutdown: {e}"))?;
    drop(a);
    let _ = writer.join();
    // Gone from the daemon's clients, and the daemon quiet again.
    let deadline = Instant::now() + CAP;
    while c.call("daemon/status", json!({}))?["clients"] != json!(1) {
        if Instant::now() > deadline {
            return Err("the pipelining client never left the daemon".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    watch(&d, baseline, f64::INFINITY)?;
    let after = d.rss_kib()?;
    Ok(Sample {
        baseline,
        peak,
        after,
        file: text.len(),
        answer,
        capped,
    })
}

/// A second connection that says hello and pipes [`PIPELINED`] `get_messages` from a thread
/// (its write blocks once the daemon stops reading), and never reads.
fn pipe_unread(d: &Daemon, id: &str) -> Res<(UnixStream, std::thread::JoinHandle<()>)> {
    let a = UnixStream::connect(&d.socket).map_err(|e| format!("connect: {e}"))?;
    let hello = json!({"jsonrpc": "2.0", "id": 0, "method": "daemon/hello",
                       "params": {"protocolVersion": 1, "client": {"name": "bench", "version": "0"}}});
    let mut requests = format!("{hello}\n");
    for n in 1..=PIPELINED {
        let req = json!({"jsonrpc": "2.0", "id": n, "method": "get_messages",
                         "params": {"sessionId": id}});
        requests.push_str(&format!("{req}\n"));
    }
    let mut w = a.try_clone().map_err(|e| e.to_string())?;
    let writer = std::thread::spawn(move || {
        // Fails once the bench closes the socket.
        let _ = w.write_all(requests.as_bytes());
    });
    Ok((a, writer))
}

/// Samples the daemon's VmRSS every 10 ms until its CPU time has stood still for [`QUIET`]
/// (it has done all it will do for now) or it grew `cap` KiB past `from`; the highest sample
/// (KiB), and whether it was the cap that ended the watch.
fn watch(d: &Daemon, from: f64, cap: f64) -> Res<(f64, bool)> {
    let start = Instant::now();
    let (mut peak, mut cpu, mut still) = (from, d.cpu_secs()?, Instant::now());
    while still.elapsed() < QUIET {
        if start.elapsed() > CAP {
            return Err("the daemon never went quiet".into());
        }
        std::thread::sleep(Duration::from_millis(10));
        peak = peak.max(d.rss_kib()?);
        if peak > from + cap {
            return Ok((peak, true));
        }
        let now = d.cpu_secs()?;
        if now != cpu {
            (cpu, still) = (now, Instant::now());
        }
    }
    Ok((peak, false))
}
