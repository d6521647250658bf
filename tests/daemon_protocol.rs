//! Protocol v1 as declared in `keel::wire::protocol`, checked against a real daemon: raw
//! request lines go over the socket, and every reply (and notification) must decode into its
//! declared Rust type and encode back to exactly the bytes the daemon sent. A field renamed,
//! left out or added on one side only fails here, one test per method family.

use std::io::BufRead;

use keel::wire::protocol::daemon::{self, HelloParams};
use keel::wire::protocol::notify::{Notify, SessionEvent, Shutdown};
use keel::wire::protocol::session::{self, AttachMode};
use keel::wire::protocol::{schedule, Method, Notification};
use serde_json::json;
use serde_json::value::RawValue;

use crate::common::daemon::{Conn, Daemon};
use crate::common::support::{fixture, scripted_args, Sandbox};

/// The next line the daemon wrote, as sent (without its LF).
fn line(c: &mut Conn) -> String {
    let mut line = String::new();
    assert!(c.r.read_line(&mut line).unwrap() > 0, "the daemon closed");
    line.trim_end_matches('\n').to_string()
}

/// Sends request `id` of `method` with `params` (JSON text) and returns the raw response
/// line; notifications read meanwhile are returned too, raw.
fn call_raw(c: &mut Conn, id: u64, method: &str, params: &str) -> (String, Vec<String>) {
    c.send_raw(&format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{params}}}"#
    ));
    let head = format!(r#"{{"jsonrpc":"2.0","id":{id},"#);
    let mut notes = Vec::new();
    loop {
        let l = line(c);
        if l.starts_with(&head) {
            return (l, notes);
        }
        notes.push(l);
    }
}

/// The `result` of a response line, as its text.
fn result_text(response: &str) -> String {
    #[derive(serde::Deserialize)]
    struct Response<'a> {
        #[serde(borrow)]
        result: Option<&'a RawValue>,
    }
    let r: Response = serde_json::from_str(response).unwrap();
    r.result
        .unwrap_or_else(|| panic!("not a result: {response}"))
        .get()
        .to_string()
}

/// Calls `M` with raw `params` and checks that its result decodes as `M::Result` and encodes
/// back to the same bytes; the typed result.
fn call<M: Method>(c: &mut Conn, id: u64, params: &str) -> M::Result {
    let (response, _) = call_raw(c, id, M::NAME, params);
    round_trip::<M>(&response)
}

fn round_trip<M: Method>(response: &str) -> M::Result {
    let text = result_text(response);
    let typed: M::Result = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} result does not decode: {e}\n{text}", M::NAME));
    let again = serde_json::to_string(&typed).unwrap();
    assert_eq!(
        again,
        text,
        "{} result: the typed value encodes other bytes",
        M::NAME
    );
    typed
}

/// The wire names of a JSON value, in order, `depth` objects deep: `{a,b{c,d},e[{f}]}`
/// (an array shows its first item). The contract's field names and order, independent of the
/// Rust types: a rename broken on the types (both sides alike) fails here.
fn shape(text: &str, depth: usize) -> String {
    fn walk(v: &serde_json::Value, depth: usize, out: &mut String) {
        match v {
            serde_json::Value::Object(m) if depth > 0 => {
                out.push('{');
                for (i, (k, v)) in m.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(k);
                    walk(v, depth - 1, out);
                }
                out.push('}');
            }
            serde_json::Value::Array(a) if depth > 0 => {
                out.push('[');
                if let Some(first) = a.first() {
                    walk(first, depth, out);
                }
                out.push(']');
            }
            _ => {}
        }
    }
    let mut out = String::new();
    walk(&serde_json::from_str(text).unwrap(), depth, &mut out);
    out
}

/// [`call`], and the result's [`shape`] is `want`.
fn call_shaped<M: Method>(
    c: &mut Conn,
    id: u64,
    params: &str,
    depth: usize,
    want: &str,
) -> M::Result {
    let (response, _) = call_raw(c, id, M::NAME, params);
    assert_eq!(
        shape(&result_text(&response), depth),
        want,
        "{} result",
        M::NAME
    );
    round_trip::<M>(&response)
}

/// A notification line decodes as its declared type and encodes back to the same line.
fn note_round_trip(raw: &str) -> Notification {
    #[derive(serde::Deserialize)]
    struct Note<'a> {
        method: String,
        #[serde(borrow)]
        params: Option<&'a RawValue>,
    }
    let n: Note = serde_json::from_str(raw).unwrap();
    let typed = Notification::decode(&n.method, n.params)
        .unwrap_or_else(|| panic!("undeclared notification {raw}"))
        .unwrap_or_else(|e| panic!("{}: {raw}", e.message));
    let again = typed.line().unwrap();
    assert_eq!(again.trim_end(), raw, "{}: other bytes", n.method);
    typed
}

fn hello(c: &mut Conn) -> daemon::HelloResult {
    let params =
        r#"{"protocolVersion":2,"client":{"name":"keel","version":"0"},"interactive":true}"#;
    // What the client sends is the same type, and the same bytes.
    let typed: HelloParams = serde_json::from_str(params).unwrap();
    assert_eq!(serde_json::to_string(&typed).unwrap(), params);
    let want = "{protocolVersion,daemon{version,pid,startedAt,keelHome,socket}}";
    call_shaped::<daemon::Hello>(c, 1, params, 2, want)
}

fn open_params(sb: &Sandbox, extra: &[&str]) -> String {
    let mut args = vec!["--provider".to_string(), "scripted".into()];
    args.extend(["--script".into(), fixture("hello.json")]);
    args.extend(extra.iter().map(|s| s.to_string()));
    let params = json!({"cwd": sb.work(), "spec": crate::common::daemon::spec(&args), "env": {"KEEL_TEST_SEED": "7"},
                        "headless": false});
    let text = params.to_string();
    let typed: session::OpenParams = serde_json::from_str(&text).unwrap();
    assert_eq!(serde_json::to_string(&typed).unwrap(), text, "open params");
    text
}

#[test]
fn hello_ping_and_their_errors_are_the_declared_types() {
    let sb = Sandbox::new();
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let mut c = d.connect();
    let h = hello(&mut c);
    assert_eq!(h.protocol_version, 2);
    assert_eq!(h.daemon.socket, d.socket.display().to_string());
    assert_eq!(h.daemon.pid as i32, d.pid());
    call::<daemon::Ping>(&mut c, 2, "{}");
    // ping ignores what it is given, as it always has.
    call::<daemon::Ping>(&mut c, 3, "[1]");
    let (again, _) = call_raw(&mut c, 4, daemon::Hello::NAME, "{}");
    assert_eq!(
        again,
        r#"{"jsonrpc":"2.0","id":4,"error":{"code":-32600,"message":"daemon/hello was already sent on this connection"}}"#
    );
    let (unknown, _) = call_raw(&mut c, 5, "no/such", "{}");
    assert_eq!(
        unknown,
        r#"{"jsonrpc":"2.0","id":5,"error":{"code":-32601,"message":"unknown method no/such"}}"#
    );
    let (bad, _) = call_raw(&mut c, 6, daemon::Stop::NAME, r#"{"force":"yes"}"#);
    assert_eq!(
        bad,
        r#"{"jsonrpc":"2.0","id":6,"error":{"code":-32602,"message":"Invalid params: `force`: invalid type: string \"yes\", expected a boolean"}}"#
    );
}

#[test]
fn session_open_attach_detach_list_close_and_their_notifications_are_the_declared_types() {
    let sb = Sandbox::new();
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let mut c = d.connect();
    hello(&mut c);
    let want = "{sessionId,epoch,seq,created,warnings[],header{type,version,id,timestamp,cwd},sessionFile}";
    let opened = call_shaped::<session::Open>(&mut c, 2, &open_params(&sb, &[]), 2, want);
    assert!(opened.created && opened.header.is_some(), "{opened:?}");
    let id = opened.session_id.clone();
    let again = call::<session::Open>(&mut c, 3, &open_params(&sb, &["--session-id", &id]));
    assert!(!again.created, "{again:?}");
    let attach = format!(r#"{{"sessionId":"{id}"}}"#);
    let attached =
        call_shaped::<session::Attach>(&mut c, 4, &attach, 1, "{mode,epoch,seq,snapshot}");
    assert_eq!(attached.mode, AttachMode::Snapshot);
    // A run: its events are `session/event` notifications of the declared type.
    let prompt = format!(r#"{{"sessionId":"{id}","message":"hi"}}"#);
    let (_, mut notes) = call_raw(&mut c, 5, "prompt", &prompt);
    while !notes
        .last()
        .is_some_and(|n| n.contains(r#""type":"agent_settled""#))
    {
        notes.push(line(&mut c));
    }
    let mut last = 0;
    for raw in &notes {
        match note_round_trip(raw) {
            Notification::Event(SessionEvent {
                session_id, seq, ..
            }) => {
                assert_eq!(
                    shape(raw, 2),
                    "{jsonrpc,method,params{sessionId,epoch,seq,event}}"
                );
                assert_eq!(session_id, id);
                last = seq;
            }
            other => panic!("{other:?}"),
        }
    }
    // Attached again from a cursor this epoch still holds: a replay.
    let mut other = d.connect();
    hello(&mut other);
    let epoch = attached.epoch.clone();
    let cursor = format!(r#"{{"sessionId":"{id}","cursor":{{"epoch":"{epoch}","seq":1}}}}"#);
    let replayed = call_shaped::<session::Attach>(&mut other, 2, &cursor, 1, "{mode,epoch,seq}");
    assert_eq!((replayed.mode, replayed.seq), (AttachMode::Replay, last));
    // With a run done, the session knows its last run.
    let open = open_params(&sb, &["--session-id", &id]);
    let want = "{sessionId,epoch,seq,created,warnings[],header{type,version,id,timestamp,cwd},sessionFile,lastRun{seq,settled}}";
    let found = call_shaped::<session::Open>(&mut c, 6, &open, 2, want);
    assert!(found.last_run.is_some_and(|r| r.settled.is_some()));
    let list = json!({"cwd": sb.work()}).to_string();
    let listed = call_shaped::<session::List>(&mut c, 7, &list, 1, "{here,all}");
    assert!(listed.all.iter().any(|s| s.id == id), "{listed:?}");
    call::<session::Detach>(&mut other, 3, &attach);
    call::<session::Close>(&mut c, 8, &attach);
    let status = call::<daemon::Status>(&mut c, 9, "{}");
    assert!(status.sessions.is_empty(), "{status:?}");
}

#[test]
fn status_and_stop_are_the_declared_types() {
    let sb = Sandbox::new();
    let mut d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let mut c = d.connect();
    hello(&mut c);
    call::<session::Open>(&mut c, 2, &open_params(&sb, &[]));
    let want = "{version,pid,uptimeMs,clients,sessions[{sessionId,cwd,state,clients,epoch,seq,ageMs,sessionFile,sandbox{mode,network,mechanism}}],schedules{tasks,active,running[]}}";
    let status = call_shaped::<daemon::Status>(&mut c, 3, "{}", 3, want);
    let [s] = status.sessions.as_slice() else {
        panic!("{status:?}")
    };
    assert_eq!(s.state, daemon::RunState::Idle);
    assert!(s.session_file.is_some() || s.name.is_none());
    call::<daemon::Stop>(&mut c, 4, "{}");
    let shutdown = line(&mut c);
    assert_eq!(
        shutdown,
        format!(
            r#"{{"jsonrpc":"2.0","method":"{}","params":{{"reason":"stopped"}}}}"#,
            Shutdown::NAME
        )
    );
    assert!(matches!(
        note_round_trip(&shutdown),
        Notification::Shutdown(_)
    ));
    assert_eq!(d.wait(), 0);
}

#[test]
fn schedule_reload_and_run_are_the_declared_types() {
    let sb = Sandbox::new();
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let socket = d.socket.to_str().unwrap().to_string();
    let script = fixture("hello.json");
    let add = sb
        .cmd(&scripted_args(
            &["schedule", "add", "daily", "--every", "1d"],
            &script,
            &["--", "do", "it"],
        ))
        .env("KEEL_SOCKET", &socket)
        .output()
        .unwrap();
    let add = sb.finish(add);
    assert_eq!(add.code, 0, "{add}");
    let mut c = d.connect();
    hello(&mut c);
    let reloaded = call_shaped::<schedule::Reload>(&mut c, 2, "{}", 1, "{tasks}");
    assert_eq!(reloaded.tasks, 1);
    let run = call_shaped::<schedule::Run>(&mut c, 3, r#"{"name":"daily"}"#, 1, "{task,sessionId}");
    assert_eq!(run.task, "daily");
    // The status names the schedule (and the session the run opened).
    let status = call::<daemon::Status>(&mut c, 4, "{}");
    assert_eq!(status.schedules.tasks, 1, "{status:?}");
}
