//! `@file` mentions in print and JSON modes' prompt arguments, end to end: what the provider
//! receives for a text file and an image (a local OpenAI-compatible server), the user message
//! JSON mode shows, the order of stdin, files and words, usage errors (missing, too large,
//! binary, a directory) before any session exists, and the same through the daemon.

use serde_json::{json, Value};

use crate::common::daemon::Daemon;
use crate::common::http_server::{Reply, Server};
use crate::common::support::{fixture, root, scripted_args, snap, Run, Sandbox};

/// The smallest bytes a PNG is recognised by, and their base64.
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
const PNG_BASE64: &str = "iVBORw0KGgoAAAANSUhEUg==";

fn reply() -> Reply {
    Reply::sse(&std::fs::read(root().join("fixtures/providers/openai/text.sse")).unwrap())
}

/// `-p ARGS` against `server`; the last message of the one request it got.
fn sent(sb: &Sandbox, server: &Server, args: &[&str]) -> Value {
    let base = server.base_url();
    let mut all = vec!["--base-url", base.as_str(), "--model", "test-model", "-p"];
    all.extend_from_slice(args);
    let run = sb.run(&all);
    assert_eq!(run.code, 0, "{run}");
    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    seen[0].json()["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone()
}

/// The user message of a JSON-mode run (its `message_end`).
fn user_message(run: &Run) -> Value {
    run.stdout_lines()
        .into_iter()
        .find(|l| l["type"] == "message_end" && l["message"]["role"] == "user")
        .unwrap_or_else(|| panic!("no user message_end: {run}"))["message"]
        .clone()
}

#[test]
fn a_text_mention_reaches_the_provider_as_a_file_block() {
    let sb = Sandbox::new();
    std::fs::write(sb.work().join("notes.md"), "\u{feff}alpha\nbeta").unwrap();
    std::fs::write(sb.dir.path().join("home.md"), "from home").unwrap();
    let server = Server::start(vec![reply()]);
    let last = sent(
        &sb,
        &server,
        &["@notes.md", "@~/home.md", "explain", "them"],
    );
    let work = sb.work().display().to_string();
    let home = sb.dir.path().display().to_string();
    assert_eq!(
        last,
        json!({"role": "user", "content": format!(
            "<file name=\"{work}/notes.md\">\nalpha\nbeta\n</file>\n<file name=\"{home}/home.md\">\nfrom home\n</file>\nexplain them"
        )})
    );
}

#[test]
fn an_image_mention_reaches_the_provider_as_an_image_part() {
    let sb = Sandbox::new();
    std::fs::write(sb.work().join("shot.png"), PNG).unwrap();
    let server = Server::start(vec![reply()]);
    let last = sent(&sb, &server, &["what is this?", "@shot.png"]);
    let work = sb.work().display().to_string();
    assert_eq!(
        last,
        json!({"role": "user", "content": [
            {"type": "text", "text": format!("<file name=\"{work}/shot.png\"></file>\nwhat is this?")},
            {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{PNG_BASE64}")}},
        ]})
    );
}

#[test]
fn json_mode_shows_the_user_message_with_its_file_and_image_blocks() {
    let sb = Sandbox::new();
    std::fs::write(sb.work().join("a.txt"), "alpha").unwrap();
    std::fs::write(sb.work().join("empty.txt"), "").unwrap();
    std::fs::write(sb.work().join("pic.png"), PNG).unwrap();
    let run = sb.scripted(
        "--json",
        "hello.json",
        &["@a.txt", "@empty.txt", "@pic.png", "describe"],
    );
    assert_eq!(run.code, 0, "{run}");
    let work = sb.work().display().to_string();
    assert_eq!(
        user_message(&run)["content"],
        json!([
            {"type": "text", "text": format!(
                "<file name=\"{work}/a.txt\">\nalpha\n</file>\n<file name=\"{work}/pic.png\"></file>\ndescribe"
            )},
            {"type": "image", "data": PNG_BASE64, "mimeType": "image/png"},
        ])
    );
}

#[test]
fn stdin_comes_first_then_the_files_then_the_words() {
    let sb = Sandbox::new();
    std::fs::write(sb.work().join("a.txt"), "alpha").unwrap();
    let script = fixture("hello.json");
    let args = scripted_args(
        &["--json"],
        &script,
        &["mail", "\\@alice", "@a.txt", "foo@bar", "@"],
    );
    let run = sb.run_stdin(&args, "piped text\n");
    assert_eq!(run.code, 0, "{run}");
    let work = sb.work().display().to_string();
    assert_eq!(
        user_message(&run)["content"],
        json!([{"type": "text", "text": format!(
            "piped text\n\n<file name=\"{work}/a.txt\">\nalpha\n</file>\nmail @alice foo@bar @"
        )}])
    );
}

#[test]
fn a_missing_mention_is_a_usage_error_naming_it_before_any_session_exists() {
    let sb = Sandbox::new();
    let run = sb.scripted("-p", "hello.json", &["explain", "@missing.md"]);
    assert_eq!(run.code, 2, "{run}");
    snap("exit_2_missing_mention", &run.to_string());
    let run = sb.scripted("--json", "hello.json", &["@missing.md"]);
    assert_eq!(run.code, 2, "{run}");
    let lines = run.stdout_lines();
    assert_eq!(lines.len(), 1, "{run}");
    let missing = sb.work().join("missing.md");
    assert_eq!(
        (&lines[0]["outcome"], &lines[0]["error"]["message"]),
        (
            &json!("usage"),
            &json!(format!(
                "cannot include @missing.md ({}): no such file",
                missing.display()
            ))
        )
    );
    assert_eq!(sb.session_files(), Vec::<std::path::PathBuf>::new());
}

#[test]
fn oversized_binary_and_directory_mentions_are_usage_errors() {
    let sb = Sandbox::new();
    let cap = 1024 * 1024;
    std::fs::write(sb.work().join("big.txt"), vec![b'a'; cap + 1]).unwrap();
    std::fs::write(sb.work().join("fits.txt"), vec![b'a'; cap]).unwrap();
    std::fs::write(sb.work().join("prog.bin"), b"\x7fELF\x02\x01\x01\0\0\0").unwrap();
    std::fs::create_dir(sb.work().join("src")).unwrap();
    for (arg, why) in [
        (
            "@big.txt",
            "it is 1048577 bytes, over the 1 MiB limit for a text file",
        ),
        (
            "@prog.bin",
            "it is binary: neither UTF-8 text nor a PNG, JPEG, GIF or WebP image",
        ),
        ("@src", "it is a directory"),
    ] {
        let run = sb.scripted("-p", "hello.json", &[arg]);
        assert_eq!(run.code, 2, "{run}");
        assert!(run.stderr.contains(why), "{arg}: {run}");
        run.assert_stderr(&format!("@{arg}", arg = &arg[1..]));
    }
    assert_eq!(sb.scripted("-p", "hello.json", &["@fits.txt"]).code, 0);
}

#[test]
fn mentions_through_the_daemon_send_what_an_in_process_run_sends() {
    let mut there = Sandbox::new();
    let d = Daemon::start(&there, &["--idle-exit", "0"]);
    let socket = d.socket.display().to_string();
    let script = fixture("hello.json");
    let base = scripted_args(&["--json"], &script, &["@a.txt", "@pic.png", "describe"]);
    let mut here = Sandbox::new();
    for sb in [&mut here, &mut there] {
        sb.seed = 9;
        std::fs::write(sb.work().join("a.txt"), "alpha").unwrap();
        std::fs::write(sb.work().join("pic.png"), PNG).unwrap();
    }
    let local = here.run(&base);
    let mut args = vec!["--daemon", "--socket", &socket];
    args.extend_from_slice(&base);
    let remote = there.run(&args);
    assert_eq!(local.code, 0, "{local}");
    assert_eq!(
        crate::daemon_clients::comparable(&local),
        crate::daemon_clients::comparable(&remote)
    );
    assert_eq!(
        user_message(&remote)["content"][1],
        json!({"type": "image", "data": PNG_BASE64, "mimeType": "image/png"})
    );
    // A missing file fails in the client before it looks for a daemon: none is started for
    // this socket (starting one would create its directory).
    let nowhere = there.dir.path().join("no-daemon");
    let socket = nowhere.join("keel.sock").display().to_string();
    let run = there.run(&["--daemon", "--socket", &socket, "-p", "@gone.md"]);
    assert_eq!(run.code, 2, "{run}");
    assert!(run.stderr.contains("cannot include @gone.md"), "{run}");
    assert!(
        !nowhere.exists(),
        "a daemon was started for a prompt that cannot be sent"
    );
}
