//! The `sandbox` section of a settings file (`DESIGN.md` §14): its keys checked one by one
//! into typed values (`limits.memory`'s sizes, `"4G"`, read into bytes), and their merge
//! across the levels (scalars: the highest level wins; the `filesystem` lists concatenate).
//! Paths stay as written; `setup` resolves them.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::file::Checker;
use super::merge::Sourced;
use super::Origin;

/// `sandbox.mode`: keel's words, and Codex's `danger-full-access` for `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SandboxModeSetting {
    #[serde(rename = "workspace-write")]
    WorkspaceWrite,
    #[serde(rename = "read-only")]
    ReadOnly,
    #[serde(rename = "off", alias = "danger-full-access")]
    Off,
}

/// `sandbox.network`: `"on"`, `"off"`, or `{"allow": ["crates.io", "*.npmjs.org"]}` (the
/// hosts a proxy outside the sandbox lets through).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum NetworkSetting {
    Word(NetworkWord),
    Allow(NetworkAllow),
}

/// `"on"` or `"off"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NetworkWord {
    On,
    Off,
}

/// `{"allow": [host, …]}`: host names, `*.` wildcards allowed, each on ports 80 and 443 unless
/// it names one (`host:8443`) or any (`host:*`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkAllow {
    pub allow: Vec<String>,
}

/// The `sandbox` values of one file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FileSandbox {
    pub mode: Option<SandboxModeSetting>,
    pub network: Option<NetworkSetting>,
    pub allow_write: Vec<String>,
    pub deny_read: Vec<String>,
    pub allow_read: Vec<String>,
    pub bwrap_path: Option<String>,
    pub fail_if_unavailable: Option<bool>,
    pub allow_escalation: Option<bool>,
    pub pass_env: Vec<String>,
    pub limits_pids: Option<u64>,
    pub limits_memory: Option<u64>,
}

/// The merged `sandbox` values, each with its origin.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SandboxSettings {
    pub mode: Option<Sourced<SandboxModeSetting>>,
    pub network: Option<Sourced<NetworkSetting>>,
    /// `sandbox.filesystem.allowWrite`: writable roots besides the session's directory.
    pub allow_write: Vec<Sourced<String>>,
    /// `sandbox.filesystem.denyRead`: unreadable besides the default secrets.
    pub deny_read: Vec<Sourced<String>>,
    /// `sandbox.filesystem.allowRead`: readable again under a denied path.
    pub allow_read: Vec<Sourced<String>>,
    pub bwrap_path: Option<Sourced<String>>,
    /// Refuse commands when no sandbox works (default true).
    pub fail_if_unavailable: Option<Sourced<bool>>,
    /// `true`: an allow rule may run an escalated call without asking; `false`: never.
    pub allow_escalation: Option<Sourced<bool>>,
    /// `sandbox.passEnv`: credential variables tool processes may see after all.
    pub pass_env: Vec<Sourced<String>>,
    /// `sandbox.limits.pids`: processes (and threads) the session's commands may run at once.
    pub limits_pids: Option<Sourced<u64>>,
    /// `sandbox.limits.memory`, in bytes.
    pub limits_memory: Option<Sourced<u64>>,
}

/// The smallest `sandbox.limits.pids`: the sandbox's own processes and a shell.
pub const MIN_PIDS: u64 = 8;

/// The smallest `sandbox.limits.memory`.
pub const MIN_MEMORY: u64 = 32 << 20;

/// `sandbox`'s keys as they stand in a file.
#[derive(Deserialize)]
struct RawSandbox {
    mode: Option<Value>,
    network: Option<Value>,
    filesystem: Option<Value>,
    #[serde(rename = "bwrapPath")]
    bwrap_path: Option<Value>,
    #[serde(rename = "failIfUnavailable")]
    fail_if_unavailable: Option<Value>,
    #[serde(rename = "allowEscalation")]
    allow_escalation: Option<Value>,
    #[serde(rename = "passEnv")]
    pass_env: Option<Value>,
    limits: Option<Value>,
    #[serde(flatten)]
    unknown: serde_json::Map<String, Value>,
}

/// `sandbox.limits`' keys as they stand in a file.
#[derive(Deserialize)]
struct RawLimits {
    pids: Option<Value>,
    memory: Option<Value>,
    #[serde(flatten)]
    unknown: serde_json::Map<String, Value>,
}

/// `sandbox.filesystem`'s keys as they stand in a file.
#[derive(Deserialize)]
struct RawFilesystem {
    #[serde(rename = "allowWrite")]
    allow_write: Option<Value>,
    #[serde(rename = "denyRead")]
    deny_read: Option<Value>,
    #[serde(rename = "allowRead")]
    allow_read: Option<Value>,
    #[serde(flatten)]
    unknown: serde_json::Map<String, Value>,
}

/// Checks a file's `sandbox` entries; a bad one is a warning and is skipped.
pub(super) fn check(c: &mut Checker<'_>, raw: Option<Value>) -> FileSandbox {
    let Some(raw) = c.typed::<RawSandbox>("sandbox", raw) else {
        return FileSandbox::default();
    };
    for key in raw.unknown.keys() {
        c.warn(&format!("sandbox.{key}"), "unknown key");
    }
    let network = c.typed::<Value>("sandbox.network", raw.network);
    let network = network.and_then(|v| match serde_json::from_value::<NetworkSetting>(v) {
        Ok(n) => Some(n),
        Err(_) => {
            c.warn(
                "sandbox.network",
                "must be \"on\", \"off\" or {\"allow\": [hosts]}",
            );
            None
        }
    });
    let mut out = FileSandbox {
        mode: c.typed("sandbox.mode", raw.mode),
        network,
        bwrap_path: c.typed("sandbox.bwrapPath", raw.bwrap_path),
        fail_if_unavailable: c.typed("sandbox.failIfUnavailable", raw.fail_if_unavailable),
        allow_escalation: c.typed("sandbox.allowEscalation", raw.allow_escalation),
        pass_env: c
            .typed::<Vec<String>>("sandbox.passEnv", raw.pass_env)
            .unwrap_or_default(),
        ..FileSandbox::default()
    };
    if let Some(fs) = c.typed::<RawFilesystem>("sandbox.filesystem", raw.filesystem) {
        for key in fs.unknown.keys() {
            c.warn(&format!("sandbox.filesystem.{key}"), "unknown key");
        }
        let mut list = |key: &str, v| {
            c.typed::<Vec<String>>(&format!("sandbox.filesystem.{key}"), v)
                .unwrap_or_default()
        };
        out.allow_write = list("allowWrite", fs.allow_write);
        out.deny_read = list("denyRead", fs.deny_read);
        out.allow_read = list("allowRead", fs.allow_read);
    }
    if let Some(limits) = c.typed::<RawLimits>("sandbox.limits", raw.limits) {
        for key in limits.unknown.keys() {
            c.warn(&format!("sandbox.limits.{key}"), "unknown key");
        }
        out.limits_pids = c
            .typed::<u64>("sandbox.limits.pids", limits.pids)
            .and_then(|n| match n >= MIN_PIDS {
                true => Some(n),
                false => {
                    c.warn(
                        "sandbox.limits.pids",
                        &format!("must be at least {MIN_PIDS}"),
                    );
                    None
                }
            });
        out.limits_memory = limits
            .memory
            .filter(|v| !v.is_null())
            .and_then(|v| match size(&v) {
                Some(b) if b >= MIN_MEMORY => Some(b),
                Some(_) => {
                    c.warn("sandbox.limits.memory", "must be at least 32M");
                    None
                }
                None => {
                    c.warn(
                        "sandbox.limits.memory",
                        &format!(
                            "must be a number of bytes or a size like \"4G\" or \"512M\" \
                             (K, M, G, T: powers of 1024), not {v}"
                        ),
                    );
                    None
                }
            });
    }
    out
}

/// A size in bytes: a whole number of bytes, or a string like `"4G"`, `"512M"`, `"1.5GiB"`,
/// `"1048576"` (K, M, G and T are powers of 1024; a trailing `B` or `iB` is allowed).
pub fn size(v: &Value) -> Option<u64> {
    if let Some(n) = v.as_u64() {
        return Some(n);
    }
    let text = v.as_str()?.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let unit = unit.trim().to_ascii_uppercase();
    let unit = unit
        .strip_suffix("IB")
        .or_else(|| unit.strip_suffix('B'))
        .unwrap_or(&unit);
    let shift = match unit {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        _ => return None,
    };
    if number.is_empty() || number.starts_with('.') || number.ends_with('.') {
        return None;
    }
    match number.parse::<u64>() {
        Ok(whole) => whole.checked_mul(1u64 << shift),
        Err(_) if shift > 0 => {
            let value = number.parse::<f64>().ok()? * (1u64 << shift) as f64;
            (value.is_finite() && value < u64::MAX as f64).then_some(value as u64)
        }
        Err(_) => None,
    }
}

/// `f` (a lower level's values) merged under `m`.
pub(super) fn merge(m: &mut SandboxSettings, f: FileSandbox, origin: &Origin) {
    fn scalar<T>(slot: &mut Option<Sourced<T>>, v: Option<Sourced<T>>) {
        if slot.is_none() {
            *slot = v;
        }
    }
    scalar(&mut m.mode, f.mode.map(|v| at_of(v, origin)));
    scalar(&mut m.network, f.network.map(|v| at_of(v, origin)));
    scalar(&mut m.bwrap_path, f.bwrap_path.map(|v| at_of(v, origin)));
    scalar(
        &mut m.fail_if_unavailable,
        f.fail_if_unavailable.map(|v| at_of(v, origin)),
    );
    scalar(
        &mut m.allow_escalation,
        f.allow_escalation.map(|v| at_of(v, origin)),
    );
    scalar(&mut m.limits_pids, f.limits_pids.map(|v| at_of(v, origin)));
    scalar(
        &mut m.limits_memory,
        f.limits_memory.map(|v| at_of(v, origin)),
    );
    super::merge::list(&mut m.allow_write, f.allow_write, origin);
    super::merge::list(&mut m.deny_read, f.deny_read, origin);
    super::merge::list(&mut m.allow_read, f.allow_read, origin);
    super::merge::list(&mut m.pass_env, f.pass_env, origin);
}

fn at_of<T>(value: T, origin: &Origin) -> Sourced<T> {
    Sourced {
        value,
        origin: origin.clone(),
    }
}

impl SandboxSettings {
    /// Whether any key is set (what `keel config show` lists).
    pub fn is_empty(&self) -> bool {
        *self == SandboxSettings::default()
    }
}
