//! Permission rules at the kernel seam (`turn::check_permission`), on the scripted provider:
//! a deny rule is a tool error naming the rule and its origin (also inside a compound command
//! and for read-only tools), an allow rule runs a call without approval in `ask` and
//! `accept-edits`, an ask rule asks even in `auto`, and `accept-edits` runs edits while shell
//! commands and mutating MCP tools ask. Tests wait on events, never on time.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use keel::kernel::event::{ApprovalDecision, Event, EventPayload, RunOutcome};
use keel::kernel::policy::Rules;
use keel::kernel::tool::external::{BoxFuture, ExternalCall, ExternalSpec, ToolSource};
use keel::kernel::tool::{ToolOutput, ToolSpec};
use keel::{AgentConfig, Permission};
use serde_json::{json, Value};

use crate::common::kernel::{self as kit, rt, scripted};

const ORIGIN: &str = "/p/.keel/settings.json";

fn rules(work: &Path, deny: &[&str], ask: &[&str], allow: &[&str]) -> Arc<Rules> {
    let list = |r: &[&str]| -> Vec<(String, String)> {
        r.iter()
            .map(|r| (r.to_string(), ORIGIN.to_string()))
            .collect()
    };
    let (rules, warnings) = Rules::build(
        &list(deny),
        &list(ask),
        &list(allow),
        work,
        Path::new("/home/nobody"),
    );
    assert!(warnings.is_empty(), "{warnings:?}");
    Arc::new(rules)
}

fn config(work: &Path, permission: Permission, rules: Arc<Rules>) -> AgentConfig {
    let mut c = AgentConfig::new(work.to_path_buf(), work.to_path_buf());
    c.bash_timeout = Duration::from_secs(30);
    c.permission = permission;
    c.rules = rules;
    c
}

/// A script whose first turn makes `calls` (`(tool, args)`), then answers "done".
fn script(calls: &[(&str, Value)]) -> String {
    let chunks: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (name, args))| json!({"toolCall": {"id": format!("c{i}"), "name": name, "arguments": args}}))
        .collect();
    json!({"turns": [{"chunks": chunks}, {"chunks": [{"text": "done"}]}]}).to_string()
}

struct Ran {
    /// `(tool, result text, is_error)` of each finished call.
    results: Vec<(String, String, bool)>,
    /// Tools an approval was asked for.
    asked: Vec<String>,
    outcome: RunOutcome,
}

/// Runs one prompt; approvals are answered `answer` (when the config can ask).
fn run(c: AgentConfig, calls: &[(&str, Value)], answer: ApprovalDecision) -> Ran {
    let s = kit::session(c, scripted(&script(calls)), Vec::new());
    rt().block_on(async {
        let mut rx = s.subscribe();
        let done = s.prompt("go".into()).unwrap();
        let mut ran = Ran {
            results: Vec::new(),
            asked: Vec::new(),
            outcome: RunOutcome::Completed,
        };
        while let Some(ev) = rx.recv().await {
            let ev: &Event = &ev;
            match &ev.payload {
                EventPayload::ApprovalRequested {
                    call_id, tool_name, ..
                } => {
                    ran.asked.push(tool_name.clone());
                    s.approve(call_id, answer);
                }
                EventPayload::ToolCallFinished {
                    tool_name, result, ..
                } => ran
                    .results
                    .push((tool_name.clone(), result.text(), result.is_error)),
                EventPayload::AgentSettled { .. } => break,
                _ => {}
            }
        }
        ran.outcome = done.await.unwrap();
        ran
    })
}

fn bash(command: &str) -> (&'static str, Value) {
    ("bash", json!({ "command": command }))
}

#[test]
fn a_deny_rule_stops_rm_inside_a_compound_command_and_names_the_rule() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("x"), "keep").unwrap();
    let r = rules(dir.path(), &["Bash(rm:*)"], &[], &[]);
    let ran = run(
        config(dir.path(), Permission::Auto, r),
        &[bash("echo ok && rm -f x")],
        ApprovalDecision::Allow,
    );
    assert_eq!(ran.outcome, RunOutcome::Completed);
    assert_eq!(
        ran.results,
        [(
            "bash".to_string(),
            format!("Tool `bash` denied by rule `Bash(rm:*)` (from {ORIGIN})"),
            true
        )]
    );
    assert!(dir.path().join("x").exists(), "rm never ran");
}

#[test]
fn an_allow_rule_runs_echo_in_ask_mode_while_touch_still_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let r = rules(dir.path(), &[], &[], &["Bash(echo:*)"]);
    let ran = run(
        config(dir.path(), Permission::Ask, r),
        &[bash("echo hi | echo there"), bash("touch t")],
        ApprovalDecision::Allow,
    );
    assert_eq!(ran.results[0], ("bash".into(), "there\n".into(), false));
    assert!(ran.results[1].2, "touch is refused: {:?}", ran.results[1]);
    assert!(
        matches!(ran.outcome, RunOutcome::Blocked { .. }),
        "{:?}",
        ran.outcome
    );
    assert!(!dir.path().join("t").exists());
}

#[test]
fn an_ask_rule_asks_even_in_auto_mode() {
    let dir = tempfile::tempdir().unwrap();
    let r = rules(dir.path(), &[], &["Bash(git push:*)"], &[]);
    let mut c = config(dir.path(), Permission::Auto, r);
    c.can_ask = true;
    let ran = run(
        c,
        &[bash("git push origin main"), bash("echo ran")],
        ApprovalDecision::Deny,
    );
    assert_eq!(ran.asked, ["bash"]);
    assert_eq!(ran.results[0].1, "Tool `bash` was denied by the user");
    assert_eq!(ran.results[1], ("bash".into(), "ran\n".into(), false));
}

#[test]
fn a_read_deny_stops_the_read_tool() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(".env"), "SECRET=1").unwrap();
    std::fs::write(dir.path().join("ok.txt"), "fine").unwrap();
    let r = rules(dir.path(), &["Read(./.env)"], &[], &[]);
    let ran = run(
        config(dir.path(), Permission::Auto, r),
        &[
            ("read", json!({"path": ".env"})),
            ("read", json!({"path": "ok.txt"})),
        ],
        ApprovalDecision::Allow,
    );
    assert_eq!(
        ran.results[0],
        (
            "read".into(),
            format!("Tool `read` denied by rule `Read(./.env)` (from {ORIGIN})"),
            true
        )
    );
    assert!(
        !ran.results[1].2 && ran.results[1].1.contains("fine"),
        "{:?}",
        ran.results[1]
    );
}

#[test]
fn accept_edits_runs_edits_and_asks_for_bash() {
    let dir = tempfile::tempdir().unwrap();
    let ran = run(
        config(dir.path(), Permission::AcceptEdits, Arc::default()),
        &[
            ("write", json!({"path": "w.txt", "content": "w"})),
            bash("touch t"),
        ],
        ApprovalDecision::Allow,
    );
    assert!(!ran.results[0].2, "{:?}", ran.results[0]);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("w.txt")).unwrap(),
        "w"
    );
    assert!(
        matches!(ran.outcome, RunOutcome::Blocked { ref tool_name, .. } if tool_name == "bash")
    );
    assert!(!dir.path().join("t").exists());
}

#[test]
fn an_allow_rule_runs_bash_in_accept_edits_and_asked_calls_reach_the_front_end() {
    let dir = tempfile::tempdir().unwrap();
    let r = rules(dir.path(), &[], &[], &["Bash(echo:*)"]);
    let mut c = config(dir.path(), Permission::AcceptEdits, r);
    c.can_ask = true;
    let ran = run(
        c,
        &[bash("echo a"), bash("touch t")],
        ApprovalDecision::Allow,
    );
    assert_eq!(ran.asked, ["bash"], "only touch asks");
    assert_eq!(ran.outcome, RunOutcome::Completed);
    assert!(dir.path().join("t").exists());
}

#[derive(Debug)]
struct Mcp;

impl ToolSource for Mcp {
    fn ready(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
    fn tools(&self) -> Vec<ExternalSpec> {
        ["mcp__db__query", "mcp__db__drop"]
            .iter()
            .map(|n| ExternalSpec {
                spec: ToolSpec {
                    name: n.to_string().into(),
                    description: "db".into(),
                    parameters: json!({"type": "object"}),
                },
                read_only: *n == "mcp__db__query",
            })
            .collect()
    }
    fn call<'a>(
        &'a self,
        name: &'a str,
        _: &'a Value,
        _: ExternalCall,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move { ToolOutput::ok(format!("{name} ran")) })
    }
}

#[test]
fn mcp_tools_obey_rules_and_accept_edits() {
    let dir = tempfile::tempdir().unwrap();
    let r = rules(dir.path(), &["mcp__db__query"], &[], &[]);
    let mut c = config(dir.path(), Permission::AcceptEdits, r);
    c.external_tools = vec![Arc::new(Mcp)];
    let ran = run(
        c,
        &[("mcp__db__query", json!({})), ("mcp__db__drop", json!({}))],
        ApprovalDecision::Allow,
    );
    assert_eq!(
        ran.results[0].1,
        format!("Tool `mcp__db__query` denied by rule `mcp__db__query` (from {ORIGIN})"),
        "a read-only MCP tool is governed by rules too"
    );
    assert!(
        matches!(ran.outcome, RunOutcome::Blocked { ref tool_name, .. } if tool_name == "mcp__db__drop"),
        "a mutating MCP tool asks in accept-edits: {:?}",
        ran.outcome
    );
}
