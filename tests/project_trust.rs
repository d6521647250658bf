//! Trust of a project's own settings files (`.keel/settings.json`, `.keel/settings.local.json`),
//! end to end with the real binary: their hooks, `allow` rules and `env` wait for trust (one
//! warning names the file and what was skipped) while their `deny` rules apply at once;
//! `--trust-project` trusts them for one run; the TUI asks once and remembers each hook by its
//! hash, so a changed hook is not run until it is trusted again (`keel hooks list` says so).

use serde_json::{json, Value};

use crate::common::pty::spawn;
use crate::common::support::{keel_shell, Run, Sandbox};

use crate::common::support::write_json as write;

/// A project settings file with one PreToolUse hook running `hook`, an allow rule for `echo`,
/// a deny rule for `rm` and one variable.
fn project_settings(sb: &Sandbox, hook: &str) {
    write(
        &sb.work().join(".keel/settings.json"),
        &json!({
            "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": hook}]}]},
            "permissions": {"allow": ["Bash(echo:*)"], "deny": ["Bash(rm:*)"]},
            "env": {"KEEL_PROBE": "from-project"}
        }),
    );
}

/// The `trust` of each hook `keel hooks list --json` shows.
fn listed_trust(sb: &Sandbox) -> Vec<String> {
    let run = sb.run(&["hooks", "list", "--json"]);
    assert_eq!(run.code, 0, "{run}");
    let list: Value = serde_json::from_str(&run.stdout).unwrap();
    list.as_array()
        .unwrap()
        .iter()
        .map(|h| h["trust"].as_str().unwrap_or("(none)").to_string())
        .collect()
}

#[test]
fn an_untrusted_projects_hooks_allow_rules_and_env_wait_for_trust_but_its_deny_rule_applies() {
    let sb = Sandbox::new();
    project_settings(&sb, "touch hook-ran");
    let ran = sb.work().join("hook-ran");
    // Ask mode: without the project's allow rule `echo` blocks (exit 5); the hook does not run.
    let run = sb.bash_run("echo ok", &["--permission", "ask"]);
    assert_eq!(run.code, 5, "the untrusted allow rule applied: {run}");
    assert!(!ran.exists(), "an untrusted project's hook ran");
    let warnings: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.contains("not trusted"))
        .collect();
    assert_eq!(warnings.len(), 1, "{run}");
    for needle in [
        ".keel/settings.json",
        "`touch hook-ran`",
        "`Bash(echo:*)`",
        "`KEEL_PROBE`",
        "--trust-project",
    ] {
        assert!(warnings[0].contains(needle), "no {needle:?} in {run}");
    }
    // Its env is not set for the tools.
    let run = sb.bash_run("printf %s \"$KEEL_PROBE\" > probe.txt", &[]);
    assert_eq!(run.code, 0, "{run}");
    assert_eq!(
        std::fs::read_to_string(sb.work().join("probe.txt")).unwrap(),
        ""
    );
    // Its deny rule applies at once.
    std::fs::write(sb.work().join("x"), "x").unwrap();
    let run = sb.bash_run("rm -f x", &[]);
    assert_eq!(run.code, 0, "{run}");
    assert!(
        sb.work().join("x").exists(),
        "the project's deny rule did not apply"
    );

    // Trusted for one run: the hook runs, the allow rule and the env apply.
    let run = sb.bash_run("echo ok", &["--permission", "ask", "--trust-project"]);
    assert_eq!(run.code, 0, "{run}");
    assert!(ran.exists(), "the trusted project's hook did not run");
    assert!(!run.stderr.contains("not trusted"), "{run}");
    let run = sb.bash_run(
        "printf %s \"$KEEL_PROBE\" > probe.txt",
        &["--trust-project"],
    );
    assert_eq!(run.code, 0, "{run}");
    assert_eq!(
        std::fs::read_to_string(sb.work().join("probe.txt")).unwrap(),
        "from-project"
    );
    let run = sb.bash_run("rm -f x", &["--trust-project"]);
    assert_eq!(run.code, 0, "{run}");
    assert!(sb.work().join("x").exists(), "the deny rule lost to trust");
    // `--trust-project` is for that run only: nothing was recorded.
    assert_eq!(listed_trust(&sb), ["untrusted"]);
}

/// Starts the TUI in the sandbox, expects the trust question naming `needles`, answers `answer`
/// and quits.
pub(crate) fn tui_trust(sb: &Sandbox, needles: &[&str], answer: &str) {
    let shell = format!(
        "{}; echo KEEL_EXIT=$?",
        keel_shell(&crate::common::support::fixture("hello.json"))
    );
    let (mut s, mut child) = spawn(sb, &shell);
    match needles.is_empty() {
        true => s.wait_for("the editor", |t| t.contains("Ask anything")),
        false => s.wait_for("the question", |t| {
            t.contains("[y/N]") && needles.iter().all(|n| t.contains(n))
        }),
    }
    if needles.is_empty() {
        assert!(!s.text().contains("[y/N]"), "{}", s.text());
    } else {
        s.send(answer);
        s.wait_for("the editor", |t| t.contains("Ask anything"));
    }
    assert!(s.quit("\x04", &mut child).success());
}

#[test]
fn the_tui_trusts_a_projects_hooks_by_hash_and_a_changed_hook_waits_for_trust_again() {
    let sb = Sandbox::new();
    project_settings(&sb, "touch hook-ran");
    let ran = sb.work().join("hook-ran");
    tui_trust(
        &sb,
        &["touch hook-ran", "Bash(echo:*)", "KEEL_PROBE"],
        "y\r",
    );
    // Asked once: the next start does not ask.
    tui_trust(&sb, &[], "");
    // A headless run now runs the trusted hook and applies the allow rule.
    let run = sb.bash_run("echo ok", &["--permission", "ask"]);
    assert_eq!(run.code, 0, "{run}");
    assert!(ran.exists(), "the trusted hook did not run");
    assert!(!run.stderr.contains("not trusted"), "{run}");
    assert_eq!(listed_trust(&sb), ["trusted"]);

    // The hook's command changes: it is not run until trusted again; the rules stay trusted.
    std::fs::remove_file(&ran).unwrap();
    project_settings(&sb, "touch hook-ran; true");
    let run = sb.bash_run("echo ok", &["--permission", "ask"]);
    assert_eq!(run.code, 0, "{run}");
    assert!(!ran.exists(), "the changed hook ran without trust");
    assert!(run.stderr.contains("changed since trusted"), "{run}");
    assert_eq!(listed_trust(&sb), ["changed"]);
    let text = sb.run(&["hooks", "list"]).stdout;
    assert!(text.contains("changed since trusted"), "{text}");

    tui_trust(&sb, &["touch hook-ran; true"], "y\r");
    let run = sb.bash_run("echo ok", &["--permission", "ask"]);
    assert_eq!(run.code, 0, "{run}");
    assert!(ran.exists(), "the hook trusted again did not run");
    assert_eq!(listed_trust(&sb), ["trusted"]);
}

/// `/hooks` at 80 columns: each hook's event, matcher and command, then its file and trust.
#[test]
fn the_hooks_command_lists_each_hook_with_its_origin_and_trust() {
    use keel::front::tui::transcript::HistoryCell;
    use keel::setup::hook_list::{tui_text, HookRow};
    use keel::setup::trust::HookTrust;
    let row = |event, matcher: &str, command: &str, origin: &str, trust| HookRow {
        event,
        matcher: matcher.into(),
        command: command.into(),
        timeout: None,
        origin: origin.into(),
        trust,
    };
    let rows = [
        row(
            "PreToolUse",
            "Bash",
            "$KEEL_PROJECT_DIR/.keel/guard.sh",
            "/repo/.keel/settings.json",
            HookTrust::Trusted,
        ),
        row(
            "PostToolUse",
            "Edit|Write",
            "cargo fmt",
            "/repo/.keel/settings.local.json",
            HookTrust::Changed,
        ),
        row(
            "Stop",
            "",
            "make lint",
            "/repo/.keel/settings.json",
            HookTrust::Untrusted,
        ),
        row(
            "Notification",
            "",
            "notify-send keel",
            "/home/me/.keel/settings.json",
            HookTrust::NotNeeded,
        ),
    ];
    let mut f = crate::tui::Feed::new();
    f.view.notice(HistoryCell::Notice(tui_text(&rows)));
    crate::common::support::snap("tui_hooks_command_80x24", &f.screen(80, 24));
    assert_eq!(
        tui_text(&[]),
        "no hooks configured (settings files' \"hooks\"; see keel hooks list)"
    );
}

/// `/hooks` in the TUI reads this directory's settings files and the trust store.
#[test]
fn slash_hooks_in_the_tui_shows_the_projects_hooks_untrusted_after_a_no() {
    let sb = Sandbox::new();
    project_settings(&sb, "touch hook-ran");
    write(
        &sb.home().join("settings.json"),
        &json!({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "true"}]}]}}),
    );
    let shell = format!(
        "{}; echo KEEL_EXIT=$?",
        keel_shell(&crate::common::support::fixture("hello.json"))
    );
    let (mut s, mut child) = spawn(&sb, &shell);
    s.wait_for("the question", |t| t.contains("[y/N]"));
    s.send("n\r");
    s.wait_for("the editor", |t| t.contains("Ask anything"));
    s.send("/hooks\r");
    s.wait_for("the list", |t| {
        t.contains("hooks (2):")
            && t.contains("PreToolUse [Bash] touch hook-ran")
            && t.contains("untrusted: runs with")
            && t.contains("Stop [*] true")
            && t.contains("runs always")
    });
    assert!(s.quit("\x04", &mut child).success());
}

/// The `mcpServers` of a project's settings files start programs as `.mcp.json`'s do: only in a
/// trusted project.
#[test]
fn a_projects_settings_mcp_servers_start_only_in_a_trusted_project() {
    let sb = Sandbox::new();
    write(
        &sb.work().join(".keel/settings.json"),
        &json!({"mcpServers": {"fx": {"command": crate::mcp::FIXTURE}}}),
    );
    let run = sb.run(&["debug", "prompt", "--json"]);
    assert_eq!(run.code, 0, "{run}");
    assert!(!run.stdout.contains("mcp__fx__echo"), "{run}");
    // `debug prompt --json` gives its warnings in its JSON.
    assert!(
        run.stdout
            .contains("skipped the project's MCP servers `fx`"),
        "{run}"
    );
    let run = sb.run(&["debug", "prompt", "--json", "--trust-project"]);
    assert_eq!(run.code, 0, "{run}");
    assert!(run.stdout.contains("mcp__fx__echo"), "{run}");
    let run = sb.run(&["mcp", "list", "--json"]);
    assert!(!run.stdout.contains("\"fx\""), "{run}");
}

/// Issue 46's trust dead ends: a project that holds only agents is asked about (it never was),
/// and what was trusted is the project's, so a session in a subdirectory keeps its agents and
/// the root's `.mcp.json`.
#[test]
fn a_project_with_only_agents_is_asked_about_and_a_subdirectory_keeps_the_trust() {
    let sb = Sandbox::new();
    std::fs::create_dir_all(sb.work().join(".git")).unwrap();
    let sub = sb.work().join("crates/a");
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::create_dir_all(sb.work().join(".keel/agents")).unwrap();
    std::fs::write(
        sb.work().join(".keel/agents/reviewer.md"),
        "---\nname: reviewer\ndescription: Reviews diffs\n---\nReview the diff.\n",
    )
    .unwrap();
    let servers = json!({"mcpServers": {"fx": {"command": crate::mcp::FIXTURE}}});
    write(&sb.work().join(".mcp.json"), &servers);
    let in_sub = |args: &[&str]| {
        let mut c = sb.cmd(args);
        c.current_dir(&sub);
        sb.finish(c.output().unwrap())
    };
    let names = |run: &Run| -> Vec<String> {
        let list: Value = serde_json::from_str(&run.stdout).unwrap();
        let list = list.as_array().unwrap().iter();
        list.map(|a| a["name"].as_str().unwrap().to_string())
            .collect()
    };
    let run = in_sub(&["agents", "list", "--json"]);
    assert!(!names(&run).contains(&"reviewer".to_string()), "{run}");
    tui_trust(&sb, &["agent reviewer", "`fx`"], "y\r");
    let run = in_sub(&["agents", "list", "--json"]);
    assert!(names(&run).contains(&"reviewer".to_string()), "{run}");
    let run = in_sub(&["mcp", "list", "--json"]);
    assert_eq!(run.code, 0, "{run}");
    assert!(run.stdout.contains("\"fx\""), "{run}");
}
