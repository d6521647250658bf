//! The daemon rows of the bench (issue 12 §5): `prompt` → first `session/event` over the
//! socket against the same in `--mode rpc`, events per second to 1 and to 50 attached clients
//! (every client's events are counted and checked in order; a client dropped with
//! `daemon/lagged` is reported, never hidden), attach with a 10,000-event replay, and the
//! daemon's VmRSS idle and with 100 idle sessions. Every daemon it starts is killed by its PID
//! when its guard drops, also on error; sockets live in a temp dir.

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::{keel_cmd, median, path_str, Res, Row, Rpc, Sandbox};

/// Prompts timed per latency sample, after [`WARMUP`] untimed ones.
pub(super) const PROMPTS: usize = 50;
pub(super) const WARMUP: usize = 5;
/// Text deltas of the one-client throughput run (also fills the replay ring).
const STREAM_DELTAS: u64 = 200_000;
/// Text deltas of the 50-client run, and the clients attached at once.
const FANOUT_DELTAS: u64 = 20_000;
const FANOUT_CLIENTS: usize = 50;
/// Events replayed to a client attaching with a cursor (the default ring).
const REPLAY: u64 = 10_000;
/// A shorter replay, for comparison with the full ring.
const REPLAY_FIT: u64 = 4_000;
/// Idle sessions opened for the memory row.
const IDLE_SESSIONS: usize = 100;
/// The per-client queue of the daemon (`host::stream::QUEUE`), used to size paced bursts.
const QUEUE: u64 = keel::host::stream::QUEUE as u64;

/// A `keel daemon run` this bench started; killed by its PID on drop.
pub(super) struct Daemon {
    child: Child,
    pub(super) socket: PathBuf,
}

impl Daemon {
    /// Starts the daemon on `<sandbox>/run/p1.sock` and waits for its "listening on" log line.
    pub(super) fn start(keel: &Path, sb: &Sandbox) -> Res<Daemon> {
        Daemon::start_with(keel, sb, &[])
    }

    /// [`Daemon::start`] with more `keel daemon run` flags.
    pub(super) fn start_with(keel: &Path, sb: &Sandbox, extra: &[&str]) -> Res<Daemon> {
        use std::os::unix::fs::PermissionsExt;
        let dir = sb.home.parent().ok_or("sandbox has no root")?.join("run");
        fs::create_dir_all(&dir).map_err(|e| format!("mkdir: {e}"))?;
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o700))
            .map_err(|e| format!("chmod: {e}"))?;
        let socket = dir.join("p1.sock");
        let mut child = keel_cmd(keel, &sb.cwd, &sb.home)
            .args(["daemon", "run", "--idle-exit", "0", "--socket"])
            .arg(&socket)
            .args(extra)
            .env("KEEL_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot spawn keel daemon: {e}"))?;
        let stderr = child.stderr.take();
        // From here on the guard kills the child whatever happens.
        let daemon = Daemon { child, socket };
        let mut err = BufReader::new(stderr.ok_or("no stderr pipe")?);
        let mut line = String::new();
        loop {
            line.clear();
            let n = err
                .read_line(&mut line)
                .map_err(|e| format!("read daemon log: {e}"))?;
            if n == 0 {
                return Err("the daemon ended before listening".into());
            }
            if line.contains("listening on") {
                break;
            }
        }
        // Keep draining its log so it never blocks on a full pipe.
        std::thread::spawn(move || for _ in err.lines() {});
        Ok(daemon)
    }

    pub(super) fn connect(&self) -> Res<Conn> {
        let w = UnixStream::connect(&self.socket).map_err(|e| format!("connect: {e}"))?;
        w.set_read_timeout(Some(Duration::from_secs(60)))
            .map_err(|e| e.to_string())?;
        let r = w.try_clone().map_err(|e| e.to_string())?;
        Conn::greet(Box::new(r), Box::new(w))
    }

    /// The daemon's process id.
    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// CPU time (user + system) the daemon process has used, in seconds (all its threads).
    pub(super) fn cpu_secs(&self) -> Res<f64> {
        let stat = fs::read_to_string(format!("/proc/{}/stat", self.child.id()))
            .map_err(|e| format!("daemon stat: {e}"))?;
        Ok(stat_cpu(&stat)?.1)
    }

    /// VmRSS of the daemon process, KiB.
    pub(super) fn rss_kib(&self) -> Res<f64> {
        let status = fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .map_err(|e| format!("daemon status: {e}"))?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .ok_or_else(|| "no VmRSS in the daemon's /proc status".into())
    }
}

/// A `/proc/…/stat` line's command name and CPU time (user + system), in seconds.
pub(super) fn stat_cpu(stat: &str) -> Res<(&str, f64)> {
    let (head, after) = stat.rsplit_once(')').ok_or("no ) in /proc stat")?;
    let comm = head.split_once('(').map_or("", |(_, c)| c);
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| -> Res<f64> {
        f.get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .ok_or_else(|| "short /proc stat".to_string())
    };
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .unwrap_or(100) as f64;
    // After the command name: state is field 0, utime 11, stime 12.
    Ok((comm, (ticks(11)? + ticks(12)?) / hz))
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One protocol-v1 connection (the socket, or ssh's pipes), read line by line without parsing
/// the event lines.
pub(super) struct Conn {
    r: BufReader<Box<dyn std::io::Read + Send>>,
    w: Box<dyn Write + Send>,
    next: u64,
    line: Vec<u8>,
}

/// How a client's read of a stream ended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum End {
    /// `agent_settled` arrived.
    Settled,
    /// `daemon/lagged` arrived (the daemon then closes the connection).
    Lagged,
    /// The wanted number of events arrived.
    Count,
}

/// What one client read: events in order, how it ended, and when.
pub(super) struct Read {
    pub(super) events: u64,
    pub(super) end: End,
    first: Option<Instant>,
    pub(super) last: Instant,
}

impl Conn {
    /// A connection over `r`/`w`, greeted with `daemon/hello`.
    pub(super) fn greet(r: Box<dyn std::io::Read + Send>, w: Box<dyn Write + Send>) -> Res<Conn> {
        let mut c = Conn {
            r: BufReader::with_capacity(256 * 1024, r),
            w,
            next: 0,
            line: Vec::new(),
        };
        c.call(
            "daemon/hello",
            json!({"protocolVersion": 1, "client": {"name": "bench", "version": "0"}}),
        )?;
        Ok(c)
    }

    /// One prompt: the time to its first `session/event`; `seq` moves past its events.
    pub(super) fn first_event(&mut self, id: &str, i: usize, seq: &mut u64) -> Res<f64> {
        let start = Instant::now();
        self.send(
            "prompt",
            json!({"sessionId": id, "message": format!("p{i}")}),
        )?;
        let r = self.read_events(*seq, None)?;
        if r.end != End::Settled {
            return Err(format!("latency prompt ended with {:?}", r.end));
        }
        *seq += r.events;
        Ok((r.first.ok_or("no event")? - start).as_secs_f64() * 1e3)
    }

    pub(super) fn send(&mut self, method: &str, params: Value) -> Res<u64> {
        self.next += 1;
        let req = json!({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params});
        self.w
            .write_all(format!("{req}\n").as_bytes())
            .map_err(|e| format!("write to daemon: {e}"))?;
        Ok(self.next)
    }

    /// The next line; EOF is an error.
    fn next_line(&mut self) -> Res<&[u8]> {
        self.line.clear();
        let n = self
            .r
            .read_until(b'\n', &mut self.line)
            .map_err(|e| format!("read from daemon: {e}"))?;
        if n == 0 {
            return Err("the daemon closed the connection".into());
        }
        Ok(&self.line)
    }

    /// Sends a request and returns its `result`, skipping notifications; an error is an error.
    pub(super) fn call(&mut self, method: &str, params: Value) -> Res<Value> {
        let id = self.send(method, params)?;
        loop {
            let line = self.next_line()?;
            if is_event(line) {
                continue;
            }
            let v: Value = serde_json::from_slice(line).map_err(|e| format!("{e}"))?;
            if v.get("id") == Some(&json!(id)) {
                return v
                    .get("result")
                    .cloned()
                    .ok_or_else(|| format!("{method} failed: {v}"));
            }
        }
    }

    /// Reads `session/event` lines until `agent_settled`, `daemon/lagged` or `want` events,
    /// checking that each seq is the previous one plus 1 (from `after`).
    pub(super) fn read_events(&mut self, after: u64, want: Option<u64>) -> Res<Read> {
        let (mut events, mut first, mut expect) = (0u64, None, after + 1);
        loop {
            let line = self.next_line()?;
            if is_event(line) {
                let now = Instant::now();
                first.get_or_insert(now);
                let seq = seq_of(line).ok_or("a session/event without seq")?;
                if seq != expect {
                    return Err(format!("event seq {seq}, expected {expect}: a gap"));
                }
                expect += 1;
                events += 1;
                let end = if want == Some(events) {
                    Some(End::Count)
                } else if contains(line, br#""type":"agent_settled""#) {
                    Some(End::Settled)
                } else {
                    None
                };
                if let Some(end) = end {
                    return Ok(Read {
                        events,
                        end,
                        first,
                        last: now,
                    });
                }
            } else if contains(line, br#""method":"daemon/lagged""#) {
                return Ok(Read {
                    events,
                    end: End::Lagged,
                    first,
                    last: Instant::now(),
                });
            }
        }
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

fn is_event(line: &[u8]) -> bool {
    contains(&line[..line.len().min(64)], br#""method":"session/event""#)
}

/// The `seq` of a `session/event` line (it precedes `event` in the params).
fn seq_of(line: &[u8]) -> Option<u64> {
    let key = br#""seq":"#;
    let at = line.windows(key.len()).position(|w| w == key)? + key.len();
    let digits: Vec<u8> = line[at..]
        .iter()
        .copied()
        .take_while(u8::is_ascii_digit)
        .collect();
    std::str::from_utf8(&digits).ok()?.parse().ok()
}

/// Opens a scripted session (no session file) and attaches `c` to it; `(id, epoch, seq)`.
pub(super) fn open(c: &mut Conn, sb: &Sandbox, script: &str) -> Res<(String, String, u64)> {
    let r = c.call(
        "session/open",
        json!({"cwd": path_str(&sb.cwd)?, "args": ["--no-session", "--provider", "scripted", "--script", script]}),
    )?;
    let id = r["sessionId"].as_str().ok_or("no sessionId")?.to_string();
    let a = c.call("session/attach", json!({"sessionId": id}))?;
    let epoch = a["epoch"].as_str().ok_or("no epoch")?.to_string();
    let seq = a["seq"].as_u64().ok_or("no seq")?;
    Ok((id, epoch, seq))
}

fn attach(c: &mut Conn, id: &str) -> Res<u64> {
    let a = c.call("session/attach", json!({"sessionId": id}))?;
    a["seq"].as_u64().ok_or_else(|| "no seq".into())
}

/// All daemon rows; `heavy` samples of each.
pub fn daemon_bench(keel: &Path, hello: &str, rows: &mut Vec<Row>, heavy: usize) -> Res<()> {
    latency(keel, hello, rows)?;
    let scripts = tempfile::tempdir().map_err(|e| format!("tempdir: {e}"))?;
    let stream = script(scripts.path(), "stream.json", STREAM_DELTAS, None)?;
    throughput(keel, &stream, rows, heavy)?;
    fanout(keel, scripts.path(), rows, heavy)?;
    memory(keel, hello, rows, heavy)?;
    super::daemon_load::pipelining_bench(keel, hello, rows, heavy)
}

/// Writes a one-turn script of `n` one-byte text deltas; `pace` = Some(burst) pauses 1 ms
/// after every `burst` deltas.
pub(super) fn script(dir: &Path, name: &str, n: u64, pace: Option<u64>) -> Res<String> {
    let chunks = match pace {
        None => format!(r#"{{"text":"t","times":{n}}}"#),
        Some(burst) => {
            let mut c = Vec::new();
            let mut left = n;
            while left > 0 {
                let b = burst.min(left);
                c.push(format!(r#"{{"text":"t","times":{b},"delayMs":1}}"#));
                left -= b;
            }
            c.join(",")
        }
    };
    let path = dir.join(name);
    fs::write(
        &path,
        format!(r#"{{"turns":[{{"repeat":true,"chunks":[{chunks}],"usage":{{"input":1,"output":1}}}}]}}"#),
    )
    .map_err(|e| format!("write script: {e}"))?;
    Ok(path_str(&path)?.to_string())
}

/// Row 1: prompt → first `session/event` over the socket, and → first event line in-process.
fn latency(keel: &Path, hello: &str, rows: &mut Vec<Row>) -> Res<()> {
    let sb = Sandbox::new()?;
    let d = Daemon::start(keel, &sb)?;
    let mut c = d.connect()?;
    let (id, _, mut seq) = open(&mut c, &sb, hello)?;
    let mut socket = Vec::new();
    for i in 0..WARMUP + PROMPTS {
        let ms = c.first_event(&id, i, &mut seq)?;
        if i >= WARMUP {
            socket.push(ms);
        }
    }
    drop(c);
    drop(d);

    let sb = Sandbox::new()?;
    let args = [
        "--mode",
        "rpc",
        "--no-session",
        "--provider",
        "scripted",
        "--script",
        hello,
    ];
    let mut rpc = Rpc::spawn(keel, &sb, &args)?;
    let mut local = Vec::new();
    for i in 0..WARMUP + PROMPTS {
        let start = Instant::now();
        rpc.send(&format!(
            r#"{{"id":"p{i}","type":"prompt","message":"p{i}"}}"#
        ))?;
        let mut first = None;
        loop {
            let line = rpc.next_line()?;
            let response = line.contains(r#""type":"response""#);
            if response && !line.contains(r#""success":true"#) {
                return Err(format!("prompt failed: {line}"));
            }
            if !response && first.is_none() {
                first = Some(start.elapsed());
            }
            if line.contains(r#""type":"agent_settled""#) {
                break;
            }
        }
        if i >= WARMUP {
            local.push(first.ok_or("no event")?.as_secs_f64() * 1e3);
        }
    }
    rpc.finish()?;
    rows.push(Row::stats(
        &format!("daemon: prompt → first `session/event` over the socket ({PROMPTS} prompts)"),
        &socket,
        "ms",
        3,
    ));
    rows.push(Row::stats(
        &format!("rpc mode in-process: prompt → first event line ({PROMPTS} prompts)"),
        &local,
        "ms",
        3,
    ));
    rows.push(Row::single(
        "daemon: added latency to the first event (median difference)",
        median(&socket) - median(&local),
        "ms",
        3,
    ));
    Ok(())
}

/// Rows 2 (one client) and 3 (replay): a 200k-delta run to one attached client, then a new
/// client attaching with a cursor 10,000 events back.
fn throughput(keel: &Path, stream: &str, rows: &mut Vec<Row>, heavy: usize) -> Res<()> {
    let (mut rate, mut replay) = (Vec::new(), Vec::new());
    let (mut ring_ms, mut ring_lagged) = (Vec::new(), Vec::new());
    let mut lagged = 0usize;
    for _ in 0..heavy {
        let sb = Sandbox::new()?;
        let d = Daemon::start(keel, &sb)?;
        let mut c = d.connect()?;
        let (id, epoch, seq) = open(&mut c, &sb, stream)?;
        let start = Instant::now();
        c.send("prompt", json!({"sessionId": id, "message": "go"}))?;
        let r = c.read_events(seq, None)?;
        let secs = (r.last - start).as_secs_f64();
        if r.end == End::Lagged {
            lagged += 1;
            continue;
        }
        if r.events < STREAM_DELTAS {
            return Err(format!("one client read only {} events", r.events));
        }
        rate.push(r.events as f64 / secs);
        let head = seq + r.events;
        // The goal's replay (the whole default ring), then a shorter one.
        let (n, end, ms) = replay_run(&d, &id, &epoch, head, REPLAY)?;
        if end == End::Lagged {
            ring_lagged.push(n as f64);
        } else {
            ring_ms.push(ms);
        }
        let (_, end, ms) = replay_run(&d, &id, &epoch, head, REPLAY_FIT)?;
        if end != End::Count {
            return Err(format!("a {REPLAY_FIT}-event replay ended with {end:?}"));
        }
        replay.push(ms);
    }
    if !rate.is_empty() {
        rows.push(Row::stats(
            &format!("daemon: events/s to 1 client ({STREAM_DELTAS} deltas)"),
            &rate,
            "events/s",
            0,
        ));
        if !ring_ms.is_empty() {
            rows.push(Row::stats(
                &format!("daemon: attach with a {REPLAY}-event replay → last event read"),
                &ring_ms,
                "ms",
                1,
            ));
        }
        if !ring_lagged.is_empty() {
            rows.push(Row::stats(
                &format!(
                    "daemon: attach with a {REPLAY}-event replay: dropped with daemon/lagged after (events read; {} of {} runs)",
                    ring_lagged.len(),
                    rate.len()
                ),
                &ring_lagged,
                "events",
                0,
            ));
        }
        rows.push(Row::stats(
            &format!("daemon: attach with a {REPLAY_FIT}-event replay → last event read"),
            &replay,
            "ms",
            1,
        ));
    }
    rows.push(Row::single(
        &format!("daemon: 1-client runs dropped with daemon/lagged (of {heavy})"),
        lagged as f64,
        "runs",
        0,
    ));
    Ok(())
}

/// A new client attaches with a cursor `count` events before `head` and reads them:
/// `(events read, how it ended, ms from the attach request to the last event)`.
fn replay_run(d: &Daemon, id: &str, epoch: &str, head: u64, count: u64) -> Res<(u64, End, f64)> {
    let mut n = d.connect()?;
    let start = Instant::now();
    let a = n.call(
        "session/attach",
        json!({"sessionId": id, "cursor": {"epoch": epoch, "seq": head - count}}),
    )?;
    if a["mode"] != "replay" {
        return Err(format!("attach with a cursor {count} back: {a}"));
    }
    let r = n.read_events(head - count, Some(count))?;
    Ok((r.events, r.end, (r.last - start).as_secs_f64() * 1e3))
}

/// What the 50 clients of one run read: total deliveries, lagged clients, seconds.
fn fanout_run(keel: &Path, stream: &str) -> Res<(u64, usize, f64, u64)> {
    let sb = Sandbox::new()?;
    let d = Daemon::start(keel, &sb)?;
    // The driver opened (so attached to) the session and stops reading after the prompt's
    // answer: a 51st subscriber the daemon drops once its queue fills, not counted.
    let mut driver = d.connect()?;
    let (id, _, seq) = open(&mut driver, &sb, stream)?;
    let mut conns = Vec::new();
    for _ in 0..FANOUT_CLIENTS {
        let mut c = d.connect()?;
        if attach(&mut c, &id)? != seq {
            return Err("the session moved before the prompt".into());
        }
        conns.push(c);
    }
    let start = Instant::now();
    let readers: Vec<_> = conns
        .into_iter()
        .map(|mut c| std::thread::spawn(move || c.read_events(seq, None)))
        .collect();
    driver.call("prompt", json!({"sessionId": id, "message": "go"}))?;
    let (mut total, mut lagged, mut last, mut most) = (0u64, 0usize, start, 0u64);
    for h in readers {
        let r = h.join().map_err(|_| "a reader panicked")??;
        total += r.events;
        most = most.max(r.events);
        last = last.max(r.last);
        if r.end == End::Lagged {
            lagged += 1;
        }
    }
    Ok((total, lagged, (last - start).as_secs_f64(), most))
}

/// Row 2 (50 clients): unpaced, then paced in bursts below the queue bound.
fn fanout(keel: &Path, dir: &Path, rows: &mut Vec<Row>, heavy: usize) -> Res<()> {
    for (label, pace) in [("unpaced", None), ("paced", Some(QUEUE / 4))] {
        let stream = script(dir, &format!("fan-{label}.json"), FANOUT_DELTAS, pace)?;
        let (mut rate, mut lagged) = (Vec::new(), Vec::new());
        for _ in 0..heavy {
            let (total, l, secs, most) = fanout_run(keel, &stream)?;
            if l == 0 && (most < FANOUT_DELTAS || total != most * FANOUT_CLIENTS as u64) {
                return Err(format!("clients read different counts ({total} in all)"));
            }
            rate.push(total as f64 / secs);
            lagged.push(l as f64);
        }
        let how = match pace {
            None => String::new(),
            Some(b) => format!(", 1 ms pause every {b} deltas"),
        };
        rows.push(Row::stats(
            &format!(
                "daemon: deliveries/s across {FANOUT_CLIENTS} clients ({FANOUT_DELTAS} deltas{how})"
            ),
            &rate,
            "events/s",
            0,
        ));
        rows.push(Row::stats(
            &format!("daemon: clients dropped with daemon/lagged ({label}, of {FANOUT_CLIENTS})"),
            &lagged,
            "clients",
            0,
        ));
    }
    Ok(())
}

/// Row 4: VmRSS idle after start, then with 100 idle sessions.
fn memory(keel: &Path, hello: &str, rows: &mut Vec<Row>, heavy: usize) -> Res<()> {
    let (mut idle, mut full) = (Vec::new(), Vec::new());
    for _ in 0..heavy {
        let sb = Sandbox::new()?;
        let d = Daemon::start(keel, &sb)?;
        let mut c = d.connect()?;
        c.call("ping", json!({}))?;
        idle.push(d.rss_kib()?);
        for _ in 0..IDLE_SESSIONS {
            c.call(
                "session/open",
                json!({"cwd": path_str(&sb.cwd)?, "args": ["--no-session", "--provider", "scripted", "--script", hello]}),
            )?;
        }
        let status = c.call("daemon/status", json!({}))?;
        let n = status["sessions"].as_array().map_or(0, Vec::len);
        if n != IDLE_SESSIONS {
            return Err(format!(
                "the daemon holds {n} sessions, not {IDLE_SESSIONS}"
            ));
        }
        full.push(d.rss_kib()?);
    }
    let mib = |v: &[f64]| v.iter().map(|k| k / 1024.0).collect::<Vec<_>>();
    rows.push(Row::stats("daemon: VmRSS idle", &mib(&idle), "MiB", 2));
    rows.push(Row::stats(
        &format!("daemon: VmRSS with {IDLE_SESSIONS} idle sessions"),
        &mib(&full),
        "MiB",
        2,
    ));
    rows.push(Row::single(
        "daemon: VmRSS per idle session (median difference ÷ 100)",
        (median(&full) - median(&idle)) / 1024.0 / IDLE_SESSIONS as f64,
        "MiB",
        3,
    ));
    Ok(())
}
