//! Which `statusLine` command a TUI window runs (the TUI runs it: `front/tui/status_line.rs`):
//! the settings' `statusLine`, unless it comes from the project's own files and the project's
//! settings are not trusted (it would run a command from the repository).
#![deny(clippy::print_stdout, clippy::print_stderr)]

use crate::mode::Env;
use crate::settings::{Level, Merged};

/// The `statusLine` a session's settings ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusCommand {
    pub command: String,
    /// Columns of blank space before the text (Claude's `padding`).
    pub padding: u16,
}

/// The statusLine of a session started with `settings`, when it may run.
pub fn configured(settings: &super::Settings, env: &Env) -> Option<StatusCommand> {
    let s = settings.files.status_line.as_ref()?;
    let trusted = || crate::setup::trust::Trust::read(settings, env).settings_apply();
    let command = StatusCommand {
        command: s.value.command.clone(),
        padding: s.value.padding.unwrap_or(0),
    };
    allowed(command, s.origin.level, &s.origin.to_string(), trusted)
}

/// [`configured`] for `keel attach`, which has no command line's settings: the files of `env`'s
/// directory (no `--settings`, no `--trust-project`).
pub fn configured_in(env: &Env) -> Option<StatusCommand> {
    let loaded = super::settings::load(None, env).ok()?;
    let merged: &Merged = &loaded.merged;
    let s = merged.status_line.as_ref()?;
    let trusted = || crate::setup::trust::Trust::of(merged, false, env).settings_apply();
    let command = StatusCommand {
        command: s.value.command.clone(),
        padding: s.value.padding.unwrap_or(0),
    };
    allowed(command, s.origin.level, &s.origin.to_string(), trusted)
}

/// `command` (from a file of `level`, named `origin`), unless it is the repository's (any
/// level but the user's, managed and `--settings`/flag ones) and `trusted` says the project's
/// settings are not.
fn allowed(
    command: StatusCommand,
    level: Level,
    origin: &str,
    trusted: impl FnOnce() -> bool,
) -> Option<StatusCommand> {
    let from_repo = !matches!(
        level,
        Level::User | Level::Managed | Level::SettingsFlag | Level::Flag
    );
    if from_repo && !trusted() {
        tracing::info!("statusLine of {origin} not run: the project's settings are not trusted");
        return None;
    }
    Some(command)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command() -> StatusCommand {
        StatusCommand {
            command: "echo hi".into(),
            padding: 0,
        }
    }

    #[test]
    fn a_projects_status_line_waits_for_trust_and_a_users_does_not() {
        for level in [Level::Project, Level::Local] {
            assert_eq!(allowed(command(), level, "p", || false), None);
            assert_eq!(allowed(command(), level, "p", || true), Some(command()));
        }
        for level in [Level::User, Level::Managed, Level::SettingsFlag] {
            let asked = std::cell::Cell::new(false);
            let got = allowed(command(), level, "u", || {
                asked.set(true);
                false
            });
            assert_eq!(got, Some(command()));
            assert!(!asked.get(), "trust is not asked about for {level:?}");
        }
    }
}
