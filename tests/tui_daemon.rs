//! The TUI as a daemon client in a real pseudo-terminal: closing the window does not stop the
//! run; `keel attach` shows what happened meanwhile. The run waits on a FIFO the test opens
//! only after the window is gone, so "the run outlived the window" is certain, not timed.

use serde_json::json;

use crate::common::daemon::Daemon;
use crate::common::pty::spawn;
use crate::common::support::Sandbox;

/// How the first window goes away.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Leave {
    /// The terminal closes: SIGHUP.
    CloseWindow,
    /// The user types `/detach`.
    Detach,
}

#[test]
fn closing_the_window_leaves_the_run_going_and_attach_shows_its_end() {
    leave_mid_run_and_come_back(Leave::CloseWindow);
}

#[test]
fn detaching_during_a_run_leaves_it_running_in_keel_ps_and_attach_shows_its_end() {
    leave_mid_run_and_come_back(Leave::Detach);
}

fn leave_mid_run_and_come_back(leave: Leave) {
    let sb = Sandbox::new();
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let socket = d.socket.display().to_string();
    let (script, fifo) = crate::common::daemon::waiting_run(&sb);
    let keel = env!("CARGO_BIN_EXE_keel");
    let shell = format!(
        "exec '{keel}' --daemon --socket '{socket}' --provider scripted --script '{}' --permission auto --session-id live go",
        script.display()
    );
    let (mut window, mut child) = spawn(&sb, &shell);
    window.wait_for("the bash tool running", |t| {
        t.contains("Waiting for the signal.") && t.contains("cat ")
    });
    match leave {
        Leave::CloseWindow => {
            // The terminal window closes: the kernel sends the terminal's process SIGHUP (sent
            // here by hand: the test's reader still holds the pty open). The client goes; the
            // run does not.
            let pid = child.process_id().unwrap() as i32;
            nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGHUP,
            )
            .unwrap();
            let status = child.wait().unwrap();
            assert_eq!(status.exit_code(), 129, "{status:?}");
        }
        Leave::Detach => {
            window.send("/detach\r");
            window.wait_for("the goodbye", |t| {
                t.contains("Left session live; its run goes on in the keel daemon")
                    && t.contains("keel attach live")
            });
            assert!(child.wait().unwrap().success());
        }
    }
    drop(window);
    // `keel ps` shows the run going on.
    let ps = sb.cmd(&["ps", "--socket", &socket]).output().unwrap();
    let table = String::from_utf8_lossy(&ps.stdout);
    let row = table
        .lines()
        .find(|l| l.starts_with("live"))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(row.contains("running"), "{table}");
    let mut c = d.client();
    let state = |c: &mut crate::common::daemon::Conn| {
        c.sessions()
            .iter()
            .find(|s| s["sessionId"] == "live")
            .map(|s| s["state"].as_str().unwrap().to_string())
    };
    assert_eq!(state(&mut c).as_deref(), Some("running"));
    // Attached first, then the tool may finish: the run's end is on this stream. (Attaching
    // after the write raced the run: a run that settled before the attach sent no
    // `agent_settled` here, and the loop below waited for it until the read timed out.)
    let mut seen = Vec::new();
    c.call("session/attach", json!({"sessionId": "live"}));
    std::fs::write(&fifo, "go on\n").unwrap();
    loop {
        let v = c.recv().expect("the daemon closed the connection");
        if v["params"]["event"]["type"] == "agent_settled" {
            break;
        }
        seen.push(v);
    }
    assert_eq!(state(&mut c).as_deref(), Some("idle"));

    // A new window attaches and shows the whole story.
    let (mut again, mut child2) = spawn(
        &sb,
        &format!("exec '{keel}' attach liv --socket '{socket}'"),
    );
    again.wait_for("the final answer", |t| {
        t.contains("The signal came: all done.")
    });
    let text = again.text();
    assert!(text.contains("Waiting for the signal."), "{text}");
    again.send("/detach\r");
    again.wait_for("the goodbye", |t| t.contains("Left session live"));
    let status = child2.wait().unwrap();
    assert!(status.success(), "{status:?}");
    // The session file has every entry.
    let file = sb.session_text();
    assert!(
        file.contains("all done") && file.contains("go on"),
        "{file}"
    );
}

#[test]
fn two_windows_on_one_session_see_one_stream_and_one_answer_closes_both_dialogs() {
    let sb = Sandbox::new();
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let socket = d.socket.display().to_string();
    let script = sb.dir.path().join("ask.json");
    let turns = json!({"turns": [
        {"match": "go", "chunks": [
            {"text": "Cleaning."},
            {"toolCall": {"id": "call_clean", "name": "bash", "arguments": {"command": "echo cleaned"}}}
        ]},
        {"chunks": [{"text": "All clean."}]}
    ]});
    std::fs::write(&script, turns.to_string()).unwrap();
    let mut c = d.client();
    let script = script.display().to_string();
    let opened = c.call(
        "session/open",
        json!({"cwd": sb.work(), "spec": crate::common::daemon::spec(&["--provider", "scripted", "--script", &script,
               "--permission", "ask", "--session-id", "two"])}),
    );
    assert_eq!(opened["result"]["sessionId"], "two", "{opened}");
    let keel = env!("CARGO_BIN_EXE_keel");
    let attach = format!("exec '{keel}' attach two --socket '{socket}'");
    let (mut a, mut child_a) = spawn(&sb, &attach);
    let (mut b, mut child_b) = spawn(&sb, &attach);
    for w in [&mut a, &mut b] {
        w.wait_for("the attached view", |t| {
            t.contains("session two in the keel daemon")
        });
    }
    a.send("go\r");
    for w in [&mut a, &mut b] {
        w.wait_for("the approval in both windows", |t| {
            t.contains("Allow bash: echo cleaned") && t.contains("› go")
        });
    }
    // Answered in the second window: the run goes on, and the dialog closes in both.
    b.send("y");
    for w in [&mut a, &mut b] {
        w.wait_for("the answer and a closed dialog", |t| {
            t.contains("All clean.") && !t.contains("Allow bash")
        });
    }
    // Where the agent runs, and how many windows show it.
    a.send("/session\r");
    a.wait_for("the session info", |t| {
        let flat: String = t.split_whitespace().collect();
        flat.contains("runsin:thekeeldaemon(pid") && flat.contains("windowsattached:2")
    });
    // The status line says it too (refreshed every few seconds).
    a.wait_for("the place in the status line", |t| {
        t.contains("daemon pid ") && t.contains("· 2 windows")
    });
    for (w, child) in [(&mut a, &mut child_a), (&mut b, &mut child_b)] {
        w.send("/detach\r");
        w.wait_for("the goodbye", |t| t.contains("Left session two"));
        assert!(child.wait().unwrap().success());
    }
}

/// Kills, by pid, a daemon the client under test spawned (it is the test's too).
struct Spawned(Option<i32>);

impl Drop for Spawned {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// Kills the daemon `d` mid-run, waits for `w` to say the connection was lost, presses Enter
/// and waits for the new daemon's resumed session; returns the new daemon's status and the
/// guard that stops it (the client started it: it is the test's).
fn kill_and_resume(
    d: &mut Daemon,
    w: &mut crate::common::pty::Screen,
    sb: &Sandbox,
    socket: &std::path::Path,
) -> (serde_json::Value, Spawned) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(d.pid()),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    assert_eq!(d.wait(), 128 + 9);
    w.wait_for("the lost connection", |t| {
        t.contains("connection to the keel daemon was lost")
    });
    w.send("\r");
    w.wait_for("the resumed session", |t| {
        t.contains("a new one resumed session")
    });
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_keel"))
        .args(["daemon", "status", "--json", "--socket"])
        .arg(socket)
        .env("KEEL_HOME", sb.home())
        .output()
        .unwrap();
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    let guard = Spawned(status["pid"].as_i64().map(|p| p as i32));
    (status, guard)
}

#[test]
fn a_daemon_killed_mid_run_is_replaced_on_enter_and_the_session_resumes_from_its_file() {
    let sb = Sandbox::new();
    let mut d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let socket = d.socket.clone();
    let keel = env!("CARGO_BIN_EXE_keel");
    let shell = format!(
        "exec '{keel}' --daemon --socket '{}' --provider scripted --script '{}' --session-id dead work",
        socket.display(),
        crate::common::support::fixture("hang.json")
    );
    let (mut w, mut child) = spawn(&sb, &shell);
    w.wait_for("the run under way", |t| {
        t.contains("› work") && t.contains("Working")
    });
    let old = d.pid();
    let (status, _new) = kill_and_resume(&mut d, &mut w, &sb, &socket);
    assert_ne!(status["pid"].as_i64(), Some(i64::from(old)));
    let sessions = status["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 1, "{status}");
    assert_eq!(sessions[0]["sessionId"], "dead");
    let text = w.text();
    assert!(text.contains("› work"), "the prompt is still there: {text}");
    w.send("/detach\r");
    w.wait_for("the goodbye", |t| t.contains("Left session dead"));
    assert!(child.wait().unwrap().success());
}

#[test]
fn quitting_during_a_run_asks_whether_to_leave_it_running_or_stop_it() {
    let sb = Sandbox::new();
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let socket = d.socket.display().to_string();
    let mut c = d.client();
    let script = crate::common::support::fixture("hang.json");
    let opened = c.call(
        "session/open",
        json!({"cwd": sb.work(), "spec": crate::common::daemon::spec(&["--provider", "scripted", "--script", &script, "--session-id", "busy"])}),
    );
    assert_eq!(opened["result"]["sessionId"], "busy", "{opened}");
    let r = c.call("prompt", json!({"sessionId": "busy", "message": "work"}));
    assert!(r.get("result").is_some(), "{r}");
    let state = |c: &mut crate::common::daemon::Conn| {
        c.sessions()[0]["state"].as_str().unwrap().to_string()
    };
    let keel = env!("CARGO_BIN_EXE_keel");
    let attach = format!("exec '{keel}' attach busy --socket '{socket}'");
    let cases = [
        ("l", Some("running"), "Left session busy; its run goes on"),
        (
            "s",
            None,
            "Session saved. Resume it with: keel --resume busy",
        ),
    ];
    for (key, want, goodbye) in cases {
        let (mut w, mut child) = spawn(&sb, &attach);
        w.wait_for("the running session", |t| {
            t.contains("session busy in the keel daemon")
        });
        w.send("\x04"); // Ctrl+D
        w.wait_for("the question", |t| {
            t.contains("l leaves it running in the daemon")
        });
        w.send(key);
        w.wait_for("the goodbye", |t| t.contains(goodbye));
        assert!(child.wait().unwrap().success());
        // "s" waits for the daemon to answer the abort, which it does once the run settled;
        // then the session, shown nowhere else, is closed (saved, no longer live).
        match want {
            Some(want) => assert_eq!(state(&mut c), want, "after pressing {key}"),
            None => assert!(c.sessions().is_empty(), "closed after pressing {key}"),
        }
    }
}

#[test]
fn session_commands_work_through_the_daemon() {
    let sb = Sandbox::new();
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let socket = d.socket.display().to_string();
    let keel = env!("CARGO_BIN_EXE_keel");
    let shell = format!(
        "exec '{keel}' --daemon --socket '{socket}' --trust-project --provider scripted --script '{}' --session-id first hi",
        crate::common::support::fixture("hello.json")
    );
    let skill = sb.work().join(".agents/skills/lint");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: lint\ndescription: Lints.\n---\nLINT BODY: run the linter\n",
    )
    .unwrap();
    let (mut w, mut child) = spawn(&sb, &shell);
    w.wait_for("the answer", |t| t.contains("Hello from keel!"));
    // A skill command is known to the menu and sent expanded by the daemon's host.
    w.send("/skill:lint now\r");
    w.wait_for("the expanded skill", |t| {
        t.contains("LINT BODY: run the linter")
    });
    w.send("/export out.html\r");
    w.wait_for("the export", |t| t.contains("exported to"));
    let html = std::fs::read_to_string(sb.work().join("out.html")).unwrap();
    assert!(html.contains("Hello from keel!"));
    w.send("/model\r");
    w.wait_for("the model list", |t| t.contains("models you can use"));
    w.send("/new\r");
    w.wait_for("the new session", |t| t.contains("── new session "));
    let mut c = d.client();
    let ids: Vec<String> = c
        .sessions()
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids.len(), 1);
    assert_ne!(ids[0], "first", "the window now shows a new session");
    w.send("/detach\r");
    w.wait_for("the goodbye", |t| {
        t.contains(&format!("Left session {}", ids[0]))
    });
    assert!(child.wait().unwrap().success());
}

#[test]
fn resuming_a_session_the_daemon_holds_attaches_to_it_there() {
    let sb = Sandbox::new();
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let socket = d.socket.display().to_string();
    let mut c = d.client();
    let script = crate::common::support::fixture("hello.json");
    let opened = c.call(
        "session/open",
        json!({"cwd": sb.work(), "spec": crate::common::daemon::spec(&["--provider", "scripted", "--script", &script, "--session-id", "held"])}),
    );
    assert_eq!(opened["result"]["sessionId"], "held", "{opened}");
    c.call("session/attach", json!({"sessionId": "held"}));
    let r = c.call("prompt", json!({"sessionId": "held", "message": "hi"}));
    assert!(r.get("result").is_some(), "{r}");
    c.events_until("agent_settled");
    // `keel --resume held` at a terminal finds the session live in the daemon and shows it
    // there (it is live in one place only).
    let keel = env!("CARGO_BIN_EXE_keel");
    let shell = format!(
        "exec '{keel}' --socket '{socket}' --provider scripted --script '{script}' --resume held"
    );
    let (mut w, mut child) = crate::common::pty::spawn_with(&sb, &shell, &[]);
    w.wait_for("the live session", |t| {
        t.contains("live in the keel daemon: showing it there") && t.contains("Hello from keel!")
    });
    w.send("/detach\r");
    w.wait_for("the goodbye", |t| t.contains("Left session held"));
    assert!(child.wait().unwrap().success());
}

#[test]
fn a_daemon_that_cannot_be_started_is_named_once_and_the_tui_runs_in_process() {
    let sb = Sandbox::new();
    // A socket directory anyone may write to is refused (the daemon's security rule).
    let open = sb.dir.path().join("open");
    std::fs::create_dir(&open).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let socket = open.join("p2.sock").display().to_string();
    let keel = env!("CARGO_BIN_EXE_keel");
    let shell = format!(
        "'{keel}' --provider scripted --script '{}' hi; echo KEEL_EXIT=$?",
        crate::common::support::fixture("hello.json")
    );
    let (mut w, mut child) =
        crate::common::pty::spawn_with(&sb, &shell, &[("KEEL_SOCKET", &socket)]);
    w.wait_for("the answer", |t| t.contains("Hello from keel!"));
    let text = w.text();
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert_eq!(
        flat.matches("the keel daemon cannot be started").count(),
        1,
        "said once: {text}"
    );
    assert!(flat.contains("socket directory"), "{text}");
    assert!(flat.contains("runs in this process"), "{text}");
    assert!(
        !std::path::Path::new(&socket).exists(),
        "no daemon was started"
    );
    w.send("/session\r");
    w.wait_for("where it runs", |t| {
        let flat: String = t.split_whitespace().collect();
        flat.contains("runsin:thiskeelprocess")
    });
    w.send("\x04");
    w.wait_for("the exit", |t| t.contains("KEEL_EXIT="));
    let text = w.text();
    assert!(text.contains("KEEL_EXIT=0"), "{text}");
    assert!(
        text.contains("Session saved. Resume it with: keel --resume"),
        "{text}"
    );
    assert!(child.wait().unwrap().success());
}

/// A steer typed during a run lived only in the daemon's queue: when the daemon died, the new
/// one resumed the session from its file and the steer was gone (issue 44 point 10). It is
/// back in the editor, to be sent again.
#[test]
fn a_steer_queued_when_the_daemon_dies_is_back_in_the_editor() {
    let sb = Sandbox::new();
    let mut d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let socket = d.socket.clone();
    let keel = env!("CARGO_BIN_EXE_keel");
    let shell = format!(
        "exec '{keel}' --daemon --socket '{}' --provider scripted --script '{}' --session-id steer work",
        socket.display(),
        crate::common::support::fixture("hang.json")
    );
    let (mut w, mut child) = spawn(&sb, &shell);
    w.wait_for("the run under way", |t| {
        t.contains("› work") && t.contains("Working on it")
    });
    w.send("look at STEER-ME");
    w.send("\r");
    w.wait_for("the steer queued", |t| {
        t.contains("↳ steer") && t.contains("STEER-ME")
    });
    let (_, _new) = kill_and_resume(&mut d, &mut w, &sb, &socket);
    w.wait_for("the steer back in the editor", |t| {
        t.contains("look at STEER-ME") && !t.contains("↳ steer") && !t.contains("Ask anything")
    });
    // The Enter that reconnected did not send it: it waits for its own Enter.
    w.send("\x15");
    w.send("/detach\r");
    w.wait_for("the goodbye", |t| t.contains("Left session steer"));
    assert!(!w.text().contains("› look at STEER-ME"), "{}", w.text());
    assert!(child.wait().unwrap().success());
}
