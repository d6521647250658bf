//! The standard streams of print and JSON modes at their edges: a stdout that is closed or
//! full, a piped stdin over the cap, and a signal while stdin is still being read.

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::Signal;

use crate::common::support::{fixture, scripted_args, signal, snap, Run, Sandbox};

/// `/dev/full`: every write fails with ENOSPC.
fn dev_full() -> Stdio {
    Stdio::from(
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap(),
    )
}

/// Runs with stdout on `/dev/full` (so only stderr and the status are seen).
fn run_full(sb: &Sandbox, args: &[&str]) -> Run {
    let out = sb
        .cmd(args)
        .stdout(dev_full())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    sb.finish(out)
}

/// RPC mode (`args`) with stdout on `/dev/full`: one `get_state` request, then end of input.
pub(crate) fn rpc_on_full(sb: &Sandbox, args: &[&str]) -> Run {
    let mut child = sb
        .cmd(args)
        .stdin(Stdio::piped())
        .stdout(dev_full())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(b"{\"id\":\"s\",\"type\":\"get_state\"}\n")
        .unwrap();
    drop(stdin);
    sb.finish(child.wait_with_output().unwrap())
}

const FULL: &str = "Error: cannot write to stdout: No space left on device (os error 28)";

/// Regression: `keel -p … >/dev/full` exited 0, the answer lost without a word.
#[test]
fn print_mode_stdout_full_exits_1_and_says_why() {
    let sb = Sandbox::new();
    let script = fixture("hello.json");
    let run = run_full(&sb, &scripted_args(&["-p"], &script, &["hi"]));
    assert_eq!(run.code, 1, "{run}");
    assert!(run.stderr.contains(FULL), "{}", run.stderr);
    snap("exit_1_stdout_full", &run.to_string());
    // The session is saved: the run itself completed.
    assert_eq!(sb.session_files().len(), 1);
    // `--help` and `--list-models` check their one write the same way.
    for args in [&["--help"][..], &["--list-models"][..]] {
        let run = run_full(&sb, args);
        assert_eq!((run.code, run.stderr.contains(FULL)), (1, true), "{run}");
    }
}

/// Regression: JSON mode on `/dev/full` counted the failed write as a closed pipe (141, quiet).
#[test]
fn json_mode_stdout_full_exits_1_and_says_why() {
    let sb = Sandbox::new();
    let script = fixture("hello.json");
    let run = run_full(&sb, &scripted_args(&["--json"], &script, &["hi"]));
    assert_eq!(run.code, 1, "{run}");
    assert_eq!(run.stderr.matches(FULL).count(), 1, "{}", run.stderr);
    // The run was stopped and its session saved with what was done.
    assert!(sb.session_text().contains("\"hi\""));
}

/// RPC mode on `/dev/full` ends at its first response with 1 and the failure on stderr (it
/// counted as a closed pipe: 141, quiet).
#[test]
fn rpc_mode_stdout_full_exits_1_and_says_why() {
    let sb = Sandbox::new();
    let script = fixture("hello.json");
    let run = rpc_on_full(&sb, &scripted_args(&["--mode", "rpc"], &script, &[]));
    assert_eq!(run.code, 1, "{run}");
    assert!(run.stderr.contains(FULL), "{}", run.stderr);
}

/// Regression: `keel -p … | true` exited 0; a reader gone before the answer is a closed pipe.
#[test]
fn print_mode_reader_gone_before_the_answer_is_141_and_quiet() {
    let sb = Sandbox::new();
    let script = fixture("hello.json");
    let mut child = sb.spawn(&scripted_args(&["-p"], &script, &["hi"]));
    drop(child.stdout.take());
    let run = sb.finish(child.wait_with_output().unwrap());
    assert_eq!(run.code, 141, "{run}");
    assert_eq!(run.stderr, "", "a closed stdout must end quietly");
    assert_eq!(sb.session_files().len(), 1, "the session must be saved");
}

/// Runs with `bytes` on stdin, written by a thread (keel may stop reading early).
fn run_piped(sb: &Sandbox, args: &[&str], bytes: Vec<u8>) -> Run {
    let mut child = sb.spawn_piped(args);
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        // A broken pipe here is keel refusing the rest, which is the point.
        let _ = stdin.write_all(&bytes);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    sb.finish(out)
}

const CAP: usize = 16 * 1024 * 1024;

/// Regression: piped stdin was read without a limit, into memory.
#[test]
fn stdin_over_16_mib_is_a_usage_error() {
    let sb = Sandbox::new();
    let script = fixture("hello.json");
    let args = scripted_args(&[], &script, &["--no-session"]);
    let run = run_piped(&sb, &[&["-p"][..], &args].concat(), vec![b'x'; CAP + 1]);
    assert_eq!(run.code, 2, "{run}");
    assert!(
        run.stderr
            .starts_with("Error: piped stdin is over the 16 MiB limit\n"),
        "{}",
        run.stderr
    );
    snap("exit_2_stdin_over_cap", &run.to_string());
    let run = run_piped(&sb, &[&["--json"][..], &args].concat(), vec![b'x'; CAP + 1]);
    assert_eq!(run.code, 2, "{run}");
    let result = &run.stdout_lines()[0];
    assert_eq!(result["outcome"], "usage");
    assert_eq!(result["error"]["kind"], "usage");
    // Exactly the cap is still a prompt.
    let run = run_piped(&sb, &[&["-p"][..], &args].concat(), vec![b'x'; CAP]);
    assert_eq!(
        (run.code, run.stdout.as_str()),
        (0, "Hello from keel!\n"),
        "{run}"
    );
}

/// stdin is a pipe the test never closes: keel waits in the read until `sig` arrives.
fn signal_while_reading_stdin(sig: Signal, code: i32) {
    let sb = Sandbox::new();
    let script = fixture("hello.json");
    let mut child = sb
        .cmd(&scripted_args(&["--json"], &script, &[]))
        .env("KEEL_LOG", "debug")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stderr.lines() {
            if tx.send(line.unwrap()).is_err() {
                return;
            }
        }
    });
    let mut seen = String::new();
    while !seen.contains("reading stdin") {
        // A safety net against a keel that never gets there; the wait itself is on the line.
        match lines.recv_timeout(Duration::from_secs(60)) {
            Ok(line) => seen.push_str(&line),
            Err(e) => {
                let _ = child.kill();
                panic!("keel never said it reads stdin ({e}): {seen}");
            }
        }
        seen.push('\n');
    }
    signal(&child, sig);
    while let Ok(line) = lines.recv_timeout(Duration::from_secs(60)) {
        seen.push_str(&line);
        seen.push('\n');
    }
    let out = child.wait_with_output().unwrap();
    drop(stdin);
    let run = sb.finish(std::process::Output {
        stderr: seen.into_bytes(),
        ..out
    });
    assert_eq!(run.code, code, "{run}");
    let lines = run.stdout_lines();
    assert_eq!(lines.len(), 1, "{run}");
    assert_eq!(lines[0]["type"], "result");
    assert_eq!(lines[0]["outcome"], "interrupted");
    assert_eq!(lines[0]["exitCode"], code);
    assert_eq!(lines[0]["error"]["kind"], "interrupted");
    let name = format!("{sig:?}");
    let message = lines[0]["error"]["message"].as_str().unwrap();
    assert_eq!(
        message,
        format!("interrupted by {name} while reading stdin")
    );
    assert!(run.stderr.contains(&format!("Error: {message}")), "{run}");
}

/// Regression: a signal while stdin was read killed keel outright (no result line, no 128+n).
#[test]
fn sigint_while_reading_stdin_exits_130_with_the_result_line() {
    signal_while_reading_stdin(Signal::SIGINT, 130);
}

#[test]
fn sigterm_while_reading_stdin_exits_143_with_the_result_line() {
    signal_while_reading_stdin(Signal::SIGTERM, 143);
}

#[test]
fn sighup_while_reading_stdin_exits_129_with_the_result_line() {
    signal_while_reading_stdin(Signal::SIGHUP, 129);
}
