//! Claude Code's settings files (`~/.claude/settings.json`, `<project>/.claude/settings.json`,
//! `<project>/.claude/settings.local.json`) as layers of keel's. The keys keel honours
//! (`hooks`, `permissions`, `env`, `model`, `statusLine`) go through keel's own checks; every
//! other key, a rule naming a Claude tool keel does not have, a hook of a kind keel does not
//! run and a hook event keel does not send are collected as ignored, each with the reason: not
//! a warning at each start (`keel config show` lists them; a session says once how many).

use std::path::PathBuf;

use serde::Serialize;
use serde_json::{Map, Value};

use super::file::{self, FileValues};
use super::{Error, ErrorKind, Level, Origin};
use crate::kernel::hooks::HookEvent;

/// The variable that moves Claude Code's user directory (as Claude Code reads it).
pub const CLAUDE_CONFIG_VAR: &str = "CLAUDE_CONFIG_DIR";

/// One entry of a Claude Code settings file that keel does not use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Ignored {
    /// The file.
    pub file: String,
    /// The key (`apiKeyHelper`, `permissions.allow[WebFetch]`, `hooks.Stop`).
    pub key: String,
    /// Why keel does not use it.
    pub reason: String,
}

/// Claude Code's settings files that exist but are not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaudeOff {
    /// What turned them off: `--no-claude-files`, or the keel file that says `"claudeFiles":
    /// false`.
    pub by: String,
    pub files: Vec<PathBuf>,
}

/// One Claude file parsed: the values keel uses, the warnings about malformed ones, and what it
/// leaves out.
pub(super) struct Parsed {
    pub values: FileValues,
    pub warnings: Vec<String>,
    pub ignored: Vec<Ignored>,
}

/// What turns Claude Code's files off, if anything: the managed file's `claudeFiles`, else the
/// flag, else the highest of keel's own files that sets it (`keel`: keel's files, highest
/// first). `None`: they are read.
pub(super) fn off_by(keel: &[(Origin, FileValues)], flag: Option<bool>) -> Option<String> {
    let set = |(o, v): &(Origin, FileValues)| v.claude_files.map(|on| (on, o.place.clone()));
    let managed = keel
        .iter()
        .filter(|(o, _)| o.level == Level::Managed)
        .find_map(set);
    let flag = flag.map(|on| (on, "--no-claude-files".to_string()));
    let chosen = managed
        .or(flag)
        .or_else(|| keel.iter().find_map(set))
        .filter(|(on, _)| !on)?;
    Some(match chosen.1.as_str() {
        "--no-claude-files" => chosen.1,
        file => format!("\"claudeFiles\": false in {file}"),
    })
}

/// Parses the text of the Claude Code settings file at `origin`.
pub(super) fn parse(text: &str, origin: &Origin) -> Result<Parsed, Error> {
    let Value::Object(map) = file::json_of(text, origin)? else {
        return Err(Error {
            kind: ErrorKind::Syntax,
            message: format!("{origin}: the settings must be a JSON object"),
            cause: None,
        });
    };
    let mut s = Sorter {
        origin,
        ignored: Vec::new(),
    };
    let mut keep = Map::new();
    for (key, v) in map {
        let kept = match key.as_str() {
            "$schema" => continue,
            "env" | "statusLine" => v,
            "model" => match s.model(v) {
                Some(v) => v,
                None => continue,
            },
            "permissions" => s.permissions(v),
            "hooks" => s.hooks(v),
            _ => {
                s.ignore(&key, reason(&key));
                continue;
            }
        };
        keep.insert(key, kept);
    }
    let parsed = file::parse_value(Value::Object(keep), origin)?;
    Ok(Parsed {
        values: parsed.values,
        warnings: parsed.warnings,
        ignored: s.ignored,
    })
}

/// Sorts a Claude file's entries into what keel reads and what it leaves out.
struct Sorter<'a> {
    origin: &'a Origin,
    ignored: Vec<Ignored>,
}

impl Sorter<'_> {
    fn ignore(&mut self, key: &str, reason: impl Into<String>) {
        self.ignored.push(Ignored {
            file: self.origin.to_string(),
            key: key.to_string(),
            reason: reason.into(),
        });
    }

    /// `model`: Claude's aliases as the current Anthropic model of the family, a model id as
    /// it is; Claude's account-level choices are ignored.
    fn model(&mut self, v: Value) -> Option<Value> {
        let Some(name) = v.as_str() else {
            return Some(v);
        };
        let family = name.strip_suffix("[1m]").unwrap_or(name);
        match family {
            "sonnet" | "opus" | "haiku" => match current_model(family) {
                Some(id) => Some(Value::from(format!("anthropic/{id}"))),
                None => {
                    self.ignore("model", format!("keel's catalog has no `{family}` model"));
                    None
                }
            },
            "default" | "opusplan" => {
                self.ignore(
                    "model",
                    format!("`{name}` is a choice of Claude's account or plan mode; keel's own model choice stands"),
                );
                None
            }
            _ => Some(v),
        }
    }

    /// `permissions`: the rules naming Claude tools keel does not have, and the keys keel does
    /// not read, are left out.
    fn permissions(&mut self, v: Value) -> Value {
        let Value::Object(map) = v else { return v };
        let mut keep = Map::new();
        for (key, v) in map {
            match key.as_str() {
                "allow" | "ask" | "deny" => {
                    let v = self.rules(&key, v);
                    keep.insert(key, v);
                }
                "defaultMode" | "additionalDirectories" => {
                    keep.insert(key, v);
                }
                "disableBypassPermissionsMode" => self.ignore(
                    &format!("permissions.{key}"),
                    "keel has no switch to forbid its auto mode; set the mode in managed settings",
                ),
                _ => self.ignore(&format!("permissions.{key}"), "not a key keel knows"),
            }
        }
        Value::Object(keep)
    }

    fn rules(&mut self, list: &str, v: Value) -> Value {
        let Value::Array(rules) = v else { return v };
        let mut keep = Vec::new();
        for rule in rules {
            let tool = rule
                .as_str()
                .map(|r| r.split('(').next().unwrap_or(r).trim());
            match tool.filter(|t| CLAUDE_ONLY_TOOLS.contains(t)) {
                Some(tool) => self.ignore(
                    &format!("permissions.{list}[{}]", rule.as_str().unwrap_or_default()),
                    format!("Claude's tool `{tool}` has no keel counterpart: the rule would match nothing"),
                ),
                None => keep.push(rule),
            }
        }
        Value::Array(keep)
    }

    /// `hooks`: the handlers keel cannot run (Claude's `prompt` and `agent` hooks) and the
    /// events keel does not send are left out; malformed entries stay for keel's checks.
    fn hooks(&mut self, v: Value) -> Value {
        let Value::Object(events) = v else { return v };
        let mut keep = Map::new();
        for (event, groups) in events {
            if HookEvent::parse(&event).is_none() {
                self.ignore(&format!("hooks.{event}"), "an event keel does not send");
                continue;
            }
            let Value::Array(groups) = groups else {
                keep.insert(event, groups);
                continue;
            };
            let groups: Vec<Value> = groups
                .into_iter()
                .filter_map(|g| self.group(&event, g))
                .collect();
            if !groups.is_empty() {
                keep.insert(event, Value::Array(groups));
            }
        }
        Value::Object(keep)
    }

    /// One `{matcher, hooks}` group without the handlers keel cannot run (`None`: none left).
    fn group(&mut self, event: &str, group: Value) -> Option<Value> {
        let Value::Object(mut g) = group else {
            return Some(group);
        };
        let matcher = g.get("matcher").and_then(Value::as_str).unwrap_or_default();
        let key = match matcher {
            "" => format!("hooks.{event}"),
            m => format!("hooks.{event}[{m}]"),
        };
        let Some(Value::Array(handlers)) = g.remove("hooks") else {
            return Some(Value::Object(g));
        };
        let mut keep = Vec::new();
        for h in handlers {
            match h.get("type").and_then(Value::as_str) {
                Some(kind) if kind != "command" => self.ignore(
                    &key,
                    format!("a `{kind}` hook: keel runs `command` hooks only"),
                ),
                _ => keep.push(h),
            }
        }
        if keep.is_empty() {
            return None;
        }
        g.insert("hooks".into(), Value::Array(keep));
        Some(Value::Object(g))
    }
}

/// Claude Code's tools that keel has no counterpart of: a permission rule naming one matches
/// nothing in keel.
const CLAUDE_ONLY_TOOLS: &[&str] = &[
    "WebFetch",
    "WebSearch",
    "NotebookEdit",
    "NotebookRead",
    "Task",
    "Agent",
    "TodoWrite",
    "TodoRead",
    "SlashCommand",
    "Skill",
    "ExitPlanMode",
    "EnterPlanMode",
    "AskUserQuestion",
    "BashOutput",
    "KillShell",
    "KillBash",
    "ListMcpResourcesTool",
    "ReadMcpResourceTool",
    "LSP",
];

/// Why keel does not use the top-level Claude key `key`.
pub(super) fn reason(key: &str) -> &'static str {
    match key {
        "apiKeyHelper" | "forceLoginMethod" | "forceLoginOrgUUID" | "awsAuthRefresh"
        | "awsCredentialExport" | "otelHeadersHelper" => {
            "keel reads provider keys from its own provider config (`keel --help`: --api-key, models.json)"
        }
        "includeCoAuthoredBy" | "attribution" => "keel does not commit or open pull requests",
        "enabledPlugins" | "extraKnownMarketplaces" | "strictKnownMarketplaces" => {
            "plugins are not supported"
        }
        "cleanupPeriodDays" => "keel keeps sessions until you delete them (`keel sessions`)",
        "outputStyle" => "keel has no output styles (use --append-system-prompt)",
        "disableAllHooks" | "allowManagedHooksOnly" => {
            "keel runs the hooks of every settings file: remove a hook to stop it, or set \"claudeFiles\": false"
        }
        "allowManagedPermissionRulesOnly" => {
            "keel merges the rules of every level; managed deny rules always apply"
        }
        "enableAllProjectMcpServers"
        | "enabledMcpjsonServers"
        | "disabledMcpjsonServers"
        | "allowedMcpServers"
        | "deniedMcpServers" => "keel asks about a project's .mcp.json servers by its project trust",
        "sandbox" => {
            "keel's sandbox is set in keel's own settings (`sandbox` of .keel/settings.json)"
        }
        "alwaysThinkingEnabled" => "keel's reasoning effort is `thinking` in keel's settings",
        "mcpServers" => "Claude reads MCP servers from .mcp.json and ~/.claude.json; so does keel's .mcp.json",
        "companyAnnouncements" | "spinnerTipsEnabled" | "spinnerVerbs" | "showTurnDuration"
        | "terminalProgressBarEnabled" | "language" | "fileSuggestion" | "respectGitignore"
        | "autoUpdatesChannel" | "plansDirectory" | "agent" => {
            "a setting of Claude Code's own interface"
        }
        "claudeFiles" => "keel's own key: only keel's settings files turn Claude's files off",
        _ => "not a key keel knows",
    }
}

/// The current Anthropic model of `family` (`sonnet`, `opus`, `haiku`): the first of the
/// catalog's models (newest first) whose id is `claude-<family>-…`.
pub fn current_model(family: &str) -> Option<String> {
    let registry = crate::kernel::provider::model::Registry::builtin();
    let prefix = format!("claude-{family}-");
    registry
        .provider("anthropic")?
        .models
        .iter()
        .find(|m| m.id.starts_with(&prefix))
        .map(|m| m.id.clone())
}

/// One line per Claude file with entries keel does not use, and one when Claude's files exist
/// but are off.
pub(super) fn warnings(ignored: &[Ignored], off: Option<&ClaudeOff>) -> Vec<String> {
    let mut out = Vec::new();
    let mut files: Vec<&str> = Vec::new();
    for i in ignored {
        if !files.contains(&i.file.as_str()) {
            files.push(&i.file);
        }
    }
    for f in files {
        let keys: Vec<&str> = ignored
            .iter()
            .filter(|i| i.file == f)
            .map(|i| i.key.as_str())
            .collect();
        let n = keys.len();
        let what = if n == 1 { "entry" } else { "entries" };
        out.push(format!(
            "{f}: {n} {what} keel does not use ({}); `keel config show` lists them with the reason",
            keys.join(", ")
        ));
    }
    if let Some(off) = off {
        let files: Vec<String> = off.files.iter().map(|p| p.display().to_string()).collect();
        out.push(format!(
            "Claude Code's settings files are off ({}): {} not read; drop the flag or set \"claudeFiles\": true to read them",
            off.by,
            files.join(", ")
        ));
    }
    out
}
