//! A daemon on "another host", reached with `--remote` through `keel daemon bridge`: first
//! with a stand-in for ssh (a script that runs the remote command here, so every run has it),
//! then through a real OpenSSH server on 127.0.0.1 started by the test (when Debian's
//! openssh-server is installed: `.ci/run` installs it). The link is cut mid-run by killing the
//! process that carries it; the client reconnects with its cursor and prints the whole run,
//! the same lines an in-process run prints: no gap, nothing twice.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::{json, Value};

use crate::common::daemon::{waiting_run, Daemon};
use crate::common::rpc::Rpc;
use crate::common::support::{read_until, scripted_args, Sandbox};

const KEEL: &str = env!("CARGO_BIN_EXE_keel");

/// An executable script in the sandbox.
fn script(sb: &Sandbox, name: &str, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = sb.dir.path().join(name);
    std::fs::write(&path, body).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// A program for `KEEL_SSH` that notes its pid in the sandbox's `NAME.links` and then becomes
/// `exec_line`: the pid is the process carrying the link.
fn noting_ssh(sb: &Sandbox, name: &str, exec_line: &str) -> (PathBuf, PathBuf) {
    let links = sb.dir.path().join(format!("{name}.links"));
    let body = format!("#!/bin/sh\necho $$ >> '{}'\n{exec_line}\n", links.display());
    (script(sb, name, &body), links)
}

/// A stand-in for ssh that becomes the remote command (its last argument) here, so killing
/// its pid cuts the link as a dying ssh would.
fn fake_ssh(sb: &Sandbox) -> (PathBuf, PathBuf) {
    noting_ssh(
        sb,
        "fake-ssh",
        "for last; do :; done\nexec /bin/sh -c \"exec $last\"",
    )
}

/// The pids noted in `links` so far.
fn links(path: &Path) -> Vec<i32> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

fn kill(pid: i32) {
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    );
}

/// The JSON run of the waiting script, permitted to run its bash call.
fn json_run(script_path: &Path) -> Vec<String> {
    let script = script_path.display().to_string();
    scripted_args(&["--json"], &script, &["--permission", "auto", "go"])
        .into_iter()
        .map(String::from)
        .collect()
}

/// Starts a JSON run through `remote_args` (ssh being `ssh`), waits until its bash call runs,
/// kills the process carrying the link, lets the run go on while the client is away, and
/// returns the client's stdout, stderr and exit code.
fn cut_the_link_mid_run(
    sb: &Sandbox,
    remote_args: &[&str],
    ssh: &Path,
    links_file: &Path,
    script_path: &Path,
    fifo: &Path,
) -> (String, String, i32) {
    let mut args: Vec<String> = remote_args.iter().map(|a| a.to_string()).collect();
    args.extend(json_run(script_path));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut child = sb
        .cmd(&args)
        .env("KEEL_SSH", ssh)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut seen = read_until(&mut stdout, "tool_execution_start").concat();
    let first = links(links_file);
    assert_eq!(first.len(), 1, "one link so far: {first:?}");
    kill(first[0]);
    // The run goes on with nobody attached: the bash call ends now.
    std::fs::write(fifo, "go on\n").unwrap();
    stdout.read_to_string(&mut seen).unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    (seen, err, status.code().unwrap_or(-1))
}

/// The same run in-process, for the lines it must equal: the FIFO is written by a helper
/// thread once the bash call opens it.
fn in_process(sb: &Sandbox, script_path: &Path, fifo: &Path) -> crate::common::support::Run {
    sees_the_fifo(sb, fifo);
    let fifo = fifo.to_path_buf();
    let writer = std::thread::spawn(move || std::fs::write(fifo, "go on\n").unwrap());
    let args = json_run(script_path);
    let run = sb.run(&args.iter().map(String::as_str).collect::<Vec<_>>());
    writer.join().unwrap();
    run
}

/// `fifo` lives in the remote run's workspace; the sandbox shows a run nothing outside its
/// own, so the in-process run of the same script gets that workspace as a writable root (its
/// settings file: no flag that could change what it prints).
fn sees_the_fifo(sb: &Sandbox, fifo: &Path) {
    let settings = json!({"sandbox": {"filesystem": {"allowWrite": [fifo.parent().unwrap()]}}});
    std::fs::write(sb.home().join("settings.json"), settings.to_string()).unwrap();
}

/// The run's JSON lines without the session header (the remote session has its own id and
/// file), its duration and session id left out.
fn events_of(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .filter(|v| v["type"] != "session")
        .map(|mut v| {
            if v["type"] == "result" {
                v["durationMs"] = json!("[ms]");
                v["sessionId"] = json!("[id]");
            }
            v
        })
        .collect()
}

#[test]
fn a_remote_run_survives_its_link_being_cut_and_prints_every_event_once() {
    let sb = Sandbox::new();
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let socket = d.socket.display().to_string();
    let (ssh, links_file) = fake_ssh(&sb);
    let (script_path, fifo) = waiting_run(&sb);
    let remote = [
        "--remote",
        "devbox",
        "--remote-keel",
        KEEL,
        "--socket",
        &socket,
    ];
    let (out, err, code) =
        cut_the_link_mid_run(&sb, &remote, &ssh, &links_file, &script_path, &fifo);
    assert_eq!(code, 0, "{out}\n---\n{err}");
    assert!(
        err.contains("the connection to the daemon on devbox (over ssh) was lost"),
        "{err}"
    );
    assert!(err.contains("reconnected to devbox (over ssh)"), "{err}");
    assert_eq!(links(&links_file).len(), 2, "one reconnect: {err}");
    let mut here = Sandbox::new();
    here.seed = sb.seed;
    let local = in_process(&here, &script_path, &fifo);
    assert_eq!(local.code, 0, "{local}");
    assert_eq!(events_of(&out), events_of(&local.stdout));
    // The session is the remote daemon's: `keel ps --remote` lists it there.
    let ps = sb
        .cmd(&[
            "ps",
            "--remote",
            "devbox",
            "--remote-keel",
            KEEL,
            "--socket",
            &socket,
        ])
        .env("KEEL_SSH", &ssh)
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&ps.stdout);
    assert!(ps.status.success(), "{table}");
    assert_eq!(table.lines().count(), 2, "{table}");
    assert!(table.contains("idle"), "{table}");
}

/// The real ssh, noting its pid first.
fn recorded_ssh(sb: &Sandbox) -> (PathBuf, PathBuf) {
    noting_ssh(sb, "recorded-ssh", "exec ssh \"$@\"")
}

#[test]
fn over_openssh_a_run_survives_the_ssh_process_being_killed() {
    if let Some(why) = crate::common::sshd::unavailable() {
        crate::common::support::skipped(&format!("the OpenSSH remote test needs sshd: {why}"));
        return;
    }
    let sb = Sandbox::new();
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let socket = d.socket.display().to_string();
    let path = std::env::var("PATH").unwrap_or_default();
    let sshd =
        crate::common::sshd::start(&sb.dir.path().join("sshd"), &path, sb.dir.path()).unwrap();
    let (ssh, links_file) = recorded_ssh(&sb);
    let host = sshd.host.clone();
    let mut remote: Vec<&str> = vec![
        "--remote",
        &host,
        "--remote-keel",
        KEEL,
        "--socket",
        &socket,
    ];
    for o in &sshd.opts {
        remote.extend(["--ssh-opt", o]);
    }
    // `keel ps` over ssh reaches the daemon there (no session yet).
    let ps = sb
        .cmd(&[&["ps"][..], &remote].concat())
        .env("KEEL_SSH", &ssh)
        .output()
        .unwrap();
    assert!(
        ps.status.success(),
        "{}{}",
        String::from_utf8_lossy(&ps.stdout),
        String::from_utf8_lossy(&ps.stderr)
    );
    std::fs::remove_file(&links_file).unwrap();
    let (script_path, fifo) = waiting_run(&sb);
    let (out, err, code) =
        cut_the_link_mid_run(&sb, &remote, &ssh, &links_file, &script_path, &fifo);
    assert_eq!(code, 0, "{out}\n---\n{err}");
    assert!(err.contains("reconnected to"), "{err}");
    assert_eq!(links(&links_file).len(), 2, "one reconnect: {err}");
    let mut here = Sandbox::new();
    here.seed = sb.seed;
    let local = in_process(&here, &script_path, &fifo);
    assert_eq!(events_of(&out), events_of(&local.stdout));
}

#[test]
fn the_tui_reconnects_by_itself_when_its_remote_link_drops_and_the_run_goes_on() {
    let sb = Sandbox::new();
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let socket = d.socket.display().to_string();
    let (ssh, links_file) = fake_ssh(&sb);
    let (script_path, fifo) = waiting_run(&sb);
    let shell = format!(
        "exec '{KEEL}' --remote devbox --remote-keel '{KEEL}' --socket '{socket}' \
         --provider scripted --script '{}' --permission auto --session-id live go",
        script_path.display()
    );
    let ssh_s = ssh.display().to_string();
    let (mut window, mut child) =
        crate::common::pty::spawn_with(&sb, &shell, &[("KEEL_SSH", ssh_s.as_str())]);
    window.wait_for("the bash tool running", |t| {
        t.contains("Waiting for the signal.") && t.contains("cat ")
    });
    window.wait_for("the daemon's place", |t| t.contains("on devbox"));
    // The last link is the one showing the session (opening it took one of its own).
    let before = links(&links_file);
    kill(*before.last().unwrap());
    window.wait_for("the lost link said", |t| {
        t.contains("The connection to the keel daemon on devbox was lost")
    });
    window.wait_for("the reconnection", |t| {
        t.contains("reconnected to the keel daemon on devbox")
    });
    assert_eq!(links(&links_file).len(), before.len() + 1);
    std::fs::write(&fifo, "go on\n").unwrap();
    window.wait_for("the run's end", |t| {
        t.contains("The signal came: all done.")
    });
    window.send("/detach\r");
    window.wait_for("the goodbye", |t| t.contains("Left session live"));
    assert!(child.wait().unwrap().success());
}

#[test]
fn the_bridge_relays_protocol_lines_both_ways_and_ends_with_its_stdin() {
    use std::io::Write;
    let sb = Sandbox::new();
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let socket = d.socket.display().to_string();
    let (mut child, mut stdin, mut stdout) =
        sb.spawn_talking(&["daemon", "bridge", "--socket", &socket]);
    let mut line = String::new();
    stdin
        .write_all(
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"daemon/hello\",\"params\":{\"protocolVersion\":2,\"client\":{\"name\":\"t\",\"version\":\"0\"}}}\n",
        )
        .unwrap();
    stdout.read_line(&mut line).unwrap();
    let hello: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(hello["id"], 1, "{line}");
    assert_eq!(
        hello["result"]["daemon"]["socket"],
        socket.as_str(),
        "{line}"
    );
    // Bytes that are not JSON reach the daemon as they are: its parse error comes back.
    line.clear();
    stdin.write_all(b"not json\n").unwrap();
    stdout.read_line(&mut line).unwrap();
    let err: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(err["error"]["code"], -32700, "{line}");
    drop(stdin);
    assert!(child.wait().unwrap().success());
}

#[test]
fn rpc_mode_over_a_remote_link_reconnects_and_writes_every_event_once() {
    let sb = Sandbox::new();
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let socket = d.socket.display().to_string();
    let (ssh, links_file) = fake_ssh(&sb);
    let (script_path, fifo) = waiting_run(&sb);
    let script_s = script_path.display().to_string();
    let args = scripted_args(
        &[
            "--mode",
            "rpc",
            "--remote",
            "devbox",
            "--remote-keel",
            KEEL,
            "--socket",
            &socket,
        ],
        &script_s,
        &["--permission", "auto"],
    );
    let mut cmd = sb.cmd(&args);
    cmd.env("KEEL_SSH", &ssh);
    let mut rpc = Rpc::spawn(cmd);
    rpc.send_bytes(b"{\"id\":\"p1\",\"type\":\"prompt\",\"message\":\"go\"}\n");
    rpc.wait(&json!({"type": "tool_execution_start"}));
    let before = links(&links_file);
    kill(*before.last().unwrap());
    std::fs::write(&fifo, "go on\n").unwrap();
    rpc.wait(&json!({"type": "agent_settled"}));
    let seen = rpc.seen.clone();
    // The link is back: a command after the cut is answered.
    rpc.send_bytes(b"{\"id\":\"s1\",\"type\":\"get_state\"}\n");
    let state = rpc.response("s1");
    assert_eq!(state["success"], true, "{state}");
    let (_, err, code) = rpc.finish();
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("reconnected to devbox (over ssh)"), "{err}");
    assert_eq!(links(&links_file).len(), before.len() + 1, "{err}");
    // Every event once, in the order an in-process RPC run writes them.
    let kinds = |lines: &[String]| -> Vec<String> {
        lines
            .iter()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v["type"] != "response")
            .map(|v| v["type"].as_str().unwrap_or("").to_string())
            .collect()
    };
    let mut here = Sandbox::new();
    here.seed = sb.seed;
    sees_the_fifo(&here, &fifo);
    let fifo2 = fifo.clone();
    let writer = std::thread::spawn(move || std::fs::write(fifo2, "go on\n").unwrap());
    let mut local = Rpc::start(
        &here,
        &scripted_args(&[], &script_s, &["--permission", "auto"]),
    );
    local.send_bytes(b"{\"id\":\"p1\",\"type\":\"prompt\",\"message\":\"go\"}\n");
    local.wait(&json!({"type": "agent_settled"}));
    let expected = local.seen.clone();
    let (_, stderr, code) = local.finish();
    writer.join().unwrap();
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(kinds(&seen), kinds(&expected));
}

#[test]
fn the_resume_picker_over_remote_lists_the_remote_hosts_sessions() {
    let sb = Sandbox::new();
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let socket = d.socket.display().to_string();
    let (ssh, _) = fake_ssh(&sb);
    let hello = crate::common::support::fixture("hello.json");
    let remote = [
        "--remote",
        "devbox",
        "--remote-keel",
        KEEL,
        "--socket",
        &socket,
    ];
    // A session saved on "devbox" (the daemon's KEEL_HOME).
    let mut args: Vec<&str> = vec!["-p"];
    args.extend_from_slice(&remote);
    args.extend(scripted_args(&[], &hello, &["remember the remote tulips"]));
    let saved = sb.cmd(&args).env("KEEL_SSH", &ssh).output().unwrap();
    assert!(
        saved.status.success(),
        "{}",
        String::from_utf8_lossy(&saved.stderr)
    );
    // This machine's KEEL_HOME has no session at all: the picker can only show devbox's.
    let here = sb.dir.path().join("laptop-home");
    std::fs::create_dir_all(&here).unwrap();
    let shell = format!(
        "exec '{KEEL}' --remote devbox --remote-keel '{KEEL}' --socket '{socket}' \
         --provider scripted --script '{hello}' --resume"
    );
    let ssh_s = ssh.display().to_string();
    let here_s = here.display().to_string();
    let (mut window, mut child) = crate::common::pty::spawn_with(
        &sb,
        &shell,
        &[("KEEL_SSH", ssh_s.as_str()), ("KEEL_HOME", here_s.as_str())],
    );
    window.wait_for("devbox's session in the picker", |t| {
        t.contains("remember the remote tulips")
    });
    window.send("\x1b");
    window.wait_for("the picker closed", |t| {
        !t.contains("remember the remote tulips")
    });
    window.send("/detach\r");
    window.wait_for("the goodbye", |t| t.contains("Left session"));
    assert!(child.wait().unwrap().success());
}

#[test]
fn remote_flags_that_contradict_each_other_are_usage_errors() {
    let sb = Sandbox::new();
    let both = sb.run(&["-p", "--remote", "devbox", "--no-daemon", "hi"]);
    assert_eq!(both.code, 2, "{both}");
    assert!(
        both.stderr
            .contains("--no-daemon runs the session in this process"),
        "{both}"
    );
    let cwd = sb.run(&["-p", "--cwd", "/tmp", "hi"]);
    assert_eq!(cwd.code, 2, "{cwd}");
    assert!(cwd.stderr.contains("it needs --remote"), "{cwd}");
}
