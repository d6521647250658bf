//! Everything the TUI shows and how keys change it: the transcript model, the composer, the
//! approval dialog, the session picker and the status line (laid out by `view/screen.rs`).
//! It learns what the agent does
//! from public events only (`wire::events::WireEvent`, the wire vocabulary). Keys become [`Action`]s for
//! the controller (`tui/client.rs`) to send as pi commands to the session's host (in this
//! process or in the daemon); the view itself never calls the host and never writes to a
//! terminal, so every screen can be rendered in tests.

use std::collections::VecDeque;
use std::path::PathBuf;

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::text::Line;
use serde_json::Value;

mod approval;
mod menu;
mod plain;
mod screen;
pub mod slash;
mod todos;
pub use screen::fmt_tokens;

use super::composer::Composer;
use super::jobs::JobsKey;
use super::picker::{Picker, PickerAction};
use super::rewind::{RewindKey, RewindPicker};
use super::transcript::{HistoryCell, Layout, Transcript};
use crate::kernel::agent::Permission;
use crate::kernel::event::ApprovalDecision;
use crate::wire::events::{UiMethod, UiRequest, WireEvent};
use approval::Approval;

/// Slash commands with their one-line help, in the order `/help` lists them.
pub const COMMANDS: &[(&str, &str)] = &[
    (
        "model",
        "switch model: /model provider/id (no argument lists them)",
    ),
    (
        "thinking",
        "set the thinking level: /thinking high (no argument cycles)",
    ),
    (
        "compact",
        "summarise older messages to free context: /compact [focus]",
    ),
    ("new", "start a new session"),
    ("clear", "start over in a new session and clear the screen"),
    (
        "cost",
        "what this session cost: tokens, time and the lines changed",
    ),
    (
        "init",
        "write or improve AGENTS.md with the model: /init [guidance]",
    ),
    ("resume", "pick a session to resume"),
    (
        "fork",
        "continue in a copy of this session (this one stays as it is)",
    ),
    (
        "rewind",
        "go back to before a prompt (Esc Esc); /rewind undo puts it back",
    ),
    ("export", "write the session as HTML: /export [file.html]"),
    ("session", "show the session id, file and usage"),
    (
        "transcript",
        "the whole session in a pager, every output in full (/ searches, q closes)",
    ),
    ("name", "name this session: /name my refactor"),
    (
        "jobs",
        "the background jobs: Enter tails one's output, k kills it",
    ),
    (
        "hooks",
        "the configured hooks: event, matcher, command, file and trust",
    ),
    (
        "agents",
        "the subagent types the task tool can start, with their origin",
    ),
    (
        "permissions",
        "the permission mode (Shift+Tab cycles it) and the rules in force",
    ),
    ("help", "show commands and keys"),
    ("quit", "leave keel (the session is saved)"),
];

/// `/detach`, offered (in `/help` and the `/` menu) only in a window attached to the daemon:
/// in this process there is nothing to leave running.
pub const DETACH: (&str, &str) = (
    "detach",
    "leave this window; the session and its run go on in the keel daemon (keel attach)",
);

/// The commands a view offers, in `/help`'s order (`attached`: with `/detach`, before `/quit`).
pub fn commands(attached: bool) -> Vec<(&'static str, &'static str)> {
    let mut list = COMMANDS.to_vec();
    if attached {
        list.insert(list.len().saturating_sub(1), DETACH);
    }
    list
}

/// How soon after a first Esc on an empty, idle editor a second one opens the rewind picker.
pub const ESC_ESC_MS: i64 = 1000;

/// How soon after Ctrl+C interrupted a run a second Ctrl+C quits.
pub const QUIT_WINDOW_MS: i64 = 1000;

/// What the controller should do after a key or an event.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Prompt(String),
    Steer(String),
    FollowUp(String),
    /// Esc while working: abort the run and put the queued messages back into the editor.
    Abort,
    Approve {
        call_id: String,
        decision: ApprovalDecision,
    },
    /// Allow the call and, from now on, the calls like it (the session saves the rule).
    AllowAlways {
        call_id: String,
    },
    /// Deny the call and tell the model why (the message reaches it as steering, before it
    /// answers again).
    DenyWithMessage {
        call_id: String,
        message: String,
    },
    /// A slash command (not a template): name without `/`, and the rest of the line.
    Command {
        name: String,
        args: String,
    },
    /// `!command`: run it in the shell and show the output (sent to the model with the next
    /// prompt).
    Bash(String),
    OpenSession(PathBuf),
    Quit,
    /// Shift+Tab: the session's permission mode from now on.
    SetPermission(Permission),
    /// Ctrl+G: the latest subagent's transcript, read-only (Esc returns).
    OpenSubagent(super::transcript::ChildRef),
    /// The rewind picker highlights this user message: fetch its preview.
    RewindPreview(String),
    /// Rewind `restore` to before the user message `entry_id` (the rewind picker's choice;
    /// `prompt`: the message's first line, for the report).
    Rewind {
        entry_id: String,
        prompt: String,
        restore: crate::kernel::checkpoint::Restore,
    },
    /// `/jobs` follows job `id`: read its output from offset `since` (`read_job`).
    ReadJob {
        id: crate::kernel::jobs::JobId,
        since: u64,
    },
    /// `/jobs`: kill job `id` (`kill_job`), the user said yes.
    KillJob(crate::kernel::jobs::JobId),
}

/// The laid-out live area of one frame.
#[derive(Debug, Clone, Default)]
pub struct LiveFrame {
    pub height: u16,
    pub cursor: Option<(u16, u16)>,
    rows: Vec<Line<'static>>,
    picker: bool,
}

/// The whole interactive state.
pub struct View {
    pub transcript: Transcript,
    pub composer: Composer,
    pub layout: Layout,
    picker: Option<Picker>,
    /// The rewind picker (`/rewind`, Esc Esc), while it is open.
    rewind: Option<RewindPicker>,
    /// When Esc was pressed on an empty, idle editor (a second press soon after rewinds).
    esc_at: Option<i64>,
    approvals: VecDeque<Approval>,
    /// A one-line hint under the status line (e.g. "press Ctrl+C again to quit").
    hint: Option<String>,
    quit_armed: bool,
    /// When Ctrl+C interrupted a run (a second press within [`QUIT_WINDOW_MS`] quits).
    interrupted_at: Option<i64>,
    /// Frame counter for spinners.
    pub spinner: usize,
    /// "Now" in unix ms, set by the controller before each frame (injected for tests).
    pub now_ms: i64,
    /// The model's context window, for the status line's percentage.
    pub context_window: u64,
    /// The `statusLine` command's last line and its padding, shown under the editor.
    pub script_status: Option<(String, u16)>,
    /// Names of prompt templates and skills (`get_commands`), offered after `/`.
    pub templates: Vec<(String, String)>,
    /// Where the session runs when not in this process (the status line's last part).
    pub place: Option<String>,
    /// The sandbox of the model's commands (`sandbox: workspace-write · net off`).
    pub sandbox: Option<String>,
    /// The git worktree the session runs in (`⎇ keel/NAME`).
    pub worktree: Option<String>,
    /// The view shows a session of the keel daemon (`/detach` is offered).
    pub attached: bool,
    /// The daemon's connection was lost at this time (unix ms): no spinner, no running
    /// timers, the run's state is unknown until the view reconnects.
    pub disconnected: Option<i64>,
    /// The session shown takes no more prompts (a subagent that finished): the editor's
    /// placeholder says this instead of inviting one.
    pub ended: Option<String>,
    /// The project's files, for the `@` menu (`None`: no menu).
    pub files: Option<super::files::FileIndex>,
    /// The `@` menu, while an `@` word is typed and files match it.
    pub mention: Option<super::files::Menu>,
    /// The `@` word whose menu Esc closed (it stays closed until the word changes).
    mention_dismissed: Option<String>,
    /// The `/` menu, while a command name is typed.
    pub slash: slash::Slash,
    /// The last lines written to scrollback (what a screen shows above the live area).
    shown: VecDeque<Line<'static>>,
    /// Whether anything was written to the history yet (no blank line before the first cell).
    wrote_any: bool,
    /// Whether the last cell written was part of an answer (its next lines follow directly).
    last_was_answer: bool,
    /// The session's permission mode, in the status line (`None`: not known, not shown).
    pub permission: Option<Permission>,
    /// The session's background jobs and the `/jobs` panel.
    pub jobs: super::jobs::Jobs,
}

impl Default for View {
    fn default() -> Self {
        View::new()
    }
}

impl View {
    pub fn new() -> Self {
        View {
            transcript: Transcript::new(),
            composer: Composer::new(),
            layout: Layout::default(),
            picker: None,
            rewind: None,
            esc_at: None,
            approvals: VecDeque::new(),
            hint: None,
            quit_armed: false,
            interrupted_at: None,
            spinner: 0,
            now_ms: 0,
            context_window: 0,
            templates: Vec::new(),
            script_status: None,
            place: None,
            sandbox: None,
            worktree: None,
            attached: false,
            disconnected: None,
            ended: None,
            files: None,
            mention: None,
            mention_dismissed: None,
            slash: slash::Slash::default(),
            shown: VecDeque::new(),
            wrote_any: false,
            last_was_answer: false,
            permission: None,
            jobs: super::jobs::Jobs::default(),
        }
    }

    /// Opens the session picker over the composer.
    pub fn open_picker(&mut self, picker: Picker) {
        self.picker = Some(picker);
    }

    pub fn picker_open(&self) -> bool {
        self.picker.is_some()
    }

    /// Opens the rewind picker over the composer; gives the message whose preview it needs.
    pub fn open_rewind(&mut self, mut picker: RewindPicker) -> Option<String> {
        let wanted = picker.wanted_preview();
        self.rewind = Some(picker);
        wanted
    }

    pub fn rewind_open(&self) -> bool {
        self.rewind.is_some()
    }

    /// A preview for the rewind picker (`Err`: the host's error text).
    pub fn rewind_preview(
        &mut self,
        entry_id: &str,
        preview: Result<crate::wire::pi::data::RewindPreviewData, String>,
    ) {
        if let Some(r) = &mut self.rewind {
            r.set_preview(entry_id, preview);
        }
    }

    /// The status line's sandbox part, from the session's sandbox: `sandbox: workspace-write ·
    /// net off`, `sandbox: off`, or what is wrong (`None`: not known, nothing shown).
    pub fn set_sandbox(&mut self, s: Option<&crate::wire::protocol::snapshot::SandboxState>) {
        self.sandbox = s.map(|s| format!("sandbox: {}", s.label()));
    }

    /// Shows a transient hint under the status line until the next key.
    pub fn set_hint(&mut self, hint: impl Into<String>) {
        self.hint = Some(hint.into());
    }

    pub fn clear_hint(&mut self) {
        self.hint = None;
    }

    /// Adds a front-end cell (a command's answer, a notice) to the history.
    pub fn notice(&mut self, cell: HistoryCell) {
        self.transcript.push(cell);
    }

    /// Folds a public event in (`at_ms`: when it happened); returns actions the user already
    /// decided (always-allowed tools are approved without asking again).
    pub fn on_event(&mut self, event: &WireEvent, at_ms: i64) -> Vec<Action> {
        self.transcript.on_event(event, at_ms);
        if let Some((id, since)) = self.jobs.on_event(event) {
            return vec![Action::ReadJob { id, since }];
        }
        match event {
            WireEvent::ExtensionUiRequest(r) if r.method == UiMethod::Confirm => {
                let approval = self.approval(r);
                self.approvals.push_back(approval);
            }
            WireEvent::ToolExecutionEnd { tool_call_id, .. }
            | WireEvent::ToolExecutionUpdate { tool_call_id, .. } => {
                self.approvals.retain(|a| a.call_id != *tool_call_id);
            }
            // A subagent's question, answered elsewhere (or its child ended).
            WireEvent::DialogResolved { id } => self.approvals.retain(|a| a.call_id != *id),
            WireEvent::AgentSettled { .. } => self.approvals.clear(),
            WireEvent::PermissionModeChanged { mode } => {
                if let Some(mode) = Permission::parse(mode) {
                    self.permission = Some(mode);
                }
            }
            _ => {}
        }
        Vec::new()
    }

    /// The call a `confirm` dialog asks about: named by the dialog (the host's shape), else by
    /// the running call it is for (the kernel's shape has only a title and the arguments as
    /// JSON text).
    fn approval(&self, r: &UiRequest) -> Approval {
        let running = self.transcript.running.iter().find(|t| t.call_id == r.id);
        let tool_name = r
            .tool_name
            .as_ref()
            .map(|t| t.to_string())
            .or_else(|| running.map(|t| t.name.clone()))
            .unwrap_or_else(|| "tool".into());
        let args = r
            .args
            .as_ref()
            .map(|a| a.clone().into_owned())
            .or_else(|| running.map(|t| t.args.clone()))
            .or_else(|| serde_json::from_str(&r.message).ok())
            .unwrap_or(Value::Null);
        let mut a = Approval::new(r.id.to_string(), tool_name, args);
        a.preview = r.preview.clone().map(|p| p.into_owned());
        a.from = r.subagent.as_ref().map(|c| {
            let what = crate::text::sanitize(&c.description);
            format!(
                "{} subagent ({what}) asks:",
                crate::text::sanitize(&c.agent_type)
            )
        });
        a
    }

    /// Shift+Tab: the next permission mode, shown at once (the session is told).
    fn cycle_permission(&mut self) -> Option<Action> {
        let next = self.permission?.next();
        self.permission = Some(next);
        Some(Action::SetPermission(next))
    }

    /// Puts texts (queued messages taken back after an abort) in front of the editor's text.
    pub fn restore_to_composer(&mut self, texts: Vec<String>) {
        if texts.is_empty() {
            return;
        }
        let mut all = texts;
        let current = self.composer.text();
        if !current.trim().is_empty() {
            all.push(current);
        }
        self.composer.set_text(&all.join("\n"));
    }

    /// Handles a key; returns what the controller must do.
    pub fn on_key(&mut self, key: KeyEvent) -> Option<Action> {
        if key.kind == KeyEventKind::Release {
            return None;
        }
        if let Some(picker) = &mut self.picker {
            return match picker.handle_key(key) {
                PickerAction::None => None,
                PickerAction::Cancel => {
                    self.picker = None;
                    None
                }
                PickerAction::Open(path) => {
                    self.picker = None;
                    Some(Action::OpenSession(path))
                }
            };
        }
        if let Some(rewind) = &mut self.rewind {
            return match rewind.handle_key(key) {
                RewindKey::None => None,
                RewindKey::Preview(id) => Some(Action::RewindPreview(id)),
                RewindKey::Rewind {
                    entry_id,
                    prompt,
                    restore,
                } => {
                    self.rewind = None;
                    Some(Action::Rewind {
                        entry_id,
                        prompt,
                        restore,
                    })
                }
                RewindKey::Close => {
                    self.rewind = None;
                    None
                }
            };
        }
        if self.jobs.is_open() {
            return match self.jobs.handle_key(key) {
                JobsKey::None => None,
                JobsKey::Read(id, since) => Some(Action::ReadJob { id, since }),
                JobsKey::Kill(id) => Some(Action::KillJob(id)),
                JobsKey::Close => {
                    self.jobs.close();
                    None
                }
            };
        }
        let esc_at = self.esc_at.take();
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let was_armed = std::mem::take(&mut self.quit_armed);
        self.hint = None;
        if !self.approvals.is_empty() {
            // The dialog has the keyboard: only its answers and Ctrl+C do anything.
            let action = self.approval_key(key);
            if action.is_some() || key.code != KeyCode::Char('c') || !ctrl {
                return action;
            }
        }
        if self.mention.is_some() && self.mention_key(key) {
            return None;
        }
        if let Some(action) = self.slash_key(key) {
            return action;
        }
        if key.code == KeyCode::BackTab {
            return self.cycle_permission();
        }
        let action = self.editor_key(key, ctrl, was_armed, esc_at);
        self.refresh_mention();
        self.refresh_slash();
        action
    }

    /// A key for the open `@` menu: Up/Down choose, Tab or Enter put `@path ` in the editor,
    /// Esc closes it. False for any other key (it edits as usual).
    fn mention_key(&mut self, key: KeyEvent) -> bool {
        let Some(menu) = &mut self.mention else {
            return false;
        };
        match menu::key(&mut menu.choice, &key) {
            menu::MenuKey::Pass => return false,
            menu::MenuKey::Moved => {}
            menu::MenuKey::Complete(i) | menu::MenuKey::Enter(i) => {
                if let Some(path) = menu.matches.get(i).cloned() {
                    self.composer
                        .replace_word_before_cursor(&format!("@{} ", quote_path(&path)));
                }
                self.mention = None;
            }
            menu::MenuKey::Close => {
                self.mention_dismissed = Some(menu.query.clone());
                self.mention = None;
            }
        }
        true
    }

    /// Opens, updates or closes the `@` menu for the word before the cursor.
    fn refresh_mention(&mut self) {
        let Some(files) = &mut self.files else { return };
        let word = self.composer.word_before_cursor();
        let Some(query) = super::files::mention_query(word) else {
            self.mention = None;
            self.mention_dismissed = None;
            return;
        };
        if self.mention_dismissed.as_deref() == Some(query) {
            return;
        }
        self.mention_dismissed = None;
        if self.mention.as_ref().is_some_and(|m| m.query == query) {
            return;
        }
        let matches = files.matches(query, super::files::MENU_MATCHES);
        self.mention = (!matches.is_empty()).then(|| super::files::Menu::new(query, matches));
    }

    fn editor_key(
        &mut self,
        key: KeyEvent,
        ctrl: bool,
        was_armed: bool,
        esc_at: Option<i64>,
    ) -> Option<Action> {
        match key.code {
            KeyCode::Char('c') if ctrl => self.ctrl_c(was_armed),
            KeyCode::Char('d') if ctrl && self.composer.is_empty() => Some(Action::Quit),
            KeyCode::Char('t') if ctrl => {
                self.layout.show_thinking = !self.layout.show_thinking;
                self.set_hint(if self.layout.show_thinking {
                    "thinking is shown in full from now on"
                } else {
                    "thinking is collapsed from now on"
                });
                None
            }
            KeyCode::Char('o') if ctrl => {
                self.layout.expand_tools = !self.layout.expand_tools;
                self.set_hint(if self.layout.expand_tools {
                    "tool output is expanded from now on"
                } else {
                    "tool output is collapsed from now on"
                });
                None
            }
            KeyCode::Char('g') if ctrl => match self.transcript.children.last() {
                Some(child) => Some(Action::OpenSubagent(child.clone())),
                None => {
                    self.set_hint("no subagent has run in this session yet");
                    None
                }
            },
            KeyCode::Esc if self.transcript.is_running() => Some(Action::Abort),
            // Esc Esc on an empty editor while nothing runs: the rewind picker.
            KeyCode::Esc if self.composer.is_empty() && key.modifiers.is_empty() => {
                match esc_at.is_some_and(|at| self.now_ms - at <= ESC_ESC_MS) {
                    true => Some(Action::Command {
                        name: "rewind".into(),
                        args: String::new(),
                    }),
                    false => {
                        self.esc_at = Some(self.now_ms);
                        None
                    }
                }
            }
            KeyCode::Enter if key.modifiers.contains(KeyModifiers::ALT) => self.submit(true),
            // The editor takes a plain Enter after a backslash (a newline); else it sends.
            KeyCode::Enter if key.modifiers.is_empty() => {
                if self.composer.handle_key(key) {
                    None
                } else {
                    self.submit(false)
                }
            }
            KeyCode::Tab => {
                self.complete();
                None
            }
            _ => {
                self.composer.handle_key(key);
                None
            }
        }
    }

    /// Pasted text goes into the editor as it is (newlines included), a big paste as a chip.
    pub fn on_paste(&mut self, text: &str) {
        if self.rewind.is_some() || self.jobs.is_open() {
            return;
        }
        if let Some(picker) = &mut self.picker {
            for c in text.chars().filter(|c| !c.is_control()) {
                picker.handle_key(KeyEvent::from(KeyCode::Char(c)));
            }
            return;
        }
        self.composer.paste(text);
        self.refresh_mention();
        self.refresh_slash();
    }

    /// Ctrl+C: during a run, interrupts it (as Esc), and a second press within
    /// [`QUIT_WINDOW_MS`] quits; idle, clears the editor, and on an empty one a second press
    /// quits.
    fn ctrl_c(&mut self, was_armed: bool) -> Option<Action> {
        let recent = self
            .interrupted_at
            .is_some_and(|at| self.now_ms - at <= QUIT_WINDOW_MS);
        if recent && was_armed {
            return Some(Action::Quit);
        }
        if self.transcript.is_running() {
            self.interrupted_at = Some(self.now_ms);
            self.quit_armed = true;
            self.set_hint("interrupting · press Ctrl+C again to quit (the session is saved)");
            return Some(Action::Abort);
        }
        if !self.composer.is_empty() {
            self.composer.clear();
            return None;
        }
        if was_armed {
            return Some(Action::Quit);
        }
        self.quit_armed = true;
        self.set_hint("press Ctrl+C again to quit (the session is saved)");
        None
    }

    /// Enter (or Alt+Enter: `follow_up`) on the composer's text.
    fn submit(&mut self, follow_up: bool) -> Option<Action> {
        let text = self.composer.text();
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return None;
        }
        if let Some(rest) = trimmed.strip_prefix('/') {
            let name_end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            let name = &rest[..name_end];
            let args = rest[name_end..].trim().to_string();
            // `/exit` is `/quit`; `/detach` leaves a daemon session running (the in-process
            // controller says it has no daemon).
            if COMMANDS.iter().any(|(c, _)| *c == name) || name == "exit" || name == "detach" {
                self.composer.take();
                return Some(Action::Command {
                    name: name.to_string(),
                    args,
                });
            }
            if !self.templates.iter().any(|(t, _)| t == name) {
                // Nothing goes to the model; the editor is emptied (Up brings the text back).
                self.composer.take();
                self.notice(HistoryCell::Error(format!(
                    "unknown command /{name}: /help lists the commands"
                )));
                return None;
            }
        }
        if let Some(cmd) = trimmed.strip_prefix('!') {
            if cmd.trim().is_empty() {
                return None;
            }
            let cmd = cmd.trim().to_string();
            self.composer.take();
            return Some(Action::Bash(cmd));
        }
        let text = self.composer.take();
        Some(match (self.transcript.is_running(), follow_up) {
            (false, _) => Action::Prompt(text),
            (true, false) => Action::Steer(text),
            (true, true) => Action::FollowUp(text),
        })
    }

    /// Tab after `/na`: completes a command or template name when one matches.
    fn complete(&mut self) {
        let text = self.composer.text();
        let Some(prefix) = text.strip_prefix('/') else {
            return;
        };
        if prefix.contains(char::is_whitespace) {
            return;
        }
        let names = self.command_names();
        let matches: Vec<&String> = names.iter().filter(|n| n.starts_with(prefix)).collect();
        if let [one] = matches.as_slice() {
            self.composer.set_text(&format!("/{one} "));
        }
    }

    fn command_names(&self) -> Vec<String> {
        commands(self.attached)
            .iter()
            .map(|(c, _)| c.to_string())
            .chain(self.shown_templates().map(|(t, _)| t.clone()))
            .collect()
    }
}

/// A path as an `@` word: one with whitespace is quoted (`@"my notes.md"`).
fn quote_path(path: &str) -> String {
    match path.contains(char::is_whitespace) {
        true => format!("\"{path}\""),
        false => path.to_string(),
    }
}
