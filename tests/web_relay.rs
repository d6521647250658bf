//! `keel web`'s WebSocket against a real daemon (issue 49, point 3): the page speaks the
//! daemon's own protocol through it, frame for line, both ways. A prompt sent over the
//! WebSocket streams its events back; a tab that goes away mid-run and comes back with its
//! cursor gets exactly the events it missed (no gap, no duplicate), the same events a client
//! attached to the daemon's socket the whole time saw.

use serde_json::{json, Value};

use crate::common::daemon::{self, Daemon};
use crate::common::support::Sandbox;
use crate::web::{Web, Ws};

fn hello(tab: &mut Ws) {
    let mut notes = Vec::new();
    let r = tab.call(
        "daemon/hello",
        json!({"protocolVersion": 2, "client": {"name": "web-test", "version": "0"}, "interactive": true}),
        &mut notes,
    );
    assert!(r.get("result").is_some(), "{r}");
}

/// `session/event` frames (starting with `notes`) until one of `kind`: `(seq, event)` each.
fn events_until(tab: &mut Ws, notes: &mut Vec<Value>, kind: &str) -> Vec<(u64, Value)> {
    let mut out = Vec::new();
    let mut pending = std::mem::take(notes).into_iter();
    loop {
        let v = match pending.next() {
            Some(v) => v,
            None => tab.recv().expect("the relay closed before the event came"),
        };
        if v["method"] != "session/event" {
            continue;
        }
        let seq = v["params"]["seq"].as_u64().unwrap();
        let event = v["params"]["event"].clone();
        let done = event["type"] == kind;
        out.push((seq, event));
        if done {
            notes.extend(pending);
            return out;
        }
    }
}

#[test]
fn a_prompt_streams_over_the_websocket_and_a_tab_that_comes_back_resumes_with_no_gap() {
    let sb = Sandbox::new();
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let w = Web::start(&sb, &d.socket);
    let cookie = w.cookie();
    let (script, fifo) = daemon::waiting_run(&sb);
    // A client on the daemon's socket, attached the whole time: what every client should see.
    let mut direct = d.client();
    let id = daemon::open_script(&mut direct, &sb, script.to_str().unwrap(), &[]);
    direct.call("session/attach", json!({"sessionId": id}));

    let mut tab = w.websocket(&cookie);
    hello(&mut tab);
    let mut notes = Vec::new();
    let a = tab.call("session/attach", json!({"sessionId": id}), &mut notes);
    assert_eq!(a["result"]["mode"], "snapshot", "{a}");
    let epoch = a["result"]["epoch"].clone();
    let p = tab.call(
        "prompt",
        json!({"sessionId": id, "message": "go"}),
        &mut notes,
    );
    assert_eq!(p["result"]["disposition"], "started", "{p}");
    // The run waits on the FIFO: the tab goes away mid-run (a phone put to sleep).
    let before = events_until(&mut tab, &mut notes, "tool_execution_start");
    let last = before.last().unwrap().0;
    drop(tab);
    std::fs::write(&fifo, "go\n").unwrap();
    let all = direct.events_until("agent_settled");

    // It comes back with its cursor: the events after it, each once.
    let mut tab = w.websocket(&cookie);
    hello(&mut tab);
    let mut notes = Vec::new();
    let cursor = json!({"epoch": epoch, "seq": last});
    let a = tab.call(
        "session/attach",
        json!({"sessionId": id, "cursor": cursor}),
        &mut notes,
    );
    assert_eq!(a["result"]["mode"], "replay", "{a}");
    let after = events_until(&mut tab, &mut notes, "agent_settled");
    let seqs = |e: &[(u64, Value)]| e.iter().map(|(s, _)| *s).collect::<Vec<_>>();
    assert_eq!(
        seqs(&after).first(),
        Some(&(last + 1)),
        "{:?}",
        seqs(&after)
    );
    let mut seen = before.clone();
    seen.extend(after);
    assert_eq!(
        seqs(&seen),
        (1..=seqs(&all).len() as u64).collect::<Vec<_>>()
    );
    assert_eq!(seen, all, "the tab saw what the socket's client saw");
    let text: String = all
        .iter()
        .filter(|(_, e)| e["type"] == "message_update")
        .filter_map(|(_, e)| e["assistantMessageEvent"]["delta"].as_str())
        .collect();
    assert!(text.contains("all done"), "{text}");
}

#[test]
fn frames_are_relayed_as_they_are_and_one_that_is_not_one_line_closes_the_socket() {
    let sb = Sandbox::new();
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let w = Web::start(&sb, &d.socket);
    let cookie = w.cookie();
    let mut tab = w.websocket(&cookie);
    hello(&mut tab);
    // The daemon's own answer to what it cannot parse, not the relay's.
    tab.ws
        .send(tungstenite::Message::text("{not json"))
        .unwrap();
    let v = tab.recv().expect("an answer");
    assert_eq!(v["error"]["code"], -32700, "{v}");
    let mut notes = Vec::new();
    let r = tab.call("ping", json!({}), &mut notes);
    assert_eq!(r["result"], json!({}), "{r}");
    // Two lines in one message would be two requests to the daemon: refused, closed (1003).
    tab.ws
        .send(tungstenite::Message::text(
            "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"ping\"}\n{}",
        ))
        .unwrap();
    loop {
        match tab.ws.read() {
            Ok(tungstenite::Message::Close(Some(frame))) => {
                assert_eq!(u16::from(frame.code), 1003, "{frame:?}");
                break;
            }
            Ok(tungstenite::Message::Text(t)) => panic!("relayed: {t}"),
            Ok(_) => {}
            Err(e) => panic!("closed without a close frame: {e}"),
        }
    }
}
