//! Sessions are never lost or poisoned: concurrent creation, failed writes, damaged lines,
//! forks of a busy session, private modes, tool calls a crash left without a result.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};

use clap::Parser;
use keel::cli::args::Cli;
use keel::kernel::clock::Clock;
use keel::kernel::message::Message;
use keel::kernel::session::{EntryData, Store, UNFINISHED_TOOL_CALL};
use keel::mode::Env;
use serde_json::json;

use crate::common::rpc::Rpc;
use crate::common::support::{fixture, scripted_args, Sandbox};

fn env(cwd: &Path, home: &Path) -> Env {
    Env {
        stdin_tty: false,
        stdout_tty: false,
        stderr_tty: false,
        no_color: true,
        cwd: cwd.to_path_buf(),
        keel_home: home.to_path_buf(),
        fixed_clock: None,
        seed: None,
        temp_dir: std::env::temp_dir(),
        log_filter: "off".into(),
        test_panic: false,
        vars: Default::default(),
        retry_base_ms: None,
        tool_vars: None,
        worktree: None,
    }
}

/// Two threads open the same new session at one instant (a barrier), `rounds` times; returns
/// how many rounds ended with both succeeding, and the errors of the losers.
fn race(args: &[&str], rounds: usize) -> (usize, Vec<String>) {
    let mut both = 0;
    let mut errors = Vec::new();
    for round in 0..rounds {
        let dir = tempfile::tempdir().unwrap();
        let (cwd, home) = (dir.path().join("work"), dir.path().join("home"));
        std::fs::create_dir_all(&cwd).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).unwrap();
        let barrier = Arc::new(Barrier::new(2));
        let mut argv = vec!["keel".to_string()];
        argv.extend(
            args.iter()
                .map(|a| a.replace("{round}", &round.to_string())),
        );
        let workers: Vec<_> = (0..2u64)
            .map(|n| {
                let (barrier, argv) = (barrier.clone(), argv.clone());
                let env = env(&cwd, &home);
                std::thread::spawn(move || {
                    let cli = Cli::try_parse_from(argv).unwrap();
                    let clock = Clock::new(None, Some(round as u64 * 2 + n));
                    barrier.wait();
                    // The store (and its lock) lives until both threads are done.
                    let settings = keel::cli::invocation::settings(&cli, &env).unwrap();
                    let opened = keel::setup::open_session(&settings, &env, &clock);
                    let result = opened.map(|o| o.store).map_err(|e| e.render());
                    barrier.wait();
                    result
                })
            })
            .collect();
        let results: Vec<_> = workers.into_iter().map(|w| w.join().unwrap()).collect();
        let oks = results.iter().filter(|r| r.is_ok()).count();
        if oks == 2 {
            both += 1;
        }
        for r in results {
            if let Err(e) = r {
                errors.push(e);
            }
        }
    }
    (both, errors)
}

#[test]
fn two_processes_creating_one_new_session_path_never_both_succeed() {
    // Regression: both got a fresh lazy store for the same path; one conversation was lost.
    let (both, errors) = race(&["--session", "new-{round}.jsonl"], 150);
    assert_eq!(both, 0, "rounds in which both claimed the file");
    assert_eq!(errors.len(), 150, "one loser per round");
    for e in &errors {
        assert!(e.contains("is in use by another keel process"), "{e}");
        assert!(e.contains("Hint: wait for the other keel process"), "{e}");
    }
}

#[test]
fn two_processes_creating_one_session_id_get_one_file() {
    // Regression: both created a file (different timestamps, one id): `--resume X` was then
    // ambiguous forever.
    let (both, errors) = race(&["--session-id", "job-{round}"], 150);
    assert_eq!(both, 0, "rounds in which both opened the id");
    assert_eq!(errors.len(), 150);
    for e in &errors {
        assert!(e.contains("is in use by another keel process"), "{e}");
    }
}

#[test]
fn session_id_files_are_claimed_once_by_the_binary_too() {
    let sb = Sandbox::new();
    let script = fixture("hello.json");
    let run = |id: &str| {
        sb.cmd(&scripted_args(
            &["-p", "hi"],
            &script,
            &["--session-id", id],
        ))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
    };
    for round in 0..8 {
        let id = format!("ci-{round}");
        let (a, b) = (run(&id), run(&id));
        let codes: Vec<i32> = [a, b]
            .into_iter()
            .map(|c| c.wait_with_output().unwrap().status.code().unwrap())
            .collect();
        let files: Vec<PathBuf> = sb
            .session_files()
            .into_iter()
            .filter(|p| p.display().to_string().ends_with(&format!("_{id}.jsonl")))
            .collect();
        assert_eq!(files.len(), 1, "round {round}: {files:?}");
        // Either both ran one after the other (0, 0) or one lost the race (exit 3).
        assert!(
            codes.iter().all(|c| *c == 0 || *c == 3) && codes.contains(&0),
            "{codes:?}"
        );
        let text = std::fs::read_to_string(&files[0]).unwrap();
        let prompts = text.matches(r#""role":"user""#).count();
        let wins = codes.iter().filter(|c| **c == 0).count();
        assert_eq!(prompts, wins, "every run that exited 0 was saved");
    }
}

/// Runs keel with the file size limit at `blocks` (`ulimit -f`: 512 or 1024 bytes each,
/// depending on the shell) and SIGXFSZ ignored, so a write past it fails with EFBIG, as a
/// write to a full disk fails.
fn run_with_file_limit(sb: &Sandbox, blocks: u64, args: &[&str]) -> crate::common::support::Run {
    let setup = format!("trap '' XFSZ; ulimit -f {blocks}");
    sb.finish(sb.cmd_after(&setup, args).output().unwrap())
}

#[test]
fn a_full_disk_fails_the_run_with_session_write() {
    // Regression: with the disk full mid-run keel reported success, exit 0, nothing saved.
    let mut sb = Sandbox::new();
    std::fs::write(
        sb.work().join("greet.sh"),
        "name=\"world\"\necho \"Hello, $name!\"\n",
    )
    .unwrap();
    let script = fixture("demo.json");
    let args = scripted_args(&[], &script, &[]);
    let json = run_with_file_limit(&sb, 3, &[&["--json", "go"][..], &args].concat());
    assert_eq!(json.code, 1, "{json}");
    let result = json.stdout_lines().pop().unwrap();
    assert_eq!(result["outcome"], "failed");
    assert_eq!(result["error"]["kind"], "session_write");
    let message = result["error"]["message"].as_str().unwrap();
    assert!(message.contains("File too large"), "{message}");
    assert!(message.contains(".jsonl"), "names the file: {message}");
    sb.seed += 1; // a new session id: the fixed clock would name the same file again
    let print = run_with_file_limit(&sb, 3, &[&["-p", "go"][..], &args].concat());
    assert_eq!(print.code, 1, "{print}");
    assert!(print.stdout.is_empty(), "{print}");
    assert!(
        print.stderr.contains("Error: cannot ") && print.stderr.contains("File too large"),
        "{print}"
    );
}

#[test]
fn a_session_directory_that_cannot_be_created_fails_the_run() {
    let sb = Sandbox::new();
    std::fs::write(sb.work().join("blocked"), "a file, not a directory").unwrap();
    let run = sb.scripted(
        "--json",
        "hello.json",
        &["--session-dir", "blocked/sessions", "hi"],
    );
    assert_eq!(run.code, 1, "{run}");
    let result = run.stdout_lines().pop().unwrap();
    assert_eq!(result["error"]["kind"], "session_write");
    let message = result["error"]["message"].as_str().unwrap();
    assert!(message.contains("blocked/sessions"), "{message}");
    assert!(message.contains("Not a directory"), "{message}");
}

/// A session whose last assistant message called two tools and only one result was written
/// (keel was killed while the second ran).
fn unfinished_session(dir: &Path) -> PathBuf {
    let path = dir.join("s.jsonl");
    let lines = [
        r#"{"type":"session","version":3,"id":"0199a000-0000-7000-8000-000000000001","timestamp":"2026-12-01T10:00:00.000Z","cwd":"/w"}"#,
        r#"{"type":"message","id":"a0000001","parentId":null,"timestamp":"2026-12-01T10:00:01.000Z","message":{"role":"user","content":[{"type":"text","text":"go"}],"timestamp":1}}"#,
        r#"{"type":"message","id":"a0000002","parentId":"a0000001","timestamp":"2026-12-01T10:00:02.000Z","message":{"role":"assistant","content":[{"type":"toolCall","id":"call_1","name":"read","arguments":{"path":"a"}},{"type":"toolCall","id":"call_2","name":"bash","arguments":{"command":"sleep 100"}}],"api":"openai-completions","provider":"openai","model":"m","usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":0,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"toolUse","timestamp":2}}"#,
        r#"{"type":"message","id":"a0000003","parentId":"a0000002","timestamp":"2026-12-01T10:00:03.000Z","message":{"role":"toolResult","toolCallId":"call_1","toolName":"read","content":[{"type":"text","text":"x"}],"isError":false,"timestamp":3}}"#,
    ];
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

#[test]
fn a_tool_call_without_a_result_is_closed_when_the_session_is_resumed() {
    // Regression: the unpaired call was sent with every later request; strict APIs refuse it.
    let dir = tempfile::tempdir().unwrap();
    let path = unfinished_session(dir.path());
    let clock = Clock::new(Some(1_796_000_000_000), Some(3));
    let (store, warnings) = Store::resume(&path, &clock).unwrap();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("bash (call_2)"), "{warnings:?}");
    let context = store.context();
    let Some(Message::ToolResult(last)) = context.last() else {
        panic!("the context ends with a tool result: {context:?}");
    };
    assert_eq!(
        (last.tool_call_id.as_str(), last.is_error),
        ("call_2", true)
    );
    drop(store);
    // The file itself is repaired: a plain open finds the result and repairs nothing more.
    let (again, warnings) = Store::resume(&path, &clock).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    let EntryData::Message(Message::ToolResult(r)) = &again.entries().last().unwrap().data else {
        panic!("the last entry is the recorded result");
    };
    assert_eq!(
        r.content[0],
        keel::kernel::message::Content::text(UNFINISHED_TOOL_CALL)
    );
    assert_eq!(
        again.entries().last().unwrap().parent_id.as_deref(),
        Some("a0000003")
    );
}

#[test]
fn a_damaged_middle_line_keeps_the_history_before_it() {
    // Regression: the children of a garbage line lost their parent, so the branch (and the
    // model context) started after it.
    let dir = tempfile::tempdir().unwrap();
    let path = unfinished_session(dir.path());
    let mut bytes = std::fs::read(&path).unwrap();
    let cut = bytes
        .windows(12)
        .position(|w| w == br#"{"type":"mes"#)
        .unwrap();
    // Overwrite the first entry line's start with invalid UTF-8 and garbage.
    bytes.splice(cut..cut + 12, b"\xff\xfe garbage!!".iter().copied());
    std::fs::write(&path, &bytes).unwrap();
    let (store, warnings) = Store::open(&path).unwrap();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].starts_with("skipped malformed line 2 of "),
        "{warnings:?}"
    );
    assert!(
        warnings[0]
            .ends_with("; entry a0000002 after it now continues from the start of the session"),
        "{warnings:?}"
    );
    assert_eq!(store.context().len(), 2, "assistant and tool result remain");
    let sb = Sandbox::new();
    let text = [
        r#"{"type":"session","version":3,"id":"0199a000-0000-7000-8000-000000000002","timestamp":"2026-12-01T10:00:00.000Z","cwd":"/w"}"#,
        r#"{"type":"message","id":"b0000001","parentId":null,"timestamp":"2026-12-01T10:00:01.000Z","message":{"role":"user","content":[{"type":"text","text":"one"}],"timestamp":1}}"#,
        "\u{1}\u{2} not json at all",
        r#"{"type":"message","id":"b0000003","parentId":"b0000002","timestamp":"2026-12-01T10:00:03.000Z","message":{"role":"user","content":[{"type":"text","text":"three"}],"timestamp":3}}"#,
        r#"{"type":"message","id":"b0000004","parentId":"zzzzzzzz","timestamp":"2026-12-01T10:00:04.000Z","message":{"role":"user","content":[{"type":"text","text":"four"}],"timestamp":4}}"#,
    ]
    .join("\n");
    let path = sb.work().join("damaged.jsonl");
    std::fs::write(&path, text + "\n").unwrap();
    let (store, warnings) = Store::open(&path).unwrap();
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(warnings[0].ends_with("entry b0000003 after it now continues from b0000001"));
    assert!(
        warnings[1]
            .ends_with("entry b0000004 points at a missing parent zzzzzzzz; attached to b0000003"),
        "{warnings:?}"
    );
    let texts: Vec<String> = store
        .context()
        .iter()
        .map(|m| match m {
            Message::User(u) => keel::kernel::message::user_text(u),
            _ => String::new(),
        })
        .collect();
    assert_eq!(texts, ["one", "three", "four"]);
}

#[test]
fn a_session_in_use_can_be_forked_with_the_command_the_hint_names() {
    // Regression: --fork took the source's lock, so the hint's own advice failed.
    let mut sb = Sandbox::new();
    let first = sb.scripted("--json", "hello.json", &["hi"]);
    assert_eq!(first.code, 0, "{first}");
    let id = first.stdout_lines()[0]["id"].as_str().unwrap().to_string();
    let path = sb.session_files().pop().unwrap();
    let (held, _) = Store::open(&path).unwrap();
    let busy = sb.scripted("-p", "hello.json", &["--resume", &id, "again"]);
    assert_eq!(busy.code, 3, "{busy}");
    let hint = format!("keel --fork {id}");
    assert!(busy.stderr.contains(&hint), "{busy}");
    sb.seed += 1; // the fork's own id
    let fork = sb.scripted("-p", "hello.json", &["--fork", &id, "again"]);
    assert_eq!(fork.code, 0, "{fork}");
    assert_eq!(sb.session_files().len(), 2);
    drop(held);
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[test]
fn sessions_and_exports_are_private_whatever_the_umask() {
    // Regression: files were 0644 and directories 0755 under the usual umask 022.
    let sb = Sandbox::new();
    let home = sb.home();
    std::fs::remove_dir(&home).unwrap();
    let script = fixture("hello.json");
    let args = scripted_args(&["--json"], &script, &["hi"]);
    let run = sb.finish(sb.cmd_after("umask 000", &args).output().unwrap());
    assert_eq!(run.code, 0, "{run}");
    let file = sb.session_files().pop().unwrap();
    assert_eq!(mode(&file), 0o600);
    assert_eq!(mode(file.parent().unwrap()), 0o700);
    assert_eq!(mode(&home.join("sessions")), 0o700);
    assert_eq!(mode(&home), 0o700);
    let rpc = scripted_args(&["--mode", "rpc"], &script, &[]);
    let out = rpc_export(&sb, sb.cmd_after("umask 000", &rpc));
    assert!(out.contains(r#""success":true"#), "{out}");
    assert_eq!(mode(&sb.work().join("out.html")), 0o600);
}

fn rpc_export(sb: &Sandbox, cmd: std::process::Command) -> String {
    let mut rpc = Rpc::spawn(cmd);
    let out = sb.work().join("out.html").display().to_string();
    rpc.send(&serde_json::json!({"id": "e", "type": "export_html", "outputPath": out}));
    rpc.finish().0.concat()
}

#[test]
fn a_home_others_can_read_gets_one_warning() {
    let sb = Sandbox::new();
    std::fs::set_permissions(sb.home(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let run = sb.scripted("-p", "hello.json", &["hi"]);
    assert_eq!(run.code, 0, "{run}");
    assert_eq!(
        run.stderr.matches("is accessible to other users").count(),
        1,
        "{run}"
    );
    assert!(run.stderr.contains("(mode 0755)"), "{run}");
    std::fs::set_permissions(sb.home(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let quiet = sb.scripted("-p", "hello.json", &["hi"]);
    assert!(!quiet.stderr.contains("accessible"), "{quiet}");
}

#[test]
fn rpc_refuses_session_changes_while_the_session_cannot_be_saved() {
    let sb = Sandbox::new();
    let blocker = sb.work().join("blocked");
    std::fs::write(&blocker, "a file, not a directory").unwrap();
    let script = fixture("hello.json");
    let mut rpc = Rpc::start(
        &sb,
        &scripted_args(&[], &script, &["--session-dir", "blocked/sessions"]),
    );
    send(&mut rpc, r#"{"id":"p1","type":"prompt","message":"one"}"#);
    let first = rpc.until(&json!({"type": "agent_settled"})).concat();
    assert!(first.contains(r#""notifyType":"error""#), "{first}");
    assert!(
        first.contains("The session cannot be saved: cannot create"),
        "{first}"
    );
    send(&mut rpc, r#"{"id":"p2","type":"prompt","message":"two"}"#);
    let refused = rpc.until(&json!({"id": "p2"})).concat();
    assert!(refused.contains(r#""success":false"#), "{refused}");
    assert!(
        refused.contains("The session cannot be saved (session_write)"),
        "{refused}"
    );
    // Reads still work meanwhile.
    send(&mut rpc, r#"{"id":"s","type":"get_state"}"#);
    let state = rpc.until(&json!({"id": "s"})).concat();
    assert!(state.contains(r#""success":true"#), "{state}");
    // The disk works again: what was held back is written, and the next prompt runs.
    std::fs::remove_file(&blocker).unwrap();
    send(&mut rpc, r#"{"id":"p3","type":"prompt","message":"three"}"#);
    let back = rpc.until(&json!({"type": "agent_settled"})).concat();
    assert!(back.contains("The session is saved again."), "{back}");
    assert!(
        back.contains(r#""id":"p3","type":"response","command":"prompt","success":true"#),
        "{back}"
    );
    let (_, stderr, code) = rpc.finish();
    assert_eq!(code, 0, "{stderr}");
    let dir = sb.work().join("blocked/sessions");
    let files: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
    assert_eq!(files.len(), 1);
    let text = std::fs::read_to_string(files[0].path()).unwrap();
    for prompt in ["\"one\"", "\"three\""] {
        assert!(text.contains(prompt), "{prompt} saved: {text}");
    }
    assert!(
        !text.contains("\"two\""),
        "the refused prompt never entered the session"
    );
}

fn send(rpc: &mut Rpc, line: &str) {
    rpc.send_bytes(format!("{line}\n").as_bytes());
}
