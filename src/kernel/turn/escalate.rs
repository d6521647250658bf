//! A `bash` call that asks to run outside the sandbox (`escalate: true` with a
//! `justification`, `DESIGN.md` §14): it runs only after an approval that shows the
//! justification (it blocks where nobody can answer), by an allow rule alone only when
//! `sandbox.allowEscalation` is true, and never when that is false. A deny rule still wins.
//! A `write` or `edit` of a protected path (`.keel/settings.json`, `AGENTS.md`, a git hook, …,
//! whether or not it exists) is the same request without the argument: it runs only after an
//! approval, in every mode, and blocks where nobody can answer.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::gate::{ask_or_block, Gate};
use crate::kernel::abort::AbortSignal;
use crate::kernel::agent::{Inner, Permission};
use crate::kernel::field::{self, Field};
use crate::kernel::hooks::Decision;
use crate::kernel::policy::Verdict as RuleVerdict;
use crate::kernel::sandbox::policy::real;
use crate::kernel::sandbox::{Mechanism, WriteDenial};
use crate::kernel::tool::bash::Escalation;
use crate::kernel::tool::{resolve_path, ToolOutput};

/// Whether call `name(args)` asks to leave a sandbox that is in force (a session without
/// one runs every command as is: nothing to escalate), or writes a protected path.
pub(super) fn wanted(inner: &Inner, name: &str, args: &Value) -> bool {
    asked(inner, name, args) || protected_write(inner, name, args).is_some()
}

/// The protected path a `write` or `edit` call would write (its real path judged by the
/// session's policy, as the tool judges it).
fn protected_write(inner: &Inner, name: &str, args: &Value) -> Option<PathBuf> {
    if !matches!(name, "write" | "edit") || !inner.config.tools.iter().any(|t| t == name) {
        return None;
    }
    /// The one argument of a `write` or `edit` call this reads.
    #[derive(Default, Deserialize)]
    #[serde(default)]
    struct Target {
        path: Field<String>,
    }
    let Target { path } = field::read(args);
    let full = real(&resolve_path(&inner.config.cwd, &path.given()?));
    let policy = &inner.config.sandbox.policy;
    // Only inside a writable root and never a secret: the approval lifts the protection alone.
    let inside = policy.writable_roots.iter().any(|r| full.starts_with(r));
    match policy.write_denied(&full) {
        Some(WriteDenial::Protected(p)) if inside && policy.read_denied(&full).is_none() => Some(p),
        _ => None,
    }
}

/// Whether `bash` asks to run outside the sandbox.
fn asked(inner: &Inner, name: &str, args: &Value) -> bool {
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
    if let Some(path) = protected_write(inner, name, args) {
        return gate_protected(inner, (id, name, args), &path, abort).await;
    }
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

/// The gate of a `write` or `edit` of the protected `path`: a deny rule wins, read-only and
/// plan refuse, anything else asks (no allow rule, hook or mode spares the question).
async fn gate_protected(
    inner: &Inner,
    (id, name, args): (&str, &str, &Value),
    path: &Path,
    abort: &AbortSignal,
) -> Gate {
    if let RuleVerdict::Deny(m) = inner.config.rules.check(name, args, &inner.config.cwd) {
        return Gate::Refuse(ToolOutput::error(format!(
            "Tool `{name}` denied by rule `{}` (from {})",
            m.rule, m.origin
        )));
    }
    let permission = inner.lock().permission;
    if matches!(permission, Permission::ReadOnly | Permission::Plan) {
        return Gate::Refuse(ToolOutput::error(format!(
            "Cannot write {}: the sandbox protects it and the session may not write",
            path.display()
        )));
    }
    let blocked = format!(
        "Tool `{name}` writes {}, which the sandbox protects (keel, git or another agent reads \
         it as settings or code): that needs an approval, and this run cannot ask (a headless \
         mode)",
        path.display()
    );
    ask_or_block(inner, (id, name, args), abort, blocked).await
}
