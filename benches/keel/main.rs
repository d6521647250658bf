//! Benchmarks the release `keel` binary end to end: startup, JSON-mode streaming throughput, peak RSS of print mode, `--continue` session load time, the openai provider decoding a local 100k-chunk stream (in-process and over HTTP), RPC mode's request round trip and prompt-to-first-event latency, the TUI's bytes per streamed token and frame time, the daemon (socket latency, fan-out, replay, memory) and its event journal on NATS (events/s with and without, spool flush).
// A bench program reports its results on stdout and its failures on stderr by design, and a
// broken run must abort it loudly, so the crate's print/unwrap/exit lints do not apply here.
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::disallowed_methods
)]

use std::fmt::Write as _;
use std::fs::{self, File};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

/// Set on the helper subprocess that runs keel once and reports its peak RSS.
const CHILD_ENV: &str = "KEEL_BENCH_CHILD";
/// Text deltas streamed by the big scripted fixture.
const DELTAS: u64 = 100_000;
/// Sequential `get_state` round trips timed per RPC sample.
const RPC_ROUND_TRIPS: usize = 2000;
/// Samples of [`RPC_ROUND_TRIPS`] round trips (KEEL_BENCH_RUNS overrides).
const RPC_SAMPLES: usize = 7;
/// Prompts timed in one RPC process for the first-event latency.
const RPC_PROMPTS: usize = 50;
/// Untimed requests or prompts sent first in each RPC process.
const RPC_WARMUP: usize = 5;

type Res<T> = Result<T, String>;

mod checkpoint;
mod daemon;
mod daemon_load;
mod gemini;
mod hooks;
mod jobs;
mod jobs_load;
mod journal;
mod mcp;
mod openai;
mod policy;
mod print;
mod remote;
mod responses;
mod sandbox;
mod session;
mod subagent;
use keel_testkit::sshd as sshd_support;
mod tui;
mod worktree;

fn main() -> ExitCode {
    let result = match std::env::var_os(CHILD_ENV) {
        Some(v) if v == session::OPEN_CHILD => session::open_child(),
        Some(_) => rss_child(),
        None => run(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench failed: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Helper mode: argv is `<keel> <cwd> <keel_home> <keel args...>`. Runs keel once, waits, and
/// prints the peak RSS of that one child in KiB. A fresh process has a fresh RUSAGE_CHILDREN,
/// so the figure is exactly that run's.
fn rss_child() -> Res<()> {
    let mut args = std::env::args_os().skip(1);
    let (Some(keel), Some(cwd), Some(home)) = (args.next(), args.next(), args.next()) else {
        return Err("helper needs <keel> <cwd> <home> <args...>".into());
    };
    let rest: Vec<_> = args.collect();
    let stderr_path = Path::new(&cwd).join("keel.stderr");
    let status = keel_cmd(Path::new(&keel), Path::new(&cwd), Path::new(&home))
        .args(&rest)
        .stdout(Stdio::null())
        .stderr(file(&stderr_path)?)
        .status()
        .map_err(|e| format!("cannot spawn keel: {e}"))?;
    check_status(status, &stderr_path)?;
    let usage = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)
        .map_err(|e| format!("getrusage: {e}"))?;
    // ru_maxrss is KiB on Linux, bytes on macOS.
    let rss = usage.max_rss();
    let kib = if cfg!(target_os = "macos") {
        rss / 1024
    } else {
        rss
    };
    println!("{kib}");
    Ok(())
}

fn run() -> Res<()> {
    let keel = keel_binary()?;
    let runs_override = match std::env::var("KEEL_BENCH_RUNS") {
        Ok(v) => Some(
            v.parse::<usize>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| format!("KEEL_BENCH_RUNS must be a positive integer, got {v:?}"))?,
        ),
        Err(_) => None,
    };
    let quick = runs_override.unwrap_or(15);
    let heavy = runs_override.unwrap_or(5);
    // The jobs load rows run for half a minute each (KEEL_BENCH_JOBS_SECS).
    let load_runs = runs_override.unwrap_or(3);

    let fixtures = tempfile::tempdir().map_err(|e| format!("tempdir: {e}"))?;
    let big = fixtures.path().join("big.json");
    fs::write(
        &big,
        format!(
            r#"{{"turns":[{{"chunks":[{{"text":"tok ","times":{DELTAS}}}],"usage":{{"input":1,"output":{DELTAS}}}}}]}}"#
        ),
    )
    .map_err(|e| format!("write fixture: {e}"))?;
    let hello = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/providers/hello.json");
    if !hello.is_file() {
        return Err(format!("missing fixture {}", hello.display()));
    }

    let mut rows: Vec<Row> = Vec::new();
    let hello_s = path_str(&hello)?;
    // KEEL_BENCH_ONLY=session, =daemon, =load, =remote, =journal, =mcp, =tui, =print, =responses
    // or =gemini or =policy (the permission-rule rows) or =hooks (hook processes per tool call)
    // runs just those rows (they take a while to iterate on); =load: the daemon's
    // pipelining-client memory rows; =print: a print run against its floor; =json: the
    // JSON-mode flood (wall time, deltas/s, events/s).
    let only = match std::env::var("KEEL_BENCH_ONLY") {
        Ok(v)
            if [
                "session", "daemon", "load", "remote", "journal", "mcp", "tui", "print", "responses",
                "run", "json", "gemini", "policy", "hooks", "sandbox", "checkpoint", "subagent",
                "jobs", "worktree",
            ]
            .contains(&v.as_str()) =>
        {
            Some(v)
        }
        Ok(v) => {
            return Err(format!(
            "KEEL_BENCH_ONLY: session, daemon, load, remote, journal, mcp, tui, print, responses, gemini, policy, hooks, checkpoint, run, json, sandbox, jobs or worktree, not {v:?}"
        ))
        }
        Err(_) => None,
    };
    if only.as_deref() == Some("run") {
        let big_s = path_str(&big)?;
        run_rows(&keel, big_s, hello_s, &mut rows, heavy)?;
        return report(
            &keel,
            &rows,
            &format!("{heavy} heavy, print and JSON run rows only"),
        );
    }
    if only.as_deref() == Some("json") {
        json_rows(&keel, path_str(&big)?, &mut rows, heavy)?;
        return report(&keel, &rows, &format!("{heavy} heavy, JSON-mode rows only"));
    }
    if only.as_deref() == Some("journal") {
        eprintln!("[9/9] journal: events/s with and without NATS, spool flush x{heavy}");
        journal::journal_bench(&keel, &mut rows, heavy)?;
        return report(&keel, &rows, &format!("{heavy} heavy, journal rows only"));
    }
    if only.as_deref() == Some("tui") {
        eprintln!("[7/9] tui: bytes per streamed token and frame time");
        tui::tui_bench(&mut rows, heavy)?;
        return report(&keel, &rows, &format!("{heavy} heavy, TUI rows only"));
    }
    if only.as_deref() == Some("daemon") {
        eprintln!("[8/9] daemon: latency, throughput, replay, memory x{heavy}");
        daemon::daemon_bench(&keel, hello_s, &mut rows, heavy)?;
        remote::remote_bench(&keel, hello_s, &mut rows)?;
        return report(&keel, &rows, &format!("{heavy} heavy, daemon rows only"));
    }
    if only.as_deref() == Some("load") {
        eprintln!("[8/9] daemon: a client that pipelines and never reads x{heavy}");
        daemon_load::pipelining_bench(&keel, hello_s, &mut rows, heavy)?;
        return report(
            &keel,
            &rows,
            &format!("{heavy} heavy, pipelining rows only"),
        );
    }
    if only.as_deref() == Some("remote") {
        remote::remote_bench(&keel, hello_s, &mut rows)?;
        return report(&keel, &rows, "remote rows only");
    }
    if only.as_deref() == Some("print") {
        print::print_bench(&keel, &mut rows, quick)?;
        return report(&keel, &rows, &format!("{quick} rounds, print rows only"));
    }
    if only.as_deref() == Some("jobs") {
        jobs::jobs_bench(&keel, &mut rows, quick)?;
        jobs_load::jobs_load_bench(&keel, &mut rows, load_runs)?;
        return report(
            &keel,
            &rows,
            &format!("{quick} rounds, {load_runs} load runs, jobs rows only"),
        );
    }
    if only.as_deref() == Some("sandbox") {
        sandbox::sandbox_bench(&keel, &mut rows, quick)?;
        sandbox::watch_bench(&keel, &mut rows, heavy)?;
        return report(&keel, &rows, &format!("{quick} rounds, sandbox rows only"));
    }
    if only.as_deref() == Some("responses") {
        eprintln!("[5/9] Responses vs Chat Completions over HTTP, {DELTAS} deltas x{heavy}");
        responses::responses_bench(&keel, &mut rows, heavy)?;
        return report(&keel, &rows, &format!("{heavy} runs, Responses rows only"));
    }
    if only.as_deref() == Some("gemini") {
        eprintln!(
            "[5/9] Gemini vs Chat Completions print runs over HTTP, {DELTAS} deltas x{heavy}"
        );
        gemini::gemini_bench(&keel, &mut rows, heavy)?;
        return report(&keel, &rows, &format!("{heavy} runs, Gemini rows only"));
    }
    if only.as_deref() == Some("policy") {
        policy::policy_bench(&mut rows, quick)?;
        return report(
            &keel,
            &rows,
            &format!("{quick} samples, permission-rule rows only"),
        );
    }
    if only.as_deref() == Some("hooks") {
        hooks::hooks_bench(&mut rows, quick)?;
        return report(&keel, &rows, &format!("{quick} samples, hook rows only"));
    }
    if only.as_deref() == Some("subagent") {
        subagent::subagent_bench(&mut rows, quick)?;
        return report(
            &keel,
            &rows,
            &format!("{quick} samples, subagent rows only"),
        );
    }
    if only.as_deref() == Some("worktree") {
        worktree::worktree_bench(&mut rows, heavy)?;
        return report(
            &keel,
            &rows,
            &format!("{heavy} samples, worktree rows only"),
        );
    }
    if only.as_deref() == Some("checkpoint") {
        checkpoint::checkpoint_bench(&mut rows, heavy)?;
        return report(
            &keel,
            &rows,
            &format!("{heavy} samples, checkpoint rows only"),
        );
    }
    if only.as_deref() == Some("mcp") {
        mcp::mcp_bench(&keel, hello_s, &mut rows, heavy)?;
        return report(&keel, &rows, &format!("{heavy} runs, MCP rows only"));
    }
    if only.is_some() {
        eprintln!(
            "[4/9] a {}-entry session x{heavy}",
            session::SESSION_ENTRIES
        );
        session::session_bench(&keel, hello_s, &mut rows, heavy)?;
        return report(&keel, &rows, &format!("{heavy} heavy, session rows only"));
    }

    // 1. Startup.
    eprintln!("[1/9] keel --version x{quick}");
    let mut t = Vec::new();
    for _ in 0..quick {
        let sb = Sandbox::new()?;
        t.push(sb.time_run(&keel, &["--version"])?.as_secs_f64() * 1e3);
    }
    rows.push(Row::stats("`keel --version` wall time", &t, "ms", 1));
    mcp::mcp_bench(&keel, hello_s, &mut rows, heavy)?;
    policy::policy_bench(&mut rows, quick)?;
    hooks::hooks_bench(&mut rows, quick)?;
    print::print_bench(&keel, &mut rows, quick)?;
    sandbox::sandbox_bench(&keel, &mut rows, quick)?;
    sandbox::watch_bench(&keel, &mut rows, heavy)?;
    jobs::jobs_bench(&keel, &mut rows, quick)?;
    worktree::worktree_bench(&mut rows, heavy)?;
    jobs_load::jobs_load_bench(&keel, &mut rows, load_runs)?;

    let big_s = path_str(&big)?;
    let scripted_ms = run_rows(&keel, big_s, hello_s, &mut rows, heavy)?;

    // 4. Session load: Store::open in-process, then --continue with the binary.
    eprintln!(
        "[4/9] a {}-entry session x{heavy}",
        session::SESSION_ENTRIES
    );
    session::session_bench(&keel, hello_s, &mut rows, heavy)?;

    // 5. The openai provider: SSE decoding in-process, then the binary against a local
    // OpenAI-compatible server streaming the same number of chunks.
    eprintln!(
        "[5/9] openai provider, {DELTAS} chunks: decoder x{heavy}, binary over HTTP x{heavy}"
    );
    let body = openai::openai_stream(DELTAS);
    let mut decode = Vec::new();
    for _ in 0..heavy {
        decode.push(openai::decode_openai(&body)?);
    }
    rows.push(Row::stats(
        &format!(
            "openai SSE decoding in-process, {DELTAS} chunks ({:.1} MB)",
            body.len() as f64 / 1e6
        ),
        &decode
            .iter()
            .map(|ms| DELTAS as f64 / (ms / 1e3))
            .collect::<Vec<_>>(),
        "deltas/s",
        0,
    ));
    let mut t = Vec::new();
    for _ in 0..heavy {
        let sb = Sandbox::new()?;
        let (url, server) = openai::serve_once(body.clone())?;
        let args = [
            "--json",
            "--base-url",
            &url,
            "--model",
            "bench",
            "--no-session",
            "go",
        ];
        let (ms, _) = json_run(&keel, &sb, &args)?;
        server.join().map_err(|_| "the bench server panicked")??;
        t.push(ms);
    }
    rows.push(Row::stats(
        &format!("json mode over HTTP (openai provider), {DELTAS} deltas: wall time"),
        &t,
        "ms",
        0,
    ));
    rows.push(Row::stats(
        "json mode over HTTP (openai provider): throughput",
        &t.iter()
            .map(|ms| DELTAS as f64 / (ms / 1e3))
            .collect::<Vec<_>>(),
        "deltas/s",
        0,
    ));
    rows.push(Row::single(
        "openai provider overhead per delta vs scripted (median difference)",
        (median(&t) - scripted_ms) * 1e3 / DELTAS as f64,
        "µs",
        2,
    ));
    responses::responses_bench(&keel, &mut rows, heavy)?;
    gemini::gemini_bench(&keel, &mut rows, heavy)?;

    // 6. RPC mode: request round trip, and prompt to first streamed event.
    let rpc_samples = runs_override.unwrap_or(RPC_SAMPLES);
    eprintln!(
        "[6/9] rpc mode: {RPC_ROUND_TRIPS} get_state round trips x{rpc_samples}, {RPC_PROMPTS} prompts"
    );
    let hello_args = [
        "--mode",
        "rpc",
        "--no-session",
        "--provider",
        "scripted",
        "--script",
        hello_s,
    ];
    let mut rate = Vec::new();
    for _ in 0..rpc_samples {
        let sb = Sandbox::new()?;
        let mut rpc = Rpc::spawn(&keel, &sb, &hello_args)?;
        for i in 0..RPC_WARMUP {
            rpc.get_state(&format!("w{i}"))?;
        }
        let start = Instant::now();
        for i in 0..RPC_ROUND_TRIPS {
            rpc.get_state(&format!("s{i}"))?;
        }
        let secs = start.elapsed().as_secs_f64();
        rpc.finish()?;
        rate.push(RPC_ROUND_TRIPS as f64 / secs);
    }
    rows.push(Row::stats(
        &format!("rpc mode: `get_state` round trips ({RPC_ROUND_TRIPS} sequential per sample)"),
        &rate,
        "requests/s",
        0,
    ));
    let answer = fixtures.path().join("rpc.json");
    fs::write(
        &answer,
        r#"{"turns":[{"repeat":true,"chunks":[{"text":"Hello"},{"text":" there"}]}]}"#,
    )
    .map_err(|e| format!("write fixture: {e}"))?;
    let answer_s = path_str(&answer)?;
    let sb = Sandbox::new()?;
    let mut rpc = Rpc::spawn(
        &keel,
        &sb,
        &[
            "--mode",
            "rpc",
            "--no-session",
            "--provider",
            "scripted",
            "--script",
            answer_s,
        ],
    )?;
    for i in 0..RPC_WARMUP {
        rpc.prompt(&format!("w{i}"))?;
    }
    let mut first = Vec::new();
    for i in 0..RPC_PROMPTS {
        first.push(rpc.prompt(&format!("p{i}"))?.as_secs_f64() * 1e3);
    }
    rpc.finish()?;
    rows.push(Row::stats(
        &format!("rpc mode: prompt → first `message_update` ({RPC_PROMPTS} prompts, one process)"),
        &first,
        "ms",
        3,
    ));
    rows.push(Row::single(
        "rpc mode: prompt → first `message_update`, p90",
        percentile(&first, 0.9),
        "ms",
        3,
    ));

    // 7. TUI rendering, in process: the same `tui::draw` the binary uses, into a Vec<u8>.
    eprintln!("[7/9] tui: bytes per streamed token and frame time");
    tui::tui_bench(&mut rows, heavy)?;

    // 8. The daemon: socket latency against in-process RPC, fan-out, replay, memory.
    eprintln!("[8/9] daemon: latency, throughput, replay, memory x{heavy}");
    daemon::daemon_bench(&keel, hello_s, &mut rows, heavy)?;
    remote::remote_bench(&keel, hello_s, &mut rows)?;
    eprintln!("[9/9] journal: events/s with and without NATS, spool flush x{heavy}");
    journal::journal_bench(&keel, &mut rows, heavy)?;

    let runs = format!("{quick} quick / {heavy} heavy / {rpc_samples} rpc samples");
    report(&keel, &rows, &runs)
}

/// Row 2 (`KEEL_BENCH_ONLY=json`): JSON-mode throughput on the 100k-delta flood: wall time,
/// deltas/s, events/s (the wire lines the session's link carries), bytes and lines. Returns
/// the median wall time in ms.
fn json_rows(keel: &Path, big_s: &str, rows: &mut Vec<Row>, heavy: usize) -> Res<f64> {
    eprintln!("[2/9] json mode, {DELTAS} deltas x{heavy}");
    let mut t = Vec::new();
    let mut bytes = 0usize;
    let mut lines = 0usize;
    for _ in 0..heavy {
        let sb = Sandbox::new()?;
        let args = [
            "--mode",
            "json",
            "--provider",
            "scripted",
            "--script",
            big_s,
            "--no-session",
            "go",
        ];
        let (ms, out) = json_run(keel, &sb, &args)?;
        bytes = out.len();
        lines = out.iter().filter(|b| **b == b'\n').count();
        t.push(ms);
    }
    let scripted_ms = median(&t);
    rows.push(Row::stats(
        &format!("json mode, {DELTAS} text deltas: wall time"),
        &t,
        "ms",
        0,
    ));
    let rate: Vec<f64> = t.iter().map(|ms| DELTAS as f64 / (ms / 1e3)).collect();
    rows.push(Row::stats("json mode: throughput", &rate, "deltas/s", 0));
    // Every line is one event of the session's stream through the client link (the header and
    // the result line aside): what the one client path costs per event.
    let events: Vec<f64> = t
        .iter()
        .map(|ms| lines.saturating_sub(2) as f64 / (ms / 1e3))
        .collect();
    rows.push(Row::stats(
        "json mode: events through the link",
        &events,
        "events/s",
        0,
    ));
    rows.push(Row::single(
        "json mode: stdout bytes per delta",
        bytes as f64 / DELTAS as f64,
        "bytes",
        1,
    ));
    rows.push(Row::single(
        "json mode: stdout lines",
        lines as f64,
        "lines",
        0,
    ));
    Ok(scripted_ms)
}

/// Rows 2 and 3 (`KEEL_BENCH_ONLY=run`): JSON-mode throughput, print-mode wall time and peak
/// RSS. Returns the scripted JSON run's median wall time in ms.
fn run_rows(
    keel: &Path,
    big_s: &str,
    hello_s: &str,
    rows: &mut Vec<Row>,
    heavy: usize,
) -> Res<f64> {
    let scripted_ms = json_rows(keel, big_s, rows, heavy)?;

    // 3. Peak RSS of print mode.
    eprintln!("[3/9] print mode peak RSS x{heavy} (small, then big)");
    print_rows(keel, big_s, hello_s, rows, heavy)?;
    let me = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    for (label, script) in [("hello fixture", hello_s), ("100k-delta fixture", big_s)] {
        let mut kib = Vec::new();
        for _ in 0..heavy {
            let sb = Sandbox::new()?;
            let out = Command::new(&me)
                .env(CHILD_ENV, "1")
                .arg(keel)
                .arg(&sb.cwd)
                .arg(&sb.home)
                .args(["-p", "--provider", "scripted", "--script", script, "go"])
                .stdin(Stdio::null())
                .stderr(Stdio::inherit())
                .output()
                .map_err(|e| format!("cannot spawn rss helper: {e}"))?;
            if !out.status.success() {
                return Err(format!("rss helper failed ({})", out.status));
            }
            let text = String::from_utf8_lossy(&out.stdout);
            let v: f64 = text
                .trim()
                .parse()
                .map_err(|_| format!("rss helper printed {text:?}"))?;
            kib.push(v);
        }
        rows.push(Row::stats(
            &format!("print mode peak RSS, {label}"),
            &kib,
            "KiB",
            0,
        ));
    }

    Ok(scripted_ms)
}

/// Print mode's wall time (`keel -p`, session saved) for the hello and 100k-delta fixtures.
fn print_rows(
    keel: &Path,
    big_s: &str,
    hello_s: &str,
    rows: &mut Vec<Row>,
    heavy: usize,
) -> Res<()> {
    for (label, script) in [("hello fixture", hello_s), ("100k-delta fixture", big_s)] {
        let mut t = Vec::new();
        for _ in 0..heavy {
            let sb = Sandbox::new()?;
            let start = Instant::now();
            let out = keel_cmd(keel, &sb.cwd, &sb.home)
                .args(["-p", "--provider", "scripted", "--script", script, "go"])
                .stdin(Stdio::null())
                .output()
                .map_err(|e| format!("cannot spawn keel: {e}"))?;
            if !out.status.success() {
                return Err(format!("print run failed ({})", out.status));
            }
            t.push(start.elapsed().as_secs_f64() * 1e3);
        }
        rows.push(Row::stats(
            &format!("print mode (-p, session saved), {label}: wall time"),
            &t,
            "ms",
            1,
        ));
    }
    Ok(())
}

/// Prints the result table in markdown, with the binary, machine and run counts.
fn report(keel: &Path, rows: &[Row], runs: &str) -> Res<()> {
    let version = Command::new(keel)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let nproc = std::thread::available_parallelism()
        .map(|n| n.get().to_string())
        .unwrap_or_else(|_| "?".into());
    let mut report = String::new();
    let _ = writeln!(report, "## keel benchmark\n");
    let _ = writeln!(
        report,
        "- binary: `{}` ({version})\n- machine: {} {}, {nproc} CPUs (available_parallelism)\n- runs: {runs} (KEEL_BENCH_RUNS overrides all counts)\n",
        keel.display(),
        std::env::consts::OS,
        std::env::consts::ARCH,
    );
    let _ = writeln!(report, "| benchmark | median | min | max | unit |");
    let _ = writeln!(report, "|---|---:|---:|---:|---|");
    for r in rows {
        let _ = writeln!(
            report,
            "| {} | {} | {} | {} | {} |",
            r.name, r.median, r.min, r.max, r.unit
        );
    }
    print!("{report}");
    Ok(())
}

/// Runs keel in JSON mode, checks it streamed exactly `DELTAS` text deltas, and returns the
/// wall time in ms and stdout.
fn json_run(keel: &Path, sb: &Sandbox, args: &[&str]) -> Res<(f64, Vec<u8>)> {
    let stderr_path = sb.cwd.join("keel.stderr");
    let start = Instant::now();
    let mut child = keel_cmd(keel, &sb.cwd, &sb.home)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(file(&stderr_path)?)
        .spawn()
        .map_err(|e| format!("cannot spawn keel: {e}"))?;
    let mut out = Vec::new();
    child
        .stdout
        .take()
        .ok_or("no stdout pipe")?
        .read_to_end(&mut out)
        .map_err(|e| format!("read stdout: {e}"))?;
    let status = child.wait().map_err(|e| format!("wait: {e}"))?;
    let elapsed = start.elapsed();
    check_status(status, &stderr_path)?;
    let needle = b"\"text_delta\"";
    let deltas = out
        .split(|b| *b == b'\n')
        .filter(|l| l.windows(needle.len()).any(|w| w == needle))
        .count();
    if deltas as u64 != DELTAS {
        return Err(format!(
            "json run streamed {deltas} text_delta lines, expected {DELTAS}"
        ));
    }
    Ok((elapsed.as_secs_f64() * 1e3, out))
}

/// One `keel --mode rpc` process driven over its stdin and stdout, one request at a time.
struct Rpc {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    line: String,
    stderr_path: PathBuf,
}

impl Rpc {
    fn spawn(keel: &Path, sb: &Sandbox, args: &[&str]) -> Res<Rpc> {
        let stderr_path = sb.cwd.join("keel.stderr");
        let mut child = keel_cmd(keel, &sb.cwd, &sb.home)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(file(&stderr_path)?)
            .spawn()
            .map_err(|e| format!("cannot spawn keel: {e}"))?;
        let stdin = child.stdin.take().ok_or("no stdin pipe")?;
        let stdout = BufReader::new(child.stdout.take().ok_or("no stdout pipe")?);
        Ok(Rpc {
            child,
            stdin: Some(stdin),
            stdout,
            line: String::new(),
            stderr_path,
        })
    }

    /// Writes one request line (one write, unbuffered, so keel sees it at once).
    fn send(&mut self, line: &str) -> Res<()> {
        let stdin = self.stdin.as_mut().ok_or("stdin already closed")?;
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .map_err(|e| format!("write to keel: {e}"))
    }

    /// The next stdout line (without its newline); EOF is an error.
    fn next_line(&mut self) -> Res<&str> {
        self.line.clear();
        let n = self
            .stdout
            .read_line(&mut self.line)
            .map_err(|e| format!("read from keel: {e}"))?;
        if n == 0 {
            let stderr = fs::read_to_string(&self.stderr_path).unwrap_or_default();
            return Err(format!("keel closed stdout early; its stderr:\n{stderr}"));
        }
        Ok(self.line.trim_end())
    }

    /// One `get_state` round trip: send, then read to its response. An idle session emits no
    /// events, but a startup `notify` may come first, so non-response lines are skipped.
    fn get_state(&mut self, id: &str) -> Res<()> {
        self.send(&format!(r#"{{"id":"{id}","type":"get_state"}}"#))?;
        let want = format!(r#""id":"{id}","type":"response","command":"get_state","success":true"#);
        loop {
            let line = self.next_line()?;
            if line.contains(&want) {
                return Ok(());
            }
            if line.contains(r#""type":"response""#) {
                return Err(format!("unexpected answer to get_state {id}: {line}"));
            }
        }
    }

    /// Sends a prompt and returns the time from just before the write to the first
    /// `message_update` line, then reads on to `agent_settled`. A rejected prompt is an error.
    fn prompt(&mut self, id: &str) -> Res<Duration> {
        let start = Instant::now();
        self.send(&format!(
            r#"{{"id":"{id}","type":"prompt","message":"bench {id}"}}"#
        ))?;
        let mut first = None;
        loop {
            let line = self.next_line()?;
            if first.is_none() && line.contains(r#""type":"message_update""#) {
                first = Some(start.elapsed());
            } else if line.contains(r#""type":"response""#) && !line.contains(r#""success":true"#) {
                return Err(format!("prompt {id} failed: {line}"));
            } else if line.contains(r#""type":"agent_settled""#) {
                return first
                    .ok_or_else(|| format!("prompt {id} settled without a message_update"));
            }
        }
    }

    /// Closes stdin and checks that keel then exits 0.
    fn finish(mut self) -> Res<()> {
        drop(self.stdin.take());
        let mut rest = Vec::new();
        let _ = self.stdout.read_to_end(&mut rest);
        let status = self.child.wait().map_err(|e| format!("wait: {e}"))?;
        check_status(status, &self.stderr_path)
    }
}

/// A fresh cwd and KEEL_HOME for one run; both deleted on drop.
struct Sandbox {
    _dir: tempfile::TempDir,
    cwd: PathBuf,
    home: PathBuf,
}

impl Sandbox {
    fn new() -> Res<Sandbox> {
        let dir = tempfile::tempdir().map_err(|e| format!("tempdir: {e}"))?;
        // keel sees its cwd resolved (no symlinks), so the session dir must be derived from that.
        let root = dir
            .path()
            .canonicalize()
            .map_err(|e| format!("canonicalize: {e}"))?;
        let cwd = root.join("cwd");
        let home = root.join("home");
        fs::create_dir(&cwd).map_err(|e| format!("mkdir: {e}"))?;
        fs::create_dir(&home).map_err(|e| format!("mkdir: {e}"))?;
        Ok(Sandbox {
            _dir: dir,
            cwd,
            home,
        })
    }

    /// Starts keel with stdout and stderr discarded.
    fn spawn(&self, keel: &Path, args: &[&str]) -> Res<std::process::Child> {
        keel_cmd(keel, &self.cwd, &self.home)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot spawn keel: {e}"))
    }

    /// Runs keel with stdout discarded and returns the wall time; a failed run is an error.
    fn time_run(&self, keel: &Path, args: &[&str]) -> Res<Duration> {
        let stderr_path = self.cwd.join("keel.stderr");
        let mut cmd = keel_cmd(keel, &self.cwd, &self.home);
        cmd.args(args)
            .stdout(Stdio::null())
            .stderr(file(&stderr_path)?);
        let start = Instant::now();
        let status = cmd
            .status()
            .map_err(|e| format!("cannot spawn keel: {e}"))?;
        let elapsed = start.elapsed();
        check_status(status, &stderr_path)?;
        Ok(elapsed)
    }
}

/// keel with a clean environment: only PATH and KEEL_HOME, stdin empty.
fn keel_cmd(keel: &Path, cwd: &Path, home: &Path) -> Command {
    let mut cmd = Command::new(keel);
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("KEEL_HOME", home)
        .current_dir(cwd)
        .stdin(Stdio::null());
    cmd
}

fn file(path: &Path) -> Res<File> {
    File::create(path).map_err(|e| format!("create {}: {e}", path.display()))
}

fn path_str(p: &Path) -> Res<&str> {
    p.to_str()
        .ok_or_else(|| format!("non-UTF-8 path {}", p.display()))
}

fn check_status(status: std::process::ExitStatus, stderr_path: &Path) -> Res<()> {
    if status.success() {
        return Ok(());
    }
    let stderr = fs::read_to_string(stderr_path).unwrap_or_default();
    Err(format!("keel exited with {status}; its stderr:\n{stderr}"))
}

/// The release binary cargo built next to this bench (`target/release/keel`), built on demand.
fn keel_binary() -> Res<PathBuf> {
    let exe = if cfg!(windows) { "keel.exe" } else { "keel" };
    let mut candidates = Vec::new();
    // The bench runs from target/release/deps/; cargo builds the bin targets for benches.
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent()?.parent().map(Path::to_path_buf))
    {
        candidates.push(dir.join(exe));
    }
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    candidates.push(manifest.join("target/release").join(exe));
    if let Some(found) = candidates.iter().find(|p| p.is_file()) {
        return Ok(found.clone());
    }
    eprintln!("keel release binary not found; running cargo build --release --bin keel");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "--release", "--bin", "keel"])
        .current_dir(manifest)
        .status()
        .map_err(|e| format!("cannot run cargo build: {e}"))?;
    if !status.success() {
        return Err(format!("cargo build --release failed ({status})"));
    }
    candidates
        .into_iter()
        .find(|p| p.is_file())
        .ok_or_else(|| "cargo build succeeded but target/release/keel is missing".into())
}

/// One table row, already formatted.
struct Row {
    name: String,
    median: String,
    min: String,
    max: String,
    unit: &'static str,
}

impl Row {
    fn stats(name: &str, v: &[f64], unit: &'static str, decimals: usize) -> Row {
        let min = v.iter().copied().fold(f64::INFINITY, f64::min);
        let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Row {
            name: name.to_string(),
            median: format!("{:.*}", decimals, median(v)),
            min: format!("{min:.decimals$}"),
            max: format!("{max:.decimals$}"),
            unit,
        }
    }

    fn single(name: &str, v: f64, unit: &'static str, decimals: usize) -> Row {
        Row {
            name: name.to_string(),
            median: format!("{v:.decimals$}"),
            min: "-".into(),
            max: "-".into(),
            unit,
        }
    }
}

/// Nearest-rank percentile, `p` in (0, 1].
fn percentile(v: &[f64], p: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    if s.is_empty() {
        return f64::NAN;
    }
    let rank = (p * s.len() as f64).ceil() as usize;
    s[rank.clamp(1, s.len()) - 1]
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}
