//! What a hook's exit code and output mean, with Claude Code's contract: exit 0 (stdout read as
//! JSON when it starts with `{`, else plain text), exit 2 (blocking; stderr is the reason), any
//! other code a non-blocking error; JSON decisions (`continue`, `decision: "block"`,
//! `hookSpecificOutput.permissionDecision`, `updatedInput`, `additionalContext`, …) honoured on
//! any exit code. Several hooks' results combine into one [`Verdict`]: deny > ask > allow.

use serde::Deserialize;
use serde_json::Value;

use super::process::{Exit, Ran};
use super::HookEvent;

/// A `PreToolUse` permission decision (also what exit 2 means for it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Decision {
    Allow,
    Ask,
    /// Claude's `defer`: the call waits for a person; in a run that cannot ask, it blocks.
    Defer,
    Deny,
}

impl Decision {
    fn parse(word: &str) -> Option<Decision> {
        match word {
            "allow" | "approve" => Some(Decision::Allow),
            "ask" => Some(Decision::Ask),
            "defer" => Some(Decision::Defer),
            "deny" | "block" => Some(Decision::Deny),
            _ => None,
        }
    }

    /// The word on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Ask => "ask",
            Decision::Defer => "defer",
            Decision::Deny => "deny",
        }
    }
}

/// The JSON a hook may print, as Claude defines it; unknown fields are ignored.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Output {
    #[serde(rename = "continue")]
    keep_going: Option<bool>,
    stop_reason: Option<String>,
    system_message: Option<String>,
    decision: Option<String>,
    reason: Option<String>,
    hook_specific_output: Option<Specific>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Specific {
    permission_decision: Option<String>,
    permission_decision_reason: Option<String>,
    updated_input: Option<Value>,
    additional_context: Option<String>,
    /// `PermissionRequest`'s `{behavior, updatedInput, message}`.
    decision: Option<RequestDecision>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct RequestDecision {
    behavior: Option<String>,
    updated_input: Option<Value>,
    message: Option<String>,
}

/// What all the hooks of one firing decided together.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Verdict {
    /// A blocking result (exit 2, `decision: "block"`) and its reason.
    pub blocked: Option<String>,
    /// `PreToolUse`/`PermissionRequest`: the strongest decision and its reason.
    pub permission: Option<(Decision, Option<String>)>,
    /// A replacement of the tool's input (the first hook's that gave one), in the hook's shape.
    pub updated_input: Option<Value>,
    /// Context for the model: `additionalContext`, and plain stdout where the event takes it.
    pub context: Vec<String>,
    /// `continue: false`: stop the run, with the reason for the user.
    pub stop: Option<String>,
    /// Messages for the user: `systemMessage`s and non-blocking errors.
    pub messages: Vec<String>,
}

/// One hook run, reduced to what it decided: fed into a [`Verdict`] in configuration order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Judged {
    /// The decision word for the wire (`block`, `allow`, `deny`, `ask`, `defer`, `error`), if any.
    pub decision: Option<&'static str>,
    verdict: Verdict,
}

impl Judged {
    /// The reason this hook gave for a block, a denial or a stop.
    pub fn reason(&self) -> Option<String> {
        let v = &self.verdict;
        v.blocked
            .clone()
            .or_else(|| v.permission.as_ref().and_then(|p| p.1.clone()))
            .or_else(|| v.stop.clone())
    }

    /// What this hook says to the user.
    pub fn messages(&self) -> &[String] {
        &self.verdict.messages
    }

    /// Adds `message` to what the user is told about this hook (what the sandbox undid).
    pub fn tell(&mut self, message: String) {
        self.verdict.messages.push(message);
    }
}

/// Reads one hook's result for `event`. `command` names it in error messages.
pub fn judge(event: HookEvent, command: &str, ran: &Ran) -> Judged {
    let mut v = Verdict::default();
    let code = match &ran.exit {
        Exit::Code(c) => *c,
        Exit::TimedOut => return error(v, format!("hook `{command}` timed out; ignored")),
        Exit::Aborted => return Judged::default(),
        Exit::SpawnFailed(e) => return error(v, format!("hook `{command}` could not start: {e}")),
    };
    let trimmed = ran.stdout.trim_start();
    let json = if trimmed.starts_with('{') {
        match serde_json::from_str::<Output>(trimmed) {
            Ok(o) => Some(o),
            Err(e) => {
                v.messages.push(format!(
                    "hook `{command}` printed invalid JSON ({e}); ignored"
                ));
                None
            }
        }
    } else {
        None
    };
    let mut decision = None;
    if code == Some(2) {
        let reason = first_nonempty(&[
            json.as_ref().and_then(|o| o.reason.clone()),
            Some(ran.stderr.trim().to_string()),
        ])
        .unwrap_or_else(|| format!("blocked by hook `{command}`"));
        decision = exit_two(event, reason, &mut v);
    } else if code != Some(0) {
        let line = ran.stderr.lines().next().unwrap_or("").trim();
        let code = code.map_or("a signal".to_string(), |c| format!("code {c}"));
        v.messages
            .push(format!("hook `{command}` failed ({code}): {line}"));
        decision = Some("error");
    } else if json.is_none() && event.takes_plain_context() && !trimmed.is_empty() {
        v.context.push(ran.stdout.trim_end().to_string());
    }
    if let Some(o) = json {
        decision = apply_json(event, o, &mut v).or(decision);
    }
    Judged {
        decision,
        verdict: v,
    }
}

fn error(mut v: Verdict, message: String) -> Judged {
    v.messages.push(message);
    Judged {
        decision: Some("error"),
        verdict: v,
    }
}

fn first_nonempty(options: &[Option<String>]) -> Option<String> {
    options.iter().flatten().find(|s| !s.is_empty()).cloned()
}

/// Exit 2, per event: PreToolUse denies the call (the reason goes to the model); the events
/// that can block do; PermissionRequest, Notification and the session events ignore it.
fn exit_two(event: HookEvent, reason: String, v: &mut Verdict) -> Option<&'static str> {
    match event {
        HookEvent::PreToolUse => {
            v.permission = Some((Decision::Deny, Some(reason)));
            Some("deny")
        }
        e if e.can_block() => {
            v.blocked = Some(reason);
            Some("block")
        }
        _ => {
            v.messages.push(reason);
            None
        }
    }
}

fn apply_json(event: HookEvent, o: Output, v: &mut Verdict) -> Option<&'static str> {
    let mut decision = None;
    if o.keep_going == Some(false) {
        v.stop = Some(o.stop_reason.unwrap_or_else(|| "stopped by a hook".into()));
        decision = Some("stop");
    }
    v.messages.extend(o.system_message);
    if o.decision.as_deref() == Some("block") && event.can_block() {
        v.blocked = Some(o.reason.unwrap_or_else(|| "blocked by a hook".into()));
        decision = decision.or(Some("block"));
    }
    let Some(s) = o.hook_specific_output else {
        return decision;
    };
    v.context
        .extend(s.additional_context.filter(|c| !c.is_empty()));
    match event {
        HookEvent::PreToolUse => {
            if let Some(d) = s.permission_decision.as_deref().and_then(Decision::parse) {
                v.permission = Some((d, s.permission_decision_reason));
                decision = decision.or(Some(d.as_str()));
            }
            v.updated_input = s.updated_input;
        }
        HookEvent::PermissionRequest => {
            if let Some(d) = s.decision {
                if let Some(b) = d.behavior.as_deref().and_then(Decision::parse) {
                    v.permission = Some((b, d.message));
                    decision = decision.or(Some(b.as_str()));
                }
                v.updated_input = d.updated_input;
            }
        }
        _ => {}
    }
    decision
}

impl Verdict {
    /// Folds one more hook's result in: blocks and stops keep the first reason, the permission
    /// keeps the strongest decision (deny > defer > ask > allow), lists concatenate.
    pub fn add(&mut self, judged: Judged) {
        let j = judged.verdict;
        self.blocked = self.blocked.take().or(j.blocked);
        self.stop = self.stop.take().or(j.stop);
        self.permission = match (self.permission.take(), j.permission) {
            (Some(a), Some(b)) => Some(if b.0 > a.0 { b } else { a }),
            (a, b) => a.or(b),
        };
        self.updated_input = self.updated_input.take().or(j.updated_input);
        self.context.extend(j.context);
        self.messages.extend(j.messages);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ran(code: i32, stdout: &str, stderr: &str) -> Ran {
        Ran {
            exit: Exit::Code(Some(code)),
            stdout: stdout.into(),
            stderr: stderr.into(),
        }
    }

    fn verdict(event: HookEvent, runs: &[Ran]) -> Verdict {
        let mut v = Verdict::default();
        for r in runs {
            v.add(judge(event, "h.sh", r));
        }
        v
    }

    #[test]
    fn exit_two_on_pre_tool_use_denies_with_stderr_as_the_reason() {
        let v = verdict(
            HookEvent::PreToolUse,
            &[ran(2, "", "rm -rf is not allowed\n")],
        );
        assert_eq!(
            v.permission,
            Some((Decision::Deny, Some("rm -rf is not allowed".into())))
        );
    }

    #[test]
    fn exit_one_does_not_block_and_is_shown_to_the_user() {
        let v = verdict(HookEvent::PreToolUse, &[ran(1, "", "boom\nmore")]);
        assert_eq!(v.permission, None);
        assert_eq!(v.messages, ["hook `h.sh` failed (code 1): boom"]);
    }

    #[test]
    fn json_decisions_combine_deny_over_ask_over_allow() {
        let out = |d: &str| {
            json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": d,
                "permissionDecisionReason": format!("because {d}")}})
            .to_string()
        };
        let v = verdict(
            HookEvent::PreToolUse,
            &[
                ran(0, &out("allow"), ""),
                ran(0, &out("deny"), ""),
                ran(0, &out("ask"), ""),
            ],
        );
        assert_eq!(
            v.permission,
            Some((Decision::Deny, Some("because deny".into())))
        );
        let v = verdict(
            HookEvent::PreToolUse,
            &[ran(0, &out("allow"), ""), ran(0, &out("ask"), "")],
        );
        assert_eq!(v.permission.map(|p| p.0), Some(Decision::Ask));
    }

    #[test]
    fn updated_input_and_context_are_read_from_hook_specific_output() {
        let out = json!({"hookSpecificOutput": {"permissionDecision": "allow",
            "updatedInput": {"command": "npm test -- --ci"}, "additionalContext": "ran in CI mode"}});
        let v = verdict(HookEvent::PreToolUse, &[ran(0, &out.to_string(), "")]);
        assert_eq!(
            v.updated_input,
            Some(json!({"command": "npm test -- --ci"}))
        );
        assert_eq!(v.context, ["ran in CI mode"]);
    }

    #[test]
    fn plain_stdout_is_context_only_where_the_event_takes_it() {
        let v = verdict(
            HookEvent::UserPromptSubmit,
            &[ran(0, "today is Tuesday\n", "")],
        );
        assert_eq!(v.context, ["today is Tuesday"]);
        let v = verdict(HookEvent::PostToolUse, &[ran(0, "formatted\n", "")]);
        assert!(v.context.is_empty());
    }

    #[test]
    fn block_continue_false_and_system_message() {
        let out = json!({"decision": "block", "reason": "tests fail", "systemMessage": "lint ran"});
        let v = verdict(HookEvent::Stop, &[ran(0, &out.to_string(), "")]);
        assert_eq!(v.blocked.as_deref(), Some("tests fail"));
        assert_eq!(v.messages, ["lint ran"]);
        let out = json!({"continue": false, "stopReason": "budget reached"});
        let v = verdict(HookEvent::PostToolUse, &[ran(0, &out.to_string(), "")]);
        assert_eq!(v.stop.as_deref(), Some("budget reached"));
    }

    #[test]
    fn json_is_honoured_on_any_exit_code_and_bad_json_is_a_message() {
        let out = json!({"decision": "block", "reason": "from json"});
        let v = verdict(HookEvent::Stop, &[ran(2, &out.to_string(), "from stderr")]);
        assert_eq!(v.blocked.as_deref(), Some("from json"));
        let v = verdict(HookEvent::Stop, &[ran(0, "{not json", "")]);
        assert_eq!(v.blocked, None);
        assert!(
            v.messages[0].contains("printed invalid JSON"),
            "{:?}",
            v.messages
        );
    }

    #[test]
    fn timeouts_and_spawn_failures_do_not_block() {
        let mut r = ran(0, "", "");
        r.exit = Exit::TimedOut;
        let v = verdict(HookEvent::PreToolUse, &[r]);
        assert_eq!(v.permission, None);
        assert_eq!(v.messages, ["hook `h.sh` timed out; ignored"]);
    }

    #[test]
    fn permission_request_reads_the_behavior_and_ignores_exit_two() {
        let out =
            json!({"hookSpecificOutput": {"decision": {"behavior": "deny", "message": "no"}}});
        let v = verdict(
            HookEvent::PermissionRequest,
            &[ran(0, &out.to_string(), "")],
        );
        assert_eq!(v.permission, Some((Decision::Deny, Some("no".into()))));
        let v = verdict(HookEvent::PermissionRequest, &[ran(2, "", "ignored")]);
        assert_eq!(v.permission, None);
        assert_eq!(v.blocked, None);
    }
}
