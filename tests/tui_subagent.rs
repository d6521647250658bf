//! Subagents in the TUI (`DESIGN.md` §17): a running child is a cell under its `task` call
//! with its current step, drawn from the `tool_execution_update` details (snapshots at 80x24
//! and 40x12, next to a child that ended with its answer and usage line); in a real terminal
//! Ctrl+G opens the child's transcript read-only and Esc returns to the parent.

use keel::kernel::event::EventPayload;
use keel::kernel::tool::ToolOutput;
use serde_json::json;

use crate::common::pty::spawn;
use crate::common::support::Sandbox;
use crate::mcp::script;
use crate::tui::Feed;

const FIRST: &str = "0193a1d0-7c41-7000-8000-00000000c0de";
const SECOND: &str = "0193a1d1-1e2f-7000-8000-0000000000b2";

fn children() -> Feed {
    let mut f = Feed::new();
    f.user("Where is the config loaded, and are there tests?");
    let first = json!({"description": "find the config loader", "prompt": "Find it.",
        "subagent_type": "explore"});
    f.tool(
        "t1",
        "task",
        first,
        Some(
            ToolOutput::ok(format!(
                "The settings files are read in src/settings/file.rs.\n\n\
                 [explore subagent {FIRST}: 3 tool calls, 18234 tokens, 9.4 s]"
            ))
            .with_details(json!({"sessionId": FIRST, "agentType": "explore",
                "description": "find the config loader", "toolCount": 3,
                "usage": {"input": 18000, "output": 234, "cacheRead": 0, "cacheWrite": 0,
                    "totalTokens": 18234, "cost": {"input": 0.0, "output": 0.0,
                    "cacheRead": 0.0, "cacheWrite": 0.0, "total": 0.0}},
                "durationMs": 9400})),
        ),
    );
    let second = json!({"description": "find the tests", "prompt": "List the tests.",
        "subagent_type": "explore"});
    f.tool("t2", "task", second.clone(), None);
    f.send(EventPayload::ToolCallUpdated {
        call_id: "t2".into(),
        tool_name: "task".into(),
        args: second,
        partial: ToolOutput::ok(format!("explore subagent {SECOND}: grep")).with_details(
            json!({"sessionId": SECOND, "agentType": "explore", "description": "find the tests",
                "step": {"toolName": "grep", "args": {"pattern": "#\\[test\\]", "path": "tests"}},
                "toolCount": 2}),
        ),
    });
    f
}

#[test]
fn a_running_child_shows_its_current_step_under_its_task_call() {
    Feed::snap_both(children, "subagent_cells");
    let f = children();
    let latest = f.view.transcript.children.last().expect("a child was seen");
    assert_eq!(latest.session_id, SECOND);
}

/// keel in a real terminal on `script` (auto permission), once "look" got the parent's
/// answer ("Parent is done.").
fn looked(sb: &Sandbox, script: &str) -> crate::common::pty::Spawned {
    let keel = env!("CARGO_BIN_EXE_keel");
    let (mut s, child) = spawn(
        sb,
        &format!(
            "'{keel}' --provider scripted --script '{script}' --permission auto; echo KEEL_EXIT=$?"
        ),
    );
    s.wait_for("the editor", |t| t.contains("Ask anything"));
    s.send("look\r");
    s.wait_for("the parent's answer", |t| t.contains("Parent is done."));
    (s, child)
}

#[test]
fn ctrl_g_opens_the_childs_transcript_and_esc_returns_to_the_parent() {
    let sb = Sandbox::new();
    let script = script(
        &sb,
        json!([
            {"match": "^look", "chunks": [{"toolCall": {"id": "t1", "name": "task", "arguments":
                {"description": "peek around", "prompt": "CHILD lists the files", "subagent_type": "explore"}}}]},
            {"match": "^CHILD", "chunks": [{"toolCall": {"id": "l1", "name": "ls", "arguments": {}}}]},
            {"match": "^CHILD", "chunks": [{"text": "The child saw one script."}]},
            {"match": "^look", "chunks": [{"text": "Parent is done."}]}
        ]),
    );
    let (mut s, mut child) = looked(&sb, &script);
    s.send("\x07"); // Ctrl+G
    s.wait_for("the child's transcript", |t| {
        t.contains("explore subagent · peek around")
            && t.contains("CHILD lists the files")
            && t.contains("The child saw one script.")
    });
    assert!(!s.text().contains("Parent is done."), "{}", s.text());
    s.send("\x1b");
    s.wait_for("the parent again", |t| {
        t.contains("Parent is done.")
            && t.contains("Ask anything")
            && !t.contains("explore subagent · peek around")
    });
    s.quit("\x04", &mut child);
}

/// With two children, Ctrl+G opens the latest and says where it is; Ctrl+G in its transcript
/// shows the one before, and again the latest.
#[test]
fn ctrl_g_in_a_childs_transcript_shows_the_child_before_it() {
    let sb = Sandbox::new();
    let task = |id: &str, description: &str, prompt: &str| {
        json!({"match": "^look", "chunks": [{"toolCall": {"id": id, "name": "task", "arguments":
            {"description": description, "prompt": prompt, "subagent_type": "explore"}}}]})
    };
    let script = script(
        &sb,
        json!([
            task("t1", "first look", "CHILD1 reads"),
            {"match": "^CHILD1", "chunks": [{"text": "One was here."}]},
            task("t2", "second look", "CHILD2 reads"),
            {"match": "^CHILD2", "chunks": [{"text": "Two was here."}]},
            {"match": "^look", "chunks": [{"text": "Parent is done."}]}
        ]),
    );
    let (mut s, mut child) = looked(&sb, &script);
    s.send("\x07");
    s.wait_for("the latest child", |t| {
        t.contains("second look") && t.contains("subagent 2/2") && t.contains("Two was here.")
    });
    s.send("\x07");
    s.wait_for("the child before it", |t| {
        t.contains("first look") && t.contains("subagent 1/2") && t.contains("One was here.")
    });
    assert!(!s.text().contains("Two was here."), "{}", s.text());
    s.send("\x07");
    s.wait_for("the latest again", |t| {
        t.contains("subagent 2/2") && t.contains("Two was here.")
    });
    s.send("\x1b");
    s.wait_for("the parent again", |t| {
        t.contains("Parent is done.") && !t.contains("subagent 2/2")
    });
    s.quit("\x04", &mut child);
}

#[test]
fn a_childs_approval_names_the_subagent_and_goes_away_once_resolved_elsewhere() {
    use keel::wire::events::WireEvent;
    let mut f = children();
    let id = format!("{SECOND}/b1");
    let request = json!({"type": "extension_ui_request", "id": id, "method": "confirm",
        "title": "Allow tool `bash`?", "message": "cargo test", "timeout": 60000,
        "toolName": "bash", "args": {"command": "cargo test"},
        "subagent": {"sessionId": SECOND, "agentType": "explore", "description": "find the tests",
            "toolCallId": "t2", "dialogId": "b1"}});
    let now = f.view.now_ms;
    let shown = |f: &mut Feed, line: &serde_json::Value| {
        let event = WireEvent::parse(&line.to_string()).expect("a wire event");
        assert!(f.view.on_event(&event, now).is_empty());
        f.screen(80, 24)
    };
    let asking = shown(&mut f, &request);
    assert!(
        asking.contains("explore subagent (find the tests) asks:") && asking.contains("cargo test"),
        "{asking}"
    );
    // The child's own client answered: the parent's question is taken down.
    let after = shown(&mut f, &json!({"type": "dialog_resolved", "id": id}));
    assert!(!after.contains("asks:"), "{after}");
    assert!(
        after.contains("Enter steers"),
        "the editor is back: {after}"
    );
}
