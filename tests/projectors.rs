//! Every kernel event variant, produced by a real in-process run of the scripted provider
//! (`fixtures/providers/everything.json`), projected by the print and JSON front ends and
//! snapshotted. The run must produce every variant, so a new variant without a fixture fails.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use keel::front::{json, print};
use keel::kernel::event::{ApprovalDecision, AssistantDelta, Event, EventPayload};
use keel::kernel::provider::scripted::ScriptedProvider;
use keel::{AgentConfig, AgentSession, Bus, Clock, Permission};

use crate::common::kernel::rt;
use crate::common::support::{fixture, snap, CLOCK};

/// The variant name of an event (and of the delta inside `MessageDelta`). No `_` arm: a new
/// variant does not compile until it is named here.
fn variant(e: &EventPayload) -> String {
    match e {
        EventPayload::ModelChanged { .. } => "ModelChanged".into(),
        EventPayload::ThinkingLevelChanged { .. } => "ThinkingLevelChanged".into(),
        EventPayload::AgentStarted => "AgentStarted".into(),
        EventPayload::AgentFinished { .. } => "AgentFinished".into(),
        EventPayload::AgentSettled { .. } => "AgentSettled".into(),
        EventPayload::TurnStarted => "TurnStarted".into(),
        EventPayload::TurnFinished { .. } => "TurnFinished".into(),
        EventPayload::MessageStarted { .. } => "MessageStarted".into(),
        EventPayload::MessageDelta { delta, .. } => format!(
            "MessageDelta.{}",
            match delta {
                AssistantDelta::TextStarted { .. } => "TextStarted",
                AssistantDelta::TextDelta { .. } => "TextDelta",
                AssistantDelta::TextFinished { .. } => "TextFinished",
                AssistantDelta::ThinkingStarted { .. } => "ThinkingStarted",
                AssistantDelta::ThinkingDelta { .. } => "ThinkingDelta",
                AssistantDelta::ThinkingFinished { .. } => "ThinkingFinished",
                AssistantDelta::ToolCallStarted { .. } => "ToolCallStarted",
                AssistantDelta::ToolCallDelta { .. } => "ToolCallDelta",
                AssistantDelta::ToolCallFinished { .. } => "ToolCallFinished",
            }
        ),
        EventPayload::MessageFinished { .. } => "MessageFinished".into(),
        EventPayload::ToolCallStarted { .. } => "ToolCallStarted".into(),
        EventPayload::ToolCallUpdated { .. } => "ToolCallUpdated".into(),
        EventPayload::ToolCallFinished { .. } => "ToolCallFinished".into(),
        EventPayload::ApprovalRequested { .. } => "ApprovalRequested".into(),
        EventPayload::QueueChanged { .. } => "QueueChanged".into(),
        EventPayload::RetryScheduled { .. } => "RetryScheduled".into(),
        EventPayload::RetryFinished { .. } => "RetryFinished".into(),
        EventPayload::CompactionStarted { .. } => "CompactionStarted".into(),
        EventPayload::CompactionFinished { .. } => "CompactionFinished".into(),
        EventPayload::BashExecuted { .. } => "BashExecuted".into(),
        EventPayload::SessionNamed { .. } => "SessionNamed".into(),
        EventPayload::HookStarted { .. } => "HookStarted".into(),
        EventPayload::HookFinished { .. } => "HookFinished".into(),
        EventPayload::SandboxViolation { .. } => "SandboxViolation".into(),
        EventPayload::CheckpointCreated { .. } => "CheckpointCreated".into(),
        EventPayload::CheckpointFailed { .. } => "CheckpointFailed".into(),
        EventPayload::TodosUpdated { .. } => "TodosUpdated".into(),
        EventPayload::PermissionChanged { .. } => "PermissionChanged".into(),
        EventPayload::Job(_) => "Job".into(),
    }
}

const ALL_VARIANTS: &[&str] = &[
    "ModelChanged",
    "ThinkingLevelChanged",
    "AgentStarted",
    "AgentFinished",
    "AgentSettled",
    "TurnStarted",
    "TurnFinished",
    "MessageStarted",
    "MessageDelta.TextStarted",
    "MessageDelta.TextDelta",
    "MessageDelta.TextFinished",
    "MessageDelta.ThinkingStarted",
    "MessageDelta.ThinkingDelta",
    "MessageDelta.ThinkingFinished",
    "MessageDelta.ToolCallStarted",
    "MessageDelta.ToolCallDelta",
    "MessageDelta.ToolCallFinished",
    "MessageFinished",
    "ToolCallStarted",
    "ToolCallUpdated",
    "ToolCallFinished",
    "ApprovalRequested",
    "QueueChanged",
    "RetryScheduled",
    "RetryFinished",
    "CompactionStarted",
    "CompactionFinished",
    "BashExecuted",
    "SessionNamed",
    "HookStarted",
    "HookFinished",
    "SandboxViolation",
];

/// A `PostToolUse` hook on `bash` that prints a system message (a hook run on the stream).
fn post_bash_hook(work: &std::path::Path, temp: &std::path::Path) -> keel::kernel::hooks::Hooks {
    use keel::kernel::hooks::{HookConfig, HookEnv, Hooks, SessionFields};
    let (config, _) = HookConfig::parse(
        &serde_json::json!({"PostToolUse": [{"matcher": "Bash", "hooks": [{"type": "command",
            "command": "echo '{\"systemMessage\": \"bash ran\"}'"}]}]}),
        "test",
    );
    let env = HookEnv {
        cwd: work.to_path_buf(),
        project_dir: work.to_path_buf(),
        tool_env: keel::kernel::tool::ToolEnv::new(vec![]),
        // Not the workspace: the hooks' Claude transcript of this in-memory session is kept
        // under it, where the model's `grep` would find it.
        temp_dir: temp.to_path_buf(),
        readable: Vec::new(),
    };
    Hooks::new(config, env, SessionFields::default())
}

/// Runs everything.json: approvals answered (edit denied, the rest allowed), a steer and a
/// follow-up queued while the first approval is pending.
fn everything_run(work: &std::path::Path) -> Vec<Arc<Event>> {
    std::fs::write(work.join("a.txt"), "alpha\n").unwrap();
    let rt = rt();
    rt.block_on(async {
        let clock = Clock::new(Some(CLOCK.parse().unwrap()), Some(5));
        let provider =
            ScriptedProvider::load(std::path::Path::new(&fixture("everything.json"))).unwrap();
        let mut config = AgentConfig::new(work.to_path_buf(), work.to_path_buf());
        config.system_prompt = "test".into();
        config.permission = Permission::Ask;
        config.can_ask = true;
        config.bash_timeout = Duration::from_secs(30);
        let temp = tempfile::tempdir().unwrap();
        config.hooks = Some(post_bash_hook(work, temp.path()));
        let bus = Bus::new(clock.clone());
        let session = AgentSession::new(config, Arc::new(provider), bus, clock, Vec::new());
        let mut rx = session.subscribe();
        session.announce_model();
        let run = session.prompt("survey the workspace".into()).unwrap();
        let mut events = Vec::new();
        let mut queued = false;
        while let Some(ev) = rx.recv().await {
            // The kernel waits on an approval, so queueing there lands at a fixed place in the
            // event order (queueing on any other event would race the kernel task).
            if let EventPayload::ApprovalRequested {
                call_id, tool_name, ..
            } = &ev.payload
            {
                if !queued {
                    queued = true;
                    session.steer("steer: mind the tests".into());
                    session.follow_up("follow up: summarise".into());
                }
                let d = if tool_name == "edit" {
                    ApprovalDecision::Deny
                } else {
                    ApprovalDecision::Allow
                };
                assert!(session.approve(call_id, d));
            }
            let done = matches!(ev.payload, EventPayload::AgentSettled { .. });
            events.push(ev);
            if done {
                break;
            }
        }
        run.await.unwrap();
        // What a front end does between runs: name the session, run a shell command.
        session.set_session_name("survey".into());
        let (tx, _chunks) = tokio::sync::mpsc::unbounded_channel();
        let record = session
            .bash(
                "echo user-shell",
                false,
                tx,
                keel::kernel::abort::AbortSignal::never(),
            )
            .await;
        assert_eq!(record.output, "user-shell\n");
        while let Ok(ev) = rx.try_recv() {
            events.push(ev);
        }
        events
    })
}

/// Bash may report its output in one or several partial updates; keep the last of a series.
fn collapse_updates(events: Vec<Arc<Event>>) -> Vec<Arc<Event>> {
    let mut out: Vec<Arc<Event>> = Vec::new();
    for e in events {
        let is_update = matches!(e.payload, EventPayload::ToolCallUpdated { .. });
        if is_update
            && out
                .last()
                .is_some_and(|l| matches!(l.payload, EventPayload::ToolCallUpdated { .. }))
        {
            out.pop();
        }
        out.push(e);
    }
    out
}

fn scrub(s: &str, work: &std::path::Path) -> String {
    let s = s.replace(&work.display().to_string(), "[WORK]");
    let re = regex::Regex::new(r#""(timestamp|durationMs)":\d+"#).unwrap();
    re.replace_all(&s, "\"$1\":0").to_string()
}

#[test]
fn every_variant_is_projected_by_print_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let events = collapse_updates(everything_run(dir.path()));
    let seen: BTreeSet<String> = events.iter().map(|e| variant(&e.payload)).collect();
    let missing: Vec<&&str> = ALL_VARIANTS
        .iter()
        .filter(|v| !seen.contains(**v))
        .collect();
    assert!(
        missing.is_empty(),
        "the fixture run never produced {missing:?}"
    );

    let mut print_out = String::new();
    let mut json_out = String::new();
    for e in &events {
        let name = variant(&e.payload);
        print_out.push_str(&format!("# {name}\n"));
        for l in print::activity(e) {
            print_out.push_str(&format!("{l}\n"));
        }
        json_out.push_str(&format!("# {name}\n"));
        for l in json::lines(e) {
            json_out.push_str(&l);
        }
    }
    snap(
        "projector_print_every_variant",
        &scrub(&print_out, dir.path()),
    );
    snap(
        "projector_json_every_variant",
        &scrub(&json_out, dir.path()),
    );
}

#[test]
fn denied_and_allowed_approvals_reach_the_model_as_results() {
    let dir = tempfile::tempdir().unwrap();
    let events = everything_run(dir.path());
    let results: Vec<(String, bool)> = events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::ToolCallFinished {
                tool_name, result, ..
            } => Some((tool_name.clone(), result.is_error)),
            _ => None,
        })
        .collect();
    assert!(results.contains(&("edit".into(), true)), "{results:?}");
    assert!(results.contains(&("write".into(), false)), "{results:?}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("b.txt")).unwrap(),
        "beta\n",
        "denied edit did not run"
    );
}

/// Print mode skips serializing the lines it does not read by their variant's tag: the tag it
/// checks must be the one the line is written with.
#[test]
fn every_wire_event_names_the_type_it_is_written_with() {
    let dir = tempfile::tempdir().unwrap();
    let mut checked = BTreeSet::new();
    for e in everything_run(dir.path()) {
        let wire = keel::wire::events::wire_events(&e);
        for w in wire
            .iter()
            .chain(keel::wire::events::rpc_extra_events(&e).iter())
        {
            let v: serde_json::Value = serde_json::to_value(w).unwrap();
            assert_eq!(v["type"], w.kind(), "{v}");
            checked.insert(w.kind());
        }
    }
    assert!(checked.len() >= 15, "only {checked:?}");
}
