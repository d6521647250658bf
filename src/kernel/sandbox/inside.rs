//! Whether a process on this host runs inside a keel sandbox, as seen from outside it through
//! `/proc`: the daemon asks it of each peer that connects (issue 43 point 6), so that a
//! sandboxed command that reached the socket anyway (the seccomp filter that refuses it new
//! Unix sockets failed, or a kernel offered a way around it) cannot open a session without a
//! sandbox, stop the daemon or prompt another session. Owns only the test; the refusal is the
//! daemon's.
//!
//! A process is inside when, seen from `/proc`:
//! - its user namespace is not ours: bubblewrap always makes one (`--unshare-user`), and a
//!   process cannot leave its user namespace for its parent's; or
//! - it or one of its ancestors is keel's sandbox zygote or Landlock helper (`keel
//!   __sandbox-zygote`, `__sandbox-exec`): every command of a session descends from its
//!   zygote, which is a child subreaper, so what a command leaves behind stays below it. A
//!   process may rename itself, but only its own name, and only to be refused.

use std::path::Path;

/// The names keel's own sandboxed processes run under (see [`crate::cli`]'s hidden commands).
const SANDBOX_COMMANDS: [&str; 2] = ["__sandbox-zygote", "__sandbox-exec"];
/// How many ancestors are walked before giving up (a chain is never this deep).
const MAX_DEPTH: usize = 256;

/// Why `pid` is taken to be inside a keel sandbox; `None`: it is not, or it is gone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inside {
    /// Its user namespace is not this process's.
    OtherUserNamespace,
    /// It is, or descends from, keel's sandbox process with this pid.
    BelowSandbox(u32),
}

impl std::fmt::Display for Inside {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Inside::OtherUserNamespace => write!(f, "it runs in another user namespace"),
            Inside::BelowSandbox(pid) => write!(f, "it runs below keel's sandbox process {pid}"),
        }
    }
}

/// Whether `pid` (as this process's PID namespace numbers it) runs inside a keel sandbox.
pub fn inside(pid: u32) -> Option<Inside> {
    inside_at(Path::new("/proc"), pid)
}

fn inside_at(proc: &Path, pid: u32) -> Option<Inside> {
    let ns = |p: &str| std::fs::read_link(proc.join(p).join("ns/user")).ok();
    if let (Some(theirs), Some(ours)) = (ns(&pid.to_string()), ns("self")) {
        if theirs != ours {
            return Some(Inside::OtherUserNamespace);
        }
    }
    let mut at = pid;
    for _ in 0..MAX_DEPTH {
        if at <= 1 {
            return None;
        }
        if is_sandbox_command(&proc.join(at.to_string()).join("cmdline")) {
            return Some(Inside::BelowSandbox(at));
        }
        at = parent(&proc.join(at.to_string()).join("stat"))?;
    }
    None
}

/// Whether the process whose `cmdline` file this is runs one of [`SANDBOX_COMMANDS`].
fn is_sandbox_command(cmdline: &Path) -> bool {
    let Ok(bytes) = std::fs::read(cmdline) else {
        return false;
    };
    bytes
        .split(|&b| b == 0)
        .nth(1)
        .is_some_and(|arg| SANDBOX_COMMANDS.iter().any(|c| c.as_bytes() == arg))
}

/// The parent pid in a `/proc/PID/stat` file (`pid (comm) state ppid …`; comm may hold
/// spaces and parentheses).
fn parent(stat: &Path) -> Option<u32> {
    let text = std::fs::read_to_string(stat).ok()?;
    let (_, rest) = text.rsplit_once(')')?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake `/proc` with processes `(pid, ppid, argv)`.
    fn procfs(procs: &[(u32, u32, &[&str])]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (pid, ppid, argv) in procs {
            let d = dir.path().join(pid.to_string());
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("stat"), format!("{pid} (a (b) c) S {ppid} 1 1")).unwrap();
            std::fs::write(d.join("cmdline"), argv.join("\0") + "\0").unwrap();
        }
        dir
    }

    #[test]
    fn a_descendant_of_the_zygote_is_inside_and_its_parent_is_not() {
        let p = procfs(&[
            (10, 1, &["keel", "-p", "go"]),
            (20, 10, &["/tmp/.keel-relay", "__sandbox-zygote"]),
            (30, 20, &["bash", "-c", "x"]),
            (40, 30, &["perl", "__sandbox-zygote-not"]),
        ]);
        assert_eq!(inside_at(p.path(), 40), Some(Inside::BelowSandbox(20)));
        assert_eq!(inside_at(p.path(), 20), Some(Inside::BelowSandbox(20)));
        assert_eq!(inside_at(p.path(), 10), None);
        // Gone: not inside (and not an error).
        assert_eq!(inside_at(p.path(), 99), None);
    }

    #[test]
    fn a_parent_loop_ends() {
        let p = procfs(&[(5, 6, &["a"]), (6, 5, &["b"])]);
        assert_eq!(inside_at(p.path(), 5), None);
    }

    #[test]
    fn this_process_is_not_inside() {
        assert_eq!(inside(std::process::id()), None);
    }
}
