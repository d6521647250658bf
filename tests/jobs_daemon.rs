//! A daemon session's background jobs (issue 47, points 4 and 6): the same commands and
//! events as in RPC mode through protocol v2, a client that attaches later reads exactly what
//! it missed from an offset, `keel ps` lists the jobs under their session, closing the session
//! ends them; a daemon killed with -9 leaves no job running, and the next one, resuming the
//! session, lists the job as `lost` and tells the model.

use std::cell::Cell;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::daemon::{open_script, Conn, Daemon};
use crate::common::support::alive;
use crate::common::support::{scripted_args, Sandbox};
use crate::jobs_rpc::{bytes, marker, script, LINES};

/// Reads the session's events until the job wrote all of [`LINES`] and the run settled (in
/// either order).
fn started(c: &mut Conn) {
    let (output, settled) = (Cell::new(false), Cell::new(false));
    c.notes_until(|v| {
        let e = &v["params"]["event"];
        output.set(output.get() || (e["type"] == "job_output" && e["next"] == LINES.len()));
        settled.set(settled.get() || e["type"] == "agent_settled");
        output.get() && settled.get()
    });
}

/// Waits until no process carries `marker`: killed processes take a moment to go. The ones
/// left after 10 s.
fn gone(marker: &str) -> Vec<(i32, String)> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = alive(marker);
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Opens a session on the job script, its commands under sandbox mechanism `mech` (`None`:
/// the best there is), attaches `c` and prompts it; its id.
fn session_with_a_job(c: &mut Conn, sb: &Sandbox, marker: &str, mech: Option<&str>) -> String {
    let id = match mech {
        None => open_script(c, sb, &script(sb, marker), &[]),
        Some(mech) => {
            let script = script(sb, marker);
            let spec = crate::common::daemon::spec(&scripted_args(&[], &script, &[]));
            let env = json!({"KEEL_TEST_SEED": "7", "KEEL_SANDBOX_MECHANISM": mech});
            let r = c.call(
                "session/open",
                json!({"cwd": sb.work(), "spec": spec, "env": env}),
            );
            r["result"]["sessionId"].as_str().unwrap().to_string()
        }
    };
    c.call("session/attach", json!({"sessionId": id}));
    c.call("prompt", json!({"sessionId": id, "message": "start it"}));
    started(c);
    id
}

#[test]
fn a_late_client_reads_what_it_missed_keel_ps_lists_the_job_and_closing_ends_it() {
    let sb = crate::sandbox::world();
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let mut a = d.client();
    let marker = marker();
    let id = session_with_a_job(&mut a, &sb, &marker, None);
    let jobs = a.call("get_jobs", json!({"sessionId": id}));
    assert_eq!(jobs["result"]["jobs"][0]["state"], "running", "{jobs}");

    // A client that comes later, having read up to offset 9 ("line one\n") before.
    let mut b = d.client();
    b.call("session/attach", json!({"sessionId": id}));
    let read = b.call("read_job", json!({"sessionId": id, "jobId": 1, "since": 9}));
    assert_eq!(bytes(&read["result"]), "line two\n", "{read}");
    assert_eq!(read["result"]["from"], 9, "{read}");
    assert_eq!(read["result"]["next"], LINES.len(), "{read}");
    let unknown = b.call("read_job", json!({"sessionId": id, "jobId": 5}));
    assert_eq!(
        unknown["error"]["message"], "No background job with id 5",
        "{unknown}"
    );

    let socket = d.socket.display().to_string();
    let table = sb.run(&["ps", "--socket", &socket]);
    assert_eq!(table.code, 0, "{table}");
    let row = table
        .stdout
        .lines()
        .find(|l| l.trim_start().starts_with("job 1 "))
        .unwrap_or_else(|| panic!("no job row: {table}"));
    assert!(row.starts_with("  job 1"), "{table}");
    assert!(
        row.contains(" running ") && row.contains(" 18 B "),
        "{table}"
    );
    assert!(row.contains("printf 'line one"), "{table}");
    let listed = sb.run(&["ps", "--json", "--socket", &socket]);
    let session: Value = serde_json::from_str(listed.stdout.lines().next().unwrap()).unwrap();
    let job = &session["jobs"][0];
    assert_eq!(
        (&job["id"], &job["state"], &job["bytes"], &job["exitCode"]),
        (
            &json!(1),
            &json!("running"),
            &json!(LINES.len()),
            &Value::Null
        ),
        "{listed}"
    );
    assert!(job["command"].as_str().unwrap().contains(&marker), "{job}");
    assert!(job.get("pid").is_some(), "{job}");

    b.call("session/detach", json!({"sessionId": id}));
    let closed = a.call("session/close", json!({"sessionId": id}));
    assert!(closed.get("result").is_some(), "{closed}");
    let left = gone(&format!("sleep {marker}"));
    assert!(left.is_empty(), "survivors of session/close: {left:?}");
}

/// Under bubblewrap (the job dies with the sandbox's PID namespace) and the Landlock fallback
/// (its reaper's parent-death signal).
#[test]
fn a_daemon_killed_with_9_leaves_no_job_and_the_next_lists_it_as_lost() {
    for mech in crate::sandbox::mechanisms() {
        killed_with_9(mech);
    }
}

fn killed_with_9(mech: &str) {
    let sb = crate::sandbox::world();
    let mut d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let mut c = d.client();
    let marker = marker();
    let id = session_with_a_job(&mut c, &sb, &marker, Some(mech));
    let state = c.call("get_state", json!({"sessionId": id}));
    let file = state["result"]["sessionFile"].as_str().unwrap().to_string();
    let jobs = c.call("get_jobs", json!({"sessionId": id}));
    let pid = &jobs["result"]["jobs"][0]["pid"];
    assert_eq!(pid.is_null(), mech == "bwrap", "{mech}: {jobs}");
    assert!(!alive(&format!("sleep {marker}")).is_empty());

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(d.pid()),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    assert_eq!(d.wait(), 128 + 9);
    let left = gone(&format!("sleep {marker}"));
    assert!(
        left.is_empty(),
        "survivors of the daemon's SIGKILL: {left:?}"
    );

    // The next daemon resumes the session: the job is lost, and the model is told.
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let mut c = d.client();
    let told = sb.dir.path().join("told.json");
    let turns = json!({"turns": [{
        "match": "Job 1 \\(`printf [^`]*`\\) was lost: keel stopped while it ran\\. Its last lines:\\nline one\\nline two",
        "chunks": [{"text": "heard it"}]}]});
    std::fs::write(&told, turns.to_string()).unwrap();
    let told = told.display().to_string();
    let args = scripted_args(&[], &told, &["--session", &file]);
    let r = c.call(
        "session/open",
        json!({"cwd": sb.work(), "spec": crate::common::daemon::spec(&args)}),
    );
    let again = r["result"]["sessionId"].as_str().unwrap().to_string();
    let jobs = c.call("get_jobs", json!({"sessionId": again}));
    let job = &jobs["result"]["jobs"][0];
    assert_eq!(job["id"], 1, "{jobs}");
    assert_eq!(job["state"], "lost", "{mech}: {jobs}");
    let read = c.call("read_job", json!({"sessionId": again, "jobId": 1}));
    assert_eq!(bytes(&read["result"]), LINES, "{read}");
    c.call("session/attach", json!({"sessionId": again}));
    c.call(
        "prompt",
        json!({"sessionId": again, "message": "what happened?"}),
    );
    let events = c.events_until("agent_settled");
    let (_, settled) = events.last().unwrap();
    assert_eq!(settled["outcome"], "completed", "{events:?}");
    let said = events
        .iter()
        .any(|(_, e)| e["type"] == "message_end" && e.to_string().contains("heard it"));
    assert!(said, "the model was not told: {events:?}");
}
