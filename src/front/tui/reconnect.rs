//! Daemon trouble, seen from the TUI: a lost connection is said plainly and Enter attaches
//! again with the cursor (a replay, or a snapshot when the daemon no longer holds the events
//! in between: never a silent gap); a dead daemon is replaced by a new one that resumes the
//! session from its file (the messages queued in the dead one back in the editor); a session
//! that ended (a subagent's) leaves the window read only. A remote daemon's link (ssh) that drops is retried by itself, with
//! backoff, while the status line says "reconnecting…": the run there goes on meanwhile.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use tokio::time::Instant;

use super::client::Client;
use super::short_id;
use super::transcript::HistoryCell;
use super::view::Action;
use crate::client::dial::Backoff;
use crate::client::link::{AttachError, Link, Start};
use crate::exit::Exit;
use crate::wire::protocol::spec::{SessionPick, SessionSpec};

impl Client {
    pub(super) fn lost(&mut self, why: &str) {
        // The run's state is unknown from now on: no spinner, no running timers.
        self.view.disconnected = Some(self.clock.now_ms());
        if let Some(d) = &mut self.daemon {
            d.lost = true;
            if let Some(remote) = d.dial.remote() {
                let host = remote.host.clone();
                d.backoff = Backoff::default();
                d.retry_at = Some(Instant::now() + d.backoff.next_delay());
                self.view.notice(HistoryCell::Error(format!(
                    "The connection to the keel daemon on {host} was lost ({why}); reconnecting \
                     (the session and its run go on there)."
                )));
                self.view.place = Some(format!("reconnecting to {host}… · Enter tries now"));
                return;
            }
        }
        self.view.notice(HistoryCell::Error(format!(
            "The connection to the keel daemon was lost ({why}). Press Enter to reconnect; the \
             session's file keeps every completed entry."
        )));
        self.view.place = Some("daemon connection lost · Enter reconnects".into());
    }

    /// A key while the daemon connection is lost: Enter reconnects (and sends what was typed
    /// meanwhile), the quit keys quit, the others edit.
    pub(super) async fn key_while_lost(&mut self, key: crossterm::event::KeyEvent) {
        if key.code != crossterm::event::KeyCode::Enter {
            if let Some(Action::Quit) = self.view.on_key(key) {
                self.stop = Some(Exit::Success);
            }
            return;
        }
        let typed = self.view.composer.text();
        self.reconnect().await;
        // Back: what was typed while disconnected is sent now (not the messages a new daemon
        // gave back to the editor: they wait for their own Enter).
        let back = !self.daemon.as_ref().is_some_and(|d| d.lost);
        if back && self.view.composer.text() == typed && !typed.trim().is_empty() {
            if let Some(action) = self.view.on_key(key) {
                self.act(action).await;
            }
        }
    }

    /// Attaches again from the last event seen: a replay, or a snapshot if the daemon no longer
    /// holds what followed.
    pub(super) async fn reconnect(&mut self) {
        let Some(dial) = self.daemon.as_ref().map(|d| d.dial.clone()) else {
            // In this process: the view fell behind its own session's stream.
            let cursor = (self.epoch.clone(), self.seq);
            match self.link.reattach_local((&cursor.0, cursor.1)).await {
                Some(Ok(start)) => {
                    if start.snapshot.is_some() {
                        self.restart_view(&start).await;
                    }
                    self.epoch = start.epoch;
                    self.seq = start.seq;
                }
                Some(Err(e)) => self.view.notice(HistoryCell::Error(e.message)),
                None => {}
            }
            return;
        };
        let cursor = Some((self.epoch.as_str(), self.seq));
        let session = self.link.session_id().to_string();
        match Link::daemon(&dial.quietly(), &session, cursor, true).await {
            Ok((link, start)) => self.reconnected(link, &start).await,
            // A remote daemon that answered but no longer holds the session: open it there
            // again from its file.
            Err(AttachError::Refused(_)) if dial.remote().is_some() => self.restart().await,
            Err(AttachError::Unreachable(e)) if dial.remote().is_some() => self.retry_later(&e),
            Err(_)
                if dial.local_socket().is_some_and(|socket| {
                    !socket.exists() || std::os::unix::net::UnixStream::connect(socket).is_err()
                }) =>
            {
                self.restart().await
            }
            Err(e) => self
                .view
                .notice(HistoryCell::Error(format!("cannot reconnect: {e}"))),
        }
    }

    /// The next attempt for a remote daemon is due (see [`Client::lost`]).
    pub(super) async fn retry_remote(&mut self) {
        if let Some(d) = &mut self.daemon {
            // Due again only if this attempt fails (`retry_later`).
            d.retry_at = None;
        }
        self.reconnect().await;
        self.dirty = true;
    }

    /// A remote attempt failed: the next one waits longer.
    fn retry_later(&mut self, why: &str) {
        let Some(d) = &mut self.daemon else { return };
        let host = d.dial.remote().map(|r| r.host.clone()).unwrap_or_default();
        let failed = d.backoff.attempts();
        let delay = d.backoff.next_delay();
        d.retry_at = Some(Instant::now() + delay);
        tracing::info!("reconnecting to {host}: attempt {failed} failed: {why}");
        self.view.place = Some(format!(
            "reconnecting to {host}… (attempt {failed} failed, next in {:.0} s) · Enter tries now",
            delay.as_secs_f64().ceil()
        ));
    }

    async fn reconnected(&mut self, link: Link, start: &Start) {
        let snapshot = start.snapshot.is_some();
        if snapshot {
            self.view.notice(HistoryCell::Notice(
                "reconnected; the daemon no longer held the events in between, so the state \
                 below is its snapshot"
                    .into(),
            ));
        }
        self.relink(link, start).await;
        if !snapshot {
            let place = self
                .daemon
                .as_ref()
                .and_then(|d| d.dial.remote())
                .map(|r| format!(" on {}", r.host))
                .unwrap_or_default();
            self.view.notice(HistoryCell::Notice(format!(
                "reconnected to the keel daemon{place}"
            )));
        }
    }

    /// Shows the session through `link` from now on (a snapshot starts the view over, keeping
    /// the editor).
    async fn relink(&mut self, link: Link, start: &Start) {
        self.link = link;
        self.commands = self.link.commands();
        if let Some(d) = &mut self.daemon {
            d.lost = false;
            d.retry_at = None;
            d.backoff = Backoff::default();
        }
        self.epoch = start.epoch.clone();
        self.view.disconnected = None;
        if start.snapshot.is_some() {
            self.restart_view(start).await;
        }
        self.seq = start.seq;
        self.show_place();
    }

    /// Shows a snapshot from scratch, keeping what the user was typing and the file menu.
    async fn restart_view(&mut self, start: &Start) {
        let old = std::mem::take(&mut self.view);
        self.view.composer = old.composer;
        self.view.files = old.files;
        self.view.place = old.place;
        let internals = super::client::internals(&self.commands).await;
        self.load(start, &internals, &[]);
        self.fetch_commands();
    }

    /// The daemon is gone: start a new one and open the session there again from its file.
    async fn restart(&mut self) {
        let Some(file) = self.file.clone() else {
            self.view.notice(HistoryCell::Error(
                "the keel daemon is gone and this session has no file to resume".into(),
            ));
            return;
        };
        let Some(d) = &self.daemon else { return };
        // The messages queued in the dead daemon (steering, follow-ups) were never in the
        // file: they go back in the editor, to be sent again.
        let t = &self.view.transcript;
        let queued: Vec<String> = t.steering.iter().chain(&t.follow_up).cloned().collect();
        match reopen(&d.dial, &d.env, &d.reopen, &file).await {
            Ok((id, link, start)) => {
                self.relink(link, &start).await;
                self.view.notice(HistoryCell::Notice(format!(
                    "the keel daemon had stopped: a new one resumed session {} from its file",
                    short_id(&id)
                )));
                if !queued.is_empty() {
                    self.view.notice(HistoryCell::Notice(
                        "the messages queued in the stopped daemon are back in the editor: \
                         Enter sends them"
                            .into(),
                    ));
                    self.view.restore_to_composer(queued);
                }
            }
            Err(e) => self.view.notice(HistoryCell::Error(format!(
                "cannot start a new keel daemon: {e}"
            ))),
        }
    }
}

/// `spec` picking the session `file` instead of the session it picked.
fn spec_for_file(spec: &SessionSpec, file: &str) -> SessionSpec {
    SessionSpec {
        session: SessionPick::File(file.to_string()),
        ..spec.clone()
    }
}

/// Starts (or finds) the daemon `dial` names, opens `file` there with `params`' other flags and
/// attaches.
async fn reopen(
    dial: &crate::client::dial::Dial,
    env: &crate::mode::Env,
    params: &crate::wire::protocol::session::OpenParams,
    file: &str,
) -> Result<(String, Link, Start), String> {
    let dial = dial.quietly();
    let conn = crate::client::open::start(&dial, env)
        .await
        .map_err(|e| e.message)?;
    let mut client = crate::client::socket::Client::greet(conn, true, &dial)
        .await
        .map_err(|e| e.to_string())?;
    let mut params = params.clone();
    params.spec = spec_for_file(&params.spec, file);
    let opened = client
        .call::<crate::wire::protocol::session::Open>(&params)
        .await
        .map_err(|e| e.to_string())?;
    drop(client);
    let id = opened.session_id;
    let (link, start) = Link::daemon(&dial, &id, None, true)
        .await
        .map_err(|e| e.to_string())?;
    Ok((id, link, start))
}

impl Client {
    /// The session ended (a subagent's task is over): the window stays to be read, and says
    /// it takes no prompts.
    pub(super) fn session_ended(&mut self) {
        let id = self.link.session_id().to_string();
        self.view.ended = Some("subagent finished · read only · Ctrl+C leaves".into());
        self.view.notice(HistoryCell::Notice(format!(
            "The subagent finished; its session {} is saved (keel --resume {id} opens it).",
            short_id(&id)
        )));
    }

    /// Whether `action` sends the session input it can no longer take (it ended): then the
    /// text goes back to the editor and the window says why.
    pub(super) fn refused_when_ended(&mut self, action: &Action) -> bool {
        let typed = match action {
            Action::Prompt(t) | Action::Steer(t) | Action::FollowUp(t) => t.clone(),
            Action::Bash(cmd) => format!("!{cmd}"),
            _ => return false,
        };
        if self.view.ended.is_none() {
            return false;
        }
        self.view.restore_to_composer(vec![typed]);
        self.view.notice(HistoryCell::Notice(
            "This subagent finished: its session takes no prompts.".into(),
        ));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reopening_by_file_keeps_the_spec_but_its_pick() {
        let spec = SessionSpec {
            provider: Some("p".into()),
            session: SessionPick::Continue,
            ..SessionSpec::default()
        };
        let got = spec_for_file(&spec, "/f.jsonl");
        assert_eq!(got.session, SessionPick::File("/f.jsonl".into()));
        assert_eq!(got.provider.as_deref(), Some("p"));
    }
}
