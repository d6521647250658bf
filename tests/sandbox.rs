//! The hostile suite of the sandbox (issue 30): the real binary, the scripted provider calling
//! `bash` and the file tools with what a confused or hostile model would try, under bubblewrap
//! and under the Landlock + seccomp fallback (forced with KEEL_SANDBOX_MECHANISM). Every
//! attempt must be stopped; the workspace itself stays usable (`git commit` works).

use std::io::ErrorKind;
use std::net::TcpListener;
use std::os::unix::net::UnixListener;
use std::path::Path;

use serde_json::{json, Value};

use crate::common::support::{scripted_args, Sandbox};

const SECRET: &str = "secret-canary-77";
const KEY: &str = "sk-keycanary-99";

/// The mechanisms this machine can test: bubblewrap when it is installed (CI installs it),
/// Landlock always (the kernel has it here and on CI).
pub(crate) fn mechanisms() -> Vec<&'static str> {
    let mut m = Vec::new();
    if ["/usr/bin/bwrap", "/bin/bwrap", "/usr/local/bin/bwrap"]
        .iter()
        .any(|p| Path::new(p).exists())
    {
        m.push("bwrap");
    } else {
        crate::common::support::skipped("the bubblewrap half of the sandbox suite: bubblewrap is not installed (apt-get install bubblewrap)");
    }
    m.push("landlock");
    m
}

/// A scratch world: `$HOME` = the temp dir with an `.ssh/id_rsa` canary, a git repository in
/// the workspace, `work/link` pointing outside. Under `/var/tmp` where it can be: a home under
/// `/tmp` is hidden by bubblewrap's private `/tmp` whatever keel masks, and keeps Landlock's
/// rules from splitting `/var` (where `/var/run` points to `/run`).
pub(crate) fn world() -> Sandbox {
    let sb = Sandbox::new_in("/var/tmp").unwrap_or_else(Sandbox::new);
    let home = sb.dir.path();
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_rsa"), SECRET).unwrap();
    std::fs::create_dir_all(home.join("outside")).unwrap();
    std::os::unix::fs::symlink(home.join("outside"), sb.work().join("link")).unwrap();
    let git = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(sb.work())
        .output()
        .unwrap();
    assert!(git.status.success());
    std::fs::write(sb.work().join("a.txt"), "alpha\n").unwrap();
    sb
}

/// Who runs keel in the hostile suite (issue 43: every wall holds "as root and as an ordinary
/// user"): the test's own user (root on CI), and `nobody` too when that is root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum User {
    /// The user running the tests.
    Me,
    /// uid and gid 65534, no supplementary groups; the world is handed to it ([`world_as`]).
    Nobody,
}

pub(crate) const NOBODY: u32 = 65534;

/// The users this machine can run the suite as: [`User::Me`], and [`User::Nobody`] when the
/// tests run as root and `nobody` can reach keel's executable.
pub(crate) fn users() -> Vec<User> {
    let mut u = vec![User::Me];
    let exe = Path::new(env!("CARGO_BIN_EXE_keel"));
    let reachable = exe.ancestors().skip(1).all(|d| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(d).is_ok_and(|m| m.permissions().mode() & 0o001 != 0)
    });
    if nix::unistd::geteuid().is_root() && reachable {
        u.push(User::Nobody);
    } else {
        println!(
            "skipped as nobody: not root, or nobody cannot reach {}",
            exe.display()
        );
    }
    u
}

/// Every user of [`users`] with every mechanism of [`mechanisms`].
pub(crate) fn users_and_mechanisms() -> Vec<(User, &'static str)> {
    let mechs = mechanisms();
    users()
        .into_iter()
        .flat_map(|u| mechs.iter().map(move |m| (u, *m)))
        .collect()
}

/// [`world`], owned by `user` (its dir, home, workspace and everything in them).
pub(crate) fn world_as(user: User) -> Sandbox {
    let sb = world();
    if user == User::Nobody {
        give_to_nobody(sb.dir.path());
    }
    sb
}

/// Hands `path` and everything under it (symlinks themselves, not their targets) to `nobody`.
pub(crate) fn give_to_nobody(path: &Path) {
    let status = std::process::Command::new("chown")
        .args(["-R", "-h", &format!("{NOBODY}:{NOBODY}")])
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success());
}

/// Runs one turn calling `calls` (tool name, arguments) under `mechanism` with `extra` flags;
/// returns the results in order (text, is_error) and stderr.
pub(crate) fn run(
    sb: &Sandbox,
    mechanism: &str,
    calls: &[(&str, Value)],
    envs: &[(&str, &str)],
    extra: &[&str],
) -> (Vec<(String, bool)>, String) {
    run_as(sb, User::Me, mechanism, calls, envs, extra)
}

/// [`run`] as `user` (for [`User::Nobody`], the world must be [`world_as`]'s).
pub(crate) fn run_as(
    sb: &Sandbox,
    user: User,
    mechanism: &str,
    calls: &[(&str, Value)],
    envs: &[(&str, &str)],
    extra: &[&str],
) -> (Vec<(String, bool)>, String) {
    let (results, stderr, _) = run_as_events(sb, user, mechanism, calls, envs, extra);
    (results, stderr)
}

/// [`run_as`], and every event of the JSON stream too.
pub(crate) fn run_as_events(
    sb: &Sandbox,
    user: User,
    mechanism: &str,
    calls: &[(&str, Value)],
    envs: &[(&str, &str)],
    extra: &[&str],
) -> (Vec<(String, bool)>, String, Vec<Value>) {
    let mut cmd = keel_as(sb, user, mechanism, calls, &[&["--json"], extra].concat());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let events: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut results = Vec::new();
    for v in events.iter().filter(|v| v["type"] == "tool_execution_end") {
        let text = v["result"]["content"][0]["text"].as_str().unwrap_or("");
        results.push((text.to_string(), v["isError"] == true));
    }
    assert_eq!(results.len(), calls.len(), "{stdout}");
    (results, stderr, events)
}

/// `keel ARGS… go` as `user` under `mechanism`, its model the scripted one making `calls`
/// (`args`: `--json` or `-p`, and any other flag).
pub(crate) fn keel_as(
    sb: &Sandbox,
    user: User,
    mechanism: &str,
    calls: &[(&str, Value)],
    args: &[&str],
) -> std::process::Command {
    let script = sb.tool_calls_script(calls);
    if user == User::Nobody {
        give_to_nobody(Path::new(&script));
    }
    let mut all = args.to_vec();
    all.extend(scripted_args(&[], &script, &["go"]));
    let mut cmd = sb.cmd(&all);
    if user == User::Nobody {
        use std::os::unix::process::CommandExt;
        cmd.uid(NOBODY).gid(NOBODY);
    }
    cmd.env("KEEL_SANDBOX_MECHANISM", mechanism);
    cmd
}

pub(crate) fn bash(command: &str) -> (&'static str, Value) {
    ("bash", json!({ "command": command }))
}

#[test]
fn writes_outside_the_workspace_and_into_protected_paths_are_stopped() {
    for mech in mechanisms() {
        let sb = world();
        let dir = sb.dir.path();
        let config_before = std::fs::read_to_string(sb.work().join(".git/config")).unwrap();
        let calls = [
            bash("echo x > ../outside.txt"),
            bash("echo x > link/through.txt"),
            bash(&format!("echo x > {}/home-file", dir.display())),
            bash("echo '[core] hooksPath = /x' >> .git/config"),
            bash("echo 'exit 0' > .git/hooks/pre-commit"),
            bash("echo inside > in.txt && mkdir -p sub && echo ok > sub/b.txt"),
            // A private /tmp under bubblewrap, a private $TMPDIR under Landlock.
            bash("echo scratch > \"${TMPDIR:-/tmp}/scratch\" && cat \"${TMPDIR:-/tmp}/scratch\""),
        ];
        let (r, _) = run(&sb, mech, &calls, &[], &[]);
        assert!(!dir.join("outside.txt").exists(), "{mech}: {r:?}");
        assert!(!dir.join("outside/through.txt").exists(), "{mech}: {r:?}");
        assert!(!dir.join("home-file").exists(), "{mech}: {r:?}");
        // Landlock cannot make a path read-only under a writable root: the check after the
        // call puts them back (see docs/sandbox.md).
        let config = std::fs::read_to_string(sb.work().join(".git/config")).unwrap();
        assert_eq!(config, config_before, "{mech}: {r:?}");
        assert!(!sb.work().join(".git/hooks/pre-commit").exists(), "{r:?}");
        if mech == "bwrap" {
            let protected = format!(
                "[sandbox (workspace-write): {} is read-only (protected)]",
                sb.work()
                    .canonicalize()
                    .unwrap()
                    .join(".git/config")
                    .display()
            );
            assert!(r[3].0.ends_with(&protected), "{}", r[3].0);
        }
        assert!(!r[5].1, "{mech}: {r:?}");
        assert_eq!(
            std::fs::read_to_string(sb.work().join("sub/b.txt")).unwrap(),
            "ok\n"
        );
        assert_eq!(r[6], ("scratch\n".to_string(), false), "{mech}");
    }
}

#[test]
fn secrets_and_other_processes_environments_are_unreadable() {
    for (user, mech) in users_and_mechanisms() {
        let sb = world_as(user);
        let dir = sb.dir.path().display().to_string();
        let calls = [
            bash("cat ~/.ssh/id_rsa"),
            bash("grep -r 'secret-c[a]nary' ~ 2>/dev/null; true"),
            bash(
                "cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c 'sk-keyc[a]nary'; true",
            ),
            ("read", json!({"path": format!("{dir}/.ssh/id_rsa")})),
            ("grep", json!({"pattern": "secret-c[a]nary", "path": dir})),
            ("ls", json!({"path": format!("{dir}/.ssh")})),
            (
                "find",
                json!({"pattern": "*", "path": format!("{dir}/.ssh")}),
            ),
            bash("id -u"),
        ];
        let (r, _) = run_as(&sb, user, mech, &calls, &[("OPENAI_API_KEY", KEY)], &[]);
        let mech = format!("{mech} as {user:?}");
        for (i, (text, _)) in r.iter().enumerate() {
            assert!(
                !text.contains(SECRET),
                "{mech}: call {i} read the secret: {text}"
            );
            assert!(!text.contains(KEY), "{mech}: call {i}: {text}");
        }
        assert_eq!(
            r[2].0.trim(),
            "0",
            "{mech}: a process environment held the key"
        );
        // read, ls and find name the denied path: refused; grep over $HOME skips it.
        for i in [3, 5, 6] {
            assert!(r[i].1, "{mech}: call {i} was not refused: {:?}", r[i]);
        }
        assert_eq!(r[4], ("No matches found".to_string(), false), "{mech}");
        let uid = match user {
            User::Me => nix::unistd::geteuid().as_raw(),
            User::Nobody => NOBODY,
        };
        assert_eq!(r[7], (format!("{uid}\n"), false), "{mech}");
    }
}

#[test]
fn the_daemon_socket_an_agent_socket_and_the_network_are_unreachable() {
    for mech in mechanisms() {
        let sb = world();
        std::fs::create_dir_all(sb.home().join("run")).unwrap();
        let daemon = UnixListener::bind(sb.home().join("run/daemon.sock")).unwrap();
        let agent_dir = sb.dir.path().join("ssh-agent");
        std::fs::create_dir_all(&agent_dir).unwrap();
        let agent_path = agent_dir.join("agent.1");
        let agent = UnixListener::bind(&agent_path).unwrap();
        let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = tcp.local_addr().unwrap().port();
        for l in [&daemon, &agent] {
            l.set_nonblocking(true).unwrap();
        }
        tcp.set_nonblocking(true).unwrap();
        let connect = |p: &Path| {
            bash(&format!(
                "perl -MIO::Socket::UNIX -e 'IO::Socket::UNIX->new(Peer => \"{}\") or die \"refused: $!\\n\"; print \"connected\\n\"'",
                p.display()
            ))
        };
        let calls = [
            connect(&sb.home().join("run/daemon.sock")),
            connect(&agent_path),
            bash(&format!(
                "exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected"
            )),
        ];
        let agent_var = agent_path.display().to_string();
        let (r, _) = run(&sb, mech, &calls, &[("SSH_AUTH_SOCK", &agent_var)], &[]);
        for (text, _) in &r {
            assert!(!text.contains("connected"), "{mech}: {r:?}");
        }
        let none = |e: std::io::Error| e.kind() == ErrorKind::WouldBlock;
        assert!(
            daemon.accept().is_err_and(none),
            "{mech}: the daemon was reached"
        );
        assert!(
            agent.accept().is_err_and(none),
            "{mech}: the agent was reached"
        );
        assert!(
            tcp.accept().is_err_and(none),
            "{mech}: 127.0.0.1 was reached"
        );
    }
}

#[test]
fn git_commit_works_inside() {
    for mech in mechanisms() {
        let sb = world();
        let calls = [bash(
            "git add a.txt && git -c user.name=t -c user.email=t@t commit -qm first && git log --oneline | wc -l",
        )];
        let (r, _) = run(&sb, mech, &calls, &[], &[]);
        assert_eq!(r[0], ("1\n".to_string(), false), "{mech}");
    }
}

#[test]
fn sandbox_off_is_honoured_and_said_out_loud() {
    let sb = world();
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = tcp.local_addr().unwrap().port();
    let calls = [
        bash("echo x > ../outside.txt"),
        bash(&format!(
            "exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected"
        )),
    ];
    let (r, stderr) = run(&sb, "auto", &calls, &[], &["--sandbox", "off"]);
    assert!(sb.dir.path().join("outside.txt").exists(), "{r:?}");
    assert_eq!(r[1].0, "connected\n");
    assert!(tcp.accept().is_ok());
    assert!(stderr.contains("Warning: the sandbox is off"), "{stderr}");
    let sb = world();
    let (_, stderr) = run(
        &sb,
        "auto",
        &[bash("true")],
        &[],
        &["--sandbox", "danger-full-access"],
    );
    assert!(stderr.contains("Warning: the sandbox is off"), "{stderr}");
}

#[test]
fn without_a_mechanism_commands_are_refused_with_a_way_out() {
    let sb = world();
    let (r, stderr) = run(&sb, "none", &[bash("echo x > ran.txt")], &[], &[]);
    assert!(r[0].1 && r[0].0.contains("no sandbox works here"), "{r:?}");
    assert!(r[0].0.contains("--sandbox off"), "{r:?}");
    assert!(
        stderr.contains("Warning: no sandbox works here"),
        "{stderr}"
    );
    assert!(!sb.work().join("ran.txt").exists());
}

#[test]
fn the_file_tools_refuse_outside_protected_and_symlinked_paths() {
    let sb = world();
    let dir = sb.dir.path().display().to_string();
    let calls = [
        ("write", json!({"path": "../outside.txt", "content": "x"})),
        ("write", json!({"path": "link/through.txt", "content": "x"})),
        (
            "write",
            json!({"path": format!("{dir}/work/sub/../../outside2.txt"), "content": "x"}),
        ),
        ("write", json!({"path": "ok.txt", "content": "fine"})),
        ("read", json!({"path": "link/../a.txt"})),
    ];
    let (r, _) = run(&sb, "bwrap", &calls, &[], &[]);
    // A protected path (`.git/hooks`, `.git/config`) needs an approval: sandbox_git's case.
    for (i, res) in r.iter().enumerate().take(3) {
        assert!(res.1 && res.0.contains("sandbox"), "call {i}: {res:?}");
    }
    assert!(!sb.dir.path().join("outside.txt").exists());
    assert!(!sb.dir.path().join("outside/through.txt").exists());
    assert!(!sb.dir.path().join("outside2.txt").exists());
    assert!(!r[3].1, "{r:?}");
    assert_eq!(
        std::fs::read_to_string(sb.work().join("ok.txt")).unwrap(),
        "fine"
    );
}

#[test]
fn the_model_is_told_when_the_sandbox_stopped_a_command() {
    for mech in mechanisms() {
        let sb = world();
        let dir = sb.dir.path().display().to_string();
        let calls = [
            // A write (not `touch`: Landlock leaves timestamps alone on a file that exists).
            bash("echo x > /usr/keel-probe"),
            bash(&format!("echo x > {dir}/outside.txt")),
        ];
        let (r, _) = run(&sb, mech, &calls, &[], &[]);
        assert!(r[0].1, "{r:?}");
        assert!(
            r[0].0.ends_with(
                "[sandbox (workspace-write): writing outside the writable roots (/usr/keel-probe) is refused]"
            ),
            "{mech}: {}",
            r[0].0
        );
        assert!(
            r[1].0.contains("[sandbox (workspace-write)") || mech == "bwrap",
            "{mech}: {r:?}"
        );
    }
}

#[test]
fn debug_sandbox_names_the_mechanism_and_its_self_test_holds() {
    for mech in mechanisms() {
        let sb = world();
        let out = sb
            .cmd(&["debug", "sandbox", "--json"])
            .env("KEEL_SANDBOX_MECHANISM", mech)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{stdout}");
        let v: Value = serde_json::from_str(stdout.trim()).unwrap();
        let want = if mech == "bwrap" {
            "bubblewrap"
        } else {
            "landlock"
        };
        assert_eq!(v["mechanism"], want);
        assert_eq!(v["policy"]["mode"], "workspace-write");
        let checks = v["selfTest"].as_array().unwrap();
        let names: Vec<&str> = checks.iter().map(|c| c["name"].as_str().unwrap()).collect();
        assert_eq!(
            names,
            [
                "write-outside",
                "read-secret",
                "connect-out",
                "capabilities",
                "terminal",
                "namespace",
                "unix-socket",
                "x32"
            ],
            "{stdout}"
        );
        assert!(checks.iter().all(|c| c["stopped"] == true), "{stdout}");
    }
    let sb = world();
    let out = sb
        .cmd(&["debug", "sandbox", "--sandbox", "off"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.starts_with("sandbox: off · net on\nmechanism: off\n"),
        "{stdout}"
    );
}

/// Everything else here lives under `/tmp`, which bubblewrap replaces with a private one, so
/// the masks over secrets there are never needed. With `$HOME` and `$KEEL_HOME` elsewhere (as
/// on a user's machine), the masks are real: the secrets and keel's own directory are hidden,
/// while the spill files (`$KEEL_HOME/tmp`, allowed again inside the masked directory) stay
/// readable and commands run at all (bubblewrap refused to start before the fix: the mount
/// point of that allowed path could not be made in the already read-only mask).
#[test]
fn with_a_home_outside_tmp_the_masks_hold_and_another_sessions_files_stay_hidden() {
    let Some(sb) = Sandbox::new_in("/var/tmp") else {
        crate::common::support::skipped(
            "a sandbox test with a home outside /tmp: /var/tmp is not writable here",
        );
        return;
    };
    let home = sb.dir.path();
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_rsa"), SECRET).unwrap();
    // Another live session's spill directory and private /tmp (this test's pid: alive, so
    // not taken for a dead session's and removed).
    let other = sb
        .home()
        .join(format!("tmp/{}-other/sandbox-tmp", std::process::id()));
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("note.txt"), SECRET).unwrap();
    std::fs::write(sb.home().join("secret.txt"), SECRET).unwrap();
    // A copy the search must find (so a search that finds nothing proves nothing).
    std::fs::write(sb.work().join("notes.txt"), SECRET).unwrap();
    let keel_home = sb.home().display().to_string();
    let calls = [
        bash("echo ok"),
        bash(&format!("cat {}/.ssh/id_rsa", home.display())),
        bash(&format!("cat {keel_home}/secret.txt")),
        bash(&format!("cat {}/note.txt", other.display())),
        // The pattern matches the canary but is not it (the script holds the pattern).
        // Landlock cannot list `$HOME` at all (its rules only grant); the workspace, it can.
        bash(&format!(
            "grep -rs 'secret-canary-7[7]' {} {} ; echo searched",
            home.display(),
            sb.work().display()
        )),
        (
            "read",
            json!({"path": other.join("note.txt").display().to_string()}),
        ),
    ];
    for mech in mechanisms() {
        let (r, _) = run(&sb, mech, &calls, &[], &["--no-session"]);
        assert_eq!(r[0], ("ok\n".to_string(), false), "{mech}: {r:?}");
        assert!(!r[1].0.contains(SECRET) && r[1].1, "{mech}: {r:?}");
        assert!(!r[2].0.contains(SECRET) && r[2].1, "{mech}: {r:?}");
        assert!(!r[3].0.contains(SECRET) && r[3].1, "{mech}: {r:?}");
        assert!(!r[5].0.contains(SECRET) && r[5].1, "{mech}: {r:?}");
        let found = &r[4].0;
        assert!(
            found.contains("work/notes.txt:") && found.ends_with("searched\n"),
            "{mech}: {r:?}"
        );
        assert!(
            !found.contains("id_rsa") && !found.contains("secret.txt"),
            "{mech}: {r:?}"
        );
    }
}

/// Under Landlock a directory that holds a denied path cannot be listed (its rules only
/// grant): `ls ~` is refused, and the model is told it was a read, not "writing outside the
/// writable roots" (issue 43, point 19).
#[test]
fn a_listing_landlock_refuses_is_reported_as_a_read() {
    for (user, _) in users_and_mechanisms()
        .into_iter()
        .filter(|(_, m)| *m == "landlock")
    {
        let sb = world_as(user);
        let home = sb.dir.path().canonicalize().unwrap();
        let (r, _) = run_as(
            &sb,
            user,
            "landlock",
            &[bash(&format!("ls {}", home.display()))],
            &[],
            &[],
        );
        let want = format!(
            "[sandbox (workspace-write): reading {} is refused]",
            home.display()
        );
        assert!(r[0].1 && r[0].0.ends_with(&want), "{user:?}: {:?}", r[0]);
    }
}

/// Issue 44 point 13: with the project under `/tmp` (which bubblewrap replaces with a private
/// one), `--sandbox read-only` still runs commands in it (bubblewrap said "Can't chdir" to every
/// one) and they still cannot write it; `keel debug sandbox` says what each mode leaves writable
/// and its self-test runs.
#[test]
fn read_only_runs_commands_in_a_project_under_tmp_and_debug_sandbox_says_what_is_writable() {
    let sb = Sandbox::new();
    assert!(sb.work().starts_with("/tmp"), "{}", sb.work().display());
    for mech in mechanisms() {
        let script = sb.tool_calls_script(&[bash("pwd; echo x > written; cat written")]);
        let out = sb
            .cmd(&scripted_args(
                &["--json", "--no-session", "--sandbox", "read-only"],
                &script,
                &["go"],
            ))
            .env("KEEL_SANDBOX_MECHANISM", mech)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let end = stdout
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .find(|v| v["type"] == "tool_execution_end")
            .unwrap_or_else(|| panic!("{mech}: {stdout}"));
        let text = end["result"]["content"][0]["text"].as_str().unwrap_or("");
        assert!(
            text.starts_with(&sb.work().display().to_string()),
            "{mech}: {text}"
        );
        assert!(!sb.work().join("written").exists(), "{mech}: {text}");
        let shown = sb
            .cmd(&["debug", "sandbox", "--sandbox", "read-only"])
            .env("KEEL_SANDBOX_MECHANISM", mech)
            .output()
            .unwrap();
        let shown_text = String::from_utf8_lossy(&shown.stdout);
        assert_eq!(shown.status.code(), Some(0), "{mech}: {shown_text}");
        assert!(
            shown_text.contains("writable: nothing but the private /tmp"),
            "{shown_text}"
        );
        assert!(!shown_text.contains("NOT STOPPED"), "{shown_text}");
    }
    let off = sb
        .cmd(&["debug", "sandbox", "--sandbox", "off"])
        .output()
        .unwrap();
    let off = String::from_utf8_lossy(&off.stdout);
    assert!(
        off.contains("writable: everything you may write (no sandbox)"),
        "{off}"
    );
    assert!(!off.contains("unreadable:"), "{off}");
}
