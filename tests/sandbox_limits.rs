//! The hostile suite, issue 43 point 14: resource limits per session, and nothing of a call
//! outlives it. Under bubblewrap and the Landlock fallback, as root and as `nobody`: a fork
//! bomb ends with its call (the session's process limit stops it where one binds) and leaves
//! nothing running, a memory hog is stopped by the session's memory limit and the call says
//! so, what a call leaves in the background (`&`, `setsid`, a double fork, `nohup`) is gone
//! once it returned; and each time the next call in the same session works.

use serde_json::{json, Value};

use crate::common::support::Sandbox;
use crate::sandbox::{bash, give_to_nobody, run_as, users_and_mechanisms, world_as, User, NOBODY};

/// A marker no other process has: built at run time by the commands (`$M`), so that the
/// command line of the call that starts them does not hold it.
fn marker(what: &str) -> (String, String) {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let tail = format!("{}x{}", std::process::id(), nanos % 1_000_000_000);
    (format!("keel{what}"), tail)
}

/// A shell expression: how many processes (as the sandbox sees them) have `$M` in their
/// command line (the pattern comes from a file, so that `grep` itself does not count).
const COUNT: &str =
    "$(grep -l -a -F -f <(printf '%s\\n' \"$M\") /proc/[0-9]*/cmdline 2>/dev/null | wc -l)";

/// A command that prints `left:N`: how many processes have `head``tail` in their command line.
fn count(head: &str, tail: &str) -> String {
    format!("M={head}; M=${{M}}{tail}; echo left:{COUNT}")
}

/// The processes of the host whose command line holds `head``tail`, waited for to be gone
/// (keel has exited: its zygote ends what is left) for up to 10 s.
fn host_survivors(head: &str, tail: &str) -> Vec<i32> {
    let needle = format!("{head}{tail}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let found: Vec<i32> = std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&needle))
            })
            .collect();
        if found.is_empty() || std::time::Instant::now() > deadline {
            for &pid in &found {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            return found;
        }
        std::thread::yield_now();
    }
}

/// `settings` as the user's settings file of `sb` (owned by `user`).
fn settings(sb: &Sandbox, user: User, settings: Value) {
    let path = sb.home().join("settings.json");
    std::fs::write(&path, settings.to_string()).unwrap();
    if user == User::Nobody {
        give_to_nobody(&path);
    }
}

/// `keel debug sandbox --json`'s `limits` as `user` under `mech`.
fn limits_report(sb: &Sandbox, user: User, mech: &str) -> Value {
    let mut cmd = sb.cmd(&["debug", "sandbox", "--json"]);
    if user == User::Nobody {
        use std::os::unix::process::CommandExt;
        cmd.uid(NOBODY).gid(NOBODY);
    }
    let out = cmd.env("KEEL_SANDBOX_MECHANISM", mech).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|_| panic!("{stdout}\n{}", String::from_utf8_lossy(&out.stderr)));
    v["limits"].clone()
}

/// A bounded fork bomb: every process forks two more, ten levels deep (2047 processes and
/// their sleeps where nothing stops it, so that a machine without a binding limit survives
/// the test), each leaf a `sleep` named by the marker; the call times out.
fn bomb(head: &str, tail: &str) -> String {
    format!(
        "M={head}; M=${{M}}{tail}; b() {{ [ $1 -gt 0 ] || exec -a $M sleep 300; b $(($1-1)) & b $(($1-1)) & wait; }}; b 10"
    )
}

#[test]
fn a_fork_bomb_ends_with_its_call_and_the_next_call_works() {
    for (user, mech) in users_and_mechanisms() {
        let sb = world_as(user);
        let who = format!("{mech} as {user:?}");
        settings(&sb, user, json!({"sandbox": {"limits": {"pids": 128}}}));
        let report = limits_report(&sb, user, mech);
        assert_eq!(report["pids"], 128, "{who}: {report}");
        // As root here the limit comes from a cgroup; as nobody from one or RLIMIT_NPROC.
        if user == User::Me && nix::unistd::geteuid().is_root() {
            println!("{who}: limits held by {}", report["enforcement"]);
        }
        let binds = report["pidsBind"] == true;
        let (head, tail) = marker("bomb");
        let calls = [
            ("bash", json!({"command": bomb(&head, &tail), "timeout": 5})),
            bash(&count(&head, &tail)),
            bash("echo ok"),
        ];
        let (r, stderr) = run_as(&sb, user, mech, &calls, &[], &["--no-session"]);
        assert!(r[0].1, "{who}: the bomb's call did not fail: {:?}", r[0]);
        println!(
            "{who}: {report}: …{}",
            tail_of(&r[0].0).lines().last().unwrap_or("")
        );
        if binds {
            assert!(
                r[0].0
                    .contains("the session's process limit (128) was reached"),
                "{who}: the limit did not stop the bomb: {}",
                tail_of(&r[0].0)
            );
        } else {
            // Root without a cgroup (RLIMIT_NPROC does not bind root): the session said so.
            assert!(stderr.contains("does not bind here"), "{who}: {stderr}");
        }
        assert_eq!(
            r[1],
            ("left:0\n".into(), false),
            "{who}: the bomb outlived its call"
        );
        assert_eq!(r[2], ("ok\n".into(), false), "{who}: the next call");
        assert_eq!(host_survivors(&head, &tail), Vec::<i32>::new(), "{who}");
    }
}

#[test]
fn a_memory_hog_is_stopped_by_the_memory_limit_and_the_next_call_works() {
    for (user, mech) in users_and_mechanisms() {
        let sb = world_as(user);
        let who = format!("{mech} as {user:?}");
        settings(
            &sb,
            user,
            json!({"sandbox": {"limits": {"memory": "256M"}}}),
        );
        // `tail` keeps the last line whole: 1 GiB of zeros without a newline.
        let hog = "head -c 1G /dev/zero | tail | wc -c; exit ${PIPESTATUS[1]}";
        let (r, _) = run_as(&sb, user, mech, &[bash(hog), bash("echo ok")], &[], &[]);
        assert!(r[0].1, "{who}: the hog's call did not fail: {:?}", r[0]);
        println!("{who}: {}", r[0].0.replace('\n', " / "));
        assert!(!r[0].0.contains("1073741824"), "{who}: the hog got it all");
        assert!(
            r[0].0.contains("memory limit (256 MiB"),
            "{who}: the call did not say what stopped it: {}",
            r[0].0
        );
        assert_eq!(r[1], ("ok\n".into(), false), "{who}: the next call");
    }
}

#[test]
fn what_a_call_leaves_running_ends_with_it() {
    for (user, mech) in users_and_mechanisms() {
        let sb = world_as(user);
        let who = format!("{mech} as {user:?}");
        let (head, tail) = marker("bg");
        // In the call's group, in a session of its own, double-forked, and nohup'ed: each
        // is running (named by the marker) before the call returns.
        let leave = format!(
            "M={head}; M=${{M}}{tail}; \
             (exec -a $M-1 sleep 300) & \
             setsid bash -c \"exec -a $M-2 sleep 300\" & \
             ( (exec -a $M-3 sleep 300) & ) ; \
             nohup bash -c \"exec -a $M-4 sleep 300\" >/dev/null 2>&1 & \
             until [ \"{COUNT}\" -ge 4 ]; do :; done; \
             echo started"
        );
        let calls = [bash(&leave), bash(&count(&head, &tail)), bash("echo ok")];
        let (r, _) = run_as(&sb, user, mech, &calls, &[], &["--no-session"]);
        assert_eq!(r[0], ("started\n".into(), false), "{who}");
        assert_eq!(
            r[1],
            ("left:0\n".into(), false),
            "{who}: they outlived the call"
        );
        assert_eq!(r[2], ("ok\n".into(), false), "{who}: the next call");
        assert_eq!(host_survivors(&head, &tail), Vec::<i32>::new(), "{who}");
    }
}

/// The end of a long output, for an assertion's message.
fn tail_of(text: &str) -> &str {
    let at = text.len().saturating_sub(600);
    let at = (at..text.len())
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0);
    &text[at..]
}
