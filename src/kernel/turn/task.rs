//! Running one `task` call (`DESIGN.md` §17): the child is opened through the session's
//! [`Spawner`](crate::kernel::subagent::Spawner), `SubagentStart`/`SubagentStop` hooks fire
//! around it, each of its steps is published as a `ToolCallUpdated` of the parent's call, and
//! its end becomes the call's result: its final answer and a usage line, or a tool error.

use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::kernel::abort::AbortSignal;
use crate::kernel::agent::Inner;
use crate::kernel::event::EventPayload;
use crate::kernel::field::{self, Field};
use crate::kernel::hooks::HookEvent;
use crate::kernel::subagent::{
    AgentDef, Child, ChildOutcome, ChildRequest, ChildStep, SubagentDetails, Subagents, TaskError,
};
use crate::kernel::tool::ToolOutput;

/// Runs a `task` call to the child's end.
pub(super) async fn run(inner: &Inner, id: &str, args: &Value, abort: &AbortSignal) -> ToolOutput {
    let (mut task, prompt) = match Task::open(inner, id, args, abort).await {
        Ok(opened) => opened,
        Err(refused) => return refused,
    };
    let prompt = task.start(prompt).await;
    let ended = task.drive(prompt).await;
    task.finish(ended).await
}

/// A `task` call's arguments, read once (a `subagent_type` that is not a string asks for
/// the default kind).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct TaskArgs {
    description: Field<String>,
    prompt: Field<String>,
    subagent_type: Field<String>,
}

/// What the model asked for: the call's description and prompt, and the kind of subagent.
struct Asked<'a> {
    subagents: &'a Subagents,
    description: String,
    prompt: String,
    agent: AgentDef,
}

impl<'a> Asked<'a> {
    /// Reads the call's arguments; a tool error when the session has no subagents or the
    /// arguments are wrong.
    fn read(inner: &'a Inner, args: &Value) -> Result<Asked<'a>, ToolOutput> {
        let Some(subagents) = inner.config.subagents.as_ref() else {
            return Err(ToolOutput::error(
                "Tool `task` is not available in this session",
            ));
        };
        let args: TaskArgs = field::read(args);
        let description = args.description.required("description")?;
        let prompt = args.prompt.required("prompt")?;
        let kind = args.subagent_type.given();
        let agent = match subagents.find(kind.as_deref()) {
            Ok(a) => a.clone(),
            Err(e) => return Err(ToolOutput::error(format!("invalid arguments: {e}"))),
        };
        Ok(Asked {
            subagents,
            description,
            prompt,
            agent,
        })
    }
}

/// One `task` call's open child and what the call has published about it.
struct Task<'a> {
    inner: &'a Inner,
    id: &'a str,
    args: &'a Value,
    abort: &'a AbortSignal,
    agent: AgentDef,
    child: Box<dyn Child>,
    session_id: String,
    transcript: String,
    details: SubagentDetails,
    /// The fields every `SubagentStart`/`SubagentStop` hook of this child gets.
    agent_fields: Value,
    started: i64,
}

impl<'a> Task<'a> {
    /// Reads the call and opens its child through the session's spawner; with the prompt
    /// asked for. A tool error when the call is wrong or the child cannot start.
    async fn open(
        inner: &'a Inner,
        id: &'a str,
        args: &'a Value,
        abort: &'a AbortSignal,
    ) -> Result<(Task<'a>, String), ToolOutput> {
        let asked = Asked::read(inner, args)?;
        let started = inner.clock.now_ms();
        // One lock at a time: the guards of a struct literal live to its end.
        // The run's model (a Claude command's, else the session's) is the child's default.
        let (provider, thinking_level) = super::run_model(inner);
        let budget = inner.lock().budget.clone();
        let request = ChildRequest {
            call_id: id.to_string(),
            description: asked.description.clone(),
            agent: asked.agent.clone(),
            parent: asked.subagents.parent.clone(),
            provider,
            thinking_level,
            depth: asked.subagents.depth + 1,
            budget,
        };
        let child = match asked.subagents.spawner.open(request).await {
            Ok(c) => c,
            Err(e) => {
                return Err(ToolOutput::error(format!(
                    "The subagent could not start: {e}"
                )))
            }
        };
        let session_id = child.session_id();
        let details = SubagentDetails {
            session_id: session_id.clone(),
            agent_type: asked.agent.name.clone(),
            description: asked.description,
            step: None,
            tool_count: 0,
            usage: None,
            duration_ms: None,
        };
        let task = Task {
            inner,
            id,
            args,
            abort,
            agent_fields: json!({"agent_id": session_id, "agent_type": asked.agent.name}),
            transcript: child.transcript_path(),
            agent: asked.agent,
            child,
            session_id,
            details,
            started,
        };
        Ok((task, asked.prompt))
    }

    /// Fires `SubagentStart` hooks (their context joins the prompt) and publishes the start.
    async fn start(&mut self, prompt: String) -> String {
        let start = super::hooked::fire(
            self.inner,
            HookEvent::SubagentStart,
            &[&self.agent.name],
            self.agent_fields.clone(),
            self.abort,
        )
        .await;
        let prompt = match start.context.is_empty() {
            true => prompt,
            false => format!(
                "{prompt}\n\n{}",
                super::hooked::context_message(&start.context)
            ),
        };
        self.publish(format!(
            "{} subagent {} started",
            self.agent.name, self.session_id
        ));
        prompt
    }

    /// Runs the child, again with a `SubagentStop` hook's reason while one blocks its stop;
    /// the runs' outcomes summed.
    async fn drive(&mut self, prompt: String) -> Result<ChildOutcome, TaskError> {
        let mut total = ChildOutcome {
            final_text: String::new(),
            usage: Default::default(),
            tool_count: 0,
            failure: None,
        };
        let (mut prompt, mut continues) = (prompt, 0u32);
        loop {
            let run = self.run_child(prompt).await?;
            total.usage.add(&run.usage);
            total.tool_count += run.tool_count;
            if !run.final_text.trim().is_empty() {
                total.final_text = run.final_text;
            }
            total.failure = run.failure;
            // A hook that blocks the stop keeps the child working: its reason is the child's
            // next prompt (Claude's contract), as often as a `Stop` hook may keep the parent
            // going.
            match self.stopping(&total, continues).await {
                Some(reason)
                    if total.failure.is_none()
                        && !self.abort.is_aborted()
                        && continues < super::hooked::MAX_STOP_CONTINUES =>
                {
                    continues += 1;
                    prompt = reason;
                }
                _ => return Ok(total),
            }
        }
    }

    /// One run of the child, each of its steps published as an update of the call.
    async fn run_child(&mut self, prompt: String) -> Result<ChildOutcome, TaskError> {
        let (tx, mut rx) = mpsc::unbounded_channel::<ChildStep>();
        let run = self.child.run(prompt, tx, self.abort.clone());
        tokio::pin!(run);
        loop {
            tokio::select! {
                biased;
                Some(step) = rx.recv() => {
                    self.details.tool_count += 1;
                    let text = format!(
                        "{} subagent {}: {}",
                        self.agent.name, self.session_id, step.tool_name
                    );
                    self.details.step = Some(step);
                    publish(self.inner, self.id, self.args, &self.details, text);
                }
                ended = &mut run => return ended,
            }
        }
    }

    /// Fires `SubagentStop` hooks after a run; the reason to go on when one blocks the stop.
    /// (`&mut self`: a shared `Task` is not `Send`, its child is not `Sync`.)
    async fn stopping(&mut self, total: &ChildOutcome, continues: u32) -> Option<String> {
        let mut stop_fields = self.agent_fields.clone();
        let transcript = match &self.inner.config.hooks {
            Some(h) if h.wants(HookEvent::SubagentStop) => {
                h.agent_transcript(&self.transcript, &self.session_id)
            }
            _ => self.transcript.clone(),
        };
        if let Value::Object(m) = &mut stop_fields {
            m.insert("stop_hook_active".into(), (continues > 0).into());
            m.insert("agent_transcript_path".into(), transcript.into());
            m.insert(
                "last_assistant_message".into(),
                total.final_text.clone().into(),
            );
        }
        super::hooked::subagent_stopping(self.inner, &self.agent.name, stop_fields).await
    }

    /// Closes the child; the call's result: the final answer and a usage line, or the error.
    async fn finish(mut self, ended: Result<ChildOutcome, TaskError>) -> ToolOutput {
        self.child.close().await;
        let outcome = match ended {
            Ok(o) => o,
            Err(e) => return ToolOutput::error(format!("The subagent failed: {e}")),
        };
        let details = &mut self.details;
        details.step = None;
        let duration_ms = (self.inner.clock.now_ms() - self.started).max(0) as u64;
        details.tool_count = outcome.tool_count;
        details.usage = Some(outcome.usage.clone());
        details.duration_ms = Some(duration_ms);
        let calls = match outcome.tool_count {
            1 => "1 tool call".to_string(),
            n => format!("{n} tool calls"),
        };
        let usage_line = format!(
            "[{} subagent {}: {calls}, {} tokens, {:.1} s]",
            self.agent.name,
            self.session_id,
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

    /// Publishes `text` as an update of the call, with the details so far.
    fn publish(&self, text: String) {
        publish(self.inner, self.id, self.args, &self.details, text);
    }
}

/// Publishes one `ToolCallUpdated` of the `task` call `id`.
fn publish(inner: &Inner, id: &str, args: &Value, details: &SubagentDetails, text: String) {
    inner.bus.publish(EventPayload::ToolCallUpdated {
        call_id: id.to_string(),
        tool_name: crate::kernel::subagent::TASK.to_string(),
        args: args.clone(),
        partial: ToolOutput::ok(text).with_details(json!(details)),
    });
}
