//! Protocol v2's method and notification tables as data, for the reference page
//! (`docs/protocol-reference.md`, written and checked by `tests/docs.rs`): each row's name and
//! types come from the [`Method`] and [`Notify`] declarations themselves; a test checks that
//! the server decodes every row, and a new request variant does not compile until the test's
//! exhaustive match names it. Pure data.

use super::notify::{Lagged, Notice, Notify, Replaced, SessionEvent, Shutdown};
use super::{daemon, schedule, session, Method};

/// One method of protocol v2 as the reference shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MethodRow {
    /// The JSON-RPC `method`.
    pub name: &'static str,
    /// The Rust type of its `params` (its path in `keel::wire`).
    pub params: String,
    /// The Rust type of its `result`.
    pub result: String,
    /// What it does, in one sentence.
    pub summary: &'static str,
}

/// One notification of protocol v2 (daemon → client).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotificationRow {
    /// The JSON-RPC `method`.
    pub name: &'static str,
    /// The Rust type of its `params`.
    pub params: String,
    /// When it is sent.
    pub summary: &'static str,
}

fn method<M: Method>(summary: &'static str) -> MethodRow {
    MethodRow {
        name: M::NAME,
        params: type_path::<M::Params>(),
        result: type_path::<M::Result>(),
        summary,
    }
}

fn notification<N: Notify>(summary: &'static str) -> NotificationRow {
    NotificationRow {
        name: N::NAME,
        params: type_path::<N::Params>(),
        summary,
    }
}

/// `keel::wire::protocol::daemon::HelloParams` → `wire::protocol::daemon::HelloParams`.
fn type_path<T: ?Sized>() -> String {
    let name = std::any::type_name::<T>();
    name.strip_prefix("keel::").unwrap_or(name).to_string()
}

/// Every method protocol v2 declares, in the order a client meets them. Any other method name
/// is a pi command (see [`crate::wire::pi::CommandName`]) with `sessionId` added.
pub fn methods() -> Vec<MethodRow> {
    vec![
        method::<daemon::Hello>("The first request on every connection: the protocol version and the client's name."),
        method::<daemon::Ping>("A heartbeat."),
        method::<daemon::Status>("The daemon, its live sessions, its schedules and its journal."),
        method::<daemon::Stop>("Stop the daemon (refused while a run is active unless `force`)."),
        method::<session::Open>("Open the session a typed spec describes, in `cwd`, as `keel` would there, or return the live one it picks."),
        method::<session::Attach>("Follow a session's events on this connection: a replay from the cursor, or a snapshot."),
        method::<session::Detach>("Stop following a session on this connection."),
        method::<session::Close>("Save and release a live session that has no run and no other client."),
        method::<session::List>("The saved sessions of a directory and of every directory."),
        method::<session::Rewind>("Restore a session's files and/or conversation to a checkpoint (pi's `rewind`)."),
        method::<session::RewindUndo>("Undo a session's last rewind (pi's `rewind_undo`)."),
        method::<schedule::Reload>("Read the schedule store again."),
        method::<schedule::Run>("Start a scheduled task's run now."),
    ]
}

/// Every notification the daemon sends.
pub fn notifications() -> Vec<NotificationRow> {
    vec![
        notification::<SessionEvent>("An event of an attached session, numbered by `epoch` and `seq`."),
        notification::<Replaced>("The session now serves another one (`new_session`, `fork`, …), or the same one whose conversation a rewind moved (same id, new epoch); the attachment follows it."),
        notification::<Lagged>("The client did not read fast enough: the connection closes next; attach again with the cursor."),
        notification::<Notice>("A daemon-wide message for the user (a scheduled run that did not succeed)."),
        notification::<Shutdown>("The daemon exits next."),
    ]
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::{Notification, Request};
    use super::*;
    use serde_json::value::RawValue;

    /// The row a request belongs to. Exhaustive: a new request variant does not compile until
    /// it is named here, and the test below then asks for its row in [`methods`].
    fn name_of(r: &Request) -> &'static str {
        match r {
            Request::Hello(_) => daemon::Hello::NAME,
            Request::Ping(_) => daemon::Ping::NAME,
            Request::Status(_) => daemon::Status::NAME,
            Request::Stop(_) => daemon::Stop::NAME,
            Request::Open(_) => session::Open::NAME,
            Request::Attach(_) => session::Attach::NAME,
            Request::Detach(_) => session::Detach::NAME,
            Request::Close(_) => session::Close::NAME,
            Request::List(_) => session::List::NAME,
            Request::ScheduleReload(_) => schedule::Reload::NAME,
            Request::ScheduleRun(_) => schedule::Run::NAME,
            Request::Pi(_) => "",
        }
    }

    #[test]
    fn every_row_is_a_method_the_server_decodes() {
        // Params every method accepts (each takes the fields it knows and ignores the rest).
        let params = RawValue::from_string(
            r#"{"protocolVersion":1,"client":{"name":"t","version":"0"},"sessionId":"s",
                "cwd":"/","args":[],"env":{},"name":"task","entryId":"e"}"#
                .to_string(),
        )
        .unwrap();
        let rows = methods();
        for row in &rows {
            match Request::decode(row.name, Some(&params)) {
                // Served by the session's host as pi's `rewind` and `rewind_undo`.
                Ok(Request::Pi(call)) => assert!(
                    [
                        ("session/rewind", "rewind"),
                        ("session/rewind_undo", "rewind_undo")
                    ]
                    .contains(&(row.name, call.command.as_str())),
                    "{}",
                    row.name
                ),
                Ok(r) => assert_eq!(name_of(&r), row.name),
                Err(e) => panic!("{}: {}", row.name, e.message),
            }
        }
        let mut names: Vec<_> = rows.iter().map(|r| r.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), rows.len());
    }

    #[test]
    fn every_notification_row_decodes_as_that_notification() {
        for row in notifications() {
            assert!(
                Notification::decode(row.name, RawValue::from_string("{}".into()).ok().as_deref())
                    .is_some(),
                "{}",
                row.name
            );
        }
    }
}
