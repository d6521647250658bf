//! `keel web`'s read-only server-sent events (`GET /events/SESSION`, issue 49 point 3): a
//! session's stream with `id: EPOCH/SEQ` on each event, and `Last-Event-ID` resuming after it
//! with no gap and no duplicate; the cookie and the Origin checked as everywhere.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::{json, Value};

use crate::common::daemon::{self, Daemon};
use crate::common::support::Sandbox;
use crate::web::Web;

/// One SSE message: its `id:`, `event:` and `data:` (parsed).
#[derive(Debug)]
struct Message {
    id: Option<String>,
    event: Option<String>,
    data: Value,
}

/// `GET /events/ID` (HTTP/1.0: the body ends with the connection, no chunks); the status and,
/// on 200, the messages up to the `session/event` of `until`.
fn events(w: &Web, id: &str, headers: &[(&str, &str)], until: &str) -> (u16, Vec<Message>) {
    let mut s = TcpStream::connect(("127.0.0.1", w.port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut req = format!("GET /events/{id} HTTP/1.0\r\nHost: {}\r\n", w.host());
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut r = BufReader::new(s);
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let status: u16 = line.split(' ').nth(1).unwrap().parse().unwrap();
    loop {
        line.clear();
        r.read_line(&mut line).unwrap();
        if line.trim_end().is_empty() {
            break;
        }
    }
    if status != 200 {
        return (status, Vec::new());
    }
    let mut out = Vec::new();
    let (mut msg_id, mut event) = (None, None);
    loop {
        line.clear();
        assert!(
            r.read_line(&mut line).unwrap() > 0,
            "the stream ended: {out:?}"
        );
        let l = line.trim_end_matches('\n');
        if let Some(v) = l.strip_prefix("id: ") {
            msg_id = Some(v.to_string());
        } else if let Some(v) = l.strip_prefix("event: ") {
            event = Some(v.to_string());
        } else if let Some(v) = l.strip_prefix("data: ") {
            let data: Value = serde_json::from_str(v).unwrap();
            let done = data["params"]["event"]["type"] == until;
            out.push(Message {
                id: msg_id.take(),
                event: event.take(),
                data,
            });
            if done {
                return (status, out);
            }
        }
    }
}

#[test]
fn a_session_streams_as_server_sent_events_and_last_event_id_resumes_after_it() {
    let sb = Sandbox::new();
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let w = Web::start(&sb, &d.socket);
    let cookie = w.cookie();
    let mut direct = d.client();
    let id = daemon::open(&mut direct, &sb, "hello.json", &[]);
    direct.call("session/attach", json!({"sessionId": id}));
    direct.call("prompt", json!({"sessionId": id, "message": "hi"}));
    let all = direct.events_until("agent_settled");

    // Without the cookie, or from another origin: nothing.
    assert_eq!(events(&w, &id, &[], "agent_settled").0, 401);
    let evil = [
        ("Cookie", cookie.as_str()),
        ("Origin", "http://evil.example"),
    ];
    assert_eq!(events(&w, &id, &evil, "agent_settled").0, 403);
    let (status, _) = events(&w, "no-such-session", &[("Cookie", &cookie)], "x");
    assert_eq!(status, 404);

    // From a cursor (the run's first event): the attach's answer, then every later event once,
    // each with its cursor as its id.
    let first = &all[0];
    let epoch = direct.call("daemon/status", json!({}))["result"]["sessions"][0]["epoch"]
        .as_str()
        .unwrap()
        .to_string();
    let from = format!("{epoch}/{}", first.0);
    let headers = [
        ("Cookie", cookie.as_str()),
        ("Last-Event-ID", from.as_str()),
    ];
    let (status, got) = events(&w, &id, &headers, "agent_settled");
    assert_eq!(status, 200);
    assert_eq!(got[0].event.as_deref(), Some("attach"), "{got:?}");
    assert_eq!(got[0].data["mode"], "replay", "{got:?}");
    let got: Vec<&Message> = got[1..]
        .iter()
        .filter(|m| m.data["method"] == "session/event")
        .collect();
    let want: Vec<(String, Value)> = all[1..]
        .iter()
        .map(|(seq, e)| (format!("{epoch}/{seq}"), e.clone()))
        .collect();
    let seen: Vec<(String, Value)> = got
        .iter()
        .map(|m| (m.id.clone().unwrap(), m.data["params"]["event"].clone()))
        .collect();
    assert_eq!(seen, want);
}
