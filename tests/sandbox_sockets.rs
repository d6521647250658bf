//! The hostile suite, issue 43 points 6 and 7: no Unix socket of the host is reachable from
//! inside, wherever it is bound: a keel daemon started with `--socket PATH` in a place of its
//! own, a container engine's socket under `HOME` (Colima's), a socket in the workspace that
//! was there before the session. Under bubblewrap each is masked by path; under Landlock a
//! command cannot make a Unix socket at all. As root and as `nobody`.

use std::io::ErrorKind;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

use crate::sandbox::{bash, run_as, users_and_mechanisms, world_as};

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
