//! Context compaction round trips: a long scripted conversation crosses the threshold of a
//! small context window, is summarised, the session file holds a pi `compaction` entry, and
//! reloading the file (`--continue`) rebuilds exactly the context the kernel had.

use std::sync::Arc;
use std::time::Duration;

use keel::kernel::event::{CompactionReason, EventPayload, RunOutcome};
use keel::kernel::message::{user_text, Message};
use keel::kernel::provider::scripted::ScriptedProvider;
use keel::kernel::recorder;
use keel::kernel::session::{EntryData, SessionHeader, Store};
use keel::{AgentConfig, AgentSession, Bus, Clock};

use crate::common::http_server::{Reply, Server};
use crate::common::kernel::{self as kit, drive, rt, scripted};
use crate::common::support::{fixture, root, scripted_args, Sandbox};

fn session(
    clock: &Clock,
    bus: &Bus,
    dir: &std::path::Path,
    history: Vec<(String, Message)>,
) -> AgentSession {
    let provider =
        ScriptedProvider::load(std::path::Path::new(&fixture("compaction.json"))).unwrap();
    let mut config = AgentConfig::new(dir.to_path_buf(), dir.to_path_buf());
    config.system_prompt = "test".into();
    config.bash_timeout = Duration::from_secs(30);
    AgentSession::with_entries(
        config,
        Arc::new(provider),
        bus.clone(),
        clock.clone(),
        history,
    )
}

#[test]
fn threshold_compaction_round_trips_through_the_session_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    rt().block_on(async {
        let clock = Clock::new(Some(1_796_000_000_000), Some(7));
        let header = SessionHeader::new(&clock, dir.path().display().to_string());
        let bus = Bus::new(clock.clone());
        let store = Store::new_file(path.clone(), header);
        let writer =
            recorder::Recorder::new(std::sync::Arc::new(std::sync::Mutex::new(store)), &clock);
        let rec = tokio::spawn(recorder::record(writer, bus.subscribe()));
        let s = session(&clock, &bus, dir.path(), Vec::new());
        s.announce_model();
        for p in ["one", "two"] {
            let (events, outcome) = drive(&s, p, |_, _| {}).await;
            assert_eq!(outcome, RunOutcome::Completed);
            assert!(!events
                .iter()
                .any(|e| matches!(e.payload, EventPayload::CompactionStarted { .. })));
        }
        let before = s.messages();
        let (events, outcome) = drive(&s, "three", |_, _| {}).await;
        assert_eq!(outcome, RunOutcome::Completed);
        // Compaction runs after the user message and before the model call.
        let names: Vec<&str> = events
            .iter()
            .filter_map(|e| match &e.payload {
                EventPayload::CompactionStarted { reason } => {
                    assert_eq!(*reason, CompactionReason::Threshold);
                    Some("compaction_start")
                }
                EventPayload::CompactionFinished { result, .. } => {
                    let r = result.as_ref().expect("compaction succeeded");
                    assert!(r.summary.starts_with("## Goal"));
                    assert!(r.tokens_before > 1500, "{}", r.tokens_before);
                    assert!(r.estimated_tokens_after < r.tokens_before);
                    assert_eq!(r.usage.input, 700);
                    Some("compaction_end")
                }
                EventPayload::MessageStarted {
                    message: Message::Assistant(_),
                } => Some("assistant"),
                _ => None,
            })
            .collect();
        assert_eq!(names, ["compaction_start", "compaction_end", "assistant"]);
        let live = s.messages();
        // The summary replaced the older messages; the recent ones are kept verbatim.
        let Message::User(summary) = &live[0] else {
            panic!("{:?}", live[0])
        };
        assert!(user_text(summary)
            .starts_with("The conversation history before this point was compacted"));
        assert!(live.len() < before.len() + 2);
        assert_eq!(live[1], before[3], "the kept message is unchanged");
        assert_eq!(live.len(), 4, "summary, kept answer, prompt, new answer");

        bus.close();
        drop(s);
        rec.await.unwrap();

        // Read without the lock: a test beside this one that spawns a process can hold a copy of
        // the session's file (and so its lock) between its fork and its exec.
        let (store, warnings) = Store::read(&path).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(store.context(), live, "reloading rebuilds the same context");
        let compactions: Vec<_> = store
            .entries()
            .iter()
            .filter_map(|e| match &e.data {
                EntryData::Compaction {
                    first_kept_entry_id,
                    tokens_before,
                    ..
                } => Some((first_kept_entry_id.clone(), *tokens_before)),
                _ => None,
            })
            .collect();
        assert_eq!(compactions.len(), 1);
        assert!(store.entries().iter().any(|e| e.id == compactions[0].0));

        // A resumed session continues from the compacted context without compacting again.
        let history = store.context_entries();
        drop(store);
        let clock = Clock::new(Some(1_796_000_100_000), Some(8));
        let bus = Bus::new(clock.clone());
        let s = session(&clock, &bus, dir.path(), history);
        let (events, outcome) = drive(&s, "four", |_, _| {}).await;
        assert_eq!(outcome, RunOutcome::Completed);
        assert!(!events
            .iter()
            .any(|e| matches!(e.payload, EventPayload::CompactionStarted { .. })));
        assert_eq!(s.messages()[..live.len()], live[..]);
    });
}

#[test]
fn manual_compaction_reports_nothing_to_compact_and_then_compacts() {
    let dir = tempfile::tempdir().unwrap();
    rt().block_on(async {
        let clock = Clock::new(Some(1), Some(1));
        let bus = Bus::new(clock.clone());
        let s = session(&clock, &bus, dir.path(), Vec::new());
        let mut rx = s.subscribe();
        let e = s.compact(None).await.unwrap_err();
        assert_eq!(e.to_string(), "Nothing to compact (session too small)");
        let ev = rx.recv().await.unwrap();
        assert!(matches!(
            ev.payload,
            EventPayload::CompactionStarted {
                reason: CompactionReason::Manual
            }
        ));
        let ev = rx.recv().await.unwrap();
        match &ev.payload {
            EventPayload::CompactionFinished {
                result: None,
                error_message: Some(m),
                ..
            } => {
                assert!(m.contains("Nothing to compact"))
            }
            other => panic!("{other:?}"),
        }
        drive(&s, "one", |_, _| {}).await;
        drive(&s, "two", |_, _| {}).await;
        let r = s
            .compact(Some("focus on the answers".into()))
            .await
            .unwrap();
        assert!(r.summary.starts_with("## Goal"));
        let m = s.messages();
        assert!(user_text(match &m[0] {
            Message::User(u) => u,
            other => panic!("{other:?}"),
        })
        .contains(&r.summary));
    });
}

#[test]
fn the_binary_writes_the_entry_and_continue_sends_the_compacted_context() {
    let sb = Sandbox::new();
    let script = fixture("compaction.json");
    let scripted = scripted_args(&[], script.as_str(), &[]);
    let mut args: Vec<&str> = vec!["--json"];
    args.extend_from_slice(&scripted);
    args.push("one");
    assert_eq!(sb.run(&args).code, 0);
    for p in ["two", "three"] {
        let mut args: Vec<&str> = vec!["--json", "--continue"];
        args.extend_from_slice(&scripted);
        args.push(p);
        let run = sb.run(&args);
        assert_eq!(run.code, 0, "{run}");
        let compacted = run
            .stdout_lines()
            .iter()
            .any(|l| l["type"] == "compaction_end" && l["result"]["firstKeptEntryId"].is_string());
        assert_eq!(compacted, p == "three", "{run}");
    }
    let text = sb.session_text();
    assert_eq!(text.matches(r#""type":"compaction""#).count(), 1);

    // The next run talks to an OpenAI-compatible server: what it is sent is the context.
    let server = Server::start(vec![Reply::sse(
        &std::fs::read(root().join("fixtures/providers/openai/text.sse")).unwrap(),
    )]);
    let run = sb.run(&[
        "--json",
        "--continue",
        "--base-url",
        &server.base_url(),
        "--model",
        "m",
        "four",
    ]);
    assert_eq!(run.code, 0, "{run}");
    let body = server.seen()[0].json();
    let messages = body["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "user", "assistant", "user"]
    );
    let summary = messages[1]["content"].as_str().unwrap();
    assert!(summary.starts_with("The conversation history before this point was compacted"));
    assert!(summary.contains("## Goal"));
    assert!(messages[2]["content"]
        .as_str()
        .unwrap()
        .starts_with("Second answer."));
    assert_eq!(messages[3]["content"], "three");
    assert_eq!(messages[5]["content"], "four");
}

const OVERFLOW_SCRIPT: &str = r###"{"contextWindow": 100000, "turns": [
  {"match": "^now", "chunks": [{"error": "HTTP 400: prompt is too long", "kind": "context_overflow"}]},
  {"match": "^\\[User\\]", "chunks": [{"text": "## Goal\nEarlier talk."}]},
  {"match": "^now", "chunks": [{"text": "Answered on the compacted context."}]}
]}"###;

fn overflow_session(auto: bool) -> AgentSession {
    let dir = std::env::temp_dir();
    let mut config = AgentConfig::new(dir.clone(), dir);
    config.compaction.enabled = auto;
    let history = vec![
        Message::user("earlier question", 1),
        Message::user("another earlier question", 2),
    ];
    kit::session(config, scripted(OVERFLOW_SCRIPT), history)
}

#[test]
fn a_context_overflow_compacts_and_repeats_the_call_or_fails_with_its_kind() {
    rt().block_on(async {
        let s = overflow_session(true);
        let (events, outcome) = drive(&s, "now answer", |_, _| {}).await;
        assert_eq!(outcome, RunOutcome::Completed);
        let end = events
            .iter()
            .find_map(|e| match &e.payload {
                EventPayload::CompactionFinished {
                    reason,
                    will_retry,
                    result,
                    ..
                } => Some((*reason, *will_retry, result.is_some())),
                _ => None,
            })
            .unwrap();
        assert_eq!(end, (CompactionReason::Overflow, true, true));
        let answers: Vec<String> = s
            .messages()
            .iter()
            .filter_map(|m| match m {
                Message::Assistant(a) => Some(a.text()),
                _ => None,
            })
            .collect();
        assert_eq!(
            answers.last().unwrap(),
            "Answered on the compacted context."
        );

        let s = overflow_session(false);
        let (events, outcome) = drive(&s, "now answer", |_, _| {}).await;
        assert_eq!(
            outcome,
            RunOutcome::Failed {
                kind: "context_overflow".into(),
                message: "HTTP 400: prompt is too long".into()
            }
        );
        assert!(!events
            .iter()
            .any(|e| matches!(e.payload, EventPayload::CompactionStarted { .. })));
    });
}
