//! Shared test helpers: a sandbox (temp KEEL_HOME and cwd, cleared env, fixed clock and seed),
//! running the real binary, and snapshotting stdout + stderr + exit status together.

use std::fmt;
use std::io::{BufRead, BufReader, Read};

use nix::sys::signal::Signal;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

pub const CLOCK: &str = "1796000000000";

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn fixture(name: &str) -> String {
    root()
        .join("fixtures/providers")
        .join(name)
        .display()
        .to_string()
}

/// The arguments of a run on the scripted provider: `before`, then `--provider scripted
/// --script SCRIPT`, then `after`, in that order.
pub fn scripted_args<'a>(before: &[&'a str], script: &'a str, after: &[&'a str]) -> Vec<&'a str> {
    let mut all = before.to_vec();
    all.extend_from_slice(&["--provider", "scripted", "--script", script]);
    all.extend_from_slice(after);
    all
}

/// The built-in tools a run offers the model, in order, before MCP tools and `task`.
pub const BUILT_IN_TOOLS: [&str; 8] = [
    "read",
    "write",
    "edit",
    "bash",
    "grep",
    "find",
    "ls",
    "todo_write",
];

/// The string `key` of each item of the JSON array `list` (a list of tool names, roles, ids).
pub fn strs<'a>(list: &'a serde_json::Value, key: &str) -> Vec<&'a str> {
    let items = list
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {list}"));
    items.iter().map(|o| o[key].as_str().unwrap()).collect()
}

/// Writes `text` to `path`, creating its parent directories.
pub fn write_text(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// Writes `v` to `path` as JSON (pretty), creating its parent directories.
pub fn write_json(path: &Path, v: &serde_json::Value) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, serde_json::to_string_pretty(v).unwrap()).unwrap();
}

/// `'KEEL' --provider scripted --script 'SCRIPT'`: a shell command that runs the binary on the
/// scripted provider, for a test that starts it through `sh -c` (in a terminal).
pub fn keel_shell(script: &str) -> String {
    let keel = env!("CARGO_BIN_EXE_keel");
    format!("'{keel}' --provider scripted --script '{script}'")
}

/// A temp dir with `home/` (KEEL_HOME) and `work/` (the cwd).
pub struct Sandbox {
    pub dir: tempfile::TempDir,
    pub seed: u64,
}

impl Sandbox {
    pub fn new() -> Self {
        Sandbox::in_dir(tempfile::tempdir().unwrap())
    }

    /// A sandbox in a temp dir under `base` (`/var/tmp`: a home that is not under `/tmp`,
    /// which bubblewrap's private `/tmp` would hide whatever keel masks); `None` when `base`
    /// is not writable.
    pub fn new_in(base: &str) -> Option<Self> {
        tempfile::tempdir_in(base).ok().map(Sandbox::in_dir)
    }

    fn in_dir(dir: tempfile::TempDir) -> Self {
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        std::fs::create_dir_all(dir.path().join("work")).unwrap();
        // KEEL_HOME private, as keel creates it (a group/other-readable one gets a warning).
        use std::os::unix::fs::PermissionsExt;
        let private = std::fs::Permissions::from_mode(0o700);
        std::fs::set_permissions(dir.path().join("home"), private).unwrap();
        Sandbox { dir, seed: 42 }
    }

    pub fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    pub fn work(&self) -> PathBuf {
        self.dir.path().join("work")
    }

    /// The real binary with a cleared, deterministic environment.
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_keel"));
        c.args(args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.dir.path())
            .env("KEEL_HOME", self.home())
            .env("KEEL_TEST_CLOCK", CLOCK)
            .env("KEEL_TEST_SEED", self.seed.to_string())
            .env("TMPDIR", self.dir.path())
            // Never the machine's /etc/keel/managed-settings.json.
            .env("KEEL_MANAGED_SETTINGS", self.managed_settings())
            .current_dir(self.work())
            .stdin(Stdio::null());
        // `KEEL_TEST_LOG=keel::client=debug cargo test …`: the runs' logs, on their stderr.
        if let Ok(log) = std::env::var("KEEL_TEST_LOG") {
            c.env("KEEL_LOG", log);
        }
        c
    }

    /// The managed settings file of the sandbox's runs (absent until a test writes it).
    pub fn managed_settings(&self) -> PathBuf {
        self.dir.path().join("managed-settings.json")
    }

    /// [`Sandbox::cmd`] started through `sh -c 'SETUP; exec keel ARGS'`, for process limits
    /// a test cannot set without unsafe code (`ulimit -f`, `umask`, `trap '' XFSZ`).
    pub fn cmd_after(&self, setup: &str, args: &[&str]) -> Command {
        let inner = self.cmd(args);
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg(format!("{setup}; exec \"$0\" \"$@\""))
            .arg(inner.get_program())
            .args(inner.get_args())
            .env_clear()
            .current_dir(self.work())
            .stdin(Stdio::null());
        for (k, v) in inner.get_envs() {
            if let Some(v) = v {
                c.env(k, v);
            }
        }
        c
    }

    /// Runs to completion.
    /// A scripted-provider script of `turns` (`script.json` beside the work dir); its path.
    pub fn script(&self, turns: serde_json::Value) -> String {
        let path = self.dir.path().join("script.json");
        write_text(&path, &serde_json::json!({ "turns": turns }).to_string());
        path.display().to_string()
    }

    /// A print run (no session file) whose one turn runs `command` with bash, then answers
    /// `done`; `extra` flags before the prompt.
    pub fn bash_run(&self, command: &str, extra: &[&str]) -> Run {
        let script = serde_json::json!({"turns": [
            {"chunks": [{"toolCall": {"id": "c1", "name": "bash", "arguments": {"command": command}}}]},
            {"chunks": [{"text": "done"}]}
        ]});
        let path = self.dir.path().join("script.json");
        write_json(&path, &script);
        let path = path.display().to_string();
        let mut args = scripted_args(&["-p", "--no-session"], &path, &[]);
        args.extend_from_slice(extra);
        args.push("go");
        self.run(&args)
    }

    pub fn run(&self, args: &[&str]) -> Run {
        let out = self.cmd(args).output().unwrap();
        self.finish(out)
    }

    /// Runs `keel MODE --provider scripted --script fixtures/providers/SCRIPT ARGS...`.
    pub fn scripted(&self, mode: &str, script: &str, args: &[&str]) -> Run {
        let script = fixture(script);
        self.run(&scripted_args(&[mode], &script, args))
    }

    /// Writes a scripted-provider script whose first turn makes `calls` (tool name,
    /// arguments) and whose second answers "done"; returns its path.
    pub fn tool_calls_script(&self, calls: &[(&str, serde_json::Value)]) -> String {
        let chunks: Vec<serde_json::Value> = calls
            .iter()
            .enumerate()
            .map(|(i, (name, args))| {
                serde_json::json!({"toolCall": {"id": format!("call_{i}"), "name": name, "arguments": args}})
            })
            .collect();
        let body =
            serde_json::json!({"turns": [{"chunks": chunks}, {"chunks": [{"text": "done"}]}]});
        let script = self.dir.path().join("script.json");
        std::fs::write(&script, body.to_string()).unwrap();
        script.display().to_string()
    }

    /// Starts a JSON-mode run of SCRIPT, waits until stdout shows `needle`, sends `sig`, and
    /// returns everything the process wrote and its status.
    pub fn interrupt_json(&self, script: &str, args: &[&str], needle: &str, sig: Signal) -> Run {
        let script = fixture(script);
        let mut child = self.spawn(&scripted_args(&["--json"], &script, args));
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut seen = read_until(&mut stdout, needle).concat();
        signal(&child, sig);
        stdout.read_to_string(&mut seen).unwrap();
        let out = child.wait_with_output().unwrap();
        self.finish(std::process::Output {
            stdout: seen.into_bytes(),
            ..out
        })
    }

    /// Runs with `input` on stdin.
    pub fn run_stdin(&self, args: &[&str], input: &str) -> Run {
        use std::io::Write;
        let mut child = self.spawn_piped(args);
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        self.finish(child.wait_with_output().unwrap())
    }

    pub fn finish(&self, out: std::process::Output) -> Run {
        Run {
            stdout: String::from_utf8_lossy(&out.stdout).to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).to_string(),
            code: out.status.code().unwrap_or(-1),
            sandbox: self.dir.path().to_path_buf(),
        }
    }

    /// Spawns with piped stdout/stderr for tests that interact with a running process.
    pub fn spawn(&self, args: &[&str]) -> Child {
        self.cmd(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// Spawns with stdin, stdout and stderr piped.
    pub fn spawn_piped(&self, args: &[&str]) -> Child {
        self.cmd(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// Spawns with stdin, stdout and stderr piped, for a test that talks to the process line by
    /// line (RPC mode): the child, its stdin and a line reader on its stdout.
    pub fn spawn_talking(
        &self,
        args: &[&str],
    ) -> (
        Child,
        std::process::ChildStdin,
        BufReader<std::process::ChildStdout>,
    ) {
        let mut child = self.spawn_piped(args);
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        (child, stdin, stdout)
    }

    /// The text of the sandbox's one session file (asserts that there is exactly one).
    pub fn session_text(&self) -> String {
        let files = self.session_files();
        assert_eq!(files.len(), 1, "{files:?}");
        std::fs::read_to_string(&files[0]).unwrap()
    }

    /// Every session file under KEEL_HOME.
    pub fn session_files(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        let sessions = self.home().join("sessions");
        if let Ok(dirs) = std::fs::read_dir(&sessions) {
            for d in dirs.flatten() {
                // Not a session's `<file>.output` directory of kept tool outputs.
                for f in std::fs::read_dir(d.path()).unwrap().flatten() {
                    if f.path().extension().is_none_or(|x| x != "output") {
                        out.push(f.path());
                    }
                }
            }
        }
        out.sort();
        out
    }
}

/// Takes `child`'s stderr and reads it until a line contains `ready` (a server saying it
/// listens), then keeps draining it on a thread so the child never blocks on a full pipe.
/// Panics, naming `what`, if stderr ends first.
pub fn stderr_until(child: &mut Child, ready: &str, what: &str) {
    let mut err = BufReader::new(child.stderr.take().expect("stderr piped"));
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            err.read_line(&mut line).unwrap() > 0,
            "{what} ended before it was ready"
        );
        if line.contains(ready) {
            break;
        }
    }
    std::thread::spawn(move || for _ in err.lines() {});
}

/// Reads stdout lines of a running child until one contains `needle`; returns the lines read.
pub fn read_until(reader: &mut BufReader<std::process::ChildStdout>, needle: &str) -> Vec<String> {
    let mut lines = Vec::new();
    loop {
        let mut line = String::new();
        let n = reader.read_line(&mut line).unwrap();
        assert!(
            n > 0,
            "stdout ended before a line containing {needle:?}: {lines:#?}"
        );
        let found = line.contains(needle);
        lines.push(line);
        if found {
            return lines;
        }
    }
}

/// What a finished run produced.
pub struct Run {
    pub stdout: String,
    pub stderr: String,
    pub code: i32,
    pub sandbox: PathBuf,
}

impl Run {
    fn scrub(&self, s: &str) -> String {
        let plain = self.sandbox.display().to_string();
        // Session directories embed the cwd with '/' turned into '-'.
        let dashed = plain.trim_start_matches('/').replace('/', "-");
        s.replace(&plain, "[SANDBOX]")
            .replace(&dashed, "[SANDBOX]")
            .replace(&root().display().to_string(), "[ROOT]")
    }

    /// Stdout as the run is shown, its sandbox's path scrubbed: what two sandboxes' runs
    /// compare by.
    pub fn shown_stdout(&self) -> String {
        self.to_string()
            .split("\n[stderr]")
            .next()
            .unwrap()
            .to_string()
    }

    /// Asserts that stderr contains `needle`, showing the whole run if it does not.
    pub fn assert_stderr(&self, needle: &str) {
        assert!(self.stderr.contains(needle), "{self}");
    }

    /// Asserts that stdout contains `needle`, showing the whole run if it does not.
    pub fn assert_stdout(&self, needle: &str) {
        assert!(self.stdout.contains(needle), "{self}");
    }

    pub fn stdout_lines(&self) -> Vec<serde_json::Value> {
        self.stdout
            .lines()
            .map(|l| {
                serde_json::from_str(l)
                    .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {l}"))
            })
            .collect()
    }
}

impl fmt::Display for Run {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}\n[stderr]\n{}\n[exit status: {}]\n",
            self.scrub(&self.stdout),
            self.scrub(&self.stderr),
            self.code
        )
    }
}

/// Asserts a snapshot stored in the top-level `snapshots/` folder.
pub fn snap(name: &str, value: &str) {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(root().join("snapshots"));
    settings.set_prepend_module_to_snapshot(false);
    settings.bind(|| insta::assert_snapshot!(name, value));
}

/// Sends a signal to a child.
pub fn signal(child: &Child, sig: Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), sig).unwrap();
}

/// Says that a test (or part of one) was skipped and why, on stdout (seen with
/// `--nocapture`) and, when `KEEL_SKIPPED` names a file, as a line appended to it: `make check`
/// prints that file at its end, so a missing tool is never counted silently as a pass.
pub fn skipped(why: &str) {
    println!("skipped: {why}"); // stdout-ok
    if let Some(path) = std::env::var_os("KEEL_SKIPPED") {
        use std::io::Write;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path);
        if let Ok(mut f) = file {
            let _ = writeln!(f, "{why}");
        }
    }
}

/// The processes alive whose command line holds `marker`, with their command lines (zombies
/// and this process left out): what a test expects gone once a job or hook ended.
pub fn alive(marker: &str) -> Vec<(i32, String)> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        let zombie = std::fs::read_to_string(e.path().join("stat")).is_ok_and(|s| {
            s.rsplit(')')
                .next()
                .is_some_and(|r| r.trim_start().starts_with('Z'))
        });
        if cmd.contains(marker) && !zombie && pid != std::process::id() as i32 {
            found.push((pid, cmd));
        }
    }
    found
}
