//! The file layer's rules: the precedence of the levels, list concatenation, the errors and the
//! warnings, and the schema naming exactly the keys the parser knows.

use std::path::Path;

use serde_json::json;

use super::*;

/// Writes `files` (level, JSON) into a temp tree and loads them as a session in `work` would.
pub(super) fn load_levels(files: &[(Level, serde_json::Value)]) -> (tempfile::TempDir, Loaded) {
    load_levels_with(files, None)
}

/// [`load_levels`] with `--no-claude-files` as `claude_flag` says; Claude's user directory is
/// `claude/` of the temp tree.
pub(super) fn load_levels_with(
    files: &[(Level, serde_json::Value)],
    claude_flag: Option<bool>,
) -> (tempfile::TempDir, Loaded) {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    let home = dir.path().join("home");
    let claude_home = dir.path().join("claude");
    std::fs::create_dir_all(work.join(".keel")).unwrap();
    std::fs::create_dir_all(work.join(".claude")).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&claude_home).unwrap();
    let managed = dir.path().join("managed.json");
    let flag = dir.path().join("flag.json");
    for (level, v) in files {
        let path = match level {
            Level::Managed => managed.clone(),
            Level::SettingsFlag => flag.clone(),
            Level::Local => work.join(".keel/settings.local.json"),
            Level::ClaudeLocal => work.join(".claude/settings.local.json"),
            Level::Project => work.join(".keel/settings.json"),
            Level::ClaudeProject => work.join(".claude/settings.json"),
            Level::User => home.join("settings.json"),
            Level::ClaudeUser => claude_home.join("settings.json"),
            Level::Flag => unreachable!("flags are not files"),
        };
        std::fs::write(path, v.to_string()).unwrap();
    }
    let inline = files
        .iter()
        .any(|(l, _)| *l == Level::SettingsFlag)
        .then(|| Inline::File(flag.clone()));
    let all = sources(&managed, inline.as_ref(), &work, &home, Some(&claude_home));
    let loaded = load(&all, claude_flag).unwrap();
    (dir, loaded)
}

/// Every level that is a file, highest first: at each level keel's own file, then Claude's.
const FILE_LEVELS: [Level; 8] = [
    Level::Managed,
    Level::SettingsFlag,
    Level::Local,
    Level::ClaudeLocal,
    Level::Project,
    Level::ClaudeProject,
    Level::User,
    Level::ClaudeUser,
];

#[test]
fn each_level_beats_every_level_below_it() {
    for (i, high) in FILE_LEVELS.iter().enumerate() {
        for low in &FILE_LEVELS[i + 1..] {
            let (_dir, loaded) = load_levels(&[
                (*low, json!({"model": format!("low/{}", low.word())})),
                (*high, json!({"model": format!("high/{}", high.word())})),
            ]);
            let model = loaded.merged.model.unwrap();
            assert_eq!(
                model.value,
                format!("high/{}", high.word()),
                "{high:?} > {low:?}"
            );
            assert_eq!(model.origin.level, *high);
        }
    }
}

#[test]
fn lists_concatenate_without_duplicates_and_objects_merge_per_key() {
    let (_dir, loaded) = load_levels(&[
        (
            Level::User,
            json!({"permissions": {"allow": ["Bash(ls *)", "Read"]}, "env": {"A": "user", "B": "user"},
                   "sandbox": {"filesystem": {"allowWrite": ["/a"]}, "network": "on", "failIfUnavailable": false}}),
        ),
        (
            Level::Project,
            json!({"permissions": {"allow": ["Read", "Bash(npm test:*)"], "deny": ["Bash(rm *)"]},
                   "env": {"A": "project"},
                   "sandbox": {"filesystem": {"allowWrite": ["/b", "/a"]}, "network": {"allow": ["b.com"]}}}),
        ),
    ]);
    let m = loaded.merged;
    let allow: Vec<&str> = m
        .permissions
        .allow
        .iter()
        .map(|s| s.value.as_str())
        .collect();
    assert_eq!(allow, ["Read", "Bash(npm test:*)", "Bash(ls *)"]);
    assert_eq!(m.permissions.allow[0].origin.level, Level::Project);
    assert_eq!(m.permissions.allow[2].origin.level, Level::User);
    assert_eq!(m.permissions.deny.len(), 1);
    assert_eq!(m.env["A"].value, "project");
    assert_eq!(m.env["B"].value, "user");
    // The sandbox's keys merge per key: scalars from the highest level, lists concatenated.
    let sb = &m.sandbox;
    let writable: Vec<&str> = sb.allow_write.iter().map(|s| s.value.as_str()).collect();
    assert_eq!(writable, ["/b", "/a"]);
    assert_eq!(
        sb.network.as_ref().map(|n| &n.value),
        Some(&NetworkSetting::Allow(NetworkAllow {
            allow: vec!["b.com".into()]
        }))
    );
    let fail = sb.fail_if_unavailable.as_ref().unwrap();
    assert_eq!((fail.value, fail.origin.level), (false, Level::User));
}

#[test]
fn tools_is_an_allowlist_the_highest_level_sets_whole() {
    let (_dir, loaded) = load_levels(&[
        (Level::User, json!({"tools": ["read", "bash"]})),
        (Level::Project, json!({"tools": ["read"]})),
    ]);
    assert_eq!(loaded.merged.tools.unwrap().value, ["read"]);
}

#[test]
fn json_that_does_not_parse_names_file_line_and_column() {
    let origin = Origin {
        level: Level::Project,
        place: "/p/.keel/settings.json".into(),
    };
    let err = file::parse("{\n  \"model\": \"x\",\n  oops\n}", &origin)
        .err()
        .unwrap();
    assert_eq!(err.kind, ErrorKind::Syntax);
    assert_eq!(err.message, "/p/.keel/settings.json:3:3: not valid JSON");
    assert_eq!(err.cause.as_deref(), Some("key must be a string"));
    let err = file::parse("[1]", &origin).err().unwrap();
    assert!(err.message.contains("must be a JSON object"), "{err:?}");
}

#[test]
fn an_unknown_key_or_a_wrong_type_skips_only_that_entry() {
    let origin = Origin {
        level: Level::User,
        place: "u.json".into(),
    };
    let text = json!({
        "model": "openai/gpt-4.1", "modle": "x", "maxTurns": "ten", "thinking": "huge",
        "env": {"OK": "1", "BAD": 2}, "permissions": {"allow": ["Read"], "deny": "Bash", "mode": 1},
        "approvalTimeout": -1
    })
    .to_string();
    let parsed = file::parse(&text, &origin).ok().unwrap();
    let v = parsed.values;
    assert_eq!(v.model.as_deref(), Some("openai/gpt-4.1"));
    assert_eq!(v.max_turns, None);
    assert_eq!(v.thinking, None);
    assert_eq!(v.env.len(), 1);
    assert_eq!(v.permissions.allow, ["Read"]);
    assert!(v.permissions.deny.is_empty());
    let w = parsed.warnings.join("\n");
    for key in [
        "`modle`: unknown key",
        "`maxTurns`: invalid type",
        "`thinking`: unknown variant `huge`",
        "`env.BAD`: invalid type",
        "`permissions.deny`: invalid type",
        "`permissions.mode`: unknown key",
        "`approvalTimeout`: must be a positive number of seconds",
    ] {
        assert!(w.contains(&format!("u.json: {key}")), "{key} in\n{w}");
    }
    assert_eq!(parsed.warnings.len(), 7, "{w}");
}

#[test]
fn claude_mode_names_are_aliases() {
    let origin = Origin::flag("--settings");
    for (word, mode) in [
        ("default", DefaultMode::Ask),
        ("bypassPermissions", DefaultMode::Auto),
        ("acceptEdits", DefaultMode::AcceptEdits),
        ("plan", DefaultMode::Plan),
        ("read-only", DefaultMode::ReadOnly),
        ("ask", DefaultMode::Ask),
    ] {
        let text = json!({"permissions": {"defaultMode": word}}).to_string();
        let v = file::parse(&text, &origin).ok().unwrap().values;
        assert_eq!(v.permissions.default_mode, Some(mode), "{word}");
    }
}

#[test]
fn a_missing_file_is_no_error_but_a_missing_settings_flag_file_is() {
    let dir = tempfile::tempdir().unwrap();
    let none = dir.path().join("none.json");
    let found = load(&sources(&none, None, dir.path(), dir.path(), None), None).unwrap();
    assert_eq!(found.merged, Merged::default());
    let inline = Inline::File(none.clone());
    let err = load(
        &sources(&none, Some(&inline), dir.path(), dir.path(), None),
        None,
    )
    .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Unreadable);
}

#[test]
fn the_project_is_the_git_root_above_the_cwd() {
    let dir = tempfile::tempdir().unwrap();
    let deep = dir.path().join("repo/a/b");
    std::fs::create_dir_all(&deep).unwrap();
    assert_eq!(project_root(&deep), deep);
    std::fs::create_dir_all(dir.path().join("repo/.git")).unwrap();
    assert_eq!(project_root(&deep), dir.path().join("repo"));
    assert_eq!(
        Inline::of(" {\"a\":1}", Path::new("/x")),
        Inline::Json(" {\"a\":1}".into())
    );
    assert_eq!(
        Inline::of("s.json", Path::new("/x")),
        Inline::File("/x/s.json".into())
    );
}

/// A file that sets every key the parser knows (docs/settings.md's example is a subset).
fn every_key() -> serde_json::Value {
    json!({
        "$schema": schema::ID, "model": "anthropic/claude-sonnet-4-5", "thinking": "high",
        "tools": ["read", "bash"], "maxTurns": 20, "maxSubagentDepth": 2, "approvalTimeout": 60, "autoCompaction": false,
        "maxCost": 2.5, "env": {"RUST_LOG": "info"}, "jobs": {"tools": "codex", "maxLive": 4},
        "worktree": {"base": "fresh", "cleanupDays": 3},
        "lsp": {"servers": {"go": {"command": "gopls", "extensionToLanguage": {".go": "go"}}}, "diagnostics": "errors"},
        "permissions": {"defaultMode": "ask", "allow": ["Bash(npm test:*)"], "ask": ["Bash(git push *)"],
                        "deny": ["Read(./.env)"], "additionalDirectories": ["../shared"]},
        "mcpServers": {"fx": {"command": "fx"}}, "hooks": {},
        "sandbox": {"mode": "read-only", "network": "on", "bwrapPath": "/usr/bin/bwrap",
                    "failIfUnavailable": false, "allowEscalation": true, "passEnv": ["NPM_TOKEN"],
                    "limits": {"pids": 512, "memory": "4G"},
                    "filesystem": {"allowWrite": ["~/cache"], "denyRead": ["./secrets"], "allowRead": ["~/.ssh/known_hosts"]}},
        "checkpoints": {"enabled": true, "maxFileBytes": 1, "maxFiles": 2, "maxTotalBytes": 3},
        "notify": "osc9",
        "statusLine": {"type": "command", "command": "echo hi", "padding": 0},
        "claudeFiles": true
    })
}

/// `notify` takes keel's words and Claude Code's `preferredNotifChannel` words.
#[test]
fn notify_takes_keels_and_claudes_channel_words() {
    use super::NotifyChannel::*;
    let origin = Origin::flag("--settings");
    let read = |word: &str| {
        let text = json!({ "notify": word }).to_string();
        file::parse(&text, &origin).ok().unwrap()
    };
    for (word, channel) in [
        ("bell", Bell),
        ("osc9", Osc9),
        ("osc777", Osc777),
        ("off", Off),
        ("terminal_bell", Bell),
        ("auto", Bell),
        ("iterm2", Osc9),
        ("iterm2_with_bell", Osc9),
        ("kitty", Osc9),
        ("ghostty", Osc777),
        ("notifications_disabled", Off),
    ] {
        assert_eq!(read(word).values.notify, Some(channel), "{word}");
    }
    let bad = read("klaxon");
    assert_eq!(bad.values.notify, None);
    assert!(bad.warnings[0].contains("`notify`"), "{:?}", bad.warnings);
}

#[test]
fn the_schema_names_exactly_the_keys_the_parser_knows() {
    let origin = Origin::flag("--settings");
    let parsed = file::parse(&every_key().to_string(), &origin).ok().unwrap();
    assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
    let keys = |v: &serde_json::Value| -> Vec<String> {
        let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        k.sort();
        k
    };
    let s = schema::schema();
    assert_eq!(keys(&s["properties"]), keys(&every_key()));
    assert_eq!(
        keys(&s["properties"]["permissions"]["properties"]),
        keys(&every_key()["permissions"])
    );
    let sandbox = &s["properties"]["sandbox"]["properties"];
    assert_eq!(keys(sandbox), keys(&every_key()["sandbox"]));
    assert_eq!(
        keys(&sandbox["filesystem"]["properties"]),
        keys(&every_key()["sandbox"]["filesystem"])
    );
    assert_eq!(
        keys(&sandbox["limits"]["properties"]),
        keys(&every_key()["sandbox"]["limits"])
    );
    assert_eq!(
        keys(&s["properties"]["checkpoints"]["properties"]),
        keys(&every_key()["checkpoints"])
    );
    // And every key the schema names is one the parser takes without a warning.
    for key in keys(&s["properties"]) {
        let one = json!({ key.clone(): every_key()[&key] }).to_string();
        let parsed = file::parse(&one, &origin).ok().unwrap();
        assert!(parsed.warnings.is_empty(), "{key}: {:?}", parsed.warnings);
    }
}

#[test]
fn show_lists_each_value_with_its_origin() {
    let (_dir, loaded) = load_levels(&[
        (
            Level::User,
            json!({"model": "a/b", "permissions": {"allow": ["Read"]}}),
        ),
        (
            Level::Project,
            json!({"permissions": {"allow": ["Edit"]}, "env": {"X": "1"}}),
        ),
    ]);
    let text = render(&loaded.merged, &[]);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "{text}");
    assert!(
        lines[0].starts_with("model = \"a/b\"  # ") && lines[0].ends_with("home/settings.json")
    );
    assert!(lines[1].starts_with("env.X = \"1\"  # "));
    assert!(lines[2].starts_with("permissions.allow += \"Edit\"  # "));
    let v: serde_json::Value = serde_json::from_str(&render_json(&loaded.merged, &[])).unwrap();
    assert_eq!(v["permissions"]["allow"][1]["value"], "Read");
    assert!(v["model"]["origin"]
        .as_str()
        .unwrap()
        .ends_with("home/settings.json"));
}

/// Issue 44 point 9: `hooks` is shown one handler a line, keyed by event and matcher (it was
/// one long JSON line).
#[test]
fn show_lists_hooks_one_handler_a_line() {
    let (_dir, loaded) = load_levels(&[(
        Level::User,
        json!({"hooks": {
            "PreToolUse": [{"matcher": "Bash", "hooks": [
                {"type": "command", "command": "guard.sh"},
                {"type": "command", "command": "log.sh", "timeout": 5}]}],
            "Stop": [{"hooks": [{"type": "command", "command": "notify.sh"}]}]
        }}),
    )]);
    let text = render(&loaded.merged, &[]);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(
        lines[0].starts_with(
            r#"hooks.PreToolUse[Bash] += {"type":"command","command":"guard.sh"}  # "#
        ),
        "{text}"
    );
    assert!(lines[1].contains(r#""timeout":5"#), "{text}");
    assert!(lines[2].starts_with("hooks.Stop += "), "{text}");
}

/// `sandbox.limits.memory` takes bytes or a size; anything else, or too little, is a warning
/// naming the key, and the value is skipped.
#[test]
fn limits_take_sizes_and_refuse_bad_values_by_name() {
    use super::sandbox::size;
    assert_eq!(size(&json!(1048576)), Some(1 << 20));
    assert_eq!(size(&json!("4G")), Some(4 << 30));
    assert_eq!(size(&json!("512m")), Some(512 << 20));
    assert_eq!(size(&json!("1.5 GiB")), Some(3 << 29));
    assert_eq!(size(&json!("2048")), Some(2048));
    for bad in [
        json!("4X"),
        json!("-1"),
        json!("G"),
        json!("1.G"),
        json!(true),
        json!(-5),
    ] {
        assert_eq!(size(&bad), None, "{bad}");
    }
    let origin = Origin::flag("--settings");
    let text = json!({"sandbox": {"limits": {"pids": 128, "memory": "256M"}}}).to_string();
    let parsed = file::parse(&text, &origin).ok().unwrap();
    assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
    assert_eq!(parsed.values.sandbox.limits_pids, Some(128));
    assert_eq!(parsed.values.sandbox.limits_memory, Some(256 << 20));
    let text = json!({"sandbox": {"limits": {"pids": 2, "memory": "lots", "cpu": 1}}}).to_string();
    let parsed = file::parse(&text, &origin).ok().unwrap();
    let warnings = parsed.warnings.join("\n");
    assert!(
        warnings.contains("`sandbox.limits.pids`: must be at least 8"),
        "{warnings}"
    );
    assert!(
        warnings
            .contains("`sandbox.limits.memory`: must be a number of bytes or a size like \"4G\""),
        "{warnings}"
    );
    assert!(
        warnings.contains("`sandbox.limits.cpu`: unknown key"),
        "{warnings}"
    );
    assert_eq!(parsed.values.sandbox.limits_pids, None);
    assert_eq!(parsed.values.sandbox.limits_memory, None);
}

#[test]
fn a_status_line_is_claudes_shape_and_a_wrong_one_is_a_warning() {
    let line = json!({"type": "command", "command": "~/.claude/statusline.sh", "padding": 1});
    let (_dir, loaded) = load_levels(&[
        (
            Level::User,
            json!({"statusLine": {"type": "command", "command": "low"}}),
        ),
        (Level::Project, json!({"statusLine": line})),
    ]);
    let got = loaded.merged.status_line.unwrap();
    assert_eq!(got.value.command, "~/.claude/statusline.sh");
    assert_eq!(got.value.padding, Some(1));
    assert_eq!(got.origin.level, Level::Project);
    let (_dir, loaded) = load_levels(&[(Level::User, json!({"statusLine": {"type": "text"}}))]);
    assert!(loaded.merged.status_line.is_none());
    assert!(
        loaded.warnings[0].contains("`statusLine`"),
        "{:?}",
        loaded.warnings
    );
}
