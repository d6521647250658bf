//! The hostile suite, issue 43 points 6 and 7: no Unix socket of the host is reachable from
//! inside, wherever it is bound: a keel daemon started with `--socket PATH` in a place of its
//! own, a container engine's socket under `HOME` (Colima's), a socket in the workspace that
//! was there before the session. Under bubblewrap each is masked by path; under Landlock a
//! command cannot make a Unix socket at all. As root and as `nobody`.

use std::io::ErrorKind;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

use crate::sandbox::{bash, keel_as, run_as, users_and_mechanisms, world_as};

/// A listener on `path` that anyone may connect to (so `nobody`'s refusal is the sandbox's).
fn listen(path: &Path) -> UnixListener {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let l = UnixListener::bind(path).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777)).unwrap();
    l.set_nonblocking(true).unwrap();
    l
}

#[test]
fn no_unix_socket_of_the_host_is_reachable_wherever_it_is_bound() {
    for (user, mech) in users_and_mechanisms() {
        let sb = world_as(user);
        let dir = sb.dir.path();
        let places: Vec<PathBuf> = vec![
            // `keel daemon run --socket PATH`: a directory of its own, outside HOME and KEEL_HOME.
            dir.join("elsewhere/daemon.sock"),
            // Colima's Docker socket under HOME (not a secret path of the default list).
            dir.join(".colima/default/docker.sock"),
            // A socket in the workspace, bound before the session began.
            sb.work().join("dev.sock"),
        ];
        let listeners: Vec<UnixListener> = places.iter().map(|p| listen(p)).collect();
        for d in [dir.join("elsewhere"), dir.join(".colima")] {
            std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
        }
        let calls: Vec<_> = places
            .iter()
            .map(|p| {
                bash(&format!(
                    "perl -MIO::Socket::UNIX -e 'IO::Socket::UNIX->new(Peer => \"{}\") or die \"refused: $!\\n\"; print \"connected\\n\"' 2>&1; true",
                    p.display()
                ))
            })
            .collect();
        let (r, _) = run_as(&sb, user, mech, &calls, &[], &[]);
        let who = format!("{mech} as {user:?}");
        for (i, (text, _)) in r.iter().enumerate() {
            assert!(
                text.starts_with("refused"),
                "{who}: {}: {text}",
                places[i].display()
            );
        }
        for (l, p) in listeners.iter().zip(&places) {
            let nothing = l.accept().is_err_and(|e| e.kind() == ErrorKind::WouldBlock);
            assert!(nothing, "{who}: {} was reached", p.display());
        }
    }
}

/// The process other than this one that holds `fifo` open (by device and inode, so that a
/// path seen from another mount namespace does not matter).
fn holder_of(fifo: &Path) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let want = std::fs::metadata(fifo).unwrap();
    let me = std::process::id();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            let held = std::fs::metadata(fd.path())
                .is_ok_and(|m| m.dev() == want.dev() && m.ino() == want.ino());
            if held && pid != me {
                return Some(pid);
            }
        }
    }
    None
}

/// Issue 43 point 6, the daemon's half: a process the model runs is known, from outside and
/// by `/proc` alone, to be inside a keel sandbox (bubblewrap: another user namespace; the
/// Landlock fallback: below keel's zygote), so the daemon can refuse it
/// (`daemon_peer::a_client_in_a_user_namespace_of_its_own_is_refused_as_sandboxed`); keel
/// itself is not. The command blocks on a FIFO while it is looked at.
#[test]
fn a_command_of_the_sandbox_is_known_as_inside_from_outside() {
    use keel::kernel::sandbox::inside::{inside, Inside};
    for (user, mech) in users_and_mechanisms() {
        let sb = world_as(user);
        let who = format!("{mech} as {user:?}");
        let fifo = sb.work().join("gate");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o666)).unwrap();
        std::fs::set_permissions(&fifo, std::fs::Permissions::from_mode(0o666)).unwrap();
        let calls = [bash(&format!("cat {}", fifo.display()))];
        let mut cmd = keel_as(&sb, user, mech, &calls, &["--json"]);
        cmd.stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        let mut child = cmd.spawn().unwrap();
        let keel_pid = child.id();
        // Should keel end without opening the gate, open it here so the test does not hang
        // (the holder is then nobody, and the test fails saying so).
        let (fifo2, (done_tx, done_rx)) = (fifo.clone(), std::sync::mpsc::channel());
        let watch = std::thread::spawn(move || {
            let status = child.wait().unwrap();
            let _ = done_tx.send(());
            use std::os::unix::fs::OpenOptionsExt;
            let _ = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&fifo2);
            status
        });
        // Opening the gate to write waits until the command opened it to read.
        let gate = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
        let early = done_rx.try_recv().is_ok();
        // Looked at while the command still waits on the gate.
        let holder = holder_of(&fifo);
        let found = holder.map(inside);
        let keel_found = inside(keel_pid);
        drop(gate);
        assert!(
            !early,
            "{who}: keel ended before the command opened the gate"
        );
        assert!(holder.is_some(), "{who}: nobody holds the gate");
        let found = found.flatten();
        match mech {
            "bwrap" => assert_eq!(found, Some(Inside::OtherUserNamespace), "{who}"),
            _ => assert!(
                matches!(found, Some(Inside::BelowSandbox(_))),
                "{who}: {found:?}"
            ),
        }
        assert_eq!(keel_found, None, "{who}: keel itself");
        assert!(watch.join().unwrap().success(), "{who}");
    }
}
