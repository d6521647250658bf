//! `--max-cost USD` (alias `--max-budget-usd`): a run stops before the model call that would
//! follow once its cost so far exceeds the cap (outcome `budget`, exit 4), its session saved so
//! that `--continue` goes on; a model without known prices cannot take a cap. A run's cost
//! includes its subagents': a child spends from its parent's cap, and crossing it anywhere ends
//! the run `budget`.

use serde_json::{json, Value};

use crate::common::support::{scripted_args, Sandbox};

/// Model calls made: one `turn_start` each.
fn calls(lines: &[serde_json::Value]) -> usize {
    lines.iter().filter(|l| l["type"] == "turn_start").count()
}

#[test]
fn a_run_stops_with_budget_once_it_costs_more_than_the_cap_and_continue_goes_on() {
    // Each call costs $0.12 (100k input at $1/M, 10k output at $2/M): after 3 calls $0.36 > $0.30.
    let sb = Sandbox::new();
    let run = sb.scripted(
        "--json",
        "budget.json",
        &["--max-cost", "0.3", "look around"],
    );
    assert_eq!(run.code, 4, "{run}");
    let lines = run.stdout_lines();
    assert_eq!(calls(&lines), 3, "{run}");
    let settled = lines.iter().find(|l| l["type"] == "agent_settled").unwrap();
    assert_eq!(settled["outcome"], "budget");
    let result = lines.last().unwrap();
    assert_eq!(result["outcome"], "budget");
    assert_eq!(result["exitCode"], 4);
    assert_eq!(result["error"]["kind"], "budget");
    let message = result["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("0.3") && message.contains("0.36"),
        "{message}"
    );

    // The session was saved; --continue goes on from it with a fresh run (and a fresh cap).
    assert_eq!(sb.session_files().len(), 1);
    let more = sb.scripted(
        "--json",
        "budget.json",
        &["--continue", "--max-budget-usd", "0.3", "go on"],
    );
    assert_eq!(more.code, 0, "{more}");
    let lines = more.stdout_lines();
    assert_eq!(lines.last().unwrap()["finalText"], "Done.");
    assert_eq!(sb.session_files().len(), 1, "the same session went on");
    let text = std::fs::read_to_string(&sb.session_files()[0]).unwrap();
    assert!(text.contains("look around") && text.contains("Done."));
}

#[test]
fn a_cap_that_is_not_reached_changes_nothing() {
    let run = Sandbox::new().scripted("-p", "budget.json", &["--max-cost", "5", "go on"]);
    assert_eq!(run.code, 0, "{run}");
    assert_eq!(run.stdout, "Done.\n");
}

#[test]
fn a_model_without_known_prices_cannot_take_a_cap() {
    let run = Sandbox::new().scripted("-p", "hello.json", &["--max-cost", "1", "hi"]);
    assert_eq!(run.code, 3, "{run}");
    assert!(run.stderr.contains("--max-cost"), "{}", run.stderr);
    assert!(run.stderr.contains("price"), "{}", run.stderr);
}

#[test]
fn a_cap_that_is_not_a_positive_amount_is_a_usage_error() {
    for bad in ["-1", "abc", "NaN"] {
        let run = Sandbox::new().scripted("-p", "budget.json", &["--max-cost", bad, "go on"]);
        assert_eq!(run.code, 2, "{bad}: {run}");
    }
}

/// The same cap through the daemon: the run stops there with `budget` (exit 4) and a
/// `--continue` through the daemon goes on in the same session.
#[test]
fn through_the_daemon_the_cap_stops_the_run_alike() {
    let sb = Sandbox::new();
    let d = crate::common::daemon::Daemon::start(&sb, &["--idle-exit", "0"]);
    let socket = d.socket.display().to_string();
    let script = crate::common::support::fixture("budget.json");
    let via = |args: &[&str]| {
        let mut all = scripted_args(&["--json"], &script, &[]);
        all.extend_from_slice(args);
        all.extend(["--daemon", "--socket", &socket]);
        sb.run(&all)
    };
    let run = via(&["--max-cost", "0.3", "look around"]);
    assert_eq!(run.code, 4, "{run}");
    let lines = run.stdout_lines();
    assert_eq!(calls(&lines), 3, "{run}");
    assert_eq!(lines.last().unwrap()["outcome"], "budget");
    let more = via(&["--continue", "--max-cost", "0.3", "go on"]);
    assert_eq!(more.code, 0, "{more}");
    assert_eq!(more.stdout_lines().last().unwrap()["finalText"], "Done.");
}

/// Summarising for compaction is a model call too: its cost counts toward the cap. Here the
/// calls alone ($0.16 + $0.01) stay under $0.30; with the summary ($0.20) the run is over it
/// before its third call.
#[test]
fn a_compaction_s_cost_counts_toward_the_cap() {
    let run = Sandbox::new().scripted(
        "--json",
        "budget_compaction.json",
        &["--max-cost", "0.3", "look around"],
    );
    let lines = run.stdout_lines();
    assert!(lines.iter().any(|l| l["type"] == "compaction_end"), "{run}");
    assert_eq!(run.code, 4, "{run}");
    assert_eq!(calls(&lines), 2, "{run}");
}

/// A parent that starts a `task` child, each model call $0.01 (10k input at $1/M), the child
/// listing files until it is stopped, the parent answering after the child's result.
fn parent_and_child_script(sb: &Sandbox) -> String {
    let call = json!({"input": 10000, "output": 0});
    let script = json!({
        "cost": {"input": 1.0, "output": 2.0},
        "turns": [
            {"match": "^survey", "usage": call, "chunks": [{"toolCall": {"id": "t1", "name": "task",
                "arguments": {"description": "look", "prompt": "CHILD list the files"}}}]},
            {"match": "^CHILD", "repeat": true, "usage": call, "chunks": [{"toolCall": {"name": "ls",
                "arguments": {"path": "."}}}]},
            {"match": "^survey", "usage": call, "chunks": [{"text": "parent done"}]}
        ]
    });
    let path = sb.dir.path().join("parent_and_child.json");
    std::fs::write(&path, script.to_string()).unwrap();
    path.display().to_string()
}

/// What a run capped at $0.025 with [`parent_and_child_script`] must show: the parent's call
/// ($0.01), then the child's two ($0.03 in all) before the child's third is refused; the child
/// ends `budget`, the parent stops before its next call (exit 4), and the result's cost is the
/// $0.03 spent by both. (Before, the child had its own $0.025 and the run ended `success`,
/// exit 0, reporting the parent's $0.02.)
fn assert_the_child_spent_from_the_parent_s_cap(run: &crate::common::support::Run) {
    assert_eq!(run.code, 4, "{run}");
    let lines = run.stdout_lines();
    assert_eq!(
        calls(&lines),
        1,
        "the parent's second call was not made: {run}"
    );
    let end = lines
        .iter()
        .find(|l| l["type"] == "tool_execution_end" && l["toolCallId"] == "t1")
        .expect("the task call ended");
    assert_eq!(end["isError"], true, "{end}");
    let child = &end["result"]["details"]["usage"];
    assert_eq!(child["input"], 20000, "the child made two calls: {end}");
    let result = lines.last().unwrap();
    assert_eq!(result["outcome"], "budget", "{result}");
    assert_eq!(result["error"]["kind"], "budget");
    let message = result["error"]["message"].as_str().unwrap();
    assert!(message.contains("$0.0300"), "{message}");
    let cost = result["usage"]["cost"]["total"].as_f64().unwrap();
    assert!(
        (cost - 0.03).abs() < 1e-9,
        "the child's cost is counted: {result}"
    );
    assert_eq!(result["usage"]["input"], 30000, "{result}");
}

#[test]
fn a_subagent_spends_from_its_parent_s_cap_and_its_cost_is_reported() {
    let sb = Sandbox::new();
    assert_the_child_spent_from_the_parent_s_cap(&capped_survey(&sb, &[]));
}

/// `keel --json` on the parent-and-child script capped at $0.025, with `extra` flags.
fn capped_survey(sb: &Sandbox, extra: &[&str]) -> crate::common::support::Run {
    let script = parent_and_child_script(sb);
    let mut args = scripted_args(
        &["--json"],
        &script,
        &["--max-cost", "0.025", "survey the project"],
    );
    args.extend_from_slice(extra);
    sb.run(&args)
}

/// The same through the daemon: the child is a session of the daemon's host, and still draws
/// from its parent's cap.
#[test]
fn through_the_daemon_a_subagent_spends_from_its_parent_s_cap() {
    let sb = Sandbox::new();
    let d = crate::common::daemon::Daemon::start(&sb, &["--idle-exit", "0"]);
    let socket = d.socket.display().to_string();
    let run = capped_survey(&sb, &["--daemon", "--socket", &socket]);
    assert_the_child_spent_from_the_parent_s_cap(&run);
}

/// Without a cap, the result's cost is still the parent's and the child's.
#[test]
fn an_uncapped_run_reports_its_subagents_cost() {
    let sb = Sandbox::new();
    let call = json!({"input": 10000, "output": 0});
    let script = json!({
        "cost": {"input": 1.0, "output": 2.0},
        "turns": [
            {"match": "^survey", "usage": call, "chunks": [{"toolCall": {"id": "t1", "name": "task",
                "arguments": {"description": "look", "prompt": "CHILD answer"}}}]},
            {"match": "^CHILD", "usage": call, "chunks": [{"text": "child done"}]},
            {"match": "^survey", "usage": call, "chunks": [{"text": "parent done"}]}
        ]
    });
    let path = sb.dir.path().join("uncapped.json");
    std::fs::write(&path, script.to_string()).unwrap();
    let path = path.display().to_string();
    let run = sb.run(&scripted_args(&["--json"], &path, &["survey"]));
    assert_eq!(run.code, 0, "{run}");
    let result: Value = run.stdout_lines().last().unwrap().clone();
    assert_eq!(result["outcome"], "success");
    assert_eq!(result["usage"]["input"], 30000, "{result}");
    let cost = result["usage"]["cost"]["total"].as_f64().unwrap();
    assert!((cost - 0.03).abs() < 1e-9, "{result}");
}

/// RPC mode: the run settles `budget` once its child crossed the cap, and `get_session_stats`
/// counts the child's tokens and cost with the parent's.
#[test]
fn in_rpc_mode_the_cap_holds_and_the_stats_count_the_subagent() {
    let sb = Sandbox::new();
    let script = parent_and_child_script(&sb);
    let mut rpc =
        crate::common::rpc::Rpc::start(&sb, &scripted_args(&[], &script, &["--max-cost", "0.025"]));
    rpc.call(json!({"id": "p", "type": "prompt", "message": "survey the project"}));
    let settled = rpc.wait(&json!({"type": "agent_settled"}));
    assert_eq!(settled["outcome"], "budget", "{settled}");
    let stats = rpc.call(json!({"id": "s", "type": "get_session_stats"}));
    let data = &stats["data"];
    assert_eq!(data["tokens"]["input"], 30000, "{stats}");
    let cost = data["cost"].as_f64().unwrap();
    assert!((cost - 0.03).abs() < 1e-9, "{stats}");
    let (_, _, code) = rpc.finish();
    assert_eq!(code, 0);
}
