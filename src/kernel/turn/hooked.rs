//! Where the turn loop fires hooks (DESIGN §15): `UserPromptSubmit` before a prompt reaches
//! the model, `PreToolUse` before a call is decided, `PostToolUse`/`PostToolUseFailure` after
//! it ran, `Stop` when the model is done. Every hook run is published (`HookStarted`,
//! `HookFinished`), so every front end can show what a hook did. Hooks run in the session's
//! sandbox, the one in the agent's config that its tools get (read at each firing, so they
//! follow it; one call's approved escalation is that call's, not theirs). Without configured
//! hooks each function returns at once and starts nothing.

use serde_json::{json, Map, Value};

use crate::kernel::abort::AbortSignal;
use crate::kernel::agent::Inner;
use crate::kernel::event::EventPayload;
use crate::kernel::hooks::{names, response, Decision, HookEvent, HookNotice, Verdict};
use crate::kernel::message::Content;
use crate::kernel::tool::ToolOutput;

/// A `Stop` hook may keep the agent going this many times in a row, no more.
pub(super) const MAX_STOP_CONTINUES: u32 = 8;

/// Whether a hook is configured for `event`: without one, no payload is built (the tool-call
/// path pays nothing for hooks nobody configured).
fn wants(inner: &Inner, event: HookEvent) -> bool {
    inner.config.hooks.as_ref().is_some_and(|h| h.wants(event))
}

/// Runs the hooks of `event` and publishes each run.
pub(crate) async fn fire(
    inner: &Inner,
    event: HookEvent,
    subjects: &[&str],
    fields: Value,
    abort: &AbortSignal,
) -> Verdict {
    let Some(hooks) = inner.config.hooks.as_ref().filter(|h| h.wants(event)) else {
        return Verdict::default();
    };
    let messages = inner.lock().messages.clone();
    hooks.sync_transcript(&messages);
    let fields = match fields {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    let notify = |n: HookNotice| {
        inner.bus.publish(notice_event(n, &inner.clock));
    };
    let sandbox = &inner.config.sandbox;
    let hooks = match event {
        HookEvent::SessionStart => hooks.with_env_file(env_file(inner)),
        _ => hooks.clone(),
    };
    hooks
        .fire(event, subjects, fields, sandbox, abort, &notify)
        .await
}

/// The session's env file (`CLAUDE_ENV_FILE`), its directory made so that a hook can write it.
fn env_file(inner: &Inner) -> std::path::PathBuf {
    let (env, temp) = (&inner.config.tool_env, &inner.config.temp_dir);
    let _ = crate::kernel::tool::bash::private_tmp(env, temp);
    crate::kernel::tool::bash::env_file(env, temp)
}

/// Fires `event` without waiting for its hooks (a `Notification` must not hold up the dialog
/// it announces); each run is still published.
pub(crate) fn fire_detached(inner: &Inner, event: HookEvent, subject: &str, fields: Value) {
    let Some(hooks) = inner.config.hooks.clone().filter(|h| h.wants(event)) else {
        return;
    };
    let messages = inner.lock().messages.clone();
    hooks.sync_transcript(&messages);
    let (bus, clock, subject) = (inner.bus.clone(), inner.clock.clone(), subject.to_string());
    let sandbox = inner.config.sandbox.clone();
    let fields = match fields {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    tokio::spawn(async move {
        let notify = |n: HookNotice| {
            bus.publish(notice_event(n, &clock));
        };
        let never = AbortSignal::never();
        hooks
            .fire(event, &[&subject], fields, &sandbox, &never, &notify)
            .await;
    });
}

/// `PermissionRequest`: hooks may answer an approval before anyone is asked; when none does
/// and the run can ask, `Notification` (`permission_prompt`) announces the dialog.
pub(super) async fn permission_request(
    inner: &Inner,
    name: &str,
    args: &Value,
    abort: &AbortSignal,
) -> Option<(Decision, Option<String>)> {
    if !wants(inner, HookEvent::PermissionRequest) && !wants(inner, HookEvent::Notification) {
        return None;
    }
    let claude = names::claude_name(name);
    let mut fields = tool_fields(inner, name, args, None);
    fields["permission_suggestions"] = suggestions(inner, name, args);
    let v = fire(
        inner,
        HookEvent::PermissionRequest,
        &names::matched(name),
        fields,
        abort,
    )
    .await;
    // Only beside a dialog: a run that cannot ask blocks the call, nobody is waiting to answer.
    if matches!(v.permission, Some((Decision::Allow | Decision::Deny, _))) || !inner.config.can_ask
    {
        return v.permission;
    }
    let claude = claude.to_string();
    fire_detached(
        inner,
        HookEvent::Notification,
        "permission_prompt",
        json!({"message": format!("keel needs your permission to use {claude}"),
               "title": "Permission needed", "notification_type": "permission_prompt"}),
    );
    v.permission
}

/// `PermissionRequest`'s `permission_suggestions`, as Claude Code's: the rules an "always
/// allow" answer would add (`addRules`, `allow`, to the project's local settings), split into
/// Claude's `{toolName, ruleContent}`; none when no narrow rule stands for the call.
fn suggestions(inner: &Inner, name: &str, args: &Value) -> Value {
    let cwd = &inner.config.cwd;
    let root = inner
        .config
        .hooks
        .as_ref()
        .map_or(cwd.as_path(), |h| h.project_dir());
    let rules: Vec<Value> = crate::kernel::policy::always_rules(name, args, cwd, root)
        .iter()
        .map(|rule| match rule.split_once('(') {
            Some((tool, rest)) => json!({"toolName": tool,
                "ruleContent": rest.strip_suffix(')').unwrap_or(rest)}),
            None => json!({ "toolName": rule }),
        })
        .collect();
    if rules.is_empty() {
        return json!([]);
    }
    json!([{"type": "addRules", "rules": rules, "behavior": "allow", "destination": "localSettings"}])
}

/// `Notification` with `notification_type: idle_prompt`: a run of a session a person prompts
/// ended and waits for input (not a headless run's, not a subagent's, not one the user
/// interrupted: they are there).
pub(super) fn idle_prompt(inner: &Inner, outcome: &crate::kernel::event::RunOutcome) {
    let subagent = inner.config.hooks.as_ref().is_some_and(|h| h.in_subagent());
    let aborted = *outcome == crate::kernel::event::RunOutcome::Aborted;
    if !inner.config.can_ask || subagent || aborted {
        return;
    }
    fire_detached(
        inner,
        HookEvent::Notification,
        "idle_prompt",
        json!({"message": "keel is waiting for your input", "notification_type": "idle_prompt"}),
    );
}

/// The event of a hook's start or end; a hook's duration is its own, as the kernel's clock
/// reports durations (0 on a test clock: repeatable output).
fn notice_event(n: HookNotice, clock: &crate::kernel::clock::Clock) -> EventPayload {
    match n {
        HookNotice::Started { event, command } => EventPayload::HookStarted {
            event: event.as_str().into(),
            command,
        },
        HookNotice::Finished {
            event,
            command,
            exit_code,
            decision,
            reason,
            messages,
            took,
        } => EventPayload::HookFinished {
            event: event.as_str().into(),
            command,
            exit_code,
            duration_ms: clock.duration_ms(took),
            decision: decision.map(str::to_string),
            reason,
            messages,
        },
    }
}

/// The stdin fields every tool event carries: the tool under Claude's name and argument
/// shape (paths absolute, from the session's directory), the call id (not for `PermissionRequest`), and keel's own name and arguments.
fn tool_fields(inner: &Inner, name: &str, args: &Value, id: Option<&str>) -> Value {
    let mut fields = json!({
        "tool_name": names::claude_name(name),
        "tool_input": names::claude_input(name, args, &inner.config.cwd),
        "keel_tool_name": name,
        "keel_tool_input": args,
    });
    if let Some(id) = id {
        fields["tool_use_id"] = id.into();
    }
    fields
}

/// What `PreToolUse` hooks decided about one call.
pub(super) struct PreTool {
    /// The arguments to run with instead of the model's (a hook's `updatedInput`, mapped back
    /// to keel's shape).
    pub args: Option<Value>,
    pub decision: Option<(Decision, Option<String>)>,
    /// `continue: false`: the run stops after this call.
    pub stop: Option<String>,
    /// `additionalContext` for the model, added to the call's result.
    pub context: Vec<String>,
}

pub(super) async fn pre_tool(
    inner: &Inner,
    id: &str,
    name: &str,
    args: &Value,
    abort: &AbortSignal,
) -> PreTool {
    if !wants(inner, HookEvent::PreToolUse) {
        return PreTool {
            args: None,
            decision: None,
            stop: None,
            context: Vec::new(),
        };
    }
    let fields = tool_fields(inner, name, args, Some(id));
    let v = fire(
        inner,
        HookEvent::PreToolUse,
        &names::matched(name),
        fields,
        abort,
    )
    .await;
    PreTool {
        args: v.updated_input.map(|u| names::keel_input(name, &u)),
        decision: v.permission,
        stop: v.stop,
        context: v.context,
    }
}

/// Fires `PostToolUse` (or `PostToolUseFailure` for an error result) and adds what the hooks
/// say for the model to `output`. Returns a `continue: false` reason, if any.
pub(super) async fn post_tool(
    inner: &Inner,
    id: &str,
    name: &str,
    args: &Value,
    output: &mut ToolOutput,
    abort: &AbortSignal,
) -> Option<String> {
    let event = if output.is_error {
        HookEvent::PostToolUseFailure
    } else {
        HookEvent::PostToolUse
    };
    if !wants(inner, event) {
        return None;
    }
    let mut fields = tool_fields(inner, name, args, Some(id));
    if output.is_error {
        fields["error"] = output.text().into();
        fields["is_interrupt"] = abort.is_aborted().into();
    } else {
        fields["tool_response"] = response::tool_response(name, args, output, &inner.config.cwd);
        fields["keel_tool_response"] = response::keel_response(output);
    }
    let v = fire(inner, event, &names::matched(name), fields, abort).await;
    let notes: Vec<String> = v
        .blocked
        .into_iter()
        .map(|r| format!("[{} hook] {r}", event.as_str()))
        .chain(v.context)
        .collect();
    append(output, &notes);
    v.stop
}

/// The user message that carries hooks' context for the model after a prompt.
pub(super) fn context_message(context: &[String]) -> String {
    crate::kernel::hooks::context::message(context)
}

/// Adds hook text for the model after a tool's own output.
pub(super) fn append(output: &mut ToolOutput, notes: &[String]) {
    if !notes.is_empty() {
        output.content.push(Content::text(notes.join("\n")));
    }
}

/// What `UserPromptSubmit` hooks did to a prompt.
pub(super) enum Prompt {
    /// Go on, with this context added after the prompt.
    Go(Vec<String>),
    /// The prompt was blocked (and is not sent): the reason for the user.
    Blocked(String),
}

pub(super) async fn prompt_submitted(inner: &Inner, text: &str, abort: &AbortSignal) -> Prompt {
    let v = fire(
        inner,
        HookEvent::UserPromptSubmit,
        &[],
        json!({ "prompt": text }),
        abort,
    )
    .await;
    match v.blocked.or(v.stop) {
        Some(reason) => Prompt::Blocked(reason),
        None => Prompt::Go(v.context),
    }
}

/// `SessionStart` (`source`: `startup`, `resume`, `compact`, `clear`): the context its hooks give the
/// model, added after the next prompt.
pub(super) async fn session_start(inner: &Inner, source: &str, abort: &AbortSignal) -> Vec<String> {
    let model = inner.run_provider().info().id.clone();
    let fields = json!({"source": source, "model": model});
    fire(inner, HookEvent::SessionStart, &[source], fields, abort)
        .await
        .context
}

/// `SubagentStop` for a child of type `agent` (`fields`: its id, type, transcript, last
/// answer and `stop_hook_active`): `Some(reason)` when a hook blocks the stop, which keeps the
/// child working with the reason as its next prompt.
pub(super) async fn subagent_stopping(inner: &Inner, agent: &str, fields: Value) -> Option<String> {
    let never = AbortSignal::never();
    let v = fire(inner, HookEvent::SubagentStop, &[agent], fields, &never).await;
    match v.stop {
        Some(_) => None,
        None => v.blocked,
    }
}

/// `Stop`: `Some(reason)` when a hook keeps the agent going (the reason becomes the next
/// user message).
pub(super) async fn stopping(
    inner: &Inner,
    active: bool,
    last_text: &str,
    abort: &AbortSignal,
) -> Option<String> {
    // A child's transcript is read by its parent's `SubagentStop` hooks once the child stops.
    let child = inner.config.hooks.as_ref().filter(|h| h.in_subagent());
    if let Some(hooks) = child.filter(|h| h.wants(HookEvent::SubagentStop)) {
        let messages = inner.lock().messages.clone();
        hooks.sync_transcript(&messages);
    }
    let fields = json!({"stop_hook_active": active, "last_assistant_message": last_text});
    let v = fire(inner, HookEvent::Stop, &[], fields, abort).await;
    if v.stop.is_some() {
        return None;
    }
    v.blocked
        .or_else(|| (!v.context.is_empty()).then(|| v.context.join("\n")))
}
