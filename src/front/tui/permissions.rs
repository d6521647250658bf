//! The TUI's view of the permission policy (`DESIGN.md` §13): the mode in the status line
//! (asked for at start, changed by Shift+Tab through `set_permission_mode`, the same command
//! any client sends) and `/permissions`, the rules in force with their origin.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use crate::kernel::agent::Permission;
use crate::wire::pi::data::PermissionsData;
use crate::wire::pi::Command;

use super::client::{Back, Client};
use super::transcript::HistoryCell;

impl Client {
    /// Asks the session for its mode, for the status line (a host that cannot say: none shown).
    pub(super) fn fetch_permission(&self) {
        self.in_back(|commands| async move {
            let got = commands
                .ask::<PermissionsData>(&Command::GetPermissions {})
                .await;
            Permission::parse(&got.ok()?.mode).map(Back::Permission)
        });
    }

    /// Tells the session to use `mode` from now on; the status line shows what it took.
    pub(super) fn set_permission(&self, mode: Permission) {
        self.in_back(move |commands| async move {
            let set = Command::SetPermissionMode {
                mode: mode.word().to_string(),
            };
            match commands.ask::<PermissionsData>(&set).await {
                Ok(d) => Permission::parse(&d.mode).map(Back::Permission),
                Err(e) => Some(Back::Notice(HistoryCell::Error(e.message))),
            }
        });
    }

    /// `/permissions`: the mode and every rule in force, with its list and origin.
    pub(super) fn permissions(&self) {
        self.in_back(|commands| async move {
            let got = commands
                .ask::<PermissionsData>(&Command::GetPermissions {})
                .await;
            Some(Back::Notice(match got {
                Ok(d) => HistoryCell::Notice(listing(&d)),
                Err(e) => HistoryCell::Error(e.message),
            }))
        });
    }
}

/// The modes Shift+Tab goes through, from `ask` back to it: `ask → accept-edits → plan → auto`
/// (read from [`Permission::next`], so it says what the key does).
pub fn cycle() -> String {
    let mut words = vec![Permission::Ask.word()];
    let mut mode = Permission::Ask.next();
    while mode != Permission::Ask && words.len() < 8 {
        words.push(mode.word());
        mode = mode.next();
    }
    words.join(" → ")
}

/// `/permissions`'s text: the mode, then the rules, deny first, each with where it came from.
pub fn listing(data: &PermissionsData) -> String {
    let mut out = format!(
        "permission mode: {} (Shift+Tab cycles {})\n",
        data.mode,
        cycle()
    );
    if data.rules.is_empty() {
        out.push_str("no permission rules (settings files: permissions.allow, ask, deny)");
        return out;
    }
    let width = data.rules.iter().map(|r| r.rule.chars().count()).max();
    let width = width.unwrap_or(0);
    for r in &data.rules {
        out.push_str(&format!(
            "  {:<5} {:<width$}  {}\n",
            r.list, r.rule, r.origin
        ));
    }
    out.truncate(out.trim_end().len());
    out
}
