//! `keel config show`'s two forms of the merged settings: lines of `key = value  # origin`
//! (`+=` for each entry of a list), and JSON where each value is `{"value", "origin"}`; then
//! what Claude Code's files hold that keel does not use (`ignored:` lines, an `ignored` array).

use serde::Serialize;
use serde_json::{json, Map, Value};

use super::merge::{Merged, Sourced};
use super::Ignored;

/// The merged settings as `key = value  # origin` lines, then one `ignored:` section listing
/// `file: key: reason` for what Claude Code's files hold that keel does not use.
pub fn render(m: &Merged, ignored: &[Ignored]) -> String {
    let mut out = String::new();
    for (path, v) in entries(m) {
        let key = path.join(".");
        match v {
            Entry::One(s) if key == "hooks" => hook_lines(&mut out, &s),
            Entry::One(s) => line(&mut out, &key, "=", &s),
            Entry::Many(list) => {
                for s in list {
                    line(&mut out, &key, "+=", &s);
                }
            }
        }
    }
    if out.is_empty() {
        out.push_str("(no settings: every value is a flag's or keel's default)\n");
    }
    if !ignored.is_empty() {
        out.push_str("\nignored (in Claude Code's files, not used by keel):\n");
        for i in ignored {
            out.push_str(&format!("  {}: {}: {}\n", i.file, i.key, i.reason));
        }
    }
    out
}

/// One `hooks` group as a settings file holds it (what `keel config show` prints of it).
#[derive(serde::Deserialize)]
struct HookGroup {
    #[serde(default)]
    matcher: Option<String>,
    #[serde(default)]
    hooks: Vec<Value>,
}

/// `hooks` one handler a line: `hooks.PreToolUse[Bash] += {"type":"command",…}  # origin`
/// (as is, in one line, when it does not have the shape of a `hooks` key).
fn hook_lines(out: &mut String, s: &Sourced<Value>) {
    type Groups = std::collections::BTreeMap<String, Vec<HookGroup>>;
    let Ok(events) = serde_json::from_value::<Groups>(s.value.clone()) else {
        return line(out, "hooks", "=", s);
    };
    for (event, groups) in events {
        for group in groups {
            let key = match group.matcher.as_deref() {
                Some(m) if !m.is_empty() => format!("hooks.{event}[{m}]"),
                _ => format!("hooks.{event}"),
            };
            for handler in group.hooks {
                out.push_str(&format!("{key} += {handler}  # {}\n", s.origin));
            }
        }
    }
}

fn line(out: &mut String, key: &str, op: &str, s: &Sourced<Value>) {
    out.push_str(&format!("{key} {op} {}  # {}\n", s.value, s.origin));
}

/// The merged settings as one JSON object (keys as in the file; each value `{value, origin}`),
/// with an `ignored` array of `{file, key, reason}` when Claude Code's files hold keys keel does
/// not use.
pub fn render_json(m: &Merged, ignored: &[Ignored]) -> String {
    let mut root = Map::new();
    for (path, v) in entries(m) {
        let v = match v {
            Entry::One(s) => pair(&s),
            Entry::Many(list) => Value::Array(list.iter().map(pair).collect()),
        };
        insert(&mut root, &path, v);
    }
    if !ignored.is_empty() {
        let list = serde_json::to_value(ignored).unwrap_or(Value::Null);
        root.insert("ignored".into(), list);
    }
    format!("{}\n", Value::Object(root))
}

fn pair(s: &Sourced<Value>) -> Value {
    json!({"value": s.value, "origin": s.origin.to_string()})
}

/// Puts `v` at `path` (`["permissions", "allow"]`, `["env", NAME]`) of `root`.
fn insert(root: &mut Map<String, Value>, path: &[String], v: Value) {
    match path {
        [] => {}
        [last] => {
            root.insert(last.clone(), v);
        }
        [head, rest @ ..] => {
            let child = root
                .entry(head.clone())
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(child) = child {
                insert(child, rest, v);
            }
        }
    }
}

/// One shown value: a scalar or object, or a list's entries.
enum Entry {
    One(Sourced<Value>),
    Many(Vec<Sourced<Value>>),
}

/// A key's path: `"permissions.allow"` is `["permissions", "allow"]`; `sub` is one segment.
fn path(key: &str, sub: Option<&str>) -> Vec<String> {
    let mut p: Vec<String> = key.split('.').map(str::to_string).collect();
    p.extend(sub.map(str::to_string));
    p
}

/// The merged values in the file's key order, as JSON with their origins.
fn entries(m: &Merged) -> Vec<(Vec<String>, Entry)> {
    let mut out = Vec::new();
    let mut one = |key: Vec<String>, v: Option<Sourced<Value>>| {
        if let Some(v) = v {
            out.push((key, Entry::One(v)));
        }
    };
    one(path("model", None), m.model.as_ref().map(to_json));
    one(path("thinking", None), m.thinking.as_ref().map(to_json));
    one(path("tools", None), m.tools.as_ref().map(to_json));
    one(path("maxTurns", None), m.max_turns.as_ref().map(to_json));
    one(
        path("maxSubagentDepth", None),
        m.max_subagent_depth.as_ref().map(to_json),
    );
    one(
        path("approvalTimeout", None),
        m.approval_timeout.as_ref().map(to_json),
    );
    one(
        path("autoCompaction", None),
        m.auto_compaction.as_ref().map(to_json),
    );
    one(path("maxCost", None), m.max_cost.as_ref().map(to_json));
    one(path("notify", None), m.notify.as_ref().map(to_json));
    one(
        path("statusLine", None),
        m.status_line.as_ref().map(to_json),
    );
    one(
        path("claudeFiles", None),
        m.claude_files.as_ref().map(to_json),
    );
    one(path("jobs", None), m.jobs.as_ref().map(to_json));
    one(path("worktree", None), m.worktree.as_ref().map(to_json));
    one(path("lsp", None), m.lsp.as_ref().map(to_json));
    for (k, v) in &m.env {
        one(path("env", Some(k)), Some(to_json(v)));
    }
    let p = &m.permissions;
    one(
        path("permissions.defaultMode", None),
        p.default_mode.as_ref().map(to_json),
    );
    let lists = [
        ("allow", &p.allow),
        ("ask", &p.ask),
        ("deny", &p.deny),
        ("additionalDirectories", &p.additional_directories),
    ];
    for (name, list) in lists {
        if !list.is_empty() {
            let list = list.iter().map(to_json).collect();
            out.push((path("permissions", Some(name)), Entry::Many(list)));
        }
    }
    let mut one = |key: Vec<String>, v: Option<Sourced<Value>>| {
        if let Some(v) = v {
            out.push((key, Entry::One(v)));
        }
    };
    for (k, v) in &m.mcp_servers {
        one(path("mcpServers", Some(k)), Some(v.clone()));
    }
    sandbox(&m.sandbox, &mut out);
    if let Some(h) = &m.hooks {
        out.push((path("hooks", None), Entry::One(h.clone())));
    }
    out
}

/// The `sandbox` keys: scalars as one entry, the `filesystem` lists entry by entry.
fn sandbox(s: &super::SandboxSettings, out: &mut Vec<(Vec<String>, Entry)>) {
    let mut one = |key: &str, v: Option<Sourced<Value>>| {
        if let Some(v) = v {
            out.push((path(key, None), Entry::One(v)));
        }
    };
    one("sandbox.mode", s.mode.as_ref().map(to_json));
    one("sandbox.network", s.network.as_ref().map(to_json));
    one("sandbox.bwrapPath", s.bwrap_path.as_ref().map(to_json));
    one(
        "sandbox.failIfUnavailable",
        s.fail_if_unavailable.as_ref().map(to_json),
    );
    one(
        "sandbox.allowEscalation",
        s.allow_escalation.as_ref().map(to_json),
    );
    one("sandbox.limits.pids", s.limits_pids.as_ref().map(to_json));
    one(
        "sandbox.limits.memory",
        s.limits_memory.as_ref().map(to_json),
    );
    if !s.pass_env.is_empty() {
        let list = s.pass_env.iter().map(to_json).collect();
        out.push((path("sandbox.passEnv", None), Entry::Many(list)));
    }
    let lists = [
        ("allowWrite", &s.allow_write),
        ("denyRead", &s.deny_read),
        ("allowRead", &s.allow_read),
    ];
    for (name, list) in lists {
        if !list.is_empty() {
            let list = list.iter().map(to_json).collect();
            out.push((path("sandbox.filesystem", Some(name)), Entry::Many(list)));
        }
    }
}

fn to_json<T: Serialize>(s: &Sourced<T>) -> Sourced<Value> {
    Sourced {
        value: serde_json::to_value(&s.value).unwrap_or(Value::Null),
        origin: s.origin.clone(),
    }
}
