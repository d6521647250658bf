//! The journal rows of the bench (issue 17 §3): events per second to one client through the
//! daemon with the event journal off and on (a live `nats-server -js` on 127.0.0.1), how long
//! the journal takes to have JetStream ack the whole run, and the spool's flush rate after an
//! outage (a run spooled with no server, then the server started). Also where the CPU goes
//! while a run streams (by thread of the daemon, nats-server, the client), and a floor: the
//! cost to a run without the journal while a bare NATS client, doing nothing else, publishes
//! the same records to the same server the way the journal does. Needs `nats-server`
//! (`KEEL_NATS_SERVER`, the PATH or /usr/sbin); says so and adds no rows without one. Every
//! process it starts is killed when its guard drops.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
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

impl Nats {
    fn pid(&self) -> u32 {
        self.0.id()
    }
}

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
    /// CPU µs per event from the prompt until the client had read every event, by part: the
    /// daemon's threads by name, `nats-server`, `client` (the bench's reading thread).
    split: BTreeMap<String, f64>,
    /// With a spool kept: every record the daemon spooled (subject, msg-id, payload).
    spooled: Vec<Spooled>,
    /// With a bare client: its records per second and CPU µs per record.
    bare: Option<(f64, f64)>,
}

/// A spool record as the journal would publish it.
struct Spooled {
    subject: String,
    msg_id: String,
    payload: String,
}

/// CPU seconds by thread name of process `pid` (threads of one name added up).
fn threads(pid: u32) -> Res<BTreeMap<String, f64>> {
    let mut by = BTreeMap::new();
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).map_err(|e| e.to_string())?;
    for t in tasks.flatten() {
        // A thread that ended meanwhile has no stat any more.
        let Ok(stat) = std::fs::read_to_string(t.path().join("stat")) else {
            continue;
        };
        let (comm, secs) = daemon::stat_cpu(&stat)?;
        *by.entry(comm.to_string()).or_insert(0.0) += secs;
    }
    Ok(by)
}

/// CPU seconds of the calling thread.
fn this_thread() -> Res<f64> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").map_err(|e| e.to_string())?;
    Ok(daemon::stat_cpu(&stat)?.1)
}

/// A snapshot of every part's CPU seconds (see [`Run::split`]).
fn parts(d: &Daemon, nats: Option<&Nats>) -> Res<BTreeMap<String, f64>> {
    let mut by = threads(d.pid())?;
    if let Some(n) = nats {
        by.insert("nats-server".into(), threads(n.pid())?.values().sum());
    }
    by.insert("client".into(), this_thread()?);
    Ok(by)
}

/// µs per event between two snapshots.
fn per_event(
    before: &BTreeMap<String, f64>,
    after: BTreeMap<String, f64>,
    events: u64,
) -> BTreeMap<String, f64> {
    after
        .into_iter()
        .map(|(k, v)| {
            let d = v - before.get(&k).copied().unwrap_or(0.0);
            (k, d * 1e6 / events as f64)
        })
        .collect()
}

/// Every record of the spool under `home` (the segments in order).
fn spool_records(home: &Path) -> Res<Vec<Spooled>> {
    let dir = home.join("journal");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).map_err(|e| e.to_string())?;
        // Whole lines only: the tap may be appending its last facts meanwhile.
        for line in text.split_inclusive('\n').filter(|l| l.ends_with('\n')) {
            let v: Value = serde_json::from_str(line).map_err(|e| format!("spool line: {e}"))?;
            let text = |k: &str| v[k].as_str().unwrap_or_default().to_string();
            out.push(Spooled {
                subject: text("subject"),
                msg_id: text("msgId"),
                payload: v["payload"].to_string(),
            });
        }
    }
    Ok(out)
}

/// How a run's events are journaled.
enum Journal<'a> {
    Off,
    /// To this server, waiting (after the client read every event) until all were acked.
    On(&'a str, &'a Nats),
    /// To a server that is not there: spooled only; the spool's records are returned.
    SpoolOnly(&'a str),
    /// Off, while a bare client publishes these records to this server from the prompt on.
    Bare(&'a Nats, u16, &'a [Spooled]),
}

/// One run of [`DELTAS`] deltas.
fn run(keel: &Path, script: &str, journal: Journal) -> Res<Run> {
    let sb = Sandbox::new()?;
    let (journal_url, acked, nats) = match &journal {
        Journal::Off => (None, false, None),
        Journal::On(url, n) => (Some(*url), true, Some(*n)),
        Journal::SpoolOnly(url) => (Some(*url), false, None),
        Journal::Bare(n, _, _) => (None, false, Some(*n)),
    };
    let flags: Vec<&str> = match journal_url {
        Some(u) => vec!["--journal", u, "--journal-host", "bench"],
        None => Vec::new(),
    };
    let d = Daemon::start_with(keel, &sb, &flags)?;
    let mut c = d.connect()?;
    let (id, _, seq) = daemon::open(&mut c, &sb, script)?;
    let batches = match journal {
        Journal::Bare(_, port, records) => Some((port, bare_batches(records), records.len())),
        _ => None,
    };
    let cpu = d.cpu_secs()?;
    let before = parts(&d, nats)?;
    let start = Instant::now();
    let bare = batches
        .map(|(port, batches, n)| std::thread::spawn(move || bare_publish(port, &batches, n)));
    c.send("prompt", json!({"sessionId": id, "message": "go"}))?;
    let r = c.read_events(seq, None)?;
    let split = per_event(&before, parts(&d, nats)?, r.events);
    let bare = match bare {
        Some(b) => Some(b.join().map_err(|_| "the bare publisher panicked")??),
        None => None,
    };
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
    let spooled = match journal {
        Journal::SpoolOnly(_) => {
            poll(&mut c, |j| j["spooled"].as_u64().unwrap_or(0) >= DELTAS)?;
            spool_records(&sb.home)?
        }
        _ => Vec::new(),
    };
    Ok(Run {
        rate,
        acked,
        cpu_us,
        split,
        spooled,
        bare,
    })
}

/// Records published before their JetStream ack is awaited, as the journal's publisher does.
const BARE_BATCH: usize = 512;

/// The records' protocol bytes as a bare client publishes them the way the journal's publisher
/// does: batches of [`BARE_BATCH`] with `Nats-Msg-Id` headers, every one but the last without
/// a reply subject (the last one's JetStream ack says the batch is stored). Built before the
/// run, so that the client has nothing to do during it but write and wait.
fn bare_batches(records: &[Spooled]) -> Vec<Vec<u8>> {
    let mut batches = Vec::new();
    for (n, batch) in records.chunks(BARE_BATCH).enumerate() {
        let mut buf = Vec::new();
        for (i, r) in batch.iter().enumerate() {
            let headers = format!("NATS/1.0\r\nNats-Msg-Id: {}\r\n\r\n", r.msg_id);
            let reply = match i + 1 == batch.len() {
                true => format!(" _INBOX.bare.{n}"),
                false => String::new(),
            };
            let total = headers.len() + r.payload.len();
            let head = format!("HPUB {}{reply} {} {total}\r\n", r.subject, headers.len());
            buf.extend_from_slice(head.as_bytes());
            buf.extend_from_slice(headers.as_bytes());
            buf.extend_from_slice(r.payload.as_bytes());
            buf.extend_from_slice(b"\r\n");
        }
        batches.push(buf);
    }
    batches
}

/// A bare NATS client on 127.0.0.1:`port` with nothing else to do: writes each batch of
/// [`bare_batches`] at once and waits for its ack. Returns its records per second and its CPU
/// µs per record.
fn bare_publish(port: u16, batches: &[Vec<u8>], records: usize) -> Res<(f64, f64)> {
    let mut w = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    w.set_nodelay(true).map_err(|e| e.to_string())?;
    w.set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(|e| e.to_string())?;
    let mut r = BufReader::new(w.try_clone().map_err(|e| e.to_string())?);
    let hello =
        "CONNECT {\"verbose\":false,\"pedantic\":false,\"headers\":true,\"protocol\":1}\r\n\
                 SUB _INBOX.bare.* 1\r\nPING\r\n";
    w.write_all(hello.as_bytes()).map_err(|e| e.to_string())?;
    bare_wait(&mut r, &mut w, false)?;
    let (start, cpu) = (Instant::now(), this_thread()?);
    for batch in batches {
        w.write_all(batch).map_err(|e| e.to_string())?;
        bare_wait(&mut r, &mut w, true)?;
    }
    let n = records as f64;
    let cpu_us = (this_thread()? - cpu) * 1e6 / n;
    Ok((n / start.elapsed().as_secs_f64(), cpu_us))
}

/// Reads the server's lines until a PONG (`ack` false) or a message on the reply inbox whose
/// body is a JetStream ack (`ack` true); answers PINGs.
fn bare_wait(r: &mut BufReader<TcpStream>, w: &mut TcpStream, ack: bool) -> Res<()> {
    let mut line = String::new();
    loop {
        line.clear();
        if r.read_line(&mut line).map_err(|e| e.to_string())? == 0 {
            return Err("nats-server closed the bare client's connection".into());
        }
        let l = line.trim_end();
        if l == "PING" {
            w.write_all(b"PONG\r\n").map_err(|e| e.to_string())?;
        } else if l == "PONG" && !ack {
            return Ok(());
        } else if l.starts_with("-ERR") {
            return Err(format!("nats-server: {l}"));
        } else if let Some(rest) = l.strip_prefix("MSG ").or_else(|| l.strip_prefix("HMSG ")) {
            let size: usize = rest
                .rsplit(' ')
                .next()
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| format!("a MSG line without a size: {l}"))?;
            let mut body = vec![0; size + 2];
            r.read_exact(&mut body).map_err(|e| e.to_string())?;
            let body = String::from_utf8_lossy(&body);
            if !body.contains("\"seq\"") {
                return Err(format!("not a JetStream ack: {body}"));
            }
            if ack {
                return Ok(());
            }
        }
    }
}

/// The spool's flush after an outage: a run spooled with no server, then the server started.
/// `(records, ms from the server's start to the publisher's connect, records/s once connected,
/// CPU µs per record of the publisher and of nats-server meanwhile)`.
fn flush(keel: &Path, bin: &Path, script: &str) -> Res<(u64, f64, f64, f64, f64)> {
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
    let server = nats(bin, port, store.path())?;
    let up = Instant::now();
    let connected = poll(&mut c, |j| j["connected"] == true)?;
    let before = parts(&d, Some(&server))?;
    let done = poll(&mut c, |j| j["lag"] == 0)?;
    let cpu = per_event(&before, parts(&d, Some(&server))?, spooled.max(1));
    let rate = spooled as f64 / (done - connected).as_secs_f64();
    let part = |p: &str| cpu.get(p).copied().unwrap_or(0.0);
    let ms = (connected - up).as_secs_f64() * 1e3;
    Ok((spooled, ms, rate, part("keel-publish"), part("nats-server")))
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
    let server = nats(&bin, port, store.path())?;
    let url = format!("nats://127.0.0.1:{port}");
    let dead = format!("nats://127.0.0.1:{}", free_port()?);
    let (mut off, mut on, mut acked) = (Vec::new(), Vec::new(), Vec::new());
    let (mut spooling, mut bare) = (Vec::new(), Vec::new());
    let (mut bare_rate, mut bare_cpu) = (Vec::new(), Vec::new());
    let (mut cpu_off, mut cpu_on, mut cpu_spool) = (Vec::new(), Vec::new(), Vec::new());
    let (mut split_off, mut split_on) = (Vec::new(), Vec::new());
    for _ in 0..heavy {
        // Alternated, so that the machine's load falls on all alike.
        let r = run(keel, &script, Journal::Off)?;
        off.push(r.rate);
        cpu_off.push(r.cpu_us);
        split_off.push(r.split);
        let r = run(keel, &script, Journal::On(&url, &server))?;
        on.push(r.rate);
        acked.extend(r.acked);
        cpu_on.push(r.cpu_us);
        split_on.push(r.split);
        let r = run(keel, &script, Journal::SpoolOnly(&dead))?;
        spooling.push(r.rate);
        cpu_spool.push(r.cpu_us);
        // The records of that run are new to the server (their run never reached it).
        let r = run(keel, &script, Journal::Bare(&server, port, &r.spooled))?;
        bare.push(r.rate);
        let (rate, cpu) = r.bare.ok_or("no figures from the bare client")?;
        bare_rate.push(rate);
        bare_cpu.push(cpu);
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
    for (case, splits, part, name) in [
        (
            "off",
            &split_off,
            "keel",
            "the daemon's main thread (sessions, socket)",
        ),
        ("off", &split_off, "client", "the bench client"),
        (
            "on",
            &split_on,
            "keel",
            "the daemon's main thread (sessions, socket)",
        ),
        (
            "on",
            &split_on,
            "keel-journal",
            "the journal's tap (spooling)",
        ),
        ("on", &split_on, "keel-publish", "the journal's publisher"),
        ("on", &split_on, "nats-server", "nats-server"),
        ("on", &split_on, "client", "the bench client"),
    ] {
        let v: Vec<f64> = splits
            .iter()
            .map(|s| s.get(part).copied().unwrap_or(0.0))
            .collect();
        rows.push(Row::stats(
            &format!("journal {case}, while the run streams: CPU per event, {name}"),
            &v,
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
        &format!(
            "floor: journal off, while a bare client publishes the run's records to nats-server \
             ({BARE_BATCH} per ack): events/s to 1 client"
        ),
        &bare,
        "events/s",
        0,
    ));
    let cost = (1.0 - median(&bare) / median(&off)) * 100.0;
    rows.push(Row::single(
        "floor: cost of nats-server storing the events while the run streams (median difference)",
        cost,
        "%",
        1,
    ));
    rows.push(Row::stats(
        "floor: records/s the bare client had acked",
        &bare_rate,
        "records/s",
        0,
    ));
    rows.push(Row::stats(
        "floor: the bare client's CPU per record",
        &bare_cpu,
        "µs",
        2,
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
    let mut flush_cpu = (Vec::new(), Vec::new());
    let mut records = 0;
    for _ in 0..heavy {
        let (n, ms, rate, publisher, server) = flush(keel, &bin, &script)?;
        records = n;
        reconnect.push(ms);
        flushed.push(rate);
        flush_cpu.0.push(publisher);
        flush_cpu.1.push(server);
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
    for (name, v) in [
        ("the journal's publisher", &flush_cpu.0),
        ("nats-server", &flush_cpu.1),
    ] {
        rows.push(Row::stats(
            &format!("journal: spool flush, CPU per record, {name}"),
            v,
            "µs",
            2,
        ));
    }
    Ok(())
}
