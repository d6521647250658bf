//! Approval dialogs and `--approval-timeout` through the daemon: the timeout counts only while
//! no interactive client is attached. Time is measured with a "clock" session in the same
//! daemon that nobody watches: its three approvals time out one after the other, so when its
//! run settles at least three timeouts have passed, with no sleep. Every daemon a test starts
//! is killed by its guard, also when the test fails.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::daemon::{code, is_event, open_script, Conn, Daemon};
use crate::common::support::Sandbox;

/// The approval timeout of these tests' sessions, in seconds.
const TIMEOUT: &str = "0.3";

/// `go` asks to run one bash command, then answers; `tick` asks three times (each denied by
/// its timeout), then answers.
fn script(sb: &Sandbox) -> String {
    let call = |id: &str| {
        json!({"match": "^tick", "chunks": [
            {"toolCall": {"id": id, "name": "bash", "arguments": {"command": "echo tick"}}}
        ]})
    };
    let turns = json!({"turns": [
        {"match": "^go", "chunks": [
            {"text": "Cleaning."},
            {"toolCall": {"id": "call_go", "name": "bash", "arguments": {"command": "echo ran"}}}
        ]},
        {"match": "^go", "chunks": [{"text": "Finished."}]},
        call("tick_1"), call("tick_2"), call("tick_3"),
        {"match": "^tick", "chunks": [{"text": "Ticked."}]}
    ]});
    let path = sb.dir.path().join("ask.json");
    std::fs::write(&path, turns.to_string()).unwrap();
    path.display().to_string()
}

/// A session that asks for approvals, opened as `id` through `c`.
fn open_asking(c: &mut Conn, sb: &Sandbox, id: &str) {
    let flags = [
        "--permission",
        "ask",
        "--approval-timeout",
        TIMEOUT,
        "--session-id",
        id,
    ];
    assert_eq!(open_script(c, sb, &script(sb), &flags), id);
}

/// Whether a notification is the denial of dialog `call` by its timeout.
fn is_denial(call: &str) -> impl Fn(&Value) -> bool + '_ {
    move |v| {
        let e = &v["params"]["event"];
        e["method"] == "notify"
            && e["message"].as_str().is_some_and(|m| {
                m.contains(&format!("request {call} got no answer within {TIMEOUT} s"))
            })
    }
}

/// Waits until at least three approval timeouts have passed: a session nobody interactive
/// watches (`name`) asks three times in a row and each dialog is denied by its own timeout.
fn three_timeouts(d: &Daemon, sb: &Sandbox, name: &str) {
    let mut c = d.client();
    open_asking(&mut c, sb, name);
    c.call("session/attach", json!({"sessionId": name}));
    let r = c.call("prompt", json!({"sessionId": name, "message": "tick"}));
    assert_eq!(r["result"]["disposition"], "started", "{r}");
    let seen = c.notes_until(is_event("agent_settled"));
    for call in ["tick_1", "tick_2", "tick_3"] {
        assert!(
            seen.iter().any(is_denial(call)),
            "{call} timed out: {seen:?}"
        );
    }
}

/// An interactive client attached to session `w` whose approval dialog for `call_go` is open.
fn watched_dialog(d: &Daemon, sb: &Sandbox) -> Conn {
    let mut a = d.connect();
    a.hello(true);
    open_asking(&mut a, sb, "w");
    a.call("session/attach", json!({"sessionId": "w"}));
    a.call("prompt", json!({"sessionId": "w", "message": "go"}));
    let seen = a.events_until("extension_ui_request");
    let dialog = &seen.last().unwrap().1;
    assert_eq!(
        (&dialog["method"], &dialog["id"]),
        (&json!("confirm"), &json!("call_go"))
    );
    a
}

/// A non-interactive client attached to `w`; the dialogs its snapshot lists as open.
fn probe(d: &Daemon) -> (Conn, Vec<Value>) {
    let mut p = d.client();
    let r = p.call("session/attach", json!({"sessionId": "w"}));
    let pending = r["result"]["snapshot"]["pendingUi"]
        .as_array()
        .unwrap()
        .clone();
    let ids = pending.iter().map(|u| u["id"].clone()).collect();
    (p, ids)
}

/// The tool result of `call_go` and the run's outcome, from events read until it settled.
fn outcome(events: &[(u64, Value)]) -> (Value, Value) {
    let end = events
        .iter()
        .find(|(_, e)| e["type"] == "tool_execution_end" && e["toolCallId"] == "call_go")
        .unwrap_or_else(|| panic!("no result for call_go: {events:?}"));
    let settled = &events.last().unwrap().1;
    (end.1["isError"].clone(), settled["outcome"].clone())
}

#[test]
fn an_approval_waits_past_its_timeout_while_an_interactive_client_is_attached() {
    let sb = Sandbox::new();
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let mut a = watched_dialog(&d, &sb);
    three_timeouts(&d, &sb, "clock");
    let (_p, open) = probe(&d);
    assert_eq!(open, [json!("call_go")], "still open after three timeouts");
    // The dialog can still be answered, and the tool runs.
    let r = a.call(
        "extension_ui_response",
        json!({"sessionId": "w", "id": "call_go", "confirmed": true}),
    );
    assert_eq!(r["result"], json!({}), "{r}");
    let events = a.events_until("agent_settled");
    assert!(
        !events.iter().any(|(_, e)| e["method"] == "notify"),
        "{events:?}"
    );
    assert_eq!(outcome(&events), (json!(false), json!("completed")));
}

#[test]
fn the_last_interactive_client_detaching_starts_the_full_timeout_and_the_run_goes_on() {
    let sb = Sandbox::new();
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let mut a = watched_dialog(&d, &sb);
    // A second interactive client comes and goes: one is still attached, so nothing changes.
    let mut b = d.connect();
    b.hello(true);
    b.call("session/attach", json!({"sessionId": "w"}));
    b.call("session/detach", json!({"sessionId": "w"}));
    // Longer than the timeout since the dialog opened, so a timer counting from then would
    // deny it the moment the last client leaves.
    three_timeouts(&d, &sb, "clock");
    let (mut p, open) = probe(&d);
    assert_eq!(open, [json!("call_go")]);
    let left = Instant::now();
    let r = a.call("session/detach", json!({"sessionId": "w"}));
    assert_eq!(r["result"], json!({}), "{r}");
    let seen = p.notes_until(is_denial("call_go"));
    let waited = left.elapsed();
    assert!(
        waited >= Duration::from_secs_f64(0.3),
        "the full timeout counts from the detach, not from the dialog: {waited:?}"
    );
    assert!(!seen.iter().any(is_event("agent_settled")));
    let events = p.events_until("agent_settled");
    assert_eq!(outcome(&events), (json!(true), json!("completed")));
    let r = a.call(
        "extension_ui_response",
        json!({"sessionId": "w", "id": "call_go", "confirmed": true}),
    );
    assert_eq!(code(&r), -32014, "denied already: {r}");
}

#[test]
fn attaching_again_before_the_timeout_fires_cancels_it_and_dropping_the_connection_restarts_it() {
    let sb = Sandbox::new();
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let mut a = watched_dialog(&d, &sb);
    // Detach and attach again in one write: the restarted timer is cancelled at once.
    let detach = json!({"jsonrpc": "2.0", "id": 1, "method": "session/detach",
                        "params": {"sessionId": "w"}});
    let attach = json!({"jsonrpc": "2.0", "id": 2, "method": "session/attach",
                        "params": {"sessionId": "w"}});
    a.send_raw(&format!("{detach}\n{attach}"));
    a.notes_until(|v| v["id"] == 2);
    three_timeouts(&d, &sb, "clock");
    let (mut p, open) = probe(&d);
    assert_eq!(
        open,
        [json!("call_go")],
        "the restarted timer was cancelled"
    );
    // The interactive client's connection drops: the timer starts again and denies the call.
    let dropped = Instant::now();
    drop(a);
    p.notes_until(is_denial("call_go"));
    assert!(dropped.elapsed() >= Duration::from_secs_f64(0.3));
    let events = p.events_until("agent_settled");
    assert_eq!(outcome(&events), (json!(true), json!("completed")));
}
