//! Running one `task` call (`DESIGN.md` §17): the child is opened through the session's
//! [`Spawner`](crate::kernel::subagent::Spawner), `SubagentStart`/`SubagentStop` hooks fire
//! around it, each of its steps is published as a `ToolCallUpdated` of the parent's call, and
//! its end becomes the call's result: its final answer and a usage line, or a tool error.

use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::kernel::abort::AbortSignal;
use crate::kernel::agent::Inner;
use crate::kernel::event::EventPayload;
use crate::kernel::hooks::HookEvent;
use crate::kernel::subagent::{ChildRequest, ChildStep, SubagentDetails};
use crate::kernel::tool::{self, ToolOutput};

/// Runs a `task` call to the child's end.
pub(super) async fn run(inner: &Inner, id: &str, args: &Value, abort: &AbortSignal) -> ToolOutput {
    let Some(subagents) = inner.config.subagents.as_ref() else {
        return ToolOutput::error("Tool `task` is not available in this session");
    };
    let description = match tool::str_arg(args, "description") {
        Ok(d) => d.to_string(),
        Err(e) => return e,
    };
    let prompt = match tool::str_arg(args, "prompt") {
        Ok(p) => p.to_string(),
        Err(e) => return e,
    };
    let kind = args.get("subagent_type").and_then(Value::as_str);
    let agent = match subagents.find(kind) {
        Ok(a) => a.clone(),
        Err(e) => return ToolOutput::error(format!("invalid arguments: {e}")),
    };
    let started = inner.clock.now_ms();
    let request = ChildRequest {
        call_id: id.to_string(),
        description: description.clone(),
        agent: agent.clone(),
        parent: subagents.parent.clone(),
        provider: inner.provider(),
        thinking_level: inner.lock().thinking_level.clone(),
        depth: subagents.depth + 1,
    };
    let child = match subagents.spawner.open(request).await {
        Ok(c) => c,
        Err(e) => return ToolOutput::error(format!("The subagent could not start: {e}")),
    };
    let session_id = child.session_id();
    let transcript = child.transcript_path();
    let mut details = SubagentDetails {
        session_id: session_id.clone(),
        agent_type: agent.name.clone(),
        description: description.clone(),
        step: None,
        tool_count: 0,
        usage: None,
        duration_ms: None,
    };
    let agent_fields = json!({"agent_id": session_id, "agent_type": agent.name});
    let start = super::hooked::fire(
        inner,
        HookEvent::SubagentStart,
        &[&agent.name],
        agent_fields.clone(),
        abort,
    )
    .await;
    let prompt = match start.context.is_empty() {
        true => prompt,
        false => format!(
            "{prompt}\n\n{}",
            super::hooked::context_message(&start.context)
        ),
    };
    let publish = |details: &SubagentDetails, text: String| {
        inner.bus.publish(EventPayload::ToolCallUpdated {
            call_id: id.to_string(),
            tool_name: crate::kernel::subagent::TASK.to_string(),
            args: args.clone(),
            partial: ToolOutput::ok(text).with_details(json!(details)),
        });
    };
    publish(
        &details,
        format!("{} subagent {session_id} started", agent.name),
    );
    let (tx, mut rx) = mpsc::unbounded_channel::<ChildStep>();
    let run = child.run(prompt, tx, abort.clone());
    tokio::pin!(run);
    let ended = loop {
        tokio::select! {
            biased;
            Some(step) = rx.recv() => {
                details.tool_count += 1;
                let text = format!("{} subagent {session_id}: {}", agent.name, step.tool_name);
                details.step = Some(step);
                publish(&details, text);
            }
            ended = &mut run => break ended,
        }
    };
    details.step = None;
    let outcome = match ended {
        Ok(o) => o,
        Err(e) => return ToolOutput::error(format!("The subagent failed: {e}")),
    };
    let mut stop_fields = agent_fields;
    if let Value::Object(m) = &mut stop_fields {
        m.insert("stop_hook_active".into(), false.into());
        m.insert("agent_transcript_path".into(), transcript.into());
        m.insert(
            "last_assistant_message".into(),
            outcome.final_text.clone().into(),
        );
    }
    let never = AbortSignal::never();
    super::hooked::fire(
        inner,
        HookEvent::SubagentStop,
        &[&agent.name],
        stop_fields,
        &never,
    )
    .await;
    let duration_ms = (inner.clock.now_ms() - started).max(0) as u64;
    details.tool_count = outcome.tool_count;
    details.usage = Some(outcome.usage.clone());
    details.duration_ms = Some(duration_ms);
    let usage_line = format!(
        "[{} subagent {session_id}: {} tool calls, {} tokens, {:.1} s]",
        agent.name,
        outcome.tool_count,
        outcome.usage.total_tokens,
        duration_ms as f64 / 1000.0
    );
    match outcome.failure {
        None => ToolOutput::ok(format!("{}\n\n{usage_line}", outcome.final_text)),
        Some(why) => ToolOutput::error(format!(
            "The subagent did not finish: {why}\n{}\n\n{usage_line}",
            outcome.final_text
        )),
    }
    .with_details(json!(details))
}
