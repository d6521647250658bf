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
/// terminal columns).
pub fn ps_table(sessions: &[LiveSession]) -> String {
    let head = [
        "SESSION", "PARENT", "STATE", "CLIENTS", "AGE", "SANDBOX", "ABOUT", "CWD",
    ]
    .map(String::from);
    let mut rows = vec![head];
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
        rows.push([
            text(&s.session_id),
            s.parent_session_id.as_deref().map_or("-".into(), text),
            text(s.state.as_str()),
            s.clients.to_string(),
            short_age(s.age_ms),
            sandbox_cell(s.sandbox.as_ref()),
            about,
            text(&s.cwd),
        ]);
    }
    let widths: Vec<usize> = (0..8)
        .map(|c| {
            rows.iter()
                .map(|r| crate::text::width(&r[c]))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in &rows {
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
