//! `keel debug sandbox`'s self-test: the hostile cases run under the session's sandbox, the way
//! the model's commands run (in the zygote when keel has one), each of which must be stopped:
//! write outside the writable roots, read a denied path, connect to a TCP listener on
//! 127.0.0.1, hold a capability, reach a controlling terminal, make a user namespace, connect
//! to a Unix socket of the host. Owns only the attempts and their verdicts; it returns data,
//! the command prints it.

use std::io::ErrorKind;
use std::net::TcpListener;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::Serialize;
use tokio::io::AsyncReadExt;

use super::zygote::Run;
use super::{Launch, Sandbox};

/// One attempt and whether the sandbox stopped it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Check {
    /// `write-outside`, `read-secret`, `connect-out`, `capabilities`, `terminal`,
    /// `namespace`, `unix-socket`, `x32`.
    pub name: String,
    /// What was tried.
    pub target: String,
    /// Whether it was stopped (what must happen).
    pub stopped: bool,
}

/// What one attempt printed on stdout, if it ran (`None`: it could not be started, or the
/// sandbox runs nothing at all).
type Ran = Option<String>;

/// Runs the attempts in `scratch` (a directory outside the writable roots that the caller
/// removes). An attempt that could not run at all counts as not stopped; one whose tool is
/// missing here (`unshare`, `perl`) is left out.
pub async fn run(sandbox: &Sandbox, scratch: &Path) -> Vec<Check> {
    let cwd = sandbox
        .policy
        .writable_roots
        .first()
        .cloned()
        .unwrap_or_else(|| scratch.to_path_buf());
    let tmp = scratch.join("tmp");
    let _ = std::fs::create_dir_all(&tmp);
    let t = Trial {
        sandbox,
        cwd: &cwd,
        tmp: &tmp,
    };
    // A sandbox that runs nothing would "stop" everything: a command must run first.
    if t.exec("echo ok").await.as_deref() != Some("ok\n") {
        return vec![Check {
            name: "runs".into(),
            target: "echo ok".into(),
            stopped: false,
        }];
    }
    let mut checks = Vec::new();
    let outside = scratch.join("outside.txt");
    let ran = t.exec(&format!("echo x > '{}'", outside.display())).await;
    checks.push(check(
        "write-outside",
        &outside.display().to_string(),
        ran.is_some() && !outside.exists(),
    ));
    if let Some(secret) = sandbox.policy.deny_read.iter().find(|p| p.exists()) {
        let cmd = format!("ls -A '{0}' 2>/dev/null || cat '{0}'", secret.display());
        let ran = t.exec(&cmd).await;
        let stopped = matches!(ran, Some(out) if out.trim().is_empty());
        checks.push(check("read-secret", &secret.display().to_string(), stopped));
    }
    checks.push(connect_out(&t).await);
    let caps = t.exec("grep '^CapEff:' /proc/self/status").await;
    let none = matches!(&caps, Some(l) if l.split_whitespace().nth(1) == Some("0000000000000000"));
    checks.push(check("capabilities", "CapEff of a command", none));
    let tty = t
        .exec("(exec 3</dev/tty) 2>/dev/null && echo has-tty; true")
        .await;
    let stopped = matches!(&tty, Some(out) if !out.contains("has-tty"));
    checks.push(check("terminal", "/dev/tty", stopped));
    if t.exec("command -v unshare")
        .await
        .is_some_and(|o| !o.is_empty())
    {
        let ns = t
            .exec("unshare -U true 2>/dev/null && echo made; true")
            .await;
        let stopped = matches!(&ns, Some(out) if !out.contains("made"));
        checks.push(check("namespace", "unshare -U", stopped));
    }
    if t.exec("command -v perl")
        .await
        .is_some_and(|o| !o.is_empty())
    {
        checks.extend(unix_socket(&t, &cwd).await);
        if cfg!(target_arch = "x86_64") {
            let x32 = t
                .exec("perl -e 'syscall(0x40000000 | 39); print $! + 0'")
                .await;
            let stopped = x32.is_some_and(|o| o.trim() == libc::EPERM.to_string());
            checks.push(check("x32", "an x32 system call", stopped));
        }
    }
    checks
}

fn check(name: &str, target: &str, stopped: bool) -> Check {
    Check {
        name: name.into(),
        target: target.into(),
        stopped,
    }
}

/// Where the attempts run.
struct Trial<'a> {
    sandbox: &'a Sandbox,
    cwd: &'a Path,
    tmp: &'a Path,
}

impl Trial<'_> {
    /// Runs `bash -c cmd` as the model's commands run: in the zygote, else in a sandbox of
    /// its own; its stdout.
    async fn exec(&self, cmd: &str) -> Ran {
        if self.sandbox.zygote_runs() {
            return self.in_zygote(cmd).await;
        }
        let launch = self.sandbox.launch("bash", cmd, self.cwd, self.tmp).ok()?;
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
        let out = c.current_dir(self.cwd).stdin(Stdio::null()).output().ok()?;
        Some(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    async fn in_zygote(&self, cmd: &str) -> Ran {
        let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into());
        let run = Run {
            argv: vec!["bash".into(), "-c".into(), cmd.into()],
            cwd: self.cwd.to_path_buf(),
            env: vec![("PATH".into(), path)],
            lifetime: Default::default(),
            stdio: None,
            tty: false,
            cgroup: None,
        };
        let mut p = self.sandbox.spawn(run, self.tmp).await.ok()?;
        let mut out = Vec::new();
        if let Some(mut stdout) = p.stdout.take() {
            stdout.read_to_end(&mut out).await.ok()?;
        }
        p.wait().await.ok()?;
        Some(String::from_utf8_lossy(&out).into_owned())
    }
}

/// A listener here, a connection attempt from inside: stopped when nothing arrived.
async fn connect_out(t: &Trial<'_>) -> Check {
    let listener = TcpListener::bind("127.0.0.1:0");
    let Ok((listener, port)) = listener.and_then(|l| {
        let port = l.local_addr()?.port();
        l.set_nonblocking(true)?;
        Ok((l, port))
    }) else {
        return check(
            "connect-out",
            "127.0.0.1 (no listener could be opened)",
            false,
        );
    };
    let ran = t
        .exec(&format!(
            "exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected"
        ))
        .await;
    let arrived = !matches!(listener.accept(), Err(e) if e.kind() == ErrorKind::WouldBlock);
    check(
        "connect-out",
        &format!("127.0.0.1:{port}"),
        ran.is_some() && !arrived,
    )
}

/// A Unix socket bound in `cwd` (the workspace, which the sandbox shows; removed after), and a
/// connection attempt from inside: stopped when nothing arrived.
async fn unix_socket(t: &Trial<'_>, cwd: &Path) -> Option<Check> {
    let path: PathBuf = cwd.join(format!(".keel-selftest-{}.sock", std::process::id()));
    let listener = UnixListener::bind(&path).ok()?;
    let _ = listener.set_nonblocking(true);
    let cmd = format!(
        "perl -MIO::Socket::UNIX -e 'IO::Socket::UNIX->new(Peer => \"{}\") and print \"connected\\n\"'",
        path.display()
    );
    let ran = t.exec(&cmd).await;
    let arrived = !matches!(listener.accept(), Err(e) if e.kind() == ErrorKind::WouldBlock);
    drop(listener);
    let _ = std::fs::remove_file(&path);
    let stopped = matches!(&ran, Some(out) if !out.contains("connected")) && !arrived;
    Some(check("unix-socket", &path.display().to_string(), stopped))
}
