//! The sandbox's settings end to end (issue 30 point 1-2, DESIGN §13-14): a settings file's
//! `sandbox.filesystem.allowWrite` and `denyRead`, `sandbox.mode` and `--sandbox` over it, a
//! project's own file widening the sandbox only once trusted (the trust store or
//! --trust-project), `keel config show`
//! naming each key's origin, a daemon session getting the sandbox of its cwd's settings, and
//! `keel ps` / `keel daemon status` showing each live session's sandbox.

use std::path::Path;

use serde_json::{json, Value};

use crate::common::daemon::Daemon;
use crate::common::support::{fixture, scripted_args};
use crate::sandbox::{bash, mechanisms, run, world};

fn write(path: &Path, v: &Value) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, v.to_string()).unwrap();
}

#[test]
fn settings_allow_write_lets_a_sandboxed_bash_write_there() {
    for mech in mechanisms() {
        let mut sb = world();
        let extra = sb.dir.path().join("extra");
        std::fs::create_dir_all(&extra).unwrap();
        let calls = [
            bash(&format!("echo in > {}/a.txt", extra.display())),
            bash("echo out > ../outside.txt"),
        ];
        // Without the setting, `extra` is outside the writable roots.
        let (r, _) = run(&sb, mech, &calls[..1], &[], &[]);
        assert!(r[0].1 && !extra.join("a.txt").exists(), "{mech}: {r:?}");
        let settings = json!({"sandbox": {"filesystem": {"allowWrite": [extra]}}});
        write(&sb.home().join("settings.json"), &settings);
        sb.seed += 1;
        let (r, _) = run(&sb, mech, &calls, &[], &[]);
        assert!(!r[0].1, "{mech}: {r:?}");
        assert_eq!(
            std::fs::read_to_string(extra.join("a.txt")).unwrap(),
            "in\n"
        );
        assert!(!sb.dir.path().join("outside.txt").exists(), "{mech}: {r:?}");
    }
}

#[test]
fn settings_deny_read_hides_a_path_from_bash_and_the_file_tools() {
    for mech in mechanisms() {
        let sb = world();
        std::fs::create_dir_all(sb.work().join("private")).unwrap();
        std::fs::write(sb.work().join("private/key"), "private-canary-5").unwrap();
        std::fs::create_dir_all(sb.dir.path().join("private2")).unwrap();
        std::fs::write(sb.dir.path().join("private2/key"), "private-canary-6").unwrap();
        // A project's own file may narrow the sandbox without being trusted.
        let deny = json!({"sandbox": {"filesystem": {"denyRead": ["./private", "~/private2"]}}});
        write(&sb.work().join(".keel/settings.json"), &deny);
        let outside = sb.dir.path().join("private2/key").display().to_string();
        let calls = [
            bash("cat private/key"),
            ("read", json!({"path": "private/key"})),
            bash("cat a.txt"),
            bash(&format!("cat {outside}")),
            ("read", json!({ "path": outside })),
        ];
        let (r, stderr) = run(&sb, mech, &calls, &[], &[]);
        if mech == "bwrap" {
            // Landlock cannot take a path inside a writable root away (see docs/sandbox.md).
            assert!(
                r[0].1 && !r[0].0.contains("private-canary"),
                "{mech}: {r:?}"
            );
        }
        assert!(r[1].1 && r[3].1 && r[4].1, "{mech}: {r:?}");
        assert!(!r[3].0.contains("private-canary"), "{mech}: {r:?}");
        assert_eq!(r[2], ("alpha\n".to_string(), false), "{mech}");
        assert!(!stderr.contains("not applied"), "{stderr}");
    }
}

#[test]
fn settings_mode_off_is_honoured_and_the_flag_beats_it() {
    let mut sb = world();
    write(
        &sb.home().join("settings.json"),
        &json!({"sandbox": {"mode": "danger-full-access"}}),
    );
    let (r, stderr) = run(&sb, "auto", &[bash("echo x > ../outside.txt")], &[], &[]);
    assert!(sb.dir.path().join("outside.txt").exists(), "{r:?}");
    assert!(stderr.contains("Warning: the sandbox is off"), "{stderr}");
    std::fs::remove_file(sb.dir.path().join("outside.txt")).unwrap();
    sb.seed += 1;
    let flag = ["--sandbox", "workspace-write"];
    let (r, stderr) = run(&sb, "auto", &[bash("echo x > ../outside.txt")], &[], &flag);
    assert!(!sb.dir.path().join("outside.txt").exists(), "{r:?}");
    assert!(!stderr.contains("sandbox is off"), "{stderr}");
}

#[test]
fn a_project_file_widens_the_sandbox_only_in_a_trusted_project() {
    let mut sb = world();
    let wide = json!({"sandbox": {"mode": "off", "failIfUnavailable": false}});
    write(&sb.work().join(".keel/settings.json"), &wide);
    let (r, stderr) = run(&sb, "auto", &[bash("echo x > ../outside.txt")], &[], &[]);
    assert!(!sb.dir.path().join("outside.txt").exists(), "{r:?}");
    assert!(
        stderr.contains("`sandbox.mode` \"off\" is not applied: it widens the sandbox"),
        "{stderr}"
    );
    assert!(stderr.contains("`sandbox.failIfUnavailable` false is not applied"));
    sb.seed += 1;
    let trust = ["--trust-project"];
    let (_, stderr) = run(&sb, "auto", &[bash("echo x > ../outside.txt")], &[], &trust);
    assert!(sb.dir.path().join("outside.txt").exists(), "{stderr}");
}

#[test]
fn a_projects_wider_sandbox_waits_for_trust_in_the_store_and_again_when_it_changes() {
    let mut sb = world();
    let shared = sb.dir.path().join("shared");
    std::fs::create_dir_all(&shared).unwrap();
    let settings = sb.work().join(".keel/settings.json");
    write(
        &settings,
        &json!({"sandbox": {"filesystem": {"allowWrite": ["../shared"]}}}),
    );
    let calls = [bash("echo x > ../shared/a.txt")];
    let (r, stderr) = run(&sb, "auto", &calls, &[], &[]);
    assert!(r[0].1 && !shared.join("a.txt").exists(), "{r:?}");
    let left_out =
        "`sandbox.filesystem.allowWrite` \"../shared\" is not applied: it widens the sandbox";
    assert!(stderr.contains(left_out), "{stderr}");
    assert!(stderr.contains("trust it in keel's TUI"), "{stderr}");
    // The TUI's question names it; yes is kept in the trust store, so a headless run applies
    // it without --trust-project.
    crate::project_trust::tui_trust(
        &sb,
        &["  a wider sandbox:\n    `sandbox.filesystem.allowWrite: \"../shared\"`\n"],
        "y\r",
    );
    sb.seed += 1;
    let (r, stderr) = run(&sb, "auto", &calls, &[], &[]);
    assert!(!r[0].1, "{r:?}\n{stderr}");
    assert!(shared.join("a.txt").exists());
    assert!(!stderr.contains("not applied"), "{stderr}");
    // A widening changed since: none of it applies until trusted again.
    std::fs::remove_file(shared.join("a.txt")).unwrap();
    write(
        &settings,
        &json!({"sandbox": {"filesystem": {"allowWrite": ["../shared", "../elsewhere"]}}}),
    );
    sb.seed += 1;
    let (r, stderr) = run(&sb, "auto", &calls, &[], &[]);
    assert!(r[0].1 && !shared.join("a.txt").exists(), "{r:?}");
    assert!(stderr.contains(left_out), "{stderr}");
    assert!(
        stderr.contains("\"../elsewhere\" is not applied"),
        "{stderr}"
    );
}

#[test]
fn config_show_names_the_sandbox_keys_and_their_origin() {
    let sb = world();
    let settings = json!({"sandbox": {"mode": "read-only", "network": {"allow": ["crates.io"]},
        "filesystem": {"allowWrite": ["/opt/cache"], "denyRead": ["./private"]},
        "failIfUnavailable": false, "allowEscalation": false}});
    write(&sb.home().join("settings.json"), &settings);
    let run = sb.run(&["config", "show"]);
    assert_eq!(run.code, 0, "{run}");
    let file = sb.home().join("settings.json").display().to_string();
    for line in [
        "sandbox.mode = \"read-only\"",
        "sandbox.network = {\"allow\":[\"crates.io\"]}",
        "sandbox.failIfUnavailable = false",
        "sandbox.allowEscalation = false",
        "sandbox.filesystem.allowWrite += \"/opt/cache\"",
        "sandbox.filesystem.denyRead += \"./private\"",
    ] {
        assert!(
            run.stdout.contains(&format!("{line}  # {file}\n")),
            "{line}\n{run}"
        );
    }
}

#[test]
fn a_daemon_session_gets_the_sandbox_of_its_cwds_settings() {
    let sb = world();
    let extra = sb.dir.path().join("extra");
    std::fs::create_dir_all(&extra).unwrap();
    std::fs::create_dir_all(sb.work().join("private")).unwrap();
    std::fs::write(sb.work().join("private/key"), "private-canary-5").unwrap();
    let settings =
        json!({"sandbox": {"filesystem": {"allowWrite": ["../extra"], "denyRead": ["./private"]}}});
    write(&sb.work().join(".keel/settings.json"), &settings);
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let socket = d.socket.display().to_string();
    let calls = [
        bash("echo in > ../extra/a.txt"),
        bash("echo out > ../outside.txt"),
        bash("cat private/key"),
    ];
    let flags = ["--daemon", "--socket", &socket, "--trust-project"];
    let (r, _) = run(&sb, "auto", &calls, &[], &flags);
    assert!(!r[0].1, "{r:?}");
    assert_eq!(
        std::fs::read_to_string(extra.join("a.txt")).unwrap(),
        "in\n"
    );
    assert!(!sb.dir.path().join("outside.txt").exists(), "{r:?}");
    assert!(r[2].1 && !r[2].0.contains("private-canary"), "{r:?}");
}

/// `keel ps` and `keel daemon status` said nothing of a session's sandbox: a daemon session
/// whose commands ran with the user's full access looked like any other. Each row now has its
/// sandbox, `OFF` in capitals; `--json` has its mode, network and mechanism.
#[test]
fn keel_ps_and_daemon_status_show_each_sessions_sandbox_and_off_loudly() {
    let mut sb = world();
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let socket = d.socket.display().to_string();
    let script = fixture("hello.json");
    let mut ids = Vec::new();
    for (seed, extra) in [(501, &[][..]), (502, &["--sandbox", "off"][..])] {
        // Two sessions, two ids.
        sb.seed = seed;
        let mut args = vec!["--daemon", "--socket", &socket, "-p"];
        args.extend(scripted_args(&[], &script, &[]));
        args.extend_from_slice(extra);
        args.extend(["--detach", "hi"]);
        let r = sb.run(&args);
        assert_eq!(r.code, 0, "{r}");
        ids.push(r.stdout.trim().to_string());
    }
    let ps = sb.run(&["ps", "--socket", &socket]);
    assert_eq!(ps.code, 0, "{ps}");
    let header = ps.stdout.lines().next().unwrap();
    assert!(header.contains("SANDBOX"), "{ps}");
    let row = |id: &str| {
        let found = ps.stdout.lines().find(|l| l.starts_with(id));
        found.unwrap_or_else(|| panic!("no row for {id}: {ps}"))
    };
    assert!(
        row(&ids[0]).contains("  workspace-write · net off  "),
        "{ps}"
    );
    assert!(row(&ids[1]).contains("  OFF  "), "{ps}");
    assert!(!row(&ids[1]).contains("workspace-write"), "{ps}");

    let json = sb.run(&["ps", "--json", "--socket", &socket]);
    assert_eq!(json.code, 0, "{json}");
    let lines: Vec<Value> = json.stdout_lines();
    let of = |id: &str| {
        let found = lines.iter().find(|l| l["sessionId"] == id);
        found.unwrap_or_else(|| panic!("no line for {id}: {json}"))["sandbox"].clone()
    };
    let boxed = of(&ids[0]);
    assert_eq!(boxed["mode"], "workspace-write", "{json}");
    assert_eq!(boxed["network"], false, "{json}");
    let mech = boxed["mechanism"].as_str().unwrap_or_default().to_string();
    assert!(
        ["bubblewrap", "landlock"].contains(&mech.as_str()),
        "{json}"
    );
    assert_eq!(
        of(&ids[1]),
        json!({"mode": "off", "network": true, "mechanism": "off"})
    );

    let status = sb.run(&["daemon", "status", "--socket", &socket]);
    assert_eq!(status.code, 0, "{status}");
    let line = status.stdout.lines().find(|l| l.starts_with("sandbox: "));
    let line = line.unwrap_or_else(|| panic!("no sandbox line: {status}"));
    assert!(
        line.contains("1 workspace-write · net off") && line.contains("1 OFF"),
        "{status}"
    );
}
