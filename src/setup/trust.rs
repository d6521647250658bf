//! The one trust store, `$KEEL_HOME/trust.json`, and what it decides for a session. Everything
//! a project brings that runs programs or loosens what the agent may do waits for the user's
//! trust, kept by content, so what changes later (a `git pull`) waits again:
//! - each MCP server of the project (`.mcp.json` and `.keel/mcp.json` of its root and of the
//!   session's directory, its settings files' `mcpServers`) by the SHA-256 of its entry;
//! - each hook of its own settings files by the SHA-256 of its event, matcher and command;
//! - its `allow` rules, `env`, `statusLine`, a looser `defaultMode` and sandbox widenings by one
//!   hash of the set;
//! - its agents and skills (instructions to the model) with the project: keyed by the project's
//!   root, so a session in a subdirectory has them too.
//!
//! `deny` and `ask` rules never wait. `--trust-project` trusts all of it for one run and records
//! nothing; the TUI asks and records the answer. Reads and writes the store; never asks, never
//! prints.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::kernel::hooks::HookConfig;
use crate::mcp::config::ProjectTrust;
use crate::mode::Env;
use crate::settings::{DefaultMode, Merged};
use crate::setup::Settings;

/// The file in `$KEEL_HOME`.
const FILE: &str = "trust.json";

/// `trust.json`.
#[derive(Deserialize, Serialize, Default)]
struct Store {
    /// Directories whose MCP servers start (the TUI's yes).
    #[serde(default)]
    trusted: Vec<String>,
    /// Directories whose "trust it?" was answered no for their MCP servers alone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    declined: Vec<String>,
    /// What of each project's settings files was trusted, by project root.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    projects: BTreeMap<String, Record>,
}

/// The trusted content of one project's settings files.
#[derive(Deserialize, Serialize, Default, Clone, Debug)]
struct Record {
    /// Each trusted MCP server of the project (`.mcp.json`, `.keel/mcp.json`, its settings
    /// files' `mcpServers`): its name and the digest of its entry.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    servers: BTreeMap<String, String>,
    /// Each trusted hook: its place (`project PreToolUse[Bash]#0`) and its hash.
    #[serde(default)]
    hooks: BTreeMap<String, String>,
    /// The hash of the trusted allow rules and env.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    settings: Option<String>,
    /// The hash of what was asked about when the answer was no (not asked again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    declined: Option<String>,
}

/// One hook of a project's own settings file.
#[derive(Debug, Clone)]
pub struct ProjectHook {
    pub event: &'static str,
    pub matcher: String,
    pub command: String,
    /// `timeout` in seconds, if set.
    pub timeout: Option<f64>,
    /// The file it came from.
    pub origin: String,
    /// Where it stands in the file (a changed hook keeps its place).
    place: String,
    hash: String,
}

/// Whether a hook may run, as `keel hooks list` and `/hooks` show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookTrust {
    /// Not a project's own file: user, managed or `--settings` hooks always run.
    NotNeeded,
    Trusted,
    /// Never trusted.
    Untrusted,
    /// Trusted before with another content at its place.
    Changed,
}

impl HookTrust {
    /// The word of the JSON listing.
    pub fn word(self) -> &'static str {
        match self {
            HookTrust::NotNeeded => "not needed",
            HookTrust::Trusted => "trusted",
            HookTrust::Untrusted => "untrusted",
            HookTrust::Changed => "changed",
        }
    }
}

/// What a project's own settings files ask for that waits for trust.
#[derive(Debug, Clone, Default)]
pub struct Wants {
    pub hooks: Vec<ProjectHook>,
    /// `allow` rules with their file.
    pub allow: Vec<(String, String)>,
    /// `env` keys with their file.
    pub env: Vec<(String, String)>,
    /// Values that widen the sandbox (`sandbox.mode: "off"`, an `allowWrite` path, …).
    pub sandbox: Vec<crate::setup::sandbox::Widening>,
    /// A `permissions.defaultMode` looser than the one of the levels below the project's files
    /// (the user's, else keel's default `auto`), with its file.
    pub mode: Option<(String, String)>,
    /// A `statusLine` command, with its file (it runs as a program, as a hook does).
    pub status_line: Option<(String, String)>,
    /// The hash of the allow rules, env, status line, mode and sandbox widenings (`None`: there
    /// are none).
    settings_hash: Option<String>,
    /// What that hash is made of (sorted).
    lines: Vec<String>,
}

fn sha256(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0]);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// A hook's hash: its event, matcher and command.
fn hook_hash(event: &str, matcher: &str, command: &str) -> String {
    sha256(&[event, matcher, command])
}

/// What the project files among `files` ask for.
pub fn wants(files: &Merged) -> Wants {
    let mut w = Wants::default();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for layer in files
        .hook_layers
        .iter()
        .filter(|l| l.origin.level.is_project())
    {
        let (config, _) = HookConfig::parse(&layer.value, &layer.origin.to_string());
        for (event, matcher, hook) in config.list() {
            let key = format!(
                "{} {}[{matcher}]",
                layer.origin.level.word(),
                event.as_str()
            );
            let n = seen.entry(key.clone()).or_default();
            w.hooks.push(ProjectHook {
                event: event.as_str(),
                hash: hook_hash(event.as_str(), &matcher, &hook.command),
                place: format!("{key}#{n}"),
                matcher,
                command: hook.command,
                timeout: hook.timeout.map(|t| t.as_secs_f64()),
                origin: hook.origin,
            });
            *n += 1;
        }
    }
    let mut lines = Vec::new();
    for r in files
        .permissions
        .allow
        .iter()
        .filter(|r| r.origin.level.is_project())
    {
        w.allow.push((r.value.clone(), r.origin.to_string()));
        lines.push(format!("allow\0{}", r.value));
    }
    for (k, v) in files
        .env
        .iter()
        .filter(|(_, v)| v.origin.level.is_project())
    {
        w.env.push((k.clone(), v.origin.to_string()));
        lines.push(format!("env\0{k}\0{}", v.value));
    }
    if let Some(m) = files.permissions.default_mode.as_ref() {
        let below = files.permissions.default_mode_outside_project.as_ref();
        let loosens = strictness(m.value) < below.map_or(0, |b| strictness(b.value));
        if m.origin.level.is_project() && loosens {
            lines.push(format!("mode\0{}", m.value.word()));
            w.mode = Some((m.value.word().to_string(), m.origin.to_string()));
        }
    }
    if let Some(line) = files.status_line.as_ref() {
        if line.origin.level.is_project() {
            lines.push(format!("statusLine\0{}", line.value.command));
            w.status_line = Some((line.value.command.clone(), line.origin.to_string()));
        }
    }
    for wide in crate::setup::sandbox::widenings(files) {
        lines.push(format!("sandbox\0{}\0{}", wide.key, wide.value));
        w.sandbox.push(wide);
    }
    lines.sort();
    w.settings_hash = hash_of(&lines);
    w.lines = lines;
    w
}

/// How much a mode asks before tools run (`auto`, keel's default, asks nothing).
fn strictness(m: DefaultMode) -> u8 {
    match m {
        DefaultMode::Auto => 0,
        DefaultMode::AcceptEdits => 1,
        DefaultMode::Ask => 2,
        DefaultMode::ReadOnly | DefaultMode::Plan => 3,
    }
}

fn hash_of(lines: &[String]) -> Option<String> {
    (!lines.is_empty()).then(|| sha256(&lines.iter().map(String::as_str).collect::<Vec<_>>()))
}

/// What a host calls once an "always" answer saved `rules` to the project's local settings
/// file: if the project's allow rules and env were trusted as they stood (or it had none), the
/// set with the user's new rules is trusted too, so the next session applies what the user
/// chose; nothing the user did not trust becomes trusted (`--trust-project` alone trusts for
/// one run, and records nothing).
pub fn saved_rules(settings: &Settings, env: &Env) -> crate::host::SavedRules {
    let trust = std::sync::Mutex::new(Trust::read(settings, env));
    let keel_home = env.keel_home.clone();
    std::sync::Arc::new(move |cwd: &Path, rules: &[String]| {
        let mut trust = trust.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(e) = trust.add_saved(&keel_home, cwd, rules) {
            tracing::warn!("cannot record the trust of saved rules: {e}");
        }
    })
}

/// What the store and the flags decide for a session in one directory.
#[derive(Debug, Clone)]
pub struct Trust {
    /// `--trust-project`.
    flag: bool,
    record: Record,
    pub wants: Wants,
}

impl Trust {
    /// Reads the store for a session with `settings` in `env.cwd`.
    pub fn read(settings: &Settings, env: &Env) -> Trust {
        Trust::of(&settings.files, settings.trust_project, env)
    }

    /// Reads the store for the merged settings `files` of `env.cwd` (`flag`: `--trust-project`).
    pub fn of(files: &Merged, flag: bool, env: &Env) -> Trust {
        let record = read(&env.keel_home)
            .projects
            .remove(&project_key(&env.cwd))
            .unwrap_or_default();
        Trust {
            flag,
            record,
            wants: wants(files),
        }
    }

    /// Whether a project hook with this content runs.
    pub fn hook_runs(&self, event: &str, matcher: &str, command: &str) -> bool {
        let hash = hook_hash(event, matcher, command);
        self.flag || self.record.hooks.values().any(|h| *h == hash)
    }

    /// The stored trust of a project hook (the flag aside).
    pub fn hook(&self, h: &ProjectHook) -> HookTrust {
        if self.record.hooks.values().any(|v| *v == h.hash) {
            HookTrust::Trusted
        } else if self.record.hooks.contains_key(&h.place) {
            HookTrust::Changed
        } else {
            HookTrust::Untrusted
        }
    }

    /// Adds the rules an "always" answer saved (see [`saved_rules`]).
    fn add_saved(&mut self, keel_home: &Path, cwd: &Path, rules: &[String]) -> std::io::Result<()> {
        let trusted = self.wants.settings_hash.is_none() || self.settings_trusted();
        let w = &mut self.wants;
        for r in rules {
            let line = format!("allow\0{r}");
            if !w.lines.contains(&line) {
                w.lines.push(line);
            }
        }
        w.lines.sort();
        w.settings_hash = hash_of(&w.lines);
        if !trusted {
            return Ok(());
        }
        self.record.settings = w.settings_hash.clone();
        let mut store = read(keel_home);
        let record = store.projects.entry(project_key(cwd)).or_default();
        record.settings = w.settings_hash.clone();
        write(keel_home, &store)
    }

    /// Whether a project's own `permissions.defaultMode` applies: one looser than the user's
    /// only as its other settings do (trusted with the same content, or `--trust-project`).
    pub fn mode_applies(&self) -> bool {
        self.wants.mode.is_none() || self.settings_apply()
    }

    /// Which of the project's MCP servers may start: all with `--trust-project`, else those
    /// trusted with the content they have.
    pub fn servers(&self) -> ProjectTrust {
        server_trust(self.flag, &self.record)
    }

    /// Whether the project's allow rules and env apply.
    pub fn settings_apply(&self) -> bool {
        self.flag || self.wants.settings_hash.is_none() || self.settings_trusted()
    }

    fn settings_trusted(&self) -> bool {
        self.record.settings.is_some() && self.record.settings == self.wants.settings_hash
    }

    /// One warning per project file with something left out: its hooks (changed ones say so),
    /// allow rules and env keys.
    pub fn warnings(&self) -> Vec<String> {
        let mut files: BTreeMap<&str, [Vec<String>; 5]> = BTreeMap::new();
        for h in &self.wants.hooks {
            if self.hook_runs(h.event, &h.matcher, &h.command) {
                continue;
            }
            let changed = match self.hook(h) {
                HookTrust::Changed => " (changed since trusted)",
                _ => "",
            };
            let slot = files.entry(&h.origin).or_default();
            slot[0].push(format!("`{}`{changed}", h.command));
        }
        if !self.settings_apply() {
            if let Some((mode, origin)) = &self.wants.mode {
                files.entry(origin).or_default()[3].push(format!("`{mode}`"));
            }
            if let Some((command, origin)) = &self.wants.status_line {
                files.entry(origin).or_default()[4].push(format!("`{command}`"));
            }
            for (rule, origin) in &self.wants.allow {
                files.entry(origin).or_default()[1].push(format!("`{rule}`"));
            }
            for (key, origin) in &self.wants.env {
                files.entry(origin).or_default()[2].push(format!("`{key}`"));
            }
        }
        files
            .into_iter()
            .map(|(file, [hooks, allow, env, mode, status])| {
                let kinds = [
                    ("hooks", hooks),
                    ("allow rules", allow),
                    ("env", env),
                    ("defaultMode", mode),
                    ("statusLine", status),
                ];
                let parts: Vec<String> = kinds
                    .into_iter()
                    .filter(|(_, l)| !l.is_empty())
                    .map(|(what, l)| format!("its {what} {}", l.join(", ")))
                    .collect();
                format!(
                    "{file}: not trusted, so not applied: {}; pass --trust-project to trust the project for this run, or trust it in keel's TUI",
                    parts.join("; ")
                )
            })
            .collect()
    }
}

/// What the TUI asks about: each part lists what waits for trust.
#[derive(Debug, Clone, Default)]
pub struct Question {
    /// The project's MCP servers not trusted with their present content (a changed one says
    /// so).
    pub servers: Vec<String>,
    /// The project's agents and skills (instructions to the model), while the project is
    /// neither trusted nor declined.
    pub instructions: Vec<String>,
    /// A `statusLine` command of the project's settings.
    pub status_line: Vec<String>,
    /// Hook commands (a changed one says so).
    pub hooks: Vec<String>,
    pub allow: Vec<String>,
    pub env: Vec<String>,
    /// What widens the sandbox (`sandbox.mode: "off"`).
    pub sandbox: Vec<String>,
    /// A mode that loosens approvals (`defaultMode: auto`).
    pub mode: Vec<String>,
    /// Every project server with its digest: what a yes records.
    all_servers: Vec<(String, String)>,
    hash: String,
}

/// What a project holds that the question may list: every one of its MCP servers (name and
/// digest, trusted or not) and the names of its agents and skills.
#[derive(Debug, Clone, Default)]
pub struct Holdings {
    pub servers: Vec<(String, String)>,
    pub instructions: Vec<String>,
}

/// The question to ask for a session in `env.cwd`, `None` when nothing waits for trust or the
/// same was answered no before.
pub fn question(settings: &Settings, env: &Env, holds: Holdings) -> Option<Question> {
    if settings.trust_project {
        return None;
    }
    let store = read(&env.keel_home);
    let known = |list: &[String]| {
        list.contains(&dir_key(&env.cwd)) || list.contains(&project_key(&env.cwd))
    };
    let settled_dir = known(&store.trusted) || known(&store.declined);
    let trust = Trust::read(settings, env);
    let servers = trust.servers();
    let mut q = Question {
        servers: holds
            .servers
            .iter()
            .filter(|(name, digest)| !servers.allows(name, digest))
            .map(|(name, _)| match trust.record.servers.contains_key(name) {
                true => format!("{name} (changed)"),
                false => name.clone(),
            })
            .collect(),
        instructions: match settled_dir {
            true => Vec::new(),
            false => holds.instructions,
        },
        all_servers: holds.servers,
        ..Question::default()
    };
    for h in &trust.wants.hooks {
        match trust.hook(h) {
            HookTrust::Trusted | HookTrust::NotNeeded => {}
            HookTrust::Changed => q.hooks.push(format!("{} (changed)", h.command)),
            HookTrust::Untrusted => q.hooks.push(h.command.clone()),
        }
    }
    if !trust.settings_apply() {
        q.allow = trust.wants.allow.iter().map(|(r, _)| r.clone()).collect();
        q.env = trust.wants.env.iter().map(|(k, _)| k.clone()).collect();
        q.sandbox = trust
            .wants
            .sandbox
            .iter()
            .map(ToString::to_string)
            .collect();
        q.mode = trust
            .wants
            .mode
            .iter()
            .map(|(m, _)| format!("defaultMode: {m}"))
            .collect();
        q.status_line = trust
            .wants
            .status_line
            .iter()
            .map(|(c, _)| c.clone())
            .collect();
    }
    // The agents' and skills' no is the directory's (`declined`); the rest is remembered by
    // its hash, so a server or hook added later is asked about.
    let content: Vec<&str> = [
        &q.servers,
        &q.hooks,
        &q.allow,
        &q.env,
        &q.sandbox,
        &q.mode,
        &q.status_line,
    ]
    .into_iter()
    .flatten()
    .map(String::as_str)
    .collect();
    q.hash = sha256(&content);
    let settled = content.is_empty() || trust.record.declined.as_ref() == Some(&q.hash);
    (!(q.instructions.is_empty() && settled)).then_some(q)
}

/// Records the answer to `q` for a session in `env.cwd`: yes trusts the project's agents and
/// skills, its MCP servers, hooks, allow rules and env as they are now; no is not asked again
/// until something changes.
pub fn answer(settings: &Settings, env: &Env, q: &Question, yes: bool) -> std::io::Result<()> {
    let mut store = read(&env.keel_home);
    let dir = project_key(&env.cwd);
    let record = store.projects.entry(dir.clone()).or_default();
    if yes {
        let w = wants(&settings.files);
        record.hooks = w.hooks.into_iter().map(|h| (h.place, h.hash)).collect();
        record.settings = w.settings_hash;
        record.servers = q.all_servers.iter().cloned().collect();
        record.declined = None;
        store.declined.retain(|d| *d != dir);
        if !store.trusted.contains(&dir) {
            store.trusted.push(dir);
        }
    } else {
        record.declined = Some(q.hash.clone());
        if !q.instructions.is_empty() && !store.declined.contains(&dir) {
            store.declined.push(dir);
        }
    }
    write(&env.keel_home, &store)
}

/// Which of the project's MCP servers may start for a session with `settings` in `env.cwd`.
pub fn servers(settings: &Settings, env: &Env) -> ProjectTrust {
    let mut store = read(&env.keel_home);
    let record = store.projects.remove(&project_key(&env.cwd));
    server_trust(settings.trust_project, &record.unwrap_or_default())
}

/// All with `--trust-project` (`flag`), else the servers `record` holds.
fn server_trust(flag: bool, record: &Record) -> ProjectTrust {
    match flag {
        true => ProjectTrust::All,
        false => ProjectTrust::Recorded(record.servers.clone()),
    }
}

/// Whether the project of a session in `dir` was trusted (its agents and skills load): the
/// project's root, or `dir` itself, was answered yes.
pub fn dir_trusted(keel_home: &Path, dir: &Path) -> bool {
    let store = read(keel_home);
    store.trusted.contains(&project_key(dir)) || store.trusted.contains(&dir_key(dir))
}

fn dir_key(dir: &Path) -> String {
    std::fs::canonicalize(dir)
        .unwrap_or_else(|_| dir.to_path_buf())
        .display()
        .to_string()
}

/// The key of the project of `cwd` (its settings files' `<project>`).
fn project_key(cwd: &Path) -> String {
    dir_key(&crate::settings::project_root(cwd))
}

fn read(keel_home: &Path) -> Store {
    std::fs::read_to_string(keel_home.join(FILE))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

/// Writes the store owner-only, to a temporary file renamed over the old one (a crash never
/// leaves half a file).
fn write(keel_home: &Path, store: &Store) -> std::io::Result<()> {
    crate::kernel::private::create_dir_all(keel_home)?;
    let text = serde_json::to_string_pretty(store).map_err(std::io::Error::other)?;
    let tmp = tempfile::Builder::new()
        .prefix(".trust-")
        .tempfile_in(keel_home)?;
    crate::kernel::private::fix_mode(tmp.as_file())?;
    std::io::Write::write_all(&mut tmp.as_file(), format!("{text}\n").as_bytes())?;
    tmp.as_file().sync_all()?;
    tmp.persist(keel_home.join(FILE)).map_err(|e| e.error)?;
    crate::kernel::private::sync_dir(keel_home)
}

#[cfg(test)]
mod tests;
