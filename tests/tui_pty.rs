//! The TUI end to end: the real binary in a pseudo-terminal, read through a terminal emulator.
//! It types a prompt, sees the streamed answer, steers a running job, presses Esc, quits, and
//! then checks that the terminal modes were restored and the session was saved. Each test runs
//! in both modes: the session in this process (`KEEL_NO_DAEMON=1`) and, by default, in a
//! daemon (the test's own, on a socket in its sandbox).

use crate::common::daemon::Daemon;
use crate::common::pty::{spawn, spawn_with, Spawned};
use crate::common::support::{fixture, keel_shell, Sandbox};

/// The session files under the sandbox's KEEL_HOME.
fn session_files(sb: &Sandbox) -> Vec<String> {
    std::fs::read_dir(sb.home().join("sessions"))
        .unwrap()
        .flat_map(|d| std::fs::read_dir(d.unwrap().path()).unwrap())
        .map(|f| f.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect()
}

/// Checks `stty -a` output on the screen: canonical input and echo are on again.
fn assert_cooked(screen: &str) {
    let words: Vec<&str> = screen.split_whitespace().collect();
    assert!(
        words.contains(&"icanon") && words.contains(&"echo"),
        "{screen}"
    );
    assert!(
        !words.contains(&"-icanon") && !words.contains(&"-echo"),
        "{screen}"
    );
}

/// The sessions live in `d`.
fn live_sessions(d: &Daemon) -> Vec<serde_json::Value> {
    let mut c = d.client();
    c.sessions()
}

/// Where the TUI's session runs in a test.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Place {
    InProcess,
    Daemon,
}

/// Runs `shell` in a pty with the session in `place`; the daemon (if any) is the test's,
/// stopped when it is dropped.
fn start(sb: &Sandbox, shell: &str, place: Place) -> (Spawned, Option<Daemon>) {
    match place {
        Place::InProcess => (spawn(sb, shell), None),
        Place::Daemon => {
            let d = Daemon::start(sb, &["--idle-exit", "0"]);
            let socket = d.socket.display().to_string();
            (spawn_with(sb, shell, &[("KEEL_SOCKET", &socket)]), Some(d))
        }
    }
}

#[test]
fn typing_streaming_steering_escape_and_quitting_in_a_real_terminal() {
    typing_streaming_steering_escape_and_quitting(Place::InProcess);
}

#[test]
fn typing_streaming_steering_escape_and_quitting_through_the_daemon() {
    typing_streaming_steering_escape_and_quitting(Place::Daemon);
}

fn typing_streaming_steering_escape_and_quitting(place: Place) {
    let sb = Sandbox::new();
    // After keel exits, the same shell prints the terminal's modes.
    let shell = format!(
        "{}; echo KEEL_EXIT=$?; stty -a",
        keel_shell(&fixture("tui.json"))
    );
    let ((mut s, mut child), daemon) = start(&sb, &shell, place);

    s.wait_for("the editor", |t| t.contains("Ask anything"));
    if place == Place::Daemon {
        s.wait_for("where it runs", |t| t.contains("daemon pid "));
    }
    assert!(s.parser.screen().bracketed_paste(), "bracketed paste is on");
    s.send("hello");
    s.wait_for("the typed prompt", |t| t.contains("› hello"));
    s.send("\r");
    s.wait_for("the streamed answer", |t| {
        t.contains("A second line, streamed.")
    });
    let screen = s.text();
    assert!(screen.contains("Hello from keel."), "{screen}");

    s.send("work\r");
    s.wait_for("the running tool", |t| {
        t.contains("bash sleep 30") && t.contains("Working")
    });
    s.send("steer now\r");
    s.wait_for("the queued steering message", |t| {
        t.contains("↳ steer: steer now")
    });
    s.send("\x1b");
    s.wait_for("the interrupted run", |t| t.contains("interrupted"));
    // The queued message came back into the editor.
    s.wait_for("the restored message", |t| t.contains("› steer now"));

    s.send("\x03"); // clears the editor
    s.wait_for("an empty editor", |t| t.contains("Ask anything"));
    s.send("\x04"); // quits
    s.wait_for("the exit and the terminal modes", |t| {
        t.contains("KEEL_EXIT=") && t.contains("icanon") && t.contains("echoctl")
    });
    let screen = s.text();
    assert!(screen.contains("KEEL_EXIT=0"), "{screen}");
    assert!(
        screen.contains("Session saved. Resume it with: keel --resume"),
        "{screen}"
    );
    let status = child.wait().unwrap();
    assert!(status.success());
    if let Some(d) = &daemon {
        // Quitting closed the session there: nothing else showed it.
        assert_eq!(live_sessions(d), Vec::<serde_json::Value>::new());
    }

    // Modes restored: canonical input and echo are back, the cursor is shown, paste is off.
    let all: Vec<&str> = screen.split_whitespace().collect();
    assert!(all.contains(&"icanon") && all.contains(&"echo"), "{screen}");
    assert!(
        !all.contains(&"-icanon") && !all.contains(&"-echo"),
        "{screen}"
    );
    assert!(!s.parser.screen().bracketed_paste());
    assert!(!s.parser.screen().hide_cursor());
    let raw = String::from_utf8_lossy(&s.raw);
    assert!(
        !raw.contains("\x1b[2J") && !raw.contains("\x1b[3J"),
        "no full clear"
    );

    // The session was saved with both prompts and the answer.
    let sessions = session_files(&sb);
    assert_eq!(sessions.len(), 1);
    let file = &sessions[0];
    assert!(file.contains("\"hello\""), "{file}");
    assert!(file.contains("A second line, streamed."), "{file}");
    assert!(file.contains("\"work\""), "{file}");
    assert!(
        file.contains("\"cancelled\":true"),
        "the aborted tool call is saved: {file}"
    );
    // The TUI's log is as private as the sessions.
    use std::os::unix::fs::PermissionsExt;
    let logs = sb.home().join("logs");
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&logs), 0o700);
    assert_eq!(mode(&logs.join("keel.log")), 0o600);
}

#[test]
fn sigterm_during_a_tool_call_restores_the_terminal_and_saves_the_session() {
    sigterm_during_a_tool_call(Place::InProcess);
}

/// Through the daemon, the signal ends only the window: the run goes on there.
#[test]
fn sigterm_during_a_tool_call_through_the_daemon_restores_the_terminal_and_the_run_goes_on() {
    sigterm_during_a_tool_call(Place::Daemon);
}

fn sigterm_during_a_tool_call(place: Place) {
    let sb = Sandbox::new();
    // The shell reports keel's pid, so the test can signal keel itself.
    let shell = format!(
        "{} </dev/tty & echo KEEL_PID=$!; wait $!; echo KEEL_EXIT=$?; stty -a",
        keel_shell(&fixture("tui.json"))
    );
    let ((mut s, mut child), daemon) = start(&sb, &shell, place);
    s.wait_for("the editor", |t| t.contains("Ask anything"));
    let pid = s.shell_pid();
    s.send("work\r");
    s.wait_for("the running tool", |t| t.contains("bash sleep 30"));
    s.terminate(pid);
    let screen = s.text();
    assert!(screen.contains("KEEL_EXIT=143"), "{screen}");
    assert_cooked(&screen);
    assert!(!s.parser.screen().bracketed_paste());
    assert!(!s.parser.screen().hide_cursor());
    assert!(child.wait().unwrap().success());
    let sessions = session_files(&sb);
    assert_eq!(sessions.len(), 1);
    assert!(sessions[0].contains("\"work\""), "{}", sessions[0]);
    match daemon {
        None => assert!(
            sessions[0].contains("\"cancelled\":true"),
            "{}",
            sessions[0]
        ),
        Some(d) => {
            let live = live_sessions(&d);
            assert_eq!(live.len(), 1, "{live:?}");
            assert_eq!(live[0]["state"], "running", "{live:?}");
        }
    }
}

#[test]
fn an_at_mention_picked_in_the_menu_sends_the_file_with_the_prompt() {
    let sb = Sandbox::new();
    std::fs::write(sb.work().join("README.md"), "Project notes: ship it.\n").unwrap();
    let shell = format!("{}; echo KEEL_EXIT=$?", keel_shell(&fixture("hello.json")));
    let (mut s, mut child) = spawn(&sb, &shell);
    s.wait_for("the editor", |t| t.contains("Ask anything"));
    s.send("summarize @READ");
    s.wait_for("the file menu", |t| {
        t.contains("@README.md") && t.contains("Tab or Enter insert")
    });
    s.send("\t");
    s.wait_for("the inserted path", |t| {
        t.contains("› summarize @README.md")
    });
    s.send("\r");
    s.wait_for("the answer", |t| t.contains("Hello from keel!"));
    let text = s.text();
    assert!(
        text.contains("[file "),
        "the user cell folds the file: {text}"
    );
    assert!(
        !text.contains("Project notes"),
        "not the file's text: {text}"
    );
    assert!(s.quit("\x04", &mut child).success());
    let sessions = session_files(&sb);
    let readme = sb.work().join("README.md").display().to_string();
    assert!(
        sessions[0].contains(&format!(
            "<file name=\\\"{readme}\\\">\\nProject notes: ship it."
        )),
        "{}",
        sessions[0]
    );
}

#[test]
fn the_tui_asks_once_whether_to_trust_a_projects_mcp_servers_and_remembers() {
    let sb = Sandbox::new();
    let servers = serde_json::json!({"mcpServers": {"fx": {"command": crate::mcp::FIXTURE}}});
    std::fs::write(sb.work().join(".mcp.json"), servers.to_string()).unwrap();
    let shell = format!("{}; echo KEEL_EXIT=$?", keel_shell(&fixture("hello.json")));
    // First start: the question, answered yes.
    let (mut s, mut child) = spawn(&sb, &shell);
    s.wait_for("the question", |t| {
        t.contains("  MCP servers:\n    `fx`\n") && t.contains("Trust this project? [y/N]")
    });
    s.send("y\r");
    s.wait_for("the editor", |t| t.contains("Ask anything"));
    assert!(s.quit("\x04", &mut child).success());
    let trust = std::fs::read_to_string(sb.home().join("trust.json")).unwrap();
    let work = std::fs::canonicalize(sb.work()).unwrap();
    assert!(trust.contains(&work.display().to_string()), "{trust}");
    // Second start: no question, and the servers are not skipped.
    let (mut s, mut child) = spawn(&sb, &shell);
    s.wait_for("the editor", |t| t.contains("Ask anything"));
    let text = s.text();
    assert!(!text.contains("Trust this project"), "{text}");
    assert!(
        !text.contains("skipped the project's MCP servers"),
        "{text}"
    );
    assert!(s.quit("\x04", &mut child).success());

    // A `git pull` adds a server to the trusted file: it does not start unasked.
    let more = serde_json::json!({"mcpServers": {
        "fx": {"command": crate::mcp::FIXTURE},
        "pulled": {"command": crate::mcp::FIXTURE, "args": ["--pulled"]},
    }});
    std::fs::write(sb.work().join(".mcp.json"), more.to_string()).unwrap();
    let (mut s, mut child) = spawn(&sb, &shell);
    s.wait_for("the question about the new server", |t| {
        t.contains("  MCP servers:\n    `pulled`\n") && t.contains("Trust this project? [y/N]")
    });
    s.send("n\r");
    s.wait_for("the new server skipped", |t| {
        t.contains("Ask anything") && t.contains("skipped the project's MCP servers `pulled`")
    });
    assert!(s.quit("\x04", &mut child).success());

    // Another project, answered no: the servers stay off, and it is not asked again.
    let other = Sandbox::new();
    std::fs::write(other.work().join(".mcp.json"), servers.to_string()).unwrap();
    for round in 0..2 {
        let (mut s, mut child) = spawn(&other, &shell);
        if round == 0 {
            s.wait_for("the question", |t| t.contains("Trust this project"));
            s.send("n\r");
        }
        s.wait_for("the skipped servers", |t| {
            t.contains("Ask anything") && t.contains("skipped the project's MCP servers `fx`")
        });
        if round == 1 {
            assert!(!s.text().contains("Trust this project"), "{}", s.text());
        }
        assert!(s.quit("\x04", &mut child).success());
    }
}
