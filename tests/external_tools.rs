//! The kernel's seam for external tools (`kernel::tool::external`): a fake `ToolSource` is
//! offered after the built-ins, its calls round-trip with progress, and `--permission` and the
//! tool list gate them exactly like built-in tools.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use keel::kernel::abort::AbortSignal;
use keel::kernel::event::RunOutcome;
use keel::kernel::provider::model::ModelInfo;
use keel::kernel::provider::scripted::ScriptedProvider;
use keel::kernel::provider::{ModelRequest, Provider, ProviderEvent};
use keel::kernel::tool::external::{BoxFuture, ExternalCall, ExternalSpec, ToolSource};
use keel::kernel::tool::{ToolOutput, ToolSpec};
use keel::{AgentConfig, EventPayload, Permission};
use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::common::kernel::{self as kit, rt};

#[derive(Debug, Default)]
struct Fake {
    calls: Mutex<Vec<(String, Value)>>,
}

impl ToolSource for Fake {
    fn ready(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
    fn tools(&self) -> Vec<ExternalSpec> {
        ["ext_look", "ext_change"]
            .iter()
            .map(|n| ExternalSpec {
                spec: ToolSpec {
                    name: n.to_string().into(),
                    description: format!("the {n} tool").into(),
                    parameters: json!({"type": "object"}),
                },
                read_only: *n == "ext_look",
            })
            .collect()
    }
    fn call<'a>(
        &'a self,
        name: &'a str,
        args: &'a Value,
        ctx: ExternalCall,
    ) -> BoxFuture<'a, ToolOutput> {
        self.calls.lock().unwrap().push((name.into(), args.clone()));
        Box::pin(async move {
            let _ = ctx.progress.send(ToolOutput::ok("halfway"));
            ToolOutput::ok(format!("{name} ran with {args}"))
        })
    }
}

/// The scripted provider, recording the tool names of every request.
#[derive(Debug)]
struct Recording {
    inner: ScriptedProvider,
    seen: Arc<Mutex<Vec<Vec<String>>>>,
}

impl Provider for Recording {
    fn info(&self) -> &ModelInfo {
        self.inner.info()
    }
    fn stream(&self, r: ModelRequest, abort: AbortSignal) -> mpsc::Receiver<ProviderEvent> {
        let names = r.tools.iter().map(|t| t.name.to_string()).collect();
        self.seen.lock().unwrap().push(names);
        self.inner.stream(r, abort)
    }
}

const CALLS: &str = r#"{"turns":[
  {"chunks":[{"toolCall":{"id":"a","name":"ext_look","arguments":{"q":1}}},
             {"toolCall":{"id":"b","name":"ext_change","arguments":{}}},
             {"toolCall":{"id":"c","name":"ext_missing","arguments":{}}}]},
  {"chunks":[{"text":"done"}]}]}"#;

struct Run {
    results: Vec<(String, ToolOutput)>,
    partials: usize,
    outcome: RunOutcome,
    requests: Vec<Vec<String>>,
    fake: Arc<Fake>,
}

fn run(permission: Permission, tools: &[&str]) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let mut c = AgentConfig::new(dir.path().to_path_buf(), dir.path().to_path_buf());
    c.bash_timeout = Duration::from_secs(30);
    c.permission = permission;
    c.tools = tools.iter().map(|s| s.to_string()).collect();
    let fake = Arc::new(Fake::default());
    c.external_tools = vec![fake.clone()];
    let seen = Arc::new(Mutex::new(Vec::new()));
    let provider = Recording {
        inner: ScriptedProvider::from_script(serde_json::from_str(CALLS).unwrap()).unwrap(),
        seen: seen.clone(),
    };
    let s = kit::session(c, provider, Vec::new());
    let (results, partials, outcome) = rt().block_on(async {
        let mut rx = s.subscribe();
        let run = s.prompt("go".into()).unwrap();
        let (mut results, mut partials) = (Vec::new(), 0);
        while let Some(ev) = rx.recv().await {
            match &ev.payload {
                EventPayload::ToolCallUpdated { .. } => partials += 1,
                EventPayload::ToolCallFinished {
                    tool_name, result, ..
                } => results.push((tool_name.clone(), result.clone())),
                EventPayload::AgentSettled { .. } => break,
                _ => {}
            }
        }
        (results, partials, run.await.unwrap())
    });
    let requests = seen.lock().unwrap().clone();
    Run {
        results,
        partials,
        outcome,
        requests,
        fake,
    }
}

#[test]
fn external_tools_follow_the_built_ins_in_every_request_and_round_trip() {
    let r = run(Permission::Auto, &["read", "bash"]);
    assert_eq!(r.outcome, RunOutcome::Completed);
    assert_eq!(r.requests.len(), 2);
    for names in &r.requests {
        // The job tools come with `bash` (Claude's shapes for this model's API).
        assert_eq!(
            names,
            &[
                "read",
                "bash",
                "bash_output",
                "bash_kill",
                "ext_look",
                "ext_change"
            ]
        );
    }
    let calls = r.fake.calls.lock().unwrap().clone();
    assert_eq!(
        calls,
        vec![
            ("ext_look".to_string(), json!({"q": 1})),
            ("ext_change".to_string(), json!({}))
        ]
    );
    assert_eq!(r.results[0].1.text(), r#"ext_look ran with {"q":1}"#);
    assert!(!r.results[1].1.is_error);
    assert_eq!(r.partials, 2, "each call's progress is published");
    let missing = &r.results[2].1;
    assert!(missing.is_error);
    assert!(
        missing
            .text()
            .contains("Available tools: read, bash, ext_look, ext_change"),
        "{}",
        missing.text()
    );
}

#[test]
fn read_only_refuses_external_tools_unless_they_only_read() {
    let r = run(Permission::ReadOnly, &["read"]);
    let calls = r.fake.calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 1, "only the read-only tool ran: {calls:?}");
    assert_eq!(calls[0].0, "ext_look");
    let refused = &r.results[1].1;
    assert!(refused.is_error);
    assert!(refused.text().contains("read-only"), "{}", refused.text());
}

#[test]
fn ask_without_a_front_end_blocks_a_mutating_external_tool() {
    let r = run(Permission::Ask, &["read"]);
    assert!(
        matches!(r.outcome, RunOutcome::Blocked { ref tool_name, .. } if tool_name == "ext_change")
    );
    assert!(r.results[1].1.text().contains("needs approval"));
    assert_eq!(r.fake.calls.lock().unwrap().len(), 1);
}
