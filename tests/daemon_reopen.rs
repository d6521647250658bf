//! Opening a session the daemon already holds live (issue 27 §13): the live session is returned
//! as it is, and the flags that would have set it up otherwise are named in a warning that
//! reaches the client, never dropped silently.

use serde_json::{json, Value};

use crate::common::daemon::{open, Daemon};
use crate::common::support::{fixture, scripted_args, Sandbox};

fn reopen(c: &mut crate::common::daemon::Conn, sb: &Sandbox, extra: &[&str]) -> Value {
    let script = fixture("hello.json");
    let mut args = scripted_args(&["--continue"], &script, &[]);
    args.extend_from_slice(extra);
    let r = c.call(
        "session/open",
        json!({"cwd": sb.work(), "spec": crate::common::daemon::spec(&args)}),
    );
    r["result"].clone()
}

/// Regression: `--continue --model other` on a session live in the daemon returned it with
/// its own model and no word that `--model` was not applied.
#[test]
fn reopening_a_live_session_with_another_model_warns_that_model_was_not_applied() {
    let sb = Sandbox::new();
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let mut c = d.client();
    let id = open(&mut c, &sb, "hello.json", &["--thinking", "low"]);
    c.call("session/attach", json!({"sessionId": id}));
    c.call("prompt", json!({"sessionId": id, "message": "hi"}));
    c.events_until("agent_settled");

    // The same flags again: nothing to warn about.
    let same = reopen(&mut c, &sb, &["--thinking", "low"]);
    assert_eq!(same["sessionId"], id.as_str(), "{same}");
    assert_eq!(same["created"], false, "{same}");
    assert_eq!(same["warnings"], json!([]), "{same}");

    // Another model and no thinking flag (not given: not a disagreement).
    let other = reopen(&mut c, &sb, &["--model", "other"]);
    assert_eq!(other["sessionId"], id.as_str(), "{other}");
    assert_eq!(other["created"], false, "{other}");
    let warnings = other["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{other}");
    let w = warnings[0].as_str().unwrap();
    assert!(w.ends_with("opened with: model not applied"), "{w}");
    assert!(!w.contains("thinking") && !w.contains("provider"), "{w}");

    // A print client through the daemon shows it on stderr.
    let script = fixture("hello.json");
    let socket = d.socket.to_str().unwrap();
    let run = sb.run(&scripted_args(
        &["-p", "--daemon", "--socket", socket, "--continue"],
        &script,
        &["--model", "other", "--max-turns", "3", "again"],
    ));
    assert_eq!(run.code, 0, "{run}");
    let warning = run
        .stderr
        .lines()
        .find(|l| l.starts_with("Warning:"))
        .unwrap_or_else(|| panic!("no warning: {run}"));
    assert!(
        warning.ends_with("opened with: model, maxTurns not applied"),
        "{run}"
    );
}
