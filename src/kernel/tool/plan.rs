//! `exit_plan_mode {plan}`: offered only in plan mode (`DESIGN.md` §17). Owns the schema and
//! the checked reading of the plan; the turn loop asks for approval and changes the mode.
//! Must never touch the workspace.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::{json, Value};

use super::args::Field;
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

/// An `exit_plan_mode` call's arguments, read once.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct PlanArgs {
    plan: Field<String>,
}

/// The plan a call's arguments hold, or what is wrong with them.
pub fn parse(args: &Value) -> Result<String, String> {
    let PlanArgs { plan } = super::args::read(args);
    match plan {
        Field::Given(s) if !s.trim().is_empty() => Ok(s.trim().to_string()),
        Field::Given(_) => Err("invalid arguments: `plan` must not be empty".into()),
        Field::Null | Field::Wrong => Err("invalid arguments: `plan` must be a string".into()),
        Field::Absent => Err("invalid arguments: missing required field `plan`".into()),
    }
}
