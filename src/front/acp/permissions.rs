//! Approvals as ACP permission requests: the four options keel offers, what the client's
//! answer means for the host's dialog, and the "always reject" answers a session keeps (per
//! tool, for the session's life in this process; an "always allow" goes to the host, which
//! saves the narrowest rule for the call). Pure; the session task sends and routes.

use std::collections::HashMap;

use serde_json::Value;

use crate::wire::pi::Command;

use super::schema::{
    PermissionOption, PermissionOptionKind, RequestPermissionOutcome, RequestPermissionResponse,
};

pub const ALLOW_ONCE: &str = "allow_once";
pub const ALLOW_ALWAYS: &str = "allow_always";
pub const REJECT_ONCE: &str = "reject_once";
pub const REJECT_ALWAYS: &str = "reject_always";
/// `exit_plan_mode`'s options: approve the plan (back to the mode before plan mode), approve
/// and accept edits from then on, or keep planning.
pub const PLAN_APPROVE: &str = "approve";
pub const PLAN_ACCEPT_EDITS: &str = "approve_accept_edits";
pub const PLAN_KEEP: &str = "keep_planning";

/// What to tell the host's dialog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// Allowed, and the calls like it from now on (the host saves the rule).
    AllowAlways,
    /// A plan approved, and edits run without asking from now on.
    AllowAcceptEdits,
    Reject,
    /// The request was cancelled (a `session/cancel`, or the client said so).
    Cancelled,
}

impl Decision {
    /// The `extension_ui_response` that answers dialog `id`.
    pub fn response(self, id: &str) -> Command {
        let (confirmed, cancelled) = match self {
            Decision::Allow | Decision::AllowAlways | Decision::AllowAcceptEdits => {
                (Some(true), None)
            }
            Decision::Reject => (Some(false), None),
            Decision::Cancelled => (None, Some(true)),
        };
        let value = match self {
            Decision::AllowAlways => Some("always".to_string()),
            Decision::AllowAcceptEdits => Some("accept-edits".to_string()),
            _ => None,
        };
        Command::ExtensionUiResponse {
            id: Some(id.to_string()),
            value,
            confirmed,
            cancelled,
        }
    }
}

/// The options of a permission request for `tool`, in the order a client shows them.
pub fn options(tool: &str) -> Vec<PermissionOption> {
    if tool == "exit_plan_mode" {
        return vec![
            PermissionOption::new(
                PLAN_APPROVE,
                "Approve the plan",
                PermissionOptionKind::AllowOnce,
            ),
            PermissionOption::new(
                PLAN_ACCEPT_EDITS,
                "Approve the plan and accept edits",
                PermissionOptionKind::AllowOnce,
            ),
            PermissionOption::new(PLAN_KEEP, "Keep planning", PermissionOptionKind::RejectOnce),
        ];
    }
    let tool = "this tool, for the rest of the session";
    vec![
        PermissionOption::new(ALLOW_ONCE, "Allow once", PermissionOptionKind::AllowOnce),
        PermissionOption::new(
            ALLOW_ALWAYS,
            "Always allow calls like this (a rule in .keel/settings.local.json)",
            PermissionOptionKind::AllowAlways,
        ),
        PermissionOption::new(REJECT_ONCE, "Reject", PermissionOptionKind::RejectOnce),
        PermissionOption::new(
            REJECT_ALWAYS,
            format!("Always reject {tool}"),
            PermissionOptionKind::RejectAlways,
        ),
    ]
}

/// The "always reject" answers given so far, by tool name.
#[derive(Debug, Default)]
pub struct Rules {
    always: HashMap<String, Decision>,
}

impl Rules {
    /// The standing answer for `tool`, if the user gave one.
    pub fn standing(&self, tool: &str) -> Option<Decision> {
        self.always.get(tool).copied()
    }

    /// Reads the client's answer to a request for `tool` (a JSON-RPC result, or `None` for an
    /// error or no answer): the decision, remembering an "always" one.
    pub fn answer(&mut self, tool: &str, result: Option<&Value>) -> Decision {
        let Some(parsed) = result
            .and_then(|v| serde_json::from_value::<RequestPermissionResponse>(v.clone()).ok())
        else {
            return Decision::Cancelled;
        };
        let id = match &parsed.outcome {
            RequestPermissionOutcome::Selected(s) => s.option_id.0.to_string(),
            _ => return Decision::Cancelled,
        };
        let (decision, always) = match id.as_str() {
            ALLOW_ONCE | PLAN_APPROVE => (Decision::Allow, false),
            PLAN_ACCEPT_EDITS => (Decision::AllowAcceptEdits, false),
            ALLOW_ALWAYS => (Decision::AllowAlways, false),
            REJECT_ALWAYS => (Decision::Reject, true),
            // An option this side did not offer denies: nothing runs unapproved.
            _ => (Decision::Reject, false),
        };
        if always {
            self.always.insert(tool.to_string(), decision);
        }
        decision
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn selected(id: &str) -> Value {
        json!({"outcome": {"outcome": "selected", "optionId": id}})
    }

    #[test]
    fn always_reject_stands_for_later_calls_of_the_same_tool_and_always_allow_goes_to_the_host() {
        let mut r = Rules::default();
        assert_eq!(
            r.answer("bash", Some(&selected(ALLOW_ONCE))),
            Decision::Allow
        );
        assert_eq!(r.standing("bash"), None);
        assert_eq!(
            r.answer("bash", Some(&selected(ALLOW_ALWAYS))),
            Decision::AllowAlways
        );
        assert_eq!(
            r.standing("bash"),
            None,
            "the host's rule decides later calls"
        );
        let answer = serde_json::to_value(Decision::AllowAlways.response("c1")).unwrap();
        assert_eq!(answer["value"], "always");
        assert_eq!(answer["confirmed"], true);
        assert_eq!(
            r.answer("edit", Some(&selected(REJECT_ALWAYS))),
            Decision::Reject
        );
        assert_eq!(r.standing("edit"), Some(Decision::Reject));
        assert_eq!(r.standing("write"), None);
    }

    #[test]
    fn cancelled_errors_and_unknown_options_never_allow() {
        let mut r = Rules::default();
        let cancelled = json!({"outcome": {"outcome": "cancelled"}});
        assert_eq!(r.answer("bash", Some(&cancelled)), Decision::Cancelled);
        assert_eq!(r.answer("bash", None), Decision::Cancelled);
        assert_eq!(
            r.answer("bash", Some(&selected("yes-please"))),
            Decision::Reject
        );
        assert_eq!(
            r.answer("bash", Some(&json!({"nope": 1}))),
            Decision::Cancelled
        );
    }

    #[test]
    fn the_four_options_have_their_kinds() {
        let v = serde_json::to_value(options("bash")).unwrap();
        let kinds: Vec<&str> = v
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["kind"].as_str().unwrap())
            .collect();
        assert_eq!(
            kinds,
            ["allow_once", "allow_always", "reject_once", "reject_always"]
        );
    }
}
