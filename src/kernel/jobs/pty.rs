//! A job's terminal: the PTY pair keel opens for it (the master kept here, read for output and
//! written with the input; the slave handed to the command as stdin, stdout and stderr), its
//! size, and the other half of `keel __sandbox-tty`, which puts the command in a session of
//! its own with the slave as its controlling terminal before it execs it (no `pre_exec` in
//! keel: `unsafe` is forbidden). Owns only that; it never spawns anything.

use std::ffi::OsString;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::CommandExt;

use rustix::pty::OpenptFlags;
use rustix::termios::Winsize;

/// The size a terminal job gets when none is asked for (columns, rows).
pub const DEFAULT_SIZE: (u16, u16) = (120, 40);

/// A PTY pair: the master, non-blocking (keel's), and the slave (the command's).
pub struct Pair {
    pub master: OwnedFd,
    pub slave: OwnedFd,
}

/// Opens a PTY pair of `size` (columns, rows), both ends close-on-exec, the master
/// non-blocking.
pub fn open(size: (u16, u16)) -> std::io::Result<Pair> {
    let flags = OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC;
    let master = rustix::pty::openpt(flags)?;
    rustix::pty::grantpt(&master)?;
    rustix::pty::unlockpt(&master)?;
    // The slave without a path (`TIOCGPTPEER`: no race on `/dev/pts/N`), else by its name.
    let slave = match rustix::pty::ioctl_tiocgptpeer(&master, flags) {
        Ok(fd) => fd,
        Err(_) => {
            let name = rustix::pty::ptsname(&master, Vec::new())?;
            let mode = rustix::fs::OFlags::RDWR | rustix::fs::OFlags::NOCTTY;
            rustix::fs::open(
                name.as_c_str(),
                mode | rustix::fs::OFlags::CLOEXEC,
                0.into(),
            )?
        }
    };
    resize(&master, size)?;
    rustix::io::ioctl_fionbio(&master, true)?;
    Ok(Pair { master, slave })
}

/// Sets the terminal's size (columns, rows): the kernel sends `SIGWINCH` to its foreground
/// process group when it changed.
pub fn resize(master: impl AsFd, (cols, rows): (u16, u16)) -> std::io::Result<()> {
    let size = Winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    rustix::termios::tcsetwinsize(master, size)?;
    Ok(())
}

/// `keel __sandbox-tty PROGRAM [ARGS…]`: makes this process the leader of a new session whose
/// controlling terminal is its stdin, then execs `argv`. Returns only the error that stopped
/// it.
pub fn exec_on_terminal(argv: Vec<OsString>) -> std::io::Error {
    let mut argv = argv.into_iter();
    let Some(program) = argv.next() else {
        return std::io::Error::other("no command to run");
    };
    if let Err(e) = rustix::process::setsid() {
        return std::io::Error::other(format!("setsid: {e}"));
    }
    if let Err(e) = rustix::process::ioctl_tiocsctty(std::io::stdin()) {
        return std::io::Error::other(format!("cannot take the terminal: {e}"));
    }
    std::process::Command::new(program).args(argv).exec()
}
