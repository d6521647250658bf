//! The `hooks` key of a settings file in Claude Code's shape, read into typed groups: which
//! event, which matcher, which commands. Unknown handler types and malformed entries become
//! warnings naming the entry; the rest of the file still applies.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::Value;

use super::matcher::Matcher;
use super::HookEvent;
use crate::kernel::field::{Entries, Field, FieldType};

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
        let events: Field<Entries<Field<Vec<Field<GroupView>>>>> =
            Field::deserialize(value).unwrap_or(Field::Wrong);
        let Some(Entries(events)) = events.given() else {
            warnings.push(format!(
                "{origin}: `hooks` must be an object of event names"
            ));
            return (config, warnings);
        };
        for (name, groups) in events {
            let Some(event) = HookEvent::parse(&name) else {
                warnings.push(format!(
                    "{origin}: hooks.{name}: unknown hook event; skipped"
                ));
                continue;
            };
            let Some(groups) = groups.given() else {
                warnings.push(format!("{origin}: hooks.{name} must be a list; skipped"));
                continue;
            };
            for (i, group) in groups.into_iter().enumerate() {
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

/// A `{"matcher": …, "hooks": […]}` entry as written.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct GroupView {
    matcher: Field<String>,
    hooks: Field<Vec<Field<HandlerView>>>,
}

impl FieldType for GroupView {
    const MUST_BE: &'static str = "an object";
    fn accepts(v: &Value) -> bool {
        v.is_object()
    }
}

/// One handler as written (one that is not an object reads as empty: no `type`).
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct HandlerView {
    #[serde(rename = "type")]
    kind: Field<String>,
    command: Field<String>,
    timeout: Field<f64>,
    status_message: Field<String>,
    once: Field<bool>,
    #[serde(rename = "async")]
    background: Field<bool>,
    sandbox: Field<bool>,
    /// Claude Code's fields keel does not support yet: only whether they were written.
    async_rewake: Field<IgnoredAny>,
    args: Field<IgnoredAny>,
    #[serde(rename = "if")]
    condition: Field<IgnoredAny>,
}

impl FieldType for HandlerView {
    const MUST_BE: &'static str = "an object";
    fn accepts(v: &Value) -> bool {
        v.is_object()
    }
}

fn parse_group(
    group: Field<GroupView>,
    origin: &str,
    at: &str,
    warnings: &mut Vec<String>,
) -> Option<MatcherGroup> {
    let Some(group) = group.given() else {
        warnings.push(format!("{at}: must be an object with `hooks`; skipped"));
        return None;
    };
    let matcher_text = match group.matcher {
        Field::Absent | Field::Null => String::new(),
        Field::Given(s) => s,
        Field::Wrong => {
            warnings.push(format!("{at}.matcher: must be a string; skipped"));
            return None;
        }
    };
    let matcher = match Matcher::parse(&matcher_text) {
        Ok(m) => m,
        Err(e) => {
            warnings.push(format!("{at}.matcher: {e}; skipped"));
            return None;
        }
    };
    let Some(handlers) = group.hooks.given() else {
        warnings.push(format!("{at}.hooks: must be a list; skipped"));
        return None;
    };
    let hooks = handlers
        .into_iter()
        .enumerate()
        .filter_map(|(j, h)| {
            let h = h.given().unwrap_or_default();
            parse_handler(h, origin, &format!("{at}.hooks[{j}]"), warnings)
        })
        .collect();
    Some(MatcherGroup { matcher, hooks })
}

fn parse_handler(
    handler: HandlerView,
    origin: &str,
    at: &str,
    warnings: &mut Vec<String>,
) -> Option<HookCommand> {
    let kind = handler.kind.given().unwrap_or_default();
    if kind != "command" {
        warnings.push(format!(
            "{at}: hook type `{kind}` is not supported (keel runs `command` hooks); skipped"
        ));
        return None;
    }
    let Some(command) = handler.command.given() else {
        warnings.push(format!("{at}: `command` must be a string; skipped"));
        return None;
    };
    let timeout = match handler.timeout {
        Field::Absent | Field::Null => None,
        Field::Given(s) if s > 0.0 && s.is_finite() => Some(Duration::from_secs_f64(s)),
        Field::Given(_) | Field::Wrong => {
            warnings.push(format!(
                "{at}.timeout: must be a positive number of seconds; the default applies"
            ));
            None
        }
    };
    let unsupported = [
        ("asyncRewake", &handler.async_rewake),
        ("args", &handler.args),
        ("if", &handler.condition),
    ];
    for (name, field) in unsupported {
        if !field.is_absent() {
            warnings.push(format!("{at}.{name}: not supported by keel yet; ignored"));
        }
    }
    Some(HookCommand {
        command,
        timeout,
        status_message: handler.status_message.given(),
        origin: origin.to_string(),
        once: flag(handler.once, "once", false, at, warnings),
        background: flag(handler.background, "async", false, at, warnings),
        unsandboxed: !flag(handler.sandbox, "sandbox", true, at, warnings),
    })
}

/// A boolean field of a handler (absent: `default`); another type is a warning and `default`.
fn flag(
    field: Field<bool>,
    name: &str,
    default: bool,
    at: &str,
    warnings: &mut Vec<String>,
) -> bool {
    match field {
        Field::Absent | Field::Null => default,
        Field::Given(b) => b,
        Field::Wrong => {
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

    /// Every warning for a malformed entry, word for word and in the file's order (events and
    /// entries as written, then each handler's fields in a fixed order).
    #[test]
    fn each_malformed_entry_is_warned_about_exactly_once_in_order() {
        let at = "/p/.keel/settings.json";
        let (_, w) = cfg(json!(["not", "an", "object"]));
        assert_eq!(
            w,
            [format!("{at}: `hooks` must be an object of event names")]
        );
        let (_, w) = cfg(Value::Null);
        assert_eq!(
            w,
            [format!("{at}: `hooks` must be an object of event names")]
        );
        let (c, w) = cfg(json!({
            "Stop": [
                7,
                {"matcher": 3, "hooks": []},
                {"hooks": null},
                {"matcher": null, "hooks": [
                    "text",
                    {"type": 1},
                    {"type": "command", "command": null},
                    {"type": "command", "command": "a.sh", "timeout": 0,
                     "if": null, "args": [], "asyncRewake": true,
                     "once": "yes", "async": 1, "sandbox": null, "statusMessage": 5},
                    {"type": "command", "command": "b.sh", "timeout": 1.5, "statusMessage": "B"}
                ]}
            ],
            "Nope": 1,
            "PreToolUse": null
        }));
        let want = [
            "hooks.Stop[0]: must be an object with `hooks`; skipped",
            "hooks.Stop[1].matcher: must be a string; skipped",
            "hooks.Stop[2].hooks: must be a list; skipped",
            "hooks.Stop[3].hooks[0]: hook type `` is not supported (keel runs `command` hooks); skipped",
            "hooks.Stop[3].hooks[1]: hook type `` is not supported (keel runs `command` hooks); skipped",
            "hooks.Stop[3].hooks[2]: `command` must be a string; skipped",
            "hooks.Stop[3].hooks[3].timeout: must be a positive number of seconds; the default applies",
            "hooks.Stop[3].hooks[3].asyncRewake: not supported by keel yet; ignored",
            "hooks.Stop[3].hooks[3].args: not supported by keel yet; ignored",
            "hooks.Stop[3].hooks[3].if: not supported by keel yet; ignored",
            "hooks.Stop[3].hooks[3].once: must be true or false; ignored",
            "hooks.Stop[3].hooks[3].async: must be true or false; ignored",
            "hooks.Nope: unknown hook event; skipped",
            "hooks.PreToolUse must be a list; skipped",
        ]
        .map(|w| format!("{at}: {w}"));
        assert_eq!(w, want);
        let hooks = c.matching(HookEvent::Stop, &[]);
        let read: Vec<_> = hooks
            .iter()
            .map(|h| {
                (
                    h.command.as_str(),
                    h.timeout,
                    h.status_message.as_deref(),
                    h.once,
                )
            })
            .collect();
        assert_eq!(
            read,
            [
                ("a.sh", None, None, false),
                ("b.sh", Some(Duration::from_secs_f64(1.5)), Some("B"), false)
            ]
        );
        assert!(!hooks[0].unsandboxed && !hooks[0].background);
    }
}
