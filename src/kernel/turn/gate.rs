//! The permission gate of one call: the rules, the mode and a `PreToolUse` hook's answer
//! decide whether it runs, is refused, or needs a person (a `PermissionRequest` hook, the front
//! end's approval dialog, or a block in a run that cannot ask).

use serde_json::Value;
use tokio::sync::oneshot;

use super::{external_tools, hooked, is_task, session_tools};
use crate::kernel::abort::AbortSignal;
use crate::kernel::agent::{Inner, Permission};
use crate::kernel::event::{ApprovalDecision, EventPayload};
use crate::kernel::hooks::Decision;
use crate::kernel::policy::Verdict as RuleVerdict;
use crate::kernel::tool::{self, ToolOutput};

pub(super) enum Gate {
    Run,
    /// Asked, and allowed or denied (by a person or by nobody answering in time).
    Approved,
    Refuse(ToolOutput),
    Denied(ToolOutput),
    Block(ToolOutput),
}

pub(super) async fn check_permission(
    inner: &Inner,
    id: &str,
    name: &str,
    args: &Value,
    hook: Option<Decision>,
    abort: &AbortSignal,
) -> Gate {
    let builtin = session_tools::offered(inner, name) && tool::spec(name).is_some();
    // A `task` call changes nothing itself: the child's own calls are checked in the child.
    let read_only = if is_task(inner, name) {
        true
    } else if crate::kernel::lsp::tool::offered(inner.config.lsp.as_ref(), name) {
        // The `lsp` tool reads; a rename is shown, never applied.
        true
    } else if builtin {
        !tool::is_mutating(name)
    } else {
        let external = external_tools(inner);
        match external.iter().find(|t| t.spec.name == name) {
            Some(t) => t.read_only,
            None => {
                let mut names = inner.config.tools.clone();
                names.extend(external.into_iter().map(|t| t.spec.name.into_owned()));
                return Gate::Refuse(ToolOutput::error(format!(
                    "Tool `{name}` is not available. Available tools: {}",
                    names.join(", ")
                )));
            }
        }
    };
    // The settings' rules, then the session's "always" answers, then the allow rules of the
    // run's prompt (a Claude command's `allowed-tools`), the first that says anything.
    let cwd = &inner.config.cwd;
    let verdict = match inner.config.rules.check(name, args, cwd) {
        RuleVerdict::Unmatched => {
            let state = inner.lock();
            match state.always.check(name, args, cwd) {
                RuleVerdict::Unmatched => state.run_options.allowed.check(name, args, cwd),
                v => v,
            }
        }
        v => v,
    };
    let permission = inner.lock().permission;
    // A hook's `ask` (or `defer`) makes a call ask in every mode; its `allow` answers the
    // mode's question, never a deny or ask rule, nor a refusal.
    let hook_asks = matches!(hook, Some(Decision::Ask | Decision::Defer));
    let asks = match verdict {
        RuleVerdict::Deny(m) => {
            return Gate::Refuse(ToolOutput::error(format!(
                "Tool `{name}` denied by rule `{}` (from {})",
                m.rule, m.origin
            )))
        }
        _ if !read_only && permission == Permission::ReadOnly => {
            return Gate::Refuse(ToolOutput::error(format!(
                "Tool `{name}` is not allowed: keel runs with --permission read-only"
            )))
        }
        _ if !read_only && permission == Permission::Plan => {
            return Gate::Refuse(ToolOutput::error(format!(
                "Tool `{name}` is not allowed in plan mode: only read-only tools run until the \
                 user approves a plan. Explore with the read-only tools, then call \
                 exit_plan_mode with your plan."
            )))
        }
        _ if hook_asks => Some("a PreToolUse hook asked".to_string()),
        RuleVerdict::Ask(m) => Some(format!("rule `{}` (from {})", m.rule, m.origin)),
        RuleVerdict::Allow(_) => None,
        RuleVerdict::Unmatched if read_only || !mode_asks(permission, name) => None,
        RuleVerdict::Unmatched if hook == Some(Decision::Allow) => None,
        RuleVerdict::Unmatched => Some(format!("--permission {}", permission.word())),
    };
    match asks {
        None => Gate::Run,
        Some(why) => {
            let blocked = format!(
                "Tool `{name}` needs approval and this run cannot ask ({why} in a headless mode)"
            );
            ask_or_block(inner, (id, name, args), abort, blocked).await
        }
    }
}

/// Whether the mode asks before a call of a tool that changes things (no rule matched).
fn mode_asks(permission: Permission, name: &str) -> bool {
    match permission {
        Permission::Auto | Permission::ReadOnly | Permission::Plan => false,
        Permission::Ask => true,
        Permission::AcceptEdits => !matches!(name, "edit" | "write"),
    }
}

/// A call that needs a person's answer: `PermissionRequest` hooks may give it; else the front
/// end is asked, or, in a run that cannot ask, the call blocks with `blocked`'s message.
pub(super) async fn ask_or_block(
    inner: &Inner,
    (id, name, args): (&str, &str, &Value),
    abort: &AbortSignal,
    blocked: String,
) -> Gate {
    match hooked::permission_request(inner, name, args, abort).await {
        Some((Decision::Allow, _)) => Gate::Approved,
        Some((Decision::Deny, why)) => Gate::Denied(ToolOutput::error(format!(
            "Tool `{name}` was denied by a PermissionRequest hook: {}",
            why.as_deref().unwrap_or("no reason given")
        ))),
        _ if inner.config.can_ask => ask(inner, id, name, args, abort).await,
        _ => Gate::Block(ToolOutput::error(blocked)),
    }
}

async fn ask(inner: &Inner, id: &str, name: &str, args: &Value, abort: &AbortSignal) -> Gate {
    match ask_decision(inner, id, name, args, abort).await {
        ApprovalDecision::Allow | ApprovalDecision::AllowAcceptEdits => Gate::Approved,
        ApprovalDecision::Deny => Gate::Denied(ToolOutput::error(format!(
            "Tool `{name}` was denied by the user"
        ))),
        ApprovalDecision::Unanswered => Gate::Denied(ToolOutput::error(format!(
            "Tool `{name}` was denied: nobody answered the approval request"
        ))),
        ApprovalDecision::Blocked => Gate::Block(ToolOutput::error(format!(
            "Tool `{name}` needs approval and nobody answered the approval request in time (an unattended run)"
        ))),
    }
}

/// Publishes `ApprovalRequested` for the call and waits for the answer (an abort denies).
pub(super) async fn ask_decision(
    inner: &Inner,
    id: &str,
    name: &str,
    args: &Value,
    abort: &AbortSignal,
) -> ApprovalDecision {
    let (tx, rx) = oneshot::channel();
    inner.lock().approvals.insert(id.to_string(), tx);
    let (cwd, files) = (&inner.config.cwd, &inner.config.files);
    let policy = &inner.config.sandbox.policy;
    let preview = tool::preview::preview(name, args, cwd, files, policy, abort).await;
    inner.bus.publish(EventPayload::ApprovalRequested {
        call_id: id.to_string(),
        tool_name: name.to_string(),
        args: args.clone(),
        preview,
    });
    let decision = tokio::select! {
        d = rx => d.unwrap_or(ApprovalDecision::Deny),
        _ = abort.aborted() => ApprovalDecision::Deny,
    };
    inner.lock().approvals.remove(id);
    decision
}
