//! A run's settings, resolved once (ripgrep's `HiArgs`): the managed settings file over the
//! flags, the flags over the other settings files (`crate::settings`), those over keel's
//! defaults. The command line builds one from its flags and environment (a daemon or ACP
//! session: from the flags it was opened with and its own directory); everything in `setup`
//! reads this, never the flags.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::Value;

use crate::error::StartupError;
use crate::kernel::agent::Permission;
use crate::mode::{Env, Mode};
/// The `notify` setting's channels, for the TUI (front ends read settings through `setup`).
pub use crate::settings::NotifyChannel;
use crate::settings::{self, DefaultMode, Inline, Level, Merged, Sourced, Thinking};
use crate::wire::protocol::spec::{KeySource, SessionPick, SessionSpec, SettingsLayer};

/// What a session is started with: every flag `setup` needs, with the settings files' values
/// laid under them, and the warnings about the files.
#[derive(Debug, Clone)]
pub struct Settings {
    // Which session (flags only).
    pub continue_: bool,
    pub resume: Option<String>,
    pub session: Option<String>,
    pub session_id: Option<String>,
    pub no_session: bool,
    pub fork: Option<String>,
    pub session_dir: Option<PathBuf>,
    // The provider.
    pub provider: Option<String>,
    /// `--model`, else the settings' `model`.
    pub model: Option<String>,
    pub script: Option<PathBuf>,
    pub api_key: Option<String>,
    pub base_url: Option<String>,
    pub max_retries: u32,
    pub connect_timeout: f64,
    pub idle_timeout: f64,
    // The agent.
    pub thinking: Option<Thinking>,
    pub tools: Option<Vec<String>>,
    pub max_turns: Option<u32>,
    /// The settings' `maxSubagentDepth` (default 1).
    pub max_subagent_depth: u32,
    /// The settings' `jobs`.
    pub jobs: crate::settings::JobsSettings,
    /// The settings' `worktree`.
    pub worktree: crate::settings::WorktreeSettings,
    /// The settings' `lsp`.
    pub lsp: crate::kernel::lsp::LspSettings,
    pub max_repeated_failures: u32,
    pub permission: Permission,
    /// Whether a flag or a file chose `permission` (else it is keel's default, auto).
    pub permission_chosen: bool,
    /// Seconds an approval dialog waits.
    pub approval_timeout: f64,
    pub auto_compaction: bool,
    pub system_prompt: Option<String>,
    pub append_system_prompt: Vec<String>,
    pub no_context_files: bool,
    /// Claude Code's user directory while Claude's files are read (`None`: turned off, or no
    /// home): its agents, commands, skills and memory file, and a project's `.claude/` ones.
    pub claude_home: Option<PathBuf>,
    /// The settings' `env`, all levels (the session's tools get [`Settings::env_vars`]).
    pub tool_vars: BTreeMap<String, String>,
    // MCP servers.
    pub mcp_config: Vec<PathBuf>,
    pub strict_mcp_config: bool,
    pub no_mcp: bool,
    pub trust_project: bool,
    /// `--allow-home`: a run nobody watches may start in (or above) the home directory.
    pub allow_home: bool,
    /// The settings' `mcpServers`, each with the file it came from.
    pub mcp_servers: BTreeMap<String, Sourced<Value>>,
    /// The front end the flags and terminals chose (where late warnings go).
    pub mode: Mode,
    /// The merged settings files (the rules of `permissions` are kept here, unmatched).
    pub files: Merged,
    /// About the settings files: entries skipped, modes not supported.
    pub warnings: Vec<String>,
    /// `--output-schema`: a file or the schema's text (flags only).
    pub output_schema: Option<String>,
    /// `--max-cost` or the settings' `maxCost`: USD a run may cost.
    pub max_cost: Option<f64>,
    /// `--sandbox` (the settings files' `sandbox.*` are in `files`; see [`Settings::sandbox`]).
    pub sandbox_flag: Option<crate::kernel::sandbox::SandboxMode>,
    /// `--sandbox-network` / `--sandbox-network-allow` (`None`: the settings').
    pub sandbox_network: Option<crate::kernel::sandbox::Network>,
    /// The spec the settings were resolved from (what a live session was opened with).
    pub spec: SessionSpec,
}

impl Settings {
    /// Resolves `spec` in `env` (its directory's settings files) into the settings of a
    /// session served to a `mode` front end; a settings file that cannot be used is a config
    /// error, so is a key the spec names that cannot be read.
    pub fn resolve(spec: &SessionSpec, mode: Mode, env: &Env) -> Result<Settings, StartupError> {
        let files = load_with(spec.settings.as_ref(), spec.claude_files, env)?;
        let m = &files.merged;
        let mut warnings = files.warnings.clone();
        warnings.extend(files.claude_warnings());
        // A project's own mode that loosens approvals applies only in a trusted project.
        let trust = crate::setup::trust::Trust::of(m, spec.trust.project, env);
        let file_mode = match trust.mode_applies() {
            true => m.permissions.default_mode.as_ref(),
            false => m.permissions.default_mode_outside_project.as_ref(),
        };
        let file_mode = file_mode.map(|s| Sourced {
            value: mode_of(s.value),
            origin: s.origin.clone(),
        });
        let permission = pick(file_mode.as_ref(), spec.permission);
        let pick_of = |p: &SessionPick| spec.session == *p;
        let named = |f: fn(&SessionPick) -> Option<&String>| f(&spec.session).cloned();
        Ok(Settings {
            continue_: pick_of(&SessionPick::Continue),
            resume: named(|p| match p {
                SessionPick::Resume(v) => Some(v),
                _ => None,
            }),
            session: named(|p| match p {
                SessionPick::File(v) => Some(v),
                _ => None,
            }),
            session_id: named(|p| match p {
                SessionPick::Id(v) => Some(v),
                _ => None,
            }),
            no_session: pick_of(&SessionPick::Memory),
            fork: named(|p| match p {
                SessionPick::Fork(v) => Some(v),
                _ => None,
            }),
            session_dir: spec.session_dir.clone(),
            provider: spec.provider.clone(),
            model: pick(m.model.as_ref(), spec.model.clone()),
            script: spec.script.clone(),
            api_key: key_of(spec.api_key.as_ref(), env)?,
            base_url: spec.base_url.clone(),
            max_retries: spec.max_retries.unwrap_or(DEFAULT_MAX_RETRIES),
            connect_timeout: spec.connect_timeout.unwrap_or(DEFAULT_CONNECT_TIMEOUT),
            idle_timeout: spec.idle_timeout.unwrap_or(DEFAULT_IDLE_TIMEOUT),
            thinking: pick(m.thinking.as_ref(), spec.thinking),
            tools: pick(m.tools.as_ref(), spec.tools.clone()),
            max_turns: pick(m.max_turns.as_ref(), spec.max_turns),
            max_subagent_depth: m.max_subagent_depth.as_ref().map_or(1, |s| s.value),
            jobs: m.jobs.as_ref().map(|s| s.value.clone()).unwrap_or_default(),
            worktree: m
                .worktree
                .as_ref()
                .map(|s| s.value.clone())
                .unwrap_or_default(),
            lsp: m.lsp.as_ref().map(|s| s.value.clone()).unwrap_or_default(),
            max_repeated_failures: spec
                .max_repeated_failures
                .unwrap_or(DEFAULT_MAX_REPEATED_FAILURES),
            permission_chosen: permission.is_some(),
            permission: permission.unwrap_or(Permission::Auto),
            approval_timeout: pick(m.approval_timeout.as_ref(), spec.approval_timeout)
                .unwrap_or(DEFAULT_APPROVAL_TIMEOUT),
            auto_compaction: pick(m.auto_compaction.as_ref(), spec.auto_compaction).unwrap_or(true),
            system_prompt: spec.system_prompt.clone(),
            append_system_prompt: spec.append_system_prompt.clone(),
            no_context_files: !spec.context_files(),
            claude_home: claude_home(&files, env),
            tool_vars: m
                .env
                .iter()
                .map(|(k, v)| (k.clone(), v.value.clone()))
                .collect(),
            mcp_config: spec.mcp.config.clone(),
            strict_mcp_config: spec.mcp.strict,
            no_mcp: !spec.mcp.enabled,
            trust_project: spec.trust.project,
            allow_home: spec.trust.allow_home,
            mcp_servers: m.mcp_servers.clone(),
            mode,
            output_schema: spec.output_schema.clone(),
            max_cost: pick(m.max_cost.as_ref(), spec.max_cost),
            files: files.merged,
            warnings,
            sandbox_flag: spec.sandbox,
            sandbox_network: spec.network.clone(),
            spec: spec.clone(),
        })
    }
}

/// The provider key `source` names, read on the session's side: a variable of its
/// environment, or a file.
fn key_of(source: Option<&KeySource>, env: &Env) -> Result<Option<String>, StartupError> {
    match source {
        None => Ok(None),
        Some(KeySource::Env(name)) => match env.vars.get(name) {
            Some(v) => Ok(Some(v.clone())),
            None => Err(StartupError::config(format!(
                "the provider key variable {name} is not set in the session's environment"
            ))
            .hint(format!("export {name}, or pass --api-key"))),
        },
        Some(KeySource::File(path)) => {
            let path = env.cwd.join(path);
            let text = std::fs::read_to_string(&path).map_err(|e| {
                StartupError::config(format!("cannot read the key file {}", path.display()))
                    .cause(e.to_string())
            })?;
            Ok(Some(text.trim_end().to_string()))
        }
    }
}

/// `--max-retries`' default.
pub const DEFAULT_MAX_RETRIES: u32 = 3;
/// `--connect-timeout`'s default, in seconds.
pub const DEFAULT_CONNECT_TIMEOUT: f64 = 30.0;
/// `--idle-timeout`'s default, in seconds.
pub const DEFAULT_IDLE_TIMEOUT: f64 = 300.0;
/// `--max-repeated-failures`' default.
pub const DEFAULT_MAX_REPEATED_FAILURES: u32 = 3;

impl Settings {
    /// The permission rules of the merged settings files, matched against the project root
    /// of `env.cwd` (a project's own `allow` rules only as `trust` allows); each rule that does
    /// not parse is a warning naming it.
    pub fn rules(
        &self,
        env: &Env,
        trust: &crate::setup::trust::Trust,
    ) -> (crate::kernel::policy::Rules, Vec<String>) {
        // The spec's own rules come first, then the files'.
        let own = &self.spec.rules;
        let list = |mine: &[String], l: &[crate::settings::Sourced<String>]| {
            let mine = mine
                .iter()
                .map(|r| (r.clone(), "the session spec".to_string()));
            mine.chain(l.iter().map(|r| (r.value.clone(), r.origin.to_string())))
                .collect::<Vec<(String, String)>>()
        };
        let p = &self.files.permissions;
        let allow: Vec<_> = p
            .allow
            .iter()
            .filter(|r| trust.settings_apply() || !r.origin.level.is_project())
            .cloned()
            .collect();
        let home = env
            .vars
            .get("HOME")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| env.keel_home.clone());
        let root = crate::settings::project_root(&env.cwd);
        let (rules, warnings) = crate::kernel::policy::Rules::build(
            &list(&own.deny, &p.deny),
            &list(&own.ask, &p.ask),
            &list(&own.allow, &allow),
            &root,
            &home,
        );
        (rules, warnings.iter().map(ToString::to_string).collect())
    }

    /// The sandbox of the processes the model starts: `--sandbox` over the settings files'
    /// `sandbox.*` and `permissions.additionalDirectories` (what a project's own files say to
    /// widen it only as `trust` allows: a warning names each value left out), paths resolved;
    /// the network flags over all of it; the paths `Read(…)` deny rules name are unreadable.
    pub fn sandbox(
        &self,
        env: &Env,
        trust: &crate::setup::trust::Trust,
        warnings: &mut Vec<String>,
    ) -> crate::kernel::sandbox::SandboxConfig {
        let trusted = trust.settings_apply();
        let flag = self.sandbox_flag;
        let mut config = super::sandbox::config(flag, &self.files, trusted, env, warnings);
        // `Read(…)` deny rules naming a path are the sandbox's too (DESIGN §14: the boundary).
        let (rules, _) = self.rules(env, trust);
        config.deny_read.extend(rules.read_deny_paths());
        if let Some(network) = &self.sandbox_network {
            config.network = network.clone();
        }
        config
    }

    /// `sandbox.passEnv`: the credential variables tool processes may see (a project's own
    /// files name them only as `trust` allows: passing a credential widens what the model
    /// gets).
    pub fn pass_env(&self, trust: &crate::setup::trust::Trust) -> Vec<String> {
        self.files
            .sandbox
            .pass_env
            .iter()
            .filter(|v| trust.settings_apply() || !v.origin.level.is_project())
            .map(|v| v.value.clone())
            .collect()
    }

    /// The settings' `env` for the session's tools (a project's own only as `trust` allows).
    pub fn env_vars(&self, trust: &crate::setup::trust::Trust) -> BTreeMap<String, String> {
        self.files
            .env
            .iter()
            .filter(|(_, v)| trust.settings_apply() || !v.origin.level.is_project())
            .map(|(k, v)| (k.clone(), v.value.clone()))
            .collect()
    }
}

impl Settings {
    /// The hooks of every settings level (all run). A project's own files (`.keel/settings.json`,
    /// `.keel/settings.local.json`) are code from the repository: each of their hooks runs only
    /// as `trust` allows (what it leaves out is in `trust.warnings()`), and always in the
    /// session's sandbox (a `"sandbox": false` there is a warning naming the file; only the
    /// user's own files, managed and `--settings` included, may let a hook out). `None`: no
    /// hook.
    pub fn hooks(
        &self,
        env: &Env,
        tool_env: &crate::kernel::tool::ToolEnv,
        trust: &crate::setup::trust::Trust,
        warnings: &mut Vec<String>,
    ) -> Option<crate::kernel::hooks::Hooks> {
        use crate::kernel::hooks::{HookConfig, HookEnv, Hooks, SessionFields};
        let mut config = HookConfig::default();
        for layer in &self.files.hook_layers {
            let (mut c, w) = HookConfig::parse(&layer.value, &layer.origin.to_string());
            warnings.extend(w);
            if layer.origin.level.is_project() {
                c.retain(|event, matcher, hook| {
                    trust.hook_runs(event.as_str(), matcher, &hook.command)
                });
                if c.confine() {
                    warnings.push(format!(
                        "{}: \"sandbox\": false is ignored in a project's settings: its hooks \
                         run in the session's sandbox (only your own settings files may let a \
                         hook out)",
                        layer.origin
                    ));
                }
            }
            config.merge(c);
        }
        if config.is_empty() {
            return None;
        }
        let env = HookEnv {
            cwd: env.cwd.clone(),
            project_dir: crate::settings::project_root(&env.cwd),
            tool_env: tool_env.clone(),
            temp_dir: env.keel_home.join("tmp"),
            readable: self.claude_home.iter().map(|h| h.join("hooks")).collect(),
        };
        let permission_mode = match self.permission {
            Permission::Auto => "bypassPermissions",
            Permission::Ask => "default",
            Permission::AcceptEdits => "acceptEdits",
            Permission::ReadOnly | Permission::Plan => "plan",
        };
        let fields = SessionFields {
            permission_mode: permission_mode.into(),
            ..SessionFields::default()
        };
        Some(Hooks::new(config, env, fields))
    }
}

/// Seconds an approval dialog waits when neither a flag nor a file says.
pub const DEFAULT_APPROVAL_TIMEOUT: f64 = 300.0;

/// The settings files of a session in `env.cwd` (`inline`: the `--settings` layer), merged,
/// Claude Code's files included unless keel's settings turn them off.
pub fn load(inline: Option<&SettingsLayer>, env: &Env) -> Result<settings::Loaded, StartupError> {
    load_with(inline, None, env)
}

/// [`load`] with the spec's `claudeFiles` (`Some(false)`: `--no-claude-files`).
pub fn load_with(
    inline: Option<&SettingsLayer>,
    claude_files: Option<bool>,
    env: &Env,
) -> Result<settings::Loaded, StartupError> {
    let inline = inline.map(|v| match v {
        SettingsLayer::File(p) => Inline::File(env.cwd.join(p)),
        SettingsLayer::Json(j) => Inline::Json(j.clone()),
    });
    settings::load(&sources(inline.as_ref(), env), claude_files).map_err(|e| {
        let err = StartupError::config(e.message)
            .hint("fix the file (`keel config schema` prints the keys it may hold)");
        match e.cause {
            Some(c) => err.cause(c),
            None => err,
        }
    })
}

/// Claude Code's user directory when `loaded` says Claude's files are read.
pub fn claude_home(loaded: &settings::Loaded, env: &Env) -> Option<PathBuf> {
    settings::claude_home(&env.vars).filter(|_| loaded.claude_on)
}

/// The settings sources of a session in `env.cwd`, highest first.
pub fn sources(inline: Option<&Inline>, env: &Env) -> Vec<settings::Source> {
    let managed = settings::managed_path(&env.vars);
    let claude = settings::claude_home(&env.vars);
    settings::sources(
        &managed,
        inline,
        &env.cwd,
        &env.keel_home,
        claude.as_deref(),
    )
}

/// The managed file's value, else the flag's, else the other files' value.
fn pick<T: Clone>(file: Option<&Sourced<T>>, flag: Option<T>) -> Option<T> {
    match file {
        Some(f) if f.origin.level == Level::Managed => Some(f.value.clone()),
        _ => flag.or_else(|| file.map(|f| f.value.clone())),
    }
}

/// keel's mode for `permissions.defaultMode`.
fn mode_of(m: DefaultMode) -> Permission {
    match m {
        DefaultMode::Auto => Permission::Auto,
        DefaultMode::Ask => Permission::Ask,
        DefaultMode::ReadOnly => Permission::ReadOnly,
        DefaultMode::AcceptEdits => Permission::AcceptEdits,
        DefaultMode::Plan => Permission::Plan,
    }
}

impl Settings {
    /// Checkpoints (§16) unless the settings turn them off: the shadow repositories under
    /// `$KEEL_HOME/checkpoints`, driven by the `git` found on `PATH`. Without `git` they are
    /// off, with one warning.
    pub fn checkpoints(
        &self,
        env: &Env,
        warnings: &mut Vec<String>,
    ) -> Option<std::sync::Arc<crate::kernel::checkpoint::Checkpoints>> {
        use crate::kernel::checkpoint::{Caps, Checkpoints};
        let c = self.files.checkpoints;
        if c.enabled == Some(false) {
            return None;
        }
        let Some(git) = find_git(env) else {
            warnings
                .push("checkpoints are off: `git` was not found on PATH (rewind needs it)".into());
            return None;
        };
        let default = Caps::default();
        Some(std::sync::Arc::new(Checkpoints {
            git,
            root: env.keel_home.join("checkpoints"),
            caps: Caps {
                max_file_bytes: c.max_file_bytes.unwrap_or(default.max_file_bytes),
                max_files: c.max_files.unwrap_or(default.max_files),
                max_total_bytes: c.max_total_bytes.unwrap_or(default.max_total_bytes),
            },
        }))
    }
}

/// The first `git` executable on the environment's `PATH`.
pub fn find_git(env: &Env) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = env.vars.get("PATH")?;
    std::env::split_paths(path)
        .map(|dir| dir.join("git"))
        .find(|p| {
            p.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The settings of a session opened with `spec` in a temp project whose
    /// `.keel/settings.json` is `project` and whose managed file is `managed`.
    fn resolve(spec: SessionSpec, project: Value, managed: Value) -> Settings {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work");
        std::fs::create_dir_all(work.join(".keel")).unwrap();
        std::fs::write(work.join(".keel/settings.json"), project.to_string()).unwrap();
        let managed_file = dir.path().join("managed.json");
        std::fs::write(&managed_file, managed.to_string()).unwrap();
        let vars = [(
            settings::MANAGED_VAR.to_string(),
            managed_file.display().to_string(),
        )];
        let env = crate::setup::open::env_in(
            &vars.into_iter().collect(),
            dir.path(),
            dir.path(),
            &work,
            BTreeMap::new(),
        );
        Settings::resolve(&spec, Mode::Print, &env).unwrap()
    }

    #[test]
    fn files_beat_defaults_flags_beat_files_and_managed_beats_flags() {
        let project = json!({"thinking": "high", "approvalTimeout": 5, "autoCompaction": false,
                             "maxTurns": 2, "env": {"A": "1"}});
        let s = resolve(SessionSpec::new(), project.clone(), json!({}));
        assert_eq!(s.thinking, Some(Thinking::High));
        assert_eq!(s.approval_timeout, 5.0);
        assert!(!s.auto_compaction);
        assert_eq!(s.max_turns, Some(2));
        assert_eq!(s.tool_vars["A"], "1");
        assert_eq!(
            (s.permission, s.permission_chosen),
            (Permission::Auto, false)
        );
        let asked = SessionSpec {
            thinking: Some(Thinking::Low),
            approval_timeout: Some(9.0),
            max_turns: Some(7),
            ..SessionSpec::new()
        };
        let s = resolve(asked, project.clone(), json!({}));
        assert_eq!(s.thinking, Some(Thinking::Low));
        assert_eq!(s.approval_timeout, 9.0);
        assert_eq!(s.max_turns, Some(7));
        let asked = SessionSpec {
            max_turns: Some(7),
            permission: Some(Permission::Auto),
            ..SessionSpec::new()
        };
        let s = resolve(
            asked,
            project,
            json!({"maxTurns": 1, "permissions": {"defaultMode": "read-only"}}),
        );
        assert_eq!(s.max_turns, Some(1));
        assert_eq!(s.permission, Permission::ReadOnly);
        let s = resolve(SessionSpec::new(), json!({}), json!({}));
        assert_eq!(s.approval_timeout, DEFAULT_APPROVAL_TIMEOUT);
        assert!(s.auto_compaction);
    }

    /// A Claude file's value is below a flag's (and the managed file's), and what it leaves out
    /// is one startup warning; `claudeFiles: false` from the spec turns the file off.
    #[test]
    fn a_flag_beats_claudes_files_and_their_ignored_keys_are_one_warning() {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work");
        let claude = json!({"model": "haiku", "apiKeyHelper": "k.sh", "cleanupPeriodDays": 3});
        std::fs::create_dir_all(work.join(".claude")).unwrap();
        std::fs::write(work.join(".claude/settings.json"), claude.to_string()).unwrap();
        let vars = [
            (
                settings::MANAGED_VAR.to_string(),
                "/nonexistent".to_string(),
            ),
            ("HOME".to_string(), dir.path().display().to_string()),
        ];
        let env = crate::setup::open::env_in(
            &vars.into_iter().collect(),
            dir.path(),
            dir.path(),
            &work,
            BTreeMap::new(),
        );
        let s = Settings::resolve(&SessionSpec::new(), Mode::Print, &env).unwrap();
        assert_eq!(s.model.as_deref(), Some("anthropic/claude-haiku-4-5"));
        let about: Vec<&String> = s
            .warnings
            .iter()
            .filter(|w| w.contains(".claude/settings.json"))
            .collect();
        assert_eq!(about.len(), 1, "{:?}", s.warnings);
        assert!(about[0].contains("2 entries keel does not use (apiKeyHelper, cleanupPeriodDays)"));
        let flagged = SessionSpec {
            model: Some("openai/x".into()),
            ..SessionSpec::new()
        };
        let s = Settings::resolve(&flagged, Mode::Print, &env).unwrap();
        assert_eq!(s.model.as_deref(), Some("openai/x"));
        let off = SessionSpec {
            claude_files: Some(false),
            ..SessionSpec::new()
        };
        let s = Settings::resolve(&off, Mode::Print, &env).unwrap();
        assert_eq!(s.model, None);
        assert!(
            s.warnings.iter().any(|w| w.contains("(--no-claude-files)")),
            "{:?}",
            s.warnings
        );
    }
}
