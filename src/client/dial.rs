//! Where a client finds the daemon: the local socket, through the one local dial
//! ([`dial_local`]: the directory checks and the daemon's peer uid, before any byte is sent),
//! or a remote host's daemon reached over OpenSSH (`ssh -T HOST keel daemon bridge`, the
//! bridge relaying the remote socket byte for byte). Both give a [`Conn`]: a byte stream in
//! each direction that protocol v2 runs over, so nothing above this file knows which it is.
//! ssh's own stderr is kept (bounded) to explain a connection that failed. Never prints.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::net::UnixStream;
use tokio::process::{Child, ChildStdin};

use crate::wire::socket::paths;
use crate::wire::socket::{DaemonError, DaemonErrorKind};

/// The read half of a connection.
pub type Reader = Box<dyn AsyncRead + Send + Unpin>;
/// The write half of a connection.
pub type Writer = Box<dyn AsyncWrite + Send + Unpin>;

/// ssh options keel adds after the user's own (ssh takes the first value it is given for an
/// option, so `--ssh-opt` and the user's ssh config win): a dead link is noticed within about
/// 30 s instead of at the next TCP timeout.
const SSH_DEFAULTS: &[&str] = &["ServerAliveInterval=10", "ServerAliveCountMax=3"];

/// How much of ssh's stderr is kept to explain a failure.
const SSH_STDERR_KEEP: usize = 4096;

/// How long a failed connection waits for ssh to finish saying why.
const SSH_STDERR_WAIT: Duration = Duration::from_secs(3);

/// The daemon a client talks to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dial {
    /// The daemon on this machine's socket.
    Local(PathBuf),
    /// A daemon on another host, over ssh.
    Remote(Remote),
}

/// A remote host's daemon, reached with `ssh -T [opts] HOST <keel> daemon bridge`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Remote {
    /// `[user@]host`, as ssh takes it.
    pub host: String,
    /// The ssh program (`KEEL_SSH`, default `ssh`).
    pub ssh: String,
    /// `--ssh-opt` values, each passed as `-o VALUE`.
    pub opts: Vec<String>,
    /// The keel command on the remote host (`--remote-keel`, default `keel`).
    pub keel: String,
    /// `--socket`: the remote daemon's socket, when not its default.
    pub socket: Option<PathBuf>,
    /// No passphrase or password prompt (`BatchMode=yes`): set for reconnecting while a
    /// terminal UI owns the screen.
    pub batch: bool,
}

/// One connection to a daemon.
pub struct Conn {
    pub read: Reader,
    pub write: Writer,
    /// ssh's stderr so far, for a remote connection.
    pub ssh_stderr: Option<SshStderr>,
}

impl From<UnixStream> for Conn {
    fn from(stream: UnixStream) -> Self {
        let (read, write) = stream.into_split();
        Conn {
            read: Box::new(read),
            write: Box::new(write),
            ssh_stderr: None,
        }
    }
}

/// The end of ssh's stderr, filled by a task while ssh runs.
#[derive(Clone)]
pub struct SshStderr {
    text: Arc<Mutex<String>>,
    done: Arc<tokio::sync::Notify>,
    finished: Arc<std::sync::atomic::AtomicBool>,
}

impl SshStderr {
    /// What ssh said, once it stopped writing (or after a short wait), trimmed to its last
    /// lines.
    pub async fn settled(&self) -> String {
        use std::sync::atomic::Ordering;
        if !self.finished.load(Ordering::SeqCst) {
            let notified = self.done.notified();
            if !self.finished.load(Ordering::SeqCst) {
                let _ = tokio::time::timeout(SSH_STDERR_WAIT, notified).await;
            }
        }
        let text = self.text.lock().unwrap_or_else(|e| e.into_inner()).clone();
        text.trim().to_string()
    }
}

impl Dial {
    /// The daemon this client talks to: `remote` (`--remote`, else `KEEL_REMOTE`) over ssh, or
    /// the local socket.
    pub fn new(local_socket: PathBuf, remote: Option<Remote>) -> Dial {
        match remote {
            Some(r) => Dial::Remote(r),
            None => Dial::Local(local_socket),
        }
    }

    pub fn remote(&self) -> Option<&Remote> {
        match self {
            Dial::Remote(r) => Some(r),
            Dial::Local(_) => None,
        }
    }

    /// The local socket, when the daemon is local.
    pub fn local_socket(&self) -> Option<&Path> {
        match self {
            Dial::Local(p) => Some(p),
            Dial::Remote(_) => None,
        }
    }

    /// Where the daemon is, for messages: the socket path, or `HOST (over ssh)`.
    pub fn describe(&self) -> String {
        match self {
            Dial::Local(p) => p.display().to_string(),
            Dial::Remote(r) => format!("{} (over ssh)", r.host),
        }
    }

    /// The same daemon, reached without prompting for a passphrase (see [`Remote::batch`]).
    pub fn quietly(&self) -> Dial {
        match self {
            Dial::Remote(r) => Dial::Remote(Remote {
                batch: true,
                ..r.clone()
            }),
            local => local.clone(),
        }
    }

    /// Connects to a running local daemon (never starting one), or runs the bridge on the
    /// remote host (which starts the remote daemon when none runs there).
    pub async fn connect(&self) -> Result<Conn, DaemonError> {
        match self {
            Dial::Local(socket) => dial_local(socket).await.map(Conn::from),
            Dial::Remote(r) => r.spawn(),
        }
    }
}

/// The one way a client reaches the daemon on this machine (every client command, spawning
/// or not, comes through here before `daemon/hello`): the socket's directory is checked as
/// the daemon checks it (lstat: a real directory, not a symlink, owned by our effective uid,
/// no group or other bits), then the process listening on the socket must run as our
/// effective uid (SO_PEERCRED). A connection that fails a check is dropped with nothing
/// written to it. Kinds: [`DaemonErrorKind::NotListening`] (no directory, no socket, a stale
/// one), [`DaemonErrorKind::Busy`] (its backlog is full), [`DaemonErrorKind::ForeignPeer`]
/// (another uid listens).
pub async fn dial_local(socket: &Path) -> Result<UnixStream, DaemonError> {
    let not_listening = |why: &dyn std::fmt::Display| {
        DaemonError::new(format!(
            "no keel daemon is listening on {}: {why}",
            socket.display()
        ))
        .with_hint("start one with: keel daemon start")
        .with_kind(DaemonErrorKind::NotListening)
    };
    let dir = super::spawn::socket_dir(socket)?;
    if let Err(e) = std::fs::symlink_metadata(dir) {
        if e.kind() == ErrorKind::NotFound {
            return Err(not_listening(&format!("{} does not exist", dir.display())));
        }
    }
    paths::verify_dir(dir, paths::euid())?;
    let stream = UnixStream::connect(socket)
        .await
        .map_err(|e| match e.kind() {
            ErrorKind::NotFound | ErrorKind::ConnectionRefused => not_listening(&e),
            ErrorKind::WouldBlock => {
                DaemonError::new(format!("the daemon on {} is busy: {e}", socket.display()))
                    .with_kind(DaemonErrorKind::Busy)
            }
            _ => DaemonError::io("connect to the daemon at", socket, &e),
        })?;
    let peer = stream.peer_cred().map_err(|e| {
        DaemonError::new(format!(
            "cannot read the credentials of the process listening on {}: {e}",
            socket.display()
        ))
    })?;
    let me = paths::euid();
    if paths::uid_allowed(peer.uid(), me).is_err() {
        return Err(foreign_peer(socket, peer.uid(), me));
    }
    Ok(stream)
}

/// A socket another uid listens on: said as such (never "no daemon listening").
fn foreign_peer(socket: &Path, uid: u32, me: u32) -> DaemonError {
    DaemonError::new(format!(
        "the socket {} belongs to uid {uid}, not to you (uid {me}): keel sent it nothing",
        socket.display()
    ))
    .with_hint(
        "another user's process listens there; use a socket of your own: set KEEL_SOCKET (or \
         --socket) to a path in a directory of your own",
    )
    .with_kind(DaemonErrorKind::ForeignPeer { uid })
}

impl Remote {
    /// `--remote`/`KEEL_REMOTE` and its companions; `None` when no host is named.
    pub fn from_flags(
        host: Option<&str>,
        vars: &std::collections::BTreeMap<String, String>,
        opts: &[String],
        keel: Option<&str>,
        socket: Option<&Path>,
    ) -> Option<Remote> {
        let host = host
            .or_else(|| vars.get("KEEL_REMOTE").map(String::as_str))
            .filter(|h| !h.trim().is_empty())?;
        Some(Remote {
            host: host.to_string(),
            ssh: vars
                .get("KEEL_SSH")
                .filter(|s| !s.is_empty())
                .cloned()
                .unwrap_or_else(|| "ssh".into()),
            opts: opts.to_vec(),
            keel: keel.unwrap_or("keel").to_string(),
            socket: socket.map(Path::to_path_buf),
            batch: false,
        })
    }

    /// ssh's arguments: `-T`, the user's options, keel's defaults, the host, then the remote
    /// command (one string, each word quoted for the remote shell).
    pub fn ssh_args(&self) -> Vec<String> {
        let mut args = vec!["-T".to_string()];
        for o in &self.opts {
            args.extend(["-o".to_string(), o.clone()]);
        }
        if self.batch {
            args.extend(["-o".to_string(), "BatchMode=yes".to_string()]);
        }
        for o in SSH_DEFAULTS {
            args.extend(["-o".to_string(), o.to_string()]);
        }
        // `--` ends ssh's options: a host starting with `-` is a host, not an option.
        args.extend(["--".to_string(), self.host.clone()]);
        let mut words = vec![self.keel.clone(), "daemon".into(), "bridge".into()];
        if let Some(s) = &self.socket {
            words.extend(["--socket".into(), s.display().to_string()]);
        }
        let command: Vec<String> = words.iter().map(|w| shell_quote(w)).collect();
        args.push(command.join(" "));
        args
    }

    fn spawn(&self) -> Result<Conn, DaemonError> {
        let mut cmd = tokio::process::Command::new(&self.ssh);
        cmd.args(self.ssh_args())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().map_err(|e| {
            DaemonError::new(format!(
                "cannot run `{}` to reach {}: {e}",
                self.ssh, self.host
            ))
            .with_hint("--remote needs OpenSSH's ssh on PATH (or KEEL_SSH naming it)")
        })?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(DaemonError::new("ssh started without its pipes"));
        };
        let kept = SshStderr {
            text: Arc::new(Mutex::new(String::new())),
            done: Arc::new(tokio::sync::Notify::new()),
            finished: Arc::new(std::sync::atomic::AtomicBool::new(false)),
        };
        tokio::spawn(keep_stderr(stderr, kept.clone()));
        Ok(Conn {
            read: Box::new(stdout),
            write: Box::new(SshStdin {
                stdin,
                _child: child,
            }),
            ssh_stderr: Some(kept),
        })
    }
}

/// Reads ssh's stderr to its end, keeping the last [`SSH_STDERR_KEEP`] bytes (ssh must never
/// block on a full pipe).
async fn keep_stderr(mut stderr: tokio::process::ChildStderr, kept: SshStderr) {
    let mut buf = vec![0u8; 4096];
    loop {
        match stderr.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let chunk = String::from_utf8_lossy(&buf[..n]);
                tracing::info!("ssh: {}", chunk.trim_end());
                let mut text = kept.text.lock().unwrap_or_else(|e| e.into_inner());
                text.push_str(&chunk);
                if text.len() > SSH_STDERR_KEEP {
                    let mut cut = text.len() - SSH_STDERR_KEEP;
                    while !text.is_char_boundary(cut) {
                        cut += 1;
                    }
                    text.drain(..cut);
                }
            }
        }
    }
    kept.finished
        .store(true, std::sync::atomic::Ordering::SeqCst);
    kept.done.notify_waiters();
}

/// ssh's stdin, which also owns the ssh process: dropping the connection's write half ends
/// ssh (and so the remote bridge).
struct SshStdin {
    stdin: ChildStdin,
    _child: Child,
}

impl AsyncWrite for SshStdin {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stdin).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stdin).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stdin).poll_shutdown(cx)
    }
}

/// When a client that lost its remote daemon tries again: 0.25 s, then twice as long each time,
/// at most [`Backoff::MAX_DELAY`]; a headless client gives up after [`Backoff::GIVE_UP`].
#[derive(Debug, Clone, Default)]
pub struct Backoff {
    attempts: u32,
    waited: Duration,
}

impl Backoff {
    pub const FIRST_DELAY: Duration = Duration::from_millis(250);
    pub const MAX_DELAY: Duration = Duration::from_secs(5);
    /// How long print and JSON runs keep trying before they end as `daemon_lost`.
    pub const GIVE_UP: Duration = Duration::from_secs(600);

    /// The wait before the next attempt (and counts it).
    pub fn next_delay(&mut self) -> Duration {
        let delay = Self::FIRST_DELAY
            .saturating_mul(1u32 << self.attempts.min(8))
            .min(Self::MAX_DELAY);
        self.attempts += 1;
        self.waited += delay;
        delay
    }

    /// Attempts so far.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// Whether the waits so far add up to [`Backoff::GIVE_UP`].
    pub fn exhausted(&self) -> bool {
        self.waited >= Self::GIVE_UP
    }
}

/// `word` as one word for a POSIX shell: bare when it is made only of safe characters, else in
/// single quotes (a `'` inside becomes `'\''`).
pub fn shell_quote(word: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "-_./=:@%+,".contains(c);
    if !word.is_empty() && word.chars().all(safe) {
        return word.to_string();
    }
    format!("'{}'", word.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remote(opts: &[&str], socket: Option<&str>) -> Remote {
        let vars = [("KEEL_SSH".to_string(), "/opt/ssh".to_string())].into();
        Remote::from_flags(
            Some("me@box"),
            &vars,
            &opts.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            Some("/home/me/.cargo/bin/keel"),
            socket.map(Path::new),
        )
        .unwrap()
    }

    #[test]
    fn the_ssh_command_puts_the_users_options_first_and_quotes_the_remote_command() {
        let r = remote(&["Port=2222"], Some("/tmp/my dir/keel.sock"));
        assert_eq!(r.ssh, "/opt/ssh");
        assert_eq!(
            r.ssh_args(),
            [
                "-T",
                "-o",
                "Port=2222",
                "-o",
                "ServerAliveInterval=10",
                "-o",
                "ServerAliveCountMax=3",
                "--",
                "me@box",
                "/home/me/.cargo/bin/keel daemon bridge --socket '/tmp/my dir/keel.sock'",
            ]
        );
        let quiet = Dial::Remote(r).quietly();
        let args = quiet.remote().unwrap().ssh_args();
        assert_eq!(args[3..5], ["-o", "BatchMode=yes"]);
    }

    #[test]
    fn keel_remote_names_the_default_host_and_an_empty_one_means_none() {
        let vars = [("KEEL_REMOTE".to_string(), "devbox".to_string())].into();
        let r = Remote::from_flags(None, &vars, &[], None, None).unwrap();
        assert_eq!(
            (r.host.as_str(), r.ssh.as_str(), r.keel.as_str()),
            ("devbox", "ssh", "keel")
        );
        let flag = Remote::from_flags(Some("other"), &vars, &[], None, None).unwrap();
        assert_eq!(flag.host, "other");
        let empty = [("KEEL_REMOTE".to_string(), String::new())].into();
        assert!(Remote::from_flags(None, &empty, &[], None, None).is_none());
    }

    #[test]
    fn reconnecting_waits_twice_as_long_each_time_up_to_five_seconds_and_gives_up_after_ten_minutes(
    ) {
        let mut b = Backoff::default();
        let first: Vec<u128> = (0..7).map(|_| b.next_delay().as_millis()).collect();
        assert_eq!(first, [250, 500, 1000, 2000, 4000, 5000, 5000]);
        assert_eq!(b.attempts(), 7);
        assert!(!b.exhausted());
        while !b.exhausted() {
            b.next_delay();
        }
        // 17.75 s for the first seven, then 5 s each up to 600 s.
        assert_eq!(b.attempts(), 7 + 117);
    }

    #[test]
    fn shell_quoting_keeps_every_byte_of_a_word() {
        assert_eq!(shell_quote("keel"), "keel");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("$HOME;rm"), "'$HOME;rm'");
    }

    #[tokio::test]
    async fn the_local_dial_checks_the_directory_and_tells_nothing_listening_apart() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let perm = |p: &Path, m| std::fs::set_permissions(p, PermissionsExt::from_mode(m));
        let gone = dial_local(&d.path().join("none/p2.sock"))
            .await
            .unwrap_err();
        assert_eq!(gone.kind, DaemonErrorKind::NotListening, "{gone}");
        perm(d.path(), 0o700).unwrap();
        let sock = d.path().join("p2.sock");
        let e = dial_local(&sock).await.unwrap_err();
        assert_eq!(e.kind, DaemonErrorKind::NotListening, "{e}");
        assert!(
            e.message.starts_with("no keel daemon is listening on"),
            "{e}"
        );
        let listener = paths::bind(&sock).unwrap();
        let (ours, _) = tokio::join!(dial_local(&sock), listener.accept());
        ours.unwrap();
        perm(d.path(), 0o755).unwrap();
        let loose = dial_local(&sock).await.unwrap_err();
        assert_eq!(loose.kind, DaemonErrorKind::Other);
        assert!(loose.message.contains("has mode 0755"), "{loose}");
        let e = foreign_peer(&sock, 65534, 1000);
        assert_eq!(e.kind, DaemonErrorKind::ForeignPeer { uid: 65534 });
        assert_eq!(
            e.message,
            format!(
                "the socket {} belongs to uid 65534, not to you (uid 1000): keel sent it nothing",
                sock.display()
            )
        );
    }

    #[tokio::test]
    async fn a_missing_ssh_is_a_clear_error() {
        let mut r = remote(&[], None);
        r.ssh = "/nonexistent/ssh".into();
        let e = Dial::Remote(r).connect().await.err().unwrap();
        assert!(
            e.message
                .contains("cannot run `/nonexistent/ssh` to reach me@box"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn what_ssh_says_on_stderr_is_kept_for_the_error() {
        // A stand-in for ssh that fails the way ssh does: a message on stderr, exit 255.
        let mut cmd = tokio::process::Command::new("sh");
        cmd.args([
            "-c",
            "echo 'ssh: connect to host box port 22: Connection refused' >&2; exit 255",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let kept = SshStderr {
            text: Arc::new(Mutex::new(String::new())),
            done: Arc::new(tokio::sync::Notify::new()),
            finished: Arc::new(std::sync::atomic::AtomicBool::new(false)),
        };
        tokio::spawn(keep_stderr(child.stderr.take().unwrap(), kept.clone()));
        assert_eq!(
            kept.settled().await,
            "ssh: connect to host box port 22: Connection refused"
        );
        let _ = child.wait().await;
    }
}
