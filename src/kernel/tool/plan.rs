//! `exit_plan_mode {plan}`: offered only in plan mode (`DESIGN.md` §17). Owns the schema and
//! the checked reading of the plan; the turn loop asks for approval and changes the mode.
//! Must never touch the workspace.

use std::borrow::Cow;

use serde_json::{json, Value};

use super::ToolSpec;

pub(super) fn spec() -> ToolSpec {
    ToolSpec {
        name: Cow::Borrowed("exit_plan_mode"),
        description: Cow::Borrowed(
            "Present your plan to the user and ask to leave plan mode. You are in plan mode: \
             only read-only tools run (read, grep, find, ls); explore first, then call this \
             with the complete plan in Markdown. If the user approves, the tools that change \
             things become available and you carry the plan out; if not, keep planning.",
        ),
        parameters: json!({
            "type": "object",
            "properties": {
                "plan": {"type": "string", "minLength": 1, "description": "The plan, in Markdown"}
            },
            "required": ["plan"],
            "additionalProperties": false
        }),
    }
}

/// The plan a call's arguments hold, or what is wrong with them.
pub fn parse(args: &Value) -> Result<String, String> {
    match args.get("plan") {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.trim().to_string()),
        Some(Value::String(_)) => Err("invalid arguments: `plan` must not be empty".into()),
        Some(_) => Err("invalid arguments: `plan` must be a string".into()),
        None => Err("invalid arguments: missing required field `plan`".into()),
    }
}
