//! The kernel through its SDK handle (`AgentSession`), on the scripted provider: pi's queue
//! semantics (`pi-protocol.md` §7), abort mid-tool, serialized prompt acceptance, permission
//! policies, turn limits and script errors. Tests wait on events, never on time.

use std::sync::Arc;
use std::time::Duration;

use keel::kernel::event::{ApprovalDecision, Event, EventPayload, RunOutcome};
use keel::kernel::message::{user_text, Message};
use keel::kernel::op::{Op, QueueMode};
use keel::{AgentConfig, AgentSession, Permission};

use crate::common::kernel::{self as kit, drive, rt, scripted};

fn config(work: &std::path::Path) -> AgentConfig {
    let mut c = AgentConfig::new(work.to_path_buf(), work.to_path_buf());
    c.bash_timeout = Duration::from_secs(30);
    c
}

fn session(script: &str, config: AgentConfig) -> AgentSession {
    kit::session(config, scripted(script), Vec::new())
}

/// The user texts delivered in each turn, in order.
fn user_texts_per_turn(events: &[Arc<Event>]) -> Vec<Vec<String>> {
    let mut turns: Vec<Vec<String>> = Vec::new();
    for e in events {
        match &e.payload {
            EventPayload::TurnStarted => turns.push(Vec::new()),
            EventPayload::MessageFinished {
                message: Message::User(u),
                ..
            } => {
                turns.last_mut().unwrap().push(user_text(u));
            }
            _ => {}
        }
    }
    turns
}

const QUEUE_SCRIPT: &str = r#"{"turns":[
  {"match":"^go","chunks":[{"toolCall":{"id":"c1","name":"write","arguments":{"path":"x.txt","content":"x"}}}]},
  {"match":"^A","chunks":[{"text":"a"}]},
  {"match":"^B","chunks":[{"text":"b"}]},
  {"match":"^F","chunks":[{"text":"f"}]},
  {"match":"^A","chunks":[{"text":"ab"}]}
]}"#;

/// Queues steer A, steer B and follow-up F while the kernel waits on the write's approval,
/// through `submit(Op)` as a front end would.
fn queue_during_tool(s: &AgentSession, e: &Event) {
    if let EventPayload::ApprovalRequested { call_id, .. } = &e.payload {
        for op in [
            Op::Steer { text: "A".into() },
            Op::Steer { text: "B".into() },
            Op::FollowUp { text: "F".into() },
            Op::Approve {
                call_id: call_id.clone(),
                decision: ApprovalDecision::Allow,
            },
        ] {
            assert!(s.submit(op).unwrap().is_none(), "only Prompt starts a run");
        }
    }
}

#[test]
fn steer_and_follow_up_one_at_a_time_match_pi() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.permission = Permission::Ask;
    c.can_ask = true;
    let s = session(QUEUE_SCRIPT, c);
    let (events, outcome) = rt().block_on(drive(&s, "go", queue_during_tool));
    assert_eq!(outcome, RunOutcome::Completed);
    assert_eq!(
        user_texts_per_turn(&events),
        vec![vec!["go"], vec!["A"], vec!["B"], vec!["F"]]
    );
    let starts = events
        .iter()
        .filter(|e| e.payload == EventPayload::AgentStarted)
        .count();
    assert_eq!(starts, 1, "follow-ups continue the same run");
}

#[test]
fn steering_mode_all_delivers_every_queued_message_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.permission = Permission::Ask;
    c.can_ask = true;
    c.steering_mode = QueueMode::All;
    let s = session(QUEUE_SCRIPT, c);
    let (events, _) = rt().block_on(drive(&s, "go", queue_during_tool));
    assert_eq!(
        user_texts_per_turn(&events),
        vec![vec!["go"], vec!["A", "B"], vec!["F"]]
    );
}

#[test]
fn steering_queued_while_idle_follows_the_next_prompt() {
    let dir = tempfile::tempdir().unwrap();
    let s = session(
        r#"{"turns":[{"repeat":true,"chunks":[{"text":"ok"}]}]}"#,
        config(dir.path()),
    );
    s.steer("also this".into());
    let (events, _) = rt().block_on(drive(&s, "main", |_, _| {}));
    assert_eq!(
        user_texts_per_turn(&events),
        vec![vec!["main", "also this"]]
    );
}

#[test]
fn a_second_prompt_while_running_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let s = session(
        r#"{"turns":[{"chunks":[{"hang":true}]}]}"#,
        config(dir.path()),
    );
    let (_, outcome) = rt().block_on(drive(&s, "first", |s, e| {
        if e.payload == EventPayload::AgentStarted {
            assert_eq!(
                s.prompt("second".into()).unwrap_err(),
                keel::kernel::agent::PromptError::Busy
            );
            s.abort();
        }
    }));
    assert_eq!(outcome, RunOutcome::Aborted);
}

#[test]
fn abort_mid_tool_kills_bash_and_keeps_the_queues() {
    let dir = tempfile::tempdir().unwrap();
    let s = session(
        r#"{"turns":[{"chunks":[{"toolCall":{"name":"bash","arguments":{"command":"echo started; sleep 60"}}}]}]}"#,
        config(dir.path()),
    );
    let started = std::time::Instant::now();
    let (events, outcome) = rt().block_on(drive(&s, "run it", |s, e| {
        if let EventPayload::ToolCallUpdated { .. } = e.payload {
            s.follow_up("later".into());
            s.abort();
        }
    }));
    assert_eq!(outcome, RunOutcome::Aborted);
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "abort must not wait for the command"
    );
    let result = events
        .iter()
        .find_map(|e| match &e.payload {
            EventPayload::ToolCallFinished { result, .. } => Some(result.clone()),
            _ => None,
        })
        .unwrap();
    assert!(result.is_error);
    assert!(events.iter().any(|e| e.payload
        == EventPayload::AgentSettled {
            aborted: true,
            outcome: RunOutcome::Aborted,
            structured_output: None,
        }));
    let (_, follow) = s.clear_queue();
    assert_eq!(follow, vec!["later"], "abort leaves the queues alone");
}

#[test]
fn read_only_refuses_mutating_tools_with_a_tool_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.permission = Permission::ReadOnly;
    let s = session(
        r#"{"turns":[{"chunks":[{"toolCall":{"name":"write","arguments":{"path":"x.txt","content":"x"}}}]},{"chunks":[{"text":"ok"}]}]}"#,
        c,
    );
    let (events, outcome) = rt().block_on(drive(&s, "write", |_, _| {}));
    assert_eq!(outcome, RunOutcome::Completed);
    let text = events
        .iter()
        .find_map(|e| match &e.payload {
            EventPayload::ToolCallFinished { result, .. } => Some(result.text()),
            _ => None,
        })
        .unwrap();
    assert!(text.contains("read-only"), "{text}");
    assert!(!dir.path().join("x.txt").exists());
}

#[test]
fn turn_limit_puts_a_taken_follow_up_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.max_turns = Some(1);
    let s = session(
        r#"{"turns":[{"repeat":true,"chunks":[{"text":"done"}]}]}"#,
        c,
    );
    s.follow_up("next".into());
    let (_, outcome) = rt().block_on(drive(&s, "go", |_, _| {}));
    assert_eq!(outcome, RunOutcome::TurnLimit { max_turns: 1 });
    assert_eq!(s.clear_queue().1, vec!["next"]);
}

#[test]
fn no_matching_script_turn_fails_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let s = session(
        r#"{"turns":[{"match":"^y","chunks":[{"text":"y"}]}]}"#,
        config(dir.path()),
    );
    let (_, outcome) = rt().block_on(drive(&s, "x marks", |_, _| {}));
    match outcome {
        RunOutcome::Failed { kind, message } => {
            assert_eq!(kind, keel::kernel::failure::ErrorKind::ScriptExhausted);
            assert!(message.contains("x marks"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn unknown_and_disabled_tools_are_tool_errors_not_crashes() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.tools = vec!["read".into()];
    let s = session(
        r#"{"turns":[{"chunks":[{"toolCall":{"name":"bash","arguments":{"command":"true"}}},{"toolCall":{"name":"nope","arguments":{}}}]},{"chunks":[{"text":"ok"}]}]}"#,
        c,
    );
    let (events, outcome) = rt().block_on(drive(&s, "go", |_, _| {}));
    assert_eq!(outcome, RunOutcome::Completed);
    let errors = events
        .iter()
        .filter(|e| matches!(&e.payload, EventPayload::ToolCallFinished { result, .. } if result.is_error && result.text().contains("not available")))
        .count();
    assert_eq!(errors, 2);
}

#[test]
fn sequence_numbers_are_gapless_and_increasing() {
    let dir = tempfile::tempdir().unwrap();
    let s = session(
        r#"{"turns":[{"chunks":[{"text":"a"},{"text":"b"}]}]}"#,
        config(dir.path()),
    );
    let (events, _) = rt().block_on(drive(&s, "go", |_, _| {}));
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    let expected: Vec<u64> = (seqs[0]..seqs[0] + seqs.len() as u64).collect();
    assert_eq!(seqs, expected);
}
