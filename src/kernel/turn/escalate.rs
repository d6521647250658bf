//! A `bash` call that asks to run outside the sandbox (`escalate: true` with a
//! `justification`, `DESIGN.md` §14): it runs only after an approval that shows the
//! justification (it blocks where nobody can answer), by an allow rule alone only when
//! `sandbox.allowEscalation` is true, and never when that is false. A deny rule still wins.

use serde_json::Value;

use super::{ask_or_block, Gate};
use crate::kernel::abort::AbortSignal;
use crate::kernel::agent::{Inner, Permission};
use crate::kernel::hooks::Decision;
use crate::kernel::policy::Verdict as RuleVerdict;
use crate::kernel::sandbox::Mechanism;
use crate::kernel::tool::bash::Escalation;
use crate::kernel::tool::ToolOutput;

/// Whether call `name(args)` asks to leave a sandbox that is in force (a session without
/// one runs every command as is: nothing to escalate).
pub(super) fn wanted(inner: &Inner, name: &str, args: &Value) -> bool {
    let sandboxed = matches!(
        inner.config.sandbox.mechanism,
        Mechanism::Bwrap(_) | Mechanism::Landlock { .. } | Mechanism::Unavailable
    );
    name == "bash"
        && sandboxed
        && inner.config.tools.iter().any(|t| t == "bash")
        && Escalation::of(args).is_some()
}

/// The gate of an escalated call (see the module's comment); `hook` is a PreToolUse hook's
/// decision.
pub(super) async fn gate(
    inner: &Inner,
    (id, name, args): (&str, &str, &Value),
    hook: Option<Decision>,
    abort: &AbortSignal,
) -> Gate {
    let refuse = |why: &str| {
        Gate::Refuse(ToolOutput::error(format!(
            "Running `bash` outside the sandbox is refused: {why}"
        )))
    };
    let allowed = inner.config.sandbox.allow_escalation;
    if allowed == Some(false) {
        return refuse("sandbox.allowEscalation is false in the settings");
    }
    let request = Escalation::of(args).unwrap_or_default();
    let Some(justification) = request.justification.filter(|j| !j.trim().is_empty()) else {
        return refuse("an escalated call needs a `justification` to show the user");
    };
    match inner.config.rules.check(name, args, &inner.config.cwd) {
        RuleVerdict::Deny(m) => {
            return Gate::Refuse(ToolOutput::error(format!(
                "Tool `{name}` denied by rule `{}` (from {})",
                m.rule, m.origin
            )))
        }
        RuleVerdict::Allow(_) if allowed == Some(true) => return Gate::Run,
        _ => {}
    }
    if inner.config.permission == Permission::ReadOnly {
        return refuse("keel runs with --permission read-only");
    }
    if inner.lock().permission == Permission::Plan {
        return refuse(
            "the session is in plan mode (only read-only tools run until a plan is approved)",
        );
    }
    if hook == Some(Decision::Allow) && allowed == Some(true) {
        return Gate::Run;
    }
    let blocked = format!(
        "Tool `bash` asks to run outside the sandbox, which needs an approval, and this run \
         cannot ask (a headless mode). Its justification: {justification}"
    );
    ask_or_block(inner, (id, name, args), abort, blocked).await
}
