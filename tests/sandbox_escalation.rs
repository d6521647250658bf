//! What the user and the model see of the sandbox (issue 30 points 5, 7, 8): no mechanism with
//! `failIfUnavailable: false` runs unsandboxed with one warning; `--sandbox off` is a notice
//! in RPC and JSON mode; a stopped command is a `sandbox_violation` event in JSON mode; a daemon
//! session's snapshot names its sandbox; `bash` with `escalate: true` runs outside only after
//! an approval that shows its justification (blocked in print mode, exit 5), by an allow rule
//! alone only with `sandbox.allowEscalation: true`, never when it is false.

use serde::Deserialize;
use serde_json::{json, Value};

use crate::common::daemon::{open, Daemon};
use crate::common::rpc::Rpc;
use crate::common::support::{scripted_args, Sandbox};
use crate::sandbox::{bash, run, world};

/// `escalate: true` with a justification.
fn escalated(command: &str) -> (&'static str, Value) {
    let justification = "the build writes its cache next to the workspace";
    (
        "bash",
        json!({"command": command, "escalate": true, "justification": justification}),
    )
}

/// A script of one turn calling `calls`, then "done"; its path.
fn script(sb: &Sandbox, calls: &[(&str, Value)]) -> String {
    let chunks: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (name, args))| {
            json!({"toolCall": {"id": format!("call_{i}"), "name": name, "arguments": args}})
        })
        .collect();
    let path = sb.dir.path().join("script.json");
    let body = json!({"turns": [{"chunks": chunks}, {"chunks": [{"text": "done"}]}]});
    std::fs::write(&path, body.to_string()).unwrap();
    path.display().to_string()
}

fn settings(sb: &Sandbox, v: Value) {
    std::fs::write(sb.home().join("settings.json"), v.to_string()).unwrap();
}

#[test]
fn without_a_mechanism_fail_if_unavailable_false_runs_unsandboxed_with_one_warning() {
    let sb = world();
    settings(&sb, json!({"sandbox": {"failIfUnavailable": false}}));
    let calls = [bash("echo x > ran.txt"), bash("echo y > ran2.txt")];
    let (r, stderr) = run(&sb, "none", &calls, &[], &[]);
    assert!(!r[0].1 && !r[1].1, "{r:?}");
    assert!(sb.work().join("ran.txt").exists() && sb.work().join("ran2.txt").exists());
    let warning = "Warning: no sandbox works here";
    assert_eq!(stderr.matches(warning).count(), 1, "{stderr}");
    assert!(
        stderr.contains("failIfUnavailable is false") && stderr.contains("Install bubblewrap"),
        "{stderr}"
    );
}

#[test]
fn sandbox_off_is_a_warning_notice_in_rpc_mode() {
    let sb = world();
    let script = script(&sb, &[]);
    let mut rpc = Rpc::start(&sb, &scripted_args(&[], &script, &["--sandbox", "off"]));
    let seen = rpc.call_seen(json!({"id": "s", "type": "get_state"}));
    let notice = rpc.wait(&json!({"type": "extension_ui_request", "method": "notify"}));
    assert_eq!(notice["notifyType"], "warning", "{notice}");
    let message = notice["message"].as_str().unwrap();
    assert!(message.starts_with("the sandbox is off"), "{seen:?}");
    let (_, stderr, code) = rpc.finish();
    assert_eq!(code, 0);
    assert_eq!(stderr.matches("the sandbox is off").count(), 1, "{stderr}");
}

#[test]
fn sandbox_off_is_a_warning_notice_event_in_json_mode() {
    let sb = world();
    let script = script(&sb, &[]);
    let args = scripted_args(&["--json"], &script, &["--sandbox", "off", "go"]);
    let out = sb.cmd(&args).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let notices: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["type"] == "extension_ui_request" && v["method"] == "notify")
        .collect();
    let off: Vec<&Value> = notices
        .iter()
        .filter(|n| {
            let message = n["message"].as_str().unwrap_or_default();
            message.starts_with("the sandbox is off")
        })
        .collect();
    assert_eq!(off.len(), 1, "{stdout}");
    assert_eq!(off[0]["notifyType"], "warning", "{stdout}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.matches("the sandbox is off").count(), 1, "{stderr}");
}

/// `sandbox_violation`, read with exactly the fields it may have.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ViolationLine {
    #[serde(rename = "type")]
    kind: String,
    tool_call_id: String,
    reason: String,
    path: Option<String>,
    host: Option<String>,
}

#[test]
fn a_stopped_command_is_a_sandbox_violation_event_in_json_mode() {
    let sb = world();
    let script = script(&sb, &[bash("echo x > /usr/keel-probe"), bash("true")]);
    let out = sb
        .cmd(&scripted_args(&["--json"], &script, &["go"]))
        .env("KEEL_SANDBOX_MECHANISM", "bwrap")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let lines: Vec<&str> = stdout.lines().collect();
    let at = |kind: &str, id: &str| {
        lines.iter().position(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            v["type"] == kind && v["toolCallId"] == id
        })
    };
    let violations: Vec<ViolationLine> = lines
        .iter()
        .filter(|l| l.starts_with("{\"type\":\"sandbox_violation\""))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(violations.len(), 1, "{stdout}");
    let v = &violations[0];
    assert_eq!(v.kind, "sandbox_violation");
    assert_eq!(v.tool_call_id, "call_0");
    assert_eq!(v.reason, "outside_writable_roots");
    assert_eq!(v.path.as_deref(), Some("/usr/keel-probe"));
    assert!(v.host.is_none());
    // Between the call's start and its end, whose result says so in one added line.
    let violation = at("sandbox_violation", "call_0").unwrap();
    assert!(at("tool_execution_start", "call_0").unwrap() < violation);
    let end = at("tool_execution_end", "call_0").unwrap();
    assert!(violation < end);
    let end: Value = serde_json::from_str(lines[end]).unwrap();
    let text = end["result"]["content"][0]["text"].as_str().unwrap();
    assert_eq!(
        text.matches("[sandbox (workspace-write): ").count(),
        1,
        "{text}"
    );
}

#[test]
fn a_daemon_sessions_snapshot_names_its_sandbox() {
    let sb = world();
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let mut c = d.client();
    let id = open(&mut c, &sb, "hello.json", &["--sandbox", "read-only"]);
    let attached = c.call("session/attach", json!({"sessionId": id}));
    let sandbox = &attached["result"]["snapshot"]["sandbox"];
    assert_eq!(sandbox["mode"], "read-only", "{attached}");
    assert_eq!(sandbox["network"], false);
    assert!(
        ["bubblewrap", "landlock"].contains(&sandbox["mechanism"].as_str().unwrap()),
        "{sandbox}"
    );
}

#[test]
fn an_escalation_asks_in_rpc_with_its_justification_and_an_approval_runs_it_outside() {
    let sb = world();
    let script = script(&sb, &[escalated("echo x > ../outside.txt")]);
    let mut rpc = Rpc::start(&sb, &scripted_args(&[], &script, &[]));
    rpc.send(&json!({"id": "p", "type": "prompt", "message": "go"}));
    let ask = rpc.wait(&json!({"type": "extension_ui_request", "method": "confirm"}));
    assert_eq!(ask["title"], "Run `bash` outside the sandbox?", "{ask}");
    let message = ask["message"].as_str().unwrap();
    assert!(
        message.starts_with("echo x > ../outside.txt\n"),
        "{message}"
    );
    assert!(
        message.contains("Justification: the build writes its cache next to the workspace"),
        "{message}"
    );
    assert!(!sb.dir.path().join("outside.txt").exists());
    rpc.send(&json!({"type": "extension_ui_response", "id": ask["id"], "confirmed": true}));
    let end = rpc.wait(&json!({"type": "tool_execution_end", "toolCallId": "call_0"}));
    assert_eq!(end["isError"], false, "{end}");
    rpc.wait(&json!({"type": "agent_settled"}));
    assert!(sb.dir.path().join("outside.txt").exists());
    let (_, _, code) = rpc.finish();
    assert_eq!(code, 0);
}

#[test]
fn an_escalation_blocks_a_print_run_with_exit_5() {
    let sb = world();
    let script = script(&sb, &[escalated("echo x > ../outside.txt")]);
    let run = sb.run(&scripted_args(&["-p"], &script, &["go"]));
    assert_eq!(run.code, 5, "{run}");
    assert!(run.stderr.contains("outside the sandbox"), "{run}");
    assert!(!sb.dir.path().join("outside.txt").exists());
}

#[test]
fn an_allow_rule_runs_an_escalation_only_with_allow_escalation_true_and_never_when_false() {
    let mut sb = world();
    let script = script(&sb, &[escalated("echo x > ../outside.txt")]);
    let args = scripted_args(&["-p"], &script, &["go"]);
    let rule = json!(["Bash(echo *)"]);
    // A rule alone does not: the call still needs an approval nobody can give here.
    settings(&sb, json!({"permissions": {"allow": rule}}));
    assert_eq!(sb.run(&args).code, 5);
    assert!(!sb.dir.path().join("outside.txt").exists());
    // Never when the settings forbid it: refused, the model goes on.
    let never = json!({"permissions": {"allow": rule}, "sandbox": {"allowEscalation": false}});
    settings(&sb, never);
    sb.seed += 1;
    let (r, _) = run(
        &sb,
        "auto",
        &[escalated("echo x > ../outside.txt")],
        &[],
        &[],
    );
    assert!(
        r[0].1 && r[0].0.contains("sandbox.allowEscalation is false"),
        "{r:?}"
    );
    assert!(!sb.dir.path().join("outside.txt").exists());
    // The rule with allowEscalation true: it runs outside without asking.
    let allowed = json!({"permissions": {"allow": rule}, "sandbox": {"allowEscalation": true}});
    settings(&sb, allowed);
    sb.seed += 1;
    let run = sb.run(&args);
    assert_eq!(run.code, 0, "{run}");
    assert!(sb.dir.path().join("outside.txt").exists());
}

#[test]
fn print_mode_shows_what_the_sandbox_stopped_on_stderr() {
    let sb = world();
    let script = script(&sb, &[bash("echo x > /usr/keel-probe")]);
    let run = sb.run(&scripted_args(&["-p"], &script, &["go"]));
    assert_eq!(run.code, 0, "{run}");
    assert!(
        run.stderr
            .contains("  ⊘ sandbox (outside writable roots): /usr/keel-probe\n"),
        "{run}"
    );
}
