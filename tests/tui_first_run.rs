//! The TUI with no model provider configured: it opens with the first-run panel instead of
//! exiting 3, a prompt is answered with the same advice as an error, and Ctrl+D quits with 0.
//! Print mode keeps its exit 3. The real binary in a pty, with the daemon not asked for (the
//! first run never starts one).

use crate::common::pty::spawn_with;
use crate::common::support::Sandbox;

#[test]
fn the_tui_without_a_provider_opens_with_the_first_run_panel_and_quits_cleanly() {
    let sb = Sandbox::new();
    let keel = env!("CARGO_BIN_EXE_keel");
    // No provider variable, and no KEEL_NO_DAEMON: the first run must not start a daemon.
    let socket = sb.dir.path().join("no-daemon.sock");
    let socket_arg = socket.display().to_string();
    let (mut s, mut child) = spawn_with(
        &sb,
        &format!("{keel}; echo exit=$?"),
        &[("KEEL_SOCKET", &socket_arg)],
    );
    s.wait_for("the panel", |t| t.contains("Welcome to keel"));
    let text = s.text();
    for needed in [
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL=http://localhost:11434/v1",
        "--provider scripted",
    ] {
        assert!(text.contains(needed), "{needed} missing:\n{text}");
    }
    s.send("hello\r");
    s.wait_for("the advice as an error", |t| {
        t.contains("no model provider is configured: quit")
    });
    assert!(!s.text().contains("compaction"), "{}", s.text());
    s.send("\x04");
    s.wait_for("the exit status", |t| t.contains("exit=0"));
    child.wait().unwrap();
    assert!(!socket.exists(), "no daemon was started");

    let run = sb.run(&["-p", "hi"]);
    assert_eq!(run.code, 3, "print mode still fails: {}", run.stderr);
}
