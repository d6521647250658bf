//! The in-sandbox half of the network allowlist (`keel __sandbox-forward`, run by bubblewrap
//! inside the command's network namespace): a listener on 127.0.0.1 whose connections a relay
//! process pipes to keel's proxy socket (bound into the sandbox), and the command exec'd with
//! `HTTP_PROXY`/`HTTPS_PROXY`/`ALL_PROXY` pointing at it. Owns only that plumbing (std threads
//! and sockets); the checks are the proxy's, outside ([`super::proxy`]).

use std::io::{Read, Write};
use std::net::{Ipv4Addr, Shutdown, TcpListener, TcpStream};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The variables that send clients to the proxy at `url`; `NO_PROXY` is emptied (loopback
/// inside the namespace has nothing of the host's).
pub fn proxy_env(url: &str) -> Vec<(&'static str, String)> {
    let mut env: Vec<(&'static str, String)> = [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ]
    .into_iter()
    .map(|k| (k, url.to_string()))
    .collect();
    env.extend([("NO_PROXY", String::new()), ("no_proxy", String::new())]);
    env
}

/// Binds 127.0.0.1 (any port) in this namespace, starts the relay (keel itself, the listener
/// as its stdin: no race, connections wait in the backlog), and execs `argv` with the proxy
/// variables. Returns only on failure. The relay is not waited for: it lives until the
/// sandbox's PID namespace ends with the command.
#[allow(clippy::zombie_processes)]
pub fn exec_forwarded(socket: &Path, argv: &[String]) -> std::io::Error {
    let Some((program, args)) = argv.split_first() else {
        return std::io::Error::other("no command to run");
    };
    let listener = match TcpListener::bind((Ipv4Addr::LOCALHOST, 0)) {
        Ok(l) => l,
        Err(e) => return std::io::Error::other(format!("cannot listen on 127.0.0.1: {e}")),
    };
    let port = match listener.local_addr() {
        Ok(a) => a.port(),
        Err(e) => return e,
    };
    let relay = std::env::current_exe().and_then(|exe| {
        Command::new(exe)
            .args(["__sandbox-forward", "--relay"])
            .arg(socket)
            .stdin(Stdio::from(OwnedFd::from(listener)))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
    });
    if let Err(e) = relay {
        return std::io::Error::other(format!("cannot start the proxy relay: {e}"));
    }
    let url = format!("http://127.0.0.1:{port}");
    Command::new(program)
        .args(args)
        .envs(proxy_env(&url))
        .exec()
}

/// The relay: accepts on the listener that is this process's stdin and pipes each connection
/// to `socket`, both ways. Returns only when the listener fails.
pub fn relay(socket: &Path) -> std::io::Error {
    let listener = match std::io::stdin().as_fd().try_clone_to_owned() {
        Ok(fd) => TcpListener::from(fd),
        Err(e) => return e,
    };
    for conn in listener.incoming() {
        match conn {
            Ok(tcp) => {
                let socket = socket.to_path_buf();
                std::thread::spawn(move || pipe(tcp, &socket));
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return e,
        }
    }
    std::io::Error::other("the listener ended")
}

/// Copies `tcp` ⇄ the proxy at `socket` until both directions end.
fn pipe(tcp: TcpStream, socket: &PathBuf) {
    let Ok(unix) = UnixStream::connect(socket) else {
        let _ = (&tcp).write_all(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n");
        return;
    };
    let (Ok(tcp_in), Ok(unix_out)) = (tcp.try_clone(), unix.try_clone()) else {
        return;
    };
    let up = std::thread::spawn(move || copy(tcp_in, unix_out));
    copy(unix, tcp);
    let _ = up.join();
}

fn copy<R: Read, W: Write + ShutdownWrite>(mut from: R, mut to: W) {
    let _ = std::io::copy(&mut from, &mut to);
    to.shutdown_write();
}

/// Half-closes a socket once its copy is done.
trait ShutdownWrite {
    fn shutdown_write(&self);
}

impl ShutdownWrite for TcpStream {
    fn shutdown_write(&self) {
        let _ = self.shutdown(Shutdown::Write);
    }
}

impl ShutdownWrite for UnixStream {
    fn shutdown_write(&self) {
        let _ = self.shutdown(Shutdown::Write);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn a_relayed_connection_reaches_the_socket_both_ways() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("p.sock");
        let proxy = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let socket = path.clone();
        std::thread::spawn(move || {
            let (tcp, _) = listener.accept().unwrap();
            pipe(tcp, &socket);
        });
        let mut client = TcpStream::connect(addr).unwrap();
        client.write_all(b"ping").unwrap();
        client.shutdown(Shutdown::Write).unwrap();
        let (mut inside, _) = proxy.accept().unwrap();
        let mut got = String::new();
        inside.read_to_string(&mut got).unwrap();
        assert_eq!(got, "ping");
        inside.write_all(b"pong").unwrap();
        drop(inside);
        let mut back = String::new();
        client.read_to_string(&mut back).unwrap();
        assert_eq!(back, "pong");
    }

    #[test]
    fn every_proxy_variable_points_at_the_relay() {
        let env = proxy_env("http://127.0.0.1:9");
        for k in ["HTTP_PROXY", "https_proxy", "ALL_PROXY"] {
            assert!(env.contains(&(k, "http://127.0.0.1:9".to_string())), "{k}");
        }
        assert!(env.contains(&("NO_PROXY", String::new())));
    }
}
