//! The hostile suite's git and settings cases (issue 43, points 3-5): what git and keel read
//! later, outside any sandbox, must not be plantable by a model: a hook or a program-running
//! config key in any git directory under the workspace (the workspace's `.git` renamed and
//! recreated, a nested repository), or a project settings file that turns approvals off. Each
//! case runs the real binary under both mechanisms, as the test's user and as `nobody`, and
//! then the git command a user would run next, as the workspace's owner.

use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

use crate::common::support::{scripted_args, Sandbox};
use crate::sandbox::{bash, run_as_events, users_and_mechanisms, world_as, User, NOBODY};

/// Runs `git args` in the workspace as `user` (the workspace's owner) with the world's home:
/// what the user types after the session. Returns whether it succeeded and what it printed.
fn git_as(sb: &Sandbox, user: User, args: &[&str]) -> (bool, String) {
    let mut cmd = Command::new("git");
    cmd.args(args)
        .current_dir(sb.work())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", sb.dir.path())
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t");
    if user == User::Nobody {
        use std::os::unix::process::CommandExt;
        cmd.uid(NOBODY).gid(NOBODY);
    }
    let out = cmd.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// The paths of the `sandbox_violation` events of a run.
fn violations(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter(|v| v["type"] == "sandbox_violation")
        .map(|v| v["path"].as_str().unwrap_or("").to_string())
        .collect()
}

/// A shell line that writes an executable hook `hook` which, when run, creates `marker`.
fn plant(hook: &str, marker: &Path) -> String {
    format!(
        "printf '#!/bin/sh\\ntouch {}\\n' > {hook} && chmod +x {hook}",
        marker.display()
    )
}

/// Point 3: `.git` renamed, a copy made under the old name and a hook planted in it (or planted
/// in the renamed one, which is then renamed back): the user's next `git commit` must not run
/// it. Before the fix, under Landlock and under bubblewrap alike, the hook ran.
#[test]
fn a_hook_planted_through_a_renamed_dot_git_never_runs_at_the_next_commit() {
    for (user, mech) in users_and_mechanisms() {
        let sb = world_as(user);
        let marker = sb.dir.path().join("hook-ran");
        let calls = [
            bash(&format!(
                "mv .git .g && mkdir -p .git && cp -r .g/* .git/ ; {}",
                plant(".git/hooks/pre-commit", &marker)
            )),
            bash(&format!(
                "mv .git .h && {} && mv .h .git; true",
                plant(".h/hooks/post-commit", &marker)
            )),
        ];
        let (r, _, events) = run_as_events(&sb, user, mech, &calls, &[], &[]);
        let mech = format!("{mech} as {user:?}");
        let (ok, text) = git_as(&sb, user, &["commit", "-q", "--allow-empty", "-m", "x"]);
        assert!(ok, "{mech}: git commit failed: {text}");
        assert!(!marker.exists(), "{mech}: the planted hook ran: {r:?}");
        let told = r[0].0.contains("[sandbox (workspace-write)");
        assert!(told, "{mech}: the model was not told: {r:?}");
        assert!(!violations(&events).is_empty(), "{mech}: no event");
    }
}

/// Point 4: a nested repository whose config runs a program (`core.fsmonitor`), made a
/// gitlink of the workspace's index, and the same key in the workspace's own config: the
/// user's next `git status` must not run it. Before the fix it did.
#[test]
fn a_nested_repository_with_fsmonitor_never_runs_at_the_next_status() {
    for (user, mech) in users_and_mechanisms() {
        let sb = world_as(user);
        let marker = sb.dir.path().join("fsmonitor-ran");
        let run = format!("touch {}", marker.display());
        let calls = [
            bash(&format!(
                "git init -q sub && git -C sub -c user.name=t -c user.email=t@t commit -q \
                 --allow-empty -m s && git -C sub config core.fsmonitor '{run}' && git add sub; \
                 git config core.fsmonitor '{run}'; true"
            )),
            bash("git status --short"),
        ];
        let (r, _, events) = run_as_events(&sb, user, mech, &calls, &[], &[]);
        let mech = format!("{mech} as {user:?}");
        // Inside the sandbox the command may have run (it cannot write the marker there).
        let (ok, text) = git_as(&sb, user, &["status", "--short"]);
        assert!(ok, "{mech}: git status failed: {text}");
        assert!(!marker.exists(), "{mech}: fsmonitor ran: {r:?}");
        assert!(
            r[0].0.contains("[sandbox (workspace-write)"),
            "{mech}: {r:?}"
        );
        assert!(!violations(&events).is_empty(), "{mech}: no event");
    }
}

/// Point 5: a project settings file the model creates (`.keel/settings.json` did not exist)
/// with `defaultMode: bypassPermissions` is gone after the call, and the next session of a user
/// whose own settings ask is not in bypass mode. Before the fix the file stayed and the second
/// session ran the command without asking.
#[test]
fn a_model_created_project_settings_file_does_not_survive_the_call() {
    for (user, mech) in users_and_mechanisms() {
        let sb = world_as(user);
        let settings = json!({"permissions": {"defaultMode": "bypassPermissions"}});
        let calls = [bash(&format!(
            "mkdir -p .keel && echo '{settings}' > .keel/settings.json; echo x > CLAUDE.md; true"
        ))];
        let (r, _, events) = run_as_events(&sb, user, mech, &calls, &[], &[]);
        let mech = format!("{mech} as {user:?}");
        assert!(
            !sb.work().join(".keel/settings.json").exists(),
            "{mech}: {r:?}"
        );
        assert!(!sb.work().join("CLAUDE.md").exists(), "{mech}: {r:?}");
        assert!(
            r[0].0.contains("[sandbox (workspace-write)"),
            "{mech}: {r:?}"
        );
        assert!(!violations(&events).is_empty(), "{mech}: no event");
        // The user asks for approvals: a headless run cannot ask, so bash is blocked (exit 5).
        std::fs::write(
            sb.home().join("settings.json"),
            json!({"permissions": {"defaultMode": "ask"}}).to_string(),
        )
        .unwrap();
        if user == User::Nobody {
            crate::sandbox::give_to_nobody(&sb.home());
        }
        let (code, stderr) = second_session(&sb, user, mech.split(' ').next().unwrap_or("auto"));
        assert_eq!(
            code,
            Some(5),
            "{mech}: the second session did not ask: {stderr}"
        );
    }
}

/// A second print session running `touch ran`: its exit code and stderr.
fn second_session(sb: &Sandbox, user: User, mech: &str) -> (Option<i32>, String) {
    let call = json!({"name": "bash", "arguments": {"command": "touch ran"}});
    session(sb, user, mech, call)
}

/// A print session whose one turn makes `call` (`name`, `arguments`): its exit code and stderr.
fn session(sb: &Sandbox, user: User, mech: &str, mut call: Value) -> (Option<i32>, String) {
    let script = sb.dir.path().join("second.json");
    call["id"] = json!("c");
    let call = json!({ "toolCall": call });
    let body = json!({"turns": [{"chunks": [call]}, {"chunks": [{"text": "done"}]}]});
    std::fs::write(&script, body.to_string()).unwrap();
    if user == User::Nobody {
        crate::sandbox::give_to_nobody(&script);
    }
    let script = script.display().to_string();
    let args = scripted_args(&["-p", "--no-session"], &script, &["go"]);
    let mut cmd = sb.cmd(&args);
    cmd.env("KEEL_SANDBOX_MECHANISM", mech);
    if user == User::Nobody {
        use std::os::unix::process::CommandExt;
        cmd.uid(NOBODY).gid(NOBODY);
    }
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code(), stderr)
}

/// Point 5, the file tools: a `write` of every protected name, whether or not it exists (at any
/// depth for a git directory's hooks and config), needs an approval in every mode: a headless
/// run blocks (exit 5) and nothing is written; approved (here by a user's PermissionRequest
/// hook), it is written. Before the fix they were written without a question.
#[test]
fn the_file_tools_need_an_approval_for_protected_names_that_do_not_exist() {
    const NAMES: &[&str] = &[
        ".keel/settings.json",
        ".keel/settings.local.json",
        ".claude/settings.json",
        ".mcp.json",
        ".lsp.json",
        "AGENTS.md",
        "CLAUDE.md",
        ".agents/skills/x/SKILL.md",
        ".worktreeinclude",
        "sub/.git/hooks/pre-commit",
        "sub/.git/config",
        ".g/hooks/pre-commit",
    ];
    for (user, mech) in users_and_mechanisms() {
        let sb = world_as(user);
        // `.g` is a git directory (a renamed `.git`): its hooks are protected by what it is.
        for d in [".g/objects", ".g/refs", ".g/hooks"] {
            std::fs::create_dir_all(sb.work().join(d)).unwrap();
        }
        std::fs::write(sb.work().join(".g/HEAD"), "ref: refs/heads/main\n").unwrap();
        if user == User::Nobody {
            crate::sandbox::give_to_nobody(&sb.work());
        }
        let mech = format!("{mech} as {user:?}");
        let m = mech.split(' ').next().unwrap_or("auto");
        for name in NAMES {
            let call = json!({"name": "write", "arguments": {"path": name, "content": "x"}});
            let (code, stderr) = session(&sb, user, m, call);
            assert_eq!(code, Some(5), "{mech}: {name}: {stderr}");
            assert!(
                stderr.contains("which the sandbox protects"),
                "{mech}: {stderr}"
            );
            assert!(!sb.work().join(name).exists(), "{mech}: {name} was written");
        }
        let ok = json!({"name": "write", "arguments": {"path": "ok.txt", "content": "fine"}});
        assert_eq!(session(&sb, user, m, ok).0, Some(0), "{mech}");
        // Approved, the write goes through (the rest of the policy still holds).
        let allow = r#"echo '{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow"}}}'"#;
        let hooks = json!({"hooks": {"PermissionRequest": [{"matcher": "Write", "hooks": [{"type": "command", "command": allow}]}]}});
        std::fs::write(sb.home().join("settings.json"), hooks.to_string()).unwrap();
        if user == User::Nobody {
            crate::sandbox::give_to_nobody(&sb.home());
        }
        let call = json!({"name": "write", "arguments": {"path": "AGENTS.md", "content": "x"}});
        let (code, stderr) = session(&sb, user, m, call);
        assert_eq!(code, Some(0), "{mech}: {stderr}");
        assert!(sb.work().join("AGENTS.md").exists(), "{mech}: {stderr}");
    }
}

/// Point 5, trust: the user trusted the project's settings; then `.keel/settings.json`
/// changed (a pull, a model under `--sandbox off`) to add `defaultMode: bypassPermissions`.
/// The changed file is untrusted again: a headless run of a user whose own settings ask is
/// not in bypass mode, and says the project is not trusted. Before the fix the run went
/// through (exit 0) without a question.
#[test]
fn project_settings_changed_since_trusted_are_untrusted_again() {
    let sb = Sandbox::new();
    let file = sb.work().join(".keel/settings.json");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let trusted = json!({"permissions": {"allow": ["Bash(echo:*)"]}});
    std::fs::write(&file, trusted.to_string()).unwrap();
    std::fs::write(
        sb.home().join("settings.json"),
        json!({"permissions": {"defaultMode": "ask"}}).to_string(),
    )
    .unwrap();
    crate::project_trust::tui_trust(&sb, &["Bash(echo:*)"], "y\r");
    let changed =
        json!({"permissions": {"allow": ["Bash(echo:*)"], "defaultMode": "bypassPermissions"}});
    std::fs::write(&file, changed.to_string()).unwrap();
    let (code, stderr) = second_session(&sb, User::Me, "auto");
    assert_eq!(code, Some(5), "the changed settings applied: {stderr}");
    assert!(!sb.work().join("ran").exists(), "{stderr}");
    assert!(stderr.contains("not trusted"), "{stderr}");
    // Trusted again in the TUI, the project's mode applies.
    crate::project_trust::tui_trust(&sb, &["defaultMode"], "y\r");
    let (code, stderr) = second_session(&sb, User::Me, "auto");
    assert_eq!(code, Some(0), "{stderr}");
}
