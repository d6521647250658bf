//! The `hooks` key of a settings file in Claude Code's shape, read into typed groups: which
//! event, which matcher, which commands. Unknown handler types and malformed entries become
//! warnings naming the entry; the rest of the file still applies.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use super::matcher::Matcher;
use super::HookEvent;

/// One command hook: `{"type": "command", "command": "…", "timeout": 60}`.
#[derive(Debug, Clone, PartialEq)]
pub struct HookCommand {
    /// Run with `sh -c` in the session's cwd.
    pub command: String,
    /// `timeout` in seconds; `None`: the event's default.
    pub timeout: Option<Duration>,
    /// `statusMessage`: what a front end may show while it runs.
    pub status_message: Option<String>,
    /// `once`: it runs at most once per session.
    pub once: bool,
    /// `async`: it runs in the background; nothing waits for it and its result is ignored.
    pub background: bool,
    /// `"sandbox": false` (keel's key; Claude Code ignores it): the hook runs outside the
    /// session's sandbox. Only the user's own files may say so: a project's are
    /// [`HookConfig::confine`]d.
    pub unsandboxed: bool,
    /// The settings file (or flag) the hook came from.
    pub origin: String,
}

/// A `{"matcher": …, "hooks": […]}` entry of one event.
#[derive(Debug, Clone)]
pub struct MatcherGroup {
    pub matcher: Matcher,
    pub hooks: Vec<HookCommand>,
}

/// Every configured hook, per event, in the order the layers were merged.
#[derive(Debug, Clone, Default)]
pub struct HookConfig {
    events: BTreeMap<HookEvent, Vec<MatcherGroup>>,
}

impl HookConfig {
    /// Reads the value of a `hooks` key from `origin`. Returns what could be read and a warning
    /// per entry that could not (naming `origin` and the entry).
    pub fn parse(value: &Value, origin: &str) -> (HookConfig, Vec<String>) {
        let mut config = HookConfig::default();
        let mut warnings = Vec::new();
        let Some(events) = value.as_object() else {
            warnings.push(format!(
                "{origin}: `hooks` must be an object of event names"
            ));
            return (config, warnings);
        };
        for (name, groups) in events {
            let Some(event) = HookEvent::parse(name) else {
                warnings.push(format!(
                    "{origin}: hooks.{name}: unknown hook event; skipped"
                ));
                continue;
            };
            let Some(groups) = groups.as_array() else {
                warnings.push(format!("{origin}: hooks.{name} must be a list; skipped"));
                continue;
            };
            for (i, group) in groups.iter().enumerate() {
                let at = format!("{origin}: hooks.{name}[{i}]");
                if let Some(g) = parse_group(group, origin, &at, &mut warnings) {
                    config.events.entry(event).or_default().push(g);
                }
            }
        }
        (config, warnings)
    }

    /// Adds `other`'s hooks after this one's (all levels' hooks run).
    pub fn merge(&mut self, other: HookConfig) {
        for (event, groups) in other.events {
            self.events.entry(event).or_default().extend(groups);
        }
    }

    /// Keeps only the hooks `keep(event, matcher text, hook)` accepts (an untrusted project's
    /// are left out before the session starts).
    pub fn retain(&mut self, mut keep: impl FnMut(HookEvent, &str, &HookCommand) -> bool) {
        for (event, groups) in &mut self.events {
            for group in groups.iter_mut() {
                let matcher = group.matcher.source().to_string();
                group.hooks.retain(|h| keep(*event, &matcher, h));
            }
        }
    }

    /// Puts every hook back in the sandbox (a project's own file may not let a hook out).
    /// Returns whether one had asked to be let out.
    pub fn confine(&mut self) -> bool {
        let mut asked = false;
        for hook in self
            .events
            .values_mut()
            .flatten()
            .flat_map(|g| &mut g.hooks)
        {
            asked |= std::mem::take(&mut hook.unsandboxed);
        }
        asked
    }

    /// Whether no hook is configured for `event`.
    pub fn is_empty_for(&self, event: HookEvent) -> bool {
        self.events.get(&event).is_none_or(|g| g.is_empty())
    }

    /// Whether no hook is configured at all.
    pub fn is_empty(&self) -> bool {
        self.events.values().all(|g| g.is_empty())
    }

    /// The commands that run for `event` when its matcher subject is one of `subjects` (a
    /// tool's Claude and keel names, the start source, …; empty for events that ignore
    /// matchers), in configuration order; the same command string configured twice runs once.
    pub fn matching(&self, event: HookEvent, subjects: &[&str]) -> Vec<HookCommand> {
        let mut out: Vec<HookCommand> = Vec::new();
        let groups = self.events.get(&event).map(Vec::as_slice).unwrap_or(&[]);
        for group in groups {
            let applies = !event.uses_matcher()
                || subjects.is_empty()
                || subjects.iter().any(|s| group.matcher.matches(s));
            if !applies {
                continue;
            }
            for hook in &group.hooks {
                if !out.iter().any(|h| h.command == hook.command) {
                    out.push(hook.clone());
                }
            }
        }
        out
    }

    /// Every configured hook with its event and matcher text, for `keel hooks list` and `/hooks`.
    pub fn list(&self) -> Vec<(HookEvent, String, HookCommand)> {
        let mut out = Vec::new();
        for (event, groups) in &self.events {
            for group in groups {
                for hook in &group.hooks {
                    out.push((*event, group.matcher.source().to_string(), hook.clone()));
                }
            }
        }
        out
    }
}

fn parse_group(
    group: &Value,
    origin: &str,
    at: &str,
    warnings: &mut Vec<String>,
) -> Option<MatcherGroup> {
    let Some(obj) = group.as_object() else {
        warnings.push(format!("{at}: must be an object with `hooks`; skipped"));
        return None;
    };
    let matcher_text = match obj.get("matcher") {
        None | Some(Value::Null) => "",
        Some(Value::String(s)) => s.as_str(),
        Some(_) => {
            warnings.push(format!("{at}.matcher: must be a string; skipped"));
            return None;
        }
    };
    let matcher = match Matcher::parse(matcher_text) {
        Ok(m) => m,
        Err(e) => {
            warnings.push(format!("{at}.matcher: {e}; skipped"));
            return None;
        }
    };
    let Some(handlers) = obj.get("hooks").and_then(Value::as_array) else {
        warnings.push(format!("{at}.hooks: must be a list; skipped"));
        return None;
    };
    let hooks = handlers
        .iter()
        .enumerate()
        .filter_map(|(j, h)| parse_handler(h, origin, &format!("{at}.hooks[{j}]"), warnings))
        .collect();
    Some(MatcherGroup { matcher, hooks })
}

fn parse_handler(
    handler: &Value,
    origin: &str,
    at: &str,
    warnings: &mut Vec<String>,
) -> Option<HookCommand> {
    let kind = handler.get("type").and_then(Value::as_str).unwrap_or("");
    if kind != "command" {
        warnings.push(format!(
            "{at}: hook type `{kind}` is not supported (keel runs `command` hooks); skipped"
        ));
        return None;
    }
    let Some(command) = handler.get("command").and_then(Value::as_str) else {
        warnings.push(format!("{at}: `command` must be a string; skipped"));
        return None;
    };
    let timeout = match handler.get("timeout") {
        None | Some(Value::Null) => None,
        Some(v) => match v.as_f64().filter(|s| *s > 0.0 && s.is_finite()) {
            Some(s) => Some(Duration::from_secs_f64(s)),
            None => {
                warnings.push(format!(
                    "{at}.timeout: must be a positive number of seconds; the default applies"
                ));
                None
            }
        },
    };
    for unsupported in ["asyncRewake", "args", "if"] {
        if handler.get(unsupported).is_some() {
            warnings.push(format!(
                "{at}.{unsupported}: not supported by keel yet; ignored"
            ));
        }
    }
    Some(HookCommand {
        command: command.to_string(),
        timeout,
        status_message: handler
            .get("statusMessage")
            .and_then(Value::as_str)
            .map(str::to_string),
        origin: origin.to_string(),
        once: flag(handler, "once", at, warnings),
        background: flag(handler, "async", at, warnings),
        unsandboxed: !flag_or(handler, "sandbox", true, at, warnings),
    })
}

/// A boolean field of a handler (absent: false); another type is a warning and false.
fn flag(handler: &Value, name: &str, at: &str, warnings: &mut Vec<String>) -> bool {
    flag_or(handler, name, false, at, warnings)
}

/// A boolean field of a handler (absent: `default`); another type is a warning and `default`.
fn flag_or(
    handler: &Value,
    name: &str,
    default: bool,
    at: &str,
    warnings: &mut Vec<String>,
) -> bool {
    match handler.get(name) {
        None | Some(Value::Null) => default,
        Some(Value::Bool(b)) => *b,
        Some(_) => {
            warnings.push(format!("{at}.{name}: must be true or false; ignored"));
            default
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cfg(v: Value) -> (HookConfig, Vec<String>) {
        HookConfig::parse(&v, "/p/.keel/settings.json")
    }

    #[test]
    fn claude_shaped_hooks_are_read_per_event_and_matcher() {
        let (c, w) = cfg(json!({"PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "guard.sh", "timeout": 30}]},
            {"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "fmt.sh"}]}
        ]}));
        assert!(w.is_empty(), "{w:?}");
        let bash = c.matching(HookEvent::PreToolUse, &["Bash"]);
        assert_eq!(bash.len(), 1);
        assert_eq!(bash[0].command, "guard.sh");
        assert_eq!(bash[0].timeout, Some(Duration::from_secs(30)));
        assert_eq!(bash[0].origin, "/p/.keel/settings.json");
        let write = c.matching(HookEvent::PreToolUse, &["Write"]);
        assert_eq!(write[0].command, "fmt.sh");
        assert!(c.matching(HookEvent::PreToolUse, &["Read"]).is_empty());
        assert!(c.matching(HookEvent::PostToolUse, &["Bash"]).is_empty());
    }

    #[test]
    fn the_same_command_in_two_layers_runs_once_and_all_levels_run() {
        let hook = |cmd: &str| json!({"Stop": [{"hooks": [{"type": "command", "command": cmd}]}]});
        let (mut a, _) = HookConfig::parse(&hook("lint.sh"), "user");
        let (b, _) = HookConfig::parse(&hook("lint.sh"), "project");
        let (c, _) = HookConfig::parse(&hook("notify.sh"), "project");
        a.merge(b);
        a.merge(c);
        let cmds: Vec<String> = a
            .matching(HookEvent::Stop, &[])
            .into_iter()
            .map(|h| h.command)
            .collect();
        assert_eq!(cmds, ["lint.sh", "notify.sh"]);
    }

    #[test]
    fn sandbox_false_lets_a_hook_out_until_it_is_confined() {
        let (mut c, w) = cfg(json!({"Stop": [{"hooks": [
            {"type": "command", "command": "out.sh", "sandbox": false},
            {"type": "command", "command": "in.sh", "sandbox": true},
            {"type": "command", "command": "default.sh"},
            {"type": "command", "command": "odd.sh", "sandbox": "no"}]}]}));
        let out = |c: &HookConfig| -> Vec<bool> {
            c.matching(HookEvent::Stop, &[])
                .iter()
                .map(|h| h.unsandboxed)
                .collect()
        };
        assert_eq!(out(&c), [true, false, false, false]);
        assert_eq!(
            w,
            ["/p/.keel/settings.json: hooks.Stop[0].hooks[3].sandbox: must be true or false; ignored"]
        );
        assert!(c.confine(), "one had asked to be let out");
        assert_eq!(out(&c), [false; 4]);
        assert!(!c.confine());
    }

    #[test]
    fn events_without_matchers_ignore_the_matcher() {
        let (c, _) = cfg(json!({"UserPromptSubmit": [{"matcher": "Bash", "hooks": [
            {"type": "command", "command": "ctx.sh"}]}]}));
        assert_eq!(c.matching(HookEvent::UserPromptSubmit, &[]).len(), 1);
    }

    #[test]
    fn bad_entries_are_warnings_naming_file_and_entry_and_only_they_are_skipped() {
        let (c, w) = cfg(json!({
            "PreToolUse": [{"matcher": "Bash", "hooks": [
                {"type": "http", "url": "http://x"},
                {"type": "command", "command": "ok.sh", "timeout": "soon"}]}],
            "NoSuchEvent": [],
            "Stop": {"hooks": []},
            "PostToolUse": [{"matcher": "(", "hooks": []}]
        }));
        assert_eq!(
            c.matching(HookEvent::PreToolUse, &["Bash"])[0].command,
            "ok.sh"
        );
        let all = w.join("\n");
        for needle in [
            "/p/.keel/settings.json: hooks.PreToolUse[0].hooks[0]: hook type `http` is not supported",
            "hooks.PreToolUse[0].hooks[1].timeout: must be a positive number",
            "hooks.NoSuchEvent: unknown hook event",
            "hooks.Stop must be a list",
            "hooks.PostToolUse[0].matcher:",
        ] {
            assert!(all.contains(needle), "missing {needle:?} in\n{all}");
        }
    }
}
