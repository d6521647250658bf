//! How every client command reaches the daemon (`DESIGN.md` §10.2, issue 27): the socket's
//! directory is checked and the daemon's peer uid verified before `daemon/hello`, by every
//! client (a planted directory and another user's listener are refused, and the listener is
//! sent nothing); a foreground `keel daemon run` outlives SIGHUP; a `--daemon` client of a
//! running daemon needs no `$KEEL_HOME/logs`. The other-user tests need root (they say they were
//! skipped elsewhere; the unit tests of the rules run everywhere).

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};

use nix::sys::signal::Signal;
use serde_json::json;

use crate::common::daemon::Daemon;
use crate::common::support::{fixture, scripted_args, signal, Run, Sandbox};

const NOBODY: u32 = 65534;

/// A listener this test started as `nobody`: it accepts connections one at a time, reads up
/// to the first newline (or the end), closes, and prints `received N bytes`. Killed on drop.
struct Foreign {
    child: Child,
    lines: BufReader<ChildStdout>,
}

impl Drop for Foreign {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const LISTENER: &str = r#"
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1])
s.listen(16)
print("listening", flush=True)
while True:
    c, _ = s.accept()
    data = b""
    while not data.endswith(b"\n"):
        chunk = c.recv(4096)
        if not chunk:
            break
        data += chunk
    c.close()
    print("received %d bytes" % len(data), flush=True)
"#;

/// A python3 that `nobody` can run (not a shim under /root).
fn python() -> Option<PathBuf> {
    ["/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
}

/// Why the other-user tests cannot run here, if they cannot.
fn cannot_run_as_nobody() -> Option<&'static str> {
    if !nix::unistd::geteuid().is_root() {
        return Some("listening as a second user needs root");
    }
    if python().is_none() {
        return Some("no python3 in /usr/bin or /usr/local/bin for the foreign listener");
    }
    None
}

impl Foreign {
    /// Starts the listener as `nobody` on `socket` and waits until it listens.
    fn start(socket: &Path) -> Foreign {
        let mut child = Command::new(python().unwrap())
            .args(["-c", LISTENER])
            .arg(socket)
            .env_clear()
            .current_dir("/")
            .uid(NOBODY)
            .gid(NOBODY)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap());
        let mut f = Foreign { child, lines };
        assert_eq!(f.next_line(), "listening");
        f
    }

    /// The listener's next line (what the next connection sent).
    fn next_line(&mut self) -> String {
        let mut line = String::new();
        assert!(
            self.lines.read_line(&mut line).unwrap() > 0,
            "the foreign listener ended"
        );
        line.trim_end().to_string()
    }
}

/// A temp dir `nobody` can pass through, with `run/` owned by `nobody` (0700).
fn planted() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir(&run).unwrap();
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::chown(&run, Some(NOBODY), Some(NOBODY)).unwrap();
    (dir, run.join("p2.sock"))
}

/// The client commands that dial the daemon, each with what it needs (`tag` keeps task names
/// apart between calls).
fn client_commands(tag: &str) -> Vec<Vec<String>> {
    let script = fixture("hello.json");
    let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    vec![
        words(&["daemon", "status"]),
        words(&["daemon", "status", "--json"]),
        words(&["daemon", "stop"]),
        words(&["ps"]),
        words(&["attach"]),
        words(&scripted_args(
            &["schedule", "add", &format!("t{tag}"), "--every", "1h"],
            &script,
            &["--", "hi"],
        )),
        words(&["schedule", "run", &format!("t{tag}")]),
        words(&scripted_args(&["-p", "--daemon"], &script, &["hi"])),
    ]
}

fn keel(sb: &Sandbox, socket: &Path, args: &[String]) -> Run {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = sb.cmd(&args).env("KEEL_SOCKET", socket).output().unwrap();
    sb.finish(out)
}

#[test]
fn every_client_refuses_a_socket_directory_of_another_user_and_a_listener_of_another_uid() {
    if let Some(why) = cannot_run_as_nobody() {
        crate::common::support::skipped(&format!("a daemon client test as a second user: {why}"));
        return;
    }
    let sb = Sandbox::new();
    let (_dir, socket) = planted();
    let mut foreign = Foreign::start(&socket);
    let run_dir = socket.parent().unwrap().display().to_string();

    // 1. The directory is nobody's: refused before connecting.
    for args in client_commands("1") {
        let run = keel(&sb, &socket, &args);
        assert_eq!(run.code, 3, "{args:?}: {run}");
        assert!(
            run.stderr.contains(&format!(
                "the daemon's socket directory {run_dir} is owned by uid {NOBODY}"
            )),
            "{args:?}: {run}"
        );
    }
    // Nothing connected before this marker.
    {
        use std::io::Write;
        let mut marker = std::os::unix::net::UnixStream::connect(&socket).unwrap();
        marker.write_all(b"marker\n").unwrap();
    }
    assert_eq!(
        foreign.next_line(),
        "received 7 bytes",
        "a client connected to the planted directory's listener"
    );

    // 2. The directory is ours again (0700), but the listener in it is nobody's.
    std::os::unix::fs::chown(socket.parent().unwrap(), Some(0), Some(0)).unwrap();
    for args in client_commands("2") {
        let run = keel(&sb, &socket, &args);
        assert_eq!(run.code, 3, "{args:?}: {run}");
        assert!(
            run.stderr.contains(&format!(
                "the socket {} belongs to uid {NOBODY}",
                socket.display()
            )),
            "{args:?}: {run}"
        );
        assert!(!run.stderr.contains("no keel daemon"), "{args:?}: {run}");
        assert_eq!(
            foreign.next_line(),
            "received 0 bytes",
            "{args:?} sent the listener something: {run}"
        );
    }
}

#[test]
fn a_foreground_daemon_keeps_serving_after_sighup() {
    let sb = Sandbox::new();
    let dir = sb.dir.path().join("run");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let socket = dir.join("p2.sock");
    let child = sb
        .cmd(&[
            "daemon",
            "run",
            "--socket",
            socket.to_str().unwrap(),
            "--idle-exit",
            "0",
        ])
        .env("KEEL_LOG", "debug")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut d = Daemon {
        child: Some(child),
        socket,
    };
    let mut err = BufReader::new(d.child.as_mut().unwrap().stderr.take().unwrap());
    let mut until = |needle: &str, d: &mut Daemon| loop {
        let mut line = String::new();
        if err.read_line(&mut line).unwrap() == 0 {
            panic!(
                "the daemon's log ended before {needle:?}: it exited with {}",
                d.wait()
            );
        }
        if line.contains(needle) {
            return;
        }
    };
    until("listening on", &mut d);
    signal(d.child.as_ref().unwrap(), Signal::SIGHUP);
    until("SIGHUP ignored", &mut d);
    std::thread::spawn(move || for _ in err.lines() {});
    let mut c = d.client();
    let status = c.call("daemon/status", json!({}));
    assert_eq!(status["result"]["pid"], json!(d.pid()), "{status}");
    c.call("daemon/stop", json!({}));
    assert_eq!(d.wait(), 0);
}

#[test]
fn a_daemon_client_needs_no_logs_directory_when_a_daemon_runs() {
    let mut sb = Sandbox::new();
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    // `logs` cannot be created: a file has its name.
    std::fs::write(sb.home().join("logs"), "not a directory").unwrap();
    let script = fixture("hello.json");
    let socket = d.socket.display().to_string();
    for mode in ["-p", "--json"] {
        sb.seed += 1; // a new session id each time
        let run = sb.run(&scripted_args(
            &[mode, "--daemon", "--socket", &socket],
            &script,
            &["hi"],
        ));
        assert_eq!(run.code, 0, "{mode}: {run}");
    }
}
