//! Running one tool call the gate let through: the tool (built-in or external) with the
//! session's context, its partial output published as `ToolCallUpdated`, and what the sandbox
//! stopped published as `SandboxViolation`. An approved escalation runs `bash` unsandboxed, and
//! a `write` or `edit` with its protected paths writable.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::mpsc;

use crate::kernel::abort::AbortSignal;
use crate::kernel::agent::Inner;
use crate::kernel::event::EventPayload;
use crate::kernel::sandbox::{watch, Sandbox, Violation, ViolationReason};
use crate::kernel::tool::external::ExternalCall;
use crate::kernel::tool::{self, ToolContext, ToolOutput};

/// Executes one call, forwarding its partial output as `ToolCallUpdated` events.
/// `escalated`: an approved request to run outside the sandbox.
pub(super) async fn execute(
    inner: &Inner,
    id: &str,
    name: &str,
    args: &Value,
    abort: &AbortSignal,
    escalated: bool,
) -> ToolOutput {
    let (ptx, mut prx) = mpsc::unbounded_channel::<ToolOutput>();
    let (vtx, mut vrx) = mpsc::unbounded_channel::<Violation>();
    // An approved `write`/`edit` of a protected path lifts that protection alone.
    let sandbox = match (escalated, name) {
        (true, "write" | "edit") => Arc::new(inner.config.sandbox.unprotected()),
        (true, _) => Arc::new(Sandbox::off(&inner.config.cwd)),
        (false, _) => inner.config.sandbox.clone(),
    };
    // What a `bash` call must not leave behind (`sandbox::watch`), recorded before it runs
    // (a call that becomes a background job takes it along).
    let record = watch::CallRecord::new(match name == "bash" {
        true => watch::record(&sandbox.policy).await,
        false => None,
    });
    let ctx = ToolContext {
        cwd: inner.config.cwd.clone(),
        abort: abort.clone(),
        progress: Some(ptx),
        bash_timeout: inner.config.bash_timeout,
        temp_dir: inner.config.temp_dir.clone(),
        env: inner.config.tool_env.clone(),
        files: inner.config.files.for_call(id),
        sandbox,
        violations: Some(vtx),
        rules: inner.config.rules.clone(),
        watched: record.clone(),
    };
    let run = async {
        if let Some(out) = super::session_tools::run(inner, id, name, args, abort).await {
            return out;
        }
        if let Some(lsp) = inner.config.lsp.as_ref() {
            if crate::kernel::lsp::tool::offered(Some(lsp), name) {
                return lsp.tool(args, &inner.config.cwd, abort).await;
            }
        }
        if tool::enabled(name, &inner.config.tools) && tool::spec(name).is_some() {
            return tool::execute(name, args, &ctx).await;
        }
        let source = inner
            .config
            .external_tools
            .iter()
            .find(|s| s.tools().iter().any(|t| t.spec.name == name));
        let Some(source) = source else {
            return ToolOutput::error(format!("Tool `{name}` is no longer available"));
        };
        let call = ExternalCall {
            abort: ctx.abort.clone(),
            progress: ctx
                .progress
                .clone()
                .unwrap_or_else(|| mpsc::unbounded_channel().0),
            temp_dir: ctx.temp_dir.clone(),
        };
        source.call(name, args, call).await
    };
    tokio::pin!(run);
    let publish = |partial: ToolOutput| {
        inner.bus.publish(EventPayload::ToolCallUpdated {
            call_id: id.to_string(),
            tool_name: name.to_string(),
            args: args.clone(),
            partial,
        });
    };
    let output = loop {
        tokio::select! {
            biased;
            Some(partial) = prx.recv() => publish(partial),
            out = &mut run => break out,
        }
    };
    while let Ok(partial) = prx.try_recv() {
        publish(partial);
    }
    // What the language server says about the file an `edit` or `write` changed.
    let output = match (&inner.config.lsp, name) {
        (Some(lsp), "edit" | "write") if !output.is_error => lsp.annotate(output, abort).await,
        _ => output,
    };
    let found = record.repair().await;
    let output = with_notes(
        output,
        found.iter().map(|f| f.note(ctx.sandbox.policy.mode)),
    );
    for f in found {
        inner.bus.publish(EventPayload::SandboxViolation {
            call_id: id.to_string(),
            reason: ViolationReason::Protected,
            path: Some(f.path),
            host: None,
        });
    }
    while let Ok(v) = vrx.try_recv() {
        inner.bus.publish(EventPayload::SandboxViolation {
            call_id: id.to_string(),
            reason: v.reason,
            path: v.path,
            host: v.host,
        });
    }
    output
}

/// `output` with each of `notes` on a line of its own after its text.
fn with_notes(mut output: ToolOutput, notes: impl Iterator<Item = String>) -> ToolOutput {
    use crate::kernel::message::Content;
    for note in notes {
        match output.content.iter_mut().find_map(|c| match c {
            Content::Text { text } => Some(text),
            _ => None,
        }) {
            Some(text) => {
                text.push('\n');
                text.push_str(&note);
            }
            None => output.content.push(Content::text(note)),
        }
    }
    output
}
