//! The TUI's `/jobs` (issue 47 point 4) in a real terminal, the session in this process: a
//! scripted turn starts a background job, the status line counts it, `/jobs` lists it running,
//! Enter tails its output, `k` and `y` kill it, the list says so, and no process of it is left.

use serde_json::json;

use crate::common::pty::spawn;
use crate::common::support::{alive, keel_shell, Sandbox};

/// A `sleep` argument no other process has: `1000.<pid><n>` seconds.
pub(crate) fn marker(n: u32) -> String {
    format!("1000.{}{n}", std::process::id())
}

#[test]
fn jobs_lists_tails_and_kills_a_background_job() {
    let sb = Sandbox::new();
    let mark = marker(1);
    let command = format!("echo ready-to-serve; sleep {mark}");
    let script = sb.dir.path().join("jobs.json");
    let turns = json!({"turns": [
        {"match": "go", "chunks": [{"toolCall": {"id": "c1", "name": "bash",
            "arguments": {"command": command, "run_in_background": true}}}]},
        {"chunks": [{"text": "The server runs."}]}
    ]});
    std::fs::write(&script, turns.to_string()).unwrap();
    let shell = format!(
        "{}; echo KEEL_EXIT=$?",
        keel_shell(script.to_str().unwrap())
    );
    let (mut s, mut child) = spawn(&sb, &shell);
    s.wait_for("the editor", |t| t.contains("Ask anything"));
    s.send("go\r");
    s.wait_for("the answer and the job counted", |t| {
        t.contains("The server runs.") && t.contains("1 job")
    });
    assert_eq!(alive(&mark).len(), 1, "{:?}", alive(&mark));

    s.send("/jobs\r");
    s.wait_for("the list", |t| {
        t.contains("Jobs · 1 running · 1 in all") && t.contains("#1  running")
    });
    assert!(s.text().contains(&command), "{}", s.text());
    s.send("\r");
    s.wait_for("the tail", |t| {
        t.contains("Job 1 · running") && t.contains("ready-to-serve")
    });
    s.send("k");
    s.wait_for("the question", |t| {
        t.contains("Kill job 1 (`echo ready-to-serve")
    });
    s.send("y");
    s.wait_for("the job killed", |t| t.contains("Job 1 · killed"));
    s.send("\x1b");
    s.wait_for("the list again", |t| {
        t.contains("Jobs · 0 running · 1 in all") && t.contains("#1  killed")
    });
    assert_eq!(alive(&mark), Vec::new());
    s.send("\x1b");
    s.wait_for("the editor again, no job counted", |t| {
        t.contains("Ask anything") && !t.contains("1 job")
    });
    assert!(s.quit("\x04", &mut child).success());
}

/// `TERM=dumb` draws no panel: `/jobs` prints the list, and the next line is a prompt again.
#[test]
fn a_dumb_terminal_prints_the_jobs() {
    let sb = Sandbox::new();
    let mark = marker(3);
    let command = format!("sleep {mark}");
    let script = sb.dir.path().join("jobs.json");
    let turns = json!({"turns": [
        {"match": "go", "chunks": [{"toolCall": {"id": "c1", "name": "bash",
            "arguments": {"command": command, "run_in_background": true}}}]},
        {"chunks": [{"text": "It sleeps."}]}
    ]});
    std::fs::write(&script, turns.to_string()).unwrap();
    let shell = format!(
        "{}; echo KEEL_EXIT=$?",
        keel_shell(script.to_str().unwrap())
    );
    let vars = [("KEEL_NO_DAEMON", "1"), ("TERM", "dumb")];
    let (mut s, mut child) = crate::common::pty::spawn_with(&sb, &shell, &vars);
    s.wait_for("the header", |t| t.contains("/help for commands"));
    s.send("go\r");
    s.wait_for("the answer", |t| t.contains("It sleeps."));
    s.send("/jobs\r");
    s.wait_for("the list", |t| {
        t.contains("background jobs:") && t.contains("#1  running  pid ")
    });
    assert!(s.text().contains(&command), "{}", s.text());
    assert!(s.quit("/quit\r", &mut child).success());
    // The session's end ended its job.
    assert_eq!(alive(&mark), Vec::new());
}
