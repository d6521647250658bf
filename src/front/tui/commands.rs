//! The TUI's slash commands, each a pi command (or two) on the session's link, answered in
//! the background: the view stays live while the host works, and pi's error text becomes an
//! error cell. The same commands run in-process and through the daemon; only `/detach`,
//! `/quit` and `/session`'s "where it runs" differ.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use crate::wire::pi::data::{CommandsData, ExportData, LevelData, ModelsData, SessionStats, State};
use crate::wire::pi::{Command, NewSessionReason, StreamingBehavior};

use super::client::{Back, Client};
use super::transcript::HistoryCell;
use super::{help_text, picker, view};
use crate::wire::protocol::daemon::{self, DaemonInfo};
use crate::wire::protocol::session::{self, ListParams};
use crate::wire::protocol::NoParams;

/// How often a daemon client refreshes "windows attached" in its status line.
pub(super) const PLACE_REFRESH: std::time::Duration = std::time::Duration::from_secs(5);

impl Client {
    /// Sends a command in the background; its error (pi's text) becomes an error cell.
    pub(super) fn send(&self, command: Command) {
        self.in_back(|commands| async move {
            let sent = commands.send(&command).await;
            sent.err()
                .map(|e| Back::Notice(HistoryCell::Error(e.message)))
        });
    }

    /// Asks the session for its templates and skills, for the slash menu.
    pub(super) fn fetch_commands(&self) {
        self.in_back(|commands| async move {
            let got = commands.ask::<CommandsData>(&Command::GetCommands {}).await;
            let list = got.ok()?.commands.into_iter();
            Some(Back::Commands(
                list.map(|c| (c.name.clone(), view::slash::entry_text(&c)))
                    .collect(),
            ))
        });
    }

    /// Sends a command in the background and shows `say(data)`, or pi's error text.
    fn ask_and_tell<T: serde::de::DeserializeOwned>(
        &self,
        command: Command,
        say: impl FnOnce(T) -> String + Send + 'static,
    ) {
        self.in_back(|commands| async move {
            let cell = match commands.ask::<T>(&command).await {
                Ok(v) => HistoryCell::Notice(say(v)),
                Err(e) => HistoryCell::Error(e.message),
            };
            Some(Back::Notice(cell))
        });
    }

    pub(super) fn open_picker(&mut self) {
        if let Some(d) = self.daemon.as_ref().filter(|d| d.dial.remote().is_some()) {
            // The session files are the remote host's: its daemon lists them.
            let cwd = d.reopen.cwd.clone();
            self.in_back(|commands| async move {
                let list = ListParams { cwd };
                Some(match commands.call::<session::List>(&list).await {
                    Ok(v) => Back::Sessions(v.here, v.all),
                    Err(e) => Back::Notice(HistoryCell::Error(format!(
                        "cannot list the remote sessions: {e}"
                    ))),
                })
            });
            return;
        }
        let here = crate::kernel::session::list(&self.session_dir);
        let all = crate::kernel::session::list_all(&self.keel_home);
        self.view
            .open_picker(picker::Picker::new(here, all, self.clock.now_ms()));
    }

    /// The status line's "where the agent runs" part, for a daemon's session: its pid, how
    /// many windows show the session, and a different daemon version with what to do.
    pub(super) fn show_place(&mut self) {
        let Some(hello) = self.daemon.as_ref().and(self.link.daemon.clone()) else {
            return;
        };
        let host = self
            .daemon
            .as_ref()
            .and_then(|d| d.dial.remote())
            .map(|r| r.host.clone());
        let id = self.link.session_id().to_string();
        self.in_back(|commands| async move {
            let status = commands.call::<daemon::Status>(&NoParams).await;
            let clients = status.ok().and_then(|s| {
                s.sessions
                    .into_iter()
                    .find(|s| s.session_id == id)
                    .map(|s| s.clients as u64)
            });
            Some(Back::Place(place_text(&hello, host.as_deref(), clients)))
        });
    }

    pub(super) fn command(&mut self, name: &str, args: &str) {
        let busy = self.view.transcript.is_running();
        match name {
            "detach" if self.daemon.is_some() => self.stop = Some(crate::exit::Exit::Success),
            "detach" => self.view.notice(HistoryCell::Notice(
                "this session runs in this keel process, not in the daemon: /quit ends it \
                 (start keel without --no-daemon for a session that outlives the window)"
                    .to_string(),
            )),
            "quit" | "exit" => self.quit(),
            "help" => self
                .view
                .notice(HistoryCell::Notice(help_text(self.view.attached))),
            "name" if args.is_empty() => self
                .view
                .notice(HistoryCell::Notice("usage: /name <session name>".into())),
            "name" => self.send(Command::SetSessionName { name: args.into() }),
            "compact" => {
                let compact = Command::Compact {
                    custom_instructions: (!args.is_empty()).then(|| args.to_string()),
                };
                self.in_back(|commands| async move {
                    let e = commands.send(&compact).await.err()?;
                    tracing::info!("compaction did not run: {e}");
                    let cell = HistoryCell::Notice(format!("compaction did not run: {e}"));
                    Some(Back::Notice(cell))
                });
            }
            "thinking" => self.thinking(args),
            "model" => self.model(args),
            "new" | "clear" | "resume" | "fork" | "rewind" if busy => self.view.notice(
                HistoryCell::Notice("the agent is working: press Esc to stop it first".into()),
            ),
            "new" => {
                self.replacing = Some("new session".into());
                self.send(Command::NewSession {
                    parent_session: None,
                    reason: None,
                });
            }
            // As Claude Code's: the conversation starts over in a new session (the old one
            // stays saved, /resume finds it) and the screen is cleared.
            "clear" => {
                self.replacing = Some("conversation cleared: new session".into());
                self.clearing = true;
                self.send(Command::NewSession {
                    parent_session: None,
                    reason: Some(NewSessionReason::Clear),
                });
            }
            "cost" => {
                self.ask_and_tell(Command::GetSessionStats {}, |s: SessionStats| cost_text(&s))
            }
            // A prompt as if typed (queued for when a run is done).
            "init" => self.send(Command::Prompt {
                message: init_prompt(args),
                images: Vec::new(),
                streaming_behavior: busy.then_some(StreamingBehavior::FollowUp),
            }),
            "resume" => self.open_picker(),
            "rewind" if args == "undo" => self.rewind_undo(),
            "rewind" if args.is_empty() => self.open_rewind(),
            "rewind" => self.view.notice(HistoryCell::Notice(
                "usage: /rewind (pick a prompt to go back to) or /rewind undo".into(),
            )),
            // A copy of the session as it stands, continued from here (this one stays).
            "fork" => {
                self.replacing = Some("forked into session".into());
                self.send(Command::Clone {});
            }
            "export" => {
                let export = Command::ExportHtml {
                    output_path: (!args.is_empty())
                        .then(|| self.cwd.join(args).display().to_string()),
                };
                self.ask_and_tell(export, |v: ExportData| format!("exported to {}", v.path));
            }
            "session" => self.session_info(),
            "transcript" => self.transcript(),
            "hooks" => self.hooks(),
            "agents" => self.agents(),
            "permissions" => self.permissions(),
            "jobs" => self.open_jobs(),
            other => self.view.notice(HistoryCell::Error(format!(
                "unknown command /{other}: /help lists the commands"
            ))),
        }
    }

    /// `/clear`'s new session is shown: the screen and its scrollback are erased and the
    /// transcript starts at the top (a plain-lines terminal just goes on).
    pub(super) fn clear_screen(&mut self) {
        if self.plain {
            return;
        }
        self.view.forget_shown();
        if let Err(e) = self.term.clear_all() {
            tracing::warn!("cannot clear the screen: {e}");
        }
    }

    /// `/thinking` cycles through the model's levels; `/thinking LEVEL` sets one.
    fn thinking(&self, args: &str) {
        if args.is_empty() {
            return self.ask_and_tell(
                Command::CycleThinkingLevel {},
                |v: Option<LevelData>| match v {
                    Some(v) => format!("thinking level: {}", v.level),
                    None => "this model has one thinking level".into(),
                },
            );
        }
        let level = args.to_string();
        self.in_back(|commands| async move {
            let set = Command::SetThinkingLevel {
                level: level.clone(),
            };
            let cell = match commands.send(&set).await {
                Ok(_) => {
                    let state = commands.ask::<State>(&Command::GetState {}).await;
                    let set = state.ok().map(|s| s.thinking_level);
                    HistoryCell::Notice(format!("thinking level: {}", set.unwrap_or(level)))
                }
                Err(e) => HistoryCell::Error(e.message),
            };
            Some(Back::Notice(cell))
        });
    }

    /// `/model` lists the models (the current one marked); `/model [provider/]id` switches.
    fn model(&self, args: &str) {
        if args.is_empty() {
            let current = self.view.transcript.model.clone();
            let list = Command::GetAvailableModels {};
            return self.ask_and_tell(list, move |v: ModelsData| {
                let mut text = String::from("models you can use (/model provider/id):");
                for m in v.models {
                    let mark = if m.id == current { "●" } else { " " };
                    text.push_str(&format!("\n {mark} {}/{}", m.provider, m.id));
                }
                text
            });
        }
        let wanted = args.to_string();
        self.in_back(|commands| async move {
            let (provider, id) = match wanted.split_once('/') {
                Some((p, id)) => (p.to_string(), id.to_string()),
                None => {
                    let list = Command::GetAvailableModels {};
                    let models = commands.ask::<ModelsData>(&list).await;
                    let found = models.ok().and_then(|v| {
                        let model = v.models.into_iter().find(|m| m.id == wanted)?;
                        Some(model.provider)
                    });
                    match found {
                        Some(p) => (p, wanted.clone()),
                        None => {
                            let cell = HistoryCell::Error(format!("unknown model {wanted}"));
                            return Some(Back::Notice(cell));
                        }
                    }
                }
            };
            let set = Command::SetModel {
                provider: provider.clone(),
                model_id: id.clone(),
            };
            let cell = match commands.send(&set).await {
                Ok(_) => HistoryCell::Notice(format!("model: {provider}/{id}")),
                Err(e) => HistoryCell::Error(e.message),
            };
            Some(Back::Notice(cell))
        });
    }

    /// `/hooks`: what `keel hooks list` shows, read from the settings files of the session's
    /// directory and the trust store (a remote host's are listed there).
    fn hooks(&mut self) {
        let Some((spec, env)) = self.spec_here("hooks", "keel hooks list") else {
            return;
        };
        let listed =
            crate::setup::hook_list::list_with(spec.settings.as_ref(), spec.claude_files, &env);
        let cell = match listed {
            Ok((rows, _)) => HistoryCell::Notice(crate::setup::hook_list::tui_text(&rows)),
            Err(e) => HistoryCell::Error(format!("cannot read the settings: {}", e.message)),
        };
        self.view.notice(cell);
    }

    /// The spec and environment of the session shown (a daemon's: the directory it was opened
    /// in), to read its settings files here; `None` with a notice for a remote session, whose
    /// files are the other host's (`what` and `command` name what to run there).
    fn spec_here(
        &mut self,
        what: &str,
        command: &str,
    ) -> Option<(crate::wire::protocol::spec::SessionSpec, crate::mode::Env)> {
        match &self.daemon {
            Some(d) if d.dial.remote().is_some() => {
                self.view.notice(HistoryCell::Notice(format!(
                    "this session runs on another host: its {what} are listed there ({command})"
                )));
                None
            }
            Some(d) => {
                let mut env = d.env.clone();
                env.cwd = d.reopen.cwd.clone();
                Some((d.reopen.spec.clone(), env))
            }
            None => self.hooks_from.clone(),
        }
    }

    /// `/agents`: the agent definitions of the session's directory (built-in, user, and the
    /// project's once trusted), with their origin, tools and model.
    fn agents(&mut self) {
        let Some((spec, env)) = self.spec_here("agents", "keel agents list") else {
            return;
        };
        let trusted =
            spec.trust.project || crate::setup::trust::dir_trusted(&env.keel_home, &env.cwd);
        let claude =
            crate::setup::settings::load_with(spec.settings.as_ref(), spec.claude_files, &env)
                .ok()
                .and_then(|l| crate::setup::settings::claude_home(&l, &env));
        let (agents, warnings) =
            crate::agents::load(&env.keel_home, claude.as_deref(), &env.cwd, trusted);
        let mut text = String::new();
        for a in &agents {
            let origin = a.origin.label();
            let tools = a
                .tools
                .as_ref()
                .map_or("all tools".into(), |t| t.join(", "));
            text.push_str(&format!(
                "{} ({origin}): {}\n  tools: {tools}\n",
                a.name, a.description
            ));
        }
        for w in warnings {
            text.push_str(&format!("warning: {w}\n"));
        }
        self.view
            .notice(HistoryCell::Notice(text.trim_end().to_string()));
    }

    /// `/session`: the session's id, file, name, size and cost, where it runs and how to come
    /// back to it.
    fn session_info(&self) {
        let u = &self.view.transcript.totals.usage;
        let tokens = format!(
            "↑{} ↓{} · cost ${:.4}",
            view::fmt_tokens(u.input + u.cache_read + u.cache_write),
            view::fmt_tokens(u.output),
            u.cost.total
        );
        let daemon = self.daemon.as_ref().map(|d| d.dial.describe());
        self.in_back(|commands| async move {
            let state = match commands.ask::<State>(&Command::GetState {}).await {
                Ok(s) => s,
                Err(e) => return Some(Back::Notice(HistoryCell::Error(e.message))),
            };
            let id = state.session_id;
            let mut text = format!(
                "session {id}\n  file: {}\n  name: {}\n  messages: {}\n  tokens: {tokens}",
                state
                    .session_file
                    .as_deref()
                    .unwrap_or("(not saved: --no-session)"),
                state.session_name.as_deref().unwrap_or("(none)"),
                state.message_count,
            );
            match daemon {
                Some(socket) => {
                    let status = commands.call::<daemon::Status>(&NoParams).await.ok();
                    let clients = status.as_ref().and_then(|s| {
                        let me = s.sessions.iter().find(|s| s.session_id == id)?;
                        Some(me.clients)
                    });
                    let shown = |n: Option<String>| n.unwrap_or_else(|| "null".into());
                    text.push_str(&format!(
                        "\n  runs in: the keel daemon (pid {}, {socket}) · windows attached: {}\n  leave it with /detach; come back with: keel attach {id}",
                        shown(status.map(|s| s.pid.to_string())),
                        shown(clients.map(|n| n.to_string())),
                    ));
                }
                None => text.push_str(
                    "\n  runs in: this keel process (quitting stops it; without --no-daemon a session outlives its window)",
                ),
            }
            Some(Back::Notice(HistoryCell::Notice(text)))
        });
    }
}

/// `/cost`: what the session cost, its tokens, its time and the lines its tools changed.
fn cost_text(s: &SessionStats) -> String {
    let t = &s.tokens;
    let secs = |ms: u64| format!("{:.1}s", ms as f64 / 1000.0);
    format!(
        "total cost:     ${:.4}\ntokens:         {} in, {} out, {} cache read, {} cache write\nAPI time:       {}\nwall time:      {}\ncode changes:   {} lines added, {} lines removed",
        s.cost,
        view::fmt_tokens(t.input),
        view::fmt_tokens(t.output),
        view::fmt_tokens(t.cache_read),
        view::fmt_tokens(t.cache_write),
        secs(s.api_duration_ms),
        secs(s.duration_ms),
        s.lines_added,
        s.lines_removed,
    )
}

/// `/init`: asks the model to write (or improve) the project's `AGENTS.md`, the context file
/// keel reads at the project root (as Claude Code's `/init` writes `CLAUDE.md`); `extra` is
/// the user's own guidance.
pub(super) fn init_prompt(extra: &str) -> String {
    let mut text = String::from(
        "Study this project and write an AGENTS.md file at its root: the context future coding \
         sessions in this repository start from. If AGENTS.md (or a CLAUDE.md) already exists, \
         read it first and improve it rather than starting over.\n\n\
         Keep it short and specific to this repository. Cover:\n\
         - how to build, run, lint and test (including how to run a single test);\n\
         - the architecture a newcomer has to understand before changing code: the main \
         modules, how they depend on each other, where things live;\n\
         - the conventions the code follows that are not obvious from one file (naming, error \
         handling, test layout, anything the project's own docs or CI insist on).\n\n\
         Read the README, build files, CI configuration and existing contributor docs rather \
         than guessing. Leave out generic advice any developer knows, and do not list every \
         file. Begin the file with a heading and one sentence on what the project is.",
    );
    if !extra.trim().is_empty() {
        text.push_str(&format!("\n\nAlso follow this guidance: {}", extra.trim()));
    }
    text
}

/// "daemon pid N [on HOST] · 2 windows", and a daemon of another version named with what to
/// do about it.
pub(super) fn place_text(hello: &DaemonInfo, host: Option<&str>, clients: Option<u64>) -> String {
    let mut text = format!("daemon pid {}", hello.pid);
    if let Some(host) = host {
        text.push_str(&format!(" on {host}"));
    }
    if let Some(n) = clients.filter(|n| *n > 1) {
        text.push_str(&format!(" · {n} windows"));
    }
    let theirs = hello.version.as_str();
    let ours = env!("CARGO_PKG_VERSION");
    if theirs != ours {
        text.push_str(&format!(
            " · daemon is keel {theirs}, this is {ours}: `keel daemon stop` when idle"
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_place_names_a_daemon_of_another_version() {
        let ours = env!("CARGO_PKG_VERSION");
        let info = |version: &str| DaemonInfo {
            pid: 42,
            version: version.into(),
            ..DaemonInfo::default()
        };
        let same = info(ours);
        assert_eq!(place_text(&same, None, Some(1)), "daemon pid 42");
        assert_eq!(
            place_text(&same, None, Some(3)),
            "daemon pid 42 · 3 windows"
        );
        assert_eq!(
            place_text(&same, Some("me@box"), Some(2)),
            "daemon pid 42 on me@box · 2 windows"
        );
        let other = info("0.0.1-old");
        assert_eq!(
            place_text(&other, None, None),
            format!("daemon pid 42 · daemon is keel 0.0.1-old, this is {ours}: `keel daemon stop` when idle")
        );
    }
}
