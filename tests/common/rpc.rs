//! The one driver for a `keel --mode rpc` child (or another JSONL stdio mode) that a test
//! talks to: a reader thread on its stdout, waits on matching lines, never on time.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use nix::sys::signal::Signal;
use serde_json::{json, Value};

use crate::common::support::{signal, Sandbox};

/// A safety net against a hung binary; tests wait on lines, never on time.
const LINE_TIMEOUT: Duration = Duration::from_secs(60);

/// A running `keel --mode rpc` with a reader thread on its stdout.
pub struct Rpc {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    /// Every stdout line so far.
    pub seen: Vec<String>,
    /// Lines read but not yet matched by a wait.
    cursor: usize,
}

impl Rpc {
    pub fn start(sb: &Sandbox, args: &[&str]) -> Rpc {
        let mut all = vec!["--mode", "rpc"];
        all.extend_from_slice(args);
        Rpc::start_raw(sb, &all)
    }

    /// The binary with exactly these arguments (another stdio mode: `--mode acp`).
    pub fn start_raw(sb: &Sandbox, all: &[&str]) -> Rpc {
        Rpc::spawn(sb.cmd(all))
    }

    /// The binary as `cmd` starts it (a sandbox command with its own environment added).
    pub fn spawn(mut cmd: Command) -> Rpc {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            loop {
                let mut line = String::new();
                match r.read_line(&mut line) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {
                        if tx.send(line).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        Rpc {
            stdin: child.stdin.take(),
            child,
            lines: rx,
            seen: Vec::new(),
            cursor: 0,
        }
    }

    pub fn send_bytes(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    pub fn send(&mut self, v: &Value) {
        self.send_bytes(format!("{v}\n").as_bytes());
    }

    /// The next unread line that contains `fields` (every key with an equal value).
    pub fn wait(&mut self, fields: &Value) -> Value {
        loop {
            while self.cursor < self.seen.len() {
                let line = &self.seen[self.cursor];
                self.cursor += 1;
                let v: Value = serde_json::from_str(line)
                    .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"));
                if contains(&v, fields) {
                    return v;
                }
            }
            match self.lines.recv_timeout(LINE_TIMEOUT) {
                Ok(line) => self.seen.push(line),
                Err(_) => panic!(
                    "no line with {fields} arrived; stdout so far:\n{}",
                    self.seen.concat()
                ),
            }
        }
    }

    /// The response to request `id`.
    pub fn response(&mut self, id: &str) -> Value {
        self.wait(&json!({"type": "response", "id": id}))
    }

    /// The `stopReason` of the response to ACP request `id` (`session/prompt`).
    pub fn stop_reason(&mut self, id: &str) -> Value {
        self.wait(&json!({"id": id}))["result"]["stopReason"].clone()
    }

    /// Sends a request and returns its response.
    pub fn call(&mut self, req: Value) -> Value {
        let id = req["id"]
            .as_str()
            .expect("request with a string id")
            .to_string();
        self.send(&req);
        self.response(&id)
    }

    /// Sends a request and returns every line read since the last match, up to and including
    /// its response.
    pub fn call_seen(&mut self, req: Value) -> Vec<Value> {
        let id = req["id"]
            .as_str()
            .expect("request with a string id")
            .to_string();
        self.send(&req);
        self.until(&json!({"type": "response", "id": id}))
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// Every stdout line since the last match, up to and including the next line that
    /// contains `fields`, as written.
    pub fn until(&mut self, fields: &Value) -> Vec<String> {
        let from = self.cursor;
        self.wait(fields);
        self.seen[from..self.cursor].to_vec()
    }

    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Closes stdin and waits for the exit; returns every stdout line, stderr and the code.
    pub fn finish(mut self) -> (Vec<String>, String, i32) {
        drop(self.stdin.take());
        self.collect()
    }

    /// Waits for the exit; stdin stays open until then (after a signal, so that the exit
    /// cannot be caused by end of input instead).
    pub fn collect(mut self) -> (Vec<String>, String, i32) {
        let stdin = self.stdin.take();
        while let Ok(line) = self.lines.recv_timeout(LINE_TIMEOUT) {
            self.seen.push(line);
        }
        let out = self.child.wait_with_output().unwrap();
        drop(stdin);
        (
            self.seen,
            String::from_utf8_lossy(&out.stderr).into_owned(),
            out.status.code().unwrap_or(-1),
        )
    }

    pub fn signal(&self, sig: Signal) {
        signal(&self.child, sig);
    }
}

fn contains(v: &Value, fields: &Value) -> bool {
    match (v, fields) {
        (Value::Object(have), Value::Object(want)) => want
            .iter()
            .all(|(k, w)| have.get(k).is_some_and(|h| contains(h, w))),
        _ => v == fields,
    }
}
