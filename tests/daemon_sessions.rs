//! Session changes through the daemon (`new_session`, `switch_session`, `fork`, `clone`): the
//! live session of a handle changes for every attached client (`session/replaced`, a new
//! epoch, the old id no longer live), a switch to a session live elsewhere is refused and
//! changes nothing, and `keel --mode rpc --daemon` follows the change byte for byte. Every
//! daemon a test starts is killed by its guard, also when the test fails.

use serde_json::{json, Value};

use crate::common::daemon::{
    code, here_and_through_a_daemon, is_event, is_note, open, Conn, Daemon,
};
use crate::common::rpc::Rpc;
use crate::common::support::{fixture, root, scripted_args, Sandbox};

/// The notifications `c` got up to `session/replaced` (already read or still to come): that one.
fn replaced(c: &mut Conn) -> Value {
    let notes = c.notes_until(is_note("session/replaced"));
    notes.last().unwrap()["params"].clone()
}

/// The `session/event` params a client reads until the run settles.
fn run_events(c: &mut Conn) -> Vec<Value> {
    c.notes_until(is_event("agent_settled"))
        .into_iter()
        .filter(|v| v["method"] == "session/event")
        .map(|v| v["params"].clone())
        .collect()
}

/// Two clients attached to a session opened with `--session-id id`.
fn two_clients(d: &Daemon, sb: &Sandbox, id: &str) -> (Conn, Conn) {
    let (mut a, mut b) = (d.connect(), d.connect());
    a.hello(true);
    b.hello(true);
    assert_eq!(open(&mut a, sb, "hello.json", &["--session-id", id]), id);
    for c in [&mut a, &mut b] {
        let r = c.call("session/attach", json!({"sessionId": id}));
        assert_eq!(r["result"]["mode"], "snapshot", "{r}");
    }
    (a, b)
}

/// Runs one prompt in `id` and waits until both clients saw it settle; their events.
fn prompt(a: &mut Conn, b: &mut Conn, id: &str, text: &str) -> Vec<Value> {
    let r = a.call("prompt", json!({"sessionId": id, "message": text}));
    assert_eq!(r["result"]["disposition"], "started", "{r}");
    let seen = run_events(a);
    assert_eq!(run_events(b), seen, "both clients see one stream");
    seen
}

/// The header (first line) of a session file.
fn header(path: &str) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(text.lines().next().unwrap()).unwrap()
}

#[test]
fn new_session_moves_every_attached_client_to_the_new_session() {
    let sb = Sandbox::new();
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let (mut a, mut b) = two_clients(&d, &sb, "old");
    let first = prompt(&mut a, &mut b, "old", "one");
    let head = first.last().unwrap()["seq"].as_u64().unwrap();
    let before = a.sessions()[0].clone();
    let r = a.call("new_session", json!({"sessionId": "old"}));
    assert_eq!(r["result"], json!({"cancelled": false}), "{r}");
    // The caller was told before the answer: it is among the lines read before the reply.
    let told = a
        .notes
        .iter()
        .find(|n| n["method"] == "session/replaced")
        .unwrap_or_else(|| panic!("no session/replaced before the answer: {:?}", a.notes))
        .clone();
    assert_eq!(
        replaced(&mut b),
        told["params"],
        "the other client is told too"
    );
    let told = &told["params"];
    let new = told["newSessionId"].as_str().unwrap().to_string();
    assert_eq!(told["sessionId"], "old");
    assert_ne!(new, "old");
    assert_ne!(told["epoch"], before["epoch"], "a new epoch");
    assert_eq!(told["seq"], head, "seq goes on from the head");
    // The old id is not live any more, for either client.
    for c in [&mut a, &mut b] {
        for (method, params) in [
            ("get_state", json!({"sessionId": "old"})),
            ("session/attach", json!({"sessionId": "old"})),
        ] {
            let r = c.call(method, params);
            assert_eq!(code(&r), -32012, "{method}: {r}");
        }
    }
    let sessions = b.sessions();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    let now = &sessions[0];
    assert_eq!(now["sessionId"], new.as_str());
    assert_eq!(now["epoch"], told["epoch"]);
    assert_eq!(now["cwd"], sb.work().display().to_string());
    let file = now["sessionFile"].as_str().unwrap().to_string();
    assert_ne!(file, before["sessionFile"].as_str().unwrap());
    assert!(file.ends_with(&format!("_{new}.jsonl")), "{file}");
    let state = b.call("get_state", json!({"sessionId": new}))["result"].clone();
    assert_eq!(
        (&state["sessionId"], &state["messageCount"]),
        (&json!(new), &json!(0))
    );
    // Later events carry the new id and the new epoch, numbered on from the head.
    let second = prompt(&mut b, &mut a, &new, "two");
    let seqs: Vec<u64> = second.iter().map(|p| p["seq"].as_u64().unwrap()).collect();
    assert_eq!(
        seqs,
        (head + 1..=head + seqs.len() as u64).collect::<Vec<_>>()
    );
    for p in &second {
        assert_eq!(
            (&p["sessionId"], &p["epoch"]),
            (&json!(new), &told["epoch"])
        );
    }
    assert!(
        std::path::Path::new(&file).is_file(),
        "the new file is written"
    );
    // A cursor of the old epoch gets a snapshot of the new session; one of the new epoch a
    // replay.
    let mut c = d.client();
    let cursor = json!({"epoch": before["epoch"], "seq": head});
    let r = c.call(
        "session/attach",
        json!({"sessionId": new, "cursor": cursor}),
    );
    assert_eq!(r["result"]["mode"], "snapshot", "{r}");
    assert_eq!(r["result"]["snapshot"]["header"]["id"], new.as_str());
    let cursor = json!({"epoch": told["epoch"], "seq": head});
    let r = c.call(
        "session/attach",
        json!({"sessionId": new, "cursor": cursor}),
    );
    assert_eq!(r["result"]["mode"], "replay", "{r}");
    assert_eq!(run_events(&mut c), second);
    // The old session opens from its file again, as a separate live session.
    let script = fixture("hello.json");
    let args = scripted_args(&[], &script, &["--resume", "old"]);
    let r = c.call(
        "session/open",
        json!({"cwd": sb.work(), "spec": crate::common::daemon::spec(&args)}),
    );
    assert_eq!(
        (&r["result"]["sessionId"], &r["result"]["created"]),
        (&json!("old"), &json!(true)),
        "{r}"
    );
    assert_eq!(r["result"]["sessionFile"], before["sessionFile"]);
    let messages =
        c.call("get_messages", json!({"sessionId": "old"}))["result"]["messages"].clone();
    assert_eq!(messages.as_array().unwrap().len(), 2, "{messages}");
    assert_eq!(c.sessions().len(), 2);
}

#[test]
fn clone_and_fork_through_the_daemon_write_child_files_and_move_the_clients() {
    let sb = Sandbox::new();
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let (mut a, mut b) = two_clients(&d, &sb, "base");
    prompt(&mut a, &mut b, "base", "one");
    let base_file = a.sessions()[0]["sessionFile"].as_str().unwrap().to_string();
    let base_messages = a.call("get_messages", json!({"sessionId": "base"}))["result"].clone();
    // clone: the whole branch, in a new file whose parent is the base file.
    let r = b.call("clone", json!({"sessionId": "base"}));
    assert_eq!(r["result"], json!({"cancelled": false}), "{r}");
    let told = replaced(&mut a);
    assert_eq!(replaced(&mut b), told);
    assert_eq!(told["sessionId"], "base");
    let clone = told["newSessionId"].as_str().unwrap().to_string();
    let sessions = a.sessions();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    assert_eq!(sessions[0]["sessionId"], clone.as_str());
    let clone_file = sessions[0]["sessionFile"].as_str().unwrap().to_string();
    let h = header(&clone_file);
    assert_eq!(
        (&h["id"], &h["parentSession"]),
        (&json!(clone), &json!(base_file))
    );
    let messages = a.call("get_messages", json!({"sessionId": clone}))["result"].clone();
    assert_eq!(messages, base_messages, "the clone holds the whole branch");
    // fork at the user message: the branch before it, and the message's text.
    let forks = a.call("get_fork_messages", json!({"sessionId": clone}))["result"].clone();
    let entry = forks["messages"][0]["entryId"]
        .as_str()
        .unwrap()
        .to_string();
    let r = a.call("fork", json!({"sessionId": clone, "entryId": entry}));
    assert_eq!(
        r["result"],
        json!({"text": "one", "cancelled": false}),
        "{r}"
    );
    let told2 = replaced(&mut b);
    assert_eq!(replaced(&mut a), told2);
    assert_eq!(told2["sessionId"], clone.as_str());
    let fork = told2["newSessionId"].as_str().unwrap().to_string();
    assert!(
        ![json!(told["epoch"]), json!(null)].contains(&told2["epoch"]),
        "each change starts an epoch: {told} {told2}"
    );
    let sessions = b.sessions();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    assert_eq!(sessions[0]["sessionId"], fork.as_str());
    let fork_file = sessions[0]["sessionFile"].as_str().unwrap().to_string();
    let h = header(&fork_file);
    assert_eq!(
        (&h["id"], &h["parentSession"]),
        (&json!(fork), &json!(clone_file))
    );
    let messages = b.call("get_messages", json!({"sessionId": fork}))["result"]["messages"].clone();
    assert_eq!(messages, json!([]), "the fork ends before the user message");
    for gone in ["base", clone.as_str()] {
        assert_eq!(
            code(&b.call("get_state", json!({"sessionId": gone}))),
            -32012
        );
    }
}

#[test]
fn switch_session_to_a_file_or_an_id_loads_it_in_a_new_epoch() {
    let sb = Sandbox::new();
    std::fs::copy(
        root().join("fixtures/sessions/valid.jsonl"),
        sb.work().join("other.jsonl"),
    )
    .unwrap();
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let (mut a, mut b) = two_clients(&d, &sb, "here");
    prompt(&mut a, &mut b, "here", "one");
    let epoch0 = a.sessions()[0]["epoch"].clone();
    let r = a.call(
        "switch_session",
        json!({"sessionId": "here", "sessionPath": "other.jsonl"}),
    );
    assert_eq!(r["result"], json!({"cancelled": false}), "{r}");
    let told = replaced(&mut b);
    assert_eq!(replaced(&mut a), told);
    let other = "01a22a52-7c1d-7a3e-9f10-3b5c2d4e6f70"; // the fixture's id
    assert_eq!(
        (&told["sessionId"], &told["newSessionId"]),
        (&json!("here"), &json!(other))
    );
    let sessions = b.sessions();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    assert_eq!(sessions[0]["sessionId"], other);
    assert_eq!(
        sessions[0]["sessionFile"],
        sb.work().join("other.jsonl").display().to_string()
    );
    let messages =
        b.call("get_messages", json!({"sessionId": other}))["result"]["messages"].clone();
    let first_user = messages
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "user")
        .unwrap();
    assert_eq!(first_user["content"][0]["text"], "list the files");
    // Back by id: the first session is not live any more, so it loads from its file.
    let r = b.call(
        "switch_session",
        json!({"sessionId": other, "sessionPath": "here"}),
    );
    assert_eq!(r["result"], json!({"cancelled": false}), "{r}");
    let back = replaced(&mut a);
    assert_eq!(replaced(&mut b), back);
    assert_eq!(
        (&back["sessionId"], &back["newSessionId"]),
        (&json!(other), &json!("here"))
    );
    let epochs = [&epoch0, &told["epoch"], &back["epoch"]];
    assert!(
        epochs[0] != epochs[1] && epochs[1] != epochs[2] && epochs[0] != epochs[2],
        "{epochs:?}"
    );
    let state = a.call("get_state", json!({"sessionId": "here"}))["result"].clone();
    assert_eq!(state["messageCount"], 2, "{state}");
}

#[test]
fn switch_session_to_a_session_live_elsewhere_is_refused_and_changes_nothing() {
    let sb = Sandbox::new();
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let (mut a, mut b) = two_clients(&d, &sb, "one");
    prompt(&mut a, &mut b, "one", "first");
    // Session two is live in the daemon, with a file.
    let mut c = d.client();
    open(&mut c, &sb, "hello.json", &["--session-id", "two"]);
    c.call("session/attach", json!({"sessionId": "two"}));
    c.call("prompt", json!({"sessionId": "two", "message": "second"}));
    c.events_until("agent_settled");
    let mut before = a.sessions();
    before.sort_by_key(|s| s["sessionId"].as_str().unwrap().to_string());
    let two_file = before[1]["sessionFile"].as_str().unwrap().to_string();
    for path in [two_file.as_str(), "two"] {
        let r = a.call(
            "switch_session",
            json!({"sessionId": "one", "sessionPath": path}),
        );
        assert_eq!(code(&r), -32013, "{path}: {r}");
        let message = r["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("session two") && message.contains("live in this daemon"),
            "{message}"
        );
        assert_eq!(r["error"]["data"]["sessionId"], "two");
    }
    // Held by another keel process: the file lock refuses it, with the store's text.
    let script = fixture("hello.json");
    let mut other = Rpc::start(&sb, &scripted_args(&[], &script, &["--session-id", "held"]));
    other.send_bytes(b"{\"id\":\"p\",\"type\":\"prompt\",\"message\":\"mine\"}\n");
    other.wait(&json!({"type": "agent_settled"}));
    let held = sb
        .session_files()
        .into_iter()
        .find(|f| f.display().to_string().ends_with("_held.jsonl"))
        .unwrap();
    let r = a.call(
        "switch_session",
        json!({"sessionId": "one", "sessionPath": held}),
    );
    assert_eq!(code(&r), -32000, "{r}");
    let want = format!(
        "session {} is in use by another keel process",
        held.display()
    );
    assert_eq!(r["error"]["message"], want.as_str());
    let (_, stderr, exit) = other.finish();
    assert_eq!(exit, 0, "{stderr}");
    // Nothing changed: the same sessions, epochs and heads, and no client was told anything.
    let mut after = b.sessions();
    after.sort_by_key(|s| s["sessionId"].as_str().unwrap().to_string());
    assert_eq!(after, before);
    let state = b.call("get_state", json!({"sessionId": "one"}))["result"].clone();
    assert_eq!(state["sessionId"], "one");
    assert_eq!(state["messageCount"], 2);
    for c in [&a, &b] {
        assert!(
            c.notes.iter().all(|n| n["method"] != "session/replaced"),
            "{:?}",
            c.notes
        );
    }
}

#[test]
fn rpc_mode_through_the_daemon_follows_session_changes_byte_for_byte() {
    // A line the client cannot parse keeps its in-process place right after a session change
    // (it used to be written before the change's answer).
    let lines = [
        r#"{"id":"s0","type":"get_state"}"#,
        r#"{"id":"n","type":"new_session"}"#,
        "not json",
        r#"{"id":"s1","type":"get_state"}"#,
        r#"{"id":"w","type":"switch_session","sessionPath":"other.jsonl"}"#,
        r#"{"id":"s2","type":"get_state"}"#,
        r#"{"id":"f","type":"fork","entryId":"ca620c5e"}"#,
        r#"{"id":"s3","type":"get_state"}"#,
        r#"{"id":"c","type":"clone"}"#,
        r#"{"id":"s4","type":"get_state"}"#,
        r#"{"id":"e","type":"get_entries"}"#,
        r#"{"id":"p","type":"prompt","message":"hi"}"#,
    ];
    let input = lines.join("\n") + "\n";
    let script = fixture("hello.json");
    let base = scripted_args(&["--mode", "rpc"], &script, &["--session-id", "same"]);
    let sandbox = || {
        let sb = Sandbox::new();
        std::fs::copy(
            root().join("fixtures/sessions/valid.jsonl"),
            sb.work().join("other.jsonl"),
        )
        .unwrap();
        sb
    };
    let (here, there) = (sandbox(), sandbox());
    let (local, remote, d) = here_and_through_a_daemon(&here, &there, &base, &input);
    assert_eq!(
        local.shown_stdout(),
        remote.shown_stdout(),
        "the daemon run's stderr: {}",
        remote.stderr
    );
    // The script did what it says, so the comparison covers each change.
    let ids: Vec<String> = local
        .stdout_lines()
        .iter()
        .filter(|v| v["command"] == "get_state")
        .map(|v| v["data"]["sessionId"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids.len(), 5, "{local}");
    assert_eq!(ids[0], "same");
    assert_eq!(ids[2], "01a22a52-7c1d-7a3e-9f10-3b5c2d4e6f70");
    for (i, id) in ids.iter().enumerate() {
        assert!(!ids[..i].contains(id), "five sessions: {ids:?}");
    }
    let stdout = &remote.stdout;
    let at = |needle: &str| {
        stdout
            .find(needle)
            .unwrap_or_else(|| panic!("{needle}: {remote}"))
    };
    assert!(at(r#""id":"n","type":"response""#) < at("Failed to parse"));
    assert!(at("Failed to parse") < at(r#""id":"s1""#));
    assert!(
        stdout.contains(r#""command":"prompt","success":true"#),
        "{remote}"
    );
    // The bridge's session is the last one, live in the daemon.
    let mut c = d.client();
    let sessions = c.sessions();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    assert_eq!(sessions[0]["sessionId"], ids[4].as_str());
}

#[test]
fn a_client_dropped_for_lagging_before_a_change_is_told_the_id_it_can_use() {
    // Regression: daemon/lagged named the old id, under which the session is not live any
    // more, so the client could not re-attach.
    let sb = Sandbox::new();
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    // The slow client reads nothing while 25,000 deltas stream and the session changes; its
    // connection is still blocked writing to it when the change happens.
    let (mut fast, mut slow, _) = crate::common::daemon::flood(&d, &sb, &["--session-id", "old"]);
    fast.events_until("agent_settled");
    fast.call("new_session", json!({"sessionId": "old"}));
    let new = replaced(&mut fast)["newSessionId"].clone();
    let mut last = None;
    while let Some(v) = slow.recv() {
        last = Some(v);
    }
    let last = last.unwrap();
    assert_eq!(last["method"], "daemon/lagged", "{last}");
    assert_eq!(last["params"]["sessionId"], new);
    let mut again = d.client();
    let r = again.call("session/attach", json!({"sessionId": new}));
    assert_eq!(r["result"]["mode"], "snapshot", "{r}");
}

#[test]
fn session_close_ends_a_session_nothing_else_uses_and_its_file_opens_again() {
    let sb = Sandbox::new();
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let (mut a, mut b) = two_clients(&d, &sb, "shut");
    prompt(&mut a, &mut b, "shut", "hi");
    // Another client still shows it: refused, and nothing changes.
    let r = a.call("session/close", json!({"sessionId": "shut"}));
    assert_eq!(code(&r), -32013, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("1 other client"),
        "{r}"
    );
    b.call("session/detach", json!({"sessionId": "shut"}));
    // A run going: refused too.
    let mut hang = d.client();
    let busy = open(&mut hang, &sb, "hang.json", &["--session-id", "busy"]);
    let r = hang.call("prompt", json!({"sessionId": busy, "message": "work"}));
    assert!(r.get("result").is_some(), "{r}");
    let r = hang.call("session/close", json!({"sessionId": "busy"}));
    assert_eq!(code(&r), -32013, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("a run is active"),
        "{r}"
    );
    // The last client closes it: saved, and no longer live.
    let file = a.call("get_state", json!({"sessionId": "shut"}))["result"]["sessionFile"]
        .as_str()
        .unwrap()
        .to_string();
    let r = a.call("session/close", json!({"sessionId": "shut"}));
    assert_eq!(r["result"], json!({}), "{r}");
    let live: Vec<Value> = a.sessions();
    assert!(live.iter().all(|s| s["sessionId"] != "shut"), "{live:?}");
    let r = a.call("get_state", json!({"sessionId": "shut"}));
    assert_eq!(code(&r), -32012, "{r}");
    let r = a.call("session/close", json!({"sessionId": "shut"}));
    assert_eq!(code(&r), -32012, "{r}");
    assert!(std::fs::read_to_string(&file).unwrap().contains("\"hi\""));
    // Its file is free again: the daemon opens it anew, with its history.
    let again = open(&mut a, &sb, "hello.json", &["--session", &file]);
    assert_eq!(again, "shut");
    let r = a.call("get_messages", json!({"sessionId": "shut"}));
    assert_eq!(r["result"]["messages"].as_array().unwrap().len(), 2, "{r}");
    hang.call("abort", json!({"sessionId": "busy"}));
}
