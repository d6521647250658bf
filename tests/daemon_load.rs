//! The daemon under load (issue 27 §5–§7): at the fd limit its accept loop backs off instead of
//! spinning, one slow `session/open` holds up no other client, and a client that pipelines
//! requests without reading cannot make it buffer without limit.

use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::os::unix::net::UnixStream;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::daemon::{code, Conn, Daemon};
use crate::common::support::{fixture, scripted_args, Sandbox};
use crate::session_load::session_gen;

/// A `/proc/<pid>/stat` line's CPU time (user + system), in clock ticks.
fn cpu_ticks(pid: i32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = stat.rsplit_once(')').unwrap().1;
    let f: Vec<&str> = after.split_whitespace().collect();
    // After the command name: state is field 0, utime 11, stime 12.
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

fn ticks_per_second() -> u64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .unwrap()
        .unwrap_or(100) as u64
}

/// VmRSS of process `pid`, KiB.
fn rss_kib(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// `keel daemon run` under `ulimit -n FDS`, its log lines arriving on the receiver (a thread
/// drains its stderr, so a daemon that logs fast never blocks on the pipe).
fn daemon_with_fd_limit(sb: &Sandbox, fds: u32) -> (Daemon, mpsc::Receiver<String>) {
    let dir = sb.dir.path().join("run");
    std::fs::create_dir_all(&dir).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let socket = dir.join("p2.sock");
    let args = [
        "daemon",
        "run",
        "--idle-exit",
        "0",
        "--socket",
        socket.to_str().unwrap(),
    ];
    let mut child = sb
        .cmd_after(&format!("ulimit -n {fds}"), &args)
        .env("KEEL_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    // From here on the guard kills the daemon whatever happens (`sh` exec'd it: same pid).
    let daemon = Daemon {
        child: Some(child),
        socket,
    };
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in stderr.lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                // The test is over; keep draining so the daemon never blocks.
                continue;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let line = rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .expect("the daemon did not say it listens");
        if line.contains("listening on") {
            return (daemon, rx);
        }
    }
}

/// Regression: with its fds used up, `accept` failed at once with EMFILE again and again: the
/// daemon spun at 98% CPU and wrote a log line per failed accept (2.45 GB in one episode).
#[test]
fn at_the_fd_limit_the_daemon_backs_off_logs_once_and_serves_again() {
    let sb = Sandbox::new();
    let (d, log) = daemon_with_fd_limit(&sb, 32);
    // More connections than the daemon has fds for: the last ones wait in the backlog.
    let held: Vec<UnixStream> = (0..40)
        .map(|_| UnixStream::connect(&d.socket).unwrap())
        .collect();
    let mut lines = Vec::new();
    loop {
        let line = log
            .recv_timeout(Duration::from_secs(20))
            .expect("the daemon never reported a failed accept");
        let full = line.contains("Too many open files");
        lines.push(line);
        if full {
            break;
        }
    }
    // Two seconds of the episode, watched through /proc: a daemon that retries at once burns
    // a core (and writes thousands of lines); one that backs off uses next to nothing.
    let before = cpu_ticks(d.pid());
    let watch = Instant::now();
    let mut used = 0;
    while watch.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(50));
        used = cpu_ticks(d.pid()) - before;
        if used * 4 > ticks_per_second() {
            break;
        }
    }
    lines.extend(log.try_iter());
    let about_accept = lines.iter().filter(|l| l.contains("accept")).count();
    assert!(
        used * 4 <= ticks_per_second(),
        "the daemon used {used} ticks of CPU in under 2 s at the fd limit ({about_accept} log lines about accept)"
    );
    assert!(
        about_accept <= 2,
        "{about_accept} log lines about accept in one episode: {:?}",
        &lines[..lines.len().min(5)]
    );
    drop(held);
    // Once fds are free a new client is served.
    let mut c = d.client();
    assert!(c.call("ping", json!({}))["result"].is_object());
    // The episode's end is logged once, with the count of failed accepts.
    let deadline = Instant::now() + Duration::from_secs(20);
    let end = loop {
        let line = log
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .expect("the episode's end was not logged");
        if line.contains("accepts resumed") {
            break line;
        }
        lines.push(line);
    };
    assert!(end.contains("failed accepts"), "{end}");
    lines.push(end);
    // One episode is two lines; freeing 40 connections at once may start a second one.
    let total = lines.iter().filter(|l| l.contains("accept")).count();
    assert!(total <= 4, "{total} log lines about accept: {lines:?}");
}

/// A TCP server that accepts connections and never answers them: each accepted stream is
/// handed to the test, which holds it (silent) or drops it (closed).
fn silent_server() -> (String, mpsc::Receiver<std::net::TcpStream>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { break };
            if tx.send(stream).is_err() {
                break;
            }
        }
    });
    (format!("http://127.0.0.1:{port}/v1"), rx)
}

/// `c.call`, with a panic that says what did not come when the daemon does not answer within
/// the connection's read timeout (20 s).
fn answer(c: &mut Conn, method: &str, params: serde_json::Value) -> serde_json::Value {
    c.next += 1;
    let id = c.next;
    c.send_raw(
        &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string(),
    );
    loop {
        let mut line = String::new();
        match c.r.read_line(&mut line) {
            Ok(0) => panic!("the daemon closed the connection before answering {method}"),
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                panic!("no answer to {method} in 20 s: held up by another client's open")
            }
            Err(e) => panic!("{e}"),
        }
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        if v["id"] == id {
            return v;
        }
        c.notes.push(v);
    }
}

/// Regression: `session/open` held one daemon-wide lock for its whole startup, so a server that
/// never answered `GET /models` made every other client's open wait (299.5 s).
#[test]
fn a_silent_models_server_holds_up_no_other_clients_open_or_prompt() {
    let sb = Sandbox::new();
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let (url, accepted) = silent_server();
    let mut a = d.client();
    // No --model: the daemon asks the server which models it serves, and waits.
    let args = ["--base-url", url.as_str(), "--api-key", "k"];
    let open_a = json!({"jsonrpc": "2.0", "id": 1, "method": "session/open",
                        "params": {"cwd": sb.work(), "spec": crate::common::daemon::spec(&args),
                                   "keys": {"KEEL_API_KEY": "k"}}});
    a.send_raw(&open_a.to_string());
    let models = accepted
        .recv_timeout(Duration::from_secs(20))
        .expect("A's open never asked the server for its models");
    // A hangs on that request now. B opens a session, and a prompt of it is answered.
    let mut b = d.client();
    let script = fixture("hello.json");
    let args = scripted_args(&[], &script, &[]);
    let r = answer(
        &mut b,
        "session/open",
        json!({"cwd": sb.work(), "spec": crate::common::daemon::spec(&args),
               "keys": {"KEEL_API_KEY": "k"}}),
    );
    let id = r["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"));
    assert!(b.call("session/attach", json!({"sessionId": id}))["result"].is_object());
    let r = b.call("prompt", json!({"sessionId": id, "message": "hi"}));
    assert!(r.get("error").is_none(), "{r}");
    let events = b.events_until("agent_settled");
    assert!(
        events.iter().any(|(_, e)| e["type"] == "message_end"),
        "{events:?}"
    );
    // A is still waiting; on its own connection the daemon still answers.
    assert!(answer(&mut a, "ping", json!({}))["result"].is_object());
    // The server hangs up: A's open fails, naming what it asked.
    drop(models);
    drop(accepted);
    let answer = loop {
        let v = a.recv().expect("the daemon closed A's connection");
        if v["id"] == 1 {
            break v;
        }
    };
    assert_eq!(code(&answer), -32000, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("models"),
        "{answer}"
    );
}

/// A generated session file of `entries` entries in the sandbox; its path.
fn big_session(sb: &Sandbox, entries: usize) -> String {
    let cwd = sb.work().canonicalize().unwrap();
    let id = "01a22a4d-c23c-773e-be8a-b1dc1a1a0707";
    let text = session_gen::session_text(&cwd.display().to_string(), id, entries);
    let path = sb.dir.path().join("big.jsonl");
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// Regression: a client that pipelined `get_messages` and never read grew the daemon to
/// 1.09 GB (every answer was queued for it without limit) and kept it after it left.
#[test]
fn a_pipelining_client_that_never_reads_cannot_grow_the_daemon_without_bound() {
    let sb = Sandbox::new();
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let session = big_session(&sb, 600);
    let mut b = d.client();
    let script = fixture("hello.json");
    let args = scripted_args(&[], &script, &["--session", &session]);
    let r = b.call(
        "session/open",
        json!({"cwd": sb.work(), "spec": crate::common::daemon::spec(&args)}),
    );
    let id = r["result"]["sessionId"].as_str().unwrap().to_string();
    let one = b.call("get_messages", json!({"sessionId": id}));
    let answer = one["result"].to_string().len();
    assert!(answer > 700_000, "a get_messages answer of {answer} bytes");
    let baseline = rss_kib(d.pid());
    // A pipes 2,000 requests (about 1.4 GB of answers) and never reads a byte.
    let a = UnixStream::connect(&d.socket).unwrap();
    let hello = json!({"jsonrpc": "2.0", "id": 0, "method": "daemon/hello",
                       "params": {"protocolVersion": 2, "client": {"name": "t", "version": "0"}}});
    let mut requests = format!("{hello}\n");
    for n in 1..=2000 {
        let req = json!({"jsonrpc": "2.0", "id": n, "method": "get_messages",
                         "params": {"sessionId": id}});
        requests.push_str(&format!("{req}\n"));
    }
    let writer = a.try_clone().unwrap();
    let pipe = std::thread::spawn(move || {
        let mut writer = writer;
        // Blocks once the daemon stops reading; fails once the test closes the socket.
        let _ = writer.write_all(requests.as_bytes());
    });
    // Watch the daemon until it has done what it will do for A (its CPU time stands still for
    // a second), or until it grows past the bound.
    let bound = baseline + 64 * 1024;
    let (mut peak, mut last, mut still_since) = (baseline, cpu_ticks(d.pid()), Instant::now());
    let watch = Instant::now();
    while still_since.elapsed() < Duration::from_secs(1)
        && watch.elapsed() < Duration::from_secs(60)
    {
        std::thread::sleep(Duration::from_millis(20));
        peak = peak.max(rss_kib(d.pid()));
        if peak > bound {
            break;
        }
        let now = cpu_ticks(d.pid());
        if now != last {
            (last, still_since) = (now, Instant::now());
        }
    }
    assert!(
        peak <= bound,
        "the daemon grew from {baseline} KiB to {peak} KiB for a client that does not read"
    );
    // Another client is served meanwhile, and after A leaves.
    assert!(b.call("get_state", json!({"sessionId": id}))["result"].is_object());
    a.shutdown(std::net::Shutdown::Both).unwrap();
    drop(a);
    pipe.join().unwrap();
    let one = b.call("get_messages", json!({"sessionId": id}));
    assert_eq!(one["result"].to_string().len(), answer);
}
