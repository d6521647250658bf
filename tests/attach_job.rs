//! `keel attach --job ID SESSION` (issue 47 points 4 and 6) in a real terminal, against a
//! daemon's session whose model started a job on a terminal (Codex's `exec_command` with
//! `tty`): the program's output, a line
//! typed and echoed, a resize the program hears (`stty size` on SIGWINCH), Ctrl+\ detaching
//! with the job left running, a second attach that sees the job exit (`[job 1 exited with code
//! 0]`, exit 0); a job on pipes shown read-only; an unknown job id refused.

use serde_json::{json, Value};

use crate::common::daemon::{open_script, Conn, Daemon};
use crate::common::pty::spawn_with;
use crate::common::support::alive;
use crate::common::support::Sandbox;
use crate::tui_jobs::marker;

/// The session's jobs (`get_jobs` through the daemon).
fn jobs(c: &mut Conn, id: &str) -> Vec<Value> {
    let r = c.call("get_jobs", json!({"sessionId": id}));
    r["result"]["jobs"]
        .as_array()
        .unwrap_or_else(|| panic!("{r}"))
        .clone()
}

#[test]
fn attach_job_types_resizes_detaches_and_sees_the_job_exit() {
    let sb = Sandbox::new();
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let socket = d.socket.display().to_string();
    let mark = marker(2);
    // On a terminal: echoes each line, reports its size on SIGWINCH, exits 0 on `quit` (bash
    // runs a trap once `read` returns: it returns every 0.1 s).
    let program = "trap 'stty size' WINCH; echo prompt-ready; \
                   while :; do if read -r -t 0.1 line; then [ \"$line\" = quit ] && exit 0; \
                   echo \"got:$line\"; fi; done";
    let piped = format!("echo piped-output; sleep {mark}");
    let turns = json!({"turns": [
        {"match": "go", "chunks": [
            {"toolCall": {"id": "c1", "name": "exec_command",
                "arguments": {"cmd": program, "tty": true, "yield_time_ms": 250}}},
            {"toolCall": {"id": "c2", "name": "bash",
                "arguments": {"command": piped, "run_in_background": true}}}
        ]},
        {"chunks": [{"text": "Both run."}]}
    ]});
    let script = sb.dir.path().join("attach.json");
    std::fs::write(&script, turns.to_string()).unwrap();
    let mut c = d.client();
    let id = open_script(&mut c, &sb, script.to_str().unwrap(), &[]);
    c.call("session/attach", json!({"sessionId": id}));
    c.call("prompt", json!({"sessionId": id, "message": "go"}));
    c.events_until("agent_end");
    let vars = [("KEEL_SOCKET", socket.as_str())];

    let keel = env!("CARGO_BIN_EXE_keel");
    let attach = |job: u32| format!("'{keel}' attach --job {job} {id}; echo KEEL_EXIT=$?");

    let (mut s, mut child) = spawn_with(&sb, &attach(1), &vars);
    s.wait_for("the program's output", |t| t.contains("prompt-ready"));
    s.send("hello\r");
    s.wait_for("the line echoed", |t| t.contains("got:hello"));
    s.resize(30, 100);
    s.wait_for("the new size", |t| t.contains("30 100"));
    s.send("\x1c");
    s.wait_for("the detach", |t| {
        t.contains("[detached from job 1") && t.contains("KEEL_EXIT=0")
    });
    assert!(child.wait().unwrap().success());
    let listed = jobs(&mut c, &id);
    assert_eq!(listed[0]["state"], "running", "{listed:?}");

    // Again: what it wrote so far, then its end.
    let (mut s, mut child) = spawn_with(&sb, &attach(1), &vars);
    s.wait_for("the replay", |t| t.contains("got:hello"));
    s.send("quit\r");
    s.wait_for("the job's end", |t| {
        t.contains("[job 1 exited with code 0]") && t.contains("KEEL_EXIT=0")
    });
    assert!(child.wait().unwrap().success());

    // A job on pipes: shown, and a key says it takes no input.
    let (mut s, mut child) = spawn_with(&sb, &attach(2), &vars);
    s.wait_for("the piped output", |t| t.contains("piped-output"));
    s.send("x");
    s.wait_for("the note", |t| {
        t.contains("[job 2 runs on pipes: it takes no input")
    });
    s.send("\x1c");
    s.wait_for("the detach", |t| t.contains("KEEL_EXIT=0"));
    assert!(child.wait().unwrap().success());
    assert_eq!(alive(&mark).len(), 1, "{:?}", alive(&mark));

    // An unknown job.
    let (mut s, mut child) = spawn_with(&sb, &attach(9), &vars);
    s.wait_for("the refusal", |t| t.contains("KEEL_EXIT="));
    let t = s.text();
    assert!(t.contains("has no background job 9"), "{t}");
    assert!(t.contains("KEEL_EXIT=3"), "{t}");
    let _ = child.wait();

    let killed = c.call("kill_job", json!({"sessionId": id, "jobId": 2}));
    assert_eq!(killed["result"]["job"]["state"], "killed", "{killed}");
    assert_eq!(alive(&mark), Vec::new());
}
