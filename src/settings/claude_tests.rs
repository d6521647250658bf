//! Claude Code's settings files as layers: what they honour, what they leave out (and why),
//! and `claudeFiles` turning them off.

use serde_json::json;

use super::tests::{load_levels, load_levels_with};
use super::*;

#[test]
fn claudes_files_are_project_levels_like_keels_own_and_below_keels_at_each_level() {
    assert!(Level::ClaudeLocal.is_project() && Level::ClaudeProject.is_project());
    assert!(!Level::ClaudeUser.is_project());
    assert!(Level::Local < Level::ClaudeLocal && Level::ClaudeLocal < Level::Project);
    assert!(Level::Project < Level::ClaudeProject && Level::ClaudeProject < Level::User);
    assert!(Level::User < Level::ClaudeUser);
    // A Claude file below keel's at the same level adds its list entries, keel's value wins.
    let (_dir, loaded) = load_levels(&[
        (
            Level::ClaudeProject,
            json!({"model": "claude-x", "env": {"A": "claude", "B": "claude"},
                   "permissions": {"allow": ["Bash(ls *)"]}}),
        ),
        (
            Level::Project,
            json!({"model": "keel/x", "env": {"A": "keel"}}),
        ),
    ]);
    let m = loaded.merged;
    assert_eq!(m.model.as_ref().unwrap().value, "keel/x");
    assert_eq!(m.env["A"].value, "keel");
    assert_eq!(m.env["B"].value, "claude");
    assert_eq!(m.env["B"].origin.level, Level::ClaudeProject);
    assert!(m.env["B"].origin.place.ends_with(".claude/settings.json"));
    assert_eq!(m.permissions.allow[0].value, "Bash(ls *)");
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
}

#[test]
fn claudes_model_aliases_are_the_catalogs_current_anthropic_models() {
    for (alias, id) in [
        ("sonnet", "anthropic/claude-sonnet-5-5"),
        ("opus", "anthropic/claude-opus-5-5"),
        ("haiku", "anthropic/claude-haiku-4-5"),
        ("opus[1m]", "anthropic/claude-opus-5-5"),
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5-20250929"),
    ] {
        let (_dir, loaded) = load_levels(&[(Level::ClaudeUser, json!({ "model": alias }))]);
        assert_eq!(loaded.merged.model.unwrap().value, id, "{alias}");
        assert!(loaded.ignored.is_empty(), "{alias}: {:?}", loaded.ignored);
    }
    let (_dir, loaded) = load_levels(&[(Level::ClaudeUser, json!({"model": "opusplan"}))]);
    assert_eq!(loaded.merged.model, None);
    assert_eq!(loaded.ignored[0].key, "model");
}

#[test]
fn keys_keel_does_not_use_are_ignored_with_a_reason_not_warned_about() {
    let (_dir, loaded) = load_levels(&[(
        Level::ClaudeUser,
        json!({"$schema": "https://json.schemastore.org/claude-code-settings.json",
               "apiKeyHelper": "/bin/key.sh", "includeCoAuthoredBy": false,
               "enabledPlugins": {"x@y": true}, "cleanupPeriodDays": 20, "outputStyle": "Explanatory",
               "frobnicate": 1, "env": {"A": "1"},
               "statusLine": {"type": "command", "command": "echo hi"}}),
    )]);
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let keys: Vec<(&str, &str)> = loaded
        .ignored
        .iter()
        .map(|i| (i.key.as_str(), i.reason.as_str()))
        .collect();
    let reason = |key: &str| keys.iter().find(|(k, _)| *k == key).map(|(_, r)| *r);
    assert!(reason("apiKeyHelper").unwrap().contains("provider"));
    assert!(reason("includeCoAuthoredBy")
        .unwrap()
        .contains("does not commit"));
    assert!(reason("enabledPlugins").unwrap().contains("plugins"));
    assert!(reason("cleanupPeriodDays").is_some() && reason("outputStyle").is_some());
    assert_eq!(reason("frobnicate"), Some("not a key keel knows"));
    assert_eq!(keys.len(), 6, "{keys:?}");
    assert!(loaded.ignored[0].file.ends_with("claude/settings.json"));
    let m = loaded.merged;
    assert_eq!(m.env["A"].value, "1");
    assert_eq!(m.status_line.unwrap().value.command, "echo hi");
    // One startup line for the file, naming the keys.
    let lines = Loaded {
        ignored: loaded.ignored,
        ..Loaded::default()
    }
    .claude_warnings();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("6 entries keel does not use (apiKeyHelper, "),
        "{}",
        lines[0]
    );
    assert!(lines[0].contains("keel config show"), "{}", lines[0]);
}

#[test]
fn rules_naming_claude_only_tools_and_hooks_keel_cannot_run_are_ignored() {
    let guard = json!({"type": "command", "command": "guard.sh"});
    let (_dir, loaded) = load_levels(&[(
        Level::ClaudeProject,
        json!({
            "permissions": {"allow": ["WebFetch(domain:x.com)", "WebSearch", "Bash(ls *)", "NotebookEdit"],
                            "deny": ["Read(./.env)", "Task"], "defaultMode": "acceptEdits",
                            "disableBypassPermissionsMode": "disable"},
            "hooks": {
                "PreToolUse": [{"matcher": "Bash", "hooks": [guard, {"type": "prompt", "prompt": "ok?"}]}],
                "Stop": [{"hooks": [{"type": "agent", "prompt": "check"}]}],
                "Elsewhen": [{"hooks": [{"type": "command", "command": "x"}]}]
            }
        }),
    )]);
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let p = &loaded.merged.permissions;
    let values = |l: &[Sourced<String>]| l.iter().map(|s| s.value.clone()).collect::<Vec<_>>();
    assert_eq!(values(&p.allow), ["Bash(ls *)"]);
    assert_eq!(values(&p.deny), ["Read(./.env)"]);
    assert_eq!(
        p.default_mode.as_ref().unwrap().value,
        DefaultMode::AcceptEdits
    );
    let hooks = &loaded.merged.hook_layers;
    assert_eq!(hooks.len(), 1);
    assert_eq!(
        hooks[0].value,
        json!({"PreToolUse": [{"matcher": "Bash", "hooks": [guard]}]})
    );
    let keys: Vec<&str> = loaded.ignored.iter().map(|i| i.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "permissions.allow[WebFetch(domain:x.com)]",
            "permissions.allow[WebSearch]",
            "permissions.allow[NotebookEdit]",
            "permissions.deny[Task]",
            "permissions.disableBypassPermissionsMode",
            "hooks.PreToolUse[Bash]",
            "hooks.Stop",
            "hooks.Elsewhen",
        ]
    );
    let prompt = &loaded.ignored[5].reason;
    assert!(prompt.contains("`prompt` hook"), "{prompt}");
}

#[test]
fn claudes_mode_words_map_as_keels_aliases_do() {
    for (word, mode) in [
        ("default", DefaultMode::Ask),
        ("manual", DefaultMode::Ask),
        ("dontAsk", DefaultMode::Ask),
        ("acceptEdits", DefaultMode::AcceptEdits),
        ("plan", DefaultMode::Plan),
        ("bypassPermissions", DefaultMode::Auto),
    ] {
        let file = json!({"permissions": {"defaultMode": word}});
        let (_dir, loaded) = load_levels(&[(Level::ClaudeLocal, file)]);
        let got = loaded.merged.permissions.default_mode.unwrap();
        assert_eq!(got.value, mode, "{word}");
        // A project's own mode: what applies without trust comes from the levels below.
        assert_eq!(loaded.merged.permissions.default_mode_outside_project, None);
    }
}

#[test]
fn claude_files_false_in_keels_settings_or_the_flag_turns_claudes_files_off() {
    let claude = (Level::ClaudeUser, json!({"env": {"C": "1"}}));
    let on = |loaded: &Loaded| loaded.merged.env.contains_key("C");
    // The highest of keel's own files that sets it wins.
    let (_dir, loaded) =
        load_levels(&[claude.clone(), (Level::User, json!({"claudeFiles": false}))]);
    assert!(!on(&loaded));
    let off = loaded.claude_off.as_ref().unwrap();
    assert!(off.by.contains("\"claudeFiles\": false in "), "{}", off.by);
    assert_eq!(off.files.len(), 1);
    let lines = loaded.claude_warnings();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains("settings files are off"), "{}", lines[0]);
    assert!(!loaded.merged.claude_files.unwrap().value);
    let (_dir, loaded) = load_levels(&[
        claude.clone(),
        (Level::User, json!({"claudeFiles": false})),
        (Level::Project, json!({"claudeFiles": true})),
    ]);
    assert!(on(&loaded) && loaded.claude_off.is_none());
    // Claude's files cannot turn themselves off.
    let (_dir, loaded) = load_levels(&[(
        Level::ClaudeUser,
        json!({"claudeFiles": false, "env": {"C": "1"}}),
    )]);
    assert!(on(&loaded));
    assert_eq!(loaded.ignored[0].key, "claudeFiles");
    // The flag, below the managed file.
    let (_dir, loaded) = load_levels_with(std::slice::from_ref(&claude), Some(false));
    assert!(!on(&loaded));
    assert_eq!(loaded.claude_off.unwrap().by, "--no-claude-files");
    let managed = (Level::Managed, json!({"claudeFiles": true}));
    let (_dir, loaded) = load_levels_with(&[claude.clone(), managed], Some(false));
    assert!(on(&loaded));
    // Off with no Claude file: nothing to say.
    let (_dir, loaded) = load_levels_with(&[], Some(false));
    assert!(loaded.claude_off.is_none() && loaded.claude_warnings().is_empty());
}

#[test]
fn claudes_user_directory_is_claude_config_dir_else_home_dot_claude() {
    let vars = |pairs: &[(&str, &str)]| {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    assert_eq!(
        claude_home(&vars(&[("HOME", "/h")])),
        Some(PathBuf::from("/h/.claude"))
    );
    assert_eq!(
        claude_home(&vars(&[("HOME", "/h"), (CLAUDE_CONFIG_VAR, "/c")])),
        Some(PathBuf::from("/c"))
    );
    assert_eq!(claude_home(&vars(&[])), None);
}

#[test]
fn config_show_lists_the_ignored_keys_once_in_their_own_section() {
    let (_dir, loaded) = load_levels(&[(
        Level::ClaudeUser,
        json!({"apiKeyHelper": "k.sh", "env": {"A": "1"}}),
    )]);
    let text = render(&loaded.merged, &loaded.ignored);
    let (values, ignored) = text.split_once("\nignored").unwrap();
    assert!(values.contains("env.A = \"1\"  # ") && values.contains("claude/settings.json"));
    let lines: Vec<&str> = ignored.lines().skip(1).collect();
    assert_eq!(lines.len(), 1, "{text}");
    assert!(lines[0].contains("claude/settings.json: apiKeyHelper: keel reads provider keys"));
    let v: serde_json::Value =
        serde_json::from_str(&render_json(&loaded.merged, &loaded.ignored)).unwrap();
    assert_eq!(v["ignored"][0]["key"], "apiKeyHelper");
    assert!(v["ignored"][0]["file"]
        .as_str()
        .unwrap()
        .ends_with("claude/settings.json"));
    assert!(v["ignored"][0]["reason"].is_string());
}

#[test]
fn in_the_home_directory_claudes_project_file_is_the_users_read_once() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    let claude = home.join(".claude");
    let all = sources(
        &home.join("managed.json"),
        None,
        home,
        &home.join(".keel"),
        Some(&claude),
    );
    let claude_levels: Vec<Level> = all
        .iter()
        .map(|s| s.level)
        .filter(|l| l.is_claude())
        .collect();
    assert_eq!(claude_levels, [Level::ClaudeLocal, Level::ClaudeUser]);
}
