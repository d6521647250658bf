//! One binary-level test per row of the exit-code table (DESIGN §5): stdout, stderr and the
//! exit status snapshotted together.

use std::io::{BufRead, BufReader};

use nix::sys::signal::Signal;

use crate::common::support::{scripted_args, snap, Sandbox};

#[test]
fn exit_0_success_prints_only_the_answer() {
    let run = Sandbox::new().scripted("-p", "hello.json", &["hi"]);
    assert_eq!(run.code, 0);
    assert_eq!(run.stdout, "Hello from keel!\n");
    snap("exit_0_success", &run.to_string());
}

#[test]
fn exit_1_provider_error() {
    let run = Sandbox::new().scripted("-p", "provider_error.json", &["hi"]);
    assert_eq!(run.code, 1);
    assert_eq!(run.stdout, "");
    snap("exit_1_provider_error", &run.to_string());
}

#[test]
fn exit_2_unknown_flag() {
    let run = Sandbox::new().run(&["-p", "--bogus", "hi"]);
    assert_eq!(run.code, 2);
    snap("exit_2_unknown_flag", &run.to_string());
}

#[test]
fn exit_2_bare_resume_in_print_mode() {
    let run = Sandbox::new().scripted("-p", "hello.json", &["--resume"]);
    assert_eq!(run.code, 2);
    snap("exit_2_bare_resume", &run.to_string());
}

#[test]
fn exit_2_no_prompt() {
    let run = Sandbox::new().scripted("-p", "hello.json", &[]);
    assert_eq!(run.code, 2);
    snap("exit_2_no_prompt", &run.to_string());
}

#[test]
fn exit_3_no_provider() {
    let run = Sandbox::new().run(&["-p", "hi"]);
    assert_eq!(run.code, 3);
    snap("exit_3_no_provider", &run.to_string());
}

/// A sandbox holding two sessions with different ids (same fixed clock, so the UUIDv7 ids
/// share their time prefix).
fn two_sessions() -> Sandbox {
    let mut sb = Sandbox::new();
    for seed in [1, 2] {
        sb.seed = seed;
        assert_eq!(sb.scripted("-p", "hello.json", &["hi"]).code, 0);
    }
    sb
}

#[test]
fn exit_3_unknown_session_lists_candidates() {
    let run = two_sessions().scripted("-p", "hello.json", &["--resume", "zzz", "again"]);
    assert_eq!(run.code, 3);
    assert!(run.stderr.contains("zzz"), "{}", run.stderr);
    // Not "a longer prefix": no prefix of anything here matched (issue 44 point 16).
    assert!(run.stderr.contains("kept per directory"), "{}", run.stderr);
    snap("exit_3_unknown_session", &run.to_string());
}

#[test]
fn exit_3_ambiguous_session_prefix_lists_candidates() {
    let run = two_sessions().scripted("-p", "hello.json", &["--resume", "01a2", "again"]);
    assert_eq!(run.code, 3, "{run}");
    assert!(run.stderr.contains("ambiguous"), "{}", run.stderr);
    snap("exit_3_ambiguous_session", &run.to_string());
}

#[test]
fn exit_4_turn_limit() {
    let run = Sandbox::new().scripted("-p", "max_turns.json", &["--max-turns", "2", "look around"]);
    assert_eq!(run.code, 4);
    snap("exit_4_turn_limit", &run.to_string());
}

#[test]
fn exit_4_budget() {
    let run = Sandbox::new().scripted("-p", "budget.json", &["--max-cost", "0.2", "look around"]);
    assert_eq!(run.code, 4);
    snap("exit_4_budget", &run.to_string());
}

#[test]
fn exit_5_blocked_names_the_refused_call() {
    let run = Sandbox::new().scripted("-p", "blocked.json", &["--permission", "ask", "clean up"]);
    assert_eq!(run.code, 5);
    assert!(
        run.stderr.contains("bash") && run.stderr.contains("call_rm"),
        "{}",
        run.stderr
    );
    snap("exit_5_blocked", &run.to_string());
}

#[test]
fn exit_70_internal_error() {
    let sb = Sandbox::new();
    let mut cmd = sb.cmd(&["-p", "hi"]);
    cmd.env("KEEL_TEST_PANIC", "1");
    let run = sb.finish(cmd.output().unwrap());
    assert_eq!(run.code, 70);
    assert!(
        run.stderr.starts_with("Error: internal error"),
        "{}",
        run.stderr
    );
    // The source location changes with every edit of app.rs: cut it from the snapshot.
    let stderr: Vec<&str> = run
        .stderr
        .lines()
        .map(|l| l.split(" at src/").next().unwrap_or(""))
        .collect();
    snap(
        "exit_70_internal",
        &format!(
            "{}\n[stderr]\n{}\n[exit status: {}]\n",
            run.stdout,
            stderr.join("\n"),
            run.code
        ),
    );
}

/// A JSON run that hangs mid-message gets `sig` after its first text delta.
fn interrupted(sig: Signal, expect: i32, name: &str) {
    let sb = Sandbox::new();
    let run = sb.interrupt_json("hang.json", &["work"], "\"text_delta\"", sig);
    assert_eq!(run.code, expect, "{run}");
    let last: serde_json::Value = serde_json::from_str(run.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(last["outcome"], "interrupted");
    assert_eq!(last["exitCode"], expect);
    // The session was saved: the prompt and the aborted partial answer are on disk.
    let text = sb.session_text();
    assert!(
        text.contains("\"work\"") && text.contains("\"aborted\""),
        "{text}"
    );
    snap(name, &run.to_string());
}

#[test]
fn exit_130_sigint_saves_the_session() {
    interrupted(Signal::SIGINT, 130, "exit_130_sigint");
}

#[test]
fn exit_143_sigterm_saves_the_session() {
    interrupted(Signal::SIGTERM, 143, "exit_143_sigterm");
}

#[test]
fn exit_129_sighup_saves_the_session() {
    interrupted(Signal::SIGHUP, 129, "exit_129_sighup");
}

#[test]
fn exit_141_broken_pipe_is_quiet_and_saves_the_session() {
    // Like `keel --json ... | head -1`: read one line, close the pipe.
    let sb = Sandbox::new();
    let script = crate::common::support::fixture("flood.json");
    let mut child = sb.spawn(&scripted_args(&["--json"], &script, &["go"]));
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    drop(stdout);
    let out = child.wait_with_output().unwrap();
    let run = sb.finish(std::process::Output {
        stdout: first.into_bytes(),
        ..out
    });
    assert_eq!(run.code, 141, "{run}");
    assert_eq!(run.stderr, "", "a closed stdout must end quietly");
    assert!(
        sb.session_text().contains("\"go\""),
        "the session must be saved"
    );
    snap("exit_141_broken_pipe", &run.to_string());
}

#[test]
fn help_is_on_stdout_with_exit_0() {
    let run = Sandbox::new().run(&["--help"]);
    assert_eq!(run.code, 0);
    assert_eq!(run.stderr, "");
    snap("help", &run.to_string());
}

#[test]
fn a_closed_stdin_is_no_input_not_an_error() {
    // Some supervisors start processes with fd 0 closed; `<&-` reproduces that.
    let sb = Sandbox::new();
    let script = crate::common::support::fixture("hello.json");
    let line = format!("exec \"$0\" -p --provider scripted --script '{script}' hi <&-");
    let keel = sb.cmd(&[]);
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(line)
        .arg(env!("CARGO_BIN_EXE_keel"))
        .env_clear()
        .envs(
            keel.get_envs()
                .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned()))),
        )
        .current_dir(sb.work())
        .output()
        .unwrap();
    let run = sb.finish(out);
    assert_eq!(
        (run.code, run.stdout.as_str()),
        (0, "Hello from keel!\n"),
        "{run}"
    );
}

/// Runs to completion, or panics if keel is still running after a minute (the bugs below hung).
fn run_bounded(sb: &Sandbox, args: &[&str]) -> crate::common::support::Run {
    let child = sb.spawn(args);
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(child.wait_with_output().unwrap()));
    match rx.recv_timeout(std::time::Duration::from_secs(60)) {
        Ok(out) => sb.finish(out),
        Err(_) => {
            let pid = nix::unistd::Pid::from_raw(pid as i32);
            let _ = nix::sys::signal::kill(pid, Signal::SIGKILL);
            panic!("keel {args:?} hung");
        }
    }
}

fn mkfifo(path: &std::path::Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success());
}

/// Regression: `--session` naming a FIFO blocked startup forever in `open`.
#[test]
fn exit_3_session_path_is_a_fifo() {
    let sb = Sandbox::new();
    mkfifo(&sb.work().join("s.jsonl"));
    let script = crate::common::support::fixture("hello.json");
    let args = scripted_args(&["-p"], &script, &[]);
    let run = run_bounded(&sb, &[&args[..], &["--session", "s.jsonl", "hi"]].concat());
    assert_eq!(run.code, 3, "{run}");
    assert!(
        run.stderr
            .contains("s.jsonl is a FIFO (named pipe), not a regular file"),
        "{}",
        run.stderr
    );
    snap("exit_3_session_fifo", &run.to_string());
    // A directory and a device are refused the same way, and so is a FIFO given to --resume.
    std::fs::create_dir(sb.work().join("d.jsonl")).unwrap();
    for (flag, path, kind) in [
        ("--session", "d.jsonl", "a directory"),
        ("--session", "/dev/null", "a character device"),
        ("--resume", "./s.jsonl", "a FIFO (named pipe)"),
    ] {
        let run = run_bounded(&sb, &[&args[..], &[flag, path, "hi"]].concat());
        assert_eq!(run.code, 3, "{run}");
        assert!(run.stderr.contains(&format!("is {kind}")), "{}", run.stderr);
    }
}

/// Regression: `--script /dev/zero` read the endless device into memory.
#[test]
fn exit_3_script_is_not_a_regular_file() {
    let sb = Sandbox::new();
    let run = run_bounded(&sb, &scripted_args(&["-p"], "/dev/zero", &["hi"]));
    assert_eq!(run.code, 3, "{run}");
    snap("exit_3_script_dev_zero", &run.to_string());
    mkfifo(&sb.work().join("script.json"));
    let run = run_bounded(&sb, &scripted_args(&["--json"], "script.json", &["hi"]));
    assert_eq!(run.code, 3, "{run}");
    let result = &run.stdout_lines()[0];
    assert_eq!(result["outcome"], "config_error");
    assert!(
        result["error"]["message"]
            .as_str()
            .unwrap()
            .contains("script.json is a FIFO"),
        "{result}"
    );
}

/// Regression: a FIFO at `$KEEL_HOME/models.json` blocked every startup.
#[test]
fn exit_3_models_json_is_a_fifo() {
    let sb = Sandbox::new();
    mkfifo(&sb.home().join("models.json"));
    let run = run_bounded(&sb, &["-p", "--provider", "openai", "--api-key", "k", "hi"]);
    assert_eq!(run.code, 3, "{run}");
    assert!(
        run.stderr.contains("models.json is a FIFO (named pipe)"),
        "{}",
        run.stderr
    );
}
