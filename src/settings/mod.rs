//! The settings files (`DESIGN.md` §13): which files a session in a directory reads, in which
//! order, and their merge into one set of values that each remember the file (or flag) they
//! came from. A leaf: it reads files and knows keel's keys, never the command line, the
//! terminal or a session. `setup::Settings` lays the flags over what this returns.

mod allow;
mod claude;
mod file;
mod merge;
mod sandbox;
pub mod schema;
mod show;

use std::fmt;
use std::path::{Path, PathBuf};

pub use allow::{add_allow, local_file};
pub use claude::{ClaudeOff, Ignored, CLAUDE_CONFIG_VAR};
pub use file::{
    DefaultMode, JobsSettings, NotifyChannel, Thinking, WorktreeBase, WorktreeSettings,
};
pub use merge::{Merged, Sourced};
pub use sandbox::{NetworkAllow, NetworkSetting, NetworkWord, SandboxModeSetting, SandboxSettings};
pub use show::{render, render_json};

/// The variable that moves the managed settings file (tests; a packaged keel elsewhere).
pub const MANAGED_VAR: &str = "KEEL_MANAGED_SETTINGS";
/// Where the managed settings file is when [`MANAGED_VAR`] is not set.
pub const MANAGED_PATH: &str = "/etc/keel/managed-settings.json";

/// A level of the settings, highest first: a higher one wins a scalar key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// `/etc/keel/managed-settings.json`: beats everything, flags included.
    Managed,
    /// A command-line flag of the run (`--model`, `--permission`, …).
    Flag,
    /// `--settings FILE|JSON`.
    SettingsFlag,
    /// `<project>/.keel/settings.local.json` (personal, not checked in).
    Local,
    /// Claude Code's `<project>/.claude/settings.local.json`.
    ClaudeLocal,
    /// `<project>/.keel/settings.json` (checked in).
    Project,
    /// Claude Code's `<project>/.claude/settings.json`.
    ClaudeProject,
    /// `$KEEL_HOME/settings.json`.
    User,
    /// Claude Code's `~/.claude/settings.json` (`$CLAUDE_CONFIG_DIR/settings.json`).
    ClaudeUser,
}

impl Level {
    /// Whether the level is a project's own file: what it asks for that runs programs or widens
    /// what tools may do waits for the project's trust.
    pub fn is_project(self) -> bool {
        matches!(
            self,
            Level::Project | Level::Local | Level::ClaudeProject | Level::ClaudeLocal
        )
    }

    /// Whether the level is one of Claude Code's settings files.
    pub fn is_claude(self) -> bool {
        matches!(
            self,
            Level::ClaudeLocal | Level::ClaudeProject | Level::ClaudeUser
        )
    }

    /// The word `keel config path` shows for the level.
    pub fn word(self) -> &'static str {
        match self {
            Level::Managed => "managed",
            Level::Flag => "flag",
            Level::SettingsFlag => "--settings",
            Level::Local => "local",
            Level::ClaudeLocal => "claude-local",
            Level::Project => "project",
            Level::ClaudeProject => "claude-project",
            Level::User => "user",
            Level::ClaudeUser => "claude-user",
        }
    }
}

/// Where a value came from: a file of a level, or a flag (`flag --model`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    pub level: Level,
    /// The file, or the flag's spelling (`--settings` with inline JSON: `--settings`).
    pub place: String,
}

impl Origin {
    /// A value given by the flag `flag` (spelt with its dashes).
    pub fn flag(flag: &str) -> Origin {
        Origin {
            level: Level::Flag,
            place: format!("flag {flag}"),
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.place)
    }
}

/// What the `--settings` flag gave: a file path or the JSON itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inline {
    File(PathBuf),
    Json(String),
}

impl Inline {
    /// `--settings VALUE`: JSON when it starts with `{`, else a path relative to `cwd`.
    pub fn of(value: &str, cwd: &Path) -> Inline {
        match value.trim_start().starts_with('{') {
            true => Inline::Json(value.to_string()),
            false => Inline::File(cwd.join(value)),
        }
    }
}

/// One place settings may come from, as `keel config path` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    pub level: Level,
    /// The file (`None`: `--settings` with inline JSON).
    pub path: Option<PathBuf>,
    /// The inline JSON of `--settings {…}`.
    pub json: Option<String>,
}

impl Source {
    /// Whether the file exists (inline JSON always does).
    pub fn exists(&self) -> bool {
        match &self.path {
            Some(p) => p.is_file(),
            None => true,
        }
    }

    fn origin(&self) -> Origin {
        let place = match &self.path {
            Some(p) => p.display().to_string(),
            None => "flag --settings".to_string(),
        };
        Origin {
            level: self.level,
            place,
        }
    }
}

/// The settings sources of a session in `cwd`, highest level first (`managed`: the managed
/// file's path; `inline`: the `--settings` flag; `claude_home`: Claude Code's user directory,
/// see [`claude_home`]). At each level keel's own file comes before Claude Code's.
pub fn sources(
    managed: &Path,
    inline: Option<&Inline>,
    cwd: &Path,
    keel_home: &Path,
    claude_home: Option<&Path>,
) -> Vec<Source> {
    let file = |level, path: PathBuf| Source {
        level,
        path: Some(path),
        json: None,
    };
    let mut out = vec![file(Level::Managed, managed.to_path_buf())];
    match inline {
        Some(Inline::File(p)) => out.push(file(Level::SettingsFlag, p.clone())),
        Some(Inline::Json(j)) => out.push(Source {
            level: Level::SettingsFlag,
            path: None,
            json: Some(j.clone()),
        }),
        None => {}
    }
    let root = project_root(cwd);
    let (dot, claude) = (root.join(".keel"), root.join(".claude"));
    // In the home directory the project's `.claude/settings.json` is the user's own: read once,
    // as the user's (its hooks would otherwise run twice).
    let users = |p: &Path| claude_home.is_some_and(|h| h == p);
    out.push(file(Level::Local, dot.join("settings.local.json")));
    out.push(file(Level::ClaudeLocal, claude.join("settings.local.json")));
    out.push(file(Level::Project, dot.join("settings.json")));
    if !users(&claude) {
        out.push(file(Level::ClaudeProject, claude.join("settings.json")));
    }
    out.push(file(Level::User, keel_home.join("settings.json")));
    if let Some(home) = claude_home {
        out.push(file(Level::ClaudeUser, home.join("settings.json")));
    }
    out
}

/// Claude Code's user directory, as Claude Code finds it: `$CLAUDE_CONFIG_DIR`, else
/// `$HOME/.claude` (`None`: neither is set).
pub fn claude_home(vars: &std::collections::BTreeMap<String, String>) -> Option<PathBuf> {
    match (vars.get(CLAUDE_CONFIG_VAR), vars.get("HOME")) {
        (Some(dir), _) => Some(PathBuf::from(dir)),
        (None, Some(home)) => Some(Path::new(home).join(".claude")),
        (None, None) => None,
    }
}

/// The managed file: `$KEEL_MANAGED_SETTINGS` from `vars`, else `/etc/keel/…`.
pub fn managed_path(vars: &std::collections::BTreeMap<String, String>) -> PathBuf {
    match vars.get(MANAGED_VAR) {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(MANAGED_PATH),
    }
}

/// The project of `cwd`: the nearest directory at or above it holding `.git`, else `cwd`.
pub fn project_root(cwd: &Path) -> PathBuf {
    cwd.ancestors()
        .find(|d| d.join(".git").exists())
        .unwrap_or(cwd)
        .to_path_buf()
}

/// What is wrong with a settings source as a whole (one bad key is a warning, not this).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The file exists but cannot be read, or `--settings` names no file.
    Unreadable,
    /// Not JSON, or not a JSON object.
    Syntax,
}

/// A settings source keel cannot use: its kind and a message naming the place
/// (`file:line:col` for JSON that does not parse), with the parser's words as the cause.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
    pub cause: Option<String>,
}

/// The merged settings and the warnings about entries that were skipped.
#[derive(Debug, Clone, Default)]
pub struct Loaded {
    pub merged: Merged,
    pub warnings: Vec<String>,
    /// What Claude Code's files hold that keel does not use, file by file, each with why.
    pub ignored: Vec<Ignored>,
    /// Claude Code's files that exist but were not read (`claudeFiles: false`), and why.
    pub claude_off: Option<ClaudeOff>,
    /// Whether Claude Code's files are read (nothing turned them off): also their agents,
    /// commands, skills and memory files.
    pub claude_on: bool,
}

impl Loaded {
    /// What a session says once at its start about Claude Code's files: one line per Claude
    /// file with keys keel does not use, and one when existing Claude files are turned off.
    pub fn claude_warnings(&self) -> Vec<String> {
        claude::warnings(&self.ignored, self.claude_off.as_ref())
    }
}

/// Reads `sources` (highest first) and merges them; a missing file is no error. Claude Code's
/// files are read unless the managed file, else `claude_flag` (`--no-claude-files`), else the
/// highest of keel's own files that sets `claudeFiles`, says `false`.
pub fn load(sources: &[Source], claude_flag: Option<bool>) -> Result<Loaded, Error> {
    let mut keel = Vec::new();
    let mut warnings = Vec::new();
    for s in sources.iter().filter(|s| !s.level.is_claude()) {
        let Some(text) = text_of(s)? else { continue };
        let origin = s.origin();
        let parsed = file::parse(&text, &origin)?;
        warnings.extend(parsed.warnings.iter().cloned());
        keel.push((origin, parsed.values));
    }
    let off_by = claude::off_by(&keel, claude_flag);
    let mut ignored = Vec::new();
    let mut skipped = Vec::new();
    let mut claude_files = Vec::new();
    for s in sources.iter().filter(|s| s.level.is_claude()) {
        if off_by.is_some() {
            skipped.extend(s.path.clone().filter(|p| p.is_file()));
            continue;
        }
        let Some(text) = text_of(s)? else { continue };
        let origin = s.origin();
        let parsed = claude::parse(&text, &origin)?;
        warnings.extend(parsed.warnings);
        ignored.extend(parsed.ignored);
        claude_files.push((origin, parsed.values));
    }
    let mut files: Vec<(Origin, file::FileValues)> = keel.into_iter().chain(claude_files).collect();
    files.sort_by_key(|(o, _)| o.level);
    let claude_on = off_by.is_none();
    let claude_off = match (off_by, skipped.is_empty()) {
        (Some(by), false) => Some(ClaudeOff { by, files: skipped }),
        _ => None,
    };
    Ok(Loaded {
        merged: merge::merge(files),
        warnings,
        ignored,
        claude_off,
        claude_on,
    })
}

/// A source's text: inline JSON, or its file's (`None`: the file does not exist).
fn text_of(s: &Source) -> Result<Option<String>, Error> {
    match (&s.path, &s.json) {
        (_, Some(json)) => Ok(Some(json.clone())),
        (Some(p), None) => read(p, s.level),
        (None, None) => Ok(None),
    }
}

/// A file's text; `None` when it does not exist (and is not `--settings`'s, which must).
fn read(path: &Path, level: Level) -> Result<Option<String>, Error> {
    match std::fs::read_to_string(path) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && level != Level::SettingsFlag => {
            Ok(None)
        }
        Err(e) => Err(Error {
            kind: ErrorKind::Unreadable,
            message: format!("cannot read the settings file {}", path.display()),
            cause: Some(e.to_string()),
        }),
    }
}

#[cfg(test)]
mod claude_tests;
#[cfg(test)]
mod tests;
