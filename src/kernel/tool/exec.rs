//! The background-job tools in Codex's shapes, for the models trained on them (OpenAI's):
//! `exec_command {cmd, workdir?, tty?, yield_time_ms?, max_output_tokens?}` starts a command as
//! a job and waits up to the yield for it to end; `write_stdin {session_id, chars?,
//! yield_time_ms?, max_output_tokens?}` types into it (a terminal job) or polls it. Both
//! answer as Codex does (`Chunk ID`, `Wall time`, `Process exited with code N` or `Process
//! running with session ID N`, `Original token count`, `Output:`). One table behind these and
//! Claude's shapes ([`super::background`]); a command that ended within its yield was never a
//! job to the model, so it gets no notice of its end.

use std::borrow::Cow;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{json, Value};

use super::args::Field;
use super::background::table;
use super::text;
use super::{ToolContext, ToolOutput, ToolSpec};
use crate::kernel::jobs::{JobId, JobInfo, JobState, Jobs, StartJob};

/// `exec_command`'s yield when none is given, and its bounds.
const EXEC_YIELD: Duration = Duration::from_millis(10_000);
/// `write_stdin`'s yield after typing, and an empty poll's least and most.
const WRITE_YIELD: Duration = Duration::from_millis(250);
const POLL_MIN: Duration = Duration::from_millis(5_000);
const YIELD_MIN: Duration = Duration::from_millis(250);
const YIELD_MAX: Duration = Duration::from_millis(300_000);
/// Tokens of output a reply carries when the call gives no `max_output_tokens`.
const MAX_TOKENS: u64 = 10_000;
/// Bytes per token, as the reply counts them.
const BYTES_PER_TOKEN: u64 = 4;

pub(super) fn exec_spec() -> ToolSpec {
    ToolSpec {
        name: Cow::Borrowed("exec_command"),
        description: Cow::Borrowed(
            "Runs a command in a PTY or on pipes, returning output or a session ID for ongoing \
             interaction (write_stdin).",
        ),
        parameters: json!({
            "type": "object",
            "properties": {
                "cmd": {"type": "string", "description": "Shell command to execute."},
                "workdir": {"type": "string", "description": "Optional working directory to run the command in; defaults to the turn cwd."},
                "tty": {"type": "boolean", "description": "Whether to allocate a TTY for the command. Defaults to false (plain pipes); set to true to open a PTY and access TTY process."},
                "yield_time_ms": {"type": "number", "description": "How long to wait (in milliseconds) for output before yielding."},
                "max_output_tokens": {"type": "number", "description": "Maximum number of tokens to return. Excess output will be truncated."}
            },
            "required": ["cmd"]
        }),
    }
}

pub(super) fn write_spec() -> ToolSpec {
    ToolSpec {
        name: Cow::Borrowed("write_stdin"),
        description: Cow::Borrowed(
            "Writes characters to an existing unified exec session and returns recent output.",
        ),
        parameters: json!({
            "type": "object",
            "properties": {
                "session_id": {"type": "number", "description": "Identifier of the running unified exec session."},
                "chars": {"type": "string", "description": "Bytes to write to stdin (may be empty to poll)."},
                "yield_time_ms": {"type": "number", "description": "How long to wait (in milliseconds) for output before yielding."},
                "max_output_tokens": {"type": "number", "description": "Maximum number of tokens to return. Excess output will be truncated."}
            },
            "required": ["session_id"]
        }),
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ExecArgs {
    cmd: Field<String>,
    workdir: Field<String>,
    tty: Field<bool>,
    yield_time_ms: Field<f64>,
    max_output_tokens: Field<f64>,
}

/// `exec_command`.
pub(super) async fn exec(args: &Value, ctx: &ToolContext) -> ToolOutput {
    let started = Instant::now();
    let a: ExecArgs = super::args::read(args);
    let cmd = match a.cmd.required("cmd") {
        Ok(c) => c,
        Err(e) => return e,
    };
    let (workdir, tty, yield_ms, max_tokens) = match (
        a.workdir.optional("workdir"),
        a.tty.optional("tty"),
        a.yield_time_ms.optional("yield_time_ms"),
        a.max_output_tokens.optional("max_output_tokens"),
    ) {
        (Ok(w), Ok(t), Ok(y), Ok(m)) => (w, t.unwrap_or(false), y, m),
        (Err(e), ..) | (_, Err(e), ..) | (.., Err(e), _) | (.., Err(e)) => return e,
    };
    let jobs = match table(ctx) {
        Ok(j) => j,
        Err(e) => return e,
    };
    let req = StartJob {
        command: cmd,
        cwd: workdir.map_or_else(|| ctx.cwd.clone(), |w| ctx.resolve(&w)),
        tty,
        size: None,
    };
    let info = match super::background::guarded_start(&jobs, req, ctx).await {
        Ok(info) => info,
        Err(e) => return ToolOutput::error(e.to_string()),
    };
    let until = started + yield_for(yield_ms, EXEC_YIELD, false);
    reply(&jobs, info.id, until, started, max_tokens, ctx).await
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct WriteArgs {
    session_id: Field<f64>,
    chars: Field<String>,
    yield_time_ms: Field<f64>,
    max_output_tokens: Field<f64>,
}

/// `write_stdin`.
pub(super) async fn write(args: &Value, ctx: &ToolContext) -> ToolOutput {
    let started = Instant::now();
    let a: WriteArgs = super::args::read(args);
    let id = match a.session_id.required("session_id") {
        Ok(n) if n >= 1.0 && n.fract() == 0.0 && n <= f64::from(u32::MAX) => JobId(n as u32),
        Ok(n) => return ToolOutput::error(format!("Unknown process id {n}")),
        Err(e) => return e,
    };
    let (chars, yield_ms, max_tokens) = match (
        a.chars.optional("chars"),
        a.yield_time_ms.optional("yield_time_ms"),
        a.max_output_tokens.optional("max_output_tokens"),
    ) {
        (Ok(c), Ok(y), Ok(m)) => (c.unwrap_or_default(), y, m),
        (Err(e), ..) | (_, Err(e), _) | (.., Err(e)) => return e,
    };
    let Some(jobs) = ctx.env.started_jobs() else {
        return ToolOutput::error(format!("Unknown process id {id}"));
    };
    if let Err(e) = jobs.info(id) {
        return ToolOutput::error(e.to_string());
    }
    if !chars.is_empty() {
        if let Err(e) = jobs.write(id, chars.as_bytes()) {
            return ToolOutput::error(e.to_string());
        }
    }
    let poll = chars.is_empty();
    let until = started + yield_for(yield_ms, WRITE_YIELD, poll);
    reply(&jobs, id, until, started, max_tokens, ctx).await
}

/// How long a call waits: what it asked, within bounds (an empty poll waits at least 5 s).
fn yield_for(asked: Option<f64>, default: Duration, poll: bool) -> Duration {
    let asked = asked
        .filter(|ms| ms.is_finite() && *ms >= 0.0)
        .map_or(default, |ms| Duration::from_millis(ms as u64));
    let least = if poll { POLL_MIN } else { YIELD_MIN };
    asked.clamp(least, YIELD_MAX)
}

/// Waits until job `id` ended or `until` came (woken by its output, never polling), then
/// answers with what it wrote since the model last read it.
async fn reply(
    jobs: &Jobs,
    id: JobId,
    until: Instant,
    started: Instant,
    max_tokens: Option<f64>,
    ctx: &ToolContext,
) -> ToolOutput {
    let mut info = match jobs.info(id) {
        Ok(i) => i,
        Err(e) => return ToolOutput::error(e.to_string()),
    };
    while info.state == JobState::Running && Instant::now() < until {
        let waited = tokio::select! {
            biased;
            _ = ctx.abort.aborted() => break,
            w = jobs.wait(id, info.bytes, until) => w,
        };
        match waited {
            Ok(i) => info = i,
            Err(e) => return ToolOutput::error(e.to_string()),
        }
    }
    let since = ctx.env.read_to(id);
    let chunk = match jobs.read(id, since, usize::MAX) {
        Ok(c) => c,
        Err(e) => return ToolOutput::error(e.to_string()),
    };
    ctx.env.set_read_to(id, chunk.next);
    if info.state != JobState::Running {
        // The model reads its end here: no notice of it later.
        ctx.env.mark_told(id);
    }
    let output = text::to_text(&chunk.bytes);
    let tokens = (output.len() as u64).div_ceil(BYTES_PER_TOKEN);
    let max_tokens = max_tokens
        .filter(|t| t.is_finite() && *t >= 1.0)
        .map_or(MAX_TOKENS, |t| t as u64);
    let shown = truncate_middle(&output, max_tokens * BYTES_PER_TOKEN);
    let mut text = format!(
        "Chunk ID: {}\nWall time: {:.4} seconds\n{}\nOriginal token count: {tokens}\nOutput:\n{shown}",
        chunk_id(),
        started.elapsed().as_secs_f64(),
        process_line(&info),
    );
    if chunk.dropped > 0 {
        text.push_str(&format!(
            "\n[{} earlier bytes were no longer held: {}]",
            chunk.dropped,
            jobs.log_path(id).display()
        ));
    }
    ToolOutput::ok(text).with_details(json!({
        "job": info,
        "from": chunk.from,
        "next": chunk.next,
    }))
}

/// `Process running with session ID N` or `Process exited with code N`.
fn process_line(info: &JobInfo) -> String {
    match (info.state, info.exit_code, info.signal) {
        (JobState::Running, ..) => format!("Process running with session ID {}", info.id),
        (_, Some(code), _) => format!("Process exited with code {code}"),
        // Ended by a signal: the shell's code for it.
        (_, None, Some(sig)) => format!("Process exited with code {}", 128 + sig),
        (_, None, None) => "Process exited with code -1".to_string(),
    }
}

/// `text` within `max` bytes: its head and tail with what was cut said between them.
fn truncate_middle(text: &str, max: u64) -> Cow<'_, str> {
    let max = usize::try_from(max).unwrap_or(usize::MAX);
    if text.len() <= max {
        return Cow::Borrowed(text);
    }
    let half = max / 2;
    let head = text::floor_boundary(text, half);
    let mut tail = text.len() - half;
    while !text.is_char_boundary(tail) {
        tail += 1;
    }
    let cut = (text.len() - head - (text.len() - tail)) as u64;
    Cow::Owned(format!(
        "{}…{} tokens truncated…{}",
        &text[..head],
        cut.div_ceil(BYTES_PER_TOKEN),
        &text[tail..]
    ))
}

/// Six hex digits naming one reply.
fn chunk_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..6].to_string()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn yields_are_bounded_and_an_empty_poll_waits_at_least_five_seconds() {
        assert_eq!(yield_for(None, EXEC_YIELD, false), EXEC_YIELD);
        assert_eq!(yield_for(Some(10.0), EXEC_YIELD, false), YIELD_MIN);
        assert_eq!(yield_for(Some(1000.0), WRITE_YIELD, true), POLL_MIN);
        assert_eq!(yield_for(Some(9e9), WRITE_YIELD, true), YIELD_MAX);
        assert_eq!(yield_for(Some(f64::NAN), WRITE_YIELD, false), WRITE_YIELD);
    }

    #[test]
    fn openais_models_get_codexs_shapes_and_the_others_claudes_unless_set() {
        use crate::kernel::tool::{JobTools, CLAUDE_JOB_TOOLS, CODEX_JOB_TOOLS};
        assert_eq!(JobTools::Auto.for_api("openai-responses"), CODEX_JOB_TOOLS);
        assert_eq!(
            JobTools::Auto.for_api("openai-completions"),
            CODEX_JOB_TOOLS
        );
        assert_eq!(
            JobTools::Auto.for_api("anthropic-messages"),
            CLAUDE_JOB_TOOLS
        );
        assert_eq!(JobTools::Auto.for_api("google-gemini"), CLAUDE_JOB_TOOLS);
        assert_eq!(
            JobTools::Claude.for_api("openai-responses"),
            CLAUDE_JOB_TOOLS
        );
        assert_eq!(
            JobTools::Codex.for_api("anthropic-messages"),
            CODEX_JOB_TOOLS
        );
    }

    #[test]
    fn long_output_keeps_its_head_and_tail() {
        let text = "a".repeat(100) + &"b".repeat(100);
        let cut = truncate_middle(&text, 40);
        assert!(cut.starts_with(&"a".repeat(20)), "{cut}");
        assert!(cut.ends_with(&"b".repeat(20)), "{cut}");
        assert!(cut.contains("…40 tokens truncated…"), "{cut}");
        assert_eq!(truncate_middle("short", 40), "short");
    }
}
