//! What the daemon's client commands show: `daemon/status` read once (`keel daemon status`,
//! `keel ps`, `keel attach`), its sessions as the `keel ps` table or JSON lines, and the live
//! session `keel attach` shows (after the live-session picker when several are live). The
//! commands themselves are in `cli::commands`.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use serde_json::json;

use crate::client::dial::Dial;
use crate::client::socket::Client;
use crate::error::StartupError;
use crate::exit::Exit;
use crate::front::tui::picker::rows::short_age;
use crate::mode::Env;
use crate::output::Output;
use crate::wire::protocol::daemon::{self as proto, LiveSession, StatusResult};
use crate::wire::socket::DaemonError;

/// The live session `keel attach [ID]` shows: the one whose id starts or ends with `ID`, the only one
/// live, or (several, no id, at a terminal) the one chosen in the live-session picker.
/// `Err(exit)`: nothing to attach, end with this code (the picker was left, or a signal).
pub(crate) async fn attach_target(
    status: &StatusResult,
    id: Option<&str>,
    env: &Env,
    out: &mut Output,
) -> Result<Result<String, Exit>, StartupError> {
    let live: Vec<&str> = status
        .sessions
        .iter()
        .map(|s| s.session_id.as_str())
        .collect();
    let hits: Vec<&str> = match id {
        Some(q) => {
            let named = |s: &&str| crate::kernel::session::id_matches(s, q);
            live.iter().copied().filter(named).collect()
        }
        None => live,
    };
    match (hits.as_slice(), id) {
        ([one], _) => Ok(Ok((*one).to_string())),
        ([], Some(q)) => Err(StartupError::config(format!(
            "no session {q} is live in the keel daemon"
        ))
        .hint("keel ps lists them; a saved session opens with keel --daemon --resume <ID>")),
        ([], None) => Err(
            StartupError::config("no session is live in the keel daemon")
                .hint("start one with: keel --daemon"),
        ),
        (_, None) if env.stdin_tty && env.stdout_tty => {
            use crate::front::tui::live_picker::{choose, LivePicker, LiveSession};
            crate::text::set_ambiguous_wide(ambiguous_wide(env));
            let list = status.sessions.iter().map(LiveSession::from_status);
            let picker = LivePicker::new(list.collect(), env.vars.get("HOME").map(String::as_str));
            Ok(match choose(picker).await? {
                Ok(Some(session)) => Ok(session),
                Ok(None) => Err(Exit::Success),
                Err(signal) => Err(Exit::Signal(signal)),
            })
        }
        (_, _) => {
            let _ = out.out(ps_table(&status.sessions).as_bytes());
            Err(StartupError::usage("several sessions are live; name one")
                .hint("keel attach <ID> (a unique prefix is enough)"))
        }
    }
}

/// `KEEL_AMBIGUOUS_WIDTH=wide`: ambiguous-width characters take two columns.
pub(crate) fn ambiguous_wide(env: &Env) -> bool {
    env.vars
        .get("KEEL_AMBIGUOUS_WIDTH")
        .is_some_and(|v| v.eq_ignore_ascii_case("wide"))
}

pub(crate) async fn status_of(dial: &Dial) -> Result<StatusResult, StartupError> {
    let client = Client::dial(dial, false).await?;
    status_from(client).await
}

/// [`status_of`], or `None` when no daemon listens there.
pub(crate) async fn live_status(dial: &Dial) -> Result<Option<StatusResult>, StartupError> {
    match Client::dial(dial, false).await {
        Ok(client) => status_from(client).await.map(Some),
        Err(e) if e.kind == crate::wire::socket::DaemonErrorKind::NotListening => Ok(None),
        Err(e) => Err(e.into()),
    }
}

async fn status_from(mut client: Client) -> Result<StatusResult, StartupError> {
    client
        .call::<proto::Status>(&crate::wire::protocol::NoParams)
        .await
        .map_err(|e| DaemonError::new(format!("daemon/status failed: {e}")).into())
}

pub(crate) fn ps_json(status: &StatusResult) -> String {
    status
        .sessions
        .iter()
        .map(|s| format!("{}\n", json!(s)))
        .collect()
}

/// The sessions in their order, each subagent's session moved right under its parent (and
/// its siblings); one whose parent is not listed stays where it is.
fn under_parents(sessions: &[LiveSession]) -> Vec<&LiveSession> {
    let listed = |id: &str| sessions.iter().any(|s| s.session_id == id);
    let mut out: Vec<&LiveSession> = Vec::with_capacity(sessions.len());
    fn with_children<'a>(
        s: &'a LiveSession,
        all: &'a [LiveSession],
        out: &mut Vec<&'a LiveSession>,
    ) {
        if out.iter().any(|o| o.session_id == s.session_id) {
            return;
        }
        out.push(s);
        for c in all
            .iter()
            .filter(|c| c.parent_session_id.as_deref() == Some(s.session_id.as_str()))
        {
            with_children(c, all, out);
        }
    }
    for s in sessions {
        if s.parent_session_id.as_deref().is_some_and(listed) {
            continue;
        }
        with_children(s, sessions, &mut out);
    }
    out
}

/// How many columns `keel ps` gives what a session is about (its name or first prompt).
const ABOUT_COLUMNS: usize = 48;

/// `keel ps`: one row per live session of `daemon/status`: id, state, clients, age, its
/// sandbox ([`sandbox_cell`]), what it is about (its name, else its first prompt in quotes,
/// cut to [`ABOUT_COLUMNS`]) and cwd, each column as wide as its widest cell (measured in
/// terminal columns); under a session with background jobs, one indented line per job
/// ([`job_lines`]).
pub fn ps_table(sessions: &[LiveSession]) -> String {
    let head = [
        "SESSION", "PARENT", "STATE", "CLIENTS", "AGE", "SANDBOX", "ABOUT", "CWD",
    ]
    .map(String::from);
    let mut rows = vec![(head, None)];
    for s in under_parents(sessions) {
        let text = crate::text::sanitize;
        let about = match (s.name.as_deref(), s.first_prompt.as_deref()) {
            (Some(name), _) => crate::text::truncate(name, ABOUT_COLUMNS),
            (None, Some(p)) => {
                let first = p.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
                let cut = crate::text::truncate(first.trim(), ABOUT_COLUMNS - 2);
                format!("\"{cut}\"")
            }
            (None, None) => "-".to_string(),
        };
        let row = [
            text(&s.session_id),
            s.parent_session_id.as_deref().map_or("-".into(), text),
            text(s.state.as_str()),
            s.clients.to_string(),
            short_age(s.age_ms),
            sandbox_cell(s.sandbox.as_ref()),
            about,
            text(&s.cwd),
        ];
        rows.push((row, Some(s)));
    }
    let widths: Vec<usize> = (0..8)
        .map(|c| {
            rows.iter()
                .map(|(r, _)| crate::text::width(&r[c]))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for (r, session) in &rows {
        let mut line = String::new();
        for (c, cell) in r.iter().enumerate() {
            let pad = " ".repeat(widths[c].saturating_sub(crate::text::width(cell)));
            // Counts and ages are right-aligned; the last column is not padded.
            match c {
                3 | 4 => line.push_str(&format!("{pad}{cell}  ")),
                7 => line.push_str(cell),
                _ => line.push_str(&format!("{cell}{pad}  ")),
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
        if let Some(s) = session {
            out.push_str(&job_lines(&s.jobs));
        }
    }
    out
}

/// How many columns `keel ps` gives a job's command.
const JOB_COMMAND_COLUMNS: usize = 60;

/// A session's background jobs under its `keel ps` row, indented, in columns of their own:
/// `job ID`, state (`exited 3`, `killed`, `lost`), pid (`-` when the host does not see it:
/// inside bubblewrap), bytes written, the command's first line.
pub fn job_lines(jobs: &[crate::kernel::jobs::JobInfo]) -> String {
    use crate::kernel::jobs::JobState;
    let rows: Vec<[String; 5]> = jobs
        .iter()
        .map(|j| {
            let state = match (j.state, j.exit_code, j.signal) {
                (JobState::Running, _, _) => "running".to_string(),
                (JobState::Exited, Some(code), _) => format!("exited {code}"),
                (JobState::Exited, None, Some(sig)) => format!("signal {sig}"),
                (JobState::Exited, None, None) => "exited".to_string(),
                (JobState::Killed, _, _) => "killed".to_string(),
                (JobState::Lost, _, _) => "lost".to_string(),
            };
            let first = j
                .command
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("");
            [
                format!("job {}", j.id),
                state,
                j.pid.map_or("-".into(), |p| format!("pid {p}")),
                crate::text::bytes(j.bytes),
                crate::text::truncate(&crate::text::sanitize(first.trim()), JOB_COMMAND_COLUMNS),
            ]
        })
        .collect();
    let widths: Vec<usize> = (0..5)
        .map(|c| {
            rows.iter()
                .map(|r| crate::text::width(&r[c]))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in &rows {
        let mut line = String::from("  ");
        for (c, cell) in r.iter().enumerate() {
            let pad = " ".repeat(widths[c].saturating_sub(crate::text::width(cell)));
            match c {
                3 => line.push_str(&format!("{pad}{cell}  ")),
                4 => line.push_str(cell),
                _ => line.push_str(&format!("{cell}{pad}  ")),
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// A session's sandbox in `keel ps`: `workspace-write · net off`; in capitals when the
/// sandbox is not in force (`OFF`, `UNAVAILABLE`, `NONE (UNAVAILABLE)`); `?` from
/// a daemon that does not say.
pub fn sandbox_cell(sandbox: Option<&crate::wire::protocol::snapshot::SandboxState>) -> String {
    match sandbox {
        Some(s) if s.degraded() => s.label().to_uppercase(),
        Some(s) => s.label(),
        None => "?".to_string(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn keel_ps_shows_each_sessions_jobs_indented_under_it() {
        let job = |id: u32, state: &str, pid: Option<i32>, code: Option<i32>, bytes: u64| {
            json!({"id": id, "command": format!("npm run job{id}\nsecond line"), "pid": pid,
                "tty": false, "state": state, "exitCode": code, "signal": null,
                "bytes": bytes, "startedMs": 0, "endedMs": null})
        };
        let sessions: Vec<LiveSession> = serde_json::from_value(json!([
            {"sessionId": "one", "state": "idle", "clients": 1, "ageMs": 5_000, "cwd": "/a",
             "epoch": "e", "seq": 0, "jobs": [
                job(1, "running", Some(4242), None, 18),
                job(12, "exited", None, Some(3), 5 << 20),
                job(13, "lost", Some(77), None, 0)]},
            {"sessionId": "two", "state": "idle", "clients": 0, "ageMs": 5_000, "cwd": "/b",
             "epoch": "e", "seq": 0}
        ]))
        .unwrap();
        let table = ps_table(&sessions);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 6, "{table}");
        assert!(lines[1].starts_with("one "), "{table}");
        assert_eq!(
            &lines[2..5],
            [
                "  job 1   running   pid 4242     18 B  npm run job1",
                "  job 12  exited 3  -         5.0 MiB  npm run job12",
                "  job 13  lost      pid 77        0 B  npm run job13",
            ],
            "{table}"
        );
        assert!(lines[5].starts_with("two "), "{table}");
        // No jobs: left out of the JSON.
        let two = serde_json::to_value(&sessions[1]).unwrap();
        assert!(two.get("jobs").is_none(), "{two}");
    }
}
