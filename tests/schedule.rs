//! Scheduled tasks end to end: `keel schedule …` against a test daemon with the scripted
//! provider. Timing is real but short (`--every 1s` through the test-only floor
//! `KEEL_SCHEDULE_MIN_SECS=1`); every wait polls the store or the daemon for a state change
//! with a deadline, never a fixed sleep.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::daemon::{keel_on, Daemon};
use crate::common::support::{fixture, scripted_args, snap, Run, Sandbox};

/// How long a test waits for a state it expects.
const DEADLINE: Duration = Duration::from_secs(30);

/// The socket a daemon of this sandbox listens on (also before one runs).
fn socket_of(sb: &Sandbox) -> std::path::PathBuf {
    sb.dir.path().join("run").join("p2.sock")
}

/// Adds task `name` running `script` every second (plus `extra` flags before `--`).
fn add(sb: &Sandbox, name: &str, script: &str, extra: &[&str]) -> Run {
    let script = fixture(script);
    let mut args = vec!["schedule", "add", name, "--every", "1s"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&scripted_args(&[], &script, &["--", "do", "it"]));
    let run = keel_on(sb, &socket_of(sb), &args);
    assert_eq!(run.code, 0, "{run}");
    run
}

/// One line of `keel schedule list --json`: exactly these fields.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[allow(dead_code)]
struct ListLine {
    name: String,
    every: Option<u64>,
    cron: Option<String>,
    cwd: String,
    spec: Value,
    prompt: String,
    on_failure: Option<String>,
    paused: bool,
    created: String,
    next_run: Option<String>,
    last_run: Option<String>,
    last_outcome: Option<String>,
    last_exit: Option<i32>,
    last_session: Option<String>,
    last_error: Option<String>,
    runs: u64,
    skipped: u64,
    #[serde(default)]
    last_warnings: Vec<String>,
    #[serde(default)]
    last_violations: Vec<String>,
}

/// `keel schedule list --json`, each line checked against [`ListLine`].
fn list(sb: &Sandbox) -> Vec<Value> {
    let run = keel_on(sb, &socket_of(sb), &["schedule", "list", "--json"]);
    assert_eq!(run.code, 0, "{run}");
    for line in run.stdout.lines() {
        if let Err(e) = serde_json::from_str::<ListLine>(line) {
            panic!("{e}: {line}");
        }
    }
    run.stdout_lines()
}

fn task(sb: &Sandbox, name: &str) -> Value {
    list(sb)
        .into_iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no task {name}"))
}

fn runs(sb: &Sandbox, name: &str) -> u64 {
    task(sb, name)["runs"].as_u64().unwrap()
}

/// Polls `f` every 50 ms until it gives a value; fails after [`DEADLINE`].
fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < DEADLINE, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The task once its last run settled with a recorded outcome and at least `n` runs.
fn settled(sb: &Sandbox, name: &str, n: u64) -> Value {
    wait_for(&format!("{n} settled run(s) of {name}"), || {
        let t = task(sb, name);
        let done = t["runs"].as_u64() >= Some(n) && t["lastOutcome"] != "running";
        done.then_some(t)
    })
}

#[test]
fn a_task_every_second_runs_as_a_named_saved_session_that_resumes() {
    let sb = Sandbox::new();
    let d = Daemon::start(&sb, &[]);
    add(&sb, "hello", "hello.json", &[]);
    let t = settled(&sb, "hello", 1);
    assert_eq!(
        (&t["lastOutcome"], &t["lastExit"]),
        (&json!("success"), &json!(0)),
        "{t}"
    );
    let id = t["lastSession"].as_str().unwrap().to_string();
    let file = sb
        .session_files()
        .into_iter()
        .find(|f| f.display().to_string().contains(&id))
        .unwrap_or_else(|| panic!("no session file for {id}"));
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("\"name\":\"schedule:hello "), "{text}");
    assert!(text.contains("Hello from keel!"), "{text}");
    // Settled and unwatched: saved and closed in the daemon, so it resumes like any session.
    let script = fixture("hello.json");
    let args = scripted_args(&["-p", "--resume", &id], &script, &["again"]);
    let resumed = keel_on(&sb, &d.socket, &args);
    assert_eq!(resumed.code, 0, "{resumed}");
    assert_eq!(resumed.stdout, "Hello from keel!\n");
    // The table shows it too.
    let table = keel_on(&sb, &d.socket, &["schedule", "list"]);
    let row = table.stdout.lines().nth(1).unwrap_or_default().to_string();
    assert!(
        row.starts_with("hello ") && row.contains("every 1s"),
        "{table}"
    );
}

#[test]
fn a_running_task_is_a_live_attachable_session_and_its_next_slots_are_skipped() {
    let sb = Sandbox::new();
    let d = Daemon::start(&sb, &[]);
    let mut c = d.connect();
    c.hello(true);
    add(&sb, "hang", "hang.json", &[]);
    let live = wait_for("the run's live session", || {
        c.sessions().into_iter().find(|s| {
            s["state"] == "running"
                && s["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("schedule:hang "))
        })
    });
    let id = live["sessionId"].as_str().unwrap().to_string();
    let ps = keel_on(&sb, &d.socket, &["ps"]);
    assert!(
        ps.stdout.contains(&id) && ps.stdout.contains("schedule:hang"),
        "{ps}"
    );
    let attached = c.call("session/attach", json!({"sessionId": id}));
    assert_eq!(attached["result"]["mode"], "snapshot", "{attached}");
    // One run at a time: the slots that come while it hangs are skipped and counted.
    let t = wait_for("a skipped slot", || {
        let t = task(&sb, "hang");
        (t["skipped"].as_u64() >= Some(2)).then_some(t)
    });
    assert_eq!(
        (&t["runs"], &t["lastOutcome"]),
        (&json!(0), &json!("running")),
        "{t}"
    );
    // Through protocol v1 too: one run at a time, and only tasks that exist.
    let busy = c.call("schedule/run", json!({"name": "hang"}));
    assert_eq!(busy["error"]["code"], -32013, "{busy}");
    let unknown = c.call("schedule/run", json!({"name": "nope"}));
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    let reload = c.call("schedule/reload", json!({}));
    assert_eq!(reload["result"], json!({"tasks": 1}), "{reload}");
    assert_eq!(
        keel_on(&sb, &d.socket, &["schedule", "pause", "hang"]).code,
        0
    );
    let aborted = c.call("abort", json!({"sessionId": id}));
    assert!(aborted.get("result").is_some(), "{aborted}");
    let t = settled(&sb, "hang", 1);
    assert_eq!(
        (&t["lastOutcome"], &t["lastExit"]),
        (&json!("failed"), &json!(1)),
        "{t}"
    );
    // A client is attached: the session stays live until it leaves.
    assert!(c.sessions().iter().any(|s| s["sessionId"] == id.as_str()));
}

#[test]
fn a_failing_run_triggers_on_failure_with_its_result_line_and_a_notice() {
    let sb = Sandbox::new();
    let d = Daemon::start(&sb, &[]);
    let mut c = d.connect();
    c.hello(true);
    let out = sb.dir.path().join("failed.json");
    let cmd = format!("cat > {}.tmp && mv {0}.tmp {0}", out.display());
    add(
        &sb,
        "broken",
        "provider_error.json",
        &["--on-failure", &cmd],
    );
    let text = wait_for("the --on-failure output", || {
        std::fs::read_to_string(&out).ok()
    });
    assert_eq!(
        keel_on(&sb, &d.socket, &["schedule", "pause", "broken"]).code,
        0
    );
    let line: Value = serde_json::from_str(text.trim_end()).unwrap();
    assert_eq!(
        (&line["type"], &line["outcome"], &line["exitCode"]),
        (&json!("result"), &json!("failed"), &json!(1)),
        "{line}"
    );
    assert_eq!(line["error"]["kind"], "provider_error", "{line}");
    let t = settled(&sb, "broken", 1);
    assert_eq!(line["sessionId"], t["lastSession"], "{t}");
    assert_eq!(
        (&t["lastOutcome"], &t["lastExit"]),
        (&json!("failed"), &json!(1))
    );
    let notes = c.notes_until(|v| v["method"] == "daemon/notice");
    let notice = &notes.last().unwrap()["params"];
    assert_eq!(
        (&notice["task"], &notice["outcome"]),
        (&json!("broken"), &json!("failed"))
    );
    let message = notice["message"].as_str().unwrap();
    assert!(
        message.starts_with("scheduled task broken ended failed (exit 1)"),
        "{message}"
    );
}

#[test]
fn an_approval_nobody_answers_ends_the_run_blocked_after_the_timeout() {
    let sb = Sandbox::new();
    let _d = Daemon::start(&sb, &[]);
    let ask = ["--permission", "ask", "--approval-timeout", "0.2"];
    add(&sb, "ask", "blocked.json", &ask);
    let t = settled(&sb, "ask", 1);
    assert_eq!(
        keel_on(&sb, &socket_of(&sb), &["schedule", "pause", "ask"]).code,
        0
    );
    assert_eq!(
        (&t["lastOutcome"], &t["lastExit"]),
        (&json!("blocked"), &json!(5)),
        "{t}"
    );
    let id = t["lastSession"].as_str().unwrap();
    let file = sb
        .session_files()
        .into_iter()
        .find(|f| f.display().to_string().contains(id))
        .unwrap();
    let text = std::fs::read_to_string(file).unwrap();
    assert!(
        !text.contains("unreachable"),
        "the run went on after the block: {text}"
    );
}

#[test]
fn pause_stops_runs_and_resume_starts_them_again() {
    let sb = Sandbox::new();
    let d = Daemon::start(&sb, &[]);
    add(&sb, "paused", "hello.json", &[]);
    add(&sb, "witness", "hello.json", &[]);
    settled(&sb, "paused", 1);
    assert_eq!(
        keel_on(&sb, &d.socket, &["schedule", "pause", "paused"]).code,
        0
    );
    let n = settled(&sb, "paused", 1)["runs"].as_u64().unwrap();
    let table = keel_on(&sb, &d.socket, &["schedule", "list"]).stdout;
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("paused ") && l.contains(" paused ")),
        "{table}"
    );
    // The witness runs every second meanwhile: three more of its runs, none of the paused one.
    let w = runs(&sb, "witness");
    settled(&sb, "witness", w + 3);
    assert_eq!(runs(&sb, "paused"), n, "a paused task ran");
    assert_eq!(
        keel_on(&sb, &d.socket, &["schedule", "resume", "paused"]).code,
        0
    );
    settled(&sb, "paused", n + 1);
    // `run` starts a paused task at once.
    assert_eq!(
        keel_on(&sb, &d.socket, &["schedule", "pause", "paused"]).code,
        0
    );
    let m = settled(&sb, "paused", n + 1)["runs"].as_u64().unwrap();
    let now = keel_on(&sb, &d.socket, &["schedule", "run", "paused"]);
    assert_eq!(now.code, 0, "{now}");
    let t = settled(&sb, "paused", m + 1);
    assert_eq!(t["lastSession"].as_str(), Some(now.stdout.trim()), "{t}");
}

#[test]
fn a_restarted_daemon_keeps_the_schedule_and_a_daemon_with_tasks_stays_up() {
    let sb = Sandbox::new();
    // Added before any daemon runs: it says so, and the task waits for one.
    let first = add(&sb, "tick", "hello.json", &[]);
    first.assert_stderr("no keel daemon is running");
    let mut d = Daemon::start(&sb, &["--idle-exit", "0.3"]);
    // Three runs take longer than the idle exit: the daemon stays up for its task.
    settled(&sb, "tick", 3);
    assert!(
        d.child.as_mut().unwrap().try_wait().unwrap().is_none(),
        "idle exit with a task"
    );
    drop(d);
    let mut d = Daemon::start(&sb, &["--idle-exit", "0.3"]);
    let n = runs(&sb, "tick");
    settled(&sb, "tick", n + 1);
    let status = keel_on(&sb, &d.socket, &["daemon", "status", "--json"]);
    let v: Value = serde_json::from_str(status.stdout.trim()).unwrap();
    assert_eq!(
        (&v["schedules"]["tasks"], &v["schedules"]["active"]),
        (&json!(1), &json!(1))
    );
    // Paused, nothing keeps it: it exits on idle.
    assert_eq!(
        keel_on(&sb, &d.socket, &["schedule", "pause", "tick"]).code,
        0
    );
    let code = wait_for("the idle exit", || {
        d.child
            .as_mut()
            .unwrap()
            .try_wait()
            .unwrap()
            .map(|s| s.code())
    });
    assert_eq!(code, Some(0));
}

#[test]
fn a_corrupt_schedules_file_is_reported_and_nothing_runs_or_overwrites_it() {
    let sb = Sandbox::new();
    let file = sb.home().join("schedules.json");
    std::fs::write(&file, "{\"version\":1,\"tasks\":[{\"name\":\"x\"").unwrap();
    let d = Daemon::start(&sb, &[]);
    let status = keel_on(&sb, &d.socket, &["daemon", "status"]);
    status.assert_stdout("schedules.json is corrupt");
    let script = fixture("hello.json");
    let args = scripted_args(
        &["schedule", "add", "y", "--every", "1s"],
        &script,
        &["--", "hi"],
    );
    let run = keel_on(&sb, &d.socket, &args);
    snap(
        "schedule_add_corrupt_store",
        &run.to_string().replace(&script, "[SCRIPT]"),
    );
    assert_eq!(run.code, 3);
    assert_eq!(keel_on(&sb, &d.socket, &["schedule", "list"]).code, 3);
    assert_eq!(keel_on(&sb, &d.socket, &["schedule", "run", "x"]).code, 3);
    let left = std::fs::read_to_string(&file).unwrap();
    assert_eq!(left, "{\"version\":1,\"tasks\":[{\"name\":\"x\"");
    assert!(
        sb.session_files().is_empty(),
        "a run started from a corrupt file"
    );
}

#[test]
fn add_lists_every_problem_at_once() {
    let sb = Sandbox::new();
    let socket = socket_of(&sb);
    let args = [
        "schedule",
        "add",
        "bad name",
        "--every",
        "5x",
        "--cron",
        "61 * * * *",
        "--cwd",
        "missing",
        "--json",
        "--",
        "hi",
    ];
    let usage = keel_on(&sb, &socket, &args);
    snap("schedule_add_usage_errors", &usage.to_string());
    assert_eq!(usage.code, 2);
    let short = keel_on(
        &sb,
        &socket,
        &["schedule", "add", "x", "--every", "30s", "--", "hi"],
    );
    let floor = sb
        .cmd(&["schedule", "add", "x", "--every", "30s", "--", "hi"])
        .env("KEEL_SOCKET", &socket)
        .output()
        .unwrap();
    let floor = sb.finish(floor);
    assert_eq!(floor.code, 2, "{floor}");
    floor.assert_stderr("shorter than the minimum, 1m");
    // With the test floor 30 s is fine; no provider is configured in this environment.
    snap("schedule_add_no_provider", &short.to_string());
    assert_eq!(short.code, 3);
    assert!(
        !sb.home().join("schedules.json").exists(),
        "a refused task was stored"
    );
    add(&sb, "x", "hello.json", &[]);
    let again = keel_on(
        &sb,
        &socket,
        &[
            "schedule",
            "add",
            "x",
            "--every",
            "1m",
            "--provider",
            "scripted",
            "--",
            "hi",
        ],
    );
    assert_eq!(again.code, 2, "{again}");
    assert!(again.stderr.contains("a task x exists already"), "{again}");
}

#[test]
fn schedule_add_refuses_an_api_key_and_never_stores_or_prints_it() {
    // `--api-key` used to be stored in schedules.json and printed by `list --json`.
    let sb = Sandbox::new();
    let socket = socket_of(&sb);
    let script = fixture("hello.json");
    let key = "sk-test-0123456789-do-not-store";
    let flags = [
        vec!["--api-key".to_string(), key.to_string()],
        vec![format!("--api-key={key}")],
    ];
    for flag in &flags {
        let mut args = vec![
            "schedule",
            "add",
            "k",
            "--every",
            "1h",
            "--provider",
            "scripted",
        ];
        args.extend(["--script", &script]);
        args.extend(flag.iter().map(String::as_str));
        args.extend(["--", "hi"]);
        let run = keel_on(&sb, &socket, &args);
        assert_eq!(run.code, 2, "{run}");
        assert!(run.stderr.contains("--api-key"), "{run}");
        assert!(run.stderr.contains("daemon's environment"), "{run}");
        assert!(run.stderr.contains("models.json"), "{run}");
        assert!(
            !run.stdout.contains(key) && !run.stderr.contains(key),
            "{run}"
        );
        assert!(
            !sb.home().join("schedules.json").exists(),
            "a task with a key was stored"
        );
    }
    let listed = keel_on(&sb, &socket, &["schedule", "list", "--json"]);
    assert!(!listed.stdout.contains(key), "{listed}");
}

#[test]
fn install_prints_a_login_unit_that_runs_the_daemon_forever() {
    let sb = Sandbox::new();
    let socket = socket_of(&sb);
    let systemd = keel_on(&sb, &socket, &["daemon", "install", "--print", "--systemd"]);
    assert_eq!(systemd.code, 0, "{systemd}");
    snap("daemon_install_systemd", &systemd.to_string());
    let launchd = keel_on(&sb, &socket, &["daemon", "install", "--print", "--launchd"]);
    assert_eq!(launchd.code, 0, "{launchd}");
    snap("daemon_install_launchd", &launchd.to_string());
    let bare = keel_on(&sb, &socket, &["daemon", "install"]);
    assert_eq!(bare.code, 2, "{bare}");
}

#[test]
fn a_tui_attached_to_the_daemon_shows_a_failed_run_as_a_notice() {
    let sb = Sandbox::new();
    let d = Daemon::start(&sb, &[]);
    let socket = d.socket.display().to_string();
    let keel = env!("CARGO_BIN_EXE_keel");
    let shell = format!(
        "exec '{keel}' --daemon --socket '{socket}' --provider scripted --script '{}' --session-id watch hi",
        fixture("hello.json")
    );
    let (mut w, mut child) = crate::common::pty::spawn(&sb, &shell);
    w.wait_for("the answer", |t| t.contains("Hello from keel!"));
    add(&sb, "broken", "provider_error.json", &[]);
    w.wait_for("the notice", |t| {
        t.contains("scheduled task broken ended failed (exit 1)")
    });
    assert_eq!(keel_pause(&sb, "broken"), 0);
    w.send("/detach\r");
    w.wait_for("the goodbye", |t| t.contains("Left session watch"));
    assert!(child.wait().unwrap().success());
}

fn keel_pause(sb: &Sandbox, name: &str) -> i32 {
    keel_on(sb, &socket_of(sb), &["schedule", "pause", name]).code
}

#[test]
fn schedule_help_lists_the_commands() {
    let sb = Sandbox::new();
    let help = keel_on(&sb, &socket_of(&sb), &["schedule", "--help"]);
    assert_eq!(help.code, 0, "{help}");
    snap("schedule_help", &help.to_string());
    let add = keel_on(&sb, &socket_of(&sb), &["schedule", "add", "--help"]);
    assert_eq!(add.code, 0, "{add}");
    snap("schedule_add_help", &add.to_string());
}

#[test]
fn a_run_that_cannot_start_is_recorded_with_its_startup_error() {
    let sb = Sandbox::new();
    let _d = Daemon::start(&sb, &[]);
    let out = sb.dir.path().join("failed.json");
    let cmd = format!("cat > {}.tmp && mv {0}.tmp {0}", out.display());
    // The flags are valid and name a provider; the script is gone by the time it runs.
    add(&sb, "gone", "no_such_script.json", &["--on-failure", &cmd]);
    let t = settled(&sb, "gone", 1);
    assert_eq!(keel_pause(&sb, "gone"), 0);
    assert_eq!(
        (&t["lastOutcome"], &t["lastExit"]),
        (&json!("config_error"), &json!(3)),
        "{t}"
    );
    assert!(
        t["lastError"]
            .as_str()
            .unwrap()
            .contains("no_such_script.json"),
        "{t}"
    );
    let text = wait_for("the --on-failure output", || {
        std::fs::read_to_string(&out).ok()
    });
    let line: Value = serde_json::from_str(text.trim_end()).unwrap();
    assert_eq!(
        (&line["outcome"], &line["exitCode"]),
        (&json!("config_error"), &json!(3))
    );
    assert_eq!(line["error"]["kind"], "config_error", "{line}");
    assert_eq!(
        line["sessionId"],
        Value::Null,
        "no session was opened: {line}"
    );
}

/// A scheduled run is sandboxed like any session (issue 30 point 4): its command cannot write
/// outside the workspace, and its record names what the sandbox stopped; a task run with the
/// sandbox off has that warning in its record.
#[test]
fn a_scheduled_run_is_sandboxed_and_its_record_names_what_was_stopped() {
    let sb = Sandbox::new();
    let _d = Daemon::start(&sb, &[]);
    // A path the sandbox keeps read-only (bubblewrap gives the sandbox a /tmp of its own).
    let outside = "/usr/keel-schedule-probe";
    let call = json!({"toolCall": {"id": "c1", "name": "bash",
        "arguments": {"command": format!("echo x > {outside}")}}});
    let script = sb.dir.path().join("escape.json");
    let turns = json!({"turns": [{"chunks": [call]}, {"chunks": [{"text": "done"}]}]});
    std::fs::write(&script, turns.to_string()).unwrap();
    let script = script.display().to_string();
    add_with(&sb, "caged", &script, &[]);
    let t = settled(&sb, "caged", 1);
    assert_eq!(keel_pause(&sb, "caged"), 0);
    assert_eq!(t["lastOutcome"], "success", "{t}");
    assert!(
        !std::path::Path::new(outside).exists(),
        "it wrote outside: {t}"
    );
    let stopped = format!("sandbox stopped a command (outside writable roots): {outside}");
    assert_eq!(t["lastViolations"], json!([stopped]), "{t}");
    assert_eq!(t.get("lastWarnings"), None, "{t}");

    add_with(&sb, "open", &fixture("hello.json"), &["--sandbox", "off"]);
    let t = settled(&sb, "open", 1);
    assert_eq!(keel_pause(&sb, "open"), 0);
    let warnings = t["lastWarnings"].as_array().cloned().unwrap_or_default();
    let off = |w: &Value| w.as_str().unwrap().starts_with("the sandbox is off");
    assert!(warnings.iter().any(off), "{t}");
}

/// Adds task `name` running the script at path `script` every second.
fn add_with(sb: &Sandbox, name: &str, script: &str, extra: &[&str]) {
    let mut args = vec!["schedule", "add", name, "--every", "1s"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&scripted_args(&[], script, &["--", "go"]));
    let run = keel_on(sb, &socket_of(sb), &args);
    assert_eq!(run.code, 0, "{run}");
}

/// A store written by a keel of protocol 1 (tasks with flags) is converted once, by the first
/// keel that loads it, with the old file kept beside it; a stored `--api-key` never reaches the
/// spec (its value is not listed).
#[test]
fn a_version_1_store_is_converted_to_specs_once_with_a_backup() {
    let sb = Sandbox::new();
    let store = sb.home().join("schedules.json");
    let v1 = json!({"version": 1, "tasks": [{
        "name": "old", "every": 3600, "cwd": sb.work(),
        "args": ["--provider", "scripted", "--model", "m", "--max-turns", "2",
                 "--api-key", "sk-old-secret"],
        "prompt": "p", "created": "2026-01-01T00:00:00+00:00"}]})
    .to_string();
    std::fs::write(&store, &v1).unwrap();
    let t = task(&sb, "old");
    assert_eq!(t["spec"]["provider"], "scripted", "{t}");
    assert_eq!(t["spec"]["model"], "m", "{t}");
    assert_eq!(t["spec"]["maxTurns"], 2, "{t}");
    assert!(t.get("args").is_none(), "{t}");
    let now = std::fs::read_to_string(&store).unwrap();
    assert!(now.contains("\"version\": 2"), "{now}");
    assert!(
        !now.contains("sk-old-secret"),
        "a key is never stored: {now}"
    );
    let backup = sb.home().join("schedules.json.v1.bak");
    assert_eq!(std::fs::read_to_string(backup).unwrap(), v1);
}
