//! A foreground `bash` call that reaches its timeout runs on as a background job (issue 47,
//! point 5), through keel's binary and the scripted provider, under bubblewrap and the
//! Landlock fallback: its output so far is the call's result, the model reads on from there,
//! the job ends with the run; `git` and `sleep` are still ended at their timeout, as every
//! command is with `jobs.backgroundOnTimeout` off; what it planted in a protected path is
//! undone when the call returns and again when the job ends.

use serde_json::json;

use crate::common::support::alive;
use crate::jobs_tools::{call, results, run, run_with, text};
use crate::sandbox::{bash, mechanisms, run_as_events, users_and_mechanisms, world, world_as};

/// A python program that prints `second` 1.5 s in, then waits; `marker` finds it.
fn slow(marker: &str) -> String {
    format!(
        "python3 -c \"import time; time.sleep(1.5); print('second', flush=True); time.sleep(1000)\" {marker}"
    )
}

fn marker() -> String {
    format!("m{}", uuid::Uuid::new_v4().simple())
}

#[test]
fn a_foreground_command_past_its_timeout_runs_on_as_a_job() {
    for mech in mechanisms() {
        let sb = world();
        let marker = marker();
        let command = format!("echo first; {}", slow(&marker));
        let turns = vec![
            call("c1", "bash", json!({"command": command, "timeout": 1})),
            call("c2", "bash_output", json!({"id": "1", "wait": 30})),
            text("done"),
        ];
        let (events, stderr, code) = run(&sb, mech, turns);
        assert_eq!(code, Some(0), "{mech}: {stderr}");
        let r = results(&events);
        assert_eq!(r.len(), 2, "{mech}: {r:?}");
        assert_eq!(
            r[0],
            (
                "first\n\nCommand still running after 1s: it runs on in the background as job \
                 1. Read its new output with bash_output (id \"1\") or write_stdin (session_id \
                 1), stop it with bash_kill. You will be told when it ends."
                    .to_string(),
                false
            ),
            "{mech}"
        );
        assert_eq!(
            r[1],
            (format!("Job 1 (`{command}`) is running.\nsecond\n"), false),
            "{mech}"
        );
        let end = events
            .iter()
            .find(|v| v["type"] == "tool_execution_end")
            .unwrap();
        assert_eq!(end["result"]["details"]["job"]["id"], 1, "{mech}: {end}");
        assert_eq!(end["result"]["details"]["timedOut"], false, "{mech}: {end}");
        assert!(
            alive(&marker).is_empty(),
            "{mech}: the job outlived its run"
        );
    }
}

#[test]
fn git_sleep_and_the_setting_off_still_end_a_command_at_its_timeout() {
    let mech = mechanisms()[0];
    let sb = world();
    let (m1, m2) = (marker(), marker());
    let turns = vec![
        call(
            "c1",
            "bash",
            json!({"command": "FOO=1 sleep 30", "timeout": 1}),
        ),
        call(
            "c2",
            "bash",
            json!({"command": format!("git status >/dev/null && {}", slow(&m1)), "timeout": 1}),
        ),
        text("done"),
    ];
    let (events, stderr, code) = run(&sb, mech, turns);
    assert_eq!(code, Some(0), "{stderr}");
    let r = results(&events);
    assert_eq!(
        r[0],
        ("(no output)\n\nCommand timed out after 1s".into(), true)
    );
    assert_eq!(
        r[1],
        ("(no output)\n\nCommand timed out after 1s".into(), true)
    );
    // A world of its own: the test clock would give the run the same session file.
    let sb = world();
    let settings = json!({"jobs": {"backgroundOnTimeout": false}}).to_string();
    let turns = vec![
        call("c1", "bash", json!({"command": slow(&m2), "timeout": 1})),
        text("done"),
    ];
    let (events, stderr, code) = run_with(&sb, mech, &["--settings", &settings], turns);
    assert_eq!(code, Some(0), "{stderr}");
    let r = results(&events);
    assert_eq!(
        r[0],
        ("(no output)\n\nCommand timed out after 1s".into(), true)
    );
    assert!(alive(&m1).is_empty() && alive(&m2).is_empty());
}

/// As root and as `nobody`: under bubblewrap the hooks directory is read-only; under the
/// Landlock fallback the check when the call returns undoes what it planted before, the check
/// when its job ends what it planted after (against the state before the call).
#[test]
fn what_a_timed_out_call_plants_is_undone_when_it_returns_and_when_its_job_ends() {
    for (user, mech) in users_and_mechanisms() {
        let sb = world_as(user);
        let who = format!("{mech} as {user:?}");
        let marker = marker();
        let plant = |name: &str| {
            format!("{{ echo 'touch /tmp/pwned' > .git/hooks/{name}; chmod +x .git/hooks/{name}; }} 2>/dev/null")
        };
        let command = format!(
            "{}; python3 -c 'import time; time.sleep(1.5)'; {}; {}",
            plant("pre-commit"),
            plant("post-checkout"),
            slow(&marker)
        );
        let calls = [
            ("bash", json!({"command": command, "timeout": 1})),
            bash("test -e .git/hooks/pre-commit && echo present || echo absent"),
            // Until it printed `second`: post-checkout is planted then.
            ("bash_output", json!({"id": "1", "wait": 30})),
        ];
        let (r, stderr, _) = run_as_events(&sb, user, mech, &calls, &[], &[]);
        assert!(r[0].0.contains("as job 1"), "{who}: {r:?}\n{stderr}");
        assert_eq!(r[1].0, "absent\n", "{who}: {r:?}");
        assert!(r[2].0.ends_with("second\n"), "{who}: {r:?}");
        for name in ["pre-commit", "post-checkout"] {
            let hook = sb.work().join(".git/hooks").join(name);
            assert!(!hook.exists(), "{who}: {name} stayed");
        }
        assert!(alive(&marker).is_empty(), "{who}: the job outlived its run");
    }
}
