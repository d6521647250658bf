//! The hostile suite, issue 43 points 1, 10, 17 and 19: what a command may still do to the
//! machine when it runs as root, or from a terminal. Under bubblewrap and the Landlock
//! fallback, as root and as `nobody`: no capability is left (so no `mount`, `umount`,
//! `unshare`, raw socket, remount or write outside), no controlling terminal and no
//! `TIOCSTI` (nothing typed into the user's terminal), no `ptrace`, no new namespaces, and
//! under Landlock only the harmless devices are writable.

use std::io::Read;
use std::path::Path;

use serde_json::Value;

use crate::common::pty::spawn_with;
use crate::sandbox::{bash, run_as, users_and_mechanisms, world_as, User, NOBODY};

const SECRET: &str = "secret-canary-77";

/// The capability sets of `/proc/self/status` that must all be empty inside.
const CAP_LINES: &str = "grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs):' /proc/self/status";

/// Perl that types `x` into the terminal `$ARGV[0]` (`TIOCSTI`) and says `typed`.
const TIOCSTI: &str = "open(my $t, \"+<\", $ARGV[0]) or die \"open: $!\\n\"; \
     my $c = \"x\"; ioctl($t, 0x5412, $c) or die \"refused: $!\\n\"; print \"typed\\n\"";

/// A perl one-liner that prints `WORD` when `code` succeeds, else the error.
fn perl(code: &str, word: &str) -> String {
    format!("perl -MSocket -e '{code} or die \"refused: $!\\n\"; print \"{word}\\n\"' 2>&1; true")
}

#[test]
fn as_root_or_not_a_command_holds_no_capability_and_cannot_mount_unshare_or_sniff() {
    for (user, mech) in users_and_mechanisms() {
        let sb = world_as(user);
        let home = sb.dir.path().display().to_string();
        let probe = format!("/usr/keel-probe-{}", std::process::id());
        let link = format!("keelprobe{}", std::process::id() % 100_000);
        std::fs::write(sb.dir.path().join("tiocsti.pl"), TIOCSTI).unwrap();
        let calls = [
            bash(CAP_LINES),
            bash("mount -t tmpfs none /mnt 2>&1 && echo mounted; true"),
            bash(&format!(
                "umount -l {home}/.ssh 2>&1; cat {home}/.ssh/id_rsa 2>&1; true"
            )),
            bash(&format!(
                "mount -o remount,rw / 2>&1; echo x > {probe} 2>&1 && echo wrote; true"
            )),
            bash("unshare -U true 2>&1 && echo user-ns; unshare -m true 2>&1 && echo mount-ns; unshare -n true 2>&1 && echo net-ns; true"),
            bash(&perl("socket(my $s, PF_INET, SOCK_RAW, 1)", "raw-socket")),
            bash(&perl("socket(my $s, PF_PACKET, SOCK_RAW, 0)", "packet-socket")),
            // ptrace(PTRACE_ATTACH, the parent shell's pid): the zygote's side of the wall.
            bash(&perl("syscall(101, 16, getppid(), 0, 0) == 0", "attached")),
            // A dummy link: harmless to the host should it be made (the test removes it).
            bash(&format!("ip link add {link} type dummy 2>&1 && echo reconfigured; true")),
            // A terminal of the command's own (a pty `script` opens, its controlling terminal):
            // typing into it is refused by the filter, whatever the kernel's legacy_tiocsti.
            bash("script -qec 'perl ../tiocsti.pl /dev/tty' /dev/null 2>&1; true"),
        ];
        let (r, _) = run_as(&sb, user, mech, &calls, &[], &[]);
        let made = std::process::Command::new("ip")
            .args(["link", "del", &link])
            .output()
            .is_ok_and(|o| o.status.success());
        let who = format!("{mech} as {user:?}");
        assert!(!made, "{who}: the host got a network link");
        let caps = &r[0].0;
        // An ordinary user's bounding set is full outside a user namespace and cannot be
        // emptied without a capability; with no_new_privs it gives nothing back on exec.
        let sets: &[&str] = match (user, mech) {
            (User::Nobody, "landlock") => &["CapInh", "CapPrm", "CapEff", "CapAmb"],
            _ => &["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"],
        };
        for set in sets {
            let line = caps.lines().find(|l| l.starts_with(set));
            assert_eq!(
                line.map(|l| l.split_whitespace().nth(1)),
                Some(Some("0000000000000000")),
                "{who}: {set} is not empty:\n{caps}"
            );
        }
        assert!(caps.contains("NoNewPrivs:\t1"), "{who}: {caps}");
        assert!(!r[1].0.contains("mounted"), "{who}: {:?}", r[1]);
        assert!(!r[2].0.contains(SECRET), "{who}: {:?}", r[2]);
        assert!(!r[3].0.contains("wrote"), "{who}: {:?}", r[3]);
        assert!(!Path::new(&probe).exists(), "{who}: {probe} was written");
        for ns in ["user-ns", "mount-ns", "net-ns"] {
            assert!(!r[4].0.contains(ns), "{who}: {:?}", r[4]);
        }
        assert!(r[5].0.starts_with("refused"), "{who}: {:?}", r[5]);
        assert!(r[6].0.starts_with("refused"), "{who}: {:?}", r[6]);
        assert!(r[7].0.starts_with("refused"), "{who}: {:?}", r[7]);
        assert!(!r[8].0.contains("reconfigured"), "{who}: {:?}", r[8]);
        assert!(!r[9].0.contains("typed"), "{who}: {:?}", r[9]);
    }
}

/// Under the Landlock fallback the host's `/dev` is there: only the harmless devices may be
/// written (not a disk, not the user's terminal, not `/dev/shm`).
#[test]
fn only_the_harmless_devices_are_writable() {
    for (user, mech) in users_and_mechanisms() {
        let sb = world_as(user);
        let calls = [
            bash("for d in null zero full random urandom; do echo x > /dev/$d && echo ok-$d; done 2>&1"),
            bash("echo x > /dev/shm/keel-probe 2>&1 && echo wrote-shm; ls /dev/shm 2>&1; true"),
            bash("for t in /dev/pts/[0-9]*; do [ -e \"$t\" ] && (echo x > \"$t\") 2>/dev/null && echo wrote-$t; done; true"),
        ];
        let (r, _) = run_as(&sb, user, mech, &calls, &[], &[]);
        let who = format!("{mech} as {user:?}");
        for d in ["null", "zero", "full", "random", "urandom"] {
            assert!(
                r[0].0.contains(&format!("ok-{d}")) || d == "full",
                "{who}: {:?}",
                r[0]
            );
        }
        // bubblewrap's /dev has a private /dev/shm; the host's is not writable under Landlock.
        if mech == "landlock" {
            assert!(!r[1].0.contains("wrote-shm"), "{who}: {:?}", r[1]);
        }
        assert!(
            !Path::new("/dev/shm/keel-probe").exists(),
            "{who}: the host's /dev/shm was written"
        );
        assert!(!r[2].0.contains("wrote-"), "{who}: {:?}", r[2]);
    }
}

/// keel run from a terminal (its controlling terminal): a command must not reach that
/// terminal, neither as `/dev/tty` nor by its `/dev/pts` path, and `TIOCSTI` (typing into it)
/// is refused.
#[test]
fn a_command_has_no_controlling_terminal_and_cannot_type_into_the_users() {
    for (user, mech) in users_and_mechanisms() {
        let sb = world_as(user);
        let commands = [
            "(exec 3</dev/tty) 2>/dev/null && echo has-tty || echo no-tty".to_string(),
            format!("perl -e '{TIOCSTI}' /dev/tty 2>&1; true"),
            format!("perl -e '{TIOCSTI}' \"$(cat ../ptyname)\" 2>&1; true"),
        ];
        let calls: Vec<_> = commands.iter().map(|c| bash(c)).collect();
        let script = sb.tool_calls_script(&calls);
        let out = sb.dir.path().join("out.jsonl");
        let keel = env!("CARGO_BIN_EXE_keel");
        let setpriv = match user {
            User::Me => String::new(),
            User::Nobody => {
                crate::sandbox::give_to_nobody(sb.dir.path());
                format!("setpriv --reuid={NOBODY} --regid={NOBODY} --clear-groups ")
            }
        };
        let shell = format!(
            "tty > {dir}/ptyname && {setpriv}{keel} --json --provider scripted --script {script} go > {out} 2>&1; echo exit=$?",
            dir = sb.dir.path().display(),
            out = out.display(),
        );
        let managed = sb.managed_settings().display().to_string();
        let vars = [
            ("KEEL_NO_DAEMON", "1"),
            ("KEEL_SANDBOX_MECHANISM", mech),
            ("KEEL_MANAGED_SETTINGS", managed.as_str()),
        ];
        let (mut screen, mut child) = spawn_with(&sb, &shell, &vars);
        screen.wait_for("keel to finish", |s| s.contains("exit="));
        child.wait().unwrap();
        let mut text = String::new();
        std::fs::File::open(&out)
            .unwrap()
            .read_to_string(&mut text)
            .unwrap();
        let who = format!("{mech} as {user:?}");
        assert!(screen.text().contains("exit=0"), "{who}: {text}");
        let results: Vec<String> = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v["type"] == "tool_execution_end")
            .map(|v| {
                v["result"]["content"][0]["text"]
                    .as_str()
                    .unwrap_or("")
                    .to_string()
            })
            .collect();
        assert_eq!(results.len(), 3, "{who}: {text}");
        assert_eq!(results[0], "no-tty\n", "{who}");
        for r in &results[1..] {
            assert!(!r.contains("typed"), "{who}: {results:?}");
        }
    }
}

/// Issue 43 point 17: what a command leaves behind, even in a session of its own (`setsid`,
/// out of its call's process group), ends with the session: the zygote is a child subreaper
/// under Landlock (bubblewrap's PID namespace ends it there).
#[test]
fn a_process_a_command_leaves_behind_in_its_own_session_ends_with_the_session() {
    for (user, mech) in users_and_mechanisms() {
        let sb = world_as(user);
        let marker = format!("keel-orphan-{}-{mech}-{user:?}", std::process::id());
        let calls = [bash(&format!(
            "cp /bin/sleep ./{marker} && (setsid ./{marker} 300 >/dev/null 2>&1 &) ; echo started"
        ))];
        let (r, _) = run_as(&sb, user, mech, &calls, &[], &["--no-session"]);
        assert_eq!(r[0].0, "started\n", "{mech} as {user:?}");
        // keel has exited; its zygote ends what is left as soon as its control socket closes.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let alive = loop {
            let found = std::process::Command::new("pgrep")
                .args(["-f", &marker])
                .output()
                .unwrap();
            let alive = found.status.success();
            if !alive || std::time::Instant::now() > deadline {
                break alive;
            }
            std::thread::yield_now();
        };
        if alive {
            let _ = std::process::Command::new("pkill")
                .args(["-9", "-f", &marker])
                .status();
        }
        assert!(!alive, "{mech} as {user:?}: {marker} outlived the session");
    }
}

/// An x32 system call (bit 30 of the number set) shares the x86-64 architecture value but not
/// its numbers, so rules written for the 64-bit numbers do not see it: on a kernel that offers
/// the x32 ABI it would be a way around every seccomp wall (`socket(AF_UNIX)`, `ptrace`,
/// `unshare`, `mount`). Inside, every one is refused with `EPERM`; outside, this kernel answers
/// `ENOSYS` (its x32 ABI is off), so the refusal seen is the sandbox's.
#[cfg(target_arch = "x86_64")]
#[test]
fn no_x32_system_call_reaches_the_kernel() {
    let probe = "perl -e '$r = syscall(0x40000000 | 39); print \"x32 \", $! + 0, \"\\n\"'";
    let outside = std::process::Command::new("sh")
        .args(["-c", probe])
        .output()
        .unwrap();
    let outside = String::from_utf8_lossy(&outside.stdout).trim().to_string();
    assert_ne!(
        outside,
        format!("x32 {}", libc::EPERM),
        "outside already refuses"
    );
    for (user, mech) in users_and_mechanisms() {
        let sb = world_as(user);
        let (r, _) = run_as(&sb, user, mech, &[bash(probe)], &[], &[]);
        let who = format!("{mech} as {user:?}");
        assert_eq!(r[0].0.trim(), format!("x32 {}", libc::EPERM), "{who}");
    }
}
