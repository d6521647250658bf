//! Unit tests of the session store: round trips, lazy creation, torn and damaged lines,
//! locks, forks, compaction context and repairs.
use super::*;
use crate::kernel::clock::parse_iso;
use crate::kernel::message::{AssistantMessage, Content, StopReason, Usage};
use serde_json::Value;

const VALID: &str = include_str!("../../../../fixtures/sessions/valid.jsonl");
const TORN: &str = include_str!("../../../../fixtures/sessions/torn.jsonl");
const UNKNOWN: &str = include_str!("../../../../fixtures/sessions/unknown.jsonl");
const NO_HEADER: &str = include_str!("../../../../fixtures/sessions/no-header.jsonl");

fn clock() -> Clock {
    Clock::new(Some(1_796_006_400_000), Some(1))
}

fn header(clock: &Clock) -> SessionHeader {
    SessionHeader::new(clock, "/home/u/proj")
}

fn fixture(dir: &tempfile::TempDir, name: &str, text: &str) -> PathBuf {
    let path = dir.path().join(name);
    fs::write(&path, text).unwrap();
    path
}

fn assistant(text: &str, ts: i64) -> EntryData {
    EntryData::Message(Message::from(AssistantMessage {
        content: vec![Content::text(text)],
        api: "openai-completions".into(),
        provider: "mock".into(),
        model: "mock-1".into(),
        usage: Usage::default(),
        stop_reason: StopReason::Stop,
        error_message: None,
        duration_ms: Some(12),
        timestamp: ts,
    }))
}

fn user(text: &str) -> EntryData {
    EntryData::Message(Message::user(text, 1_796_006_400_500))
}

fn lines(path: &Path) -> Vec<Value> {
    let text = fs::read_to_string(path).unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn round_trip_write_then_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("deep/er/s.jsonl");
    let c = clock();
    let mut store = Store::new_file(path.clone(), header(&c));
    let model = EntryData::ModelChange {
        provider: "mock".into(),
        model_id: "mock-1".into(),
    };
    store.append(model, &c).unwrap();
    store.append(user("hi"), &c).unwrap();
    store.append(assistant("hello", 5), &c).unwrap();
    let label = EntryData::Label {
        target_id: store.entries()[1].id.clone(),
        label: None,
    };
    store.append(label, &c).unwrap();
    store.sync().unwrap();
    let (want_entries, want_context) = (store.entries().to_vec(), store.context());
    let want_header = store.header().clone();
    drop(store);
    let (back, warnings) = Store::open(&path).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(back.header(), &want_header);
    assert_eq!(back.entries(), want_entries.as_slice());
    assert_eq!(back.context(), want_context);
    assert_eq!(want_context.len(), 2);
    assert_eq!(back.leaf_id(), Some(want_entries[3].id.as_str()));
    assert_eq!(
        back.entries()[1].parent_id.as_deref(),
        Some(want_entries[0].id.as_str())
    );
    assert_eq!(back.path(), Some(path.as_path()));
}

#[test]
fn file_appears_only_with_the_first_message() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions/s.jsonl");
    let c = clock();
    let mut store = Store::new_file(path.clone(), header(&c));
    let info = EntryData::SessionInfo { name: "run".into() };
    store.append(info, &c).unwrap();
    let thinking = EntryData::ThinkingLevelChange {
        thinking_level: "off".into(),
    };
    store.append(thinking, &c).unwrap();
    store.sync().unwrap();
    assert!(!path.exists());
    assert!(!store.is_materialized());
    store.append(user("go"), &c).unwrap();
    assert!(store.is_materialized());
    let on_disk = lines(&path);
    let types: Vec<&str> = on_disk
        .iter()
        .map(|v| v["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        [
            "session",
            "session_info",
            "thinking_level_change",
            "message"
        ]
    );
    assert_eq!(on_disk[0], store.header().to_json());
    assert_eq!(on_disk[2]["parentId"], on_disk[1]["id"]);
    assert_eq!(on_disk[3]["parentId"], on_disk[2]["id"]);
    store.append(assistant("ok", 9), &c).unwrap();
    assert_eq!(lines(&path).len(), 5);
}

#[test]
fn in_memory_never_writes() {
    let c = clock();
    let mut store = Store::in_memory(header(&c));
    store.append(user("a"), &c).unwrap();
    store.sync().unwrap();
    assert_eq!(store.path(), None);
    assert!(!store.is_materialized());
    assert_eq!(store.context(), vec![Message::user("a", 1_796_006_400_500)]);
}

#[test]
fn torn_last_line_is_skipped_and_the_next_append_stands_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = fixture(&dir, "torn.jsonl", TORN);
    let c = clock();
    let (mut store, warnings) = Store::open(&path).unwrap();
    assert_eq!(warnings.len(), 1);
    let want = format!("skipped torn line 7 of {}: ", path.display());
    assert!(warnings[0].starts_with(&want), "{}", warnings[0]);
    assert_eq!(store.entries().len(), 5);
    assert_eq!(store.leaf_id(), Some("ca620c5e"));
    let id = store.append(assistant("again", 7), &c).unwrap().id.clone();
    drop(store);
    let text = fs::read_to_string(&path).unwrap();
    assert!(text.ends_with("}\n"));
    let last = text.lines().last().unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(last).unwrap()["id"],
        id.as_str()
    );
    let (back, warnings) = Store::open(&path).unwrap();
    assert_eq!(warnings.len(), 1);
    assert!(
        warnings[0].starts_with("skipped malformed line 7 of "),
        "{warnings:?}"
    );
    assert_eq!(back.entries().len(), 6);
    assert_eq!(back.leaf_id(), Some(id.as_str()));
    assert_eq!(back.entries()[5].parent_id.as_deref(), Some("ca620c5e"));
    assert_eq!(back.context().len(), 2);
}

#[test]
fn missing_final_newline_on_a_whole_line_is_no_loss() {
    let dir = tempfile::tempdir().unwrap();
    let path = fixture(&dir, "s.jsonl", VALID.trim_end());
    let (mut store, warnings) = Store::open(&path).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(store.entries().len(), 9);
    store.append(user("more"), &clock()).unwrap();
    drop(store);
    let (back, warnings) = Store::open(&path).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(back.entries().len(), 10);
}

#[test]
fn valid_pi_fixture_loads() {
    let dir = tempfile::tempdir().unwrap();
    let path = fixture(&dir, "valid.jsonl", VALID);
    let (store, warnings) = Store::open(&path).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(store.header().id, "01a22a52-7c1d-7a3e-9f10-3b5c2d4e6f70");
    assert_eq!(store.header().cwd, "/home/u/proj");
    assert_eq!(store.entries().len(), 9);
    assert_eq!(store.leaf_id(), Some("9c0d1e2f"));
    assert!(matches!(store.entries()[3].data, EntryData::RawMessage(_)));
    assert_eq!(
        store.entries()[1].data,
        EntryData::ModelChange {
            provider: "mock".into(),
            model_id: "mock-1".into()
        }
    );
    let roles: Vec<&str> = store
        .context()
        .iter()
        .map(|m| match m {
            Message::User(_) => "user",
            Message::Assistant(_) => "assistant",
            Message::ToolResult(_) => "toolResult",
        })
        .collect();
    assert_eq!(roles, ["user", "assistant", "toolResult", "assistant"]);
}

#[test]
fn unknown_types_and_roles_survive_load_and_fork() {
    let dir = tempfile::tempdir().unwrap();
    let path = fixture(&dir, "unknown.jsonl", UNKNOWN);
    let (store, warnings) = Store::open(&path).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    let originals: Vec<Value> = UNKNOWN
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let kept = [0, 2, 3, 4]; // model_change, bashExecution message, custom, future_thing
    assert!(matches!(store.entries()[2].data, EntryData::RawMessage(_)));
    assert!(matches!(store.entries()[3].data, EntryData::Other(_)));
    assert!(matches!(store.entries()[4].data, EntryData::Other(_)));
    for i in kept {
        assert_eq!(
            store.entries()[i].to_json().unwrap(),
            originals[i],
            "entry {i}"
        );
        let line = store.entries()[i].to_line().unwrap();
        let orig = UNKNOWN.lines().nth(i + 1).unwrap();
        assert_eq!(line.trim_end(), orig, "byte-identical line {i}");
    }
    // The user's shell command reaches the model as a user message, as in pi.
    let context = store.context();
    assert_eq!(context.len(), 3);
    assert!(
        matches!(&context[1], Message::User(u) if crate::kernel::message::user_text(u).starts_with("Ran `"))
    );
    let c = clock();
    let fork_path = dir.path().join("fork.jsonl");
    let mut h = header(&c);
    h.parent_session = Some(path.display().to_string());
    let fork = store.fork_to(fork_path.clone(), h.clone()).unwrap();
    drop(fork);
    let written = lines(&fork_path);
    assert_eq!(written[0], h.to_json());
    assert_eq!(written[0]["parentSession"], path.display().to_string());
    for i in kept {
        assert_eq!(written[i + 1], originals[i]);
    }
}

/// A repeated id stands for its later entry, also for children written before it (pi's map of
/// ids): branches are walked through the parents looked up once all entries are read.
#[test]
fn a_repeated_id_means_the_later_entry_for_every_child() {
    let dir = tempfile::tempdir().unwrap();
    let head = r#"{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/"}"#;
    let label = |id: &str, parent: &str, ts: &str| {
        let parent = if parent.is_empty() {
            Value::Null
        } else {
            parent.into()
        };
        serde_json::json!({"type": "label", "id": id, "parentId": parent, "timestamp": ts,
                           "targetId": "x"})
        .to_string()
    };
    let text = [
        head.to_string(),
        label("00000001", "", "first"),
        label("00000002", "00000001", "child"),
        label("00000001", "", "again"),
        label("00000003", "00000001", "grandchild"),
    ]
    .join("\n");
    let path = fixture(&dir, "dup.jsonl", &text);
    let (mut store, warnings) = Store::open(&path).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    let times = |store: &Store| -> Vec<String> {
        store.branch().iter().map(|e| e.timestamp.clone()).collect()
    };
    assert_eq!(times(&store), ["again", "grandchild"]);
    store.set_leaf(Some("00000002")).unwrap();
    assert_eq!(times(&store), ["again", "child"]);
    // Appended entries link to the leaf as well.
    store.append(user("hi"), &clock()).unwrap();
    assert_eq!(times(&store)[..2], ["again", "child"]);
}

#[test]
fn a_first_line_that_is_not_a_header_is_invalid() {
    let dir = tempfile::tempdir().unwrap();
    let path = fixture(&dir, "no-header.jsonl", NO_HEADER);
    let err = Store::open(&path).unwrap_err();
    assert_eq!(err.kind, SessionErrorKind::Invalid);
    assert!(
        err.message.contains("line 1 is not a session header"),
        "{err}"
    );
    assert!(err.message.contains("no-header.jsonl"), "{err}");
    let empty = fixture(&dir, "empty.jsonl", "");
    assert_eq!(
        Store::open(&empty).unwrap_err().kind,
        SessionErrorKind::Invalid
    );
    let missing = Store::open(&dir.path().join("nope.jsonl")).unwrap_err();
    assert_eq!(missing.kind, SessionErrorKind::NotFound);
}

#[test]
fn a_second_open_is_locked_out() {
    let dir = tempfile::tempdir().unwrap();
    let path = fixture(&dir, "valid.jsonl", VALID);
    let (first, _) = Store::open(&path).unwrap();
    let err = Store::open(&path).unwrap_err();
    assert_eq!(err.kind, SessionErrorKind::Locked);
    let want = format!(
        "session {} is in use by another keel process",
        path.display()
    );
    assert_eq!(err.message, want);
    drop(first);
    assert!(Store::open(&path).is_ok());
    let c = clock();
    let fresh = dir.path().join("fresh.jsonl");
    let mut store = Store::new_file(fresh.clone(), header(&c));
    store.append(user("x"), &c).unwrap();
    assert_eq!(
        Store::open(&fresh).unwrap_err().kind,
        SessionErrorKind::Locked
    );
}

#[test]
fn fork_keeps_ids_of_the_current_branch_only() {
    let dir = tempfile::tempdir().unwrap();
    let c = clock();
    let mut store = Store::in_memory(header(&c));
    let a = store.append(user("a"), &c).unwrap().id.clone();
    let b = store.append(assistant("b", 2), &c).unwrap().id.clone();
    store.append(user("abandoned"), &c).unwrap();
    store.set_leaf(Some(&b)).unwrap();
    let d = store.append(user("d"), &c).unwrap().id.clone();
    assert!(store.set_leaf(Some("ffffffff")).is_err());
    let path = dir.path().join("f/fork.jsonl");
    let mut h = header(&c);
    h.parent_session = Some("/src/session.jsonl".into());
    let fork = store.fork_to(path.clone(), h.clone()).unwrap();
    assert!(path.exists());
    assert_eq!(
        Store::open(&path).unwrap_err().kind,
        SessionErrorKind::Locked
    );
    drop(fork);
    let (back, warnings) = Store::open(&path).unwrap();
    assert!(warnings.is_empty());
    let ids: Vec<&str> = back.entries().iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids, [a.as_str(), b.as_str(), d.as_str()]);
    assert_eq!(back.header(), &h);
    assert_eq!(back.context(), store.context());
}

/// The model context shares the store's messages instead of copying them: a long session is
/// held once, not once in the store and again in the agent's history and each request.
#[test]
fn context_shares_the_stored_messages() {
    let dir = tempfile::tempdir().unwrap();
    let path = fixture(&dir, "valid.jsonl", VALID);
    let (store, _) = Store::open(&path).unwrap();
    let context = store.context_entries();
    assert_eq!(context.len(), 4);
    for (id, message) in &context {
        let EntryData::Message(stored) = &store.entry(id).unwrap().data else {
            panic!("entry {id} is not a message");
        };
        let shared = match (stored, message) {
            (Message::User(a), Message::User(b)) => std::sync::Arc::ptr_eq(a, b),
            (Message::Assistant(a), Message::Assistant(b)) => std::sync::Arc::ptr_eq(a, b),
            (Message::ToolResult(a), Message::ToolResult(b)) => std::sync::Arc::ptr_eq(a, b),
            _ => false,
        };
        assert!(shared, "the context copied entry {id}");
    }
}

#[test]
fn context_starts_at_the_last_compaction() {
    let c = clock();
    let mut store = Store::in_memory(header(&c));
    store.append(user("old"), &c).unwrap();
    store.append(assistant("old answer", 1), &c).unwrap();
    let kept = store.append(user("kept"), &c).unwrap().id.clone();
    store.append(assistant("kept answer", 2), &c).unwrap();
    let compaction = EntryData::Compaction {
        summary: "did things".into(),
        first_kept_entry_id: kept,
        tokens_before: 1234,
        details: None,
    };
    let ts = store.append(compaction, &c).unwrap().timestamp.clone();
    store.append(user("after"), &c).unwrap();
    let from_id = store.entries()[0].id.clone();
    let branch = EntryData::BranchSummary {
        from_id,
        summary: "tried X".into(),
    };
    let bts = store.append(branch, &c).unwrap().timestamp.clone();
    let custom =
        serde_json::json!({"type": "custom_message", "customType": "e", "content": "note"});
    let cts = store
        .append(EntryData::Other(custom), &c)
        .unwrap()
        .timestamp
        .clone();
    let EntryData::Message(kept_answer) = store.entries()[3].data.clone() else {
        panic!("entry 3 is the kept answer");
    };
    let summary = "The conversation history before this point was compacted into the \
                   following summary:\n\n<summary>\ndid things\n</summary>";
    let branch = "The following is a summary of a branch that this conversation came \
                  back from:\n\n<summary>\ntried X</summary>";
    let want = vec![
        Message::user(summary, parse_iso(&ts).unwrap()),
        Message::user("kept", 1_796_006_400_500),
        kept_answer,
        Message::user("after", 1_796_006_400_500),
        Message::user(branch, parse_iso(&bts).unwrap()),
        Message::user("note", parse_iso(&cts).unwrap()),
    ];
    assert_eq!(store.context(), want);
}

#[test]
fn colliding_ids_are_redrawn() {
    let (c1, c2) = (clock(), clock());
    let mut store = Store::in_memory(header(&Clock::new(None, Some(99))));
    let first = store.append(user("a"), &c1).unwrap().id.clone();
    let second = store.append(user("b"), &c2).unwrap().id.clone();
    let fresh = clock();
    assert_eq!(fresh.entry_id(), first);
    assert_eq!(fresh.entry_id(), second, "c2 drew `first` again and redrew");
    assert_eq!(second.len(), 8);
    assert!(second.chars().all(|ch| ch.is_ascii_hexdigit()));
}

fn dir_syncs() -> usize {
    private::DIR_SYNCS.with(|n| n.get())
}

#[test]
fn a_new_session_file_is_synced_with_its_directory() {
    // A power cut right after creating a file can lose its directory entry: sync the dir.
    let dir = tempfile::tempdir().unwrap();
    let c = clock();
    let before = dir_syncs();
    let mut store = Store::new_file(dir.path().join("a/s.jsonl"), header(&c));
    store.append(user("go"), &c).unwrap();
    assert_eq!(
        dir_syncs(),
        before + 1,
        "lazy creation syncs the directory once"
    );
    store.append(assistant("ok", 1), &c).unwrap();
    assert_eq!(dir_syncs(), before + 1, "appends do not");
    let claimed = Store::create(dir.path().join("b/s.jsonl"), header(&c)).unwrap();
    assert_eq!(dir_syncs(), before + 2, "an eager claim syncs it too");
    assert!(claimed.is_materialized());
    let fork = store
        .fork_to(dir.path().join("c/f.jsonl"), header(&c))
        .unwrap();
    assert_eq!(dir_syncs(), before + 3, "and so does a fork");
    drop(fork);
}

#[test]
fn a_failed_write_keeps_the_entry_and_retries_it() {
    // Nothing is lost on a transient failure: the entry stays and is written next time.
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("blocked");
    fs::write(&blocker, "not a directory").unwrap();
    let c = clock();
    let path = blocker.join("s.jsonl");
    let mut store = Store::new_file(path.clone(), header(&c));
    let err = store.append(user("first"), &c).unwrap_err();
    assert_eq!(err.kind, SessionErrorKind::Io);
    assert!(err.message.contains("blocked/s.jsonl"), "{err}");
    assert!(store.has_unsaved());
    assert_eq!(store.entries().len(), 1, "kept in memory");
    assert!(store.sync().is_err());
    fs::remove_file(&blocker).unwrap();
    store.append(user("second"), &c).unwrap();
    assert!(!store.has_unsaved());
    store.sync().unwrap();
    drop(store);
    let (back, warnings) = Store::open(&path).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    let texts: Vec<String> = back
        .context()
        .iter()
        .map(|m| match m {
            Message::User(u) => crate::kernel::message::user_text(u),
            _ => String::new(),
        })
        .collect();
    assert_eq!(texts, ["first", "second"]);
}
