//! Claude Code's settings files as keel's settings layers, end to end with the real binary
//! (issue 46 point 1): a guard hook in `~/.claude/settings.json` stops `rm -rf`; a project's
//! `.claude/settings.json` hooks are listed with their file and wait for the project's trust;
//! `keel config show` names the Claude files and lists what keel leaves out of them;
//! `--no-claude-files` turns them off and says so.

use serde_json::{json, Value};

use crate::common::support::Sandbox;

use crate::common::support::write_json as write;

/// The guard published Claude Code hooks use: `jq` over the payload, exit 2 on `rm -rf`.
const GUARD: &str = r#"cmd=$(jq -r '.tool_input.command'); case "$cmd" in *"rm -rf"*) echo "Blocked by policy: rm -rf" >&2; exit 2;; esac"#;

/// `~/.claude/settings.json` as a Claude Code user has it (HOME is the sandbox's temp dir).
fn claude_user_settings(sb: &Sandbox) -> std::path::PathBuf {
    let file = sb.dir.path().join(".claude/settings.json");
    write(
        &file,
        &json!({
            "$schema": "https://json.schemastore.org/claude-code-settings.json",
            "apiKeyHelper": "~/bin/key.sh",
            "includeCoAuthoredBy": false,
            "model": "sonnet",
            "env": {"CLAUDE_PROBE": "1"},
            "permissions": {"allow": ["WebFetch(domain:docs.rs)", "Bash(ls *)"]},
            "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
                {"type": "command", "command": GUARD},
                {"type": "prompt", "prompt": "Is this safe?"}
            ]}]}
        }),
    );
    file
}

#[test]
fn a_guard_in_the_users_claude_settings_stops_rm_rf_unless_claude_files_are_off() {
    let sb = Sandbox::new();
    std::fs::create_dir(sb.work().join("build")).unwrap();
    let file = claude_user_settings(&sb);
    let run = sb.bash_run("rm -rf build", &[]);
    assert_eq!(run.code, 0, "{run}");
    assert!(
        sb.work().join("build").exists(),
        "the guard did not run: {run}"
    );
    // One line about what keel leaves out of the file, naming it, no warning per key.
    let about: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.contains(&file.display().to_string()))
        .collect();
    assert_eq!(about.len(), 1, "{run}");
    assert!(about[0].contains("4 entries keel does not use (apiKeyHelper, includeCoAuthoredBy, permissions.allow[WebFetch(domain:docs.rs)], hooks.PreToolUse[Bash])"), "{run}");
    assert!(!run.stderr.contains("unknown key"), "{run}");

    let run = sb.bash_run("rm -rf build", &["--no-claude-files"]);
    assert_eq!(run.code, 0, "{run}");
    assert!(
        !sb.work().join("build").exists(),
        "a guard ran with Claude files off"
    );
    assert!(
        run.stderr
            .contains("Claude Code's settings files are off (--no-claude-files)"),
        "{run}"
    );
    assert!(run.stderr.contains(&file.display().to_string()), "{run}");
}

#[test]
fn claude_files_false_in_keels_settings_turns_them_off() {
    let sb = Sandbox::new();
    std::fs::create_dir(sb.work().join("build")).unwrap();
    claude_user_settings(&sb);
    write(
        &sb.home().join("settings.json"),
        &json!({"claudeFiles": false}),
    );
    let run = sb.bash_run("rm -rf build", &[]);
    assert_eq!(run.code, 0, "{run}");
    assert!(
        !sb.work().join("build").exists(),
        "a guard ran with Claude files off"
    );
    assert!(run.stderr.contains("\"claudeFiles\": false in "), "{run}");
}

#[test]
fn a_projects_claude_hooks_are_listed_with_their_file_and_wait_for_trust() {
    let sb = Sandbox::new();
    write(
        &sb.work().join(".claude/settings.json"),
        &json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
            {"type": "command", "command": "touch hook-ran"}]}]}}),
    );
    let run = sb.run(&["hooks", "list", "--json"]);
    assert_eq!(run.code, 0, "{run}");
    let list: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(list.as_array().unwrap().len(), 1, "{run}");
    assert!(list[0]["origin"]
        .as_str()
        .unwrap()
        .ends_with(".claude/settings.json"));
    assert_eq!(list[0]["trust"], "untrusted");
    assert_eq!(list[0]["runs"], "with --trust-project");
    let text = sb.run(&["hooks", "list"]).stdout;
    assert!(text.contains(".claude/settings.json"), "{text}");
    assert!(text.contains("untrusted"), "{text}");

    let ran = sb.work().join("hook-ran");
    let run = sb.bash_run("echo ok", &[]);
    assert_eq!(run.code, 0, "{run}");
    assert!(!ran.exists(), "an untrusted project's Claude hook ran");
    assert!(run.stderr.contains(".claude/settings.json"), "{run}");
    let run = sb.bash_run("echo ok", &["--trust-project"]);
    assert_eq!(run.code, 0, "{run}");
    assert!(
        ran.exists(),
        "the trusted project's Claude hook did not run: {run}"
    );
}

#[test]
fn config_show_names_the_claude_files_and_lists_what_keel_ignores_once() {
    let sb = Sandbox::new();
    let user = claude_user_settings(&sb);
    let project = sb.work().join(".claude/settings.json");
    write(
        &project,
        &json!({"permissions": {"deny": ["Read(./.env)"], "defaultMode": "acceptEdits"}, "outputStyle": "Explanatory"}),
    );
    write(
        &sb.work().join(".keel/settings.json"),
        &json!({"env": {"CLAUDE_PROBE": "keel"}}),
    );
    let run = sb.run(&["config", "show"]);
    assert_eq!(run.code, 0, "{run}");
    assert_eq!(run.stderr, "", "{run}");
    let (user, project) = (user.display(), project.display());
    let out = &run.stdout;
    for line in [
        format!("model = \"anthropic/claude-sonnet-5-5\"  # {user}"),
        format!("permissions.defaultMode = \"accept-edits\"  # {project}"),
        format!("permissions.allow += \"Bash(ls *)\"  # {user}"),
        format!("permissions.deny += \"Read(./.env)\"  # {project}"),
        "\nignored (in Claude Code's files, not used by keel):\n".to_string(),
        format!("  {project}: outputStyle: keel has no output styles"),
        format!("  {user}: apiKeyHelper: keel reads provider keys"),
        format!(
            "  {user}: hooks.PreToolUse[Bash]: a `prompt` hook: keel runs `command` hooks only"
        ),
    ] {
        assert!(out.contains(&line), "{line:?} not in:\n{out}");
    }
    // keel's own project file wins over Claude's for the same key.
    assert!(out.contains("env.CLAUDE_PROBE = \"keel\"  # "), "{out}");
    assert_eq!(out.matches("apiKeyHelper").count(), 1, "{out}");
    let run = sb.run(&["config", "show", "--json"]);
    let v: Value = serde_json::from_str(&run.stdout).unwrap();
    let ignored = v["ignored"].as_array().unwrap();
    assert_eq!(ignored.len(), 5, "{ignored:?}");
    assert!(ignored
        .iter()
        .all(|i| i["file"].is_string() && i["reason"].is_string()));
    let run = sb.run(&["config", "path"]);
    for word in ["claude-local", "claude-project", "claude-user"] {
        assert!(run.stdout.contains(word), "{run}");
    }
}

#[test]
fn keel_hooks_list_says_what_it_leaves_out_of_claudes_files_and_when_they_are_off() {
    let sb = Sandbox::new();
    let file = claude_user_settings(&sb);
    let run = sb.run(&["hooks", "list"]);
    assert_eq!(run.code, 0, "{run}");
    assert!(run.stdout.contains(&file.display().to_string()), "{run}");
    assert!(run.stderr.contains("4 entries keel does not use"), "{run}");
    write(
        &sb.home().join("settings.json"),
        &json!({"claudeFiles": false}),
    );
    let run = sb.run(&["hooks", "list"]);
    assert_eq!(run.stdout, "no hooks configured\n", "{run}");
    assert!(run.stderr.contains("settings files are off"), "{run}");
}
