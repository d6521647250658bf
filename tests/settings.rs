//! Settings files end to end (the real binary in a sandbox): each level beats the ones below
//! it, a flag beats every file and the managed file beats the flags; `--model` beats a
//! settings model; a broken file names its line and exits 3; an unknown key warns and the rest
//! applies; `keel config show|path|schema`; a daemon session gets the settings of its cwd.

use serde_json::{json, Value};

use crate::common::daemon::Daemon;
use crate::common::support::{fixture, scripted_args, snap, Sandbox};

use crate::common::support::write_json as write;

fn project(sb: &Sandbox) -> std::path::PathBuf {
    sb.work().join(".keel/settings.json")
}

fn local(sb: &Sandbox) -> std::path::PathBuf {
    sb.work().join(".keel/settings.local.json")
}

/// The tools `keel debug prompt ARGS` would offer.
fn tools(sb: &Sandbox, args: &[&str]) -> Vec<String> {
    let mut all = vec!["debug", "prompt", "--json"];
    all.extend_from_slice(args);
    let run = sb.run(&all);
    assert_eq!(run.code, 0, "{run}");
    let v: Value = serde_json::from_str(&run.stdout).unwrap();
    v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn each_level_beats_the_ones_below_a_flag_beats_files_and_managed_beats_flags() {
    let sb = Sandbox::new();
    // The built-ins, `bash`'s job tools (Claude's shapes for the default model) and `task`.
    assert_eq!(tools(&sb, &[]).len(), 11, "keel's default (task included)");
    write(
        &sb.home().join("settings.json"),
        &json!({"tools": ["read", "bash", "grep"]}),
    );
    assert_eq!(
        tools(&sb, &[]),
        ["read", "bash", "grep", "bash_output", "bash_kill"]
    );
    write(&project(&sb), &json!({"tools": ["read", "bash"]}));
    assert_eq!(
        tools(&sb, &[]),
        ["read", "bash", "bash_output", "bash_kill"]
    );
    write(&local(&sb), &json!({"tools": ["read"]}));
    assert_eq!(tools(&sb, &[]), ["read"]);
    assert_eq!(tools(&sb, &["--settings", r#"{"tools": ["ls"]}"#]), ["ls"]);
    write(&sb.dir.path().join("s.json"), &json!({"tools": ["find"]}));
    assert_eq!(tools(&sb, &["--settings", "../s.json"]), ["find"]);
    assert_eq!(
        tools(&sb, &["--settings", "../s.json", "--tools", "grep"]),
        ["grep"]
    );
    write(&sb.managed_settings(), &json!({"tools": ["edit"]}));
    assert_eq!(tools(&sb, &["--tools", "grep"]), ["edit"]);
}

#[test]
fn managed_max_turns_beats_the_flag_and_the_flag_beats_the_project() {
    let sb = Sandbox::new();
    // tool_error.json needs two model turns.
    write(&project(&sb), &json!({"maxTurns": 1}));
    let run = sb.scripted("-p", "tool_error.json", &["--no-session", "fix it"]);
    assert_eq!(run.code, 4, "the project's maxTurns applies: {run}");
    let run = sb.scripted(
        "-p",
        "tool_error.json",
        &["--no-session", "--max-turns", "5", "fix it"],
    );
    assert_eq!(run.code, 0, "the flag beats the project: {run}");
    write(&sb.managed_settings(), &json!({"maxTurns": 1}));
    let run = sb.scripted(
        "-p",
        "tool_error.json",
        &["--no-session", "--max-turns", "5", "fix it"],
    );
    assert_eq!(run.code, 4, "managed beats the flag: {run}");
}

#[test]
fn the_model_flag_beats_the_settings_model() {
    let sb = Sandbox::new();
    write(&project(&sb), &json!({"model": "openai/gpt-4.1"}));
    let run = sb.run(&["-p", "hi"]);
    assert_eq!(run.code, 3, "{run}");
    run.assert_stderr("no API key for provider `openai`");
    let script = fixture("hello.json");
    let run = sb.run(&["-p", "hi", "--model", "scripted/x", "--script", &script]);
    assert_eq!(run.code, 0, "{run}");
    assert_eq!(run.stdout, "Hello from keel!\n");
}

#[test]
fn a_broken_settings_file_names_its_line_and_column_and_exits_3() {
    let sb = Sandbox::new();
    std::fs::create_dir_all(sb.work().join(".keel")).unwrap();
    std::fs::write(project(&sb), "{\n  \"model\": \"x\"\n  \"tools\": []\n}\n").unwrap();
    let run = sb.scripted("-p", "hello.json", &["hi"]);
    assert_eq!(run.code, 3, "{run}");
    snap("settings_broken_file", &run.to_string());
    let run = sb.scripted("--json", "hello.json", &["hi"]);
    assert_eq!(run.code, 3, "{run}");
    let last = run.stdout_lines().pop().unwrap();
    assert_eq!(last["outcome"], "config_error", "{run}");
    let run = sb.run(&["config", "show"]);
    assert_eq!(run.code, 3, "{run}");
    run.assert_stderr("settings.json:3:3: not valid JSON");
}

#[test]
fn an_unknown_key_warns_and_the_rest_of_the_file_applies() {
    let sb = Sandbox::new();
    write(
        &project(&sb),
        &json!({"modle": "x", "tools": ["read"], "maxTurns": "ten"}),
    );
    let run = sb.run(&["debug", "prompt", "--json"]);
    let v: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(v["tools"].as_array().unwrap().len(), 1, "{run}");
    let warnings = v["warnings"].to_string();
    assert!(
        warnings.contains("settings.json: `modle`: unknown key; skipped"),
        "{run}"
    );
    assert!(warnings.contains("`maxTurns`: invalid type"), "{run}");
    let run = sb.scripted("-p", "hello.json", &["hi"]);
    assert_eq!(run.code, 0, "{run}");
    assert!(
        run.stderr
            .contains("Warning: [SANDBOX]/work/.keel/settings.json: `modle`: unknown key; skipped")
            || run.to_string().contains(
                "Warning: [SANDBOX]/work/.keel/settings.json: `modle`: unknown key; skipped"
            ),
        "{run}"
    );
}

/// Three levels: the user's, the project's and the local file.
fn three_levels(sb: &Sandbox) {
    write(
        &sb.home().join("settings.json"),
        &json!({"model": "anthropic/claude-sonnet-4-5", "thinking": "low",
                "env": {"RUST_LOG": "info", "A": "user"},
                "permissions": {"allow": ["Read", "Bash(git diff *)"]}}),
    );
    write(
        &project(sb),
        &json!({"$schema": "https://keel.dev/settings.schema.json", "thinking": "high",
                "permissions": {"allow": ["Bash(npm test:*)", "Read"], "deny": ["Read(./.env)"],
                                "defaultMode": "default"},
                "mcpServers": {"fx": {"command": "fx"}}}),
    );
    write(
        &local(sb),
        &json!({"model": "openai/gpt-4.1", "env": {"A": "local"}, "permissions": {"ask": ["Bash(git push *)"]}}),
    );
}

#[test]
fn config_show_lists_the_merged_settings_with_their_origins() {
    let sb = Sandbox::new();
    let run = sb.run(&["config", "show"]);
    assert_eq!(run.code, 0, "{run}");
    assert!(run.stdout.starts_with("(no settings"), "{run}");
    three_levels(&sb);
    let run = sb.run(&["config", "show"]);
    assert_eq!(run.code, 0, "{run}");
    snap("settings_config_show", &run.to_string());
    let run = sb.run(&["config", "show", "--json"]);
    let v: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(v["model"]["value"], "openai/gpt-4.1");
    assert!(v["model"]["origin"]
        .as_str()
        .unwrap()
        .ends_with("settings.local.json"));
    assert_eq!(v["permissions"]["allow"].as_array().unwrap().len(), 3);
    assert_eq!(v["env"]["RUST_LOG"]["value"], "info");
    let run = sb.run(&["config", "show", "--settings", r#"{"maxTurns": 3}"#]);
    run.assert_stdout("maxTurns = 3  # flag --settings");
}

#[test]
fn config_path_lists_the_files_looked_at_and_config_schema_prints_the_schema() {
    let sb = Sandbox::new();
    three_levels(&sb);
    let run = sb.run(&["config", "path"]);
    assert_eq!(run.code, 0, "{run}");
    snap("settings_config_path", &run.to_string());
    let run = sb.run(&["config", "schema"]);
    assert_eq!(run.code, 0, "{run}");
    let v: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(v["$id"], "https://keel.dev/settings.schema.json");
    assert!(v["properties"]["permissions"]["properties"]["deny"].is_object());
}

#[test]
fn a_daemon_session_is_opened_with_the_settings_of_its_cwd() {
    let sb = Sandbox::new();
    let other = sb.dir.path().join("other");
    write(
        &other.join(".keel/settings.json"),
        &json!({"env": {"KEEL_PROBE": "from-settings"}, "modle": "x"}),
    );
    let script = sb.dir.path().join("probe.json");
    write(
        &script,
        &json!({"turns": [
            {"chunks": [{"toolCall": {"name": "bash", "arguments": {"command": "echo \"$KEEL_PROBE\" > probe.txt"}}}]},
            {"chunks": [{"text": "done"}]}
        ]}),
    );
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let socket = d.socket.display().to_string();
    let script = script.display().to_string();
    // The project's `env` waits for trust: this run trusts it.
    let args = scripted_args(
        &[
            "-p",
            "go",
            "--trust-project",
            "--daemon",
            "--socket",
            &socket,
        ],
        &script,
        &[],
    );
    let out = sb.cmd(&args).current_dir(&other).output().unwrap();
    let run = sb.finish(out);
    assert_eq!(run.code, 0, "{run}");
    let probe = std::fs::read_to_string(other.join("probe.txt")).unwrap();
    assert_eq!(probe, "from-settings\n");
    // Its warnings reach the client, as an in-process run's do.
    assert!(
        run.stderr
            .contains("other/.keel/settings.json: `modle`: unknown key; skipped"),
        "{run}"
    );
    // The daemon's own directory (the sandbox's work dir) has no settings: a session there
    // does not see them.
    let out = sb.cmd(&args).output().unwrap();
    assert_eq!(sb.finish(out).code, 0);
    let probe = std::fs::read_to_string(sb.work().join("probe.txt")).unwrap();
    assert_eq!(probe, "\n");
}

#[test]
fn permissions_default_mode_sets_the_mode_with_claudes_names_and_the_flag_overrides_it() {
    let sb = Sandbox::new();
    // Claude's `default` is keel's ask: a headless run blocks on the first shell call.
    write(
        &project(&sb),
        &json!({"permissions": {"defaultMode": "default"}}),
    );
    let run = sb.scripted("-p", "blocked.json", &["--no-session", "clean up"]);
    assert_eq!(run.code, 5, "{run}");
    let run = sb.scripted(
        "-p",
        "blocked.json",
        &["--no-session", "--permission", "auto", "go"],
    );
    assert_eq!(run.code, 0, "the flag beats the file: {run}");
    // Claude's `acceptEdits` is keel's accept-edits: the shell call still asks, quietly.
    write(
        &project(&sb),
        &json!({"permissions": {"defaultMode": "acceptEdits"}}),
    );
    let run = sb.scripted("-p", "blocked.json", &["--no-session", "clean up"]);
    assert_eq!(run.code, 5, "{run}");
    assert!(!run.stderr.contains("not supported yet"), "{run}");
    // Claude's `plan` is keel's plan mode: the shell call is refused (the model is told why)
    // and the run goes on to its end.
    write(
        &project(&sb),
        &json!({"permissions": {"defaultMode": "plan"}}),
    );
    let run = sb.scripted("-p", "blocked.json", &["--no-session", "clean up"]);
    assert_eq!(run.code, 0, "{run}");
    assert!(!run.stderr.contains("not supported yet"), "{run}");
}

#[test]
fn the_settings_mcp_servers_join_the_mcp_json_servers() {
    let sb = Sandbox::new();
    write(
        &project(&sb),
        &json!({"mcpServers": {"fx": {"command": crate::mcp::FIXTURE}}}),
    );
    // A project's servers start only in a trusted project.
    let run = sb.run(&["debug", "prompt", "--json", "--trust-project"]);
    assert_eq!(run.code, 0, "{run}");
    assert!(run.stdout.contains("mcp__fx__echo"), "{run}");
}

#[test]
fn keel_mcp_list_shows_the_settings_mcp_servers() {
    let sb = Sandbox::new();
    write(
        &project(&sb),
        &json!({"mcpServers": {"fx": {"command": crate::mcp::FIXTURE}}}),
    );
    let run = sb.run(&["mcp", "list", "--json", "--trust-project"]);
    assert_eq!(run.code, 0, "{run}");
    let v: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(v["servers"][0]["name"], "fx", "{run}");
}
