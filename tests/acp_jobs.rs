//! keel's ACP extension methods for background jobs (issue 47, point 4): an editor lists the
//! jobs the model started (`_keel/jobs/list`), reads their output from an offset
//! (`_keel/jobs/read`) and kills them (`_keel/jobs/kill`), with the pi commands' results.

use serde_json::json;

use crate::acp::{acp_script, call, init, new_session, prompt};
use crate::common::support::alive;
use crate::jobs_rpc::{bytes, marker, script, LINES};

#[test]
fn an_editor_lists_reads_and_kills_the_models_jobs_through_keels_extension_methods() {
    let sb = crate::sandbox::world();
    let marker = marker();
    let mut a = acp_script(&sb, &script(&sb, &marker), &["--permission", "auto"]);
    init(&mut a);
    let session = new_session(&mut a, &sb);
    prompt(&mut a, "p", &session, "start it");
    assert_eq!(a.stop_reason("p"), "end_turn");

    let list = call(
        &mut a,
        "l",
        "_keel/jobs/list",
        json!({"sessionId": session}),
    );
    let job = &list["result"]["jobs"][0];
    assert_eq!(
        (&job["id"], &job["state"]),
        (&json!(1), &json!("running")),
        "{list}"
    );
    // The run waited for its output (`bash_output`); should it have come in two writes, the
    // rest is read once it is there.
    let mut n = 0;
    let read = loop {
        n += 1;
        let params = json!({"sessionId": session, "jobId": 1, "since": 0});
        let read = call(&mut a, &format!("r{n}"), "_keel/jobs/read", params);
        if read["result"]["next"] == LINES.len() || n == 1000 {
            break read;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    assert_eq!(bytes(&read["result"]), LINES, "{read}");
    let missing = call(
        &mut a,
        "m",
        "_keel/jobs/read",
        json!({"sessionId": session}),
    );
    assert_eq!(missing["error"]["code"], -32602, "{missing}");
    let unknown = call(
        &mut a,
        "u",
        "_keel/jobs/kill",
        json!({"sessionId": session, "jobId": 4}),
    );
    assert_eq!(
        unknown["error"]["message"], "No background job with id 4",
        "{unknown}"
    );
    let other = call(&mut a, "o", "_keel/other", json!({"sessionId": session}));
    assert_eq!(other["error"]["code"], -32601, "{other}");

    let killed = call(
        &mut a,
        "k",
        "_keel/jobs/kill",
        json!({"sessionId": session, "jobId": 1}),
    );
    assert_eq!(killed["result"]["job"]["state"], "killed", "{killed}");
    let left = alive(&format!("sleep {marker}"));
    assert!(left.is_empty(), "survivors of _keel/jobs/kill: {left:?}");
    let (_, stderr, code) = a.finish();
    assert_eq!(code, 0, "{stderr}");
}
