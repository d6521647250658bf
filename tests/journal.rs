//! The event journal on NATS JetStream (issue 17 §2): a real `nats-server -js` on 127.0.0.1
//! with a random port and a store in the sandbox (`KEEL_NATS_SERVER`, else `nats-server` on
//! the PATH or in /usr/sbin; `.ci/run` installs Debian's), read back with async-nats. Without
//! a server the NATS tests say they were skipped; the dead-port test needs none.
#![cfg(feature = "journal")]

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use async_nats::jetstream::{self, consumer};
use futures_util::StreamExt;
use serde_json::{json, Value};

use crate::common::daemon::{open, open_script, Conn, Daemon};
use crate::common::kernel::rt;
use crate::common::support::Sandbox;

const HOST: &str = "testhost";
/// The public key of the NKey user whose seed is `fixtures/nats/test-user.nk` (made for these
/// tests; it guards nothing else).
const TEST_USER: &str = "UBY5QNJEJHU262PJ5GK3QJHS56YNXTIPHRHUXP3WYFIYTYK5SBMOUDFL";

fn test_user_seed() -> String {
    std::fs::read_to_string(crate::common::support::root().join("fixtures/nats/test-user.nk"))
        .unwrap()
        .trim()
        .to_string()
}

/// A client of the test's server (with the test user's NKey when it asks for one).
async fn nats_client(url: &str) -> async_nats::Client {
    async_nats::ConnectOptions::with_nkey(test_user_seed())
        .connect(url)
        .await
        .unwrap()
}

/// A nats-server this test started; killed on drop.
struct Nats {
    child: Option<Child>,
    bin: PathBuf,
    port: u16,
    store: PathBuf,
    /// A config file (`-c`) instead of flags.
    config: Option<PathBuf>,
}

fn nats_server() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("KEEL_NATS_SERVER") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/bin")])
        .map(|d| d.join("nats-server"))
        .find(|p| p.is_file())
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

impl Nats {
    /// Starts a server (JetStream on, its store under `sb`), or `None` with a visible skip.
    fn start(sb: &Sandbox, test: &str) -> Option<Nats> {
        let Some(bin) = nats_server() else {
            crate::common::support::skipped(&format!(
                "{test}: no nats-server (KEEL_NATS_SERVER or PATH; .ci/run installs it)"
            ));
            return None;
        };
        let mut n = Nats {
            child: None,
            bin,
            port: free_port(),
            store: sb.dir.path().join("nats-store"),
            config: None,
        };
        n.up();
        Some(n)
    }

    /// [`Nats::start`] with only the NKey user of `fixtures/nats/test-user.nk` allowed in.
    fn start_authenticated(sb: &Sandbox, test: &str) -> Option<Nats> {
        let bin = nats_server();
        if bin.is_none() {
            crate::common::support::skipped(&format!(
                "{test}: no nats-server (KEEL_NATS_SERVER or PATH; .ci/run installs it)"
            ));
        }
        let port = free_port();
        let store = sb.dir.path().join("nats-store");
        let config = sb.dir.path().join("nats.conf");
        let text = format!(
            "listen: 127.0.0.1:{port}\njetstream {{ store_dir: \"{}\" }}\n\
             authorization {{ users = [ {{ nkey: {TEST_USER} }} ] }}\n",
            store.display()
        );
        std::fs::write(&config, text).unwrap();
        let mut n = Nats {
            child: None,
            bin: bin?,
            port,
            store,
            config: Some(config),
        };
        n.up();
        Some(n)
    }

    /// (Re)starts the server on its port and store; returns once it says it is ready.
    fn up(&mut self) {
        let mut cmd = Command::new(&self.bin);
        match &self.config {
            Some(c) => cmd.arg("-c").arg(c),
            None => cmd
                .args([
                    "-js",
                    "-a",
                    "127.0.0.1",
                    "-p",
                    &self.port.to_string(),
                    "-sd",
                ])
                .arg(&self.store),
        };
        let mut child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        crate::common::support::stderr_until(&mut child, "Server is ready", "nats-server");
        self.child = Some(child);
    }

    fn signal(&self, sig: nix::sys::signal::Signal) {
        let pid = nix::unistd::Pid::from_raw(self.child.as_ref().unwrap().id() as i32);
        nix::sys::signal::kill(pid, sig).unwrap();
    }

    /// SIGKILL: the server goes at once, with whatever it had not stored.
    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }
}

impl Drop for Nats {
    fn drop(&mut self) {
        self.kill();
    }
}

fn runtime() -> tokio::runtime::Runtime {
    rt()
}

/// One message read from JetStream.
#[derive(Debug)]
struct Got {
    subject: String,
    msg_id: String,
    payload: Vec<u8>,
}

impl Got {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.payload).unwrap()
    }
}

/// A consumer created now on `filter` that reads the stream from its first message until
/// `last` holds for one (each read waits at most 30 s).
async fn read_until(url: &str, filter: &str, last: impl Fn(&Value) -> bool) -> Vec<Got> {
    let consumer = from_the_start(url, filter).await;
    let mut messages = consumer.messages().await.unwrap();
    let mut out = Vec::new();
    loop {
        let m = tokio::time::timeout(Duration::from_secs(30), messages.next())
            .await
            .unwrap_or_else(|_| panic!("no more messages on {filter} after {}", out.len()))
            .unwrap()
            .unwrap();
        let msg_id = m
            .headers
            .as_ref()
            .and_then(|h| h.get("Nats-Msg-Id"))
            .map(|v| v.as_str().to_string())
            .unwrap_or_default();
        let got = Got {
            subject: m.subject.to_string(),
            msg_id,
            payload: m.payload.to_vec(),
        };
        let done = last(&got.json());
        out.push(got);
        if done {
            return out;
        }
    }
}

/// How many messages the stream holds on `filter`.
async fn count_on(url: &str, filter: &str) -> u64 {
    from_the_start(url, filter).await.cached_info().num_pending
}

/// A new pull consumer of `KEEL_EVENTS` on `filter` that starts at the stream's first message.
async fn from_the_start(url: &str, filter: &str) -> consumer::PullConsumer {
    let js = jetstream::new(nats_client(url).await);
    let stream = js.get_stream("KEEL_EVENTS").await.unwrap();
    stream
        .create_consumer(consumer::pull::Config {
            deliver_policy: consumer::DeliverPolicy::All,
            ack_policy: consumer::AckPolicy::None,
            filter_subject: filter.to_string(),
            ..Default::default()
        })
        .await
        .unwrap()
}

/// The journal's events of `session` up to its `agent_settled`.
fn journaled(url: &str, session: &str) -> Vec<Got> {
    let filter = format!("keel.events.{HOST}.{session}");
    runtime().block_on(read_until(url, &filter, |v| {
        v["event"]["type"] == "agent_settled"
    }))
}

/// Sends `prompt {message}` and returns the `session/event` params the socket wrote, raw,
/// until `agent_settled`.
fn prompt_raw(c: &mut Conn, session: &str, message: &str) -> Vec<Vec<u8>> {
    const HEAD: &str = "{\"jsonrpc\":\"2.0\",\"method\":\"session/event\",\"params\":";
    let req = json!({"jsonrpc": "2.0", "id": 7, "method": "prompt",
                     "params": {"sessionId": session, "message": message}});
    c.send_raw(&req.to_string());
    let mut out = Vec::new();
    loop {
        let mut line = String::new();
        assert!(c.r.read_line(&mut line).unwrap() > 0, "the stream ended");
        let Some(params) = line.strip_prefix(HEAD) else {
            continue;
        };
        let params = params.strip_suffix("}\n").unwrap();
        out.push(params.as_bytes().to_vec());
        if params.contains("\"event\":{\"type\":\"agent_settled\"") {
            return out;
        }
    }
}

fn journal_args(url: &str) -> Vec<String> {
    ["--idle-exit", "0", "--journal", url, "--journal-host", HOST]
        .map(String::from)
        .to_vec()
}

fn start_daemon(sb: &Sandbox, url: &str) -> Daemon {
    let args = journal_args(url);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Daemon::start(sb, &args)
}

/// Asserts that `got` holds seqs 1..=last exactly once each, in order (naming the first
/// place where it does not).
fn assert_every_seq_once_in_order(got: &[Got], last: u64) {
    let seqs: Vec<u64> = got
        .iter()
        .map(|g| g.json()["seq"].as_u64().unwrap())
        .collect();
    if let Some(i) = (0..seqs.len()).find(|&i| seqs[i] != i as u64 + 1) {
        let around = &seqs[i.saturating_sub(2)..(i + 3).min(seqs.len())];
        panic!("seq {} expected at {i}, found {around:?} there", i + 1);
    }
    assert_eq!(
        seqs.len() as u64,
        last,
        "the journal ends at the run's last event"
    );
}

/// Opens a scripted session once the journal is up: a core NATS subscriber on the lifecycle
/// subject gets its `opened` fact (published through the stream, which the daemon creates
/// first). The session's id.
fn open_journaled(c: &mut Conn, sb: &Sandbox, url: &str, script: &str, extra: &[&str]) -> String {
    runtime().block_on(async {
        let client = nats_client(url).await;
        let mut facts = client
            .subscribe(format!("keel.sessions.{HOST}"))
            .await
            .unwrap();
        client.flush().await.unwrap();
        let id = open_script(c, sb, script, extra);
        let fact = tokio::time::timeout(Duration::from_secs(30), facts.next())
            .await
            .expect("no opened fact from the journal")
            .unwrap();
        let fact: Value = serde_json::from_slice(&fact.payload).unwrap();
        assert_eq!(fact["type"], "opened", "{fact}");
        assert_eq!(fact["sessionId"], id.as_str(), "{fact}");
        id
    })
}

#[test]
fn a_runs_events_reach_jetstream_in_order_as_the_socket_wrote_them() {
    let sb = Sandbox::new();
    let Some(nats) = Nats::start(&sb, "the journal's byte-equality test") else {
        return;
    };
    let d = start_daemon(&sb, &nats.url());
    let mut c = d.client();
    let hello = crate::common::support::fixture("hello.json");
    let id = open_journaled(&mut c, &sb, &nats.url(), &hello, &[]);
    c.call("session/attach", json!({"sessionId": id}));
    let socket = prompt_raw(&mut c, &id, "hi");

    // A consumer created after the run reads the whole history from the stream.
    let got = journaled(&nats.url(), &id);
    let n = got.len() as u64;
    assert_every_seq_once_in_order(&got, n);
    assert!(socket.len() > 3 && got.len() >= socket.len());
    let tail = &got[got.len() - socket.len()..];
    for (g, s) in tail.iter().zip(&socket) {
        assert_eq!(
            String::from_utf8_lossy(&g.payload),
            String::from_utf8_lossy(s),
            "the journal publishes the socket's params bytes"
        );
    }
    let first = got[0].json();
    let epoch = first["epoch"].as_str().unwrap();
    for g in &got {
        assert_eq!(g.subject, format!("keel.events.{HOST}.{id}"));
        let seq = g.json()["seq"].as_u64().unwrap();
        assert_eq!(g.msg_id, format!("{id}:{epoch}:{seq}"));
    }

    // The lifecycle facts: opened, attached, settled with the run's usage.
    let facts = runtime().block_on(read_until(
        &nats.url(),
        &format!("keel.sessions.{HOST}"),
        |v| v["type"] == "settled",
    ));
    let kinds: Vec<String> = facts
        .iter()
        .map(|f| f.json()["type"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(kinds, ["opened", "attached", "settled"]);
    let settled = facts[2].json();
    assert_eq!(settled["sessionId"], id.as_str());
    assert_eq!(settled["host"], HOST);
    assert_eq!(settled["outcome"], "completed");
    assert_eq!(settled["cwd"], sb.work().display().to_string());
    assert_eq!(settled["model"], "scripted-hello");
    assert_eq!(settled["runUsage"]["input"], 12, "{settled}");
    assert!(settled["time"].is_string());

    let status = c.call("daemon/status", json!({}));
    let j = &status["result"]["journal"];
    assert_eq!(j["connected"], true, "{status}");
    assert_eq!(j["dropped"], 0, "{status}");
    assert!(j["spooled"].as_u64().unwrap() >= n + 3, "{status}");

    // A daemon that stops publishes its last facts before it exits.
    c.call("daemon/stop", json!({}));
    let mut d = d;
    assert_eq!(d.wait(), 0);
    let facts = runtime().block_on(read_until(
        &nats.url(),
        &format!("keel.sessions.{HOST}"),
        |v| v["type"] == "closed",
    ));
    let closed = facts.last().unwrap().json();
    assert_eq!(closed["sessionId"], id.as_str());
    assert_eq!(closed["reason"], "stopped");
    assert_eq!(closed["usage"]["input"], 12, "{closed}");
}

/// A run that streams 200 bursts of 20 deltas 2 ms apart (so the publisher always has
/// messages in flight), then runs a bash call that waits on a fifo (it goes on when the test
/// writes to it), then streams 100 bursts more.
fn waiting_script(sb: &Sandbox) -> (PathBuf, PathBuf) {
    // In the workspace: the sandbox's /tmp is private, the rest of this scratch dir unseen.
    let fifo = sb.work().join("signal.fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let script = sb.dir.path().join("wait.json");
    let flow = |text: &str, n: usize| -> Vec<Value> {
        (0..n)
            .map(|_| json!({"text": text, "times": 20, "delayMs": 2}))
            .collect()
    };
    let mut first = flow("a ", 200);
    first.push(json!({"toolCall": {"id": "call_wait", "name": "bash",
                                   "arguments": {"command": format!("cat {}", fifo.display())}}}));
    let turns = json!({"turns": [
        {"match": "go", "chunks": first},
        {"chunks": flow("b ", 100)}
    ]});
    std::fs::write(&script, turns.to_string()).unwrap();
    (fifo, script)
}

#[test]
fn nats_killed_mid_run_and_restarted_loses_and_duplicates_nothing() {
    let sb = Sandbox::new();
    let Some(mut nats) = Nats::start(&sb, "the journal's outage test") else {
        return;
    };
    let d = start_daemon(&sb, &nats.url());
    let (fifo, script) = waiting_script(&sb);
    let mut c = d.client();
    let script = script.to_str().unwrap();
    let id = open_journaled(&mut c, &sb, &nats.url(), script, &["--permission", "auto"]);
    c.call("session/attach", json!({"sessionId": id}));
    c.call("prompt", json!({"sessionId": id, "message": "go"}));
    // Killed while the deltas flow (the publisher has messages in flight).
    runtime().block_on(read_until(
        &nats.url(),
        &format!("keel.events.{HOST}.{id}"),
        |v| v["seq"].as_u64().unwrap() >= 500,
    ));
    // Stopped first: what the publisher sends now is in flight, never acked; then killed,
    // so that all of it is lost with the server.
    nats.signal(nix::sys::signal::Signal::SIGSTOP);
    let during = c.events_until("tool_execution_start");
    nats.kill();
    assert!(during.len() > 1000, "the run went on: {}", during.len());
    let status = c.call("daemon/status", json!({}));
    let j = &status["result"]["journal"];
    assert!(
        j["lag"].as_u64().unwrap() > 0,
        "the rest waits in the spool: {status}"
    );
    assert_eq!(j["dropped"], 0);

    // Back while the run streams again: the spool flushes, the run's last events follow.
    nats.up();
    std::fs::write(&fifo, "go on\n").unwrap();
    let last = c.events_until("agent_settled").last().unwrap().0;
    let got = journaled(&nats.url(), &id);
    assert_every_seq_once_in_order(&got, last);
    let filter = format!("keel.events.{HOST}.{id}");
    let count = runtime().block_on(count_on(&nats.url(), &filter));
    assert_eq!(count, last, "nothing stored twice");
}

#[test]
fn a_daemon_whose_journal_cannot_be_reached_still_runs_a_prompt_to_the_end() {
    let sb = Sandbox::new();
    let dead = format!("nats://127.0.0.1:{}", free_port());
    let d = start_daemon(&sb, &dead);
    let mut c = d.client();
    let id = open(&mut c, &sb, "hello.json", &[]);
    c.call("session/attach", json!({"sessionId": id}));
    c.call("prompt", json!({"sessionId": id, "message": "hi"}));
    let seen = c.events_until("agent_settled");
    assert!(seen.len() > 3);
    let status = c.call("daemon/status", json!({}));
    let j = &status["result"]["journal"];
    assert_eq!(j["connected"], false, "{status}");
    assert!(j["lag"].as_u64().unwrap() > 0, "{status}");
    assert_eq!(j["published"], 0);
    let out = sb
        .cmd(&["daemon", "status", "--socket", d.socket.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let line = format!("journal {dead} (host {HOST}): not connected, lag ");
    assert!(text.contains(&line), "{text}");
    assert!(
        text.contains("dropped 0 (last error: cannot connect to"),
        "{text}"
    );
    let dir = sb.home().join("journal");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700, "the spool is private");
    assert!(spool_bytes(&dir) > 0);
}

#[test]
fn a_journal_urls_password_never_appears_in_status_output_or_the_log() {
    // The NATS URL's password was shown by `keel daemon status`, `daemon/status` and the log.
    let sb = Sandbox::new();
    let secret = "hunter2-journal-secret";
    let port = free_port();
    let url = format!("nats://keel:{secret}@127.0.0.1:{port}");
    let shown = format!("nats://keel:***@127.0.0.1:{port}");
    let dir = sb.dir.path().join("run");
    std::fs::create_dir(&dir).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let socket = dir.join("p2.sock");
    let mut args = vec!["daemon", "run", "--socket", socket.to_str().unwrap()];
    let journal = journal_args(&url);
    args.extend(journal.iter().map(String::as_str));
    let mut child = sb
        .cmd(&args)
        .env("KEEL_LOG", "debug")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut d = Daemon {
        child: Some(child),
        socket,
    };
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut log = String::new();
        for line in err.lines().map_while(Result::ok) {
            let _ = tx.send(line.clone());
            log.push_str(&line);
            log.push('\n');
        }
        log
    });
    let (mut listening, mut failed) = (false, false);
    while !(listening && failed) {
        let line = rx.recv().expect("the daemon's log ended early");
        listening |= line.contains("listening on");
        failed |= line.contains("journal: cannot connect");
    }
    let mut c = d.client();
    let status = c.call("daemon/status", json!({})).to_string();
    assert!(status.contains(&shown), "{status}");
    assert!(!status.contains(secret), "{status}");
    for extra in [&[][..], &["--json"][..]] {
        let mut args = vec!["daemon", "status", "--socket", d.socket.to_str().unwrap()];
        args.extend_from_slice(extra);
        let run = sb.run(&args);
        assert_eq!(run.code, 0, "{run}");
        assert!(run.stdout.contains(&shown), "{run}");
        assert!(!run.to_string().contains(secret), "{run}");
    }
    c.call("daemon/stop", json!({}));
    assert_eq!(d.wait(), 0);
    let log = reader.join().unwrap();
    assert!(log.contains(&shown), "{log}");
    assert!(!log.contains(secret), "{log}");
    // A URL refused at startup is named without its password too.
    let bad = sb.run(&[
        "daemon",
        "run",
        "--journal",
        &format!("http://keel:{secret}@h:1"),
    ]);
    assert_eq!(bad.code, 2, "{bad}");
    assert!(bad.stderr.contains("http://keel:***@h:1"), "{bad}");
    assert!(!bad.to_string().contains(secret), "{bad}");
}

fn spool_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".jsonl"))
        .map(|e| e.metadata().unwrap().len())
        .sum()
}

#[test]
fn journal_commands_without_credentials_are_refused_at_startup() {
    let sb = Sandbox::new();
    let out = sb
        .cmd(&[
            "daemon",
            "run",
            "--journal",
            "nats://127.0.0.1:4222",
            "--journal-commands",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--journal-commands needs --journal-creds"),
        "{err}"
    );
}

#[test]
fn records_a_crashed_daemon_left_in_its_spool_are_deduplicated_when_sent_again() {
    let sb = Sandbox::new();
    let Some(nats) = Nats::start(&sb, "the journal's dedupe test") else {
        return;
    };
    let hello = crate::common::support::fixture("hello.json");
    let (first, stored) = {
        let d = start_daemon(&sb, &nats.url());
        let mut c = d.client();
        let id = open_journaled(&mut c, &sb, &nats.url(), &hello, &[]);
        c.call("session/attach", json!({"sessionId": id}));
        prompt_raw(&mut c, &id, "hi");
        let stored = journaled(&nats.url(), &id);
        (id, stored)
    };
    // A daemon killed after JetStream stored these but before its spool recorded the acks
    // leaves them in the spool: the next daemon sends them again.
    let spool = sb.home().join("journal");
    let lines: String = stored
        .iter()
        .map(|g| {
            let head = json!({"subject": g.subject, "msgId": g.msg_id}).to_string();
            let payload = String::from_utf8_lossy(&g.payload);
            format!("{},\"payload\":{payload}}}\n", &head[..head.len() - 1])
        })
        .collect();
    for e in std::fs::read_dir(&spool).unwrap() {
        std::fs::remove_file(e.unwrap().path()).unwrap();
    }
    std::fs::write(spool.join("00000000000000000001.jsonl"), lines).unwrap();
    let d = start_daemon(&sb, &nats.url());
    let mut c = d.client();
    // The spool is sent in order: once a later session's run is in the stream, so is the rest.
    let second = open_journaled(
        &mut c,
        &sb,
        &nats.url(),
        &hello,
        &["--session-id", "second"],
    );
    c.call("session/attach", json!({"sessionId": second}));
    prompt_raw(&mut c, &second, "again");
    assert_ne!(second, first);
    journaled(&nats.url(), &second);
    let again = journaled(&nats.url(), &first);
    assert_every_seq_once_in_order(&again, stored.len() as u64);
    let filter = format!("keel.events.{HOST}.{first}");
    let count = runtime().block_on(count_on(&nats.url(), &filter));
    assert_eq!(count, stored.len() as u64, "nothing stored twice");
    // The stream the daemon created, with the documented defaults.
    let config = runtime().block_on(async {
        let js = jetstream::new(nats_client(&nats.url()).await);
        let mut s = js.get_stream("KEEL_EVENTS").await.unwrap();
        s.info().await.unwrap().config.clone()
    });
    assert_eq!(config.duplicate_window, Duration::from_secs(120));
    assert_eq!(config.max_age, Duration::from_secs(7 * 24 * 3600));
    assert_eq!(config.max_bytes, 1 << 30);
    assert_eq!(config.subjects, ["keel.events.>", "keel.sessions.>"]);
}

#[test]
fn a_protocol_v1_request_on_keel_cmd_gets_the_bytes_the_socket_answers() {
    let sb = Sandbox::new();
    let Some(nats) = Nats::start_authenticated(&sb, "the journal commands test") else {
        return;
    };
    let creds = crate::common::support::root().join("fixtures/nats/test-user.nk");
    let creds = creds.to_str().unwrap();
    let mut args = journal_args(&nats.url());
    args.extend(["--journal-creds", creds, "--journal-commands"].map(String::from));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let d = Daemon::start(&sb, &args);
    let mut c = d.client();
    let hello = crate::common::support::fixture("hello.json");
    let id = open_journaled(&mut c, &sb, &nats.url(), &hello, &[]);
    let request = |id_: u64, method: &str, params: Value| {
        json!({"jsonrpc": "2.0", "id": id_, "method": method, "params": params}).to_string()
    };
    let subject = format!("keel.cmd.{HOST}");
    let ask = |line: String| -> String {
        runtime().block_on(async {
            let client = nats_client(&nats.url()).await;
            let reply = client.request(subject.clone(), line.into()).await.unwrap();
            String::from_utf8(reply.payload.to_vec()).unwrap()
        })
    };
    // The same request over the socket and over NATS: the same bytes.
    let get_state = request(3, "get_state", json!({"sessionId": id}));
    c.send_raw(&get_state);
    let mut socket = String::new();
    c.r.read_line(&mut socket).unwrap();
    assert!(socket.contains("\"result\""), "{socket}");
    assert_eq!(ask(get_state), socket);
    // A prompt sent over NATS runs; its events are in the journal.
    let prompt = request(4, "prompt", json!({"sessionId": id, "message": "hi"}));
    let answer: Value = serde_json::from_str(&ask(prompt)).unwrap();
    assert_eq!(answer["id"], 4);
    assert_eq!(answer["result"]["disposition"], "started", "{answer}");
    let got = journaled(&nats.url(), &id);
    let text: String = got
        .iter()
        .filter_map(|g| {
            g.json()["event"]["assistantMessageEvent"]["delta"]
                .as_str()
                .map(String::from)
        })
        .collect();
    assert_eq!(text, "Hello from keel!");
    // Errors are the socket's errors; what needs a connection is refused.
    let unknown: Value = serde_json::from_str(&ask(request(5, "no_such", json!({})))).unwrap();
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");
    let attach = request(6, "session/attach", json!({"sessionId": id}));
    let attach: Value = serde_json::from_str(&ask(attach)).unwrap();
    assert_eq!(attach["error"]["code"], -32601, "{attach}");
    assert!(attach["error"]["message"]
        .as_str()
        .unwrap()
        .contains("journal"));
}

#[test]
fn a_stopping_daemon_sends_what_its_spool_holds_before_it_exits() {
    let sb = Sandbox::new();
    let Some(nats) = Nats::start(&sb, "the journal's flush-at-exit test") else {
        return;
    };
    let script = sb.dir.path().join("many.json");
    // 2,000 events: enough to be spooled while the server is stopped; the daemon flushes for
    // at most 2 s at exit, which 20,000 overran on a loaded machine (CI).
    let turns = json!({"turns": [{"chunks": [{"text": "t", "times": 2000}]}]});
    std::fs::write(&script, turns.to_string()).unwrap();
    let mut d = start_daemon(&sb, &nats.url());
    let mut c = d.client();
    let id = open_journaled(&mut c, &sb, &nats.url(), script.to_str().unwrap(), &[]);
    c.call("session/attach", json!({"sessionId": id}));
    // The whole run is spooled while the server is stopped; it resumes as the daemon stops.
    nats.signal(nix::sys::signal::Signal::SIGSTOP);
    c.call("prompt", json!({"sessionId": id, "message": "go"}));
    let last = c.events_until("agent_settled").last().unwrap().0;
    nats.signal(nix::sys::signal::Signal::SIGCONT);
    c.call("daemon/stop", json!({}));
    assert_eq!(d.wait(), 0);
    let got = journaled(&nats.url(), &id);
    assert_every_seq_once_in_order(&got, last);
}
