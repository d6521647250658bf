//! The model's tools over the session's background jobs (DESIGN §19), in Claude Code's
//! shapes: `bash` with `run_in_background: true` starts one ([`start`]), `bash_output` reads
//! what it wrote since the model last looked (or from a byte offset), `bash_kill` ends its
//! whole tree. Hooks see them as Claude's `Bash`, `TaskOutput` and `TaskStop`. The table
//! itself is [`crate::kernel::jobs`], one per session (held by [`super::ToolEnv`]); this
//! module only turns its answers into what the model reads, and the notice of the jobs that
//! ended ([`ended_notice`]).

use std::borrow::Cow;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{json, Value};

use super::args::Field;
use super::text::{self, MAX_BYTES, MAX_LINES};
use super::{ToolContext, ToolOutput, ToolSpec};
use crate::kernel::jobs::{Adopted, JobError, JobId, JobInfo, JobLimits, JobState, Jobs, StartJob};

/// The longest a `bash_output` call waits for output (`wait`).
pub const MAX_WAIT: Duration = Duration::from_secs(300);
/// How many of a job's last lines an ended job's notice quotes.
const NOTICE_LINES: usize = 20;
/// ... within this many bytes.
const NOTICE_BYTES: usize = 2048;

pub(super) fn output_spec() -> ToolSpec {
    ToolSpec {
        name: Cow::Borrowed("bash_output"),
        description: Cow::Borrowed(
            "Read the output of a background job started with bash's run_in_background: what it \
             wrote since you last read it (or from byte `since`), and whether it is still \
             running or how it ended. With `wait`, waits up to that many seconds for new output \
             or the job's end first.",
        ),
        parameters: json!({
            "type": "object",
            "properties": {
                "id": {"type": "string", "description": "The job's id"},
                "since": {"type": "integer", "minimum": 0, "description": "Read from this byte of its output (default: where you last stopped)"},
                "wait": {"type": "integer", "minimum": 0, "maximum": MAX_WAIT.as_secs(), "description": "Seconds to wait for new output or the job's end"}
            },
            "required": ["id"]
        }),
    }
}

pub(super) fn kill_spec() -> ToolSpec {
    ToolSpec {
        name: Cow::Borrowed("bash_kill"),
        description: Cow::Borrowed(
            "Stop a background job and everything it started (TERM, then KILL after a grace \
             period).",
        ),
        parameters: json!({
            "type": "object",
            "properties": {"id": {"type": "string", "description": "The job's id"}},
            "required": ["id"]
        }),
    }
}

/// The session's job table, or the error the model reads.
pub(crate) fn table(ctx: &ToolContext) -> Result<Jobs, ToolOutput> {
    ctx.env
        .jobs(&ctx.temp_dir)
        .map_err(|e| ToolOutput::error(format!("Failed to prepare background jobs: {e}")))
}

/// `bash` with `run_in_background: true`: starts `command` as a job and returns at once.
pub(super) async fn start(command: &str, ctx: &ToolContext) -> ToolOutput {
    let jobs = match table(ctx) {
        Ok(j) => j,
        Err(e) => return e,
    };
    let req = StartJob {
        command: command.to_string(),
        cwd: ctx.cwd.clone(),
        tty: false,
        size: None,
    };
    match guarded_start(&jobs, req, ctx).await {
        Ok(info) => ToolOutput::ok(format!(
            "Command running in background with ID: {id}. Read its output with bash_output \
             (id \"{id}\"), stop it with bash_kill. You will be told when it ends.",
            id = info.id
        ))
        .with_details(json!({"job": info})),
        Err(e) => ToolOutput::error(e.to_string()),
    }
}

/// Starts `req` as a job under the check `bash` calls get (`sandbox::watch`): what the
/// protected paths hold is recorded before it starts, and what the job changed there is undone
/// when it ends (its notice says so). While it runs, the sandbox's walls hold what they hold
/// for any command (under bubblewrap the protected paths that existed are read-only).
pub(crate) async fn guarded_start(
    jobs: &Jobs,
    req: StartJob,
    ctx: &ToolContext,
) -> Result<JobInfo, JobError> {
    let record = crate::kernel::sandbox::watch::record(&ctx.sandbox.policy).await;
    jobs.start_watched(req, ctx, record).await
}

/// A job id as the model sends it: `"3"`, `3`, or Claude's `"bash_3"`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct IdArgs {
    id: Option<Value>,
    /// Claude's names for it (`TaskOutput`/`TaskStop`'s `task_id`, `BashOutput`'s `bash_id`).
    task_id: Option<Value>,
    bash_id: Option<Value>,
    shell_id: Option<Value>,
}

fn job_id(args: &Value) -> Result<JobId, ToolOutput> {
    let a: IdArgs = serde_json::from_value(args.clone()).unwrap_or_default();
    let Some(v) = a.id.or(a.task_id).or(a.bash_id).or(a.shell_id) else {
        return Err(ToolOutput::error(
            "invalid arguments: missing required field `id`",
        ));
    };
    let parsed = match &v {
        Value::Number(n) => n.as_u64().and_then(|n| u32::try_from(n).ok()),
        Value::String(s) => s
            .trim()
            .trim_start_matches(|c: char| !c.is_ascii_digit())
            .parse()
            .ok(),
        _ => None,
    };
    parsed
        .map(JobId)
        .ok_or_else(|| ToolOutput::error(format!("invalid arguments: `id` {v} is not a job id")))
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct OutputArgs {
    since: Field<u64>,
    wait: Field<u64>,
}

/// `bash_output`.
pub(super) async fn output(args: &Value, ctx: &ToolContext) -> ToolOutput {
    let id = match job_id(args) {
        Ok(id) => id,
        Err(e) => return e,
    };
    let a: OutputArgs = super::args::read(args);
    let (since, wait) = match (a.since.optional("since"), a.wait.optional("wait")) {
        (Ok(s), Ok(w)) => (s, w),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    let Some(jobs) = ctx.env.started_jobs() else {
        return ToolOutput::error(JobError::Unknown(id).to_string());
    };
    let since = since.unwrap_or_else(|| ctx.env.read_to(id));
    if let Some(secs) = wait.filter(|s| *s > 0) {
        let until = Instant::now() + Duration::from_secs(secs).min(MAX_WAIT);
        tokio::select! {
            biased;
            _ = ctx.abort.aborted() => return ToolOutput::error("Aborted while waiting for the job"),
            waited = jobs.wait(id, since, until) => if let Err(e) = waited {
                return ToolOutput::error(e.to_string());
            },
        }
    }
    read_out(&jobs, id, since, ctx)
}

/// What job `id` wrote from `since` on, and where it is, as the model reads it.
fn read_out(jobs: &Jobs, id: JobId, since: u64, ctx: &ToolContext) -> ToolOutput {
    let (info, chunk) = match jobs
        .info(id)
        .and_then(|i| Ok((i, jobs.read(id, since, usize::MAX)?)))
    {
        Ok(r) => r,
        Err(e) => return ToolOutput::error(e.to_string()),
    };
    ctx.env.set_read_to(id, chunk.next);
    let mut text = status_line(&info);
    text.push('\n');
    if chunk.dropped > 0 {
        text.push_str(&format!(
            "[{} earlier bytes are no longer held; the job's log has them: {}]\n",
            chunk.dropped,
            jobs.log_path(id).display()
        ));
    }
    let body = text::to_text(&chunk.bytes);
    if body.is_empty() {
        text.push_str("(no new output)");
    } else {
        let capped = text::cap_tail(&body, MAX_BYTES, MAX_LINES);
        if capped.truncated() {
            text.push_str(&format!(
                "[Showing its last lines only; the job's log has all of it: {}]\n",
                jobs.log_path(id).display()
            ));
        }
        text.push_str(&capped.text);
    }
    ToolOutput::ok(text).with_details(json!({
        "job": info,
        "from": chunk.from,
        "next": chunk.next,
        "dropped": chunk.dropped,
    }))
}

/// `bash_kill`.
pub(super) async fn kill(args: &Value, ctx: &ToolContext) -> ToolOutput {
    let id = match job_id(args) {
        Ok(id) => id,
        Err(e) => return e,
    };
    let Some(jobs) = ctx.env.started_jobs() else {
        return ToolOutput::error(JobError::Unknown(id).to_string());
    };
    match jobs.kill(id).await {
        Ok(info) => ToolOutput::ok(status_line(&info)).with_details(json!({"job": info})),
        Err(e) => ToolOutput::error(e.to_string()),
    }
}

/// "Job 3 (`npm run dev`) is running." and the like.
pub fn status_line(info: &JobInfo) -> String {
    let what = format!("Job {} (`{}`)", info.id, first_line(&info.command));
    match info.state {
        JobState::Running => format!("{what} is running."),
        JobState::Exited => match (info.exit_code, info.signal) {
            (Some(code), _) => format!("{what} exited with code {code}."),
            (None, Some(sig)) => format!("{what} was ended by signal {sig}."),
            (None, None) => format!("{what} exited."),
        },
        JobState::Killed => format!("{what} was killed."),
        JobState::Lost => format!("{what} was lost: keel stopped while it ran."),
    }
}

fn first_line(command: &str) -> Cow<'_, str> {
    match command.lines().count() {
        0 | 1 => Cow::Borrowed(command.trim()),
        _ => Cow::Owned(format!("{} …", command.lines().next().unwrap_or("").trim())),
    }
}

/// What the model is told of the jobs of `env`'s session that ended since it last heard
/// (before its next request): each one's end and last lines. `None` when none ended (or the
/// model read each one's end in a tool's result already).
pub fn ended_notice(env: &super::ToolEnv) -> Option<String> {
    let jobs = env.started_jobs()?;
    let ended: Vec<JobInfo> = jobs
        .take_ended()
        .into_iter()
        .filter(|j| !env.was_told(j.id))
        .collect();
    if ended.is_empty() {
        return None;
    }
    let mut out = String::from("Background jobs ended:");
    for info in &ended {
        out.push_str("\n\n");
        out.push_str(&status_line(info));
        let from = info.bytes.saturating_sub(NOTICE_BYTES as u64 * 2);
        if let Ok(chunk) = jobs.read(info.id, from, usize::MAX) {
            let body = text::to_text(&chunk.bytes);
            let last = text::cap_tail(&body, NOTICE_BYTES, NOTICE_LINES);
            if !last.text.trim().is_empty() {
                out.push_str(" Its last lines:\n");
                out.push_str(last.text.trim_end_matches('\n'));
            }
        }
        for note in &info.repaired {
            out.push('\n');
            out.push_str(note);
        }
    }
    Some(out)
}

/// Whether a foreground `bash` call of `command` that reaches its timeout becomes a job
/// (`jobs.backgroundOnTimeout`, on by default) instead of being killed: not when it runs `git`
/// or `sleep` (a hung git waits on a prompt nobody answers; a `sleep` past the timeout was
/// a mistake to end).
pub(super) fn keeps_on_timeout(command: &str, ctx: &ToolContext) -> bool {
    let on = ctx.env.started_jobs().map_or_else(
        || JobLimits::default().background_on_timeout,
        |j| j.limits().background_on_timeout,
    );
    on && !runs_any(command, &["git", "sleep"])
}

/// Whether one of `command`'s simple commands runs one of `programs` (after its variable
/// assignments and a wrapper such as `env`, `time` or `nohup`).
fn runs_any(command: &str, programs: &[&str]) -> bool {
    const WRAPPERS: &[&str] = &[
        "env", "time", "nohup", "nice", "command", "exec", "sudo", "timeout", "stdbuf",
    ];
    command
        .split([';', '&', '|', '\n', '(', ')', '{', '}', '`'])
        .filter_map(|simple| {
            simple
                .split_whitespace()
                .map(|w| {
                    w.trim_start_matches('$')
                        .trim_matches(|c| c == '"' || c == '\'')
                })
                .find(|w| {
                    let assignment = w.contains('=') && !w.starts_with('=');
                    let option = w.starts_with('-');
                    let number = w.parse::<f64>().is_ok();
                    let wrapper = WRAPPERS.contains(&w.rsplit('/').next().unwrap_or(w));
                    !(w.is_empty() || assignment || option || number || wrapper)
                })
        })
        .any(|program| programs.contains(&program.rsplit('/').next().unwrap_or(program)))
}

/// Makes a foreground `bash` call that reached its timeout a job: its process runs on (its
/// tree, its sandbox), its output so far begins the job's, the model reads on from there. The
/// error (the call is killed then) is a note for its result.
pub(super) async fn keep(
    command: &str,
    mut child: super::bash_proc::Proc,
    mut chunks: super::bash::Chunks,
    out: &super::bash_output::Output,
    ctx: &ToolContext,
) -> Result<JobInfo, String> {
    let jobs = match table(ctx) {
        Ok(j) => j,
        Err(e) => {
            child.kill_group().await;
            return Err(e.text());
        }
    };
    let (tx, output) = tokio::sync::mpsc::channel(64);
    tokio::spawn(async move {
        while let Some((_, chunk)) = chunks.recv().await {
            if tx.send(chunk).await.is_err() {
                return;
            }
        }
    });
    let adopted = Adopted {
        command: command.to_string(),
        proc: child,
        output,
        seen: out.tail().text.into_bytes(),
    };
    match jobs.adopt(adopted, ctx).await {
        Ok(info) => {
            ctx.env.set_read_to(info.id, info.bytes);
            Ok(info)
        }
        Err(e) => Err(format!("It was killed, not kept in the background: {e}")),
    }
}

/// What a call that became job `info` says after its output so far.
pub(super) fn kept_line(timeout: Duration, info: &JobInfo) -> String {
    format!(
        "Command still running after {}s: it runs on in the background as job {id}. Read its \
         new output with bash_output (id \"{id}\") or write_stdin (session_id {id}), stop it \
         with bash_kill. You will be told when it ends.",
        timeout.as_secs(),
        id = info.id
    )
}

#[cfg(test)]
mod tests {
    use super::runs_any;

    #[test]
    fn git_and_sleep_are_found_in_any_simple_command_of_a_line() {
        let exempt = |c: &str| runs_any(c, &["git", "sleep"]);
        for c in [
            "sleep 30",
            "FOO=1 sleep 30",
            "git status && npm test",
            "/usr/bin/git log",
            "env A=b timeout 5 sleep 3",
            "npm ci; (git fetch)",
            "echo a | nohup git push",
        ] {
            assert!(exempt(c), "{c}");
        }
        for c in [
            "npm run dev",
            "python3 -c 'import time; time.sleep(1)'",
            "cd x; cargo test",
            "echo git sleep",
            "./sleepy.sh",
        ] {
            assert!(!exempt(c), "{c}");
        }
    }
}
