//! Claude Code's `statusLine` in the TUI: a command (`sh -c`, in the session's directory) that
//! reads Claude's status JSON on stdin and whose first line of stdout shows under the editor,
//! colours kept, cut to the width. It runs in the background when the session's state changed,
//! at most every [`MIN_GAP`], for at most [`TIMEOUT`]; a slow or failing command leaves its
//! last good line (a failure is logged once until it works again). A `statusLine` from the
//! project's own settings files is the repository's command: it runs only once the project's
//! settings are trusted. A session on a remote host (`--remote`) runs none.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use serde::Serialize;
use tokio::io::AsyncWriteExt;
use tokio::time::Instant;

pub use crate::setup::status_line::StatusCommand;
use crate::wire::pi::data::{SessionStats, State};

/// The shortest time between two runs of the command.
pub const MIN_GAP: Duration = Duration::from_millis(300);
/// How long one run may take; a slower one is killed and its last good line stays.
pub const TIMEOUT: Duration = Duration::from_secs(5);

/// When the command runs and what it last printed.
#[derive(Debug)]
pub struct Runner {
    pub command: StatusCommand,
    pub cwd: PathBuf,
    /// The state changed since the last run started.
    stale: bool,
    running: bool,
    last_start: Option<Instant>,
    /// A failure was logged (not again until a run works).
    failing: bool,
    /// The last good first line of stdout, as printed.
    pub line: Option<String>,
}

impl Runner {
    pub fn new(command: StatusCommand, cwd: PathBuf) -> Runner {
        Runner {
            command,
            cwd,
            stale: true,
            running: false,
            last_start: None,
            failing: false,
            line: None,
        }
    }

    /// The session's state changed: run again when allowed.
    pub fn touch(&mut self) {
        self.stale = true;
    }

    /// When the next run is due: `None` while one runs or nothing changed.
    pub fn due(&self) -> Option<Instant> {
        if !self.stale || self.running {
            return None;
        }
        Some(self.last_start.map_or_else(Instant::now, |t| t + MIN_GAP))
    }

    /// A run starts now.
    pub fn started(&mut self) {
        self.stale = false;
        self.running = true;
        self.last_start = Some(Instant::now());
    }

    /// A run ended; whether the line shown changed.
    pub fn finished(&mut self, out: Result<String, String>) -> bool {
        self.running = false;
        match out {
            Ok(line) => {
                self.failing = false;
                let changed = self.line.as_deref() != Some(line.as_str());
                self.line = Some(line);
                changed
            }
            Err(why) => {
                if !self.failing {
                    tracing::warn!("statusLine `{}`: {why}", self.command.command);
                }
                self.failing = true;
                false
            }
        }
    }
}

/// The row of a status `line` (as the command printed it) after `padding` blank columns, cut to
/// `width` columns; `None` for a blank line.
pub fn row(line: &str, padding: u16, width: usize) -> Option<Line<'static>> {
    if line.trim().is_empty() {
        return None;
    }
    let mut spans = vec![Span::raw(" ".repeat(padding as usize))];
    spans.extend(ansi_spans(line));
    Some(crate::front::tui::paint::truncate_line(
        &Line::from(spans),
        width,
    ))
}

/// Runs `command` with `input` on stdin; its first line of stdout, or why there is none.
pub async fn run(command: &str, cwd: &Path, input: Vec<u8>) -> Result<String, String> {
    let mut child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .current_dir(cwd)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot start: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        // A command that does not read its input is fine.
        let _ = stdin.write_all(&input).await;
    }
    let out = tokio::time::timeout(TIMEOUT, child.wait_with_output())
        .await
        .map_err(|_| format!("no answer within {}s", TIMEOUT.as_secs()))?
        .map_err(|e| format!("cannot read its output: {e}"))?;
    if !out.status.success() {
        return Err(format!("it ended with {}", out.status));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(text.lines().next().unwrap_or("").to_string())
}

/// Claude Code's status JSON (what its `statusLine` commands read on stdin).
#[derive(Debug, Serialize)]
pub struct StatusInput {
    pub hook_event_name: &'static str,
    pub session_id: String,
    pub transcript_path: String,
    pub cwd: String,
    pub model: ModelPart,
    pub workspace: Workspace,
    pub version: &'static str,
    pub output_style: OutputStyle,
    pub cost: CostPart,
    pub exceeds_200k_tokens: bool,
    pub context_window: ContextWindow,
}

#[derive(Debug, Serialize)]
pub struct ModelPart {
    pub id: String,
    pub display_name: String,
}

#[derive(Debug, Serialize)]
pub struct Workspace {
    pub current_dir: String,
    pub project_dir: String,
}

#[derive(Debug, Serialize)]
pub struct OutputStyle {
    pub name: &'static str,
}

#[derive(Debug, Serialize)]
pub struct CostPart {
    pub total_cost_usd: f64,
    pub total_duration_ms: u64,
    pub total_api_duration_ms: u64,
    pub total_lines_added: u64,
    pub total_lines_removed: u64,
}

#[derive(Debug, Serialize)]
pub struct ContextWindow {
    pub total_input_tokens: u64,
    pub total_output_tokens: u64,
    pub context_window_size: u64,
    pub used_percentage: Option<f64>,
    pub remaining_percentage: Option<f64>,
    /// Claude's last call's token counts; keel does not send them (always `null`).
    pub current_usage: Option<()>,
}

impl StatusInput {
    /// The JSON for a session in `cwd` from its state and stats (what is unknown is empty).
    pub fn new(state: Option<&State>, stats: Option<&SessionStats>, cwd: &Path) -> StatusInput {
        let dir = cwd.display().to_string();
        let model = state.and_then(|s| s.model.as_ref());
        let tokens = stats.map(|s| s.tokens).unwrap_or_default();
        let context = stats.map(|s| s.context_usage);
        let window = model.map_or(0, |m| m.context_window);
        let used = context
            .filter(|_| window > 0)
            .map(|c| (c.percent * 100.0).round() / 100.0);
        StatusInput {
            hook_event_name: "Status",
            session_id: state.map(|s| s.session_id.clone()).unwrap_or_default(),
            transcript_path: state
                .and_then(|s| s.session_file.clone())
                .unwrap_or_default(),
            cwd: dir.clone(),
            model: ModelPart {
                id: model.map(|m| m.id.clone()).unwrap_or_default(),
                display_name: model
                    .map(|m| if m.name.is_empty() { &m.id } else { &m.name })
                    .cloned()
                    .unwrap_or_default(),
            },
            workspace: Workspace {
                current_dir: dir.clone(),
                project_dir: dir,
            },
            version: env!("CARGO_PKG_VERSION"),
            output_style: OutputStyle { name: "default" },
            cost: CostPart {
                total_cost_usd: stats.map_or(0.0, |s| s.cost),
                total_duration_ms: stats.map_or(0, |s| s.duration_ms),
                total_api_duration_ms: stats.map_or(0, |s| s.api_duration_ms),
                total_lines_added: stats.map_or(0, |s| s.lines_added),
                total_lines_removed: stats.map_or(0, |s| s.lines_removed),
            },
            exceeds_200k_tokens: context.is_some_and(|c| c.tokens > 200_000),
            context_window: ContextWindow {
                total_input_tokens: tokens.input + tokens.cache_read + tokens.cache_write,
                total_output_tokens: tokens.output,
                context_window_size: window,
                used_percentage: used,
                remaining_percentage: used.map(|u| (100.0 - u).max(0.0)),
                current_usage: None,
            },
        }
    }
}

/// `text` with its SGR colour sequences as styles; other escape sequences and control
/// characters are dropped.
pub fn ansi_spans(text: &str) -> Vec<Span<'static>> {
    let mut spans = Vec::new();
    let mut style = Style::default();
    let mut buf = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\x1b' {
            if !c.is_control() {
                buf.push(c);
            }
            continue;
        }
        if chars.peek() != Some(&'[') {
            chars.next();
            continue;
        }
        chars.next();
        let mut params = String::new();
        let mut end = None;
        for c in chars.by_ref() {
            if ('\x40'..='\x7e').contains(&c) {
                end = Some(c);
                break;
            }
            params.push(c);
        }
        if end != Some('m') {
            continue;
        }
        if !buf.is_empty() {
            spans.push(Span::styled(std::mem::take(&mut buf), style));
        }
        style = sgr(style, &params);
    }
    if !buf.is_empty() {
        spans.push(Span::styled(buf, style));
    }
    spans
}

/// `style` changed by one SGR sequence's parameters.
fn sgr(mut style: Style, params: &str) -> Style {
    let codes: Vec<u16> = params.split(';').map(|p| p.parse().unwrap_or(0)).collect();
    let mut i = 0;
    while i < codes.len() {
        let code = codes[i];
        match code {
            0 => style = Style::default(),
            1 => style = style.add_modifier(Modifier::BOLD),
            2 => style = style.add_modifier(Modifier::DIM),
            3 => style = style.add_modifier(Modifier::ITALIC),
            4 => style = style.add_modifier(Modifier::UNDERLINED),
            7 => style = style.add_modifier(Modifier::REVERSED),
            22 => style = style.remove_modifier(Modifier::BOLD | Modifier::DIM),
            23 => style = style.remove_modifier(Modifier::ITALIC),
            24 => style = style.remove_modifier(Modifier::UNDERLINED),
            27 => style = style.remove_modifier(Modifier::REVERSED),
            30..=37 => style = style.fg(Color::Indexed((code - 30) as u8)),
            90..=97 => style = style.fg(Color::Indexed((code - 90 + 8) as u8)),
            39 => style = style.fg(Color::Reset),
            40..=47 => style = style.bg(Color::Indexed((code - 40) as u8)),
            100..=107 => style = style.bg(Color::Indexed((code - 100 + 8) as u8)),
            49 => style = style.bg(Color::Reset),
            38 | 48 => {
                let color = match codes.get(i + 1) {
                    Some(5) => {
                        let c = codes.get(i + 2).map(|n| Color::Indexed(*n as u8));
                        i += 2;
                        c
                    }
                    Some(2) => {
                        let rgb = |k: usize| codes.get(i + k).map_or(0, |n| *n as u8);
                        let c = Color::Rgb(rgb(2), rgb(3), rgb(4));
                        i += 4;
                        Some(c)
                    }
                    _ => None,
                };
                if let Some(c) = color {
                    style = match code {
                        38 => style.fg(c),
                        _ => style.bg(c),
                    };
                }
            }
            _ => {}
        }
        i += 1;
    }
    style
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_become_styles_and_other_escapes_go() {
        let spans = ansi_spans("\x1b[1;32mok\x1b[0m plain\x1b[2K \x1b[38;5;203mred\x07");
        let texts: Vec<&str> = spans.iter().map(|s| s.content.as_ref()).collect();
        assert_eq!(texts, ["ok", " plain ", "red"]);
        assert_eq!(spans[0].style.fg, Some(Color::Indexed(2)));
        assert!(spans[0].style.add_modifier.contains(Modifier::BOLD));
        assert_eq!(spans[1].style, Style::default());
        assert_eq!(spans[2].style.fg, Some(Color::Indexed(203)));
    }

    #[test]
    fn a_failure_keeps_the_last_good_line_and_is_logged_once() {
        let command = StatusCommand {
            command: "true".into(),
            padding: 2,
        };
        let mut r = Runner::new(command, PathBuf::from("/"));
        assert!(r.due().is_some(), "due at once");
        r.started();
        assert!(r.due().is_none(), "not while running");
        assert!(r.finished(Ok("line one".into())));
        assert!(r.due().is_none(), "nothing changed");
        r.touch();
        let due = r.due().unwrap();
        assert!(due >= Instant::now() + MIN_GAP - Duration::from_millis(50));
        r.started();
        assert!(!r.finished(Err("exit 1".into())));
        assert!(r.failing);
        assert_eq!(r.line.as_deref(), Some("line one"));
        let row = row(r.line.as_deref().unwrap(), r.command.padding, 80).unwrap();
        let text: String = row.spans.iter().map(|s| s.content.as_ref()).collect();
        assert_eq!(text, "  line one");
    }
}
