//! `/jobs` (issue 47 point 4): the session's background jobs as the view knows them from
//! `get_jobs` and the `job_started` / `job_output` / `job_ended` events, the running ones
//! counted in the status line, and the panel over the editor: the list (id, state, pid,
//! bytes, command; running first), Enter tails a job's output (read with `read_job` from the
//! offset the tail has, again on each `job_output`: no polling), `k` kills it after one
//! question, Esc goes back. Plain state plus drawing into a `Buffer`: it never calls the host
//! (reads and kills are returned for the controller to send) and never writes to stdout.
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod text;

pub use text::{size, Lines};

use std::collections::BTreeMap;

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::picker::rows::{self, blank, put, with, BOLD, DIM, GAP, MARKER, REVERSED};
use crate::kernel::jobs::{JobId, JobInfo, JobState};
use crate::wire::events::WireEvent;
use crate::wire::pi::data::JobReadData;

/// List rows at most (the panel scrolls past them).
const LIST_ROWS: usize = 10;
/// Output rows a tail shows at most.
const TAIL_ROWS: usize = 16;
/// How much of a job's output a new tail reads first (the last lines of it).
pub const TAIL_FIRST: u64 = 64 << 10;

/// What the controller should do after a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobsKey {
    None,
    /// Read job `id`'s output from offset `since` (`read_job`).
    Read(JobId, u64),
    /// Kill job `id` (`kill_job`); the user said yes.
    Kill(JobId),
    Close,
}

/// A job's output being followed.
#[derive(Debug, Clone)]
struct Tail {
    id: JobId,
    lines: Lines,
    /// The offset to read from next.
    next: u64,
    /// The end of its output as the events last said.
    wanted: u64,
    /// A read is under way.
    reading: bool,
    /// Bytes the ring no longer held when read (its log has them).
    dropped: u64,
}

/// What the panel shows.
#[derive(Debug, Clone)]
enum Mode {
    List,
    Tail(Box<Tail>),
}

/// The open panel.
#[derive(Debug, Clone)]
struct Panel {
    mode: Mode,
    /// The highlighted job.
    selected: Option<JobId>,
    /// `k` was pressed: the job asked about.
    confirm: Option<JobId>,
    /// The last read or kill that failed: why.
    error: Option<String>,
}

/// The session's jobs and the panel.
#[derive(Debug, Clone, Default)]
pub struct Jobs {
    list: BTreeMap<JobId, JobInfo>,
    panel: Option<Panel>,
}

impl Jobs {
    /// How many run now (the status line's "N jobs").
    pub fn running(&self) -> usize {
        let running = |j: &&JobInfo| j.state == JobState::Running;
        self.list.values().filter(running).count()
    }

    /// The jobs as shown: running first, then by id.
    pub fn shown(&self) -> Vec<&JobInfo> {
        let mut all: Vec<&JobInfo> = self.list.values().collect();
        all.sort_by_key(|j| (j.state != JobState::Running, j.id));
        all
    }

    pub fn is_open(&self) -> bool {
        self.panel.is_some()
    }

    /// Opens the panel on the list.
    pub fn open(&mut self) {
        let selected = self.shown().first().map(|j| j.id);
        self.panel = Some(Panel {
            mode: Mode::List,
            selected,
            confirm: None,
            error: None,
        });
    }

    pub fn close(&mut self) {
        self.panel = None;
    }

    /// `get_jobs`' list: what the session holds now (another session's are forgotten).
    pub fn listed(&mut self, jobs: Vec<JobInfo>) {
        self.list = jobs.into_iter().map(|j| (j.id, j)).collect();
        if let Some(p) = &mut self.panel {
            if p.selected.is_none_or(|id| !self.list.contains_key(&id)) {
                let mut all: Vec<&JobInfo> = self.list.values().collect();
                all.sort_by_key(|j| (j.state != JobState::Running, j.id));
                p.selected = all.first().map(|j| j.id);
            }
        }
    }

    /// Folds a public event in; a read to send when the tailed job wrote.
    pub fn on_event(&mut self, event: &WireEvent) -> Option<(JobId, u64)> {
        match event {
            WireEvent::JobStarted { job } | WireEvent::JobEnded { job } => {
                let job = job.as_ref().clone();
                if let Some(p) = &mut self.panel {
                    p.selected.get_or_insert(job.id);
                }
                let id = job.id;
                let bytes = job.bytes;
                self.list.insert(id, job);
                self.tail_wants(id, bytes)
            }
            WireEvent::JobOutput { id, next } => {
                if let Some(j) = self.list.get_mut(id) {
                    j.bytes = j.bytes.max(*next);
                }
                self.tail_wants(*id, *next)
            }
            _ => None,
        }
    }

    /// Job `id`'s output ends at `end`: the read the tail needs, if it follows that job and
    /// has none under way.
    fn tail_wants(&mut self, id: JobId, end: u64) -> Option<(JobId, u64)> {
        let tail = self.tail_mut().filter(|t| t.id == id)?;
        tail.wanted = tail.wanted.max(end);
        (tail.wanted > tail.next && !tail.reading).then(|| {
            tail.reading = true;
            (id, tail.next)
        })
    }

    fn tail_mut(&mut self) -> Option<&mut Tail> {
        match &mut self.panel.as_mut()?.mode {
            Mode::Tail(t) => Some(t),
            Mode::List => None,
        }
    }

    /// A `read_job` answer (`Err`: the host's text); the next read when more was written
    /// meanwhile.
    pub fn on_read(&mut self, read: Result<JobReadData, String>) -> Option<(JobId, u64)> {
        let read = match read {
            Ok(r) => r,
            Err(e) => {
                if let Some(t) = self.tail_mut() {
                    t.reading = false;
                }
                if let Some(p) = &mut self.panel {
                    p.error = Some(e);
                }
                return None;
            }
        };
        let tail = self.tail_mut().filter(|t| t.id == read.id)?;
        tail.reading = false;
        if read.from < tail.next || read.next <= tail.next {
            // An answer to an older read (the tail was left and opened again).
            return None;
        }
        tail.dropped += read.dropped;
        tail.lines.push(&read.bytes().unwrap_or_default());
        tail.next = read.next;
        let (id, end) = (tail.id, tail.wanted);
        self.tail_wants(id, end)
    }

    /// A `kill_job` that failed: why, in the panel.
    pub fn kill_failed(&mut self, why: String) {
        if let Some(p) = &mut self.panel {
            p.error = Some(why);
        }
    }

    /// Applies a key to the open panel.
    pub fn handle_key(&mut self, key: KeyEvent) -> JobsKey {
        if key.kind == KeyEventKind::Release {
            return JobsKey::None;
        }
        let shown: Vec<JobId> = self.shown().iter().map(|j| j.id).collect();
        let Some(p) = &mut self.panel else {
            return JobsKey::None;
        };
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        if let Some(id) = p.confirm.take() {
            return match key.code {
                KeyCode::Char('y') | KeyCode::Enter if !ctrl => JobsKey::Kill(id),
                _ => JobsKey::None,
            };
        }
        p.error = None;
        let tailing = match &p.mode {
            Mode::Tail(t) => Some(t.id),
            Mode::List => None,
        };
        match key.code {
            KeyCode::Char('c') if ctrl => JobsKey::Close,
            KeyCode::Esc | KeyCode::Char('q') if tailing.is_some() => {
                p.mode = Mode::List;
                JobsKey::None
            }
            KeyCode::Esc | KeyCode::Char('q') => JobsKey::Close,
            KeyCode::Char('k') => {
                let id = tailing.or(p.selected);
                p.confirm = id.filter(|id| self.list.get(id).is_some_and(is_running));
                JobsKey::None
            }
            KeyCode::Up | KeyCode::Down if tailing.is_none() => {
                let at = p
                    .selected
                    .and_then(|s| shown.iter().position(|id| *id == s));
                let at = match (key.code, at) {
                    (KeyCode::Up, Some(i)) => i.saturating_sub(1),
                    (KeyCode::Down, Some(i)) => (i + 1).min(shown.len().saturating_sub(1)),
                    _ => 0,
                };
                p.selected = shown.get(at).copied();
                JobsKey::None
            }
            KeyCode::Enter if tailing.is_none() => {
                let Some(job) = p.selected.and_then(|id| self.list.get(&id)) else {
                    return JobsKey::None;
                };
                let since = job.bytes.saturating_sub(TAIL_FIRST);
                p.mode = Mode::Tail(Box::new(Tail {
                    id: job.id,
                    lines: Lines::default(),
                    next: since,
                    wanted: job.bytes,
                    reading: true,
                    dropped: 0,
                }));
                JobsKey::Read(job.id, since)
            }
            _ => JobsKey::None,
        }
    }

    /// Rows the panel wants: title, subtitle, then the list or the tail.
    pub fn desired_height(&self, max_rows: u16) -> u16 {
        let body = match self.panel.as_ref().map(|p| &p.mode) {
            Some(Mode::Tail(_)) => TAIL_ROWS,
            _ => self.list.len().clamp(1, LIST_ROWS),
        };
        (2 + body).min(max_rows as usize) as u16
    }

    /// Draws the panel into `area` of `buf`; every cell of the area is redrawn.
    pub fn render(&self, area: Rect, buf: &mut Buffer) {
        let Some(p) = &self.panel else { return };
        rows::frame(
            area,
            buf,
            |w| self.title(p, w),
            |_| self.subtitle(p),
            |rest, buf| match &p.mode {
                Mode::List => self.render_list(p, rest, buf),
                Mode::Tail(t) => render_tail(t, rest, buf),
            },
        );
    }

    fn title(&self, p: &Panel, w: usize) -> Line<'static> {
        let (title, hints) = match &p.mode {
            Mode::List => (
                format!(
                    "Jobs · {} running · {} in all",
                    self.running(),
                    self.list.len()
                ),
                "Enter: tail · k: kill · Esc: close",
            ),
            Mode::Tail(t) => (
                match self.list.get(&t.id) {
                    Some(j) => format!("Job {} · {}", j.id, state_text(j)),
                    None => format!("Job {}", t.id),
                },
                "k: kill · Esc: back",
            ),
        };
        let full = Line::from(vec![
            Span::styled(title.clone(), with(BOLD)),
            Span::styled(format!("  ·  {hints}"), with(DIM)),
        ]);
        match crate::front::tui::paint::line_width(&full) <= w {
            true => full,
            false => Line::styled(title, with(BOLD)),
        }
    }

    /// The question, an error, the tailed command, or what the panel is.
    fn subtitle(&self, p: &Panel) -> Line<'static> {
        if let Some(id) = p.confirm {
            let cmd = self.list.get(&id).map(|j| command_line(&j.command));
            return Line::from(vec![
                Span::styled(
                    format!("Kill job {id} (`{}`)?", cmd.unwrap_or_default()),
                    with(BOLD),
                ),
                Span::styled("  y: kill · any other key: keep it", with(DIM)),
            ]);
        }
        if let Some(e) = &p.error {
            return Line::styled(crate::text::sanitize(e), with(DIM));
        }
        match &p.mode {
            Mode::Tail(t) => {
                let cmd = self.list.get(&t.id).map(|j| command_line(&j.command));
                let mut s = format!("$ {}", cmd.unwrap_or_default());
                if t.dropped > 0 {
                    s.push_str(&format!("  ({} no longer held)", size(t.dropped)));
                }
                Line::styled(s, with(DIM))
            }
            Mode::List => Line::styled(
                "Background jobs of this session (they run on when the window closes)",
                with(DIM),
            ),
        }
    }

    fn render_list(&self, p: &Panel, area: Rect, buf: &mut Buffer) {
        let n = area.height as usize;
        if n == 0 {
            return;
        }
        let shown = self.shown();
        if shown.is_empty() {
            let none =
                "No background jobs yet (the model starts them with bash's run_in_background)";
            put(buf, area, area.y, &Line::styled(none, with(DIM)));
            return;
        }
        let cells: Vec<[String; 4]> = shown
            .iter()
            .map(|j| {
                [
                    format!("#{}", j.id),
                    state_text(j),
                    j.pid.map_or("-".into(), |p| p.to_string()),
                    size(j.bytes),
                ]
            })
            .collect();
        let widths: Vec<usize> = (0..4)
            .map(|c| cells.iter().map(|r| r[c].len()).max().unwrap_or(0))
            .collect();
        let at = p
            .selected
            .and_then(|s| shown.iter().position(|j| j.id == s))
            .unwrap_or(0);
        let top = at.saturating_sub(n - 1);
        let gap = " ".repeat(GAP);
        for (row, (job, cells)) in shown.iter().zip(&cells).enumerate().skip(top).take(n) {
            let selected = row == at;
            let marker = match selected {
                true => MARKER.to_string(),
                false => " ".repeat(crate::text::width(MARKER)),
            };
            let mut text = marker;
            for (c, w) in cells.iter().zip(&widths) {
                text.push_str(&format!("{c:<w$}{gap}"));
            }
            text.push_str(&command_line(&job.command));
            let y = area.y + (row - top) as u16;
            let line = Line::raw(text);
            match selected {
                true => {
                    blank(buf, area, y, with(REVERSED));
                    put(buf, area, y, &line.style(with(REVERSED)));
                }
                false => put(buf, area, y, &line),
            }
        }
    }
}

fn render_tail(t: &Tail, area: Rect, buf: &mut Buffer) {
    let lines = t.lines.last(area.height as usize);
    if lines.is_empty() {
        let what = match t.reading {
            true => "reading…",
            false => "no output yet",
        };
        put(buf, area, area.y, &Line::styled(what, with(DIM)));
    }
    for (i, l) in lines.iter().enumerate() {
        put(buf, area, area.y + i as u16, &Line::raw(l.to_string()));
    }
}

fn is_running(j: &JobInfo) -> bool {
    j.state == JobState::Running
}

/// `running`, `exited 0`, `exited (signal 9)`, `killed`, `lost`.
pub fn state_text(j: &JobInfo) -> String {
    match j.state {
        JobState::Running => "running".into(),
        JobState::Exited => match (j.exit_code, j.signal) {
            (Some(c), _) => format!("exited {c}"),
            (None, Some(s)) => format!("exited (signal {s})"),
            (None, None) => "exited".into(),
        },
        JobState::Killed => "killed".into(),
        JobState::Lost => "lost".into(),
    }
}

/// A command's first line, sanitized (`…` when it has more).
fn command_line(command: &str) -> String {
    let mut lines = command.lines();
    let first = crate::text::sanitize(lines.next().unwrap_or("").trim());
    match lines.next() {
        Some(_) => format!("{first} …"),
        None => first,
    }
}

/// `/jobs` where no panel can be drawn (`TERM=dumb`): one line per job.
pub fn plain_list(jobs: &[JobInfo]) -> String {
    if jobs.is_empty() {
        return "no background jobs in this session".into();
    }
    let mut all: Vec<&JobInfo> = jobs.iter().collect();
    all.sort_by_key(|j| (j.state != JobState::Running, j.id));
    let mut s = String::from("background jobs:");
    for j in all {
        let pid = j.pid.map_or("-".into(), |p| p.to_string());
        s.push_str(&format!(
            "\n  #{}  {}  pid {pid}  {}  {}",
            j.id,
            state_text(j),
            size(j.bytes),
            command_line(&j.command)
        ));
    }
    s
}

#[cfg(test)]
mod tests;
