//! `--max-cost USD` (alias `--max-budget-usd`): a run stops before the model call that would
//! follow once its cost so far exceeds the cap (outcome `budget`, exit 4), its session saved so
//! that `--continue` goes on; a model without known prices cannot take a cap.

use crate::common::support::Sandbox;

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
        let mut all = vec!["--json", "--provider", "scripted", "--script", &script];
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
