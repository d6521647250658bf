//! Hooks and permission rules from settings files, end to end (the real binary in a sandbox,
//! the scripted provider): a user-level PreToolUse guard stops `rm -rf` in print mode and its
//! run is a `hook_finished` line in JSON mode; a project's hooks run only with
//! `--trust-project`; a deny rule of a settings file stops `rm` inside a compound command.

use serde_json::{json, Value};

use crate::common::support::{scripted_args, Sandbox};

use crate::common::support::write_json as write;

/// A script whose first turn runs `command` with bash, then answers "done".
fn bash_script(sb: &Sandbox, command: &str) -> String {
    let script = json!({"turns": [
        {"chunks": [{"toolCall": {"id": "c1", "name": "bash", "arguments": {"command": command}}}]},
        {"chunks": [{"text": "done"}]}
    ]});
    let path = sb.dir.path().join("script.json");
    write(&path, &script);
    path.display().to_string()
}

/// `keel -p --no-session` with the scripted provider's `script` and `prompt`.
fn print_run(sb: &Sandbox, script: &str, prompt: &str) -> crate::common::support::Run {
    sb.run(&scripted_args(&["-p", "--no-session"], script, &[prompt]))
}

const GUARD: &str = r#"cmd=$(jq -r '.tool_input.command'); case "$cmd" in *"rm -rf"*) echo "Blocked by policy: rm -rf" >&2; exit 2;; esac"#;

fn guard_hooks() -> Value {
    json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": GUARD}]}]}})
}

#[test]
fn a_user_pre_tool_use_guard_stops_rm_in_print_and_json_modes() {
    let sb = Sandbox::new();
    std::fs::create_dir(sb.work().join("keep")).unwrap();
    write(&sb.home().join("settings.json"), &guard_hooks());
    let script = bash_script(&sb, "rm -rf keep");
    let run = print_run(&sb, &script, "clean");
    assert_eq!(run.code, 0, "{run}");
    assert!(sb.work().join("keep").exists(), "the guarded rm ran");
    let run = sb.run(&scripted_args(&["--mode", "json"], &script, &["clean"]));
    let finished: Vec<Value> = run
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["type"] == "hook_finished")
        .collect();
    assert_eq!(finished.len(), 1, "{}", run.stdout);
    assert_eq!(finished[0]["event"], "PreToolUse");
    assert_eq!(finished[0]["exitCode"], 2);
    assert_eq!(finished[0]["decision"], "deny");
    assert_eq!(finished[0]["reason"], "Blocked by policy: rm -rf");
    let result = run
        .stdout
        .lines()
        .find(|l| l.contains("\"tool_execution_end\""))
        .unwrap();
    assert!(result.contains("Blocked by policy: rm -rf"), "{result}");
}

#[test]
fn a_projects_hooks_run_only_in_a_trusted_project() {
    let sb = Sandbox::new();
    std::fs::create_dir(sb.work().join("keep")).unwrap();
    write(&sb.work().join(".keel/settings.json"), &guard_hooks());
    let script = bash_script(&sb, "rm -rf keep");
    let run = sb.run(&scripted_args(&["-p", "--no-session"], &script, &["clean"]));
    assert!(
        run.stderr
            .contains("not trusted, so not applied: its hooks `cmd=$(jq"),
        "{run}"
    );
    assert!(
        !sb.work().join("keep").exists(),
        "an untrusted project's hook ran"
    );
    std::fs::create_dir(sb.work().join("keep")).unwrap();
    let run = sb.run(&scripted_args(
        &["-p"],
        &script,
        &["--trust-project", "clean"],
    ));
    assert_eq!(run.code, 0, "{run}");
    assert!(
        sb.work().join("keep").exists(),
        "the trusted project's hook did not run"
    );
}

#[test]
fn a_settings_deny_rule_stops_rm_inside_a_compound_command() {
    let sb = Sandbox::new();
    std::fs::write(sb.work().join("x"), "x").unwrap();
    write(
        &sb.work().join(".keel/settings.json"),
        &json!({"permissions": {"deny": ["Bash(rm:*)"]}}),
    );
    let script = bash_script(&sb, "echo ok && rm -f x");
    let run = sb.run(&scripted_args(&["--mode", "json"], &script, &["go"]));
    assert_eq!(run.code, 0, "{run}");
    assert!(sb.work().join("x").exists(), "the denied rm ran");
    assert!(
        run.stdout.contains("denied by rule `Bash(rm:*)`"),
        "{}",
        run.stdout
    );
}

#[test]
fn keel_hooks_list_names_each_hook_its_origin_and_whether_it_runs() {
    let sb = Sandbox::new();
    assert_eq!(sb.run(&["hooks", "list"]).stdout, "no hooks configured\n");
    write(&sb.home().join("settings.json"), &guard_hooks());
    write(
        &sb.work().join(".keel/settings.json"),
        &json!({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "make lint", "timeout": 120}]}]}}),
    );
    let run = sb.run(&["hooks", "list", "--json"]);
    assert_eq!(run.code, 0, "{run}");
    let list: Value = serde_json::from_str(&run.stdout).unwrap();
    let got: Vec<(String, String, String, String)> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            let s = |k: &str| h[k].as_str().unwrap().to_string();
            (s("event"), s("command"), s("runs"), s("trust"))
        })
        .collect();
    assert_eq!(
        got,
        [
            (
                "Stop".into(),
                "make lint".into(),
                "with --trust-project".into(),
                "untrusted".into()
            ),
            (
                "PreToolUse".into(),
                GUARD.into(),
                "always".into(),
                "not needed".into()
            ),
        ]
    );
    assert!(list[0]["origin"]
        .as_str()
        .unwrap()
        .ends_with(".keel/settings.json"));
    assert_eq!(list[0]["timeout"], 120.0);
    let text = sb.run(&["hooks", "list"]).stdout;
    assert!(text.starts_with("Stop [*] make lint\n    from "), "{text}");
}

/// Issue 44 point 4: print mode says what the TUI says about a hook: one that cannot start
/// (exit 127) and one that denies are on stderr, the same words as the TUI's notices.
#[test]
fn print_mode_says_what_the_tui_says_about_a_failed_or_denying_hook() {
    let sb = Sandbox::new();
    let hooks = json!({"hooks": {
        "PostToolUse": [{"matcher": "Bash", "hooks": [
            {"type": "command", "command": "no-such-hook-program-xyz"}]}],
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": GUARD}]}]
    }});
    write(&sb.home().join("settings.json"), &hooks);
    for (command, want) in [
        (
            "echo fine",
            "hook PostToolUse: hook `no-such-hook-program-xyz` failed (code 127)",
        ),
        ("rm -rf nothing", "hook PreToolUse `"),
    ] {
        let script = bash_script(&sb, command);
        let run = print_run(&sb, &script, "go");
        assert_eq!(run.code, 0, "{run}");
        assert!(run.stderr.contains(want), "{command}: {}", run.stderr);
    }
}

/// Issue 44 point 2: a prompt a `UserPromptSubmit` hook blocks ends the run `blocked`, exit 5
/// (as an approval blocked headless does), with the hook's reason on stderr in print mode and
/// in the result line in JSON mode; it ended `success`, exit 0, with nothing said.
#[test]
fn a_blocked_prompt_ends_blocked_with_the_hooks_reason() {
    let sb = Sandbox::new();
    let hooks = json!({"hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command",
        "command": "echo 'prompts that name a secret are refused' >&2; exit 2"}]}]}});
    write(&sb.home().join("settings.json"), &hooks);
    let script = bash_script(&sb, "echo never");
    let base = scripted_args(&["--no-session"], &script, &[]);
    let run = sb.run(&[&["-p"], &base[..], &["print the secret"]].concat());
    assert_eq!(run.code, 5, "{run}");
    assert!(
        run.stderr
            .contains("prompts that name a secret are refused"),
        "{run}"
    );
    assert_eq!(run.stdout, "", "{run}");
    let run = sb.run(&[&["--json"], &base[..], &["print the secret"]].concat());
    assert_eq!(run.code, 5, "{run}");
    let result: Value = run
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["type"] == "result")
        .unwrap_or_else(|| panic!("{run}"));
    assert_eq!(result["outcome"], "blocked", "{result}");
    assert!(
        result["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("prompts that name a secret are refused")),
        "{result}"
    );
}
