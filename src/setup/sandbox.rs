//! A session's sandbox settings (`DESIGN.md` §14): `--sandbox` and the settings files'
//! `sandbox.*` and `permissions.additionalDirectories`, their paths resolved, into the
//! kernel's [`SandboxConfig`]. A project's own settings files are the repository's: what they
//! say to widen the sandbox applies only with `--trust-project` (what narrows it applies at
//! once), as for its allow rules and hooks.

use std::path::{Path, PathBuf};

use crate::kernel::sandbox::{HostPattern, Network, SandboxConfig, SandboxMode};
use crate::mode::Env;
use crate::settings::{
    Level, Merged, NetworkAllow, NetworkSetting, NetworkWord, Origin, SandboxModeSetting, Sourced,
};

/// The sandbox `flag` (`--sandbox`) and `files` ask for a session in `env.cwd`; `trusted`:
/// the project's own files may widen it. Values left out are warnings.
pub fn config(
    flag: Option<&str>,
    files: &Merged,
    trusted: bool,
    env: &Env,
    warnings: &mut Vec<String>,
) -> SandboxConfig {
    let s = &files.sandbox;
    let mut gate = Gate { trusted, warnings };
    let mode = mode(flag, s.mode.as_ref(), &mut gate);
    let network = s
        .network
        .as_ref()
        .filter(|n| {
            let widens = n.value != NetworkSetting::Word(NetworkWord::Off);
            gate.keep(n, "sandbox.network", widens)
        })
        .map(|n| n.value.clone());
    let network = network.map_or(Network::Off, |n| network_of(&n, gate.warnings));
    let home = env.vars.get("HOME").map(PathBuf::from);
    let root = crate::settings::project_root(&env.cwd);
    let path = |p: &str| resolve(p, home.as_deref(), &root);
    let mut paths = |list: &[Sourced<String>], key: &str, widens: bool| -> Vec<PathBuf> {
        list.iter()
            .filter(|v| gate.keep(v, key, widens))
            .map(|v| path(&v.value))
            .collect()
    };
    let mut allow_write = paths(
        &files.permissions.additional_directories,
        "permissions.additionalDirectories",
        true,
    );
    allow_write.extend(paths(&s.allow_write, "sandbox.filesystem.allowWrite", true));
    let deny_read = paths(&s.deny_read, "sandbox.filesystem.denyRead", false);
    let allow_read = paths(&s.allow_read, "sandbox.filesystem.allowRead", true);
    let bwrap_path = s
        .bwrap_path
        .as_ref()
        .filter(|b| gate.keep(b, "sandbox.bwrapPath", true))
        .map(|b| path(&b.value));
    let fail_if_unavailable = s
        .fail_if_unavailable
        .as_ref()
        .filter(|f| gate.keep(f, "sandbox.failIfUnavailable", !f.value))
        .is_none_or(|f| f.value);
    let allow_escalation = s
        .allow_escalation
        .as_ref()
        .filter(|a| gate.keep(a, "sandbox.allowEscalation", a.value))
        .map(|a| a.value);
    SandboxConfig {
        mode,
        network,
        allow_write,
        deny_read,
        allow_read,
        bwrap_path,
        fail_if_unavailable,
        allow_escalation,
    }
}

/// `--sandbox` over the files' `sandbox.mode`, the managed file's over both.
fn mode(
    flag: Option<&str>,
    file: Option<&Sourced<SandboxModeSetting>>,
    gate: &mut Gate<'_>,
) -> SandboxMode {
    let file = file.filter(|m| gate.keep(m, "sandbox.mode", m.value == SandboxModeSetting::Off));
    let flag = flag.and_then(SandboxMode::from_name);
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
/// trusted project.
struct Gate<'a> {
    trusted: bool,
    warnings: &'a mut Vec<String>,
}

impl Gate<'_> {
    fn keep<T>(&mut self, v: &Sourced<T>, key: &str, widens: bool) -> bool {
        if !widens || self.trusted || !from_project(&v.origin) {
            return true;
        }
        self.warnings.push(format!(
            "{}: `{key}` is not applied: it widens the sandbox and the project is not trusted \
             (pass --trust-project to apply it)",
            v.origin
        ));
        false
    }
}

fn from_project(o: &Origin) -> bool {
    matches!(o.level, Level::Project | Level::Local)
}

/// The network `--sandbox-network on|off` and `--sandbox-network-allow HOST` ask for (`None`:
/// the settings'); they beat `sandbox.network`: `on` wins, any allowed host makes an allowlist.
pub fn network_flags(
    cli: &crate::cli::args::Cli,
) -> Result<Option<Network>, crate::error::StartupError> {
    let allow = cli
        .sandbox_network_allow
        .iter()
        .map(|h| HostPattern::parse(h))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| crate::error::StartupError::usage(e.to_string()))?;
    Ok(match cli.sandbox_network.as_deref() {
        Some("on") => Some(Network::On),
        _ if !allow.is_empty() => Some(Network::Allow(allow)),
        Some(_) => Some(Network::Off),
        None => None,
    })
}
