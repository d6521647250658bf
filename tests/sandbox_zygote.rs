//! The sandbox zygote (issue 30, performance): `bash` calls through keel's library with a real
//! sandbox (bubblewrap, and the Landlock fallback) whose zygote is the keel binary. A call
//! killed on abort or timeout takes its whole group inside the zygote with it; a zygote killed
//! from outside is replaced by the next call; many calls run at once; exit codes and signals
//! read as unsandboxed ones do. Through the binary: the zygote's start is the probe of
//! bubblewrap (one bubblewrap per session), and a bubblewrap that fails is probed as before
//! (run without `--proc`, else Landlock, else refused with the same warning).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use keel::kernel::abort::{AbortController, AbortSignal};
use keel::kernel::sandbox::{bwrap, Choice, Places, Sandbox, SandboxMode, SandboxPolicy};
use keel::kernel::tool::{self, ToolContext, ToolOutput};
use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::common::support::Sandbox as World;
use crate::sandbox::{
    bash as bash_call, mechanisms, run, run_as, users_and_mechanisms, world, world_as,
};

/// A sandbox forced to `mech`, keel's binary as its zygote, writable `work`.
fn sandbox(mech: &str, work: &Path) -> Arc<Sandbox> {
    let places = Places {
        cwd: work.to_path_buf(),
        ..Places::default()
    };
    let policy = SandboxPolicy::new(SandboxMode::WorkspaceWrite, &places, &[], &[], &[], false);
    let choice = match mech {
        "bwrap" => Choice::Bwrap,
        _ => Choice::Landlock,
    };
    let exe = Some(env!("CARGO_BIN_EXE_keel").into());
    let sb = Sandbox::new(policy, choice, bwrap::find(None, work), exe);
    assert!(sb.zygote_runs(), "{mech}: {:?}", sb.mechanism);
    Arc::new(sb)
}

fn ctx(sandbox: &Arc<Sandbox>, work: &Path, tmp: &Path, abort: AbortSignal) -> ToolContext {
    ToolContext {
        cwd: work.to_path_buf(),
        abort,
        progress: None,
        bash_timeout: Duration::from_secs(60),
        temp_dir: tmp.to_path_buf(),
        env: Default::default(),
        files: Default::default(),
        sandbox: sandbox.clone(),
        violations: None,
        rules: Default::default(),
        watched: Default::default(),
    }
}

async fn bash(c: &ToolContext, args: Value) -> ToolOutput {
    tool::execute("bash", &args, c).await
}

/// A command that reports which of the pids in `file` still run (not dead, not a zombie),
/// polling until none does or 10 s passed: `checked` ends its output.
fn survivors(file: &str) -> String {
    format!(
        "for i in $(seq 200); do alive=; for p in $(cat {file}); do \
         s=$(sed 's/.*) //' /proc/$p/stat 2>/dev/null | cut -c1); \
         case \"$s\" in ''|Z|X) ;; *) alive=\"$alive $p\";; esac; done; \
         [ -z \"$alive\" ] && break; sleep 0.05; done; echo \"alive:$alive\"; echo checked"
    )
}

/// Runs `command` (a group of a shell and a background `sleep`, pids in `pids`) and stops it
/// with `stop`; then asks the same zygote whether any of the group survived.
async fn group_dies(mech: &str, stop: &str) {
    let d = tempfile::tempdir().unwrap();
    let work = d.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let sb = sandbox(mech, &work);
    let (ctl, signal) = AbortController::new();
    let (ptx, mut prx) = mpsc::unbounded_channel();
    let mut c = ctx(&sb, &work, &d.path().join("tmp"), signal);
    c.progress = Some(ptx);
    let cmd = "echo $$ > pids; sleep 30 & echo $! >> pids; echo start; wait";
    let args = match stop {
        "timeout" => json!({"command": cmd, "timeout": 1}),
        _ => json!({ "command": cmd }),
    };
    let call = c.clone();
    let task = tokio::spawn(async move { bash(&call, args).await });
    let first = prx.recv().await.unwrap();
    assert_eq!(first.text(), "start\n", "{mech}");
    if stop == "abort" {
        ctl.abort();
    }
    let out = tokio::time::timeout(Duration::from_secs(20), task)
        .await
        .expect("the stopped call returned")
        .unwrap();
    let want = match stop {
        "timeout" => "Command timed out after 1s",
        _ => "Command aborted",
    };
    assert!(out.text().ends_with(want), "{mech}: {}", out.text());
    // The same session (its env, so its private /tmp and zygote), a fresh abort signal.
    c.abort = AbortSignal::never();
    c.progress = None;
    let check = bash(&c, json!({ "command": survivors("pids") })).await;
    assert_eq!(check.text(), "alive:\nchecked\n", "{mech} {stop}");
    assert_eq!(
        std::fs::read_to_string(work.join("pids"))
            .unwrap()
            .lines()
            .count(),
        2
    );
}

#[tokio::test]
async fn an_aborted_call_kills_its_whole_group_inside_the_zygote() {
    for mech in mechanisms() {
        group_dies(mech, "abort").await;
    }
}

#[tokio::test]
async fn a_timed_out_call_kills_its_whole_group_inside_the_zygote() {
    for mech in mechanisms() {
        group_dies(mech, "timeout").await;
    }
}

#[tokio::test]
async fn a_zygote_killed_from_outside_is_replaced_by_the_next_call() {
    for mech in mechanisms() {
        let d = tempfile::tempdir().unwrap();
        let work = d.path().join("work");
        std::fs::create_dir_all(&work).unwrap();
        let sb = sandbox(mech, &work);
        let c = ctx(&sb, &work, &d.path().join("tmp"), AbortSignal::never());
        let first = bash(&c, json!({"command": "echo one"})).await;
        assert_eq!(first.text(), "one\n", "{mech}");
        // The zygote this test's sandbox started: ours to kill.
        let pid = sb.zygote_pid().expect("a zygote runs");
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while sb.zygote_pid() == Some(pid) && std::time::Instant::now() < deadline {
            tokio::task::yield_now().await;
        }
        assert_ne!(sb.zygote_pid(), Some(pid), "{mech}: still known alive");
        let next = bash(&c, json!({"command": "echo two"})).await;
        assert_eq!(
            (next.text(), next.is_error),
            ("two\n".into(), false),
            "{mech}"
        );
        let again = sb.zygote_pid().expect("a new zygote runs");
        assert_ne!(again, pid, "{mech}");
    }
}

#[tokio::test]
async fn many_parallel_calls_each_get_their_own_output() {
    for mech in mechanisms() {
        let d = tempfile::tempdir().unwrap();
        let work = d.path().join("work");
        std::fs::create_dir_all(&work).unwrap();
        let sb = sandbox(mech, &work);
        let c = ctx(&sb, &work, &d.path().join("tmp"), AbortSignal::never());
        let calls = (0..40).map(|i| {
            let c = c.clone();
            tokio::spawn(async move {
                let cmd = format!("echo out {i}; echo err {i} >&2; exit $(({i} % 3))");
                bash(&c, json!({ "command": cmd })).await
            })
        });
        let outs: Vec<ToolOutput> = futures_join(calls.collect()).await;
        for (i, out) in outs.iter().enumerate() {
            let text = out.text();
            assert!(text.contains(&format!("out {i}\n")), "{mech} {i}: {text}");
            assert!(text.contains(&format!("err {i}\n")), "{mech} {i}: {text}");
            let code = out.details.as_ref().unwrap()["exitCode"].clone();
            assert_eq!(code, json!(i % 3), "{mech} {i}: {text}");
        }
    }
}

async fn futures_join(tasks: Vec<tokio::task::JoinHandle<ToolOutput>>) -> Vec<ToolOutput> {
    let mut outs = Vec::new();
    for t in tasks {
        outs.push(t.await.unwrap());
    }
    outs
}

#[tokio::test]
async fn exit_codes_signals_cwd_and_environment_read_as_unsandboxed_ones_do() {
    for mech in mechanisms() {
        let d = tempfile::tempdir().unwrap();
        let work = d.path().join("work");
        std::fs::create_dir_all(work.join("sub")).unwrap();
        let sb = sandbox(mech, &work);
        let c = ctx(&sb, &work, &d.path().join("tmp"), AbortSignal::never());
        let off = Arc::new(Sandbox::off(&work));
        let plain = ctx(&off, &work, &d.path().join("tmp"), AbortSignal::never());
        for cmd in ["exit 7", "kill -TERM $$", "kill -9 $$", "echo fine"] {
            let boxed = bash(&c, json!({ "command": cmd })).await;
            let open = bash(&plain, json!({ "command": cmd })).await;
            assert_eq!(boxed.text(), open.text(), "{mech}: {cmd}");
            assert_eq!(boxed.details, open.details, "{mech}: {cmd}");
        }
        let out = bash(&c, json!({"command": "kill -TERM $$"})).await;
        assert!(
            out.text().ends_with("Command killed by signal 15"),
            "{mech}"
        );
        // Each call its own cwd and environment: nothing carries over from the last one.
        let mut sub = ctx(
            &sb,
            &work.join("sub"),
            &d.path().join("tmp"),
            AbortSignal::never(),
        );
        sub.env = keel::kernel::tool::ToolEnv::new(vec!["HOME".into()]);
        let first = bash(
            &sub,
            json!({"command": "pwd; export LEAK=1; cd /; echo ${HOME-unset}"}),
        )
        .await;
        let sub_real = work.join("sub").canonicalize().unwrap();
        assert_eq!(
            first.text(),
            format!("{}\nunset\n", sub_real.display()),
            "{mech}"
        );
        let second = bash(&c, json!({"command": "pwd; echo ${LEAK-none}"})).await;
        let work_real = work.canonicalize().unwrap();
        assert_eq!(
            second.text(),
            format!("{}\nnone\n", work_real.display()),
            "{mech}"
        );
    }
}

/// The real bubblewrap, if one is installed.
fn real_bwrap() -> Option<&'static str> {
    ["/usr/bin/bwrap", "/bin/bwrap", "/usr/local/bin/bwrap"]
        .into_iter()
        .find(|p| Path::new(p).exists())
}

/// A `bwrap` for `sandbox.bwrapPath` in `sb`'s temp dir: logs each start's arguments to
/// `bwrap.log`, then runs `body` (shell).
fn fake_bwrap(sb: &World, body: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir = sb.dir.path();
    let path = dir.join("fake-bwrap");
    let log = dir.join("bwrap.log");
    let script = format!("#!/bin/sh\necho \"$*\" >> '{}'\n{body}\n", log.display());
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    let settings = json!({"sandbox": {"bwrapPath": path.display().to_string()}});
    std::fs::write(sb.home().join("settings.json"), settings.to_string()).unwrap();
    log
}

fn starts(log: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines().map(str::to_string).collect()
}

/// The zygote's start is the probe: a session starts one bubblewrap, not a `bwrap … true`
/// first and the zygote's after it.
#[test]
fn a_session_starts_one_bubblewrap_its_zygote_and_no_probe() {
    let Some(real) = real_bwrap() else {
        crate::common::support::skipped("a zygote test under bubblewrap: bubblewrap is not installed (apt-get install bubblewrap)");
        return;
    };
    let sb = world();
    let log = fake_bwrap(&sb, &format!("exec {real} \"$@\""));
    let calls = [bash_call("echo one"), bash_call("echo $TMPDIR")];
    let (r, _) = run(&sb, "bwrap", &calls, &[], &[]);
    assert_eq!(r[0], ("one\n".to_string(), false), "{r:?}");
    assert_eq!(r[1].0, "/tmp\n", "bubblewrap's private /tmp: {r:?}");
    let started = starts(&log);
    assert_eq!(started.len(), 1, "{started:#?}");
    assert!(started[0].ends_with("__sandbox-zygote"), "{started:#?}");
    assert!(started[0].contains("--proc /proc"), "{started:#?}");
}

/// A bubblewrap whose zygote does not come up is probed as before: without `--proc` when only
/// that fails; not at all, then Landlock (auto) or refused with the warning (forced).
#[test]
fn a_bubblewrap_that_fails_is_probed_then_run_without_proc_or_replaced_or_refused() {
    let Some(real) = real_bwrap() else {
        crate::common::support::skipped("a zygote test under bubblewrap: bubblewrap is not installed (apt-get install bubblewrap)");
        return;
    };
    let calls = [
        bash_call("echo in > in.txt && echo $TMPDIR"),
        bash_call("echo x > ../outside.txt"),
    ];
    // `--proc` refused (as in some containers): the sandbox runs without it.
    let sb = world();
    let no_proc = format!(
        "for a in \"$@\"; do [ \"$a\" = --proc ] && {{ echo 'bwrap: Can not mount proc' >&2; exit 1; }}; done\nexec {real} \"$@\""
    );
    let log = fake_bwrap(&sb, &no_proc);
    let (r, _) = run(&sb, "bwrap", &calls, &[], &[]);
    assert_eq!(r[0], ("/tmp\n".to_string(), false), "{r:?}");
    assert!(sb.work().join("in.txt").exists(), "{r:?}");
    assert!(!sb.dir.path().join("outside.txt").exists(), "{r:?}");
    let started = starts(&log);
    let zygotes: Vec<&String> = started
        .iter()
        .filter(|s| s.ends_with("__sandbox-zygote"))
        .collect();
    assert!(
        zygotes.last().is_some_and(|z| !z.contains("--proc")),
        "{started:#?}"
    );

    // No namespaces at all: Landlock takes over (a private $TMPDIR, not /tmp).
    let broken = "echo 'bwrap: No permissions to create new namespace' >&2\nexit 1";
    let sb = world();
    fake_bwrap(&sb, broken);
    let (r, stderr) = run(&sb, "auto", &calls, &[], &[]);
    assert!(!r[0].1 && r[0].0 != "/tmp\n", "{r:?}");
    assert!(sb.work().join("in.txt").exists(), "{r:?}");
    assert!(!sb.dir.path().join("outside.txt").exists(), "{r:?}");
    assert!(!stderr.contains("Warning"), "{stderr}");

    // bubblewrap forced: refused, with the warning and the way out.
    let sb = world();
    fake_bwrap(&sb, broken);
    let (r, stderr) = run(&sb, "bwrap", &calls, &[], &[]);
    assert!(r[0].1 && r[0].0.contains("no sandbox works here"), "{r:?}");
    assert!(r[0].0.contains("--sandbox off"), "{r:?}");
    assert_eq!(
        stderr.matches("Warning: no sandbox works here").count(),
        1,
        "{stderr}"
    );
    assert!(!sb.work().join("in.txt").exists(), "{r:?}");
}

/// What a session found out about its bubblewrap is written down, and the next session with
/// the same bubblewrap does not probe it: it starts its zygote without waiting. If that
/// bubblewrap fails after all, the calls are refused with its error (closed, not unsandboxed),
/// the finding is forgotten, and the session after probes again (and falls back to Landlock).
#[test]
fn a_bubblewrap_known_to_work_is_not_probed_and_is_probed_again_once_it_fails() {
    let Some(real) = real_bwrap() else {
        crate::common::support::skipped("a zygote test under bubblewrap: bubblewrap is not installed (apt-get install bubblewrap)");
        return;
    };
    let sb = world();
    // Broken while `broken` exists; the script itself (what the finding is tied to) stays.
    let flag = sb.dir.path().join("broken");
    let body = format!(
        "[ -e '{}' ] && {{ echo 'bwrap: No permissions to create new namespace' >&2; exit 1; }}\nexec {real} \"$@\"",
        flag.display()
    );
    let log = fake_bwrap(&sb, &body);
    let findings = sb.home().join("cache/sandbox-probe");
    let calls = [bash_call("echo $TMPDIR")];
    // Four runs in one world (the test clock gives each the same session id).
    let once = ["--no-session"];

    let (r, _) = run(&sb, "auto", &calls, &[], &once);
    assert_eq!(r[0], ("/tmp\n".to_string(), false), "{r:?}");
    let text = std::fs::read_to_string(&findings).unwrap();
    assert!(text.ends_with("finding works\n"), "{text}");

    // Known: not probed. The run's one bubblewrap is its zygote, as before.
    std::fs::remove_file(&log).unwrap();
    let (r, _) = run(&sb, "auto", &calls, &[], &once);
    assert_eq!(r[0], ("/tmp\n".to_string(), false), "{r:?}");
    assert_eq!(starts(&log).len(), 1, "{:#?}", starts(&log));

    // Known, but broken now: refused with bubblewrap's error, and forgotten.
    std::fs::write(&flag, "").unwrap();
    let (r, _) = run(&sb, "auto", &calls, &[], &once);
    assert!(r[0].1, "{r:?}");
    assert!(
        r[0].0.contains("No permissions to create new namespace"),
        "{r:?}"
    );
    assert!(r[0].0.contains("probes it again"), "{r:?}");
    assert!(!findings.exists());

    // Probed again: bubblewrap fails, Landlock takes over (a private $TMPDIR, not /tmp).
    let (r, stderr) = run(&sb, "auto", &calls, &[], &once);
    assert!(!r[0].1 && r[0].0 != "/tmp\n", "{r:?}");
    assert!(!stderr.contains("Warning"), "{stderr}");
    let text = std::fs::read_to_string(&findings).unwrap();
    assert!(text.ends_with("finding fails\n"), "{text}");
}

/// The processes whose command line names `dir` (bubblewrap's arguments bind the world's
/// paths), zombies aside: what of a run is still running.
fn running_in(dir: &Path) -> Vec<String> {
    let needle = dir.display().to_string();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let pid = entry.file_name().to_string_lossy().into_owned();
        if pid.parse::<u32>().is_err() || pid == std::process::id().to_string() {
            continue;
        }
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(&needle) {
            found.push(format!("{pid}: {cmdline}"));
        }
    }
    found
}

/// A run whose model runs no command starts no sandbox (bubblewrap known to work): the zygote
/// starts when the model first calls `bash`. And no process of a run outlives it: its zygote
/// (bubblewrap and keel inside it) has ended, and was waited for, when keel exits.
#[test]
fn a_run_without_commands_starts_no_bubblewrap_and_none_outlives_a_run() {
    let Some(real) = real_bwrap() else {
        crate::common::support::skipped("a zygote test under bubblewrap: bubblewrap is not installed (apt-get install bubblewrap)");
        return;
    };
    let sb = world();
    let log = fake_bwrap(&sb, &format!("exec {real} \"$@\""));
    let once = ["--no-session"];
    // The first run probes bubblewrap (its zygote's start), and ends it at exit.
    let (r, _) = run(&sb, "auto", &[bash_call("echo $TMPDIR")], &[], &once);
    assert_eq!(r[0], ("/tmp\n".to_string(), false), "{r:?}");
    assert_eq!(running_in(sb.dir.path()), Vec::<String>::new());

    // Known to work: a run with no command starts no bubblewrap at all.
    std::fs::remove_file(&log).unwrap();
    let (r, _) = run(&sb, "auto", &[], &[], &once);
    assert!(r.is_empty(), "{r:?}");
    assert_eq!(starts(&log), Vec::<String>::new());

    // One with a command starts its one zygote, and ends it with the run.
    let (r, _) = run(&sb, "auto", &[bash_call("echo two")], &[], &once);
    assert_eq!(r[0], ("two\n".to_string(), false), "{r:?}");
    assert_eq!(starts(&log).len(), 1, "{:#?}", starts(&log));
    assert_eq!(running_in(sb.dir.path()), Vec::<String>::new());
}

/// No process of a run outlives it, under either mechanism, as root and as an ordinary user:
/// not its zygote (bubblewrap, or the Landlock helper and keel inside), nor what the model's
/// command left running in the background (`setsid`, so outside the call's process group).
#[test]
fn no_process_of_a_run_outlives_it_under_either_mechanism_as_any_user() {
    for (user, mech) in users_and_mechanisms() {
        let sb = world_as(user);
        let marker = sb.dir.path().join("survivor");
        let command = format!(
            "setsid sh -c 'sleep 60' '{}' & echo started",
            marker.display()
        );
        let (r, _) = run_as(
            &sb,
            user,
            mech,
            &[bash_call(&command)],
            &[],
            &["--no-session"],
        );
        assert_eq!(
            r[0],
            ("started\n".to_string(), false),
            "{user:?} {mech}: {r:?}"
        );
        assert_eq!(
            running_in(sb.dir.path()),
            Vec::<String>::new(),
            "{user:?} {mech}"
        );
    }
}
