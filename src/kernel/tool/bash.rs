//! `bash`: runs one shell command in its own process group (started by [`bash_proc`]: here, or
//! in the session's sandbox zygote), streaming its merged stdout/stderr as throttled progress.
//! Owns the child's lifetime: it must never print, never leave an aborted or timed-out process
//! group alive, never hang on a background child holding the pipe, and never hand a tool
//! process the provider credentials `ToolEnv` scrubs. Background children outlive the call;
//! `ToolEnv` (or the zygote's end) kills their group when the session ends.

use std::borrow::Cow;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::args::Field;
use super::bash_output::{Output, Progress, Stream};
use super::bash_proc::{self, Proc};
pub use super::bash_proc::{private_tmp, private_tmp_path, warm};
use super::details::BashDetails;
use super::text::{self, MAX_BYTES};
use super::{Files, ToolContext, ToolEnv, ToolOutput, ToolSpec};
use crate::kernel::abort::AbortSignal;
use crate::kernel::message::Message;
use crate::kernel::sandbox::{Mechanism, Sandbox, Violation};

/// After the main process exits, stop reading after this long without data...
const DRAIN_IDLE: Duration = Duration::from_millis(100);
/// ...or after this long in total.
const DRAIN_MAX: Duration = Duration::from_secs(1);
const READ_CHUNK: usize = 8 * 1024;

pub(super) fn spec() -> ToolSpec {
    ToolSpec {
        name: Cow::Borrowed("bash"),
        description: Cow::Borrowed(
            "Execute a bash command in the current working directory. Returns stdout \
                      and stderr merged. Output is truncated to the last 2000 lines or 50KB; \
                      the full output is then saved to a file. Optional timeout in seconds.",
        ),
        parameters: json!({
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "Bash command to execute"},
                "timeout": {"type": "integer", "minimum": 1, "description": "Timeout in seconds"},
                "run_in_background": {"type": "boolean", "description": "Run the command as a background job and return at once with its id (for servers, watchers, long builds); read its output with bash_output, stop it with bash_kill"},
                "escalate": {"type": "boolean", "description": "Run this command outside the sandbox (only after the user approves; give a justification). Use only when the sandbox stopped a command that must run"},
                "justification": {"type": "string", "description": "With escalate: why the command must run outside the sandbox (shown to the user)"}
            },
            "required": ["command"]
        }),
    }
}

/// A `bash` call's request to run outside the sandbox (`escalate: true`, `justification`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct Escalation {
    #[serde(default)]
    pub command: String,
    #[serde(default)]
    pub escalate: bool,
    #[serde(default)]
    pub justification: Option<String>,
}

impl Escalation {
    /// The request `args` make, if they ask to leave the sandbox.
    pub fn of(args: &Value) -> Option<Escalation> {
        serde_json::from_value::<Escalation>(args.clone())
            .ok()
            .filter(|e| e.escalate)
    }
}

/// How the run ended.
enum Outcome {
    Exited(ExitStatus),
    TimedOut,
    /// It reached its timeout and runs on as a background job.
    Backgrounded(Box<crate::kernel::jobs::JobInfo>),
    Aborted,
    Failed(String),
}

/// `bash`'s arguments, read once; each is checked where it is used (`escalate` and
/// `justification` are the approval's: [`Escalation`]).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct BashArgs {
    command: Field<String>,
    timeout: Field<u64>,
    run_in_background: Field<bool>,
}

pub(super) async fn run(args: &Value, ctx: &ToolContext) -> ToolOutput {
    let args: BashArgs = super::args::read(args);
    let command = match args.command.required("command") {
        Ok(c) => c,
        Err(e) => return e,
    };
    let command = command.as_str();
    match args.run_in_background.optional("run_in_background") {
        Ok(Some(true)) => return super::background::start(command, ctx).await,
        Ok(_) => {}
        Err(e) => return e,
    }
    let timeout = match args.timeout.optional("timeout") {
        Ok(Some(0)) => return ToolOutput::error("invalid arguments: `timeout` must be at least 1"),
        Ok(Some(secs)) => Duration::from_secs(secs),
        Ok(None) => ctx.bash_timeout,
        Err(e) => return e,
    };
    let mut out = Output::new(&ctx.temp_dir, &ctx.env);
    if ctx.abort.is_aborted() {
        return render(Outcome::Aborted, &out, timeout, None);
    }
    let run = sourcing_env_file(command, ctx);
    let started = tokio::select! {
        biased;
        _ = ctx.abort.aborted() => return render(Outcome::Aborted, &out, timeout, None),
        started = bash_proc::start(&run, ctx) => started,
    };
    let mut child = match started {
        Ok(c) => c,
        Err(e) => return ToolOutput::error(e),
    };
    // What the session's limits refused so far: a call is told what they refused during it.
    let limited = ctx.sandbox.limit_events();
    let keep = super::background::keeps_on_timeout(command, ctx);
    let (outcome, kept) = supervise(&mut child, &mut out, timeout, ctx, None, keep).await;
    // A command that ran into the session's limits (a fork bomb, a leak) is ended at its
    // timeout: kept, it would hold the processes or memory every later call needs.
    let starved = kept.is_some()
        && !ctx
            .sandbox
            .limit_notes(limited, &out.tail().text, true)
            .is_empty();
    let (outcome, not_kept) = match kept {
        Some(_) if starved => {
            child.kill_group().await;
            let why = "It reached a limit of the session, so it was ended, not kept in the \
                       background.";
            (outcome, Some(why.to_string()))
        }
        Some(rx) => match super::background::keep(command, child, rx, &out, ctx).await {
            Ok(info) => (Outcome::Backgrounded(Box::new(info)), None),
            Err(why) => (outcome, Some(why)),
        },
        None => (outcome, None),
    };
    let violation = match &outcome {
        Outcome::Exited(s) if !s.success() => ctx.sandbox.explain(&out.tail().text, &ctx.cwd),
        _ => None,
    };
    // What the network allowlist's proxy refused during the call, said as the rest is.
    let refused: Vec<_> = ctx
        .sandbox
        .take_net_violations()
        .iter()
        .map(Violation::network)
        .collect();
    let violations: Vec<_> = violation.into_iter().chain(refused).collect();
    let mut notes: Vec<String> = violations.iter().map(|v| ctx.sandbox.note(v)).collect();
    notes.extend(not_kept);
    let failed = match &outcome {
        Outcome::Exited(s) => !s.success(),
        Outcome::Backgrounded(_) => false,
        _ => true,
    };
    notes.extend(ctx.sandbox.limit_notes(limited, &out.tail().text, failed));
    if let Some(tx) = &ctx.violations {
        for v in violations {
            let _ = tx.send(v);
        }
    }
    let note = (!notes.is_empty()).then(|| notes.join("\n"));
    render(outcome, &out, timeout, note)
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
        #[derive(Default, Deserialize)]
        #[serde(default)]
        struct Role {
            role: Field<String>,
        }
        let Role { role } = super::args::read(v);
        if role.given().as_deref() != Some("bashExecution") {
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

/// Runs a command the user typed (RPC `bash`, the TUI's `!cmd`) with the same environment,
/// spill directory and background-child handling as the tool: raw output chunks go to
/// `chunks` as they arrive; `abort` kills the process group.
pub async fn run_user(
    command: &str,
    cwd: &Path,
    temp_dir: &Path,
    env: &ToolEnv,
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
        env: env.clone(),
        files: Files::default(),
        // The user's own command: not the model's, so not sandboxed.
        sandbox: std::sync::Arc::new(Sandbox::off(cwd)),
        violations: None,
        rules: Default::default(),
        watched: Default::default(),
    };
    let mut out = Output::new(temp_dir, env);
    let outcome = if ctx.abort.is_aborted() {
        Outcome::Aborted
    } else {
        match bash_proc::spawn_local(command, cwd, env, None) {
            Ok(mut child) => {
                supervise(&mut child, &mut out, timeout, &ctx, Some(&chunks), false)
                    .await
                    .0
            }
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
        Outcome::TimedOut | Outcome::Failed(_) | Outcome::Backgrounded(_) => (None, false),
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

/// What the readers of a call that reached its timeout go on forwarding.
pub(super) type Chunks = mpsc::Receiver<(Stream, Vec<u8>)>;

/// Waits for exit, abort or timeout while collecting output; always leaves the child reaped,
/// except with `keep` when it reached its timeout: then it runs on, and its readers' channel
/// is handed back to make it a job.
async fn supervise(
    child: &mut Proc,
    out: &mut Output,
    timeout: Duration,
    ctx: &ToolContext,
    chunks: Option<&mpsc::UnboundedSender<Vec<u8>>>,
    keep: bool,
) -> (Outcome, Option<Chunks>) {
    let (tx, mut rx) = mpsc::channel::<(Stream, Vec<u8>)>(64);
    spawn_readers(child, tx);
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
                Some((from, c)) => {
                    out.push_from(from, &c);
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
    match outcome {
        Outcome::TimedOut if keep => {
            if progress.pending > 0 {
                progress.send(out);
            }
            return (outcome, Some(rx));
        }
        Outcome::Aborted | Outcome::TimedOut => child.kill_group().await,
        // Nothing of a call outlives it (issue 43 point 14).
        Outcome::Exited(_) | Outcome::Failed(_) | Outcome::Backgrounded(_) => child.end_leftovers(),
    }
    if !eof {
        drain(&mut rx, out, &mut progress, chunks).await;
    }
    // The readers stay: if a process that left the call's group (unsandboxed) still holds the
    // pipe, they go on reading (and dropping) what it writes, so it is not killed by SIGPIPE.
    if progress.pending > 0 {
        progress.send(out);
    }
    (outcome, None)
}

/// Reads what is still buffered after the main process ended: until EOF, `DRAIN_IDLE` without
/// data, or `DRAIN_MAX` in total (a background child may keep the pipe open forever).
async fn drain(
    rx: &mut mpsc::Receiver<(Stream, Vec<u8>)>,
    out: &mut Output,
    progress: &mut Progress<'_>,
    chunks: Option<&mpsc::UnboundedSender<Vec<u8>>>,
) {
    let hard_stop = Instant::now() + DRAIN_MAX;
    loop {
        let idle_stop = (Instant::now() + DRAIN_IDLE).min(hard_stop);
        match tokio::time::timeout_at(idle_stop, rx.recv()).await {
            Ok(Some((from, chunk))) => {
                out.push_from(from, &chunk);
                progress.on_data(chunk.len(), out);
                if let Some(tx) = chunks {
                    let _ = tx.send(chunk);
                }
            }
            Ok(None) | Err(_) => return,
        }
    }
}

fn spawn_readers(child: &mut Proc, tx: mpsc::Sender<(Stream, Vec<u8>)>) {
    let [stdout, stderr] = child.take_outputs();
    for (from, pipe) in [(Stream::Stdout, stdout), (Stream::Stderr, stderr)] {
        if let Some(pipe) = pipe {
            tokio::spawn(pump(pipe, from, tx.clone()));
        }
    }
}

/// Forwards what `reader` yields until EOF; once nobody receives any more, reads on and drops
/// it (until the last writer closes the pipe, at the latest when the session kills its group).
async fn pump<R: AsyncRead + Unpin>(
    mut reader: R,
    from: Stream,
    tx: mpsc::Sender<(Stream, Vec<u8>)>,
) {
    let mut buf = vec![0u8; READ_CHUNK];
    let mut forwarding = true;
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) if forwarding => forwarding = tx.send((from, buf[..n].to_vec())).await.is_ok(),
            Ok(_) => {}
        }
    }
}

/// The name of the session's env file in its private `/tmp` (see [`env_file`]).
const ENV_FILE: &str = "claude-env.sh";

/// The session's env file (`CLAUDE_ENV_FILE`, as Claude Code names it) on this host: in the
/// session's private directory that is the sandbox's `/tmp`, so that a sandboxed `bash`
/// can read it and a sandboxed `SessionStart` hook can write it. What `SessionStart` hooks
/// write there (`export A=b`, `source .venv/bin/activate`) every later `bash` call of the
/// session runs first. Removed with that directory when the session ends.
pub fn env_file(env: &ToolEnv, temp_dir: &Path) -> PathBuf {
    private_tmp_path(env, temp_dir).join(ENV_FILE)
}

/// The env file at `host` as a process in `sandbox` sees it: bubblewrap shows the session's
/// private directory as `/tmp`; Landlock and no sandbox show it where it is.
pub fn env_file_inside(sandbox: Option<&Sandbox>, host: &Path) -> PathBuf {
    match sandbox.map(|s| &s.mechanism) {
        Some(Mechanism::Bwrap(_)) => Path::new("/tmp").join(ENV_FILE),
        _ => host.to_path_buf(),
    }
}

/// `command`, run after the session's env file when a `SessionStart` hook wrote one (as
/// Claude Code sources it before each Bash command); as is otherwise.
pub(crate) fn sourcing_env_file(command: &str, ctx: &ToolContext) -> String {
    let host = env_file(&ctx.env, &ctx.temp_dir);
    let written = std::fs::metadata(&host).is_ok_and(|m| m.is_file() && m.len() > 0);
    if !written {
        return command.to_string();
    }
    let sandboxed = !matches!(
        ctx.sandbox.mechanism,
        Mechanism::Off | Mechanism::Unenforced
    );
    let inside = env_file_inside(sandboxed.then_some(&*ctx.sandbox), &host);
    let quoted = inside.to_string_lossy().replace('\'', r"'\''");
    format!(". '{quoted}'\n{command}")
}

fn render(outcome: Outcome, out: &Output, timeout: Duration, note: Option<String>) -> ToolOutput {
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
            &text::tail_notice(&capped, MAX_BYTES, out.full_output()),
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
        Outcome::Backgrounded(_) => (None, None),
    };
    if let Some(line) = &status_line {
        append_section(&mut text, line);
    }
    let job = match &outcome {
        Outcome::Backgrounded(info) => Some((**info).clone()),
        _ => None,
    };
    if let Some(info) = &job {
        append_section(&mut text, &super::background::kept_line(timeout, info));
    }
    if let Some(note) = &note {
        text.push('\n');
        text.push_str(note);
    }
    let details = BashDetails {
        exit_code,
        cancelled: matches!(outcome, Outcome::Aborted),
        timed_out: matches!(outcome, Outcome::TimedOut),
        truncated,
        full_output_path: out.full_path().map(|p| p.display().to_string()),
        full_output_truncated: out.full_path().is_some() && out.spill_capped(),
        job,
    };
    let result = if status_line.is_some() {
        ToolOutput::error(text)
    } else {
        ToolOutput::ok(text)
    };
    result
        .with_details(json!(details))
        .with_streams(out.streams())
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
    use super::super::bash_output::MAX_SPILL_BYTES;
    use super::*;
    use crate::kernel::abort::{AbortController, AbortSignal};
    use nix::sys::signal::Signal;
    use nix::unistd::Pid;
    use std::path::PathBuf;

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
            env: ToolEnv::default(),
            files: Default::default(),
            sandbox: std::sync::Arc::new(Sandbox::off(dir)),
            violations: None,
            rules: Default::default(),
            watched: Default::default(),
        }
    }

    /// Runs `command`; the context (and with it the session's spill dir and background
    /// groups) is dropped on return.
    async fn sh(dir: &Path, command: &str) -> ToolOutput {
        let c = ctx(dir, AbortSignal::never(), None);
        run(&json!({"command": command}), &c).await
    }

    async fn wait_for(what: impl Fn() -> bool) -> bool {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !what() && std::time::Instant::now() < deadline {
            tokio::task::yield_now().await;
        }
        what()
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

    /// Hooks read stdout and stderr apart (Claude's `tool_response`); the model reads them
    /// merged. Before: only the merged text was kept.
    #[tokio::test]
    async fn stdout_and_stderr_are_kept_apart_for_hooks() {
        let d = tempfile::tempdir().unwrap();
        let out = sh(d.path(), "echo out; echo err 1>&2; echo more").await;
        let streams = out.streams().unwrap();
        assert_eq!(streams.stdout, "out\nmore\n");
        assert_eq!(streams.stderr, "err\n");
        assert!(out.text().contains("err"), "{}", out.text());
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
        let c = ctx(d.path(), AbortSignal::never(), None);
        let out = run(&json!({"command": "seq 1 5000"}), &c).await;
        assert!(!out.is_error);
        let det = out.details.clone().unwrap();
        assert_eq!(det["truncated"], true);
        assert_eq!(det.get("fullOutputTruncated"), None);
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

    /// The full-output file used to grow without bound; now it keeps the first 32 MiB.
    #[tokio::test]
    async fn full_output_file_is_capped() {
        let d = tempfile::tempdir().unwrap();
        let c = ctx(d.path(), AbortSignal::never(), None);
        let total = MAX_SPILL_BYTES + 1024 * 1024;
        let args = json!({"command": format!("yes | head -c {total}")});
        let out = run(&args, &c).await;
        let det = out.details.clone().unwrap();
        assert_eq!(det["fullOutputTruncated"], true);
        let full = PathBuf::from(det["fullOutputPath"].as_str().unwrap());
        assert_eq!(
            std::fs::metadata(&full).unwrap().len(),
            MAX_SPILL_BYTES as u64
        );
        let notice = format!("Full output (its first 32.0MB only): {}]", full.display());
        assert!(out.text().ends_with(&notice), "{}", out.text().len());
        drop(c);
        assert!(!full.exists(), "removed with the session's env");
    }

    /// Nothing of a call outlives it (issue 43 point 14): a background child in its process
    /// group is killed as the call returns (it used to run on until the session ended).
    #[tokio::test]
    async fn background_children_end_with_the_call() {
        let d = tempfile::tempdir().unwrap();
        let c = ctx(d.path(), AbortSignal::never(), None);
        let cmd = "(exec sleep 1000) & echo $! > bg; echo done";
        let out = run(&json!({"command": cmd}), &c).await;
        assert_eq!(out.text(), "done\n");
        let pid: i32 = std::fs::read_to_string(d.path().join("bg"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(wait_for(|| gone(pid)).await, "{pid} outlived its call");
    }

    #[tokio::test]
    async fn scrubbed_variables_do_not_reach_the_command() {
        let d = tempfile::tempdir().unwrap();
        let mut c = ctx(d.path(), AbortSignal::never(), None);
        c.env = ToolEnv::new(vec!["HOME".into()]);
        let out = run(&json!({"command": "echo \"${HOME-unset}\""}), &c).await;
        assert_eq!(out.text(), "unset\n");
    }
}
