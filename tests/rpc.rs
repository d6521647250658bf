//! RPC mode against the real binary and the scripted provider.
//!
//! Transcript tests: each `fixtures/rpc/*.jsonl` is a request script. Request lines are sent
//! as written (consecutive ones in one write); lines starting with `_` are directives for the
//! driver: `{"_args": [...]}` (flags, first line), `{"_wait": {...}}` (read stdout until a
//! line containing these fields; `"_as": "name"` keeps it), `{"_response": "id"}` (the same
//! for the response to request `id`), `{"_touch": "file"}` (create a
//! file in the workspace), `{"_write": {"path","text"}}` (a file under the sandbox),
//! `{"_raw": "text"}` (send text as one line). `"${name:/json/pointer}"` in a request is
//! replaced by that value of a kept line. Stdout is snapshotted whole; ids, times and paths
//! are deterministic through KEEL_TEST_CLOCK / KEEL_TEST_SEED and the sandbox scrub.

use std::collections::HashMap;

use nix::sys::signal::Signal;
use serde_json::{json, Value};

use crate::common::rpc::Rpc;
use crate::common::support::{fixture, root, scripted_args, snap, Sandbox};

/// Replaces `"${name:/pointer}"` strings with values of kept lines.
fn substitute(v: &mut Value, kept: &HashMap<String, Value>) {
    match v {
        Value::String(s) if s.starts_with("${") && s.ends_with('}') => {
            let inner = &s[2..s.len() - 1];
            let (name, pointer) = inner.split_once(':').expect("${name:/pointer}");
            let found = kept
                .get(name)
                .and_then(|k| k.pointer(pointer))
                .unwrap_or_else(|| panic!("nothing at {s}"));
            *v = found.clone();
        }
        Value::Array(a) => a.iter_mut().for_each(|x| substitute(x, kept)),
        Value::Object(m) => m.values_mut().for_each(|x| substitute(x, kept)),
        _ => {}
    }
}

fn scrub(text: &str, sb: &Sandbox) -> String {
    let plain = sb.dir.path().display().to_string();
    let dashed = plain.trim_start_matches('/').replace('/', "-");
    text.replace(&plain, "[SANDBOX]")
        .replace(&dashed, "[SANDBOX]")
        .replace(&root().display().to_string(), "[ROOT]")
}

/// Runs one transcript fixture; returns the sandbox and scrubbed stdout, stderr and code.
fn transcript(name: &str) -> (Sandbox, String) {
    let sb = Sandbox::new();
    let text = std::fs::read_to_string(root().join("fixtures/rpc").join(name)).unwrap();
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let first: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    let args: Vec<String> = first["_args"]
        .as_array()
        .expect("first line is {\"_args\": [...]}")
        .iter()
        .map(|a| {
            let a = a.as_str().unwrap();
            if a.ends_with(".json") {
                fixture(a)
            } else {
                a.to_string()
            }
        })
        .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut rpc = Rpc::start(&sb, &args);
    let mut kept: HashMap<String, Value> = HashMap::new();
    let mut batch = String::new();
    for line in lines {
        let mut v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
        let directive = v
            .as_object()
            .and_then(|m| m.keys().next())
            .is_some_and(|k| k.starts_with('_'));
        if !directive {
            substitute(&mut v, &kept);
            batch.push_str(&format!("{v}\n"));
            continue;
        }
        if !batch.is_empty() {
            rpc.send_bytes(batch.as_bytes());
            batch.clear();
        }
        let wanted = match (v.get("_wait"), v.get("_response")) {
            (Some(w), _) => Some(w.clone()),
            (None, Some(id)) => Some(json!({"type": "response", "id": id})),
            _ => None,
        };
        if let Some(w) = wanted {
            let found = rpc.wait(&w);
            if let Some(name) = v.get("_as").and_then(Value::as_str) {
                kept.insert(name.to_string(), found);
            }
        } else if let Some(f) = v.get("_touch").and_then(Value::as_str) {
            std::fs::write(sb.work().join(f), "").unwrap();
        } else if let Some(w) = v.get("_write") {
            let path = sb.dir.path().join(w["path"].as_str().unwrap());
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, w["text"].as_str().unwrap()).unwrap();
        } else if let Some(raw) = v.get("_raw").and_then(Value::as_str) {
            rpc.send_bytes(format!("{raw}\n").as_bytes());
        } else {
            panic!("unknown directive {v}");
        }
    }
    if !batch.is_empty() {
        rpc.send_bytes(batch.as_bytes());
    }
    let (out, err, code) = rpc.finish();
    let shown = format!(
        "{}\n[stderr]\n{}\n[exit status: {code}]\n",
        out.concat(),
        err
    );
    let shown = scrub(&shown, &sb);
    (sb, shown)
}

#[test]
fn transcript_commands() {
    let (sb, out) = transcript("commands.jsonl");
    snap("rpc_commands", &out);
    let page = std::fs::read_to_string(sb.work().join("out.html")).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(
        page.contains("Review src/main.rs carefully"),
        "the export shows the prompt"
    );
}

#[test]
fn transcript_queue() {
    let (_sb, out) = transcript("queue.jsonl");
    snap("rpc_queue", &out);
}

#[test]
fn transcript_abort() {
    let (_sb, out) = transcript("abort.jsonl");
    snap("rpc_abort", &out);
}

#[test]
fn transcript_approvals() {
    let (sb, out) = transcript("approvals.jsonl");
    snap("rpc_approvals", &out);
    assert!(sb.work().join("one.txt").exists(), "granted");
    assert!(!sb.work().join("two.txt").exists(), "denied");
    assert!(!sb.work().join("three.txt").exists(), "timed out");
}

#[test]
fn transcript_sessions() {
    let (sb, out) = transcript("sessions.jsonl");
    snap("rpc_sessions", &out);
    // The fork holds the path up to the parent of the forked user message, and names its
    // parent session; the clone holds the whole branch.
    let files = sb.session_files();
    let read = |p: &std::path::Path| -> Vec<Value> {
        std::fs::read_to_string(p)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let parents: Vec<usize> = files
        .iter()
        .map(|f| read(f))
        .filter(|l| l[0].get("parentSession").is_some())
        .map(|l| l.len())
        .collect();
    assert_eq!(parents.len(), 2, "a fork and a clone: {files:?}");
}

fn hello(sb: &Sandbox) -> Rpc {
    Rpc::start(sb, &scripted_args(&[], &fixture("rpc.json"), &[]))
}

/// pi's same-instant race: two prompts in one write both said `started` and one was dropped.
/// Here acceptance is decided under the kernel's lock: one starts, the other is refused.
#[test]
fn two_prompts_in_one_write_start_once() {
    let sb = Sandbox::new();
    let mut rpc = hello(&sb);
    rpc.send_bytes(
        b"{\"id\":\"a\",\"type\":\"prompt\",\"message\":\"first\"}\n{\"id\":\"b\",\"type\":\"prompt\",\"message\":\"second\"}\n",
    );
    let a = rpc.response("a");
    let b = rpc.response("b");
    rpc.wait(&json!({"type": "agent_settled"}));
    let (lines, _, code) = rpc.finish();
    assert_eq!(code, 0);
    assert_eq!(a["data"]["disposition"], "started");
    assert_eq!(b["success"], false);
    assert!(
        b["error"].as_str().unwrap().contains("streamingBehavior"),
        "{b}"
    );
    let count = |t: &str| {
        lines
            .iter()
            .filter(|l| l.contains(&format!("\"type\":\"{t}\"")))
            .count()
    };
    assert_eq!(count("agent_start"), 1);
    assert_eq!(count("agent_settled"), 1);
    let responses: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("\"type\":\"response\""))
        .collect();
    assert_eq!(
        responses.len(),
        2,
        "one response per request: {responses:?}"
    );
}

/// Regression: the stdin reader handed the lines of one read to the loop one at a time, so the
/// first prompt's whole run could finish between them and the second prompt started too (about
/// 1 run in 100 with this binary, 2 in 5 with a release build). Loops until that would show.
#[test]
fn two_prompts_in_one_write_never_both_start() {
    const RUNS: usize = 400;
    const WORKERS: usize = 8;
    let sb = Sandbox::new();
    let script = fixture("hello.json");
    let args = scripted_args(&["--no-session"], &script, &[]);
    let one_run = || {
        let mut rpc = Rpc::start(&sb, &args);
        // One round trip first: keel is idle and its reader waits for the next write.
        rpc.send_bytes(b"{\"id\":\"s\",\"type\":\"get_state\"}\n");
        let first = rpc.wait(&json!({}));
        assert_eq!(first["command"], "get_state", "{first}");
        rpc.send_bytes(
            b"{\"id\":\"a\",\"type\":\"prompt\",\"message\":\"one\"}\n{\"id\":\"b\",\"type\":\"prompt\",\"message\":\"two\"}\n",
        );
        let (lines, _, code) = rpc.finish();
        let rest = lines[1..].concat();
        assert_eq!(code, 0, "{rest}");
        rest
    };
    let failures: Vec<String> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..WORKERS)
            .map(|_| {
                scope.spawn(|| {
                    (0..RUNS / WORKERS)
                        .map(|_| one_run())
                        .filter(|out| {
                            let started = out.matches("\"disposition\":\"started\"").count();
                            let busy = out.matches("Agent is already processing").count();
                            let runs = out.matches("\"type\":\"agent_start\"").count();
                            (started, busy, runs) != (1, 1, 1)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect()
    });
    assert!(
        failures.is_empty(),
        "{} of {RUNS} runs did not start exactly one prompt; the first:\n{}",
        failures.len(),
        failures[0]
    );
}

/// Regression: ids were decoded into JSON values, so an integer beyond 64 bits
/// (`98765432109876543210`) came back as the float `9.876543210987654e+19`, and `1.50` as `1.5`.
/// Every id is echoed as the text the client sent.
#[test]
fn ids_come_back_exactly_as_sent() {
    let sb = Sandbox::new();
    let mut rpc = hello(&sb);
    let ids = [
        "98765432109876543210",
        "12345678901234567890",
        "-9223372036854775809",
        "1.50",
        "1e2",
        "\"s1\"",
        "null",
    ];
    for id in ids {
        rpc.send_bytes(format!("{{\"id\":{id},\"type\":\"get_state\"}}\n").as_bytes());
    }
    rpc.send_bytes(b"{\"id\":123456789012345678901234567890,\"type\":\"no_such_command\"}\n");
    rpc.send_bytes(b"{\"id\":123456789012345678901234567891}\n");
    let (lines, _, code) = rpc.finish();
    assert_eq!(code, 0);
    let responses: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("\"response\""))
        .collect();
    assert_eq!(responses.len(), ids.len() + 2, "{lines:?}");
    for (id, line) in ids.iter().zip(&responses) {
        let want = format!("{{\"id\":{id},\"type\":\"response\",\"command\":\"get_state\",");
        assert!(line.starts_with(&want), "{line}");
    }
    assert!(responses[ids.len()].starts_with("{\"id\":123456789012345678901234567890,"));
    assert!(responses[ids.len() + 1].starts_with("{\"id\":123456789012345678901234567891,"));
}

/// Every kind of bad input gets its response, and the next valid command still works.
#[test]
fn bad_input_is_answered_and_never_fatal() {
    let sb = Sandbox::new();
    let mut rpc = hello(&sb);
    let ok_after = |rpc: &mut Rpc, n: &mut u32| {
        *n += 1;
        let id = format!("ok{n}");
        let r = rpc.call(json!({"id": id, "type": "get_state"}));
        assert_eq!(r["success"], true, "{r}");
    };
    let mut n = 0;
    let parse = json!({"type": "response", "command": "parse", "success": false});

    rpc.send_bytes(b"this is not json\n");
    let r = rpc.wait(&parse);
    assert!(r.get("id").is_none());
    assert!(r["error"]
        .as_str()
        .unwrap()
        .starts_with("Failed to parse command: "));
    ok_after(&mut rpc, &mut n);

    rpc.send_bytes(b"[{\"type\":\"get_state\"}]\n");
    let r = rpc.wait(&parse);
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .contains("expected a JSON object, got an array"),
        "{r}"
    );
    ok_after(&mut rpc, &mut n);

    // 20 MiB on one line: over the 16 MiB cap, skipped without being kept in memory.
    let mut huge = b"{\"id\":\"big\",\"type\":\"prompt\",\"message\":\"".to_vec();
    huge.resize(20 * 1024 * 1024, b'a');
    huge.extend_from_slice(b"\"}\n");
    rpc.send_bytes(&huge);
    let r = rpc.wait(&parse);
    let e = r["error"].as_str().unwrap();
    assert!(e.contains("20971522 bytes") && e.contains("16 MiB"), "{e}");
    ok_after(&mut rpc, &mut n);

    rpc.send_bytes(b"{\"id\":\"u8\",\"type\":\"prompt\",\"message\":\"caf\xc3\x28\"}\n");
    let r = rpc.wait(&parse);
    assert!(
        r["error"].as_str().unwrap().contains("not valid UTF-8"),
        "{r}"
    );
    ok_after(&mut rpc, &mut n);

    // CRLF: the CR is stripped, the request works.
    rpc.send_bytes(b"{\"id\":\"crlf\",\"type\":\"get_state\"}\r\n");
    assert_eq!(rpc.response("crlf")["success"], true);

    // U+2028 inside a string is data, not a line break, both ways.
    rpc.send_bytes(
        "{\"id\":\"ls\",\"type\":\"prompt\",\"message\":\"one\u{2028}two\"}\n".as_bytes(),
    );
    assert_eq!(rpc.response("ls")["data"]["disposition"], "started");
    let user = rpc.wait(&json!({"type": "message_end", "message": {"role": "user"}}));
    assert_eq!(user["message"]["content"][0]["text"], "one\u{2028}two");
    let raw = rpc
        .seen
        .iter()
        .find(|l| l.contains("\"role\":\"user\""))
        .unwrap();
    assert!(raw.contains('\u{2028}'), "U+2028 written raw: {raw}");
    rpc.wait(&json!({"type": "agent_settled"}));

    let r = rpc.call(json!({"id": "u1", "type": "bogus_cmd"}));
    assert_eq!(r["command"], "bogus_cmd");
    assert_eq!(r["error"], "Unknown command: bogus_cmd");
    ok_after(&mut rpc, &mut n);

    let r = rpc.call(json!({"id": "w1", "type": "prompt", "message": 42}));
    assert_eq!(
        r["error"],
        "prompt: field `message` must be a string, got a number"
    );
    let r = rpc.call(json!({"id": "w2", "type": "set_auto_retry"}));
    assert_eq!(
        r["error"],
        "set_auto_retry: field `enabled` is missing (true or false)"
    );
    rpc.send_bytes(b"{\"id\":\"t1\"}\n");
    let r = rpc.response("t1");
    assert!(
        r["error"].as_str().unwrap().contains("`type` is missing"),
        "{r}"
    );
    rpc.send_bytes(b"\n");
    let r = rpc.wait(&parse);
    assert!(r["error"].as_str().unwrap().contains("empty"), "{r}");
    ok_after(&mut rpc, &mut n);

    // A last line without LF is still answered at EOF.
    rpc.send_bytes(b"{\"id\":\"last\",\"type\":\"get_state\"}");
    let (lines, stderr, code) = rpc.finish();
    assert_eq!(code, 0, "{stderr}");
    assert!(
        lines.last().unwrap().contains("\"id\":\"last\""),
        "{lines:?}"
    );
    for l in &lines {
        serde_json::from_str::<Value>(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"));
    }
}

/// stdin EOF with a run active lets it finish, saves the session and exits 0.
#[test]
fn eof_finishes_the_run_and_saves() {
    let sb = Sandbox::new();
    let mut rpc = hello(&sb);
    rpc.send(&json!({"id": "p", "type": "prompt", "message": "hello"}));
    let (lines, _, code) = rpc.finish();
    assert_eq!(code, 0);
    assert!(lines.iter().any(|l| l.contains("\"agent_settled\"")));
    let text = sb.session_text();
    assert!(text.contains("Done: ok."), "{text}");
}

fn pid_alive(pid: i32) -> bool {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok()
}

/// SIGTERM mid-run: 143, the run aborted and saved, the user's bash command killed.
#[test]
fn sigterm_exits_143_and_kills_bash_children() {
    let sb = Sandbox::new();
    let mut rpc = hello(&sb);
    rpc.send(&json!({"id": "b", "type": "bash", "command": "echo $$; exec sleep 1000"}));
    let update = rpc.wait(&json!({"type": "bash_execution_update", "id": "b"}));
    let pid: i32 = update["delta"].as_str().unwrap().trim().parse().unwrap();
    assert!(pid_alive(pid));
    rpc.send(&json!({"id": "p", "type": "prompt", "message": "HANG"}));
    rpc.wait(&json!({"type": "message_update"}));
    rpc.signal(Signal::SIGTERM);
    let (lines, _, code) = rpc.collect();
    assert_eq!(code, 143);
    assert!(
        lines
            .iter()
            .any(|l| l.contains("\"agent_settled\",\"aborted\":true")),
        "{lines:?}"
    );
    assert!(lines
        .iter()
        .any(|l| l.contains("\"id\":\"b\",\"type\":\"response\"")
            && l.contains("\"cancelled\":true")));
    // The process group was killed (a zombie may linger until reaped by init).
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    assert!(
        !pid_alive(pid) || stat.contains(") Z "),
        "bash child {pid} still running: {stat}"
    );
    let text = std::fs::read_to_string(&sb.session_files()[0]).unwrap();
    assert!(text.contains("\"stopReason\":\"aborted\""), "{text}");
}

#[test]
fn sigint_exits_130() {
    let sb = Sandbox::new();
    let mut rpc = hello(&sb);
    rpc.call(json!({"id": "s", "type": "get_state"}));
    rpc.signal(Signal::SIGINT);
    let (_, _, code) = rpc.collect();
    assert_eq!(code, 130);
}

/// Nothing is written before the first request.
#[test]
fn silent_until_the_first_request() {
    let sb = Sandbox::new();
    let rpc = hello(&sb);
    let (lines, _, code) = rpc.finish();
    assert_eq!((lines.len(), code), (0, 0));
}

/// The example client in `examples/rpc_client.rs` drives the binary end to end.
#[test]
fn example_client_streams_an_answer() {
    let exe = std::env::current_exe().unwrap();
    let client = exe
        .parent()
        .and_then(|deps| deps.parent())
        .map(|dir| dir.join("examples").join("rpc_client"))
        .unwrap();
    assert!(
        client.exists(),
        "cargo test builds examples: {}",
        client.display()
    );
    let sb = Sandbox::new();
    let script = fixture("rpc.json");
    let out = std::process::Command::new(client)
        .args(scripted_args(
            &["say something", "--no-session"],
            &script,
            &[],
        ))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("KEEL_BIN", env!("CARGO_BIN_EXE_keel"))
        .env("KEEL_HOME", sb.home())
        .current_dir(sb.work())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "Done: ok.");
}

/// A session change during a run aborts it first and answers once it has settled; the new
/// session starts empty and the old one keeps the aborted turn.
#[test]
fn new_session_while_running_aborts_then_switches() {
    let sb = Sandbox::new();
    let mut rpc = hello(&sb);
    let before = rpc.call(json!({"id": "s0", "type": "get_state"}));
    rpc.send(&json!({"id": "p", "type": "prompt", "message": "HANG"}));
    rpc.wait(&json!({"type": "message_update"}));
    rpc.send(&json!({"id": "n", "type": "new_session"}));
    let settled = rpc.wait(&json!({"type": "agent_settled"}));
    assert_eq!(settled["aborted"], true);
    let n = rpc.response("n");
    assert_eq!(n["data"], json!({"cancelled": false}));
    let after = rpc.call(json!({"id": "s1", "type": "get_state"}));
    assert_ne!(after["data"]["sessionId"], before["data"]["sessionId"]);
    assert_eq!(after["data"]["messageCount"], 0);
    let msgs = rpc.call(json!({"id": "m", "type": "get_messages"}));
    assert_eq!(msgs["data"]["messages"], json!([]));
    let (_, _, code) = rpc.finish();
    assert_eq!(code, 0);
    let old = std::fs::read_to_string(before["data"]["sessionFile"].as_str().unwrap()).unwrap();
    assert!(old.contains("\"stopReason\":\"aborted\""), "{old}");
}

/// A long linear session is a tree as deep as it is long: `get_tree` must answer it (it used
/// to overflow the stack building a nested JSON value) and the process must keep serving.
#[test]
fn get_tree_of_a_deep_session() {
    const N: usize = 30_000;
    let sb = Sandbox::new();
    let path = sb.work().join("deep.jsonl");
    let mut text = format!(
        "{}\n",
        json!({"type":"session","version":3,"id":"deep","timestamp":"2026-11-30T00:00:00.000Z","cwd":sb.work()})
    );
    let mut parent = Value::Null;
    for i in 0..N {
        let id = format!("{i:08x}");
        let message =
            json!({"role":"user","content":[{"type":"text","text":format!("m{i}")}],"timestamp":i});
        text.push_str(&format!(
            "{}\n",
            json!({"type":"message","id":id,"parentId":parent,"timestamp":"2026-11-30T00:00:00.000Z","message":message})
        ));
        parent = json!(id);
    }
    std::fs::write(&path, text).unwrap();
    let script = fixture("rpc.json");
    let mut rpc = Rpc::start(
        &sb,
        &scripted_args(&[], &script, &["--session", "deep.jsonl"]),
    );
    rpc.send(&json!({"id": "t", "type": "get_tree"}));
    rpc.send(&json!({"id": "s", "type": "get_state"}));
    let (lines, stderr, code) = rpc.finish();
    assert_eq!(code, 0, "{stderr}");
    let tree = &lines[0];
    assert!(tree.starts_with(r#"{"id":"t","type":"response","command":"get_tree","success":true,"data":{"tree":[{"entry":{"type":"message","id":"00000000""#));
    // The file's entries, then the model and thinking level recorded on resume (scripted
    // is a different model from the file's), each nested in the one before.
    assert_eq!(tree.matches(r#"{"entry":"#).count(), N + 2);
    assert_eq!(tree.matches(",\"children\":[").count(), N + 2);
    assert!(
        tree.contains(&format!("]{}],\"leafId\":", "}]".repeat(N + 1) + "}")),
        "every node closed, in order"
    );
    assert!(lines[1].contains(r#""id":"s""#) && lines[1].contains(r#""messageCount":30000"#));
}
