//! The daemon over a real Unix socket in a temp dir (`DESIGN.md` §10.3–§10.4): the protocol's
//! errors, several clients on one numbered stream, re-attaching with a cursor (replay) or
//! without one (snapshot), a stalled client dropped with `daemon/lagged`, lifetime (SIGTERM,
//! idle exit, kill -9), directory checks and one daemon however many start at once. Every
//! daemon a test starts is killed by its guard, also when the test fails.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::process::{Child, Stdio};

use serde_json::{json, Value};

use crate::common::daemon::{
    code, flood, here_and_through_a_daemon, open, open_script, Conn, Daemon,
};
use crate::common::rpc::Rpc;
use crate::common::support::{fixture, scripted_args, strs, Sandbox};

#[test]
fn protocol_errors_read_like_the_contract() {
    let sb = Sandbox::new();
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    // Anything before hello: -32011, then the connection is closed.
    let mut c = d.connect();
    let r = c.call("ping", json!({}));
    assert_eq!(code(&r), -32011, "{r}");
    assert!(c.recv().is_none(), "closed after -32011");
    // A version mismatch names both versions, then closes.
    let mut c = d.connect();
    let r = c.call(
        "daemon/hello",
        json!({"protocolVersion": 1, "client": {"name": "t", "version": "9"}}),
    );
    assert_eq!(code(&r), -32010);
    let message = r["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("protocol version mismatch (client 1, daemon 2): this daemon is keel "),
        "{message}"
    );
    assert!(message.contains("keel daemon stop"), "{message}");
    assert_eq!(r["error"]["data"]["daemonProtocol"], 2);
    assert!(c.recv().is_none(), "closed after -32010");
    // Bad input never closes the connection.
    let mut c = d.connect();
    let hello = c.hello(false);
    assert_eq!(hello["result"]["protocolVersion"], 2);
    assert_eq!(
        hello["result"]["daemon"]["socket"],
        d.socket.display().to_string()
    );
    c.send_raw("this is not json");
    let r = c.recv().unwrap();
    assert_eq!((code(&r), r["id"].clone()), (-32700, Value::Null));
    c.send_raw(r#"{"jsonrpc":"2.0","id":1,"method":7}"#);
    assert_eq!(code(&c.recv().unwrap()), -32600);
    c.send_raw(r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#);
    let r = c.recv().unwrap();
    assert_eq!(code(&r), -32600);
    assert!(
        r["error"]["message"].as_str().unwrap().contains("atch"),
        "{r}"
    );
    assert_eq!(code(&c.call("no/such", json!({}))), -32601);
    let r = c.call("session/attach", json!({}));
    assert_eq!(code(&r), -32602);
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("sessionId"),
        "{r}"
    );
    assert_eq!(
        code(&c.call("session/attach", json!({"sessionId": "nope"}))),
        -32012
    );
    assert_eq!(
        code(&c.call("get_state", json!({"sessionId": "nope"}))),
        -32012
    );
    assert_eq!(code(&c.call("get_state", json!({}))), -32602);
    assert_eq!(
        code(&c.call(
            "daemon/hello",
            json!({"protocolVersion": 2, "client": {"name": "t", "version": "0"}})
        )),
        -32600
    );
    assert_eq!(c.call("ping", json!({}))["result"], json!({}));
    // A pi failure is -32000 with pi's text.
    let id = open(&mut c, &sb, "hello.json", &[]);
    let r = c.call("set_thinking_level", json!({"sessionId": id}));
    assert_eq!(code(&r), -32000);
    assert!(
        r["error"]["message"].as_str().unwrap().contains("level"),
        "{r}"
    );
    let status = c.call("daemon/status", json!({}))["result"].clone();
    assert_eq!(status["sessions"][0]["sessionId"], id.as_str());
    assert_eq!(status["sessions"][0]["state"], "idle");
}

#[test]
fn two_clients_see_one_numbered_stream_and_a_returning_client_gets_no_gap() {
    let sb = Sandbox::new();
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let mut a = d.connect();
    a.hello(true);
    let id = open(&mut a, &sb, "hello.json", &[]);
    let mut b = d.connect();
    b.hello(true);
    for c in [&mut a, &mut b] {
        let r = c.call("session/attach", json!({"sessionId": id}));
        assert_eq!(r["result"]["mode"], "snapshot", "{r}");
    }
    let r = a.call("prompt", json!({"sessionId": id, "message": "one"}));
    assert_eq!(r["result"]["disposition"], "started", "{r}");
    let seen_a = a.events_until("agent_settled");
    let seen_b = b.events_until("agent_settled");
    assert_eq!(
        seen_a, seen_b,
        "both clients see the same (seq, event) stream"
    );
    let seqs: Vec<u64> = seen_a.iter().map(|(s, _)| *s).collect();
    assert_eq!(
        seqs,
        (1..=seqs.len() as u64).collect::<Vec<_>>(),
        "numbered 1, 2, 3, …"
    );
    // A leaves; B runs another prompt; A comes back with its cursor.
    let epoch = a.call("daemon/status", json!({}))["result"]["sessions"][0]["epoch"]
        .as_str()
        .unwrap()
        .to_string();
    let last = *seqs.last().unwrap();
    drop(a);
    assert_eq!(
        b.call("prompt", json!({"sessionId": id, "message": "two"}))["result"]["disposition"],
        "started"
    );
    let later = b.events_until("agent_settled");
    let head = later.last().unwrap().0;
    let mut a = d.connect();
    a.hello(true);
    let r = a.call(
        "session/attach",
        json!({"sessionId": id, "cursor": {"epoch": epoch, "seq": last}}),
    );
    assert_eq!(r["result"]["mode"], "replay", "{r}");
    let replayed = a.events_until("agent_settled");
    let got: Vec<u64> = replayed.iter().map(|(s, _)| *s).collect();
    assert_eq!(
        got,
        (last + 1..=head).collect::<Vec<_>>(),
        "exactly the events after the cursor"
    );
    assert_eq!(replayed, later, "the same events B saw live");
}

#[test]
fn an_old_cursor_or_another_epoch_gets_a_snapshot_that_matches_get_messages() {
    let sb = Sandbox::new();
    let d = Daemon::start(&sb, &["--idle-exit", "0", "--replay-events", "4"]);
    let mut c = d.client();
    let id = open(&mut c, &sb, "hello.json", &[]);
    c.call("session/attach", json!({"sessionId": id}));
    c.call("prompt", json!({"sessionId": id, "message": "one"}));
    let seen = c.events_until("agent_settled");
    let epoch = c.call("daemon/status", json!({}))["result"]["sessions"][0]["epoch"].clone();
    let messages = c.call("get_messages", json!({"sessionId": id}))["result"]["messages"].clone();
    for cursor in [
        json!({"epoch": epoch, "seq": 1}),
        json!({"epoch": "another", "seq": 3}),
    ] {
        let mut other = d.client();
        let r = other.call("session/attach", json!({"sessionId": id, "cursor": cursor}));
        let result = &r["result"];
        assert_eq!(result["mode"], "snapshot", "{r}");
        assert_eq!(result["seq"], seen.last().unwrap().0);
        assert_eq!(result["snapshot"]["messages"], messages);
        assert_eq!(result["snapshot"]["header"]["id"], id.as_str());
        assert_eq!(result["snapshot"]["state"]["isStreaming"], false);
        assert_eq!(result["snapshot"]["streaming"], Value::Null);
        assert_eq!(result["snapshot"]["pendingUi"], json!([]));
    }
}

#[test]
fn a_client_that_stops_reading_is_dropped_with_lagged_and_the_other_gets_everything() {
    let sb = Sandbox::new();
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    // The slow client reads nothing from here on while 25,000 deltas stream.
    let (mut fast, mut slow, id) = flood(&d, &sb, &[]);
    let seen = fast.events_until("agent_settled");
    assert!(seen.len() > 25_000, "{}", seen.len());
    let seqs: Vec<u64> = seen.iter().map(|(s, _)| *s).collect();
    assert_eq!(
        seqs,
        (1..=seqs.len() as u64).collect::<Vec<_>>(),
        "every event, in order"
    );
    // Now the slow client reads what was written to it: then daemon/lagged, then the end.
    let mut last = None;
    while let Some(v) = slow.recv() {
        last = Some(v);
    }
    let last = last.unwrap();
    assert_eq!(last["method"], "daemon/lagged", "{last}");
    assert_eq!(last["params"]["sessionId"], id.as_str());
    assert!(last["params"]["seq"].as_u64().unwrap() < seen.last().unwrap().0);
}

#[test]
fn sigterm_saves_the_sessions_and_removes_the_socket() {
    let sb = Sandbox::new();
    let mut d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let mut c = d.client();
    let id = open(&mut c, &sb, "hang.json", &[]);
    c.call("session/attach", json!({"sessionId": id}));
    c.call("prompt", json!({"sessionId": id, "message": "work"}));
    c.events_until("message_update");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(d.pid()),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let mut last = None;
    while let Some(v) = c.recv() {
        last = Some(v);
    }
    assert_eq!(last.unwrap()["method"], "daemon/shutdown");
    assert_eq!(d.wait(), 143);
    assert!(!d.socket.exists(), "the socket is removed");
    let text = sb.session_text();
    assert!(text.contains("\"work\""), "the prompt was saved: {text}");
}

#[test]
fn an_idle_daemon_exits_by_itself() {
    let sb = Sandbox::new();
    let mut d = Daemon::start(&sb, &["--idle-exit", "0.3"]);
    let c = d.client();
    drop(c);
    assert_eq!(d.wait(), 0);
    assert!(!d.socket.exists());
}

#[test]
fn a_socket_directory_others_can_enter_is_refused() {
    let sb = Sandbox::new();
    let dir = sb.dir.path().join("open");
    std::fs::create_dir_all(&dir).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let socket = dir.join("p2.sock");
    let run = sb.run(&["daemon", "run", "--socket", socket.to_str().unwrap()]);
    assert_eq!(run.code, 3, "{run}");
    assert!(run.stderr.contains("0755"), "{run}");
    assert!(!socket.exists());
}

#[test]
fn many_clients_starting_at_once_get_one_daemon() {
    let sb = Sandbox::new();
    let dir = sb.dir.path().join("run");
    let socket = dir.join("p2.sock");
    let starts: Vec<Child> = (0..6)
        .map(|_| {
            sb.cmd(&["daemon", "start", "--socket", socket.to_str().unwrap()])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for s in starts {
        let out = s.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            socket.display().to_string()
        );
    }
    let status = sb.run(&[
        "daemon",
        "status",
        "--json",
        "--socket",
        socket.to_str().unwrap(),
    ]);
    let pid = serde_json::from_str::<Value>(&status.stdout).unwrap()["pid"]
        .as_i64()
        .unwrap();
    // The spawned daemon is this test's: killed at the end whatever happens.
    let _guard = PidGuard(pid as i32);
    let lock = std::fs::read_to_string(dir.join("daemon.lock")).unwrap();
    assert_eq!(
        lock.trim(),
        pid.to_string(),
        "the one daemon holds the lock"
    );
    let mut watcher = UnixStream::connect(&socket).unwrap();
    watcher.write_all(br#"{"jsonrpc":"2.0","id":1,"method":"daemon/hello","params":{"protocolVersion":2,"client":{"name":"w","version":"0"}}}"#).unwrap();
    watcher.write_all(b"\n").unwrap();
    let stop = sb.run(&["daemon", "stop", "--socket", socket.to_str().unwrap()]);
    assert_eq!(stop.code, 0, "{stop}");
    assert_eq!(stop.stdout, "stopped\n");
    // The daemon says why it ends, then closes every connection.
    let lines: Vec<String> = BufReader::new(watcher)
        .lines()
        .map(|l| l.unwrap())
        .collect();
    assert!(
        lines.last().unwrap().contains("daemon/shutdown"),
        "{lines:?}"
    );
}

/// Kills a daemon process this test spawned (through `keel daemon start`) when dropped.
struct PidGuard(i32);

impl Drop for PidGuard {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.0),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

#[test]
fn rpc_mode_through_the_daemon_writes_what_it_writes_in_process() {
    let input = concat!(
        r#"{"id":"a","type":"get_state"}"#,
        "\n",
        r#"{"id":"p","type":"prompt","message":"hi"}"#,
        "\n",
        "not json\n",
        r#"{"id":"u","type":"no_such_command"}"#,
        "\n",
    );
    let script = fixture("hello.json");
    let base = scripted_args(&["--mode", "rpc"], &script, &["--session-id", "same"]);
    let (here, there) = (Sandbox::new(), Sandbox::new());
    let (local, remote, _d) = here_and_through_a_daemon(&here, &there, &base, input);
    // Same bytes, once each sandbox's own path is scrubbed.
    assert_eq!(local.shown_stdout(), remote.shown_stdout());
    assert!(
        remote
            .stdout
            .contains(r#""command":"prompt","success":true"#),
        "{remote}"
    );
}

#[test]
fn a_daemon_killed_mid_run_is_reported_and_the_session_resumes_in_process() {
    let sb = Sandbox::new();
    let mut d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let socket = d.socket.display().to_string();
    let script = fixture("hang.json");
    let args = scripted_args(
        &["--mode", "rpc", "--daemon", "--socket", &socket],
        &script,
        &[],
    );
    let mut client = Rpc::spawn(sb.cmd(&args));
    client.send_bytes(b"{\"id\":\"p\",\"type\":\"prompt\",\"message\":\"work\"}\n");
    client.wait(&json!({"type": "message_update"}));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(d.pid()),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    assert_eq!(d.wait(), 128 + 9);
    let (_, err, code) = client.collect();
    assert_eq!(code, 1);
    assert!(
        err.contains("the keel daemon closed the connection"),
        "{err}"
    );
    // The file keeps the prompt; an in-process keel continues it.
    let again = sb.scripted("--json", "hello.json", &["--continue", "go on"]);
    assert_eq!(again.code, 0, "{again}");
    let text = sb.session_text();
    assert!(
        text.contains("\"work\"") && text.contains("\"go on\""),
        "{text}"
    );
}

#[test]
fn a_dialog_reaches_every_client_the_first_answer_wins_and_a_late_client_finds_it_pending() {
    let sb = Sandbox::new();
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let mut a = d.connect();
    a.hello(true);
    let id = open(&mut a, &sb, "blocked.json", &["--permission", "ask"]);
    let mut b = d.connect();
    b.hello(true);
    let mut watcher = d.client();
    for c in [&mut a, &mut b, &mut watcher] {
        c.call("session/attach", json!({"sessionId": id}));
    }
    a.call("prompt", json!({"sessionId": id, "message": "clean up"}));
    let dialog = |c: &mut Conn| {
        let seen = c.events_until("extension_ui_request");
        seen.last().unwrap().1.clone()
    };
    let (da, db, dw) = (dialog(&mut a), dialog(&mut b), dialog(&mut watcher));
    assert_eq!(da, db);
    assert_eq!(da, dw, "a non-interactive client sees the dialog too");
    assert_eq!(da["method"], "confirm");
    let call = da["id"].as_str().unwrap().to_string();
    // A client that attaches now finds it in the snapshot.
    let mut late = d.connect();
    late.hello(true);
    let r = late.call("session/attach", json!({"sessionId": id}));
    assert_eq!(
        r["result"]["snapshot"]["pendingUi"][0]["id"],
        call.as_str(),
        "{r}"
    );
    // Only interactive clients may answer; the first answer wins.
    let answer = json!({"sessionId": id, "id": call, "confirmed": false});
    let r = watcher.call("extension_ui_response", answer.clone());
    assert_eq!(code(&r), -32000, "{r}");
    assert_eq!(
        b.call("extension_ui_response", answer.clone())["result"],
        json!({})
    );
    let r = a.call("extension_ui_response", answer);
    assert_eq!(code(&r), -32014, "{r}");
    // Everyone sees the resolution: the denied call's result and the run's end.
    for c in [&mut a, &mut b, &mut watcher] {
        let rest = c.events_until("agent_settled");
        let end = rest
            .iter()
            .find(|(_, e)| e["type"] == "tool_execution_end")
            .unwrap();
        assert_eq!(end.1["isError"], true, "{:?}", end.1);
    }
}

#[test]
fn a_client_attaching_mid_run_gets_the_streaming_message_in_its_snapshot() {
    let sb = Sandbox::new();
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let mut a = d.connect();
    a.hello(true);
    let id = open(&mut a, &sb, "hang.json", &[]);
    a.call("session/attach", json!({"sessionId": id}));
    a.call("prompt", json!({"sessionId": id, "message": "work"}));
    let seen = a.events_until("message_update");
    let mut b = d.connect();
    b.hello(true);
    let r = b.call("session/attach", json!({"sessionId": id}));
    let result = &r["result"];
    assert_eq!(result["mode"], "snapshot");
    assert!(result["seq"].as_u64().unwrap() >= seen.last().unwrap().0);
    let snap = &result["snapshot"];
    assert_eq!(snap["state"]["isStreaming"], true, "{snap}");
    let message = &snap["streaming"]["message"];
    assert_eq!(message["role"], "assistant");
    assert_eq!(message["content"][0]["type"], "text");
    assert!(
        message["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("Working"),
        "{message}"
    );
    // The user's prompt is already in the messages; the partial answer is not.
    let roles = strs(&snap["messages"], "role");
    assert_eq!(roles, ["user"]);
    // Both can stop the run; both see it settle.
    b.call("abort", json!({"sessionId": id}));
    for c in [&mut a, &mut b] {
        let rest = c.events_until("agent_settled");
        assert_eq!(rest.last().unwrap().1["aborted"], true);
    }
}

#[test]
fn two_clients_opening_one_session_at_once_get_the_same_live_session() {
    let sb = Sandbox::new();
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let script = fixture("hello.json");
    let results: Vec<Value> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let (d, sb, script) = (&d, &sb, &script);
                s.spawn(move || {
                    let mut c = d.client();
                    let args = scripted_args(&[], script, &["--session-id", "shared"]);
                    c.call(
                        "session/open",
                        json!({"cwd": sb.work(), "spec": crate::common::daemon::spec(&args)}),
                    )
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let created: Vec<bool> = results
        .iter()
        .map(|r| {
            r["result"]["created"]
                .as_bool()
                .unwrap_or_else(|| panic!("{r}"))
        })
        .collect();
    assert!(
        results.iter().all(|r| r["result"]["sessionId"] == "shared"),
        "{results:?}"
    );
    assert_eq!(created.iter().filter(|c| **c).count(), 1, "{results:?}");
    let mut c = d.client();
    let status = c.call("daemon/status", json!({}));
    assert_eq!(status["result"]["sessions"].as_array().unwrap().len(), 1);
}

#[test]
fn a_full_ring_is_replayed_to_a_returning_client() {
    // Regression: the replay went into a queue of 4,096 events, so a client returning with a
    // cursor 10,000 events back was dropped with daemon/lagged before its first event.
    let sb = Sandbox::new();
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let script = sb.dir.path().join("many.json");
    let turn = json!({"chunks": [{"text": "t", "times": 10_500}]});
    std::fs::write(&script, json!({"turns": [turn]}).to_string()).unwrap();
    let mut a = d.client();
    let id = open_script(&mut a, &sb, script.to_str().unwrap(), &[]);
    let r = a.call("session/attach", json!({"sessionId": id}));
    let epoch = r["result"]["epoch"].clone();
    a.call("prompt", json!({"sessionId": id, "message": "go"}));
    let head = a.events_until("agent_settled").last().unwrap().0;
    let mut b = d.client();
    let from = head - 10_000;
    let r = b.call(
        "session/attach",
        json!({"sessionId": id, "cursor": {"epoch": epoch, "seq": from}}),
    );
    assert_eq!(r["result"]["mode"], "replay", "{r}");
    let replayed = b.events_until("agent_settled");
    assert_eq!(replayed.len(), 10_000);
    assert_eq!(replayed.first().unwrap().0, from + 1);
}

/// Issue 44 point 10: `daemon/status` counts the clients besides the one asking (a lone
/// `keel daemon status` says 0, one other connection makes it 1), and `keel ps` with no daemon
/// running lists nothing and says so on stderr, exit 0, as `keel daemon stop` does.
#[test]
fn status_leaves_the_asker_out_and_ps_without_a_daemon_lists_nothing() {
    let sb = Sandbox::new();
    let nowhere = sb.dir.path().join("no-daemon/p2.sock");
    let none = sb.run(&["ps", "--socket", nowhere.to_str().unwrap()]);
    assert_eq!(none.code, 0, "{}", none.stderr);
    assert_eq!(none.stdout, "");
    assert_eq!(none.stderr.trim(), "no daemon running");
    // Stopping what does not run: done already, not an error with a hint to start one.
    let stop = sb.run(&["daemon", "stop", "--socket", nowhere.to_str().unwrap()]);
    assert_eq!(stop.code, 0, "{}", stop.stderr);
    assert_eq!(stop.stderr.trim(), "no daemon running");
    let d = Daemon::start(&sb, &[]);
    let sock = d.socket.to_str().unwrap();
    let clients = |sb: &Sandbox| {
        let r = sb.run(&["daemon", "status", "--json", "--socket", sock]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        serde_json::from_str::<Value>(&r.stdout).unwrap()["clients"].clone()
    };
    assert_eq!(clients(&sb), 0);
    let _other = d.client();
    assert_eq!(clients(&sb), 1);
}
