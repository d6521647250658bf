//! A model that repeats the same failing tool call is stopped: after `--max-repeated-failures`
//! (default 3) identical calls (same tool, same arguments) that all failed, the run ends
//! `failed` with `error.kind` `tool_loop` and exit 1, naming the call. Identical calls that
//! succeed, or failing calls with other arguments, go on; 0 turns the check off.

use serde_json::Value;

use crate::common::daemon::Daemon;
use crate::common::support::{fixture, scripted_args, snap, Run, Sandbox};
use crate::daemon_clients::comparable;

/// The JSON `result` line of a run.
fn result(run: &Run) -> Value {
    let last = run.stdout.lines().last().unwrap_or("");
    let v: Value = serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {run}"));
    assert_eq!(v["type"], "result", "{run}");
    v
}

fn tool_calls(run: &Run) -> usize {
    run.stdout
        .matches("\"type\":\"tool_execution_start\"")
        .count()
}

/// Regression: a model repeating `read` of a missing file ran 236 turns in 40 s. `--max-turns`
/// is only a safety net here: the run must stop long before it.
#[test]
fn a_model_repeating_the_same_failing_call_is_stopped_after_three() {
    let run = Sandbox::new().scripted("-p", "tool_loop.json", &["--max-turns", "10", "read it"]);
    assert_eq!(run.code, 1, "{run}");
    assert_eq!(run.stderr.matches("▸ read").count(), 3, "{run}");
    snap("exit_1_tool_loop", &run.to_string());

    let sb = Sandbox::new();
    let run = sb.scripted(
        "--json",
        "tool_loop.json",
        &["--max-turns", "10", "read it"],
    );
    let r = result(&run);
    assert_eq!(
        (&r["outcome"], &r["exitCode"]),
        (&"failed".into(), &1.into())
    );
    assert_eq!(r["error"]["kind"], "tool_loop", "{r}");
    let message = r["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(r#"3 times: read {"path":"missing.txt"}"#),
        "{message}"
    );
    assert_eq!(tool_calls(&run), 3, "{run}");
}

#[test]
fn identical_calls_that_succeed_or_failing_calls_that_differ_are_not_a_loop() {
    // `ls .` succeeds every time: only the turn limit stops it.
    let run = Sandbox::new().scripted("--json", "max_turns.json", &["--max-turns", "5", "look"]);
    assert_eq!(result(&run)["error"]["kind"], "turn_limit", "{run}");
    assert_eq!(tool_calls(&run), 5);
    // Four failing reads, never the same one twice in a row: the model gets to finish.
    let run = Sandbox::new().scripted("--json", "tool_loop_varied.json", &["look"]);
    assert_eq!(result(&run)["outcome"], "success", "{run}");
    assert_eq!(tool_calls(&run), 4);
}

#[test]
fn max_repeated_failures_sets_the_count_and_zero_turns_the_check_off() {
    let run = Sandbox::new().scripted(
        "--json",
        "tool_loop.json",
        &["--max-repeated-failures", "0", "--max-turns", "6", "go"],
    );
    assert_eq!(result(&run)["error"]["kind"], "turn_limit", "{run}");
    assert_eq!(tool_calls(&run), 6);
    let run = Sandbox::new().scripted(
        "--json",
        "tool_loop.json",
        &["--max-repeated-failures", "5", "--max-turns", "10", "go"],
    );
    assert_eq!(result(&run)["error"]["kind"], "tool_loop", "{run}");
    assert_eq!(tool_calls(&run), 5);
}

/// The setting reaches a session the daemon runs: the same output as in-process.
#[test]
fn max_repeated_failures_applies_through_the_daemon() {
    let there = Sandbox::new();
    let d = Daemon::start(&there, &["--idle-exit", "0"]);
    let socket = d.socket.display().to_string();
    let script = fixture("tool_loop.json");
    let base = scripted_args(
        &["--json"],
        &script,
        &["--max-repeated-failures", "2", "--max-turns", "10", "go"],
    );
    let local = Sandbox::new().run(&base);
    let mut remote = vec!["--daemon", "--socket", &socket];
    remote.extend_from_slice(&base);
    let remote = there.run(&remote);
    assert_eq!(result(&remote)["error"]["kind"], "tool_loop", "{remote}");
    assert_eq!(tool_calls(&remote), 2, "{remote}");
    assert_eq!(comparable(&local), comparable(&remote));
}
