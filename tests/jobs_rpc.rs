//! A session's background jobs seen by its RPC client (issue 47, point 4): the model starts a
//! job with `bash` `run_in_background`, and the client lists it (`get_jobs`), reads its
//! output from byte offsets (`read_job`), hears it start, write and end (`job_started`,
//! `job_output`, `job_ended`), and kills it (`kill_job`), with clear errors for an unknown id
//! and for input to a job on pipes; none of it goes into the session file.

use serde_json::{json, Value};

use crate::common::rpc::Rpc;
use crate::common::support::{alive, scripted_args, Sandbox};

/// What the job prints before it sleeps.
pub(crate) const LINES: &str = "line one\nline two\n";

/// A marker no other process carries: `sleep 1000.<n>` (a valid duration for `sleep`).
pub(crate) fn marker() -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    format!("1000.{port}{}", std::process::id())
}

/// A script whose first turn starts `sleep MARKER` in the background after printing
/// [`LINES`], whose second waits for its output (`bash_output`), and whose third answers
/// "started".
pub(crate) fn script(sb: &Sandbox, marker: &str) -> String {
    let command = format!("printf 'line one\\nline two\\n'; exec sleep {marker}");
    let turns = json!({"turns": [
        {"chunks": [{"toolCall": {"id": "c1", "name": "bash",
            "arguments": {"command": command, "run_in_background": true}}}]},
        {"chunks": [{"toolCall": {"id": "c2", "name": "bash_output",
            "arguments": {"id": "1", "wait": 30}}}]},
        {"chunks": [{"text": "started"}]},
    ]});
    let path = sb.dir.path().join("script.json");
    std::fs::write(&path, turns.to_string()).unwrap();
    path.display().to_string()
}

/// `read_job`'s `data`, decoded.
pub(crate) fn bytes(data: &Value) -> String {
    let text = data["data"].as_str().unwrap_or_else(|| panic!("{data}"));
    let raw = keel::wire::pi::data::decode_base64(text).unwrap();
    String::from_utf8(raw).unwrap()
}

/// Waits for the line with `fields` and for `agent_settled`, in either order.
pub(crate) fn settled_and(rpc: &mut Rpc, fields: &Value) {
    let lines = rpc.until(fields);
    if !lines
        .iter()
        .any(|l| l.contains(r#""type":"agent_settled""#))
    {
        rpc.wait(&json!({"type": "agent_settled"}));
    }
}

/// The `success:false` error of a response.
fn refused(r: &Value) -> &str {
    assert_eq!(r["success"], false, "{r}");
    r["error"].as_str().unwrap()
}

/// Under bubblewrap (the job's pid unseen from the host) and the Landlock fallback.
#[test]
fn an_rpc_client_lists_reads_hears_and_kills_the_models_job() {
    for mech in crate::sandbox::mechanisms() {
        lists_reads_hears_and_kills(mech);
    }
}

fn lists_reads_hears_and_kills(mech: &str) {
    let sb = crate::sandbox::world();
    let marker = marker();
    let script = script(&sb, &marker);
    let args = scripted_args(&["--mode", "rpc"], &script, &[]);
    let mut cmd = sb.cmd(&args);
    cmd.env("KEEL_SANDBOX_MECHANISM", mech);
    let mut rpc = Rpc::spawn(cmd);
    rpc.call(json!({"id": "p", "type": "prompt", "message": "start it"}));
    let started = rpc.wait(&json!({"type": "job_started"}));
    assert_eq!(started["job"]["id"], 1, "{started}");
    assert_eq!(started["job"]["state"], "running", "{started}");
    let end = LINES.len();
    // Coalesced or not, the last `job_output` says where its output ends; the run settles
    // before or after it.
    settled_and(
        &mut rpc,
        &json!({"type": "job_output", "id": 1, "next": end}),
    );

    let jobs = rpc.call(json!({"id": "l", "type": "get_jobs"}));
    let listed = &jobs["data"]["jobs"];
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{jobs}");
    assert_eq!(listed[0]["state"], "running", "{jobs}");
    assert_eq!(listed[0]["bytes"], end, "{jobs}");
    // Its pid, where the host sees it: not inside bubblewrap's PID namespace.
    assert_eq!(
        listed[0]["pid"].is_null(),
        mech == "bwrap",
        "{mech}: {jobs}"
    );
    assert!(
        listed[0]["command"]
            .as_str()
            .unwrap()
            .contains(&format!("sleep {marker}")),
        "{jobs}"
    );

    let all = rpc.call(json!({"id": "r0", "type": "read_job", "jobId": 1}));
    assert_eq!(bytes(&all["data"]), LINES, "{all}");
    assert_eq!(
        (
            &all["data"]["from"],
            &all["data"]["next"],
            &all["data"]["dropped"]
        ),
        (&json!(0), &json!(end), &json!(0))
    );
    let none = rpc.call(json!({"id": "r1", "type": "read_job", "jobId": 1, "since": end}));
    assert_eq!(bytes(&none["data"]), "", "{none}");
    assert_eq!(none["data"]["next"], end, "{none}");
    let rest = rpc.call(json!({"id": "r2", "type": "read_job", "jobId": 1, "since": 9, "max": 4}));
    assert_eq!(bytes(&rest["data"]), "line", "{rest}");
    assert_eq!(rest["data"]["next"], 13, "{rest}");

    let unknown = rpc.call(json!({"id": "u", "type": "read_job", "jobId": 9}));
    assert_eq!(refused(&unknown), "No background job with id 9");
    let unknown = rpc.call(json!({"id": "u2", "type": "kill_job", "jobId": 9}));
    assert_eq!(refused(&unknown), "No background job with id 9");
    let typed = rpc.call(json!({"id": "w", "type": "write_job", "jobId": 1, "data": "q\r"}));
    assert!(
        refused(&typed).starts_with("Job 1 runs on pipes: it takes no input"),
        "{typed}"
    );
    let sized =
        rpc.call(json!({"id": "z", "type": "resize_job", "jobId": 1, "cols": 80, "rows": 24}));
    assert_eq!(refused(&sized), "Job 1 runs on pipes: it has no terminal");

    let mut seen = rpc.call_seen(json!({"id": "k", "type": "kill_job", "jobId": 1}));
    let killed = seen.pop().unwrap();
    assert_eq!(killed["success"], true, "{killed}");
    assert_eq!(killed["data"]["job"]["state"], "killed", "{killed}");
    // Its end is heard before the answer, or after it.
    let ended = match seen.into_iter().find(|l| l["type"] == "job_ended") {
        Some(ended) => ended,
        None => rpc.wait(&json!({"type": "job_ended"})),
    };
    assert_eq!(ended["job"]["state"], "killed", "{ended}");
    assert_eq!(ended["job"]["bytes"], end, "{ended}");
    let left = alive(&format!("sleep {marker}"));
    assert!(left.is_empty(), "survivors of kill_job: {left:?}");
    let jobs = rpc.call(json!({"id": "l2", "type": "get_jobs"}));
    assert_eq!(jobs["data"]["jobs"][0]["state"], "killed", "{jobs}");

    let state = rpc.call(json!({"id": "s", "type": "get_state"}));
    let (_, stderr, code) = rpc.finish();
    assert_eq!(code, 0, "{stderr}");
    // The session file holds the conversation, not the jobs' events.
    let file = state["data"]["sessionFile"].as_str().unwrap();
    let saved = std::fs::read_to_string(file).unwrap();
    assert!(saved.contains("run_in_background"), "{saved}");
    assert!(!saved.contains("job_output") && !saved.contains("job_started"));
}

#[test]
fn a_job_still_running_when_the_rpc_session_ends_is_ended_with_it() {
    let sb = crate::sandbox::world();
    let marker = marker();
    let script = script(&sb, &marker);
    let mut rpc = Rpc::start(&sb, &scripted_args(&[], &script, &[]));
    rpc.call(json!({"id": "p", "type": "prompt", "message": "start it"}));
    rpc.wait(&json!({"type": "job_output", "id": 1, "next": LINES.len()}));
    assert!(!alive(&format!("sleep {marker}")).is_empty());
    let (_, stderr, code) = rpc.finish();
    assert_eq!(code, 0, "{stderr}");
    let left = alive(&format!("sleep {marker}"));
    assert!(left.is_empty(), "survivors of the session: {left:?}");
}
