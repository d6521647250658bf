//! A session's sandbox settings (`DESIGN.md` §14): `--sandbox` and the settings files'
//! `sandbox.*` and `permissions.additionalDirectories`, their paths resolved, into the
//! kernel's [`SandboxConfig`]. A project's own settings files are the repository's: what they
//! say to widen the sandbox applies only once the project is trusted (the trust store, as for
//! its allow rules and env, or `--trust-project`); what narrows it applies at once.

use std::path::{Path, PathBuf};

use crate::kernel::sandbox::limits::Limits;
use crate::kernel::sandbox::{HostPattern, Network, SandboxConfig, SandboxMode};
use crate::mode::Env;
use crate::settings::{
    Level, Merged, NetworkAllow, NetworkSetting, NetworkWord, SandboxModeSetting, Sourced,
};

/// One value of a project's own settings file that widens the sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Widening {
    /// The key (`sandbox.filesystem.allowWrite`).
    pub key: &'static str,
    /// The value as JSON (`"../shared"`, `"off"`, `false`).
    pub value: String,
    /// The file it came from.
    pub origin: String,
}

impl std::fmt::Display for Widening {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.key, self.value)
    }
}

/// The sandbox `flag` (`--sandbox`) and `files` ask for a session in `env.cwd`; `trusted`:
/// the project's own files may widen it. Values left out are warnings that name them.
pub fn config(
    flag: Option<SandboxMode>,
    files: &Merged,
    trusted: bool,
    env: &Env,
    warnings: &mut Vec<String>,
) -> SandboxConfig {
    let mut gate = Gate {
        trusted,
        skipped: Vec::new(),
    };
    let kept = kept(files, &mut gate);
    for w in gate.skipped {
        warnings.push(format!(
            "{}: `{}` {} is not applied: it widens the sandbox and the project is not trusted \
             (pass --trust-project to trust it for this run, or trust it in keel's TUI)",
            w.origin, w.key, w.value
        ));
    }
    let network = kept
        .network
        .map_or(Network::Off, |n| network_of(n, warnings));
    let home = env.vars.get("HOME").map(PathBuf::from);
    let root = crate::settings::project_root(&env.cwd);
    let paths = |list: &[&Sourced<String>]| -> Vec<PathBuf> {
        list.iter()
            .map(|v| resolve(&v.value, home.as_deref(), &root))
            .collect()
    };
    SandboxConfig {
        mode: mode(flag, kept.mode),
        network,
        allow_write: paths(&kept.allow_write),
        deny_read: paths(&kept.deny_read),
        allow_read: paths(&kept.allow_read),
        bwrap_path: kept
            .bwrap_path
            .map(|b| resolve(&b.value, home.as_deref(), &root)),
        fail_if_unavailable: kept.fail_if_unavailable.is_none_or(|f| f.value),
        allow_escalation: kept.allow_escalation.map(|a| a.value),
        limits: Limits {
            pids: kept.limits.pids.map_or(kept.defaults.pids, |p| p.value),
            memory: kept.limits.memory.map_or(kept.defaults.memory, |m| m.value),
        },
    }
}

/// What the project's own files among `files` ask for that would widen the sandbox (each
/// waits for the project's trust).
pub fn widenings(files: &Merged) -> Vec<Widening> {
    let mut gate = Gate {
        trusted: false,
        skipped: Vec::new(),
    };
    kept(files, &mut gate);
    gate.skipped
}

/// The values of `files` the gate keeps, not yet resolved.
struct Kept<'a> {
    mode: Option<&'a Sourced<SandboxModeSetting>>,
    network: Option<&'a NetworkSetting>,
    /// `permissions.additionalDirectories` and `sandbox.filesystem.allowWrite`.
    allow_write: Vec<&'a Sourced<String>>,
    deny_read: Vec<&'a Sourced<String>>,
    allow_read: Vec<&'a Sourced<String>>,
    bwrap_path: Option<&'a Sourced<String>>,
    fail_if_unavailable: Option<&'a Sourced<bool>>,
    allow_escalation: Option<&'a Sourced<bool>>,
    limits: KeptLimits<'a>,
    /// The limits where no file sets them (the machine's).
    defaults: Limits,
}

/// `sandbox.limits`' values the gate keeps.
struct KeptLimits<'a> {
    pids: Option<&'a Sourced<u64>>,
    memory: Option<&'a Sourced<u64>>,
}

/// The one place that says which values widen the sandbox.
fn kept<'a>(files: &'a Merged, gate: &mut Gate) -> Kept<'a> {
    let s = &files.sandbox;
    let defaults = Limits::default();
    let mut list = |l: &'a [Sourced<String>], key: &'static str, widens: bool| {
        l.iter()
            .filter(|v| gate.keep(*v, key, widens))
            .collect::<Vec<_>>()
    };
    let mut allow_write = list(
        &files.permissions.additional_directories,
        "permissions.additionalDirectories",
        true,
    );
    allow_write.extend(list(&s.allow_write, "sandbox.filesystem.allowWrite", true));
    let deny_read = list(&s.deny_read, "sandbox.filesystem.denyRead", false);
    let allow_read = list(&s.allow_read, "sandbox.filesystem.allowRead", true);
    Kept {
        mode: s
            .mode
            .as_ref()
            .filter(|m| gate.keep(*m, "sandbox.mode", m.value == SandboxModeSetting::Off)),
        network: s
            .network
            .as_ref()
            .filter(|n| {
                let widens = n.value != NetworkSetting::Word(NetworkWord::Off);
                gate.keep(*n, "sandbox.network", widens)
            })
            .map(|n| &n.value),
        allow_write,
        deny_read,
        allow_read,
        bwrap_path: s
            .bwrap_path
            .as_ref()
            .filter(|b| gate.keep(*b, "sandbox.bwrapPath", true)),
        fail_if_unavailable: s
            .fail_if_unavailable
            .as_ref()
            .filter(|f| gate.keep(*f, "sandbox.failIfUnavailable", !f.value)),
        allow_escalation: s
            .allow_escalation
            .as_ref()
            .filter(|a| gate.keep(*a, "sandbox.allowEscalation", a.value)),
        // Raising a limit above the default widens the sandbox; lowering it narrows it.
        limits: KeptLimits {
            pids: s
                .limits_pids
                .as_ref()
                .filter(|p| gate.keep(*p, "sandbox.limits.pids", p.value > defaults.pids)),
            memory: s
                .limits_memory
                .as_ref()
                .filter(|m| gate.keep(*m, "sandbox.limits.memory", m.value > defaults.memory)),
        },
        defaults,
    }
}

/// `--sandbox` over the files' `sandbox.mode`, the managed file's over both.
fn mode(flag: Option<SandboxMode>, file: Option<&Sourced<SandboxModeSetting>>) -> SandboxMode {
    match file {
        Some(m) if m.origin.level == Level::Managed || flag.is_none() => mode_of(m.value),
        _ => flag.unwrap_or(SandboxMode::WorkspaceWrite),
    }
}

fn network_of(n: &NetworkSetting, warnings: &mut Vec<String>) -> Network {
    match n {
        NetworkSetting::Word(NetworkWord::On) => Network::On,
        NetworkSetting::Word(NetworkWord::Off) => Network::Off,
        NetworkSetting::Allow(NetworkAllow { allow }) => Network::Allow(
            allow
                .iter()
                .filter_map(|h| match HostPattern::parse(h) {
                    Ok(p) => Some(p),
                    Err(e) => {
                        warnings.push(format!("sandbox.network.allow: `{h}` is skipped: {e}"));
                        None
                    }
                })
                .collect(),
        ),
    }
}

fn mode_of(m: SandboxModeSetting) -> SandboxMode {
    match m {
        SandboxModeSetting::WorkspaceWrite => SandboxMode::WorkspaceWrite,
        SandboxModeSetting::ReadOnly => SandboxMode::ReadOnly,
        SandboxModeSetting::Off => SandboxMode::Off,
    }
}

/// `~/…` under `home`, an absolute path as is, anything else under the project `root`.
fn resolve(p: &str, home: Option<&Path>, root: &Path) -> PathBuf {
    match (p.strip_prefix("~/"), home) {
        (Some(rest), Some(home)) => home.join(rest),
        _ if p == "~" => home.map_or_else(|| root.join(p), Path::to_path_buf),
        _ => root.join(p),
    }
}

/// Keeps the values a project's own files may set: what widens the sandbox only in a
/// trusted project; what it leaves out is `skipped`.
struct Gate {
    trusted: bool,
    skipped: Vec<Widening>,
}

impl Gate {
    fn keep<T: serde::Serialize>(
        &mut self,
        v: &Sourced<T>,
        key: &'static str,
        widens: bool,
    ) -> bool {
        if !widens || self.trusted || !v.origin.level.is_project() {
            return true;
        }
        self.skipped.push(Widening {
            key,
            value: serde_json::to_string(&v.value).unwrap_or_default(),
            origin: v.origin.to_string(),
        });
        false
    }
}
