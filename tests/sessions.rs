//! Session behaviour through the binary: durability under SIGKILL, torn lines, continue,
//! resume, session ids, fork, in-memory sessions and the single-writer lock (DESIGN §6).

use std::io::BufReader;
use std::time::{Duration, Instant};

use crate::common::support::{fixture, read_until, scripted_args, signal, Sandbox};

fn hello_args(extra: &[&str], prompt: &str) -> Vec<String> {
    let mut v: Vec<String> = ["--json", "--provider", "scripted", "--script"]
        .map(String::from)
        .to_vec();
    v.push(fixture("hello.json"));
    v.extend(extra.iter().map(|s| s.to_string()));
    v.push(prompt.to_string());
    v
}

fn run(sb: &Sandbox, extra: &[&str], prompt: &str) -> crate::common::support::Run {
    let args = hello_args(extra, prompt);
    sb.run(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

fn header_id(run: &crate::common::support::Run) -> String {
    run.stdout_lines()[0]["id"].as_str().unwrap().to_string()
}

/// Waits (bounded) until the only session file contains `needle`; the writer is another process.
fn wait_for_file_containing(sb: &Sandbox, needle: &str) -> std::path::PathBuf {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(f) = sb.session_files().into_iter().next() {
            if std::fs::read_to_string(&f)
                .unwrap_or_default()
                .contains(needle)
            {
                return f;
            }
        }
        assert!(
            Instant::now() < deadline,
            "session file never contained {needle:?}"
        );
        std::thread::yield_now();
    }
}

fn entries(path: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[test]
fn sigkill_mid_turn_keeps_completed_entries_and_continue_loads_them() {
    let sb = Sandbox::new();
    let mut child = sb.spawn(&scripted_args(
        &["--json"],
        &fixture("hang.json"),
        &["first question"],
    ));
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let header = read_until(&mut stdout, "\"text_delta\"");
    let id: serde_json::Value = serde_json::from_str(&header[0]).unwrap();
    let file = wait_for_file_containing(&sb, "first question");
    signal(&child, nix::sys::signal::Signal::SIGKILL);
    child.wait().unwrap();
    let before = entries(&file);
    let last_id = before.last().unwrap()["id"].as_str().unwrap().to_string();

    let cont = run(&sb, &["--continue"], "second question");
    assert_eq!(cont.code, 0, "{cont}");
    assert_eq!(
        header_id(&cont),
        id["id"].as_str().unwrap(),
        "the session id never changes"
    );
    let after = entries(&file);
    assert_eq!(
        &after[..before.len()],
        &before[..],
        "completed entries are kept as they were"
    );
    // The second run uses another script model, so a model_change comes first.
    let added = &after[before.len()..];
    assert_eq!(added[0]["type"], "model_change", "{added:?}");
    assert_eq!(
        added[0]["parentId"],
        last_id.as_str(),
        "the tree continues from the last entry"
    );
    let new_user = added.iter().find(|e| e["type"] == "message").unwrap();
    assert_eq!(new_user["message"]["content"][0]["text"], "second question");
    assert_eq!(sb.session_files().len(), 1);
}

#[test]
fn torn_last_line_is_skipped_with_a_warning_and_appends_stay_clean() {
    let sb = Sandbox::new();
    assert_eq!(run(&sb, &[], "one").code, 0);
    let file = sb.session_files().pop().unwrap();
    let mut text = std::fs::read_to_string(&file).unwrap();
    text.push_str("{\"type\":\"message\",\"id\":\"deadbeef\",\"parentId\":\"00");
    std::fs::write(&file, &text).unwrap();

    let cont = run(&sb, &["--continue"], "two");
    assert_eq!(cont.code, 0, "{cont}");
    assert!(cont.stderr.starts_with("Warning: "), "{}", cont.stderr);
    let lines: Vec<String> = std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    let bad = lines
        .iter()
        .filter(|l| serde_json::from_str::<serde_json::Value>(l).is_err())
        .count();
    assert_eq!(bad, 1, "only the torn fragment is unreadable");
    assert!(lines.last().unwrap().contains("Hello from keel!"));
    let again = run(&sb, &["--continue"], "three");
    assert_eq!(again.code, 0, "{again}");
}

#[test]
fn resume_by_unique_prefix_and_session_id_reuse() {
    let mut sb = Sandbox::new();
    sb.seed = 7;
    let first = run(&sb, &["--session-id", "my-run"], "a");
    assert_eq!((first.code, header_id(&first).as_str()), (0, "my-run"));
    let again = run(&sb, &["--session-id", "my-run"], "b");
    assert_eq!(header_id(&again), "my-run");
    assert_eq!(sb.session_files().len(), 1);
    sb.seed = 8;
    let other = run(&sb, &[], "c");
    let other_id = header_id(&other);
    let resumed = run(&sb, &["--resume", &other_id[..13]], "d");
    assert_eq!(resumed.code, 0, "{resumed}");
    assert_eq!(header_id(&resumed), other_id);
}

#[test]
fn no_session_writes_nothing_but_still_prints_a_header() {
    let sb = Sandbox::new();
    let r = run(&sb, &["--no-session"], "a");
    assert_eq!(r.code, 0);
    assert_eq!(r.stdout_lines()[0]["type"], "session");
    assert!(sb.session_files().is_empty());
}

#[test]
fn fork_copies_into_a_new_file_with_parent_session() {
    let mut sb = Sandbox::new();
    let src = run(&sb, &[], "original");
    let src_id = header_id(&src);
    sb.seed = 99;
    let fork = run(&sb, &["--fork", &src_id], "branch");
    assert_eq!(fork.code, 0, "{fork}");
    let header = &fork.stdout_lines()[0];
    assert_ne!(header["id"].as_str().unwrap(), src_id);
    assert!(header["parentSession"]
        .as_str()
        .unwrap()
        .ends_with(".jsonl"));
    let files = sb.session_files();
    assert_eq!(files.len(), 2);
    let forked = files
        .iter()
        .find(|f| !f.display().to_string().contains(&src_id))
        .unwrap();
    let text = std::fs::read_to_string(forked).unwrap();
    assert!(text.contains("\"original\"") && text.contains("\"branch\""));
}

#[test]
fn conflicting_session_flags_are_a_usage_error() {
    let sb = Sandbox::new();
    let r = run(&sb, &["--continue", "--no-session"], "a");
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("--continue and --no-session"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_second_process_on_the_same_session_gets_a_config_error() {
    let sb = Sandbox::new();
    let mut holder = sb.spawn(&scripted_args(
        &["--json"],
        &fixture("hang.json"),
        &["--session-id", "shared", "work"],
    ));
    let mut stdout = BufReader::new(holder.stdout.take().unwrap());
    read_until(&mut stdout, "\"text_delta\"");
    wait_for_file_containing(&sb, "\"work\"");
    let second = run(&sb, &["--session-id", "shared"], "me too");
    assert_eq!(second.code, 3, "{second}");
    assert!(second.stderr.contains("in use"), "{}", second.stderr);
    signal(&holder, nix::sys::signal::Signal::SIGINT);
    drop(stdout);
    assert_eq!(holder.wait().unwrap().code(), Some(130));
}
