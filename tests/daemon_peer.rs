//! The peer-uid check with a real second user (`DESIGN.md` §10.2): a daemon running as
//! `nobody` serves `nobody`'s clients and closes a connection from root at once, before it
//! reads a byte. Root is the only user that can reach another user's 0600 socket in a 0700
//! directory, so this needs root; elsewhere the unit test of the rule
//! (`paths::uid_allowed`) is what runs, and this test says it was skipped.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};

const NOBODY: u32 = 65534;

/// The daemon this test started as `nobody`; killed on drop.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn as_nobody(args: &[&str], home: &std::path::Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_keel"));
    c.args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("KEEL_HOME", home)
        .env("HOME", home)
        .env("KEEL_LOG", "info")
        .current_dir("/")
        .uid(NOBODY)
        .gid(NOBODY)
        .stdin(Stdio::null());
    c
}

#[test]
fn a_daemon_closes_a_connection_from_another_uid_and_serves_its_own() {
    if !nix::unistd::geteuid().is_root() {
        crate::common::support::skipped(
            "the peer-uid test: running a daemon as a second user needs root",
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // nobody must be able to pass through the temp dir to its own directories.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    let (run, home) = (dir.path().join("run"), dir.path().join("home"));
    for d in [&run, &home] {
        std::fs::create_dir(d).unwrap();
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::os::unix::fs::chown(d, Some(NOBODY), Some(NOBODY)).unwrap();
    }
    let socket = run.join("p2.sock");
    let sock = socket.to_str().unwrap();
    let mut child = as_nobody(
        &["daemon", "run", "--socket", sock, "--idle-exit", "0"],
        &home,
    )
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let _guard = Guard(child);
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            err.read_line(&mut line).unwrap() > 0,
            "the daemon ended before listening"
        );
        if line.contains("listening on") {
            break;
        }
    }
    let (log_tx, log_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in err.lines().map_while(Result::ok) {
            let _ = log_tx.send(l);
        }
    });

    // Root reaches the socket (file modes do not stop root) but is not the daemon's uid.
    let mut root = std::os::unix::net::UnixStream::connect(&socket).unwrap();
    root.set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    let hello = r#"{"jsonrpc":"2.0","id":1,"method":"daemon/hello","params":{"protocolVersion":2,"client":{"name":"t","version":"0"}}}"#;
    let _ = root.write_all(format!("{hello}\n").as_bytes());
    let mut got = Vec::new();
    let read = root.read_to_end(&mut got);
    // Closed unread: an end of stream, or a reset because the hello was never read.
    let closed = match &read {
        Ok(0) => true,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        Ok(_) => false,
    };
    assert!(
        closed && got.is_empty(),
        "root was not closed at once ({read:?}): {}",
        String::from_utf8_lossy(&got)
    );
    let refused = loop {
        let l = log_rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("the daemon logged no refusal");
        if l.contains("connection refused") {
            break l;
        }
    };
    assert!(refused.contains("uid 0"), "{refused}");
    assert!(refused.contains(&format!("uid {NOBODY}")), "{refused}");

    // The same daemon answers its own user.
    let own = as_nobody(&["daemon", "status", "--json", "--socket", sock], &home)
        .output()
        .unwrap();
    assert_eq!(
        own.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&own.stderr)
    );
    let status: serde_json::Value = serde_json::from_slice(&own.stdout).unwrap();
    assert!(status["pid"].as_u64().is_some(), "{status}");
}

/// Issue 43 point 6: a client inside a keel sandbox gets its hello refused with -32015, so a
/// command the model runs cannot open a session without a sandbox, prompt another session or
/// stop the daemon even if it reached the socket. The client here runs in a user namespace of
/// its own, as every bubblewrap sandbox's processes do (the Landlock zygote's descendants are
/// recognised by their ancestry: `kernel::sandbox::inside`'s tests, and
/// `sandbox_sockets::a_command_of_the_sandbox_is_known_as_inside_from_outside`). A client
/// outside is served by the same daemon.
#[test]
fn a_client_in_a_user_namespace_of_its_own_is_refused_as_sandboxed() {
    use crate::common::daemon::Daemon;
    let sb = crate::common::support::Sandbox::new();
    let daemon = Daemon::start(&sb, &["--idle-exit", "0"]);
    let sock = daemon.socket.to_str().unwrap().to_string();
    let status = ["daemon", "status", "--json", "--socket", &sock];
    let base = sb.cmd(&status);
    let mut inside = Command::new("unshare");
    inside
        .arg("--user")
        .arg(base.get_program())
        .args(base.get_args());
    inside.env_clear();
    for (k, v) in base.get_envs() {
        if let Some(v) = v {
            inside.env(k, v);
        }
    }
    inside.current_dir(sb.work()).stdin(Stdio::null());
    let out = inside.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "served from inside: {stderr}");
    assert!(stderr.contains("inside a keel sandbox"), "{stderr}");
    assert!(stderr.contains("another user namespace"), "{stderr}");
    let own = sb.cmd(&status).output().unwrap();
    assert_eq!(
        own.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&own.stderr)
    );
}
