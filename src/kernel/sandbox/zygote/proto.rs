//! The zygote's protocol, both halves: keel hands the zygote one call at a time over the
//! control socket (a `SOCK_SEQPACKET` pair: one byte and, with `SCM_RIGHTS`, the call's own
//! socket and the write ends of its stdout and stderr pipes); the zygote hands it on the same
//! way to one of its reapers, which says when it is ready for another; on the call's socket
//! (a stream) keel writes a [`Request`] and the reaper (or the zygote, when no reaper could
//! start) [`Reply`]s, as JSON lines. Owns the message types and the fd passing; it never
//! spawns anything.

use std::ffi::{OsStr, OsString};
use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};
use serde::{Deserialize, Serialize};

/// The byte a call's control message carries.
const CALL: u8 = b'c';
/// The byte the zygote sends keel once it serves, and a reaper the zygote after each call (the
/// only message in that direction).
const READY: u8 = b'r';

/// Bytes that need not be UTF-8 (an environment value, a path, an argument).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum OsBytes {
    Text(String),
    Raw(Vec<u8>),
}

impl OsBytes {
    pub fn of(s: &OsStr) -> OsBytes {
        match s.to_str() {
            Some(t) => OsBytes::Text(t.to_string()),
            None => OsBytes::Raw(s.as_bytes().to_vec()),
        }
    }

    pub fn into_os(self) -> OsString {
        match self {
            OsBytes::Text(t) => t.into(),
            OsBytes::Raw(b) => OsString::from_vec(b),
        }
    }
}

/// What keel writes on a call's socket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum Request {
    /// Start `argv` in `cwd` with exactly `env` (the zygote's own environment, which the
    /// sandbox set up: `TMPDIR`, the proxy variables, goes on top), stdin `/dev/null`, in a
    /// process group of its own. First and once.
    Run {
        argv: Vec<OsBytes>,
        cwd: OsBytes,
        env: Vec<(OsBytes, OsBytes)>,
        /// What happens to the processes the command leaves when its main process exits.
        #[serde(default)]
        lifetime: Lifetime,
        /// The call's stdout is a terminal (a job's PTY slave): it is the command's stdin too,
        /// and the command runs in a session of its own with it as its controlling terminal.
        /// Older lines (none) run on pipes.
        #[serde(default)]
        tty: bool,
    },
    /// SIGKILL the command's process group (abort, timeout); the rest of what it started
    /// ends as its main process does.
    Kill,
    /// Sends `signal` to the command's process group and to every other process the call
    /// started (in the group or not: `setsid`, a double fork): a job's TERM, then KILL.
    Signal { signal: i32 },
}

/// What happens to what a call started once its main process exited: every call ends with
/// everything, a background job's too (a job is one long call: its main process is what
/// outlives a tool call, and what it leaves ends with it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Lifetime {
    /// Everything the call started (in its process group or not: `setsid`, a double fork)
    /// is killed before its `Exited` is sent.
    #[default]
    Call,
}

/// What the zygote writes on a call's socket, in this order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum Reply {
    /// The request was read; nothing has been started before this line.
    Accepted,
    /// The command runs: its pid (and process group) as the zygote sees it.
    Started { pid: i32 },
    /// The command could not be started (`not_found`: no such program).
    Failed { error: String, not_found: bool },
    /// The command's main process ended: its raw wait status.
    Exited { status: i32 },
}

/// One message as a line.
pub fn line<T: Serialize>(msg: &T) -> Vec<u8> {
    let mut v = serde_json::to_vec(msg).unwrap_or_default();
    v.push(b'\n');
    v
}

/// The fds a call crosses with: its socket, stdout and stderr, and, for a job with a cgroup
/// of its own, that cgroup's `cgroup.procs` opened for writing (the command writes itself into
/// it before it execs: see the reaper).
pub struct Handed {
    pub fds: [OwnedFd; 3],
    pub cgroup: Option<OwnedFd>,
}

/// Hands one call to the zygote: its socket, stdout and stderr (and its cgroup's
/// `cgroup.procs`). Never blocks: a zygote that stopped reading is an error (`WouldBlock`),
/// like a dead one (`BrokenPipe`).
pub fn send_call(
    control: BorrowedFd<'_>,
    fds: [BorrowedFd<'_>; 3],
    cgroup: Option<BorrowedFd<'_>>,
) -> std::io::Result<()> {
    let mut all: Vec<BorrowedFd<'_>> = fds.to_vec();
    all.extend(cgroup);
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(4))];
    let mut cmsg = SendAncillaryBuffer::new(&mut space);
    if !cmsg.push(SendAncillaryMessage::ScmRights(&all)) {
        return Err(std::io::Error::other("control buffer too small"));
    }
    let flags = SendFlags::DONTWAIT | SendFlags::NOSIGNAL;
    rustix::net::sendmsg(control, &[IoSlice::new(&[CALL])], &mut cmsg, flags)?;
    Ok(())
}

/// The next call keel handed over (its socket, stdout, stderr, and maybe its cgroup), `None`
/// when keel closed the control socket (the session ended). The fds are close-on-exec.
pub fn recv_call(control: BorrowedFd<'_>) -> std::io::Result<Option<Handed>> {
    loop {
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(4))];
        let mut cmsg = RecvAncillaryBuffer::new(&mut space);
        let mut byte = [0u8; 1];
        let got = match rustix::net::recvmsg(
            control,
            &mut [IoSliceMut::new(&mut byte)],
            &mut cmsg,
            RecvFlags::CMSG_CLOEXEC,
        ) {
            Ok(got) => got,
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        };
        if got.bytes == 0 {
            return Ok(None);
        }
        let mut fds: Vec<OwnedFd> = Vec::new();
        for msg in cmsg.drain() {
            if let RecvAncillaryMessage::ScmRights(rights) = msg {
                fds.extend(rights);
            }
        }
        // Anything else is not keel's: drop what came (closing it) and read on.
        let cgroup = match fds.len() {
            4 => fds.pop(),
            _ => None,
        };
        if let (CALL, Ok(fds)) = (byte[0], <[OwnedFd; 3]>::try_from(fds)) {
            return Ok(Some(Handed { fds, cgroup }));
        }
    }
}

/// Tells the other end this one is ready: the zygote serves (its sandbox is up), or a reaper
/// finished its call. Never blocks.
pub fn send_ready(control: BorrowedFd<'_>) -> std::io::Result<()> {
    let flags = SendFlags::DONTWAIT | SendFlags::NOSIGNAL;
    rustix::net::send(control, &[READY], flags)?;
    Ok(())
}

/// Waits for a reaper's [`send_ready`] (it finished a call): `false` when it closed its end
/// (it exited).
pub fn recv_ready(control: BorrowedFd<'_>) -> bool {
    let mut byte = [0u8; 1];
    loop {
        match rustix::net::recv(control, &mut byte, RecvFlags::empty()) {
            Ok(got) => return got.0 == 1 && byte[0] == READY,
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => return false,
        }
    }
}

/// Waits up to `timeout` for the zygote's [`send_ready`]: `false` when it ended first (its
/// end of the socket closed) or did not say it in time.
pub fn wait_ready(control: BorrowedFd<'_>, timeout: std::time::Duration) -> bool {
    use rustix::net::sockopt::{set_socket_timeout, Timeout};
    // keel reads nothing else on its end: the timeout stays with it harmlessly.
    if set_socket_timeout(control, Timeout::Recv, Some(timeout)).is_err() {
        return false;
    }
    let mut byte = [0u8; 1];
    loop {
        match rustix::net::recv(control, &mut byte, RecvFlags::empty()) {
            Ok(got) => return got.0 == 1 && byte[0] == READY,
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => return false,
        }
    }
}

/// A `SOCK_SEQPACKET` pair, close-on-exec: (keel's end, the zygote's).
pub fn control_pair() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let (a, b) = rustix::net::socketpair(
        rustix::net::AddressFamily::UNIX,
        rustix::net::SocketType::SEQPACKET,
        rustix::net::SocketFlags::CLOEXEC,
        None,
    )?;
    Ok((a, b))
}

/// Borrows three fds for [`send_call`].
pub fn borrow3<'a>(a: &'a impl AsFd, b: &'a impl AsFd, c: &'a impl AsFd) -> [BorrowedFd<'a>; 3] {
    [a.as_fd(), b.as_fd(), c.as_fd()]
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn a_call_crosses_with_its_fds_and_eof_ends_the_loop() {
        let (ours, theirs) = control_pair().unwrap();
        let (call, _keep) = std::os::unix::net::UnixStream::pair().unwrap();
        let (mut r1, w1) = std::io::pipe().unwrap();
        let (_r2, w2) = std::io::pipe().unwrap();
        send_call(ours.as_fd(), borrow3(&call, &w1, &w2), None).unwrap();
        drop(w1);
        let handed = recv_call(theirs.as_fd()).unwrap().unwrap();
        assert!(handed.cgroup.is_none());
        let [_c, out, _e] = handed.fds;
        std::fs::File::from(out).write_all(b"hi").unwrap();
        let mut got = String::new();
        r1.read_to_string(&mut got).unwrap();
        assert_eq!(got, "hi");
        // A job's call brings its cgroup's file as a fourth.
        let (mut r4, w4) = std::io::pipe().unwrap();
        send_call(ours.as_fd(), borrow3(&call, &w2, &w2), Some(w4.as_fd())).unwrap();
        drop(w4);
        let cgroup = recv_call(theirs.as_fd()).unwrap().unwrap().cgroup.unwrap();
        std::fs::File::from(cgroup).write_all(b"0").unwrap();
        let mut got = String::new();
        r4.read_to_string(&mut got).unwrap();
        assert_eq!(got, "0");
        drop(ours);
        assert!(recv_call(theirs.as_fd()).unwrap().is_none());
    }

    #[test]
    fn messages_are_tagged_lines_and_raw_bytes_survive() {
        let raw = OsString::from_vec(vec![b'a', 0xff]);
        let req = Request::Run {
            argv: vec![OsBytes::of(OsStr::new("bash"))],
            cwd: OsBytes::of(&raw),
            env: vec![],
            lifetime: Lifetime::Call,
            tty: true,
        };
        let l = line(&req);
        assert!(l.ends_with(b"\n"));
        let back: Request = serde_json::from_slice(&l).unwrap();
        assert_eq!(back, req);
        let Request::Run { cwd, .. } = back else {
            panic!()
        };
        assert_eq!(cwd.into_os(), raw);
        let s = String::from_utf8(line(&Reply::Started { pid: 7 })).unwrap();
        assert_eq!(s, "{\"type\":\"started\",\"pid\":7}\n");
        // A request without a lifetime (an older keel) ends with its call.
        let old = r#"{"type":"run","argv":["true"],"cwd":"/","env":[]}"#;
        let Request::Run { lifetime, tty, .. } = serde_json::from_str(old).unwrap() else {
            panic!()
        };
        assert_eq!(lifetime, Lifetime::Call);
        assert!(!tty, "an older line runs on pipes");
        let signal = line(&Request::Signal { signal: 15 });
        assert_eq!(signal, b"{\"type\":\"signal\",\"signal\":15}\n");
    }
}
