//! Hooks: the user's commands around the agent's life, with Claude Code's contract so that
//! existing hook scripts run unchanged (DESIGN §15). A kernel seam like tools and providers:
//! the turn loop fires them, so every mode, daemon session, scheduled run and subagent gets the
//! same behaviour. This module reads the configuration ([`config`]), matches ([`matcher`]),
//! runs processes ([`process`]), reads their results ([`outcome`]), maps tool names and
//! inputs to Claude's ([`names`]) and wraps the context hooks give the model ([`context`]).
//! Every hook runs in the sandbox the caller passes (the session's, the one its tools get)
//! unless the user's own settings let it out ([`HookCommand::unsandboxed`]).

pub mod config;
pub mod context;
pub mod matcher;
pub mod names;
pub mod outcome;
pub mod process;
pub mod response;
pub mod transcript;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::kernel::abort::AbortSignal;
use crate::kernel::sandbox::{watch, Sandbox};

pub use config::{HookCommand, HookConfig};
pub use outcome::{Decision, Verdict};
pub use process::HookEnv;

/// A hook's default timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// Text longer than this (characters) that a hook gives the model is cut, and the whole of it
/// is written to a file named in the message.
pub const TEXT_CAP: usize = 10_000;

/// The events hooks can be configured for (Claude Code's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HookEvent {
    SessionStart,
    UserPromptSubmit,
    PreToolUse,
    PermissionRequest,
    PostToolUse,
    PostToolUseFailure,
    Notification,
    Stop,
    SubagentStart,
    SubagentStop,
    PreCompact,
    PostCompact,
    SessionEnd,
}

impl HookEvent {
    pub const ALL: [HookEvent; 13] = [
        HookEvent::SessionStart,
        HookEvent::UserPromptSubmit,
        HookEvent::PreToolUse,
        HookEvent::PermissionRequest,
        HookEvent::PostToolUse,
        HookEvent::PostToolUseFailure,
        HookEvent::Notification,
        HookEvent::Stop,
        HookEvent::SubagentStart,
        HookEvent::SubagentStop,
        HookEvent::PreCompact,
        HookEvent::PostCompact,
        HookEvent::SessionEnd,
    ];

    /// The event's name in settings files and on stdin.
    pub fn as_str(self) -> &'static str {
        match self {
            HookEvent::SessionStart => "SessionStart",
            HookEvent::UserPromptSubmit => "UserPromptSubmit",
            HookEvent::PreToolUse => "PreToolUse",
            HookEvent::PermissionRequest => "PermissionRequest",
            HookEvent::PostToolUse => "PostToolUse",
            HookEvent::PostToolUseFailure => "PostToolUseFailure",
            HookEvent::Notification => "Notification",
            HookEvent::Stop => "Stop",
            HookEvent::SubagentStart => "SubagentStart",
            HookEvent::SubagentStop => "SubagentStop",
            HookEvent::PreCompact => "PreCompact",
            HookEvent::PostCompact => "PostCompact",
            HookEvent::SessionEnd => "SessionEnd",
        }
    }

    /// The event named `name`, if keel knows it.
    pub fn parse(name: &str) -> Option<HookEvent> {
        HookEvent::ALL.into_iter().find(|e| e.as_str() == name)
    }

    /// Whether a group's `matcher` applies (Claude: UserPromptSubmit and Stop ignore it).
    pub fn uses_matcher(self) -> bool {
        !matches!(self, HookEvent::UserPromptSubmit | HookEvent::Stop)
    }

    /// Whether exit 2 or `decision: "block"` blocks what the event announces.
    pub fn can_block(self) -> bool {
        matches!(
            self,
            HookEvent::UserPromptSubmit
                | HookEvent::PostToolUse
                | HookEvent::PostToolUseFailure
                | HookEvent::Stop
                | HookEvent::SubagentStop
                | HookEvent::PreCompact
        )
    }

    /// Whether plain stdout of a successful hook becomes context for the model.
    pub fn takes_plain_context(self) -> bool {
        matches!(self, HookEvent::UserPromptSubmit | HookEvent::SessionStart)
    }
}

/// The fields every hook's stdin carries, fixed for a session.
#[derive(Debug, Clone, Default)]
pub struct SessionFields {
    pub session_id: String,
    pub transcript_path: String,
    /// Claude's word for the permission mode (`default`, `acceptEdits`, `bypassPermissions`, …).
    pub permission_mode: String,
    /// Inside a subagent: its id and type.
    pub agent: Option<(String, String)>,
}

/// One hook run, as the bus reports it (`hook_started` / `hook_finished`).
#[derive(Debug, Clone, PartialEq)]
pub enum HookNotice {
    Started {
        event: HookEvent,
        command: String,
    },
    Finished {
        event: HookEvent,
        command: String,
        exit_code: Option<i32>,
        /// What it decided (`allow`, `ask`, `deny`, `defer`, `block`, `stop`, `error`).
        decision: Option<&'static str>,
        /// The reason it gave for a block, a denial or a stop.
        reason: Option<String>,
        /// What it says to the user (`systemMessage`, a failure).
        messages: Vec<String>,
        /// How long this hook ran (its own time: hooks of one event run in parallel).
        took: std::time::Duration,
    },
}

/// A session's hooks: what is configured and where they run. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Hooks {
    config: Arc<HookConfig>,
    env: Arc<HookEnv>,
    session: Arc<SessionFields>,
    /// The `once` hooks that ran in this session (event and command).
    ran_once: Arc<std::sync::Mutex<std::collections::HashSet<(HookEvent, String)>>>,
    /// The session's env file on this host, named to the hooks of this firing as
    /// `CLAUDE_ENV_FILE` (set for `SessionStart` only: [`Hooks::with_env_file`]).
    env_file: Option<std::path::PathBuf>,
    /// The session's conversation as Claude Code's transcript (`transcript_path`).
    transcript: Arc<transcript::Transcript>,
}

impl Hooks {
    pub fn new(config: HookConfig, env: HookEnv, session: SessionFields) -> Hooks {
        let transcript = transcript_of(&env, &session.transcript_path, &session.session_id);
        Hooks {
            config: Arc::new(config),
            env: Arc::new(env),
            session: Arc::new(session),
            ran_once: Arc::default(),
            env_file: None,
            transcript,
        }
    }

    /// These hooks with `CLAUDE_ENV_FILE` naming `file` (this host's path; a hook in a
    /// bubblewrap sandbox gets the path its private `/tmp` shows): what they write there,
    /// `bash` sources before each command ([`crate::kernel::tool::bash::env_file`]).
    pub fn with_env_file(&self, file: std::path::PathBuf) -> Hooks {
        Hooks {
            env_file: Some(file),
            ..self.clone()
        }
    }

    /// The same hooks for the session `session_id` saved at `transcript_path` (the host
    /// learns both when it opens the session's store).
    pub fn for_session(&self, session_id: &str, transcript_path: &str) -> Hooks {
        let mut session = (*self.session).clone();
        session.session_id = session_id.to_string();
        session.transcript_path = transcript_path.to_string();
        Hooks {
            config: self.config.clone(),
            env: self.env.clone(),
            session: Arc::new(session),
            ran_once: Arc::default(),
            env_file: None,
            transcript: transcript_of(&self.env, transcript_path, session_id),
        }
    }

    /// The same hooks inside a subagent: every firing carries `agent_id` and `agent_type`.
    pub fn for_agent(&self, agent_id: &str, agent_type: &str) -> Hooks {
        let mut session = (*self.session).clone();
        session.agent = Some((agent_id.to_string(), agent_type.to_string()));
        Hooks {
            session: Arc::new(session),
            // Never the parent's file (the host gives the child its own: `for_session`).
            transcript: transcript_of(&self.env, "", agent_id),
            ..self.clone()
        }
    }

    /// Where the Claude transcript of the session saved at `file` (`""`: none) with id
    /// `session_id` is kept when these hooks run in it (a child's `agent_transcript_path`).
    pub fn transcript_path_of(&self, file: &str, session_id: &str) -> String {
        let private = self.env.tool_env.spill_path(&self.env.temp_dir);
        let path = transcript::path_for(file, session_id, &private);
        path.display().to_string()
    }

    /// A child's transcript (`agent_transcript_path`) where these hooks can read it: copied
    /// beside this session's ([`transcript::copy_beside`]); `child` itself when it cannot be.
    pub fn agent_transcript(&self, child: &str, agent_id: &str) -> String {
        let child_path = std::path::Path::new(child);
        let copied = transcript::copy_beside(self.transcript.path(), child_path, agent_id);
        match copied {
            Ok(path) => path.display().to_string(),
            Err(e) => {
                tracing::debug!(error = %e, "hooks: the child's transcript was not copied");
                child.to_string()
            }
        }
    }

    /// Brings the Claude transcript up to date with `messages` (the session's conversation);
    /// the caller does so before hooks run. A failure leaves the file as it was.
    pub fn sync_transcript(&self, messages: &[crate::kernel::message::Message]) {
        if self.transcript.is_private() {
            if let Err(e) = self.env.tool_env.spill_dir(&self.env.temp_dir) {
                tracing::debug!(error = %e, "hooks: no private directory for the transcript");
                return;
            }
        }
        let who = transcript::Writer {
            session_id: &self.session.session_id,
            cwd: &self.env.cwd,
            sidechain: self.session.agent.is_some(),
        };
        if let Err(e) = self.transcript.sync(messages, &who) {
            tracing::debug!(error = %e, "hooks: the Claude transcript was not written");
        }
    }

    /// Whether any hook is configured for `event` (callers skip building payloads if not).
    pub fn wants(&self, event: HookEvent) -> bool {
        !self.config.is_empty_for(event)
    }

    /// The project's root (`CLAUDE_PROJECT_DIR`).
    pub fn project_dir(&self) -> &std::path::Path {
        &self.env.project_dir
    }

    /// Whether these are a subagent's hooks (its session is not one a user prompts).
    pub fn in_subagent(&self) -> bool {
        self.session.agent.is_some()
    }

    /// The configuration, for listings.
    pub fn config(&self) -> &HookConfig {
        &self.config
    }

    /// Runs every hook matching `event` and `subjects` in parallel with `fields` (the event's
    /// own stdin fields) added to the session's, and combines their results in configuration
    /// order. Each runs in `sandbox` (the session's, as its tools get it: a hook follows the
    /// session's policy, never one call's escalation), unless it is
    /// [`HookCommand::unsandboxed`]; what sandboxed ones did to protected paths is undone after
    /// them, as after a `bash` call, and each of them tells the user. `notify` hears each start
    /// and finish. No matching hook: an empty verdict, and no process is started.
    pub async fn fire(
        &self,
        event: HookEvent,
        subjects: &[&str],
        fields: Map<String, Value>,
        sandbox: &Arc<Sandbox>,
        abort: &AbortSignal,
        notify: &(dyn Fn(HookNotice) + Send + Sync),
    ) -> Verdict {
        let mut commands = self.config.matching(event, subjects);
        commands.retain(|h| !h.once || self.first_time(event, &h.command));
        if commands.is_empty() {
            return Verdict::default();
        }
        let payload = self.payload(event, fields);
        let (background, commands): (Vec<_>, Vec<_>) =
            commands.into_iter().partition(|h| h.background);
        self.start_background(background, &payload, sandbox);
        // What sandboxed hooks must not leave behind, as after a `bash` call (`watch`).
        let record = match commands.iter().any(|h| !h.unsandboxed) {
            true => watch::record(&sandbox.policy).await,
            false => None,
        };
        let results = self
            .run_all(event, &commands, &payload, sandbox, abort, notify)
            .await;
        let undone = watch::repair(record).await;
        let mut verdict = Verdict::default();
        for (i, ran, took) in results {
            let hook = &commands[i];
            let mut judged = outcome::judge(event, &hook.command, &ran);
            if !hook.unsandboxed {
                for found in &undone {
                    judged.tell(found.note(sandbox.policy.mode));
                }
            }
            notify(HookNotice::Finished {
                event,
                command: hook.command.clone(),
                exit_code: match ran.exit {
                    process::Exit::Code(c) => c,
                    _ => None,
                },
                decision: judged.decision,
                reason: judged.reason(),
                messages: judged.messages().to_vec(),
                took,
            });
            verdict.add(judged);
        }
        self.cap(&mut verdict);
        verdict
    }

    /// Runs `commands` in parallel (each announced to `notify` as it starts); their results in
    /// configuration order.
    async fn run_all(
        &self,
        event: HookEvent,
        commands: &[HookCommand],
        payload: &[u8],
        sandbox: &Arc<Sandbox>,
        abort: &AbortSignal,
        notify: &(dyn Fn(HookNotice) + Send + Sync),
    ) -> Vec<(usize, process::Ran, std::time::Duration)> {
        let mut set = tokio::task::JoinSet::new();
        for (i, hook) in commands.iter().enumerate() {
            notify(HookNotice::Started {
                event,
                command: hook.command.clone(),
            });
            let (env, payload, abort) = (self.env.clone(), payload.to_vec(), abort.clone());
            let (command, timeout) = (
                hook.command.clone(),
                hook.timeout.unwrap_or(DEFAULT_TIMEOUT),
            );
            let sandbox = confined(hook, sandbox);
            let env_file = self.env_file.clone();
            set.spawn(async move {
                let sandbox = sandbox.as_deref();
                let start = std::time::Instant::now();
                let vars = process::Vars { env_file };
                let ran =
                    process::run(&command, &payload, &env, &vars, sandbox, timeout, &abort).await;
                (i, ran, start.elapsed())
            });
        }
        let mut results = Vec::with_capacity(commands.len());
        while let Some(joined) = set.join_next().await {
            if let Ok(r) = joined {
                results.push(r);
            }
        }
        results.sort_by_key(|(i, _, _)| *i);
        results
    }

    /// Whether the `once` hook `command` of `event` has not run in this session yet (it counts
    /// as run from now on).
    fn first_time(&self, event: HookEvent, command: &str) -> bool {
        match self.ran_once.lock() {
            Ok(mut ran) => ran.insert((event, command.to_string())),
            Err(_) => false,
        }
    }

    /// Starts `async` hooks: each runs on its own (its timeout applies, a turn's abort does
    /// not), nothing waits for it, and its result is dropped, so it reports no events (what
    /// the check after a sandboxed one undoes is undone all the same).
    fn start_background(&self, hooks: Vec<HookCommand>, payload: &[u8], sandbox: &Arc<Sandbox>) {
        for hook in hooks {
            let (env, payload) = (self.env.clone(), payload.to_vec());
            let timeout = hook.timeout.unwrap_or(DEFAULT_TIMEOUT);
            let sandbox = confined(&hook, sandbox);
            let vars = process::Vars {
                env_file: self.env_file.clone(),
            };
            tokio::spawn(async move {
                let record = match &sandbox {
                    Some(s) => watch::record(&s.policy).await,
                    None => None,
                };
                process::run(
                    &hook.command,
                    &payload,
                    &env,
                    &vars,
                    sandbox.as_deref(),
                    timeout,
                    &AbortSignal::never(),
                )
                .await;
                watch::repair(record).await;
            });
        }
    }

    /// The stdin of one firing: the session's fields, `hook_event_name`, then the event's.
    fn payload(&self, event: HookEvent, fields: Map<String, Value>) -> Vec<u8> {
        let s = &self.session;
        let mut m = Map::new();
        m.insert("session_id".into(), s.session_id.clone().into());
        let transcript = self.transcript.path().display().to_string();
        m.insert("transcript_path".into(), transcript.into());
        m.insert("cwd".into(), self.env.cwd.display().to_string().into());
        m.insert("permission_mode".into(), s.permission_mode.clone().into());
        m.insert("hook_event_name".into(), event.as_str().into());
        if let Some((id, kind)) = &s.agent {
            m.insert("agent_id".into(), id.clone().into());
            m.insert("agent_type".into(), kind.clone().into());
        }
        m.extend(fields);
        serde_json::to_vec(&Value::Object(m)).unwrap_or_default()
    }

    /// Cuts what goes to the model at [`TEXT_CAP`] characters; the whole text goes to a file in
    /// the session's spill directory, named in the cut text.
    fn cap(&self, verdict: &mut Verdict) {
        let texts = verdict
            .context
            .iter_mut()
            .chain(verdict.blocked.iter_mut())
            .chain(verdict.permission.iter_mut().filter_map(|p| p.1.as_mut()));
        for text in texts {
            if text.chars().count() <= TEXT_CAP {
                continue;
            }
            let kept: String = text.chars().take(TEXT_CAP).collect();
            let saved = self.spill(text);
            *text = match saved {
                Some(path) => format!(
                    "{kept}\n[hook output cut at {TEXT_CAP} characters; all of it: {}]",
                    path.display()
                ),
                None => format!("{kept}\n[hook output cut at {TEXT_CAP} characters]"),
            };
        }
    }

    fn spill(&self, text: &str) -> Option<std::path::PathBuf> {
        let dir = self.env.tool_env.spill_dir(&self.env.temp_dir).ok()?;
        let path = dir.join(format!("hook-{}.txt", uuid::Uuid::new_v4()));
        std::fs::write(&path, text).ok()?;
        Some(path)
    }
}

/// The Claude transcript of the session saved at `file` (`""`: none) with id `session_id`.
fn transcript_of(env: &HookEnv, file: &str, session_id: &str) -> Arc<transcript::Transcript> {
    let private = env.tool_env.spill_path(&env.temp_dir);
    Arc::new(transcript::Transcript::new(file, session_id, &private))
}

/// The sandbox `hook` runs in: the session's, unless the user's own settings let it out.
fn confined(hook: &HookCommand, sandbox: &Arc<Sandbox>) -> Option<Arc<Sandbox>> {
    (!hook.unsandboxed).then(|| sandbox.clone())
}

#[cfg(test)]
mod tests;
