//! The TUI tests' terminal: the real binary started through `sh -c` in a pseudo-terminal, its
//! screen read through a terminal emulator (`vt100`) by a reader thread; waits are on what the
//! screen shows, never on time.

use std::io::{Read, Write};
use std::num::NonZeroU16;
use std::sync::mpsc;
use std::time::Duration;

use portable_pty::{native_pty_system, CommandBuilder, PtySize};

use crate::common::support::Sandbox;

/// The pty's screen as the user sees it, fed by a reader thread.
pub struct Screen {
    pub parser: vt100::Parser,
    rx: mpsc::Receiver<Vec<u8>>,
    writer: Box<dyn Write + Send>,
    /// Everything the program wrote, for checks on raw bytes.
    pub raw: Vec<u8>,
    /// Answer the kitty keyboard protocol's question as a terminal that supports it.
    pub kitty: bool,
    /// Kept open until the test ends.
    _master: Box<dyn portable_pty::MasterPty + Send>,
}

/// How long one wait for the screen may take before the test fails (a hang, not a timing).
const PATIENCE: Duration = Duration::from_secs(30);

impl Screen {
    pub fn text(&self) -> String {
        self.parser.screen().contents()
    }

    /// Reads output until `pred` holds for the screen; answers cursor position queries.
    pub fn wait_for(&mut self, what: &str, pred: impl Fn(&str) -> bool) {
        let deadline = std::time::Instant::now() + PATIENCE;
        while !pred(&self.text()) {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let chunk = match self.rx.recv_timeout(left) {
                Ok(c) => c,
                Err(_) => panic!("waiting for {what}; the screen shows:\n{}", self.text()),
            };
            self.parser.process(&chunk);
            self.raw.extend_from_slice(&chunk);
            if chunk.windows(4).any(|w| w == b"\x1b[6n") {
                let (row, col) = self.parser.screen().cursor_position();
                let answer = format!("\x1b[{};{}R", row + 1, col + 1);
                self.writer.write_all(answer.as_bytes()).unwrap();
            }
            // The keyboard-protocol question (`CSI ? u`, answered when `kitty` is set) and the
            // device attributes after it, as a terminal answers them.
            if self.kitty && chunk.windows(4).any(|w| w == b"\x1b[?u") {
                self.writer.write_all(b"\x1b[?0u").unwrap();
            }
            if chunk.windows(3).any(|w| w == b"\x1b[c") {
                self.writer.write_all(b"\x1b[?62c").unwrap();
            }
        }
    }

    /// Resizes the terminal (the program gets SIGWINCH) and the emulator with it.
    pub fn resize(&mut self, rows: u16, cols: u16) {
        let size = PtySize {
            rows,
            cols,
            pixel_width: 0,
            pixel_height: 0,
        };
        self._master.resize(size).unwrap();
        let nz = |n: u16| NonZeroU16::new(n).unwrap();
        self.parser.set_size(nz(rows), nz(cols));
    }

    pub fn send(&mut self, bytes: &str) {
        self.writer.write_all(bytes.as_bytes()).unwrap();
        self.writer.flush().unwrap();
    }

    /// The pid the shell printed as `KEEL_PID=` (`keel … & echo KEEL_PID=$!`).
    pub fn shell_pid(&self) -> i32 {
        self.text()
            .split("KEEL_PID=")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|p| p.parse().ok())
            .expect("the shell printed keel's pid")
    }

    /// Sends SIGTERM to `pid` and waits for the shell's `KEEL_EXIT=` and the terminal's modes
    /// (`stty -a`) after it.
    pub fn terminate(&mut self, pid: i32) {
        use nix::sys::signal::{kill, Signal};
        kill(nix::unistd::Pid::from_raw(pid), Signal::SIGTERM).unwrap();
        self.wait_for("the exit and the terminal modes", |t| {
            t.contains("KEEL_EXIT=") && t.contains("echoctl")
        });
    }

    /// Sends `keys` that end the program (Ctrl+D, `/quit`), waits for the shell's
    /// `KEEL_EXIT=0` and then for the terminal's process; its exit status.
    pub fn quit(&mut self, keys: &str, child: &mut Child) -> portable_pty::ExitStatus {
        self.send(keys);
        self.wait_for("the exit", |t| t.contains("KEEL_EXIT=0"));
        child.wait().unwrap()
    }
}

/// The process in a pty.
pub type Child = Box<dyn portable_pty::Child + Send + Sync>;

/// The pty's process and its terminal.
pub type Spawned = (Screen, Child);

/// Starts `sh -c SHELL` in a fresh 80x24 pseudo-terminal, with the sandbox's environment and
/// no daemon unless the command asks for one (`--daemon`, `keel attach`).
pub fn spawn(sb: &Sandbox, shell: &str) -> Spawned {
    spawn_with(sb, shell, &[("KEEL_NO_DAEMON", "1")])
}

/// [`spawn`] with these variables instead of `KEEL_NO_DAEMON=1`.
pub fn spawn_with(sb: &Sandbox, shell: &str, vars: &[(&str, &str)]) -> Spawned {
    let pty = native_pty_system()
        .openpty(PtySize {
            rows: 24,
            cols: 80,
            pixel_width: 0,
            pixel_height: 0,
        })
        .unwrap();
    let mut cmd = CommandBuilder::new("sh");
    cmd.args(["-c", shell]);
    cmd.env_clear();
    cmd.env("PATH", std::env::var("PATH").unwrap_or_default());
    cmd.env("HOME", sb.dir.path());
    cmd.env("KEEL_HOME", sb.home());
    cmd.env("TERM", "xterm-256color");
    cmd.env("TMPDIR", sb.dir.path());
    for (k, v) in vars {
        cmd.env(k, v);
    }
    cmd.cwd(sb.work());
    let child = pty.slave.spawn_command(cmd).unwrap();
    drop(pty.slave);
    let mut reader = pty.master.try_clone_reader().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 8192];
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let screen = Screen {
        parser: vt100::Parser::new(
            NonZeroU16::new(24).unwrap(),
            NonZeroU16::new(80).unwrap(),
            500,
        ),
        rx,
        writer: pty.master.take_writer().unwrap(),
        raw: Vec::new(),
        kitty: false,
        _master: pty.master,
    };
    (screen, child)
}
