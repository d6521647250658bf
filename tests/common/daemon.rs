//! What the daemon tests share: a daemon started on a socket in a sandbox (killed on drop,
//! also when the test fails) and a line-by-line protocol v1 client connection.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use crate::common::support::{fixture, scripted_args, Run, Sandbox};

/// A daemon this test started; killed on drop.
pub struct Daemon {
    pub child: Option<Child>,
    pub socket: PathBuf,
}

impl Daemon {
    /// Starts `keel daemon run` on a socket in the sandbox and waits for its "listening" log.
    pub fn start(sb: &Sandbox, extra: &[&str]) -> Daemon {
        Daemon::start_env(sb, extra, &[])
    }

    /// [`Daemon::start`] with `vars` added to the daemon's environment.
    pub fn start_env(sb: &Sandbox, extra: &[&str], vars: &[(&str, &str)]) -> Daemon {
        let (socket, args) = Daemon::args(sb, extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut cmd = sb.cmd(&args);
        cmd.envs(vars.iter().copied());
        Daemon::spawn(cmd, socket)
    }

    /// [`Daemon::start`] through `sh -c 'SETUP; exec keel …'` ([`Sandbox::cmd_after`]), for
    /// process limits such as `ulimit -f`.
    pub fn start_after(sb: &Sandbox, setup: &str, extra: &[&str]) -> Daemon {
        let (socket, args) = Daemon::args(sb, extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        Daemon::spawn(sb.cmd_after(setup, &args), socket)
    }

    /// The socket in the sandbox (its directory made private) and `daemon run`'s arguments.
    fn args(sb: &Sandbox, extra: &[&str]) -> (PathBuf, Vec<String>) {
        let dir = sb.dir.path().join("run");
        std::fs::create_dir_all(&dir).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        let socket = dir.join("p2.sock");
        let mut args = vec!["daemon", "run", "--socket", socket.to_str().unwrap()];
        args.extend_from_slice(extra);
        (socket.clone(), args.into_iter().map(String::from).collect())
    }

    /// Starts `cmd` (a `keel daemon run`) and waits for its "listening" log.
    fn spawn(mut cmd: std::process::Command, socket: PathBuf) -> Daemon {
        let mut child = cmd
            .env("KEEL_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        crate::common::support::stderr_until(&mut child, "listening on", "the daemon");
        Daemon {
            child: Some(child),
            socket,
        }
    }

    pub fn connect(&self) -> Conn {
        let w = UnixStream::connect(&self.socket).unwrap();
        w.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        Conn {
            r: BufReader::new(w.try_clone().unwrap()),
            w,
            next: 100,
            notes: Vec::new(),
        }
    }

    /// A connection that said hello (a client that is not interactive).
    pub fn client(&self) -> Conn {
        let mut c = self.connect();
        c.hello(false);
        c
    }

    /// Waits for the daemon to exit by itself; its status code.
    pub fn wait(&mut self) -> i32 {
        let mut child = self.child.take().unwrap();
        let status = child.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        status
            .code()
            .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
    }

    pub fn pid(&self) -> i32 {
        self.child.as_ref().unwrap().id() as i32
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A client connection that reads line by line.
pub struct Conn {
    pub r: BufReader<UnixStream>,
    pub w: UnixStream,
    pub next: u64,
    /// Notifications read while waiting for responses.
    pub notes: Vec<Value>,
}

impl Conn {
    pub fn send_raw(&mut self, line: &str) {
        self.w.write_all(line.as_bytes()).unwrap();
        self.w.write_all(b"\n").unwrap();
    }

    /// The next line as JSON; `None` at end of stream.
    pub fn recv(&mut self) -> Option<Value> {
        let mut line = String::new();
        if self.r.read_line(&mut line).unwrap() == 0 {
            return None;
        }
        Some(serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}")))
    }

    /// Sends a request and returns its response (notifications go to `notes`).
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        let req = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_raw(&req.to_string());
        loop {
            let v = self.recv().expect("the daemon closed the connection");
            if v.get("id") == Some(&json!(id)) {
                return v;
            }
            self.notes.push(v);
        }
    }

    pub fn hello(&mut self, interactive: bool) -> Value {
        let r = self.call(
            "daemon/hello",
            json!({"protocolVersion": 2, "client": {"name": "test", "version": "0"}, "interactive": interactive}),
        );
        assert!(r.get("result").is_some(), "{r}");
        r
    }

    /// Reads `session/event` notifications (starting with those already read) until one is
    /// of `kind`; returns `(seq, event)` of all of them.
    pub fn events_until(&mut self, kind: &str) -> Vec<(u64, Value)> {
        let notes = self.notes_until(is_event(kind));
        let events = notes.into_iter().filter(|v| v["method"] == "session/event");
        events
            .map(|mut v| {
                let seq = v["params"]["seq"].as_u64().unwrap();
                (seq, v["params"]["event"].take())
            })
            .collect()
    }
}

impl Conn {
    /// Reads notifications (starting with those already read) until one for which `last`
    /// holds; returns all of them, that one last.
    pub fn notes_until(&mut self, last: impl Fn(&Value) -> bool) -> Vec<Value> {
        let mut out = Vec::new();
        let mut pending = std::mem::take(&mut self.notes).into_iter();
        loop {
            let v = match pending.next() {
                Some(v) => v,
                None => self.recv().expect("the stream ended early"),
            };
            let done = last(&v);
            out.push(v);
            if done {
                self.notes.extend(pending);
                return out;
            }
        }
    }

    /// `daemon/status`'s sessions.
    /// `daemon/status`'s sessions, without `ageMs` (wall time, different on every call).
    pub fn sessions(&mut self) -> Vec<Value> {
        let r = self.call("daemon/status", json!({}));
        let mut list = r["result"]["sessions"]
            .as_array()
            .unwrap_or_else(|| panic!("{r}"))
            .clone();
        for s in &mut list {
            assert!(s["ageMs"].is_u64(), "{s}");
            s.as_object_mut().unwrap().remove("ageMs");
        }
        list
    }
}

/// A `session/event` notification of `kind`.
pub fn is_event(kind: &str) -> impl Fn(&Value) -> bool + '_ {
    move |v| v["method"] == "session/event" && v["params"]["event"]["type"] == kind
}

/// A notification of `method`.
pub fn is_note(method: &str) -> impl Fn(&Value) -> bool + '_ {
    move |v| v["method"] == method
}

pub fn code(v: &Value) -> i64 {
    v["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("not an error: {v}"))
}

/// The `session/open` spec of a session asked for with these flags, as the command line
/// resolves them (`keel::cli::spec`): the tests write sessions as flags, the wire carries specs.
pub fn spec<S: AsRef<str>>(args: &[S]) -> Value {
    let args: Vec<String> = args.iter().map(|a| a.as_ref().to_string()).collect();
    let cli = keel::cli::spec::parse_argv(&args).unwrap_or_else(|e| panic!("{args:?}: {e:?}"));
    let spec = keel::cli::spec::of(&cli, std::path::Path::new("/"))
        .unwrap_or_else(|e| panic!("{args:?}: {e:?}"));
    serde_json::to_value(spec).unwrap()
}

/// Opens a scripted session in the sandbox's work dir; its id.
pub fn open(c: &mut Conn, sb: &Sandbox, script: &str, extra: &[&str]) -> String {
    open_script(c, sb, &fixture(script), extra)
}

pub fn open_script(c: &mut Conn, sb: &Sandbox, script: &str, extra: &[&str]) -> String {
    let args = scripted_args(&[], script, extra);
    let r = c.call(
        "session/open",
        json!({"cwd": sb.work(), "spec": spec(&args), "env": {"KEEL_TEST_SEED": "7"}}),
    );
    r["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"))
        .to_string()
}

/// A scripted run (prompt `go`) whose bash call waits on a FIFO until the test writes it, so
/// "the run was still going" is certain, not timed: the script's path and the FIFO.
pub fn waiting_run(sb: &Sandbox) -> (PathBuf, PathBuf) {
    // In the workspace: the sandbox's /tmp is private, the rest of this scratch dir unseen.
    let fifo = sb.work().join("signal.fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let path = sb.dir.path().join("wait.json");
    let turns = json!({"turns": [
        {"match": "go", "chunks": [
            {"text": "Waiting for the signal."},
            {"toolCall": {"id": "call_wait", "name": "bash",
                          "arguments": {"command": format!("cat {}", fifo.display())}}}
        ]},
        {"chunks": [{"text": "The signal came: all done."}]}
    ]});
    std::fs::write(&path, turns.to_string()).unwrap();
    (path, fifo)
}

/// `keel ARGS` talking to the daemon at `socket` (`KEEL_SOCKET`), with the 1 s floor for
/// `--every` (`KEEL_SCHEDULE_MIN_SECS`).
pub fn keel_on(sb: &Sandbox, socket: &std::path::Path, args: &[&str]) -> Run {
    let out = sb
        .cmd(args)
        .env("KEEL_SOCKET", socket)
        .env("KEEL_SCHEDULE_MIN_SECS", "1")
        .output()
        .unwrap();
    sb.finish(out)
}

/// Two clients on a session (opened with `extra`) whose script streams 100 bursts of 250
/// deltas, 8 ms apart: `fast` attached and prompted it ("flood") and reads on; `slow`
/// attached first and reads nothing. A reading client keeps up (it may fall 56 bursts behind
/// before its queue of 14,096 fills); one that reads nothing cannot hold them all. The two
/// connections and the session's id.
pub fn flood(d: &Daemon, sb: &Sandbox, extra: &[&str]) -> (Conn, Conn, String) {
    let chunks: Vec<Value> = (0..100)
        .map(|_| json!({"text": "token ", "times": 250, "delayMs": 8}))
        .collect();
    let script = sb.dir.path().join("bursts.json");
    std::fs::write(&script, json!({"turns": [{"chunks": chunks}]}).to_string()).unwrap();
    let mut fast = d.client();
    let id = open_script(&mut fast, sb, script.to_str().unwrap(), extra);
    let mut slow = d.client();
    slow.call("session/attach", json!({"sessionId": id}));
    fast.call("session/attach", json!({"sessionId": id}));
    fast.call("prompt", json!({"sessionId": id, "message": "flood"}));
    (fast, slow, id)
}

/// `keel ARGS` with `input` on stdin, in-process in `here` and then through a daemon started in
/// `there` (`--daemon --socket SOCKET` added): both runs, each asserted to exit 0, and the
/// daemon (still running).
pub fn here_and_through_a_daemon(
    here: &Sandbox,
    there: &Sandbox,
    args: &[&str],
    input: &str,
) -> (Run, Run, Daemon) {
    let local = here.run_stdin(args, input);
    assert_eq!(local.code, 0, "{local}");
    let d = Daemon::start(there, &["--idle-exit", "0"]);
    let mut args = args.to_vec();
    let socket = d.socket.display().to_string();
    args.extend(["--daemon", "--socket", &socket]);
    let remote = there.run_stdin(&args, input);
    assert_eq!(remote.code, 0, "{remote}");
    (local, remote, d)
}
