//! The hostile suite against a check-then-open race (issue 43 points 2, 8, 9): a background
//! process swaps a name in the workspace between a regular file (or directory) and a symlink to
//! a secret or to a file outside, as fast as it can, while keel's file tools, checkpoints and
//! rewind work on that name. Nothing outside the workspace may be read, stored or changed.
//! Since a call's background processes end with it (issue 43 point 14), the swapper that races
//! the file tools is started beside keel, as its user, the way a background job will run.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde_json::json;

use crate::checkpoints::{checkpoints, session_id, turn};
use crate::sandbox::{bash, give_to_nobody, run_as, users_and_mechanisms, world, world_as, User};

const SECRET: &str = "secret-canary-77";
const BASHRC: &str = "bashrc-canary\n";
/// Rounds of calls in the tools' test (six calls a round, one turn).
const ROUNDS: usize = 170;

/// The background process: swaps `f` (to the secret), `g` (to `~/.bashrc`) and `d`
/// (to `~/.ssh`) between a symlink and a decoy until `stop` exists; `started` once it runs.
/// Its first argument is a marker its command line is found by.
const SWAPPER: &str = r#"
my (undef, $secret, $bashrc, $ssh) = @ARGV;
mkdir "d"; open(my $x, ">", "d/decoy"); print $x "decoy\n"; close $x;
my $n = 0;
while (!-e "stop") {
    for my $p (["f", $secret], ["g", $bashrc]) {
        my ($name, $target) = @$p;
        symlink($target, "$name.l"); rename("$name.l", $name);
        open(my $h, ">", "$name.r"); print $h "decoy\n"; close $h; rename("$name.r", $name);
    }
    rename("d", "d.r"); symlink($ssh, "d"); unlink("d"); rename("d.r", "d");
    if (++$n == 10) { open(my $s, ">", "started"); close $s; }
}
"#;

/// The running [`SWAPPER`], killed if the test ends before it did.
struct Background(std::process::Child);

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts [`SWAPPER`] in `sb`'s workspace as `user` and waits until it runs (`started`).
fn start_swapper(sb: &crate::common::support::Sandbox, user: User) -> Background {
    use std::os::unix::process::CommandExt;
    let h = sb.dir.path();
    let mut cmd = std::process::Command::new("perl");
    cmd.arg("swap.pl")
        .arg("swapper")
        .arg(h.join(".ssh/id_rsa"))
        .arg(h.join(".bashrc"))
        .arg(h.join(".ssh"))
        .current_dir(sb.work())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    if user == User::Nobody {
        cmd.uid(crate::sandbox::NOBODY).gid(crate::sandbox::NOBODY);
    }
    let mut child = Background(cmd.spawn().unwrap());
    let started = sb.work().join("started");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !started.exists() && std::time::Instant::now() < deadline {
        assert!(child.0.try_wait().unwrap().is_none(), "the swapper ended");
        std::thread::yield_now();
    }
    assert!(started.exists(), "the swapper did not start");
    child
}

#[test]
fn a_swapping_symlink_never_lets_the_file_tools_read_or_write_outside() {
    for (user, mech) in users_and_mechanisms() {
        let sb = world_as(user);
        let home = sb.dir.path().to_path_buf();
        std::fs::write(home.join(".bashrc"), BASHRC).unwrap();
        std::fs::write(sb.work().join("swap.pl"), SWAPPER).unwrap();
        if user == User::Nobody {
            give_to_nobody(&home.join(".bashrc"));
            give_to_nobody(&sb.work().join("swap.pl"));
        }
        let mut swapper = start_swapper(&sb, user);
        let mut calls = vec![bash("test -e started && echo up")];
        for _ in 0..ROUNDS {
            calls.extend([
                ("read", json!({"path": "f"})),
                (
                    "grep",
                    json!({"pattern": "secret-c[a]nary|decoy", "path": "."}),
                ),
                ("ls", json!({"path": "d"})),
                ("find", json!({"pattern": "*", "path": "d"})),
                ("write", json!({"path": "g", "content": "owned\n"})),
                (
                    "edit",
                    json!({"path": "g", "oldText": "decoy", "newText": "owned"}),
                ),
            ]);
        }
        calls.push(bash("touch stop; echo stopped"));
        let started = std::time::Instant::now();
        let (r, _) = run_as(&sb, user, mech, &calls, &[], &[]);
        let took = started.elapsed();
        let mech = format!("{mech} as {user:?}");
        println!("{mech}: {} calls in {took:?}", calls.len());
        assert_eq!(r[0], ("up\n".to_string(), false), "{mech}: the swapper");
        // `touch stop`, the last call, ends it.
        assert!(swapper.0.wait().unwrap().success(), "{mech}: the swapper");
        let mut seen: Vec<String> = r
            .iter()
            .zip(&calls)
            .enumerate()
            .filter(|(_, ((text, _), _))| text.contains(SECRET) || text.contains("id_rsa"))
            .map(|(i, (_, (tool, _)))| format!("call {i} ({tool}) saw ~/.ssh"))
            .collect();
        if std::fs::read_to_string(home.join(".bashrc")).unwrap() != BASHRC {
            seen.push("~/.bashrc was written".into());
        }
        if std::fs::read_to_string(home.join(".ssh/id_rsa")).unwrap() != SECRET {
            seen.push("~/.ssh/id_rsa was written".into());
        }
        assert!(seen.is_empty(), "{mech}: {seen:?}");
    }
}

/// Swaps `name` and `other` (a symlink) in `dir` with `RENAME_EXCHANGE` until stopped.
struct Swapper {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Swapper {
    fn start(dir: &Path, pairs: &[(&str, &str)]) -> Swapper {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let dir = dir.to_path_buf();
        let pairs: Vec<(PathBuf, PathBuf)> = pairs
            .iter()
            .map(|(a, b)| (dir.join(a), dir.join(b)))
            .collect();
        let thread = std::thread::spawn(move || {
            use nix::fcntl::{renameat2, RenameFlags};
            while !flag.load(Ordering::Relaxed) {
                for (a, b) in &pairs {
                    // A name a rewind just removed comes back with the next exchange.
                    let _ = renameat2(None, a, None, b, RenameFlags::RENAME_EXCHANGE);
                }
            }
        });
        Swapper {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Swapper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

/// Every object of every checkpoint store under `keel_home`, decompressed.
fn stored_objects(keel_home: &Path) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut stack = vec![keel_home.join("checkpoints")];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if e.file_type().unwrap().is_dir() {
                stack.push(p);
            } else if p.parent().and_then(Path::parent).and_then(Path::file_name)
                == Some("objects".as_ref())
            {
                let raw = std::fs::read(&p).unwrap();
                let mut body = Vec::new();
                flate2::read::ZlibDecoder::new(&raw[..])
                    .read_to_end(&mut body)
                    .unwrap();
                out.push(body);
            }
        }
    }
    out
}

#[test]
fn a_snapshot_taken_while_a_symlink_swaps_never_stores_the_secret() {
    let sb = world();
    let home = sb.dir.path().to_path_buf();
    let work = sb.work();
    std::fs::write(work.join("f"), "decoy\n").unwrap();
    std::os::unix::fs::symlink(home.join(".ssh/id_rsa"), work.join("f.l")).unwrap();
    std::fs::create_dir(work.join("d")).unwrap();
    std::fs::write(work.join("d/decoy"), "decoy\n").unwrap();
    std::os::unix::fs::symlink(home.join(".ssh"), work.join("d.l")).unwrap();
    let swapper = Swapper::start(&work, &[("f", "f.l"), ("d", "d.l")]);
    // Each turn is one snapshot: the swapped names' signatures change, so they are read.
    for i in 0..40 {
        let write = json!({"path": "n.txt", "content": format!("{i}\n")});
        turn(&sb, &format!("s{i}.json"), &[("write", write)], i > 0, "go");
    }
    drop(swapper);
    let objects = stored_objects(&sb.home());
    assert!(objects.len() > 40, "{} objects", objects.len());
    let secret = SECRET.as_bytes();
    for body in objects {
        assert!(
            !body.windows(secret.len()).any(|w| w == secret),
            "a checkpoint stored the secret: {}",
            String::from_utf8_lossy(&body)
        );
    }
}

#[test]
fn a_rewind_never_removes_through_a_swapped_directory() {
    let sb = world();
    let work = sb.work();
    let outside = sb.dir.path().join("outside");
    std::fs::write(outside.join("new.txt"), "outside-canary\n").unwrap();
    std::fs::create_dir(work.join("d")).unwrap();
    // `d` never empties, so a rewind never prunes it.
    std::fs::write(work.join("d/keep"), "keep\n").unwrap();
    let write = json!({"path": "d/new.txt", "content": "made\n"});
    turn(&sb, "s1.json", &[("write", write)], false, "go");
    let id = session_id(&sb);
    let to = checkpoints(&sb, &id)[0]["entryId"]
        .as_str()
        .unwrap()
        .to_string();
    std::os::unix::fs::symlink(&outside, work.join("d.l")).unwrap();
    let swapper = Swapper::start(&work, &[("d", "d.l")]);
    for _ in 0..25 {
        // Exit codes vary with the race (a restore may find its file gone); the walls may not.
        sb.run(&["rewind", &id, "--to", &to, "--files"]);
        sb.run(&["rewind", &id, "--undo"]);
    }
    drop(swapper);
    let canary = std::fs::read_to_string(outside.join("new.txt"));
    assert_eq!(
        canary.ok().as_deref(),
        Some("outside-canary\n"),
        "a rewind removed or rewrote a file outside the workspace"
    );
}
