//! `get_permissions` and `set_permission_mode` (keel's additions to the command set): the
//! served session's permission mode and the rules in force with their origin, and a change of
//! mode for the calls to come (the TUI's Shift+Tab, ACP's modes).

use crate::kernel::agent::Permission;
use crate::wire::pi::data::{PermissionRule, PermissionsData};
use crate::wire::rpc::ParamErrorKind;

use super::{CommandError, CommandErrorKind, Host};

impl Host {
    /// The mode and the rules: the settings' (deny, ask, allow), then "always" answers'.
    pub(super) fn permissions(&self) -> PermissionsData {
        let session = &self.live.session;
        PermissionsData {
            mode: session.permission().word().to_string(),
            rules: session
                .rules()
                .into_iter()
                .map(|(list, rule, origin)| PermissionRule {
                    list: list.to_string(),
                    rule,
                    origin,
                })
                .collect(),
        }
    }

    /// Sets the mode `word` names (keel's words or Claude's).
    pub(super) fn set_permission_mode(
        &mut self,
        word: &str,
    ) -> Result<PermissionsData, CommandError> {
        let Some(mode) = Permission::parse(word) else {
            return Err(CommandError::new(
                CommandErrorKind::InvalidParams(ParamErrorKind::NotAllowed),
                format!("set_permission_mode: unknown mode {word} (ask, accept-edits, plan, auto or read-only)"),
            ));
        };
        self.live.session.set_permission(mode);
        Ok(self.permissions())
    }
}
