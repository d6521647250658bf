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
use crate::kernel::subagent::{ChildOutcome, ChildRequest, ChildStep, SubagentDetails};
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
    // One lock at a time: the guards of a struct literal live to its end.
    let (thinking_level, budget) = {
        let state = inner.lock();
        (state.thinking_level.clone(), state.budget.clone())
    };
    let request = ChildRequest {
        call_id: id.to_string(),
        description: description.clone(),
        agent: agent.clone(),
        parent: subagents.parent.clone(),
        provider: inner.provider(),
        thinking_level,
        depth: subagents.depth + 1,
        budget,
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
    let mut child = child;
    let mut total = ChildOutcome {
        final_text: String::new(),
        usage: Default::default(),
        tool_count: 0,
        failure: None,
    };
    let (mut prompt, mut continues) = (prompt, 0u32);
    let outcome = loop {
        let (tx, mut rx) = mpsc::unbounded_channel::<ChildStep>();
        let ended = {
            let run = child.run(prompt, tx, abort.clone());
            tokio::pin!(run);
            loop {
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
            }
        };
        let run = match ended {
            Ok(o) => o,
            Err(e) => {
                child.close().await;
                return ToolOutput::error(format!("The subagent failed: {e}"));
            }
        };
        total.usage.add(&run.usage);
        total.tool_count += run.tool_count;
        if !run.final_text.trim().is_empty() {
            total.final_text = run.final_text;
        }
        total.failure = run.failure;
        let mut stop_fields = agent_fields.clone();
        if let Value::Object(m) = &mut stop_fields {
            m.insert("stop_hook_active".into(), (continues > 0).into());
            m.insert("agent_transcript_path".into(), transcript.clone().into());
            m.insert(
                "last_assistant_message".into(),
                total.final_text.clone().into(),
            );
        }
        // A hook that blocks the stop keeps the child working: its reason is the child's next
        // prompt (Claude's contract), as often as a `Stop` hook may keep the parent going.
        let again = super::hooked::subagent_stopping(inner, &agent.name, stop_fields).await;
        match again {
            Some(reason)
                if total.failure.is_none()
                    && !abort.is_aborted()
                    && continues < super::hooked::MAX_STOP_CONTINUES =>
            {
                continues += 1;
                prompt = reason;
            }
            _ => break total,
        }
    };
    child.close().await;
    details.step = None;
    let duration_ms = (inner.clock.now_ms() - started).max(0) as u64;
    details.tool_count = outcome.tool_count;
    details.usage = Some(outcome.usage.clone());
    details.duration_ms = Some(duration_ms);
    let calls = match outcome.tool_count {
        1 => "1 tool call".to_string(),
        n => format!("{n} tool calls"),
    };
    let usage_line = format!(
        "[{} subagent {session_id}: {calls}, {} tokens, {:.1} s]",
        agent.name,
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
