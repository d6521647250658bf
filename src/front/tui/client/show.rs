//! Opening the window: the terminal taken, the controller built from what opening found, the
//! session's transcript and state loaded, then the loop until the user leaves.

use tokio::sync::mpsc;

use super::{internals, Client, Daemon, Opening};
use crate::client::link::{Link, Start};
use crate::error::StartupError;
use crate::exit::Exit;
use crate::front::tui::terminal::InlineTerminal;
use crate::front::tui::transcript::HistoryCell;
use crate::front::tui::view::{Action, View};
use crate::front::tui::{spawn_input, tty};
use crate::output::TerminalOut;
use crate::signals::Signals;

/// Takes the terminal and shows the linked session until the user leaves; gives back how it
/// ended and the controller, with the terminal restored.
pub(super) async fn show(
    link: Link,
    start: Start,
    daemon: Option<Daemon>,
    o: Opening,
) -> Result<(Exit, Client), StartupError> {
    crate::text::set_ambiguous_wide(o.ambiguous_wide);
    // TERM=dumb: plain lines, no terminal modes, no cursor queries (`client/lines.rs`).
    let tty = match o.dumb {
        true => None,
        false => Some(tty::Tty::enter().map_err(|e| {
            StartupError::internal("cannot set up the terminal").cause(e.to_string())
        })?),
    };
    let (cols, rows) = crossterm::terminal::size().unwrap_or((80, 24));
    let cursor_row = match o.dumb {
        true => 0,
        false => crossterm::cursor::position()
            .map(|(_, y)| y)
            .unwrap_or(rows.saturating_sub(1)),
    };
    let mut term = InlineTerminal::new(TerminalOut, cols, rows, cursor_row);
    term.set_no_color(o.no_color);
    let mut signals = Signals::new()?;
    let (input_tx, input_rx) = mpsc::unbounded_channel();
    if !o.dumb {
        spawn_input(input_tx);
    }
    let (back_tx, back_rx) = mpsc::unbounded_channel();
    let commands = link.commands();
    let history = crate::front::tui::history::PromptHistory::new(&o.keel_home, &o.cwd);
    // The session's directory (a daemon's session may be another directory's).
    let session_cwd = daemon
        .as_ref()
        .map_or_else(|| o.cwd.clone(), |d| d.reopen.cwd.clone());
    let status = o
        .status_line
        .filter(|_| !o.dumb)
        .map(|c| crate::front::tui::status_line::Runner::new(c, session_cwd));
    let mut client = Client {
        view: View::new(),
        term,
        link,
        commands,
        epoch: start.epoch.clone(),
        seq: start.seq,
        clock: o.clock,
        back_tx,
        back_rx,
        dirty: true,
        last_frame: None,
        stop: None,
        daemon,
        file: None,
        asking_quit: false,
        close: false,
        session_dir: o.session_dir,
        keel_home: o.keel_home,
        cwd: o.cwd,
        home: o.home,
        replacing: None,
        rewinding: false,
        clearing: false,
        pager: None,
        shown_child: None,
        pager_stale: false,
        plain: o.dumb,
        history,
        hooks_from: o.hooks_from,
        notifier: crate::front::tui::notify::Notifier::new(o.notify),
        status,
    };
    client.view.files = Some(crate::front::tui::files::FileIndex::new(&client.cwd));
    let internals = internals(&client.commands).await;
    client.load(&start, &internals, &o.warnings);
    if let Some(panel) = o.welcome {
        client.view.notice(HistoryCell::Notice(panel));
    }
    client.fetch_commands();
    client.fetch_jobs(false);
    client.fetch_permission();
    client.show_place();
    if o.dumb {
        if let Some(p) = o.prompt {
            client.act(Action::Prompt(p)).await;
        }
        let exit = client.run_lines(&mut signals).await;
        if client.daemon.is_none() {
            client.stop_here(&mut signals).await;
        }
        return Ok((exit, client));
    }
    if o.pick_session {
        client.open_picker();
    }
    client.render();
    if let Some(p) = o.prompt {
        client.act(Action::Prompt(p)).await;
    }
    let exit = client.run(input_rx, &mut signals).await;
    if client.daemon.is_none() {
        client.stop_here(&mut signals).await;
    }
    let _ = client.term.clear_live();
    drop(tty);
    Ok((exit, client))
}
