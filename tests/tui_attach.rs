//! `keel attach` windows and what the daemon tells them (issue 27): a window that outlives its
//! daemon, a run's timer taken from the run's start, approval previews that are the diff the
//! call applies, and `keel ps` naming what a session is about. Every daemon a test starts is
//! killed by its guard (the test's own by `Daemon`, one the client spawned by `Spawned`).

use serde_json::{json, Value};

use crate::common::daemon::{open_script, Conn, Daemon};
use crate::common::pty::spawn;
use crate::common::support::Sandbox;

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

/// Whatever daemon answers on `socket` (one the client under test spawned) is killed by pid
/// on drop, unless it is `old`: also when the test fails before it learnt that pid.
struct AnswersOn<'a> {
    socket: &'a std::path::Path,
    home: std::path::PathBuf,
    old: i32,
}

impl AnswersOn<'_> {
    /// `keel daemon status --json` of the daemon on the socket.
    fn status(&self) -> Value {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_keel"))
            .args(["daemon", "status", "--json", "--socket"])
            .arg(self.socket)
            .env("KEEL_HOME", &self.home)
            .output()
            .unwrap();
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
    }
}

impl Drop for AnswersOn<'_> {
    fn drop(&mut self) {
        let pid = self.status()["pid"].as_i64().map(|p| p as i32);
        let _new = Spawned(pid.filter(|p| *p != self.old));
    }
}

/// Writes `turns` as a scripted provider's script; its path.
fn script(sb: &Sandbox, name: &str, turns: Value) -> String {
    let path = sb.dir.path().join(name);
    std::fs::write(&path, json!({ "turns": turns }).to_string()).unwrap();
    path.display().to_string()
}

/// `work` hangs mid-answer; `again` is answered.
fn hang_then_answer(sb: &Sandbox) -> String {
    script(
        sb,
        "again.json",
        json!([
            {"match": "^work", "chunks": [{"text": "Working on it"}, {"hang": true}]},
            {"match": "^again", "chunks": [{"text": "Answered after the restart."}]}
        ]),
    )
}

/// Opens `id` with `script` through `c` and starts a run with `prompt`; returns once the
/// answer streams.
fn start_run(c: &mut Conn, sb: &Sandbox, script: &str, id: &str, prompt: &str) {
    assert_eq!(open_script(c, sb, script, &["--session-id", id]), id);
    c.call("session/attach", json!({"sessionId": id}));
    let r = c.call("prompt", json!({"sessionId": id, "message": prompt}));
    assert!(r.get("result").is_some(), "{r}");
    c.events_until("message_update");
}

/// A `keel attach` window reopened the session with no flags when its daemon died: Enter
/// said "no model provider is configured". It now reopens it with the flags it was opened
/// with, as the window that opened it does; while disconnected it shows no spinner or timer.
#[test]
fn an_attach_window_outlives_its_daemon_and_answers_the_next_prompt() {
    let sb = Sandbox::new();
    let mut d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let socket = d.socket.clone();
    let mut c = d.client();
    start_run(&mut c, &sb, &hang_then_answer(&sb), "att", "work");
    drop(c);
    let keel = env!("CARGO_BIN_EXE_keel");
    let attach = format!("exec '{keel}' attach att --socket '{}'", socket.display());
    let (mut w, mut child) = spawn(&sb, &attach);
    w.wait_for("the run in the attached window", |t| {
        t.contains("› work") && t.contains("Working… ")
    });
    let old = d.pid();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(old),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    assert_eq!(d.wait(), 128 + 9);
    let guard = AnswersOn {
        socket: &socket,
        home: sb.home(),
        old,
    };
    w.wait_for("the disconnected state, no spinner or timer", |t| {
        t.contains("connection to the keel daemon was lost")
            && t.contains("disconnected from the keel daemon")
            && t.contains("daemon connection lost · Enter reconnects")
            && !t.contains("Working… ")
    });
    w.send("again");
    w.send("\r");
    w.wait_for("the prompt answered in a new daemon", |t| {
        t.contains("Answered after the restart.")
    });
    let status = guard.status();
    assert_ne!(status["pid"].as_i64(), Some(i64::from(old)));
    assert_eq!(status["sessions"][0]["sessionId"], "att", "{status}");
    let text = w.text();
    assert!(text.contains("a new one resumed session"), "{text}");
    assert!(!text.contains("no model provider"), "{text}");
    w.send("/detach\r");
    w.wait_for("the goodbye", |t| t.contains("Left session att"));
    assert!(child.wait().unwrap().success());
}

/// `/detach` was missing from `/help` and the `/` menu though the header advertised it.
#[test]
fn help_and_the_slash_menu_offer_detach_in_a_daemon_window() {
    let sb = Sandbox::new();
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let mut c = d.client();
    let hello = crate::common::support::fixture("hello.json");
    assert_eq!(
        open_script(&mut c, &sb, &hello, &["--session-id", "dh"]),
        "dh"
    );
    let keel = env!("CARGO_BIN_EXE_keel");
    let attach = format!("exec '{keel}' attach dh --socket '{}'", d.socket.display());
    let (mut w, mut child) = spawn(&sb, &attach);
    w.wait_for("the header", |t| t.contains("/detach leaves it"));
    w.send("/help\r");
    w.wait_for("the help's keys", |t| t.contains("Ctrl+Z       suspend"));
    // The help is taller than the window: its commands are a few rows up the scrollback.
    let screen = w.parser.screen_mut();
    screen.set_scrollback(12);
    let upper = screen.contents();
    screen.set_scrollback(0);
    assert!(upper.contains("  /detach "), "/detach in the help: {upper}");
    w.send("/det");
    w.wait_for("/detach in the menu", |t| {
        t.contains("/detach") && t.contains("Tab complete")
    });
    w.send("\r");
    w.wait_for("the goodbye", |t| t.contains("Left session dh"));
    assert!(child.wait().unwrap().success());
}

/// A window attached mid-run timed the run from the attach ("Working… 0s"): it now counts
/// from the run's start, which the attach snapshot carries. The daemon's clock is set an hour
/// back, so the run started an hour before the window's (real) clock.
#[test]
fn an_attach_window_times_a_run_from_its_start() {
    let sb = Sandbox::new();
    let hour_ago = chrono::Utc::now().timestamp_millis() - 3_600_000;
    let clock = hour_ago.to_string();
    let d = Daemon::start_env(
        &sb,
        &["--idle-exit", "0"],
        &[("KEEL_TEST_CLOCK", clock.as_str())],
    );
    let mut c = d.client();
    start_run(&mut c, &sb, &hang_then_answer(&sb), "timed", "work");
    let snap = c.call("session/attach", json!({"sessionId": "timed"}));
    let started = snap["result"]["snapshot"]["runStartedAt"].as_i64();
    assert!(
        started.is_some_and(|t| (hour_ago..hour_ago + 60_000).contains(&t)),
        "{snap}"
    );
    let keel = env!("CARGO_BIN_EXE_keel");
    let attach = format!(
        "exec '{keel}' attach timed --socket '{}'",
        d.socket.display()
    );
    let (mut w, mut child) = spawn(&sb, &attach);
    w.wait_for("the run's timer", |t| t.contains("Working… "));
    w.wait_for("a timer counted from the run's start", |t| {
        ["Working… 60m", "Working… 61m"]
            .iter()
            .any(|s| t.contains(s))
    });
    w.send("/detach\r");
    w.wait_for("the goodbye", |t| t.contains("Left session timed"));
    assert!(child.wait().unwrap().success());
}

/// The approval preview of an edit diffed only oldText against newText (`@@ -1 +1 @@`, no
/// context), and a write over an existing file did not say it overwrites. Every client now
/// gets (in `extension_ui_request`'s `preview`) the diff the call applies to the file as it
/// is now: for an edit, exactly the diff the tool reports once it ran.
#[test]
fn approval_previews_are_the_diff_the_call_applies() {
    let sb = Sandbox::new();
    let body: String = (1..=9).map(|i| format!("line {i}\n")).collect();
    std::fs::write(sb.work().join("f.txt"), &body).unwrap();
    std::fs::write(sb.work().join("old.md"), "one\ntwo\n").unwrap();
    let call = |id: &str, name: &str, args: Value| {
        json!({"match": "^go", "chunks": [
            {"toolCall": {"id": id, "name": name, "arguments": args}}
        ]})
    };
    let s = script(
        &sb,
        "files.json",
        json!([
            call("c_edit", "edit", json!({"path": "f.txt", "oldText": "line 5\n", "newText": "five\n"})),
            call("c_over", "write", json!({"path": "old.md", "content": "one\n2\n"})),
            call("c_new", "write", json!({"path": "new.md", "content": "fresh\n"})),
            {"match": "^go", "chunks": [{"text": "Done."}]}
        ]),
    );
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let mut c = d.connect();
    c.hello(true);
    let flags = ["--permission", "ask", "--session-id", "pv"];
    assert_eq!(open_script(&mut c, &sb, &s, &flags), "pv");
    c.call("session/attach", json!({"sessionId": "pv"}));
    c.call("prompt", json!({"sessionId": "pv", "message": "go"}));
    let mut previews = Vec::new();
    let mut edit_diff = None;
    for _ in 0..3 {
        let seen = c.events_until("extension_ui_request");
        if let Some(end) = seen.iter().find(|(_, e)| e["type"] == "tool_execution_end") {
            edit_diff = edit_diff.or(end.1["result"]["details"]["diff"]
                .as_str()
                .map(str::to_string));
        }
        let dialog = seen.last().unwrap().1.clone();
        let answer = json!({"sessionId": "pv", "id": dialog["id"], "confirmed": true});
        c.call("extension_ui_response", answer);
        previews.push(dialog["preview"].clone());
    }
    let seen = c.events_until("agent_settled");
    let ends: Vec<&Value> = seen
        .iter()
        .map(|(_, e)| e)
        .filter(|e| e["type"] == "tool_execution_end")
        .collect();
    let edit_diff = edit_diff
        .or_else(|| {
            ends.iter()
                .find(|e| e["toolCallId"] == "c_edit")
                .and_then(|e| e["result"]["details"]["diff"].as_str().map(str::to_string))
        })
        .expect("the edit's reported diff");
    assert_eq!(previews[0]["change"], "edit", "{previews:?}");
    assert_eq!(previews[0]["diff"].as_str(), Some(edit_diff.as_str()));
    assert!(
        edit_diff.contains("@@ -2,7 +2,7 @@\n line 2\n line 3\n line 4\n-line 5\n+five\n"),
        "context and line numbers: {edit_diff}"
    );
    assert_eq!(previews[1]["change"], "overwrite", "{previews:?}");
    let over = previews[1]["diff"].as_str().unwrap_or_default();
    assert!(over.contains(" one\n-two\n+2\n"), "{over}");
    assert_eq!(previews[2]["change"], "create", "{previews:?}");
    assert!(
        previews[2]["diff"]
            .as_str()
            .unwrap_or_default()
            .contains("+fresh\n"),
        "{previews:?}"
    );
}

/// `keel ps` and the attach picker said nothing of what a session is about: `daemon/status`
/// now carries each session's first prompt, and `keel ps` shows the name, else that prompt,
/// in aligned columns.
#[test]
fn keel_ps_names_what_each_session_is_about() {
    let sb = Sandbox::new();
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let mut c = d.client();
    let hello = crate::common::support::fixture("hello.json");
    for id in ["named", "unnamed"] {
        assert_eq!(open_script(&mut c, &sb, &hello, &["--session-id", id]), id);
        c.call("session/attach", json!({"sessionId": id}));
        let prompt = format!(
            "please look at the flaky test in {id} and {}",
            "x".repeat(80)
        );
        let r = c.call("prompt", json!({"sessionId": id, "message": prompt}));
        assert!(r.get("result").is_some(), "{r}");
        c.events_until("agent_settled");
    }
    let r = c.call(
        "set_session_name",
        json!({"sessionId": "named", "name": "Fix the loader"}),
    );
    assert!(r.get("result").is_some(), "{r}");
    let sessions = c.sessions();
    let unnamed = sessions
        .iter()
        .find(|s| s["sessionId"] == "unnamed")
        .unwrap();
    assert!(
        unnamed["firstPrompt"]
            .as_str()
            .is_some_and(|p| p.starts_with("please look at the flaky test in unnamed")),
        "{sessions:?}"
    );
    let socket = d.socket.display().to_string();
    let ps = sb.cmd(&["ps", "--socket", &socket]).output().unwrap();
    let table = String::from_utf8_lossy(&ps.stdout).to_string();
    let rows: Vec<&str> = table.lines().collect();
    assert_eq!(rows.len(), 3, "{table}");
    let named = rows.iter().find(|r| r.starts_with("named")).unwrap();
    let unnamed = rows.iter().find(|r| r.starts_with("unnamed")).unwrap();
    assert!(named.contains("Fix the loader"), "{table}");
    assert!(
        unnamed.contains("please look at the flaky test in unnamed"),
        "{table}"
    );
    assert!(unnamed.contains('…'), "a long prompt is cut: {table}");
    // Every column starts where its header does.
    let header = rows[0];
    let cwd_at = header.find("CWD").unwrap();
    let work = sb.work().display().to_string();
    for row in [named, unnamed] {
        let chars: Vec<char> = row.chars().collect();
        let at: String = chars[header[..cwd_at].chars().count()..].iter().collect();
        assert!(at.starts_with(&work), "{table}");
    }
}

/// A window attached while an answer streams showed only what came after the attach
/// (`LATE-TEXT`, though the session holds `EARLY-TEXT LATE-TEXT`): the attach snapshot's
/// message in progress is drawn too (issue 44 point 12). The script holds `LATE-TEXT` until
/// the window has shown `EARLY-TEXT` (a gate file, no sleep).
#[test]
fn an_attach_window_shows_the_answer_streamed_before_it_attached() {
    let sb = Sandbox::new();
    let gate = sb.dir.path().join("late.gate");
    let path = script(
        &sb,
        "early.json",
        json!([{"chunks": [
            {"text": "EARLY-TEXT "},
            {"text": "LATE-TEXT", "waitFor": gate.display().to_string()},
        ]}]),
    );
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let mut c = d.client();
    start_run(&mut c, &sb, &path, "early", "stream");
    drop(c);
    let keel = env!("CARGO_BIN_EXE_keel");
    let attach = format!(
        "exec '{keel}' attach early --socket '{}'",
        d.socket.display()
    );
    let (mut w, mut child) = spawn(&sb, &attach);
    w.wait_for("the run in the attached window", |t| t.contains("› stream"));
    w.wait_for("the answer streamed before the attach", |t| {
        t.contains("EARLY-TEXT")
    });
    std::fs::write(&gate, "").unwrap();
    w.wait_for("the whole answer", |t| t.contains("EARLY-TEXT LATE-TEXT"));
    w.send("/detach\r");
    w.wait_for("the goodbye", |t| t.contains("Left session early"));
    assert!(child.wait().unwrap().success());
}

/// A window attached to a subagent whose task ended still said "Ask anything", and Enter
/// swallowed the prompt: a child session takes no prompts from a user. It now says the
/// subagent finished and is read only, and Enter keeps what was typed and says so. Attaching
/// after it ended is refused (it is no longer live), with the way to open its file.
#[test]
fn a_window_attached_to_a_subagent_that_finished_takes_no_prompt() {
    let sb = Sandbox::new();
    let (d, mut c, _parent, fifo, seen) = crate::subagents::parent_with_a_waiting_child(&sb);
    let child = seen.last().unwrap()["params"]["event"]["partialResult"]["details"]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    let keel = env!("CARGO_BIN_EXE_keel");
    let socket = d.socket.display().to_string();
    let attach = format!("exec '{keel}' attach {child} --socket '{socket}'");
    let (mut w, mut window) = spawn(&sb, &attach);
    w.wait_for("the child's run", |t| t.contains("CHILD waits"));
    std::fs::write(&fifo, "go\n").unwrap();
    c.notes_until(crate::common::daemon::is_event("agent_settled"));
    w.wait_for("the finished subagent, read only", |t| {
        t.contains("child done") && t.contains("subagent finished · read only")
    });
    assert!(!w.text().contains("Ask anything"), "{}", w.text());
    w.send("hello");
    w.send("\r");
    w.wait_for("Enter refused, the text kept", |t| {
        t.contains("This subagent finished: its session takes no prompts") && t.contains("› hello")
    });
    // Ctrl+C clears the editor, then twice quits; the goodbye names the saved session.
    w.send("\x03");
    w.wait_for("the editor cleared", |t| !t.contains("› hello"));
    w.send("\x03");
    w.send("\x03");
    w.wait_for("the goodbye", |t| {
        t.contains("Session saved. Resume it with")
    });
    assert!(window.wait().unwrap().success());
    let late = sb.run(&["attach", &child, "--socket", &socket]);
    assert_ne!(late.code, 0, "{late}");
    assert!(late.stderr.contains("is live"), "{late}");
}
