//! The merge of the files' values, highest level first (Claude Code's rules): a scalar takes
//! the value of the highest level that sets it; lists concatenate, deduplicated (each level can
//! only add); objects merge per key. `tools` is an allowlist, so it is a scalar: the highest
//! level that sets it wins (a list that only grows could never narrow the tools). An MCP
//! server's entry is one value: the highest level that names the server wins.

use std::collections::BTreeMap;

use serde_json::Value;

use super::file::{DefaultMode, FileCheckpoints, FileValues, Thinking};
use super::Origin;

/// A value and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Sourced<T> {
    pub value: T,
    pub origin: Origin,
}

/// The merged `permissions` (the rules are kept as written; matching them is not done here).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Permissions {
    pub default_mode: Option<Sourced<DefaultMode>>,
    /// The mode of the highest level that is not a project's own file: what applies when the
    /// project's own mode waits for trust.
    pub default_mode_outside_project: Option<Sourced<DefaultMode>>,
    pub allow: Vec<Sourced<String>>,
    pub ask: Vec<Sourced<String>>,
    pub deny: Vec<Sourced<String>>,
    pub additional_directories: Vec<Sourced<String>>,
}

/// Every file's values merged, each with its origin.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Merged {
    /// `provider/id` or a model id.
    pub model: Option<Sourced<String>>,
    pub thinking: Option<Sourced<Thinking>>,
    pub tools: Option<Sourced<Vec<String>>>,
    pub max_turns: Option<Sourced<u32>>,
    /// How deep subagents nest (`task` calls inside subagents).
    pub max_subagent_depth: Option<Sourced<u32>>,
    /// Seconds an approval dialog waits.
    pub approval_timeout: Option<Sourced<f64>>,
    pub auto_compaction: Option<Sourced<bool>>,
    /// Kept for the cost cap (not applied yet).
    pub max_cost: Option<Sourced<f64>>,
    /// Variables set for the session's tools.
    pub env: BTreeMap<String, Sourced<String>>,
    pub permissions: Permissions,
    /// MCP servers by name, each entry as `mcp.json` writes it.
    pub mcp_servers: BTreeMap<String, Sourced<Value>>,
    /// `sandbox {…}` (§14): scalars from the highest level, `filesystem` lists concatenated.
    pub sandbox: super::sandbox::SandboxSettings,
    /// `hooks {…}` (§15), merged per key (what `keel config show` prints).
    pub hooks: Option<Sourced<Value>>,
    /// Each file's `hooks`, highest level first: all levels' hooks run.
    pub hook_layers: Vec<Sourced<Value>>,
    /// `checkpoints {…}`, merged per key (the highest level setting a key wins).
    pub checkpoints: FileCheckpoints,
    /// How the TUI notifies a user whose window is not focused.
    pub notify: Option<Sourced<super::file::NotifyChannel>>,
    /// The TUI's status line command (Claude's `statusLine`).
    pub status_line: Option<Sourced<super::file::StatusLine>>,
    /// `claudeFiles` of keel's own files (`false`: Claude Code's files are not read).
    pub claude_files: Option<Sourced<bool>>,
    /// `jobs {…}`, whole, from the highest level that sets it.
    pub jobs: Option<Sourced<super::file::JobsSettings>>,
    /// `worktree {…}`, whole, from the highest level that sets it.
    pub worktree: Option<Sourced<super::file::WorktreeSettings>>,
    /// `lsp {…}`, whole, from the highest level that sets it.
    pub lsp: Option<Sourced<crate::kernel::lsp::LspSettings>>,
}

/// Merges `files`, highest level first.
pub fn merge(files: Vec<(Origin, FileValues)>) -> Merged {
    let mut m = Merged::default();
    for (origin, f) in files {
        scalar(&mut m.model, f.model.map(|v| at(v, &origin)));
        scalar(&mut m.thinking, f.thinking.map(|v| at(v, &origin)));
        scalar(&mut m.tools, f.tools.map(|v| at(v, &origin)));
        scalar(&mut m.max_turns, f.max_turns.map(|v| at(v, &origin)));
        scalar(
            &mut m.max_subagent_depth,
            f.max_subagent_depth.map(|v| at(v, &origin)),
        );
        scalar(
            &mut m.approval_timeout,
            f.approval_timeout.map(|v| at(v, &origin)),
        );
        scalar(
            &mut m.auto_compaction,
            f.auto_compaction.map(|v| at(v, &origin)),
        );
        scalar(&mut m.max_cost, f.max_cost.map(|v| at(v, &origin)));
        scalar(&mut m.notify, f.notify.map(|v| at(v, &origin)));
        scalar(&mut m.status_line, f.status_line.map(|v| at(v, &origin)));
        scalar(&mut m.claude_files, f.claude_files.map(|v| at(v, &origin)));
        scalar(&mut m.jobs, f.jobs.map(|v| at(v, &origin)));
        scalar(&mut m.worktree, f.worktree.map(|v| at(v, &origin)));
        scalar(&mut m.lsp, f.lsp.map(|v| at(v, &origin)));
        for (k, v) in f.env {
            m.env.entry(k).or_insert_with(|| at(v, &origin));
        }
        for (k, v) in f.mcp_servers {
            m.mcp_servers.entry(k).or_insert_with(|| at(v, &origin));
        }
        let (p, fp) = (&mut m.permissions, f.permissions);
        let mode = fp.default_mode.map(|v| at(v, &origin));
        if !origin.level.is_project() {
            scalar(&mut p.default_mode_outside_project, mode.clone());
        }
        scalar(&mut p.default_mode, mode);
        list(&mut p.allow, fp.allow, &origin);
        list(&mut p.ask, fp.ask, &origin);
        list(&mut p.deny, fp.deny, &origin);
        list(
            &mut p.additional_directories,
            fp.additional_directories,
            &origin,
        );
        super::sandbox::merge(&mut m.sandbox, f.sandbox, &origin);
        if let Some(h) = &f.hooks {
            m.hook_layers.push(at(Value::Object(h.clone()), &origin));
        }
        object(&mut m.hooks, f.hooks, &origin);
        let (c, fc) = (&mut m.checkpoints, f.checkpoints);
        c.enabled = c.enabled.or(fc.enabled);
        c.max_file_bytes = c.max_file_bytes.or(fc.max_file_bytes);
        c.max_files = c.max_files.or(fc.max_files);
        c.max_total_bytes = c.max_total_bytes.or(fc.max_total_bytes);
    }
    m
}

fn at<T>(value: T, origin: &Origin) -> Sourced<T> {
    Sourced {
        value,
        origin: origin.clone(),
    }
}

/// A scalar: the first (highest) level that sets it keeps it.
fn scalar<T>(slot: &mut Option<Sourced<T>>, v: Option<Sourced<T>>) {
    if slot.is_none() {
        *slot = v;
    }
}

/// A list: the entries not there yet are added, with their origin.
pub(super) fn list(slot: &mut Vec<Sourced<String>>, add: Vec<String>, origin: &Origin) {
    for v in add {
        if !slot.iter().any(|s| s.value == v) {
            slot.push(Sourced {
                value: v,
                origin: origin.clone(),
            });
        }
    }
}

/// A raw object merged per key into `slot` (which keeps the highest origin).
fn object(
    slot: &mut Option<Sourced<Value>>,
    add: Option<serde_json::Map<String, Value>>,
    origin: &Origin,
) {
    let Some(add) = add else { return };
    match slot {
        None => {
            *slot = Some(Sourced {
                value: Value::Object(add),
                origin: origin.clone(),
            })
        }
        Some(s) => deep(&mut s.value, Value::Object(add)),
    }
}

/// `lower` merged under `into`: objects per key, arrays concatenated without duplicates,
/// scalars kept.
pub(super) fn deep(into: &mut Value, lower: Value) {
    match (into, lower) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                match a.get_mut(&k) {
                    Some(mine) => deep(mine, v),
                    None => {
                        a.insert(k, v);
                    }
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            for v in b {
                if !a.contains(&v) {
                    a.push(v);
                }
            }
        }
        _ => {}
    }
}
