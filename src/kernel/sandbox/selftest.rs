//! `keel debug sandbox`'s self-test: three commands run under the session's sandbox that must
//! each be stopped (write outside the writable roots, read a denied path, connect to a TCP
//! listener on 127.0.0.1). Owns only the attempts and their verdicts; it returns data, the
//! command prints it.

use std::io::ErrorKind;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};

use serde::Serialize;

use super::{Launch, Sandbox};

/// One attempt and whether the sandbox stopped it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Check {
    /// `write-outside`, `read-secret`, `connect-out`.
    pub name: String,
    /// What was tried.
    pub target: String,
    /// Whether it was stopped (what must happen).
    pub stopped: bool,
}

/// Runs the three attempts in `scratch` (a directory outside the writable roots that the
/// caller removes). An attempt that could not run at all counts as not stopped.
pub fn run(sandbox: &Sandbox, scratch: &Path) -> Vec<Check> {
    let cwd = sandbox
        .policy
        .writable_roots
        .first()
        .cloned()
        .unwrap_or_else(|| scratch.to_path_buf());
    let tmp = scratch.join("tmp");
    let _ = std::fs::create_dir_all(&tmp);
    let exec = |cmd: &str| -> Option<(bool, String)> {
        let launch = sandbox.launch("bash", cmd, &cwd, &tmp).ok()?;
        let mut c = match launch {
            Some(Launch { program, args, env }) => {
                let mut c = Command::new(program);
                c.args(args).envs(env);
                c
            }
            None => {
                let mut c = Command::new("bash");
                c.args(["-c", cmd]);
                c
            }
        };
        let out = c.current_dir(&cwd).stdin(Stdio::null()).output().ok()?;
        Some((
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        ))
    };
    // A sandbox that runs nothing would "stop" everything: a command must run first.
    let runs = matches!(exec("echo ok"), Some((true, out)) if out == "ok\n");
    let exec = |cmd: &str| exec(cmd).filter(|_| runs);
    let mut checks = Vec::new();
    let outside = scratch.join("outside.txt");
    let ran = exec(&format!("echo x > '{}'", outside.display()));
    checks.push(Check {
        name: "write-outside".into(),
        target: outside.display().to_string(),
        stopped: ran.is_some() && !outside.exists(),
    });
    let secret = sandbox.policy.deny_read.iter().find(|p| p.exists());
    if let Some(secret) = secret {
        let ran = exec(&format!(
            "ls -A '{0}' 2>/dev/null || cat '{0}'",
            secret.display()
        ));
        checks.push(Check {
            name: "read-secret".into(),
            target: secret.display().to_string(),
            stopped: matches!(ran, Some((_, out)) if out.trim().is_empty()),
        });
    }
    checks.push(connect_out(&exec));
    checks
}

/// A listener here, a connection attempt from inside: stopped when nothing arrived.
fn connect_out(exec: &dyn Fn(&str) -> Option<(bool, String)>) -> Check {
    let listener = TcpListener::bind("127.0.0.1:0");
    let Ok((listener, port)) = listener.and_then(|l| {
        let port = l.local_addr()?.port();
        l.set_nonblocking(true)?;
        Ok((l, port))
    }) else {
        return Check {
            name: "connect-out".into(),
            target: "127.0.0.1 (no listener could be opened)".into(),
            stopped: false,
        };
    };
    let ran = exec(&format!(
        "exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected"
    ));
    let arrived = !matches!(listener.accept(), Err(e) if e.kind() == ErrorKind::WouldBlock);
    Check {
        name: "connect-out".into(),
        target: format!("127.0.0.1:{port}"),
        stopped: ran.is_some() && !arrived,
    }
}
