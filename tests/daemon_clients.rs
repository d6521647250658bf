//! Print and JSON modes as daemon clients (`--daemon`, `DESIGN.md` §10.5): the same stdout,
//! stderr and exit code as in-process (clock and seed fixed), signals abort the run in the
//! daemon, `--detach` then `--wait`, and a daemon killed mid-run (`daemon_lost`). Every daemon
//! is the test's own guard, killed also when the test fails.

use std::io::Read;

use nix::sys::signal::Signal;
use serde_json::{json, Value};

use crate::common::daemon::Daemon;
use crate::common::support::{fixture, read_until, scripted_args, signal, Run, Sandbox};

/// `durationMs` of the result line is wall time measured by each process itself (the test
/// clock advances with every read, and a client reads it less often than a run in-process):
/// it is the one field the comparison leaves out.
pub fn comparable(run: &Run) -> String {
    let text = run.to_string();
    let mut out = String::new();
    for line in text.lines() {
        if line.starts_with("{\"type\":\"result\"") {
            let mut v: Value = serde_json::from_str(line).unwrap();
            v["durationMs"] = json!("[ms]");
            out.push_str(&v.to_string());
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

fn daemon_args<'a>(d: &'a str, base: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["--daemon", "--socket", d];
    args.extend_from_slice(base);
    args
}

#[test]
fn print_and_json_runs_through_the_daemon_write_what_they_write_in_process() {
    let mut there = Sandbox::new();
    let d = Daemon::start(&there, &["--idle-exit", "0"]);
    let socket = d.socket.display().to_string();
    let cases: &[(&str, &[&str], i32)] = &[
        ("hello.json", &["hi"], 0),
        ("tool_error.json", &["--permission", "ask", "fix it"], 5),
        ("blocked.json", &["--permission", "ask", "clean"], 5),
        ("provider_error.json", &["go"], 1),
        ("max_turns.json", &["--max-turns", "3", "go"], 4),
        ("everything.json", &["--permission", "auto", "go"], -1),
        ("no_such_script.json", &["hi"], 3),
        ("hello.json", &["--provider", "twice", "hi"], 2),
        ("hello.json", &["--session-id", "bad id!", "hi"], 2),
    ];
    let mut seed = 100;
    for mode in ["-p", "--json"] {
        for (script, extra, want) in cases {
            seed += 1;
            let path = fixture(script);
            let mut base = scripted_args(&[mode], &path, &[]);
            base.extend_from_slice(extra);
            let mut local_sb = Sandbox::new();
            local_sb.seed = seed;
            there.seed = seed;
            let local = local_sb.run(&base);
            let remote = there.run(&daemon_args(&socket, &base));
            if *want >= 0 {
                assert_eq!(local.code, *want, "{mode} {script}: {local}");
            }
            assert_eq!(
                comparable(&local),
                comparable(&remote),
                "{mode} {script} {extra:?}"
            );
        }
    }
}

#[test]
fn a_signal_aborts_the_run_in_the_daemon_and_exits_as_in_process() {
    let mut sb = Sandbox::new();
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let socket = d.socket.display().to_string();
    let script = fixture("hang.json");
    for (n, (sig, code)) in [
        (Signal::SIGINT, 130),
        (Signal::SIGTERM, 143),
        (Signal::SIGHUP, 129),
    ]
    .into_iter()
    .enumerate()
    {
        sb.seed = 300 + n as u64;
        let base = scripted_args(&["--json"], &script, &["work"]);
        let mut child = sb.spawn(&daemon_args(&socket, &base));
        let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut seen = read_until(&mut stdout, "\"type\":\"message_update\"").concat();
        signal(&child, sig);
        stdout.read_to_string(&mut seen).unwrap();
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(code), "{seen}");
        let last: Value = serde_json::from_str(seen.lines().last().unwrap()).unwrap();
        assert_eq!(
            (last["outcome"].clone(), last["exitCode"].clone()),
            (json!("interrupted"), json!(code)),
            "{last}"
        );
        // The run was aborted in the daemon, not only left: its events say so.
        assert!(
            seen.contains(r#"{"type":"agent_settled","aborted":true"#),
            "{seen}"
        );
    }
    let mut c = d.client();
    let status = c.call("daemon/status", json!({}));
    let states: Vec<Value> = status["result"]["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["state"].clone())
        .collect();
    assert_eq!(states, vec![json!("idle"); 3], "{status}");
}

#[test]
fn a_detached_run_goes_on_and_wait_prints_it_as_a_json_run_would() {
    let mut there = Sandbox::new();
    there.seed = 401;
    let d = Daemon::start(&there, &["--idle-exit", "0"]);
    let socket = d.socket.display().to_string();
    let script = fixture("hello.json");
    let base = scripted_args(&["--json"], &script, &[]);
    let mut args = daemon_args(&socket, &base);
    args.extend(["--detach", "hi"]);
    let started = there.run(&args);
    assert_eq!(started.code, 0, "{started}");
    let lines = started.stdout_lines();
    assert_eq!(lines.len(), 2, "{started}");
    assert_eq!(lines[1]["outcome"], "detached");
    let id = lines[0]["id"].as_str().unwrap().to_string();
    assert_eq!(lines[1]["sessionId"], id.as_str());
    // `keel ps` lists it, with its age.
    let ps = there.run(&["ps", "--socket", &socket]);
    assert_eq!(ps.code, 0, "{ps}");
    let header = ps.stdout.lines().next().unwrap();
    assert!(header.contains("AGE") && header.contains("STATE"), "{ps}");
    assert!(ps.stdout.contains(&id), "{ps}");
    let ps_json = there.run(&["ps", "--json", "--socket", &socket]);
    assert!(ps_json.stdout.contains("\"ageMs\""), "{ps_json}");
    // Print mode prints just the id.
    there.seed = 402;
    let mut args = daemon_args(&socket, &scripted_args(&["-p"], &script, &[]));
    args.extend(["--detach", "hi"]);
    let printed = there.run(&args);
    assert_eq!(printed.code, 0, "{printed}");
    assert_eq!(printed.stdout.trim().len(), id.len(), "{printed}");

    let waited = there.run(&daemon_args(
        &socket,
        &["--json", "--resume", &id, "--wait"],
    ));
    assert_eq!(waited.code, 0, "{waited}");
    // The same lines an in-process JSON run of that prompt writes.
    let mut local_sb = Sandbox::new();
    local_sb.seed = 401;
    let local = local_sb.run(&scripted_args(&["--json"], &script, &["hi"]));
    assert_eq!(comparable(&local), comparable(&waited));
    // A session with no run in the daemon has nothing to wait for.
    let none = there.run(&daemon_args(
        &socket,
        &["--json", "--resume", "no-such", "--wait"],
    ));
    assert_ne!(none.code, 0, "{none}");
    let wait_prompt = there.run(&daemon_args(&socket, &["-p", "--continue", "--wait", "x"]));
    assert_eq!(wait_prompt.code, 2, "{wait_prompt}");
}

#[test]
fn a_daemon_killed_mid_run_ends_the_client_with_daemon_lost_and_the_session_resumes() {
    let sb = Sandbox::new();
    let mut d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let socket = d.socket.display().to_string();
    let script = fixture("hang.json");
    let base = scripted_args(&["--json"], &script, &["work"]);
    let mut child = sb.spawn(&daemon_args(&socket, &base));
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut seen = read_until(&mut stdout, "\"type\":\"message_update\"").concat();
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(d.pid()), Signal::SIGKILL).unwrap();
    assert_eq!(d.wait(), 128 + 9);
    stdout.read_to_string(&mut seen).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{seen}");
    let last: Value = serde_json::from_str(seen.lines().last().unwrap()).unwrap();
    assert_eq!(last["error"]["kind"], "daemon_lost", "{last}");
    assert_eq!(last["exitCode"], 1);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("the keel daemon went away"), "{err}");
    let again = sb.scripted("--json", "hello.json", &["--continue", "go on"]);
    assert_eq!(again.code, 0, "{again}");
    let text = sb.session_text();
    assert!(
        text.contains("\"work\"") && text.contains("\"go on\""),
        "{text}"
    );
}
