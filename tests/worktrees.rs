//! Worktrees (issue 48, DESIGN §20), through keel's binary and the scripted provider: `-w NAME`
//! runs a session in `.keel/worktrees/NAME` on branch `keel/NAME`; two of them at once edit
//! one file on two branches and the main checkout stays byte for byte as the user left it
//! (its uncommitted changes, its index); an isolated session cannot write the main checkout
//! (told which worktree to use), the shared git config or hooks, as root and as `nobody`,
//! under bubblewrap and Landlock; a clean worktree is removed at the end, a dirty one kept and
//! said; a keel killed with -9 leaves its worktree kept and locked, and the next daemon start
//! unlocks it; outside a repository, in a bare one, `-w` is a usage error; a detached `HEAD`
//! works; submodules and Git LFS files are said.

use std::path::Path;
use std::process::Command;

use serde_json::json;

use crate::common::daemon::Daemon;
use crate::common::support::{scripted_args, Sandbox};
use crate::sandbox::{
    bash, give_to_nobody, keel_as, mechanisms, run_as_events, users_and_mechanisms, world, User,
};

/// `git ARGS` in `dir` (any owner: the world may be `nobody`'s); its trimmed stdout.
pub(crate) fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "safe.directory=*", "-c", "protocol.file.allow=always"])
        .args(args)
        .env("GIT_OPTIONAL_LOCKS", "0")
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim_end().to_string()
}

/// The world's workspace made a repository with one commit (`a.txt`), an identity for
/// commits made in it, then changes the user has not committed: `a.txt` edited, `new.txt`
/// staged.
pub(crate) fn repository(sb: &Sandbox) {
    let w = sb.work();
    git(&w, &["config", "user.email", "t@example.com"]);
    git(&w, &["config", "user.name", "T"]);
    git(&w, &["add", "a.txt"]);
    git(&w, &["commit", "-qm", "first"]);
    std::fs::write(w.join("a.txt"), "alpha\nmine, not committed\n").unwrap();
    std::fs::write(w.join("new.txt"), "staged\n").unwrap();
    git(&w, &["add", "new.txt"]);
}

/// What must not change in the main checkout: its status, its index, its files.
fn main_state(w: &Path) -> (String, String, String, String) {
    (
        git(w, &["status", "--porcelain=v1"]),
        git(w, &["ls-files", "--stage"]),
        git(w, &["diff", "--cached"]),
        std::fs::read_to_string(w.join("a.txt")).unwrap(),
    )
}

#[test]
fn two_sessions_in_their_own_worktrees_edit_one_file_on_two_branches() {
    let sb = world();
    repository(&sb);
    let w = sb.work();
    let before = main_state(&w);
    // One script for both runs: each commits a line naming its worktree.
    let command = "n=$(basename \"$KEEL_WORKTREE\"); echo \"from $n\" >> a.txt && git add a.txt \
                   && git commit -qm \"$n at $KEEL_PORT_OFFSET\" && git status --porcelain";
    let mech = mechanisms()[0];
    // Both commands made (the script written) before either starts.
    let mut cmds = ["a", "b"].map(|name| {
        keel_as(
            &sb,
            User::Me,
            mech,
            &[bash(command)],
            &["-p", "--no-session", "-w", name],
        )
    });
    let [a, b] = cmds.each_mut().map(|c| {
        c.stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    });
    for (name, child) in [("a", a), ("b", b)] {
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{name}: {stderr}");
        let kept = format!(".keel/worktrees/{name} (branch keel/{name}): 0 uncommitted change(s), 1 commit(s) ahead");
        assert!(stderr.contains(&kept), "{name}: {stderr}");
        let file = git(&w, &["show", &format!("keel/{name}:a.txt")]);
        assert_eq!(file, format!("alpha\nfrom {name}"), "{name}");
        let subject = git(&w, &["log", "-1", "--format=%s", &format!("keel/{name}")]);
        assert!(subject.starts_with(&format!("{name} at ")), "{subject}");
        // Kept, and no longer locked: the session that held it is over.
        let listed = git(&w, &["worktree", "list", "--porcelain"]);
        let entry = listed
            .split("\n\n")
            .find(|e| e.contains(&format!("branch refs/heads/keel/{name}")))
            .unwrap_or_else(|| panic!("{listed}"));
        assert!(!entry.contains("locked"), "{entry}");
    }
    assert_eq!(main_state(&w), before, "the main checkout changed");
    // Each run had its own port offset while both were live, from 100 (never the checkout's 0).
    let offsets: Vec<String> = ["a", "b"]
        .iter()
        .map(|n| git(&w, &["log", "-1", "--format=%s", &format!("keel/{n}")]))
        .collect();
    assert!(offsets.iter().all(|s| !s.ends_with(" at 0")), "{offsets:?}");
}

#[test]
fn an_isolated_session_writes_neither_the_main_checkout_nor_the_shared_git_config() {
    for (user, mech) in users_and_mechanisms() {
        let sb = world();
        repository(&sb);
        if user == User::Nobody {
            give_to_nobody(sb.dir.path());
        }
        let who = format!("{mech} as {user:?}");
        let w = sb.work();
        let main = w.canonicalize().unwrap();
        let common = main.join(".git");
        let config_before = std::fs::read(common.join("config")).unwrap();
        let before = main_state(&w);
        let calls = [
            bash(&format!("echo planted >> {}/a.txt", main.display())),
            (
                "write",
                json!({"path": main.join("a.txt").display().to_string(), "content": "x\n"}),
            ),
            bash("echo work >> a.txt && git commit -qam 'in the worktree' && git log -1 --format=%s"),
            bash(&format!(
                "printf '#!/bin/sh\\ntouch {0}/ran\\n' > {1}/hooks/post-commit; chmod +x {1}/hooks/post-commit",
                main.display(),
                common.display()
            )),
            bash("git config core.hooksPath /tmp"),
            bash(&format!(
                "echo {0} > {1}/worktrees/iso/gitdir; echo {1} > {1}/worktrees/iso/commondir",
                main.join("x").display(),
                common.display()
            )),
        ];
        let (r, stderr, _) =
            run_as_events(&sb, user, mech, &calls, &[], &["--no-session", "-w", "iso"]);
        let tree = main.join(".keel/worktrees/iso");
        let instead = format!("this session works in the worktree {}", tree.display());
        assert!(r[0].1, "{who}: {:?}", r[0]);
        assert!(r[0].0.contains(&instead), "{who}: {}", r[0].0);
        assert!(r[1].1 && r[1].0.contains(&instead), "{who}: {:?}", r[1]);
        assert!(
            !r[2].1 && r[2].0.contains("in the worktree"),
            "{who}: {:?}",
            r[2]
        );
        assert!(r[3].1, "{who}: the shared hooks were writable: {:?}", r[3]);
        assert!(r[4].1, "{who}: the shared config was writable: {:?}", r[4]);
        // Refused (bubblewrap binds them read-only), or undone after the call (Landlock
        // grants the whole git directory: the check after the call covers them).
        let undone = "is protected: what the command changed was undone";
        let refused = r[5].1 || r[5].0.contains(undone);
        assert!(
            refused,
            "{who}: the worktree's gitdir was writable: {:?}",
            r[5]
        );
        let admin = common.join("worktrees/iso");
        let commondir = std::fs::read_to_string(admin.join("commondir")).unwrap();
        assert_eq!(commondir, "../..\n", "{who}");
        let gitdir = std::fs::read_to_string(admin.join("gitdir")).unwrap();
        assert_eq!(
            gitdir.trim(),
            tree.join(".git").display().to_string(),
            "{who}"
        );
        assert_eq!(main_state(&w), before, "{who}: the main checkout changed");
        assert_eq!(
            std::fs::read(common.join("config")).unwrap(),
            config_before,
            "{who}"
        );
        assert!(!common.join("hooks/post-commit").exists(), "{who}");
        assert!(
            git(&w, &["worktree", "list", "--porcelain"])
                .contains(&format!("worktree {}\n", tree.display())),
            "{who}"
        );
        // The commit is on its branch; the worktree is kept (it is ahead) and says so.
        assert_eq!(
            git(&w, &["log", "-1", "--format=%s", "keel/iso"]),
            "in the worktree",
            "{who}"
        );
        assert!(stderr.contains("1 commit(s) ahead"), "{who}: {stderr}");
    }
}

#[test]
fn outside_a_repository_and_in_a_bare_one_w_is_a_usage_error() {
    let sb = Sandbox::new();
    let script = sb.script(json!([{"chunks": [{"text": "never"}]}]));
    let args = scripted_args(&["-p", "--no-session", "-w", "x"], &script, &["go"]);
    let run = sb.run(&args);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("is not in a git repository"),
        "{}",
        run.stderr
    );
    git(&sb.work(), &["init", "-q", "--bare"]);
    let run = sb.run(&args);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("is a bare repository"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_detached_head_works_and_a_clean_worktree_is_removed_with_its_branch() {
    let sb = world();
    repository(&sb);
    let w = sb.work();
    git(&w, &["stash", "-q"]);
    git(&w, &["checkout", "-q", "--detach"]);
    let head = git(&w, &["rev-parse", "HEAD"]);
    let calls = [bash("git rev-parse HEAD; git branch --show-current")];
    let (r, stderr, events) = run_as_events(
        &sb,
        User::Me,
        mechanisms()[0],
        &calls,
        &[],
        &["--no-session", "-w", "d"],
    );
    assert_eq!(
        r[0].0.lines().collect::<Vec<_>>(),
        [head.as_str(), "keel/d"],
        "{:?}",
        r[0]
    );
    assert!(stderr.contains("worktree d was clean: removed"), "{stderr}");
    // JSON mode's header names the worktree and its branch.
    let tree = w.canonicalize().unwrap().join(".keel/worktrees/d");
    let header = &events[0];
    assert_eq!(header["type"], "session", "{header}");
    assert_eq!(header["cwd"], tree.display().to_string(), "{header}");
    assert_eq!(header["worktree"], tree.display().to_string(), "{header}");
    assert_eq!(header["branch"], "keel/d", "{header}");
    assert!(!w.join(".keel/worktrees/d").exists());
    assert_eq!(git(&w, &["branch", "--list", "keel/d"]), "");
    assert_eq!(
        git(&w, &["rev-parse", "HEAD"]),
        head,
        "the checkout's HEAD moved"
    );
}

#[test]
fn submodules_and_git_lfs_files_are_said() {
    let sb = world();
    let sub = sb.dir.path().join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    git(&sub, &["init", "-q"]);
    std::fs::write(sub.join("s.txt"), "s\n").unwrap();
    git(&sub, &["add", "."]);
    git(
        &sub,
        &[
            "-c",
            "user.email=t@e",
            "-c",
            "user.name=T",
            "commit",
            "-qm",
            "s",
        ],
    );
    repository(&sb);
    let w = sb.work();
    git(
        &w,
        &["submodule", "add", "-q", sub.to_str().unwrap(), "sub"],
    );
    let pointer = "version https://git-lfs.github.com/spec/v1\noid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 12345\n";
    std::fs::write(
        w.join(".gitattributes"),
        "*.bin filter=lfs diff=lfs merge=lfs -text\n",
    )
    .unwrap();
    std::fs::write(w.join("big.bin"), pointer).unwrap();
    git(&w, &["add", ".gitattributes", "big.bin"]);
    git(&w, &["commit", "-qm", "sub and lfs"]);
    let lfs = Command::new("git")
        .args(["lfs", "version"])
        .output()
        .is_ok_and(|o| o.status.success());
    let calls = [bash("ls -A sub | wc -l; cat big.bin")];
    let (r, stderr, _) = run_as_events(
        &sb,
        User::Me,
        mechanisms()[0],
        &calls,
        &[],
        &["--no-session", "-w", "s"],
    );
    assert!(stderr.contains("the repository has submodules"), "{stderr}");
    assert!(
        r[0].0.starts_with("0\n"),
        "the submodule was checked out: {:?}",
        r[0]
    );
    if lfs {
        println!("git-lfs is installed: its files are git's to check out; not asserted");
    } else {
        assert!(stderr.contains("git-lfs is not installed"), "{stderr}");
        assert!(r[0].0.contains("oid sha256:4d7a"), "{:?}", r[0]);
    }
}

#[test]
fn a_keel_killed_with_9_leaves_its_worktree_kept_and_the_next_daemon_start_unlocks_it() {
    let sb = world();
    repository(&sb);
    let w = sb.work();
    let calls = [bash("echo started > started && exec sleep 1000")];
    let mut cmd = keel_as(
        &sb,
        User::Me,
        mechanisms()[0],
        &calls,
        &["-p", "--no-session", "-w", "k"],
    );
    let mut child = cmd
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = w.join(".keel/worktrees/k/started");
    let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !started.exists() {
        assert!(std::time::Instant::now() < until, "the call never started");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let entry = |listed: &str| {
        listed
            .split("\n\n")
            .find(|e| e.contains("refs/heads/keel/k"))
            .map(str::to_string)
            .unwrap_or_else(|| panic!("{listed}"))
    };
    let locked = entry(&git(&w, &["worktree", "list", "--porcelain"]));
    assert!(locked.contains("locked keel pid="), "{locked}");
    // The next daemon start: its sweep logs what it did to each repository keel used.
    let run = sb.dir.path().join("run");
    std::fs::create_dir_all(&run).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700)).unwrap();
    let socket = run.join("d.sock");
    let cmd = sb
        .cmd(&["daemon", "run", "--socket", socket.to_str().unwrap()])
        .env("KEEL_LOG", "info")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut daemon = Daemon {
        child: Some(cmd),
        socket,
    };
    let stderr = daemon.child.as_mut().unwrap().stderr.take().unwrap();
    let mut seen = Vec::new();
    for line in std::io::BufRead::lines(std::io::BufReader::new(stderr)) {
        let line = line.unwrap();
        let done = line.contains("worktrees of");
        seen.push(line);
        if done {
            break;
        }
    }
    assert!(
        seen.last().is_some_and(|l| l.contains("unlocked: [\"k\"]")),
        "{seen:?}"
    );
    let unlocked = entry(&git(&w, &["worktree", "list", "--porcelain"]));
    assert!(!unlocked.contains("locked"), "{unlocked}");
    assert!(started.exists(), "the kept worktree lost its file");
    drop(daemon);
}

#[test]
fn a_daemon_session_in_its_worktree_is_listed_with_it_and_removed_clean_when_closed() {
    use crate::common::daemon::{keel_on, open};
    let sb = world();
    repository(&sb);
    let w = sb.work();
    let before = main_state(&w);
    let daemon = Daemon::start(&sb, &[]);
    let mut c = daemon.client();
    let id = open(&mut c, &sb, "hello.json", &["-w", "dd"]);
    let tree = w.canonicalize().unwrap().join(".keel/worktrees/dd");
    let status = c.call("daemon/status", json!({}))["result"].clone();
    let live = &status["sessions"][0];
    assert_eq!(live["worktree"], tree.display().to_string(), "{live}");
    assert_eq!(live["branch"], "keel/dd", "{live}");
    assert_eq!(live["cwd"], tree.display().to_string(), "{live}");
    let ps = keel_on(&sb, &daemon.socket, &["ps", "--json"]);
    assert!(
        ps.stdout.contains("\"branch\":\"keel/dd\""),
        "{}",
        ps.stdout
    );
    assert!(tree.is_dir());
    let r = c.call("session/close", json!({ "sessionId": id }));
    assert!(r.get("error").is_none(), "{r}");
    assert!(!tree.exists(), "a clean worktree outlived its session");
    assert_eq!(git(&w, &["branch", "--list", "keel/dd"]), "");
    assert_eq!(main_state(&w), before, "the checkout changed");
}
