//! An "always allow" answer to an approval dialog (`extension_ui_response` with
//! `value: "always"`): the narrowest rules that stand for the call
//! ([`crate::kernel::policy::always_rules`]) apply for the rest of the session and are added
//! to `<project>/.keel/settings.local.json`, where the next session reads them; a `notify`
//! says which rules and where they went, or why they could not be saved.

use crate::kernel::policy;
use crate::wire::events::NotifyType;
use crate::wire::rpc;

use super::Host;

impl Host {
    /// Saves and applies the rules of an "always" answer to the dialog of `call_id` (before
    /// the call is allowed, so the calls after it see them).
    pub(super) fn allow_always(&mut self, call_id: &str) {
        let Some((tool, args)) = self.asked.remove(call_id) else {
            return;
        };
        let cwd = self.config.cwd.clone();
        let root = crate::settings::project_root(&cwd);
        let rules = policy::always_rules(&tool, &args, &cwd, &root);
        if rules.is_empty() {
            let note = format!(
                "No rule can stand for this `{tool}` call (keel cannot read it narrowly): it is allowed once"
            );
            return self.notify(&note, NotifyType::Warning);
        }
        let file = crate::settings::local_file(&cwd);
        let list = rules
            .iter()
            .map(|r| format!("`{r}`"))
            .collect::<Vec<_>>()
            .join(", ");
        let saved = crate::settings::add_allow(&file, &rules);
        if let (Ok(_), Some(hook)) = (&saved, &self.on_saved_rules) {
            hook(&cwd, &rules);
        }
        let (note, level, origin) = match saved {
            Ok(_) => (
                format!("Always allowed {list}: saved to {}", file.display()),
                NotifyType::Info,
                format!("an \"always\" answer, saved to {}", file.display()),
            ),
            Err(e) => (
                format!("Always allowed {list} for this session only: {e}"),
                NotifyType::Warning,
                "an \"always\" answer (not saved)".to_string(),
            ),
        };
        let entries: Vec<(String, String)> =
            rules.into_iter().map(|r| (r, origin.clone())).collect();
        self.live.session.allow_always(&entries, &root);
        self.notify(&note, level);
    }

    pub(super) fn notify(&mut self, note: &str, level: NotifyType) {
        let id = self.clock.short_id("notify-");
        self.publish(&rpc::notify_line(&id, note, level));
    }
}
