//! `bash`: runs one shell command in its own process group, streaming its merged stdout/stderr
//! as progress. Owns the child's lifetime: it must never print, never leave an aborted or
//! timed-out process group alive, and never hang on a background child holding the pipe.

use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::text::{self, MAX_BYTES, MAX_LINES};
use super::{str_arg, u64_arg, ToolContext, ToolOutput, ToolSpec};
use crate::kernel::abort::AbortSignal;
use crate::kernel::message::Message;

/// At most one progress message per this interval (unless `PROGRESS_BYTES` arrived).
const PROGRESS_INTERVAL: Duration = Duration::from_millis(50);
const PROGRESS_BYTES: usize = 8 * 1024;
/// After the main process exits, stop reading after this long without data...
const DRAIN_IDLE: Duration = Duration::from_millis(100);
/// ...or after this long in total.
const DRAIN_MAX: Duration = Duration::from_secs(1);
const READ_CHUNK: usize = 8 * 1024;
/// In-memory tail kept once the output spills to a file (must exceed `MAX_BYTES`).
const KEEP_BYTES: usize = 4 * MAX_BYTES;

pub(super) fn spec() -> ToolSpec {
    ToolSpec {
        name: "bash",
        description: "Execute a bash command in the current working directory. Returns stdout \
                      and stderr merged. Output is truncated to the last 2000 lines or 50KB; \
                      the full output is then saved to a file. Optional timeout in seconds.",
        parameters: json!({
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "Bash command to execute"},
                "timeout": {"type": "integer", "minimum": 1, "description": "Timeout in seconds"}
            },
            "required": ["command"]
        }),
    }
}

/// How the run ended.
enum Outcome {
    Exited(ExitStatus),
    TimedOut,
    Aborted,
    Failed(String),
}

pub(super) async fn run(args: &Value, ctx: &ToolContext) -> ToolOutput {
    let command = match str_arg(args, "command") {
        Ok(c) => c,
        Err(e) => return e,
    };
    let timeout = match u64_arg(args, "timeout") {
        Ok(Some(0)) => return ToolOutput::error("invalid arguments: `timeout` must be at least 1"),
        Ok(Some(secs)) => Duration::from_secs(secs),
        Ok(None) => ctx.bash_timeout,
        Err(e) => return e,
    };
    let mut out = Output::new(&ctx.temp_dir);
    if ctx.abort.is_aborted() {
        return render(Outcome::Aborted, &out, timeout);
    }
    let mut child = match spawn(command, &ctx.cwd) {
        Ok(c) => c,
        Err(e) => return ToolOutput::error(format!("Failed to start shell: {e}")),
    };
    let outcome = supervise(&mut child, &mut out, timeout, ctx, None).await;
    render(outcome, &out, timeout)
}

/// A shell command the user ran (pi's `bashExecution` message): recorded in the session and,
/// unless excluded, shown to the model with the next prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BashExecution {
    pub command: String,
    /// The output tail within the caps (all of it is at `full_output_path` when truncated).
    pub output: String,
    /// `None` when the command was killed, timed out or could not start.
    pub exit_code: Option<i32>,
    pub cancelled: bool,
    pub truncated: bool,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub full_output_path: Option<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub exclude_from_context: bool,
    /// Unix milliseconds.
    #[serde(default)]
    pub timestamp: i64,
}

impl BashExecution {
    /// The session-file message: `{"role":"bashExecution", ...}`.
    pub fn to_json(&self) -> Value {
        let mut v = serde_json::to_value(self).unwrap_or_else(|_| json!({}));
        if let Some(map) = v.as_object_mut() {
            map.shift_insert(0, "role".into(), json!("bashExecution"));
        }
        v
    }

    /// Reads a session-file `bashExecution` message.
    pub fn from_json(v: &Value) -> Option<BashExecution> {
        if v.get("role").and_then(Value::as_str) != Some("bashExecution") {
            return None;
        }
        serde_json::from_value(v.clone()).ok()
    }

    /// What the model is shown: a user message saying what ran and what it printed.
    pub fn context_message(&self) -> Option<Message> {
        if self.exclude_from_context {
            return None;
        }
        let mut text = format!("Ran `{}`\n", self.command);
        if self.output.is_empty() {
            text.push_str("(no output)");
        } else {
            text.push_str("```\n");
            text.push_str(self.output.trim_end_matches('\n'));
            text.push_str("\n```");
        }
        if self.cancelled {
            text.push_str("\n\n(command cancelled)");
        } else if let Some(code) = self.exit_code.filter(|c| *c != 0) {
            text.push_str(&format!("\n\nCommand exited with code {code}"));
        }
        if let (true, Some(path)) = (self.truncated, &self.full_output_path) {
            text.push_str(&format!("\n\n[Output truncated. Full output: {path}]"));
        }
        Some(Message::user(text, self.timestamp))
    }
}

/// Runs a command the user typed (RPC `bash`, the TUI's `!cmd`): raw output chunks go to
/// `chunks` as they arrive; `abort` kills the process group.
pub async fn run_user(
    command: &str,
    cwd: &Path,
    temp_dir: &Path,
    timeout: Duration,
    abort: AbortSignal,
    chunks: mpsc::UnboundedSender<Vec<u8>>,
) -> BashExecution {
    let ctx = ToolContext {
        cwd: cwd.to_path_buf(),
        abort,
        progress: None,
        bash_timeout: timeout,
        temp_dir: temp_dir.to_path_buf(),
    };
    let mut out = Output::new(temp_dir);
    let outcome = if ctx.abort.is_aborted() {
        Outcome::Aborted
    } else {
        match spawn(command, cwd) {
            Ok(mut child) => supervise(&mut child, &mut out, timeout, &ctx, Some(&chunks)).await,
            Err(e) => {
                let msg = format!("Failed to start shell: {e}\n");
                let _ = chunks.send(msg.clone().into_bytes());
                out.push(msg.as_bytes());
                Outcome::Failed(msg)
            }
        }
    };
    let (exit_code, cancelled) = match &outcome {
        Outcome::Exited(s) => (s.code(), false),
        Outcome::Aborted => (None, true),
        Outcome::TimedOut | Outcome::Failed(_) => (None, false),
    };
    BashExecution {
        command: command.to_string(),
        output: out.tail().text,
        exit_code,
        cancelled,
        truncated: out.over_caps(),
        full_output_path: out.full_path().map(|p| p.display().to_string()),
        exclude_from_context: false,
        timestamp: 0,
    }
}

/// Spawns `bash -c command` (or `sh -c` when bash is missing) in a new process group.
fn spawn(command: &str, cwd: &Path) -> std::io::Result<Child> {
    let build = |shell: &str| {
        let mut cmd = Command::new(shell);
        cmd.arg("-c")
            .arg(command)
            .current_dir(cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        cmd.spawn()
    };
    match build("bash") {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => build("sh"),
        other => other,
    }
}

/// Waits for exit, abort or timeout while collecting output; always leaves the child reaped.
async fn supervise(
    child: &mut Child,
    out: &mut Output,
    timeout: Duration,
    ctx: &ToolContext,
    chunks: Option<&mpsc::UnboundedSender<Vec<u8>>>,
) -> Outcome {
    let pgid = child.id().and_then(|id| i32::try_from(id).ok());
    let (tx, mut rx) = mpsc::channel::<Vec<u8>>(64);
    let readers = spawn_readers(child, tx);
    let mut progress = Progress::new(ctx.progress.as_ref());
    let deadline = Instant::now() + timeout;
    let aborted = ctx.abort.aborted();
    tokio::pin!(aborted);
    let mut eof = false;
    let outcome = loop {
        let flush_at = progress.flush_at();
        tokio::select! {
            biased;
            _ = &mut aborted => break Outcome::Aborted,
            _ = tokio::time::sleep_until(deadline) => break Outcome::TimedOut,
            chunk = rx.recv(), if !eof => match chunk {
                Some(c) => {
                    out.push(&c);
                    progress.on_data(c.len(), out);
                    if let Some(tx) = chunks {
                        let _ = tx.send(c);
                    }
                }
                None => eof = true,
            },
            status = child.wait() => break match status {
                Ok(s) => Outcome::Exited(s),
                Err(e) => Outcome::Failed(format!("Failed to wait for command: {e}")),
            },
            _ = tokio::time::sleep_until(flush_at), if progress.pending > 0 => progress.send(out),
        }
    };
    if matches!(outcome, Outcome::Aborted | Outcome::TimedOut) {
        kill_group(child, pgid).await;
    }
    if !eof {
        drain(&mut rx, out, &mut progress, chunks).await;
    }
    for r in readers {
        r.abort();
    }
    if progress.pending > 0 {
        progress.send(out);
    }
    outcome
}

/// SIGKILLs the whole process group, then reaps the main child.
async fn kill_group(child: &mut Child, pgid: Option<i32>) {
    let killed = match pgid {
        Some(pg) => killpg(Pid::from_raw(pg), Signal::SIGKILL).map_err(std::io::Error::from),
        None => child.start_kill(),
    };
    if let Err(e) = killed {
        tracing::debug!(?pgid, error = %e, "bash: kill failed");
    }
    if let Err(e) = child.wait().await {
        tracing::debug!(error = %e, "bash: wait after kill failed");
    }
}

/// Reads what is still buffered after the main process ended: until EOF, `DRAIN_IDLE` without
/// data, or `DRAIN_MAX` in total (a background child may keep the pipe open forever).
async fn drain(
    rx: &mut mpsc::Receiver<Vec<u8>>,
    out: &mut Output,
    progress: &mut Progress<'_>,
    chunks: Option<&mpsc::UnboundedSender<Vec<u8>>>,
) {
    let hard_stop = Instant::now() + DRAIN_MAX;
    loop {
        let idle_stop = (Instant::now() + DRAIN_IDLE).min(hard_stop);
        match tokio::time::timeout_at(idle_stop, rx.recv()).await {
            Ok(Some(chunk)) => {
                out.push(&chunk);
                progress.on_data(chunk.len(), out);
                if let Some(tx) = chunks {
                    let _ = tx.send(chunk);
                }
            }
            Ok(None) | Err(_) => return,
        }
    }
}

fn spawn_readers(child: &mut Child, tx: mpsc::Sender<Vec<u8>>) -> Vec<JoinHandle<()>> {
    let mut handles = Vec::new();
    if let Some(stdout) = child.stdout.take() {
        handles.push(tokio::spawn(pump(stdout, tx.clone())));
    }
    if let Some(stderr) = child.stderr.take() {
        handles.push(tokio::spawn(pump(stderr, tx)));
    }
    handles
}

async fn pump<R: AsyncRead + Unpin>(mut reader: R, tx: mpsc::Sender<Vec<u8>>) {
    let mut buf = vec![0u8; READ_CHUNK];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if tx.send(buf[..n].to_vec()).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// Coalesces progress messages: the first data is sent at once, then at most one message per
/// `PROGRESS_INTERVAL` unless `PROGRESS_BYTES` piled up.
struct Progress<'a> {
    tx: Option<&'a mpsc::UnboundedSender<ToolOutput>>,
    last: Option<Instant>,
    pending: usize,
}

impl<'a> Progress<'a> {
    fn new(tx: Option<&'a mpsc::UnboundedSender<ToolOutput>>) -> Self {
        Progress {
            tx,
            last: None,
            pending: 0,
        }
    }

    fn flush_at(&self) -> Instant {
        self.last
            .map_or_else(Instant::now, |t| t + PROGRESS_INTERVAL)
    }

    fn on_data(&mut self, n: usize, out: &Output) {
        if self.tx.is_none() {
            return;
        }
        self.pending += n;
        if self.pending >= PROGRESS_BYTES || Instant::now() >= self.flush_at() {
            self.send(out);
        }
    }

    fn send(&mut self, out: &Output) {
        self.pending = 0;
        self.last = Some(Instant::now());
        if let Some(tx) = self.tx {
            let capped = out.tail();
            // A closed receiver only means nobody watches progress any more.
            let _ = tx.send(ToolOutput::ok(capped.text));
        }
    }
}

/// The command's output: a bounded in-memory tail plus, once over the caps, a file with all of it.
#[derive(Default)]
struct Output {
    tail: Vec<u8>,
    total_bytes: usize,
    newlines: usize,
    last_byte: Option<u8>,
    temp_dir: PathBuf,
    spill: Option<(std::fs::File, PathBuf)>,
    spill_error: Option<String>,
}

impl Output {
    fn new(temp_dir: &Path) -> Self {
        Output {
            temp_dir: temp_dir.to_path_buf(),
            ..Output::default()
        }
    }

    fn total_lines(&self) -> usize {
        match self.last_byte {
            Some(b'\n') | None => self.newlines,
            Some(_) => self.newlines + 1,
        }
    }

    fn over_caps(&self) -> bool {
        self.total_bytes > MAX_BYTES || self.total_lines() > MAX_LINES
    }

    fn push(&mut self, chunk: &[u8]) {
        if chunk.is_empty() {
            return;
        }
        self.total_bytes += chunk.len();
        self.newlines += chunk.iter().filter(|&&b| b == b'\n').count();
        self.last_byte = chunk.last().copied();
        if let Some((file, _)) = &mut self.spill {
            if let Err(e) = file.write_all(chunk) {
                self.spill_error = Some(e.to_string());
                self.spill = None;
            }
        }
        self.tail.extend_from_slice(chunk);
        if self.spill.is_none() && self.spill_error.is_none() && self.over_caps() {
            self.start_spill();
        }
        if self.tail.len() > KEEP_BYTES && (self.spill.is_some() || self.spill_error.is_some()) {
            let cut = self.tail.len() - KEEP_BYTES;
            self.tail.drain(..cut);
        }
    }

    /// Creates the full-output file and writes everything so far (all of it is still in `tail`).
    fn start_spill(&mut self) {
        let made = std::fs::create_dir_all(&self.temp_dir).and_then(|()| {
            let f = tempfile::Builder::new()
                .prefix("keel-bash-")
                .suffix(".log")
                .tempfile_in(&self.temp_dir)?;
            let (mut file, path) = f.keep().map_err(|e| e.error)?;
            file.write_all(&self.tail)?;
            Ok((file, path))
        });
        match made {
            Ok(spill) => self.spill = Some(spill),
            Err(e) => self.spill_error = Some(e.to_string()),
        }
    }

    fn full_path(&self) -> Option<&Path> {
        self.spill.as_ref().map(|(_, p)| p.as_path())
    }

    /// The last lines within the caps, as safe text.
    fn tail(&self) -> text::Capped {
        let mut capped = text::cap_tail(&text::to_text(&self.tail), MAX_BYTES, MAX_LINES);
        capped.total_lines = self.total_lines();
        capped
    }
}

fn render(outcome: Outcome, out: &Output, timeout: Duration) -> ToolOutput {
    let capped = out.tail();
    let truncated = out.over_caps();
    let mut text = if capped.text.is_empty() {
        "(no output)".to_string()
    } else {
        capped.text.clone()
    };
    if truncated {
        append_section(
            &mut text,
            &text::tail_notice(&capped, MAX_BYTES, out.full_path()),
        );
    }
    let (exit_code, status_line) = match &outcome {
        Outcome::Exited(s) => match (s.code(), s.signal()) {
            (Some(0), _) => (Some(0), None),
            (Some(c), _) => (Some(c), Some(format!("Command exited with code {c}"))),
            (None, sig) => (
                None,
                Some(format!("Command killed by signal {}", sig.unwrap_or(0))),
            ),
        },
        Outcome::TimedOut => (
            None,
            Some(format!("Command timed out after {}s", timeout.as_secs())),
        ),
        Outcome::Aborted => (None, Some("Command aborted".to_string())),
        Outcome::Failed(msg) => (None, Some(msg.clone())),
    };
    if let Some(line) = &status_line {
        append_section(&mut text, line);
    }
    let mut details = json!({
        "exitCode": exit_code,
        "cancelled": matches!(outcome, Outcome::Aborted),
        "timedOut": matches!(outcome, Outcome::TimedOut),
        "truncated": truncated,
    });
    if let (Some(p), Some(map)) = (out.full_path(), details.as_object_mut()) {
        map.insert("fullOutputPath".into(), json!(p.display().to_string()));
    }
    let result = if status_line.is_some() {
        ToolOutput::error(text)
    } else {
        ToolOutput::ok(text)
    };
    result.with_details(details)
}

/// Appends a blank line and `section`, dropping the output's own trailing newlines first.
fn append_section(text: &mut String, section: &str) {
    let kept = text.trim_end_matches('\n').len();
    text.truncate(kept);
    text.push_str("\n\n");
    text.push_str(section);
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::kernel::abort::{AbortController, AbortSignal};

    fn ctx(
        dir: &Path,
        abort: AbortSignal,
        progress: Option<mpsc::UnboundedSender<ToolOutput>>,
    ) -> ToolContext {
        ToolContext {
            cwd: dir.to_path_buf(),
            abort,
            progress,
            bash_timeout: Duration::from_secs(20),
            temp_dir: dir.join("tmp"),
        }
    }

    async fn sh(dir: &Path, command: &str) -> ToolOutput {
        let c = ctx(dir, AbortSignal::never(), None);
        run(&json!({"command": command}), &c).await
    }

    /// Dead or zombie (a zombie's parent may never reap it in a container).
    fn gone(pid: i32) -> bool {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => true,
            Ok(stat) => matches!(
                stat.rsplit(')').next().unwrap().trim_start().chars().next(),
                Some('Z' | 'X')
            ),
        }
    }

    #[tokio::test]
    async fn exit_code_and_merged_stderr() {
        let d = tempfile::tempdir().unwrap();
        let out = sh(d.path(), "echo out; echo err 1>&2; exit 3").await;
        assert!(out.is_error);
        let text = out.text();
        assert!(text.contains("out") && text.contains("err"), "{text}");
        assert!(text.ends_with("\n\nCommand exited with code 3"), "{text}");
        assert_eq!(out.details.unwrap()["exitCode"], 3);
        let out = sh(d.path(), "printf hi; pwd >/dev/null").await;
        assert!(!out.is_error);
        assert_eq!(out.text(), "hi");
        assert_eq!(sh(d.path(), "true").await.text(), "(no output)");
        let out = sh(d.path(), "printf 'a\\377b\\n'").await;
        assert_eq!(out.text(), "a\u{fffd}b\n", "invalid UTF-8 is made safe");
        let out = run(&json!({}), &ctx(d.path(), AbortSignal::never(), None)).await;
        assert!(out.is_error && out.text().contains("`command`"));
    }

    #[tokio::test]
    async fn streams_accumulated_output_as_progress() {
        let d = tempfile::tempdir().unwrap();
        let (tx, mut rx) = mpsc::unbounded_channel();
        let c = ctx(d.path(), AbortSignal::never(), Some(tx));
        let args = json!({"command": "echo first; sleep 0.2; echo second"});
        let out = run(&args, &c).await;
        assert_eq!(out.text(), "first\nsecond\n");
        drop(c);
        let mut seen = Vec::new();
        while let Some(p) = rx.recv().await {
            seen.push(p.text());
        }
        assert_eq!(seen.first().map(String::as_str), Some("first\n"));
        assert_eq!(seen.last().map(String::as_str), Some("first\nsecond\n"));
    }

    #[tokio::test]
    async fn timeout_kills_and_reports() {
        let d = tempfile::tempdir().unwrap();
        let started = std::time::Instant::now();
        let args = json!({"command": "echo before; sleep 30", "timeout": 1});
        let out = run(&args, &ctx(d.path(), AbortSignal::never(), None)).await;
        assert!(started.elapsed() < Duration::from_secs(10));
        assert!(out.is_error);
        assert_eq!(out.text(), "before\n\nCommand timed out after 1s");
        let det = out.details.unwrap();
        assert_eq!(det["timedOut"], true);
        assert_eq!(det["exitCode"], Value::Null);
    }

    #[tokio::test]
    async fn abort_kills_the_whole_group() {
        let d = tempfile::tempdir().unwrap();
        let (ctl, signal) = AbortController::new();
        let (tx, mut rx) = mpsc::unbounded_channel();
        let c = ctx(d.path(), signal, Some(tx));
        let args =
            json!({"command": "echo $$ > pids; sleep 30 & echo $! >> pids; echo start; wait"});
        let task = tokio::spawn(async move { run(&args, &c).await });
        let first = rx.recv().await.unwrap();
        assert_eq!(first.text(), "start\n");
        ctl.abort();
        let out = tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .unwrap()
            .unwrap();
        assert!(out.is_error);
        assert!(out.text().ends_with("Command aborted"));
        assert_eq!(out.details.unwrap()["cancelled"], true);
        let pids = std::fs::read_to_string(d.path().join("pids")).unwrap();
        let pids: Vec<i32> = pids.lines().map(|l| l.trim().parse().unwrap()).collect();
        assert_eq!(pids.len(), 2);
        // SIGKILL delivery is asynchronous: allow the kernel a moment to finish the exit.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !pids.iter().all(|&p| gone(p)) && std::time::Instant::now() < deadline {
            tokio::task::yield_now().await;
        }
        assert!(pids.iter().all(|&p| gone(p)), "survivors among {pids:?}");
    }

    #[tokio::test]
    async fn background_child_does_not_hang_the_tool() {
        let d = tempfile::tempdir().unwrap();
        let started = std::time::Instant::now();
        let out = sh(d.path(), "sleep 30 & echo $! > bg; echo done").await;
        assert!(started.elapsed() < Duration::from_secs(10));
        assert_eq!(out.text(), "done\n");
        let pid = std::fs::read_to_string(d.path().join("bg")).unwrap();
        let _ = nix::sys::signal::kill(Pid::from_raw(pid.trim().parse().unwrap()), Signal::SIGKILL);
    }

    #[tokio::test]
    async fn capped_output_keeps_tail_and_full_file() {
        let d = tempfile::tempdir().unwrap();
        let out = sh(d.path(), "seq 1 5000").await;
        assert!(!out.is_error);
        let det = out.details.clone().unwrap();
        assert_eq!(det["truncated"], true);
        let full = PathBuf::from(det["fullOutputPath"].as_str().unwrap());
        assert!(full.starts_with(d.path().join("tmp")));
        let expected: String = (1..=5000).map(|i| format!("{i}\n")).collect();
        assert_eq!(std::fs::read_to_string(&full).unwrap(), expected);
        let text = out.text();
        assert!(text.starts_with("3001\n3002\n"), "{}", &text[..20]);
        let notice = format!(
            "5000\n\n[Showing lines 3001-5000 of 5000. Full output: {}]",
            full.display()
        );
        assert!(text.ends_with(&notice), "{}", &text[text.len() - 120..]);
    }
}
