//! The hooks the settings files of a directory configure, each with its event, matcher,
//! command, timeout, file and trust: one list, shown by `keel hooks list` (a table or JSON) and
//! by the TUI's `/hooks`. Reads files and the trust store; never runs a hook.

use crate::error::StartupError;
use crate::kernel::hooks::HookConfig;
use crate::mode::Env;
use crate::setup::trust::{HookTrust, Trust};

/// One configured hook.
#[derive(Debug, Clone, PartialEq)]
pub struct HookRow {
    pub event: &'static str,
    pub matcher: String,
    pub command: String,
    /// `timeout` in seconds, if set.
    pub timeout: Option<f64>,
    /// The file (or flag) it came from.
    pub origin: String,
    pub trust: HookTrust,
}

impl HookRow {
    /// When it runs: `always` (not a project's own file), `yes` (trusted) or
    /// `with --trust-project`.
    pub fn runs(&self) -> &'static str {
        match self.trust {
            HookTrust::NotNeeded => "always",
            HookTrust::Trusted => "yes",
            HookTrust::Untrusted | HookTrust::Changed => "with --trust-project",
        }
    }

    /// Its trust in words: `runs always`, `trusted`, `untrusted: runs with --trust-project`, ….
    pub fn trust_text(&self) -> &'static str {
        match self.trust {
            HookTrust::NotNeeded => "runs always",
            HookTrust::Trusted => "trusted",
            HookTrust::Untrusted => "untrusted: runs with --trust-project",
            HookTrust::Changed => "changed since trusted: runs with --trust-project",
        }
    }
}

/// The hooks of the settings files of `env.cwd` (`inline`: `--settings`), highest level first,
/// Claude Code's included (their file is each hook's origin), and the warnings about entries
/// that were skipped, with what a session says of Claude Code's files (entries left out, the
/// files turned off); a file that does not parse is an error.
pub fn list(
    inline: Option<&crate::wire::protocol::spec::SettingsLayer>,
    env: &Env,
) -> Result<(Vec<HookRow>, Vec<String>), StartupError> {
    list_with(inline, None, env)
}

/// [`list`] for a session opened with the spec's `claudeFiles` (`Some(false)`:
/// `--no-claude-files`).
pub fn list_with(
    inline: Option<&crate::wire::protocol::spec::SettingsLayer>,
    claude_files: Option<bool>,
    env: &Env,
) -> Result<(Vec<HookRow>, Vec<String>), StartupError> {
    let loaded = crate::setup::settings::load_with(inline, claude_files, env)?;
    let trust = Trust::of(&loaded.merged, false, env);
    let mut rows = Vec::new();
    let mut warnings = loaded.claude_warnings();
    for layer in &loaded.merged.hook_layers {
        let origin = layer.origin.to_string();
        let (config, w) = HookConfig::parse(&layer.value, &origin);
        warnings.extend(w);
        if layer.origin.level.is_project() {
            rows.extend(
                trust
                    .wants
                    .hooks
                    .iter()
                    .filter(|h| h.origin == origin)
                    .map(|h| HookRow {
                        event: h.event,
                        matcher: h.matcher.clone(),
                        command: h.command.clone(),
                        timeout: h.timeout,
                        origin: h.origin.clone(),
                        trust: trust.hook(h),
                    }),
            );
            continue;
        }
        for (event, matcher, hook) in config.list() {
            rows.push(HookRow {
                event: event.as_str(),
                matcher,
                command: hook.command,
                timeout: hook.timeout.map(|t| t.as_secs_f64()),
                origin: hook.origin,
                trust: HookTrust::NotNeeded,
            });
        }
    }
    Ok((rows, warnings))
}

/// The `/hooks` text: one entry per hook, its event, matcher and command, then its file and
/// trust.
pub fn tui_text(rows: &[HookRow]) -> String {
    if rows.is_empty() {
        return "no hooks configured (settings files' \"hooks\"; see keel hooks list)".into();
    }
    let mut s = format!("hooks ({}):", rows.len());
    for h in rows {
        let matcher = match h.matcher.as_str() {
            "" => "*",
            m => m,
        };
        s.push_str(&format!(
            "\n  {} [{matcher}] {}\n    {} · {}",
            h.event,
            h.command,
            h.origin,
            h.trust_text()
        ));
    }
    s
}
