//! The controller's side of the transcript pager (`/transcript`): fetching the whole
//! conversation, switching to the alternate screen and back, routing keys, and writing the
//! pager's frames. The pager itself (state, keys, layout, search) is `tui::pager`.

use std::io::Write;

use crate::wire::pi::data::MessagesData;
use crate::wire::pi::Command;
use crossterm::event::{Event as TermEvent, KeyCode, KeyModifiers};
use ratatui::backend::{Backend, CrosstermBackend};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;

use super::{internals, Back, Client};
use crate::front::tui::pager::{Pager, PagerKey};
use crate::front::tui::transcript::{ChildRef, HistoryCell};
use crate::front::tui::{tty, Input};

impl Client {
    /// `/transcript`: asks the session for its conversation; the pager opens when it comes.
    pub(in crate::front::tui) fn transcript(&self) {
        self.in_back(|commands| async move {
            let answer = match commands.ask::<MessagesData>(&Command::GetMessages {}).await {
                Ok(a) => a,
                Err(e) => {
                    let cell = HistoryCell::Error(format!("cannot read the transcript: {e}"));
                    return Some(Back::Notice(cell));
                }
            };
            let replayed = internals(&commands).await.replay(&answer.messages);
            Some(Back::Transcript(replayed))
        });
    }

    /// Ctrl+G: subagent `child`'s transcript in the pager, read-only, replayed from its
    /// session file (beside this session's; a running child's holds what it has done so far).
    /// Esc or `q` returns to this session; Ctrl+G there shows the child that started before
    /// it (from the first, the latest again).
    pub(in crate::front::tui) fn subagent_transcript(&mut self, child: ChildRef) {
        let children = &self.view.transcript.children;
        let at = children
            .iter()
            .position(|c| c.session_id == child.session_id);
        let (place, keys) = match (at, children.len()) {
            (Some(i), n @ 2..) => (format!(" {}/{n}", i + 1), "; Ctrl+G: the one before"),
            _ => (String::new(), ""),
        };
        self.shown_child = Some(child.session_id.clone());
        let (dir, back) = (self.session_dir.clone(), self.back_tx.clone());
        tokio::spawn(async move {
            let read = crate::kernel::session::resolve(&dir, &child.session_id)
                .and_then(|path| crate::kernel::session::Store::read(&path));
            let store = match read {
                Ok((store, _)) => store,
                Err(e) => {
                    let cell =
                        HistoryCell::Error(format!("cannot read the subagent's transcript: {e}"));
                    let _ = back.send(Back::Notice(cell));
                    return;
                }
            };
            let heading = format!(
                "{} subagent{place} · {} · session {} (read-only; Esc returns{keys})",
                crate::text::sanitize(&child.agent_type),
                crate::text::sanitize(&child.description),
                child.session_id
            );
            let replayed = super::super::replay::Internals::default().replay(&store.context());
            let _ = back.send(Back::Subtranscript(heading, replayed));
        });
    }

    /// The subagent that started before the one the pager shows (the latest after the first).
    fn child_before(&self) -> Option<ChildRef> {
        let children = &self.view.transcript.children;
        let shown = self.shown_child.as_deref()?;
        let at = children.iter().position(|c| c.session_id == shown)?;
        let before = (at + children.len() - 1) % children.len();
        children.get(before).cloned()
    }

    /// Shows `pager` on the alternate screen (the inline view stays as it is underneath).
    pub(super) fn open_pager(&mut self, pager: Pager) {
        if self.plain {
            let note = "the transcript pager needs a full terminal (TERM=dumb shows plain lines)";
            return self.view.notice(HistoryCell::Notice(note.into()));
        }
        if let Err(e) = tty::alternate_screen(true) {
            self.view.notice(HistoryCell::Error(format!(
                "cannot open the transcript: {e}"
            )));
            return;
        }
        self.pager = Some(pager);
        self.pager_stale = true;
        self.dirty = true;
    }

    /// Leaves the pager: the normal screen again, and the live area drawn in full.
    fn close_pager(&mut self) {
        self.pager = None;
        self.shown_child = None;
        if let Err(e) = tty::alternate_screen(false) {
            tracing::warn!("cannot leave the alternate screen: {e}");
        }
        let (cols, rows) = self.term.size();
        self.term.resize(cols, rows, None);
        self.dirty = true;
    }

    /// An input while the pager is open; what is left for the normal view (a suspend, after
    /// the pager closed).
    pub(super) fn pager_input(&mut self, msg: Input) -> Option<Input> {
        self.dirty = true;
        self.pager_stale = true;
        match msg {
            Input::Term(TermEvent::Key(key))
                if key.code == KeyCode::Char('g')
                    && key.modifiers.contains(KeyModifiers::CONTROL)
                    && self.shown_child.is_some() =>
            {
                if let Some(before) = self.child_before() {
                    self.subagent_transcript(before);
                }
                None
            }
            Input::Term(TermEvent::Key(key)) => {
                let rows = self.term.size().1;
                let pager = self.pager.as_mut()?;
                if pager.key(key, rows) == PagerKey::Close {
                    self.close_pager();
                }
                None
            }
            // The cursor row the terminal reports is the alternate screen's: not asked for.
            Input::Resize(cols, rows, _) => {
                self.term.resize(cols, rows, None);
                None
            }
            Input::Suspend(_) | Input::Error(_) => {
                self.close_pager();
                Some(msg)
            }
            Input::Term(_) => None,
        }
    }

    /// Writes the pager's frame over the whole alternate screen.
    pub(super) fn draw_pager(&mut self) {
        let (cols, rows) = self.term.size();
        let Some(pager) = self.pager.as_mut() else {
            return;
        };
        let mut buf = Buffer::empty(Rect::new(0, 0, cols, rows));
        pager.draw(&mut buf);
        let cursor = pager.cursor(&buf);
        let written = write_screen(self.term.writer_mut(), &buf, cursor);
        if let Err(e) = written {
            tracing::error!("cannot draw the transcript: {e}");
            self.stop = Some(crate::exit::Exit::Signal(crate::exit::SIGPIPE));
        }
        self.dirty = false;
    }
}

/// The whole buffer, in one synchronized update, then the cursor (hidden when `None`).
fn write_screen<W: Write>(
    out: &mut W,
    buf: &Buffer,
    cursor: Option<(u16, u16)>,
) -> std::io::Result<()> {
    use crossterm::{cursor as c, queue, terminal};
    queue!(
        out,
        terminal::BeginSynchronizedUpdate,
        c::Hide,
        terminal::Clear(terminal::ClearType::All)
    )?;
    let width = buf.area.width.max(1);
    let cells = buf.content.iter().enumerate().map(|(i, cell)| {
        let i = i as u16;
        (i % width, i / width, cell)
    });
    let mut backend = CrosstermBackend::new(&mut *out);
    backend.draw(cells)?;
    if let Some((x, y)) = cursor {
        queue!(out, c::MoveTo(x, y), c::Show)?;
    }
    queue!(out, terminal::EndSynchronizedUpdate)?;
    out.flush()
}
