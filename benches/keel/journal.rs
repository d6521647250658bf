//! The journal rows of the bench (issue 17 §3): events per second to one client through the
//! daemon with the event journal off and on (a live `nats-server -js` on 127.0.0.1), how long
//! the journal takes to have JetStream ack the whole run, and the spool's flush rate after an
//! outage (a run spooled with no server, then the server started). Needs `nats-server`
//! (`KEEL_NATS_SERVER`, the PATH or /usr/sbin); says so and adds no rows without one. Every
//! process it starts is killed when its guard drops.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::daemon::{self, Conn, Daemon, End};
use super::{median, Res, Row, Sandbox};

/// Text deltas of each run (as the daemon's one-client row).
const DELTAS: u64 = 200_000;

/// A nats-server this bench started; killed on drop.
struct Nats(Child);

impl Drop for Nats {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn nats_server() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("KEEL_NATS_SERVER") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin")])
        .map(|d| d.join("nats-server"))
        .find(|p| p.is_file())
}

fn free_port() -> Res<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    Ok(l.local_addr().map_err(|e| e.to_string())?.port())
}

/// Starts a JetStream server on `port` with its store in `dir`; returns once it is ready.
fn nats(bin: &Path, port: u16, dir: &Path) -> Res<Nats> {
    let mut child = Command::new(bin)
        .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start nats-server: {e}"))?;
    let err = child.stderr.take().ok_or("no stderr pipe")?;
    let guard = Nats(child);
    let mut err = BufReader::new(err);
    let mut line = String::new();
    loop {
        line.clear();
        if err.read_line(&mut line).map_err(|e| e.to_string())? == 0 {
            return Err("nats-server ended before it was ready".into());
        }
        if line.contains("Server is ready") {
            break;
        }
    }
    std::thread::spawn(move || for _ in err.lines() {});
    Ok(guard)
}

/// `daemon/status`'s journal object.
fn journal(c: &mut Conn) -> Res<Value> {
    Ok(c.call("daemon/status", json!({}))?["journal"].clone())
}

/// Polls the journal every 2 ms until `done` holds (at most 120 s); when it did.
fn poll(c: &mut Conn, done: impl Fn(&Value) -> bool) -> Res<Instant> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let j = journal(c)?;
        if done(&j) {
            return Ok(Instant::now());
        }
        if Instant::now() > deadline {
            return Err(format!("the journal did not get there: {j}"));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// What one run measured.
struct Run {
    /// Events per second the client read.
    rate: f64,
    /// ms from the prompt until JetStream had acked every event (when asked for).
    acked: Option<f64>,
    /// The daemon's CPU time per event, µs (until the client had read every event, or
    /// until every event was acked when asked for).
    cpu_us: f64,
}

/// One run of [`DELTAS`] deltas; with `acked`, it waits until JetStream acked them all.
fn run(keel: &Path, script: &str, journal_url: Option<&str>, acked: bool) -> Res<Run> {
    let sb = Sandbox::new()?;
    let flags: Vec<&str> = match journal_url {
        Some(u) => vec!["--journal", u, "--journal-host", "bench"],
        None => Vec::new(),
    };
    let d = Daemon::start_with(keel, &sb, &flags)?;
    let mut c = d.connect()?;
    let (id, _, seq) = daemon::open(&mut c, &sb, script)?;
    let cpu = d.cpu_secs()?;
    let start = Instant::now();
    c.send("prompt", json!({"sessionId": id, "message": "go"}))?;
    let r = c.read_events(seq, None)?;
    if r.end != End::Settled || r.events < DELTAS {
        return Err(format!("the client read {} events ({:?})", r.events, r.end));
    }
    let rate = r.events as f64 / (r.last - start).as_secs_f64();
    let acked = match acked {
        true => {
            let at = poll(&mut c, |j| {
                j["lag"] == 0 && j["published"].as_u64().unwrap_or(0) >= DELTAS
            })?;
            Some((at - start).as_secs_f64() * 1e3)
        }
        false => None,
    };
    let cpu_us = (d.cpu_secs()? - cpu) * 1e6 / r.events as f64;
    Ok(Run {
        rate,
        acked,
        cpu_us,
    })
}

/// The spool's flush after an outage: a run spooled with no server, then the server started.
/// `(records, ms from the server's start to the publisher's connect, records/s once connected)`.
fn flush(keel: &Path, bin: &Path, script: &str) -> Res<(u64, f64, f64)> {
    let sb = Sandbox::new()?;
    let port = free_port()?;
    let url = format!("nats://127.0.0.1:{port}");
    let d = Daemon::start_with(keel, &sb, &["--journal", &url, "--journal-host", "bench"])?;
    let mut c = d.connect()?;
    let (id, _, seq) = daemon::open(&mut c, &sb, script)?;
    c.send("prompt", json!({"sessionId": id, "message": "go"}))?;
    c.read_events(seq, None)?;
    let spooled = poll(&mut c, |j| j["spooled"].as_u64().unwrap_or(0) >= DELTAS)
        .map(|_| ())
        .and_then(|()| journal(&mut c))?["lag"]
        .as_u64()
        .unwrap_or(0);
    let store = tempfile::tempdir().map_err(|e| e.to_string())?;
    let _server = nats(bin, port, store.path())?;
    let up = Instant::now();
    let connected = poll(&mut c, |j| j["connected"] == true)?;
    let done = poll(&mut c, |j| j["lag"] == 0)?;
    let rate = spooled as f64 / (done - connected).as_secs_f64();
    Ok((spooled, (connected - up).as_secs_f64() * 1e3, rate))
}

/// All journal rows; `heavy` samples of each.
pub fn journal_bench(keel: &Path, rows: &mut Vec<Row>, heavy: usize) -> Res<()> {
    let Some(bin) = nats_server() else {
        eprintln!("journal rows skipped: no nats-server (KEEL_NATS_SERVER, PATH or /usr/sbin)");
        return Ok(());
    };
    let scripts = tempfile::tempdir().map_err(|e| format!("tempdir: {e}"))?;
    let script = daemon::script(scripts.path(), "stream.json", DELTAS, None)?;
    let store = tempfile::tempdir().map_err(|e| e.to_string())?;
    let port = free_port()?;
    let _server = nats(&bin, port, store.path())?;
    let url = format!("nats://127.0.0.1:{port}");
    let dead = format!("nats://127.0.0.1:{}", free_port()?);
    let (mut off, mut on, mut acked) = (Vec::new(), Vec::new(), Vec::new());
    let mut spooling = Vec::new();
    let (mut cpu_off, mut cpu_on, mut cpu_spool) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..heavy {
        // Alternated, so that the machine's load falls on all alike.
        let r = run(keel, &script, None, false)?;
        off.push(r.rate);
        cpu_off.push(r.cpu_us);
        let r = run(keel, &script, Some(&url), true)?;
        on.push(r.rate);
        acked.extend(r.acked);
        cpu_on.push(r.cpu_us);
        let r = run(keel, &script, Some(&dead), false)?;
        spooling.push(r.rate);
        cpu_spool.push(r.cpu_us);
    }
    for (name, v) in [
        ("journal off", &cpu_off),
        ("spooling only", &cpu_spool),
        ("journal on, until every event was acked", &cpu_on),
    ] {
        rows.push(Row::stats(
            &format!("journal: daemon CPU per event, {name}"),
            v,
            "µs",
            2,
        ));
    }
    rows.push(Row::stats(
        &format!("journal off: events/s to 1 client ({DELTAS} deltas)"),
        &off,
        "events/s",
        0,
    ));
    rows.push(Row::stats(
        &format!("journal on (nats-server on 127.0.0.1): events/s to 1 client ({DELTAS} deltas)"),
        &on,
        "events/s",
        0,
    ));
    let cost = (1.0 - median(&on) / median(&off)) * 100.0;
    rows.push(Row::single(
        "journal: cost to the client's events/s (median difference)",
        cost,
        "%",
        1,
    ));
    rows.push(Row::stats(
        &format!("journal on, no server (spooling only): events/s to 1 client ({DELTAS} deltas)"),
        &spooling,
        "events/s",
        0,
    ));
    let cost = (1.0 - median(&spooling) / median(&off)) * 100.0;
    rows.push(Row::single(
        "journal: cost of spooling alone (median difference)",
        cost,
        "%",
        1,
    ));
    rows.push(Row::stats(
        "journal: prompt → every event acked by JetStream",
        &acked,
        "ms",
        0,
    ));
    let rate: Vec<f64> = acked.iter().map(|ms| DELTAS as f64 / (ms / 1e3)).collect();
    rows.push(Row::stats(
        "journal: events/s acked by JetStream (the run's events ÷ that time)",
        &rate,
        "events/s",
        0,
    ));
    let (mut reconnect, mut flushed) = (Vec::new(), Vec::new());
    let mut records = 0;
    for _ in 0..heavy {
        let (n, ms, rate) = flush(keel, &bin, &script)?;
        records = n;
        reconnect.push(ms);
        flushed.push(rate);
    }
    rows.push(Row::stats(
        "journal: server back → publisher connected (backoff, ≤ 5 s)",
        &reconnect,
        "ms",
        0,
    ));
    rows.push(Row::stats(
        &format!("journal: spool flush after an outage ({records} records)"),
        &flushed,
        "records/s",
        0,
    ));
    Ok(())
}
