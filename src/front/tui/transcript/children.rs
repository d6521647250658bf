//! The subagents a view has seen: each `task` call's child as its updates name it (session id,
//! agent type, description), so that Ctrl+G can open the latest child's transcript. Pure.

use crate::kernel::subagent::{SubagentDetails, TASK};

use super::RunningTool;

/// A subagent as the parent's stream named it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildRef {
    pub session_id: String,
    pub agent_type: String,
    pub description: String,
}

/// The child a running `task` call's details name, if they name one.
pub fn of(tool: &RunningTool) -> Option<SubagentDetails> {
    if tool.name != TASK {
        return None;
    }
    serde_json::from_value(tool.details.clone()?).ok()
}

/// Records the child of `tool` (once, in the order children started).
pub(super) fn seen(children: &mut Vec<ChildRef>, tool: &RunningTool) {
    let Some(d) = of(tool) else { return };
    if children.iter().any(|c| c.session_id == d.session_id) {
        return;
    }
    children.push(ChildRef {
        session_id: d.session_id,
        agent_type: d.agent_type,
        description: d.description,
    });
}
