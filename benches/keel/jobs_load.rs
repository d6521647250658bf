//! The jobs rows under load (KEEL_BENCH_ONLY=jobs; issue 47's performance goals), against a
//! real `keel daemon` in a temp KEEL_HOME and a session whose scripted model starts the jobs
//! (in the session's default sandbox):
//!
//! 1. **16 jobs each printing 1 MiB/s** for [`secs`] seconds (KEEL_BENCH_JOBS_SECS, default
//!    30): a python3 loop writing a 64 KiB chunk every 62.5 ms, each chunk starting with its
//!    `time.time_ns()` stamp. The daemon's VmRSS (sampled every 20 ms: its peak, and at the
//!    end once every job ended) against the same daemon's with the session open and no job
//!    (the floor): goal peak ≤ floor + 48 MiB. A client attached to the session reads job 1's
//!    output as it is told of it (each `job_output` event → `read_job` from the offset it
//!    reached, as `keel attach --job` does) and times each chunk from its stamp to the moment
//!    its last byte arrived: goal median ≤ 20 ms. The floor of that latency: the same with one
//!    job alone.
//! 2. **An idle session with 10 sleeping jobs** (`sleep 1000`): the daemon's CPU time
//!    (utime + stime, in clock ticks) over [`IDLE`] of idling, side by side with the same
//!    daemon over [`IDLE`] with the session open and no job (the floor): goal 0, no polling.
//!    Its wake-ups (context switches over its threads) beside them: a timer shows there long
//!    before it adds up to a tick.
//!
//! The connection here speaks the daemon's current protocol (`keel::wire::protocol::PROTOCOL`)
//! and opens sessions with a typed spec, as `keel` itself does.

use std::collections::{HashMap, VecDeque};
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use super::daemon::Daemon;
use super::{median, path_str, percentile, Res, Row, Sandbox};

/// Jobs of the load run (the default `jobs.maxLive`).
const JOBS: usize = 16;
/// One chunk a job writes (64 KiB), every 62.5 ms: 1 MiB/s.
const CHUNK: u64 = 64 * 1024;
/// The stamp at the start of each chunk: 20 digits of nanoseconds and a space.
const STAMP: usize = 21;
/// Sleeping jobs of the idle run, and how long each idle window lasts.
const SLEEPERS: usize = 10;
const IDLE: Duration = Duration::from_secs(10);
/// How often the daemon's VmRSS is sampled.
const SAMPLE: Duration = Duration::from_millis(20);

/// The load run's length in seconds: KEEL_BENCH_JOBS_SECS, 30 when unset.
fn secs() -> Res<u64> {
    match std::env::var("KEEL_BENCH_JOBS_SECS") {
        Ok(v) => {
            v.parse::<u64>().ok().filter(|n| *n > 0).ok_or_else(|| {
                format!("KEEL_BENCH_JOBS_SECS must be a positive integer, got {v:?}")
            })
        }
        Err(_) => Ok(30),
    }
}

/// The job's program: `python3 flood.py SECS` writes SECS × 16 chunks on schedule.
const FLOOD: &str = r#"import os, sys, time
secs = float(sys.argv[1])
size, period = 65536, 0.0625
fill = b"x" * (size - 22) + b"\n"
t0 = time.monotonic()
for k in range(int(secs / period)):
    wait = t0 + k * period - time.monotonic()
    if wait > 0:
        time.sleep(wait)
    buf = memoryview(b"%020d " % time.time_ns() + fill)
    while buf:
        buf = buf[os.write(1, buf):]
"#;

/// A script whose turns are: a text answer (the warm-up), `n` `bash` calls of `command` run in
/// the background, and a text answer.
fn script(dir: &Path, name: &str, command: &str, n: usize) -> Res<String> {
    let calls: Vec<Value> = (0..n)
        .map(|i| {
            json!({"toolCall": {"id": format!("c{i}"), "name": "bash",
                "arguments": {"command": command, "run_in_background": true}}})
        })
        .collect();
    let turns = json!({"turns": [
        {"chunks": [{"text": "ready"}]},
        {"chunks": calls},
        {"chunks": [{"text": "started"}]},
    ]});
    let path = dir.join(name);
    fs::write(&path, turns.to_string()).map_err(|e| format!("write script: {e}"))?;
    Ok(path_str(&path)?.to_string())
}

/// One connection to the daemon: requests are numbered, answers and notifications read as
/// JSON lines (the notifications read while waiting for an answer are kept for [`Conn::recv`]).
struct Conn {
    r: BufReader<UnixStream>,
    w: UnixStream,
    next: u64,
    line: String,
    kept: VecDeque<Value>,
}

impl Conn {
    fn open(d: &Daemon) -> Res<Conn> {
        let w = UnixStream::connect(&d.socket).map_err(|e| format!("connect: {e}"))?;
        w.set_read_timeout(Some(Duration::from_secs(120)))
            .map_err(|e| e.to_string())?;
        let r = BufReader::with_capacity(1 << 20, w.try_clone().map_err(|e| e.to_string())?);
        let mut c = Conn {
            r,
            w,
            next: 0,
            line: String::new(),
            kept: VecDeque::new(),
        };
        let version = keel::wire::protocol::PROTOCOL;
        c.call(
            "daemon/hello",
            json!({"protocolVersion": version, "client": {"name": "bench", "version": "0"}}),
        )?;
        Ok(c)
    }

    fn send(&mut self, method: &str, params: Value) -> Res<u64> {
        self.next += 1;
        let req = json!({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params});
        self.w
            .write_all(format!("{req}\n").as_bytes())
            .map_err(|e| format!("write to daemon: {e}"))?;
        Ok(self.next)
    }

    fn recv(&mut self) -> Res<Value> {
        if let Some(v) = self.kept.pop_front() {
            return Ok(v);
        }
        self.read()
    }

    fn read(&mut self) -> Res<Value> {
        self.line.clear();
        let n = self
            .r
            .read_line(&mut self.line)
            .map_err(|e| format!("read from daemon: {e}"))?;
        if n == 0 {
            return Err("the daemon closed the connection".into());
        }
        serde_json::from_str(&self.line).map_err(|e| format!("{e}: {}", self.line))
    }

    /// Sends a request and returns its result, skipping notifications.
    fn call(&mut self, method: &str, params: Value) -> Res<Value> {
        let id = self.send(method, params)?;
        loop {
            let v = self.read()?;
            if v.get("id") == Some(&json!(id)) {
                return v
                    .get("result")
                    .cloned()
                    .ok_or_else(|| format!("{method} failed: {v}"));
            }
            self.kept.push_back(v);
        }
    }

    /// Opens a scripted session in `sb`'s workspace and attaches to it: its id.
    fn session(&mut self, sb: &Sandbox, script: &str) -> Res<String> {
        let argv: Vec<String> = ["--no-session", "--provider", "scripted", "--script", script]
            .into_iter()
            .map(String::from)
            .collect();
        let cli = keel::cli::spec::parse_argv(&argv).map_err(|e| format!("{e:?}"))?;
        let spec = keel::cli::spec::of(&cli, Path::new("/")).map_err(|e| format!("{e:?}"))?;
        let spec = serde_json::to_value(spec).map_err(|e| e.to_string())?;
        let r = self.call(
            "session/open",
            json!({"cwd": path_str(&sb.cwd)?, "spec": spec}),
        )?;
        let id = r["sessionId"].as_str().ok_or("no sessionId")?.to_string();
        self.call("session/attach", json!({"sessionId": id}))?;
        Ok(id)
    }

    /// Prompts the session and reads its events until the run settled and `ended` jobs ended.
    fn prompt(&mut self, id: &str, message: &str, started: usize) -> Res<()> {
        self.call("prompt", json!({"sessionId": id, "message": message}))?;
        let (mut settled, mut seen) = (false, 0);
        while !settled || seen < started {
            let v = self.recv()?;
            match event_type(&v) {
                Some("agent_settled") => settled = true,
                Some("job_started") => seen += 1,
                _ => lagged(&v)?,
            }
        }
        Ok(())
    }
}

fn event_type(v: &Value) -> Option<&str> {
    v["params"]["event"]["type"].as_str()
}

/// A `daemon/lagged` notification is an error: the client was dropped.
fn lagged(v: &Value) -> Res<()> {
    match v["method"] == "daemon/lagged" {
        true => Err(format!("the bench's client was dropped: {v}")),
        false => Ok(()),
    }
}

/// Samples the daemon's VmRSS every [`SAMPLE`] until `stop`: the highest (KiB).
fn sampler(d: &Daemon, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<f64> {
    let status = format!("/proc/{}/status", d.pid());
    std::thread::spawn(move || {
        let mut peak = 0f64;
        while !stop.load(Ordering::Relaxed) {
            if let Some(kib) = fs::read_to_string(&status).ok().and_then(|s| vm_rss(&s)) {
                peak = peak.max(kib);
            }
            std::thread::sleep(SAMPLE);
        }
        peak
    })
}

fn vm_rss(status: &str) -> Option<f64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// The daemon's CPU time so far, in clock ticks (utime + stime, all its threads).
fn ticks(d: &Daemon) -> Res<u64> {
    let stat = fs::read_to_string(format!("/proc/{}/stat", d.pid()))
        .map_err(|e| format!("daemon stat: {e}"))?;
    let (_, after) = stat.rsplit_once(')').ok_or("no ) in /proc stat")?;
    let f: Vec<&str> = after.split_whitespace().collect();
    let field = |i: usize| -> Res<u64> {
        f.get(i)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| "short /proc stat".into())
    };
    // After the command name: state is field 0, utime 11, stime 12.
    Ok(field(11)? + field(12)?)
}

fn now_ns() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128)
}

/// What a client following one job saw: the latency of each whole chunk (ms).
#[derive(Default)]
struct Follow {
    /// The offset read up to.
    have: u64,
    /// The current chunk's stamp bytes so far.
    head: Vec<u8>,
    latencies: Vec<f64>,
    dropped: u64,
}

impl Follow {
    /// Takes `data` (from offset `from`) that arrived at `now` (ns since the epoch).
    fn take(&mut self, from: u64, data: &[u8], now: i128) -> Res<()> {
        if from != self.have {
            // Bytes left the ring before they were read: count them, start a chunk afresh.
            self.dropped += from.saturating_sub(self.have);
            self.head.clear();
        }
        let (mut off, mut rest) = (from, data);
        while !rest.is_empty() {
            let at = off % CHUNK;
            let n = rest.len().min((CHUNK - at) as usize);
            if (at as usize) < STAMP {
                let want = (STAMP - at as usize).min(n);
                self.head.extend_from_slice(&rest[..want]);
            }
            if at + n as u64 == CHUNK && self.head.len() == STAMP {
                let stamp: i128 = std::str::from_utf8(&self.head[..STAMP - 1])
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(|| format!("a chunk without a stamp at offset {off}"))?;
                self.latencies.push((now - stamp) as f64 / 1e6);
            }
            if at + n as u64 == CHUNK {
                self.head.clear();
            }
            off += n as u64;
            rest = &rest[n..];
        }
        self.have = off;
        Ok(())
    }
}

/// One load run of `jobs` flooding jobs for `secs`: (floor KiB, peak KiB, end KiB, latencies
/// of job 1's chunks in ms, bytes job 1 wrote that its client missed).
struct Load {
    floor: f64,
    peak: f64,
    end: f64,
    latencies: Vec<f64>,
    dropped: u64,
}

fn load_run(keel: &Path, jobs: usize, secs: u64) -> Res<Load> {
    let sb = Sandbox::new()?;
    fs::write(sb.cwd.join("flood.py"), FLOOD).map_err(|e| format!("write flood.py: {e}"))?;
    let script = script(
        &sb.cwd,
        "flood.json",
        &format!("python3 flood.py {secs}"),
        jobs,
    )?;
    let d = Daemon::start(keel, &sb)?;
    let mut c = Conn::open(&d)?;
    let id = c.session(&sb, &script)?;
    c.prompt(&id, "warm up", 0)?;
    std::thread::sleep(Duration::from_millis(500));
    let floor = d.rss_kib()?;
    let stop = Arc::new(AtomicBool::new(false));
    let peak = sampler(&d, stop.clone());
    let run = follow(&mut c, &id, jobs, secs);
    stop.store(true, Ordering::Relaxed);
    let peak = peak.join().map_err(|_| "the sampler panicked")?;
    let follow = run?;
    std::thread::sleep(Duration::from_millis(500));
    let end = d.rss_kib()?;
    if follow.latencies.is_empty() {
        return Err("the client saw no whole chunk of job 1".into());
    }
    Ok(Load {
        floor,
        peak: peak.max(end),
        end,
        latencies: follow.latencies,
        dropped: follow.dropped,
    })
}

/// Starts the jobs and follows job 1 until every job ended: what its client saw.
fn follow(c: &mut Conn, id: &str, jobs: usize, secs: u64) -> Res<Follow> {
    c.send("prompt", json!({"sessionId": id, "message": "go"}))?;
    let mut f = Follow::default();
    // The end of job 1's output the client was told of, and the `read_job` in flight.
    let (mut told, mut asked): (u64, Option<u64>) = (0, None);
    let (mut ended, mut settled) = (0, false);
    let deadline = Instant::now() + Duration::from_secs(secs + 60);
    while ended < jobs || !settled || asked.is_some() {
        if Instant::now() > deadline {
            return Err(format!("{ended} of {jobs} jobs ended in time"));
        }
        let v = c.recv()?;
        let now = now_ns();
        match event_type(&v) {
            Some("job_output") if v["params"]["event"]["id"] == 1 => {
                told = told.max(v["params"]["event"]["next"].as_u64().unwrap_or(0));
            }
            Some("job_ended") => ended += 1,
            Some("agent_settled") => settled = true,
            Some(_) => {}
            None if v.get("id").is_some() && asked.is_some_and(|a| v["id"] == a) => {
                asked = None;
                let r = v
                    .get("result")
                    .ok_or_else(|| format!("read_job failed: {v}"))?;
                let data = r["data"].as_str().ok_or("read_job without data")?;
                let bytes = keel::wire::pi::data::decode_base64(data).ok_or("bad base64")?;
                f.take(
                    r["from"].as_u64().ok_or("read_job without from")?,
                    &bytes,
                    now,
                )?;
            }
            None => lagged(&v)?,
        }
        if asked.is_none() && told > f.have {
            let since = f.have;
            asked = Some(c.send(
                "read_job",
                json!({"sessionId": id, "jobId": 1, "since": since}),
            )?);
        }
    }
    Ok(f)
}

/// What the daemon spent over one idle window: CPU clock ticks (utime + stime) and wake-ups
/// (context switches, summed over its threads: a timer or a poll shows here long before it
/// shows in ticks).
#[derive(Clone, Copy)]
struct Idle {
    ticks: u64,
    wakeups: u64,
}

/// Each thread's context switches so far (voluntary and not), by thread id.
fn switches(d: &Daemon) -> Res<HashMap<String, u64>> {
    let tasks = format!("/proc/{}/task", d.pid());
    let mut by = HashMap::new();
    for e in fs::read_dir(&tasks).map_err(|e| format!("{tasks}: {e}"))? {
        let e = e.map_err(|e| e.to_string())?;
        // A thread that ended meanwhile has no status: it is not counted.
        let Ok(status) = fs::read_to_string(e.path().join("status")) else {
            continue;
        };
        let n: u64 = status
            .lines()
            .filter_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.ends_with("ctxt_switches")
                    .then(|| v.trim().parse::<u64>().ok())?
            })
            .sum();
        by.insert(e.file_name().to_string_lossy().into_owned(), n);
    }
    Ok(by)
}

/// The wake-ups between two [`switches`] readings (a thread that ended in between: its
/// switches after the first reading are lost, which only lowers the count).
fn wakeups(before: &HashMap<String, u64>, after: &HashMap<String, u64>) -> u64 {
    after
        .iter()
        .map(|(tid, n)| n - before.get(tid).copied().unwrap_or(0).min(*n))
        .sum()
}

/// One idle run: the daemon over [`IDLE`] with the session open and no job (the floor), then
/// over [`IDLE`] with [`SLEEPERS`] sleeping jobs.
fn idle_run(keel: &Path) -> Res<(Idle, Idle)> {
    let sb = Sandbox::new()?;
    let script = script(&sb.cwd, "sleep.json", "sleep 1000", SLEEPERS)?;
    let d = Daemon::start(keel, &sb)?;
    let mut c = Conn::open(&d)?;
    let id = c.session(&sb, &script)?;
    c.prompt(&id, "warm up", 0)?;
    let window = |c: &mut Conn| -> Res<Idle> {
        // What the last request set going (its writes, its log lines) is done first.
        std::thread::sleep(Duration::from_secs(1));
        c.call("ping", json!({}))?;
        std::thread::sleep(Duration::from_millis(200));
        let (ticks0, switches0) = (ticks(&d)?, switches(&d)?);
        std::thread::sleep(IDLE);
        Ok(Idle {
            ticks: ticks(&d)? - ticks0,
            wakeups: wakeups(&switches0, &switches(&d)?),
        })
    };
    let floor = window(&mut c)?;
    c.prompt(&id, "start them", SLEEPERS)?;
    let jobs = c.call("get_jobs", json!({"sessionId": id}))?;
    let running = jobs["jobs"]
        .as_array()
        .map_or(0, |j| j.iter().filter(|j| j["state"] == "running").count());
    if running != SLEEPERS {
        return Err(format!(
            "{running} sleeping jobs run, not {SLEEPERS}: {jobs}"
        ));
    }
    let with = window(&mut c)?;
    Ok((floor, with))
}

/// The rows (see the module's docs); `runs` samples of each.
pub fn jobs_load_bench(keel: &Path, rows: &mut Vec<Row>, runs: usize) -> Res<()> {
    let secs = secs()?;
    let mut loads = Vec::new();
    let mut alone = Vec::new();
    for _ in 0..runs {
        eprintln!("jobs: {JOBS} jobs × 1 MiB/s for {secs} s, then 1 job alone");
        loads.push(load_run(keel, JOBS, secs)?);
        alone.push(median(&load_run(keel, 1, secs)?.latencies));
    }
    let mib = |f: fn(&Load) -> f64| -> Vec<f64> { loads.iter().map(|l| f(l) / 1024.0).collect() };
    let what = format!("{JOBS} jobs × 1 MiB/s for {secs} s");
    rows.push(Row::stats(
        "jobs: daemon VmRSS, session open and no job (floor)",
        &mib(|l| l.floor),
        "MiB",
        1,
    ));
    rows.push(Row::stats(
        &format!("jobs: daemon VmRSS peak, {what}"),
        &mib(|l| l.peak),
        "MiB",
        1,
    ));
    rows.push(Row::stats(
        "jobs: VmRSS peak − floor (goal ≤ 48 MiB)",
        &mib(|l| l.peak - l.floor),
        "MiB",
        1,
    ));
    rows.push(Row::stats(
        "jobs: VmRSS once every job ended − floor (the ended jobs' rings stay)",
        &mib(|l| l.end - l.floor),
        "MiB",
        1,
    ));
    let ratio: Vec<f64> = loads.iter().map(|l| l.peak / l.floor).collect();
    rows.push(Row::stats("jobs: VmRSS peak ÷ floor", &ratio, "x", 2));
    let per_run: Vec<f64> = loads.iter().map(|l| median(&l.latencies)).collect();
    let all: Vec<f64> = loads.iter().flat_map(|l| l.latencies.clone()).collect();
    rows.push(Row::stats(
        "jobs: one job's output to a client following it, 1 job alone (floor): median latency",
        &alone,
        "ms",
        2,
    ));
    rows.push(Row::stats(
        &format!("jobs: the same, {what}: median latency per run (goal ≤ 20 ms)"),
        &per_run,
        "ms",
        2,
    ));
    rows.push(Row::single(
        &format!("jobs: the same, p95 over {} chunks", all.len()),
        percentile(&all, 0.95),
        "ms",
        2,
    ));
    rows.push(Row::single(
        "jobs: latency under load ÷ alone (medians)",
        median(&per_run) / median(&alone),
        "x",
        2,
    ));
    let dropped: Vec<f64> = loads.iter().map(|l| l.dropped as f64).collect();
    rows.push(Row::stats(
        "jobs: bytes the following client missed (left the ring unread)",
        &dropped,
        "B",
        0,
    ));

    let (mut floor, mut with) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        eprintln!(
            "jobs: the daemon idle {} s, then {} s with {SLEEPERS} sleeping jobs",
            IDLE.as_secs(),
            IDLE.as_secs()
        );
        let (f, w) = idle_run(keel)?;
        floor.push(f);
        with.push(w);
    }
    let secs = IDLE.as_secs();
    let of =
        |v: &[Idle], f: fn(&Idle) -> u64| -> Vec<f64> { v.iter().map(|i| f(i) as f64).collect() };
    rows.push(Row::stats(
        &format!("jobs: daemon CPU over {secs} s idle, session open and no job (floor)"),
        &of(&floor, |i| i.ticks),
        "ticks",
        0,
    ));
    rows.push(Row::stats(
        &format!("jobs: daemon CPU over {secs} s idle with {SLEEPERS} sleeping jobs (goal 0)"),
        &of(&with, |i| i.ticks),
        "ticks",
        0,
    ));
    rows.push(Row::stats(
        &format!("jobs: daemon wake-ups over {secs} s idle, no job (floor)"),
        &of(&floor, |i| i.wakeups),
        "switches",
        0,
    ));
    rows.push(Row::stats(
        &format!("jobs: daemon wake-ups over {secs} s idle with {SLEEPERS} sleeping jobs"),
        &of(&with, |i| i.wakeups),
        "switches",
        0,
    ));
    Ok(())
}
