//! The tools that act on the session rather than the workspace (`DESIGN.md` §17):
//! `todo_write` replaces the task list (state, published as `TodosUpdated`), and
//! `exit_plan_mode` asks the user to approve a plan and leaves plan mode when they do. They run
//! after the same gate as every tool (rules, hooks). Never touches the workspace.

use serde_json::Value;

use crate::kernel::abort::AbortSignal;
use crate::kernel::agent::{Inner, Permission};
use crate::kernel::event::{ApprovalDecision, EventPayload};
use crate::kernel::hooks::Decision;
use crate::kernel::message::{AssistantMessage, Content, Message, StopReason, Usage};
use crate::kernel::tool::{plan, todo, ToolOutput};

/// `exit_plan_mode`'s name.
pub(super) const EXIT_PLAN: &str = "exit_plan_mode";

/// Whether the model is offered `name` now: a configured tool (`exit_plan_mode` never is),
/// or `exit_plan_mode` while the session is in plan mode.
pub(super) fn offered(inner: &Inner, name: &str) -> bool {
    match name {
        EXIT_PLAN => inner.lock().permission == Permission::Plan,
        _ => crate::kernel::tool::enabled(name, &inner.config.tools),
    }
}

/// Runs a session tool; `None` for any other tool.
pub(super) async fn run(
    inner: &Inner,
    id: &str,
    name: &str,
    args: &Value,
    abort: &AbortSignal,
) -> Option<ToolOutput> {
    match name {
        "todo_write" => Some(todo_write(inner, args)),
        EXIT_PLAN => Some(exit_plan(inner, id, args, abort).await),
        _ => None,
    }
}

fn todo_write(inner: &Inner, args: &Value) -> ToolOutput {
    let todos = match todo::parse(args) {
        Ok(t) => t,
        Err(e) => return ToolOutput::error(e),
    };
    let old = std::mem::replace(&mut inner.lock().todos, todos.clone());
    // The list it replaced, for hooks (Claude's `oldTodos`); never saved or sent.
    let out = ToolOutput::ok(todo::summary(&todos)).with_before(serde_json::to_string(&old).ok());
    inner.bus.publish(EventPayload::TodosUpdated { todos });
    out
}

/// Asks to approve the plan: approved → the mode before plan mode (or `accept-edits`), and
/// the run goes on; not approved → the model is told and stays in plan mode. A run that
/// cannot ask (print, JSON, an unattended run) ends with the plan as its answer.
async fn exit_plan(inner: &Inner, id: &str, args: &Value, abort: &AbortSignal) -> ToolOutput {
    let text = match plan::parse(args) {
        Ok(p) => p,
        Err(e) => return ToolOutput::error(e),
    };
    let decision = match super::hooked::permission_request(inner, EXIT_PLAN, args, abort).await {
        Some((Decision::Allow, _)) => ApprovalDecision::Allow,
        Some((Decision::Deny, _)) => ApprovalDecision::Deny,
        _ if inner.config.can_ask => {
            super::gate::ask_decision(inner, id, EXIT_PLAN, args, abort).await
        }
        _ => ApprovalDecision::Blocked,
    };
    let back_to = match decision {
        ApprovalDecision::Allow => inner.lock().before_plan,
        ApprovalDecision::AllowAcceptEdits => Permission::AcceptEdits,
        ApprovalDecision::Blocked => {
            inner.lock().plan_answer = Some(text);
            return ToolOutput::ok(
                "Nobody can approve the plan in this run: it ends here with the plan as its answer.",
            );
        }
        ApprovalDecision::Deny | ApprovalDecision::Unanswered => {
            return ToolOutput::error(
                "The user did not approve the plan. You are still in plan mode: only read-only \
                 tools run. Ask what to change or revise the plan, then call exit_plan_mode again.",
            )
        }
    };
    inner.set_permission(back_to);
    ToolOutput::ok(format!(
        "The user approved the plan. The permission mode is now {}: carry the plan out.",
        back_to.word()
    ))
}

/// The plan a run that could not ask ends with, as the model's last message (what print
/// and JSON mode report as the final answer, and what the session keeps).
pub(super) fn plan_message(inner: &Inner, plan: String) -> Message {
    let provider = inner.run_provider();
    Message::from(AssistantMessage {
        content: vec![Content::text(plan)],
        api: provider.api().to_string(),
        provider: provider.name().to_string(),
        model: provider.model().to_string(),
        usage: Usage::default(),
        stop_reason: StopReason::Stop,
        error_message: None,
        duration_ms: None,
        timestamp: inner.clock.now_ms(),
    })
}
