//! The todo list and plan mode (`DESIGN.md` §17): `todo_write` → `todo_update` events, kept
//! in the session file and restored on resume; `--permission plan` refuses changing tools,
//! asks on `exit_plan_mode` over RPC (approve, approve and accept edits, reject), and ends a
//! print or JSON run with the plan as its answer.

use serde::Deserialize;
use serde_json::{json, Value};

use crate::common::rpc::Rpc;
use crate::common::support::{fixture, scripted_args, strs, Sandbox};

/// A `todo_update` line, read strictly.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TodoUpdate {
    #[serde(rename = "type")]
    kind: String,
    todos: Vec<Todo>,
}

#[derive(Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Todo {
    content: String,
    status: String,
    active_form: String,
}

fn todo(content: &str, status: &str, active: &str) -> Todo {
    Todo {
        content: content.into(),
        status: status.into(),
        active_form: active.into(),
    }
}

fn lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn todo_write_publishes_the_whole_list_as_todo_update_events() {
    let sb = Sandbox::new();
    let run = sb.scripted("--json", "todos.json", &["--no-session", "fix it"]);
    assert_eq!(run.code, 0, "{run}");
    let updates: Vec<TodoUpdate> = run
        .stdout
        .lines()
        .filter(|l| l.contains("\"type\":\"todo_update\""))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(updates.len(), 2, "{run}");
    assert!(updates.iter().all(|u| u.kind == "todo_update"));
    assert_eq!(
        updates[1].todos,
        [
            todo("Read the code", "completed", "Reading the code"),
            todo("Fix the bug", "in_progress", "Fixing the bug"),
            todo("Run the tests", "pending", "Running the tests"),
        ]
    );
    // The model reads the list back as the tool's result.
    let ends: Vec<Value> = lines(&run.stdout)
        .into_iter()
        .filter(|v| v["type"] == "tool_execution_end")
        .collect();
    assert_eq!(ends[0]["isError"], false, "{run}");
    let text = ends[1]["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("[x] Read the code"), "{text}");
    assert!(text.contains("[~] Fix the bug"), "{text}");
}

#[test]
fn a_bad_todo_list_is_a_tool_error_naming_the_field() {
    let sb = Sandbox::new();
    let script = json!({"turns": [
        {"chunks": [{"toolCall": {"id": "c1", "name": "todo_write", "arguments":
            {"todos": [{"content": "a", "status": "done", "activeForm": "b"}]}}}]},
        {"chunks": [{"text": "ok"}]},
    ]});
    let path = sb.home().join("bad.json");
    std::fs::write(&path, script.to_string()).unwrap();
    let p = path.display().to_string();
    let run = sb.run(&scripted_args(&["--json"], &p, &["--no-session", "go"]));
    assert_eq!(run.code, 0, "{run}");
    assert!(!run.stdout.contains("\"todo_update\""), "{run}");
    let end = lines(&run.stdout)
        .into_iter()
        .find(|v| v["type"] == "tool_execution_end")
        .unwrap();
    assert_eq!(end["isError"], true);
    let text = end["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("`todos[0].status` is `done`"), "{text}");
}

#[test]
fn a_resumed_session_has_its_todo_list_again() {
    let sb = Sandbox::new();
    let run = sb.scripted("--json", "todos.json", &["fix it"]);
    assert_eq!(run.code, 0, "{run}");
    let file = &sb.session_files()[0];
    let text = std::fs::read_to_string(file).unwrap();
    // A pi `custom` entry: pi skips it, keel reads it back.
    let entry: Value = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .rfind(|v| v["customType"] == "keel.todos")
        .unwrap();
    assert_eq!(entry["type"], "custom", "{entry}");
    assert_eq!(
        entry["data"]["todos"][1]["status"], "in_progress",
        "{entry}"
    );
    let mut rpc = Rpc::start(
        &sb,
        &scripted_args(&[], &fixture("hello.json"), &["--continue"]),
    );
    let state = rpc.call(json!({"id": "s", "type": "get_state"}));
    let todos: Vec<Todo> = serde_json::from_value(state["data"]["todos"].clone()).unwrap();
    assert_eq!(
        todos[1],
        todo("Fix the bug", "in_progress", "Fixing the bug")
    );
    assert_eq!(todos.len(), 3);
    let (_, stderr, code) = rpc.finish();
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn print_mode_in_plan_mode_refuses_the_write_and_ends_with_the_plan() {
    let sb = Sandbox::new();
    let run = sb.scripted(
        "-p",
        "plan.json",
        &["--no-session", "--permission", "plan", "add notes"],
    );
    assert_eq!(run.code, 0, "{run}");
    assert_eq!(run.stdout, "1. Add notes.txt\n2. Run the tests\n", "{run}");
    assert!(
        !sb.work().join("notes.txt").exists(),
        "the write was refused"
    );
}

#[test]
fn json_mode_in_plan_mode_tells_the_model_why_and_reports_the_plan_as_the_answer() {
    let sb = Sandbox::new();
    let run = sb.scripted(
        "--json",
        "plan.json",
        &["--no-session", "--permission", "plan", "add notes"],
    );
    assert_eq!(run.code, 0, "{run}");
    let all = lines(&run.stdout);
    let refused = all
        .iter()
        .find(|v| v["type"] == "tool_execution_end" && v["toolName"] == "write")
        .unwrap();
    assert_eq!(refused["isError"], true);
    let why = refused["result"]["content"][0]["text"].as_str().unwrap();
    assert!(why.contains("not allowed in plan mode"), "{why}");
    assert!(why.contains("exit_plan_mode"), "{why}");
    let result = all.last().unwrap();
    assert_eq!(result["type"], "result");
    assert_eq!(result["outcome"], "success", "{result}");
    assert_eq!(result["finalText"], "1. Add notes.txt\n2. Run the tests");
    assert!(!sb.work().join("notes.txt").exists());
}

/// An RPC run in plan mode, prompted; returns the plan dialog.
fn plan_rpc(sb: &Sandbox) -> (Rpc, Value) {
    let mut rpc = Rpc::start(
        sb,
        &scripted_args(
            &[],
            &fixture("plan.json"),
            &["--no-session", "--permission", "plan"],
        ),
    );
    rpc.send(&json!({"id": "p", "type": "prompt", "message": "add notes"}));
    let dialog = rpc.wait(&json!({"type": "extension_ui_request", "method": "confirm"}));
    assert_eq!(dialog["toolName"], "exit_plan_mode", "{dialog}");
    assert!(
        dialog["message"]
            .as_str()
            .unwrap()
            .contains("1. Add notes.txt"),
        "{dialog}"
    );
    (rpc, dialog)
}

#[test]
fn rpc_plan_mode_asks_on_exit_plan_mode_and_continues_after_approval() {
    let sb = Sandbox::new();
    let (mut rpc, dialog) = plan_rpc(&sb);
    assert!(!sb.work().join("notes.txt").exists());
    rpc.send(&json!({"type": "extension_ui_response", "id": dialog["id"], "confirmed": true, "value": "accept-edits"}));
    let changed = rpc.wait(&json!({"type": "permission_mode_changed"}));
    assert_eq!(changed["mode"], "accept-edits", "{changed}");
    rpc.wait(&json!({"type": "agent_settled"}));
    assert_eq!(
        std::fs::read_to_string(sb.work().join("notes.txt")).unwrap(),
        "done",
        "the run went on and the write ran without asking"
    );
    let mode = rpc.call(json!({"id": "m", "type": "get_permissions"}));
    assert_eq!(mode["data"]["mode"], "accept-edits", "{mode}");
    let (_, stderr, code) = rpc.finish();
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn rpc_plan_mode_stays_after_the_plan_is_rejected() {
    let sb = Sandbox::new();
    let (mut rpc, dialog) = plan_rpc(&sb);
    rpc.send(&json!({"type": "extension_ui_response", "id": dialog["id"], "confirmed": false}));
    rpc.wait(&json!({"type": "agent_settled"}));
    let (lines, stderr, code) = rpc.finish();
    assert_eq!(code, 0, "{stderr}");
    let ends: Vec<Value> = lines
        .iter()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["type"] == "tool_execution_end")
        .collect();
    let told = ends
        .iter()
        .find(|v| v["toolName"] == "exit_plan_mode")
        .unwrap();
    assert_eq!(told["isError"], true);
    let text = told["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("did not approve the plan"), "{text}");
    // Still in plan mode: the write after it is refused.
    let write = ends.iter().rfind(|v| v["toolName"] == "write").unwrap();
    assert_eq!(write["isError"], true, "{write}");
    assert!(!sb.work().join("notes.txt").exists());
    assert!(!lines.iter().any(|l| l.contains("permission_mode_changed")));
}

/// The list above the editor: the item in progress highlighted with its `activeForm`, done
/// items struck through, pending ones plain; plan mode in the status line.
#[test]
fn the_tui_draws_the_todo_list_above_the_editor() {
    use keel::kernel::event::EventPayload;
    use keel::kernel::tool::todo::{TodoItem, TodoStatus};
    let item = |content: &str, status, active: &str| TodoItem {
        content: content.into(),
        status,
        active_form: active.into(),
    };
    let mut f = crate::tui::Feed::new();
    f.view.permission = Some(keel::Permission::Plan);
    f.user("fix the bug");
    f.send(EventPayload::TodosUpdated {
        todos: vec![
            item("Read the code", TodoStatus::Completed, "Reading the code"),
            item("Fix the bug", TodoStatus::InProgress, "Fixing the bug"),
            item("Run the tests", TodoStatus::Pending, "Running the tests"),
        ],
    });
    let screen = f.screen(80, 16);
    crate::common::support::snap("tui_todo_list_80x16", &screen);
    assert!(screen.contains("Todos (1/3 done)"), "{screen}");
    assert!(screen.contains("▶ Fixing the bug…"), "{screen}");
    assert!(screen.contains("☐ Run the tests"), "{screen}");
    assert!(screen.contains("plan mode"), "{screen}");
    // The highlight: the item in progress is bold yellow, the done one struck through.
    let buffer = f.buffer(80, 16);
    let styled = |needle: &str| {
        let (x, y) = find(&buffer, needle);
        buffer[(x, y)].style()
    };
    let running = styled("Fixing");
    assert_eq!(running.fg, Some(ratatui::style::Color::Yellow));
    assert!(running
        .add_modifier
        .contains(ratatui::style::Modifier::BOLD));
    assert!(styled("Read the code")
        .add_modifier
        .contains(ratatui::style::Modifier::CROSSED_OUT));
    // A list with every item done is put away.
    f.send(EventPayload::TodosUpdated {
        todos: vec![item("Read the code", TodoStatus::Completed, "Reading")],
    });
    assert!(!f.screen(80, 16).contains("Todos ("));
}

/// Where `needle` starts in the buffer.
fn find(buffer: &ratatui::buffer::Buffer, needle: &str) -> (u16, u16) {
    let area = buffer.area;
    for y in 0..area.height {
        let row: String = (0..area.width).map(|x| buffer[(x, y)].symbol()).collect();
        if let Some(at) = row.find(needle) {
            return (row[..at].chars().count() as u16, y);
        }
    }
    panic!("{needle} not on screen");
}

/// `exit_plan_mode`'s dialog shows the plan and offers approve, approve and accept edits, and
/// keep planning; `e` answers "approve and accept edits".
#[test]
fn the_tui_plan_dialog_shows_the_plan_and_approves_with_accept_edits() {
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    use keel::kernel::event::{ApprovalDecision, EventPayload};
    let mut f = crate::tui::Feed::new();
    f.view.permission = Some(keel::Permission::Plan);
    f.user("add notes");
    let args = json!({"plan": "1. Add notes.txt\n2. Run the tests"});
    f.tool("call_plan", "exit_plan_mode", args.clone(), None);
    f.send(EventPayload::ApprovalRequested {
        call_id: "call_plan".into(),
        tool_name: "exit_plan_mode".into(),
        args,
        preview: None,
    });
    let screen = f.screen(80, 24);
    crate::common::support::snap("tui_plan_dialog_80x24", &screen);
    assert!(
        screen.contains("Approve this plan and leave plan mode?"),
        "{screen}"
    );
    assert!(screen.contains("1. Add notes.txt"), "{screen}");
    assert!(screen.contains("approve and accept edits"), "{screen}");
    assert!(!screen.contains("always allow"), "{screen}");
    let action = f
        .view
        .on_key(KeyEvent::new(KeyCode::Char('e'), KeyModifiers::NONE));
    assert_eq!(
        action,
        Some(keel::front::tui::view::Action::Approve {
            call_id: "call_plan".into(),
            decision: ApprovalDecision::AllowAcceptEdits,
        })
    );
}

/// `keel --mode acp` with `script`, initialized, with one session.
fn acp_session(sb: &Sandbox, script: &str) -> (Rpc, String) {
    let script = fixture(script);
    let mut a = Rpc::start_raw(sb, &scripted_args(&["--mode", "acp"], &script, &[]));
    crate::acp::init(&mut a);
    let session = crate::acp::new_session(&mut a, sb);
    (a, session)
}

#[test]
fn acp_clients_get_the_todo_list_as_plan_updates() {
    let sb = Sandbox::new();
    let (mut a, session) = acp_session(&sb, "todos.json");
    crate::acp::prompt(&mut a, "p1", &session, "fix it");
    let first = a.wait(&json!({"params": {"update": {"sessionUpdate": "plan"}}}));
    assert_eq!(first["params"]["sessionId"], session.as_str());
    let second = a.wait(&json!({"params": {"update": {"sessionUpdate": "plan"}}}));
    assert_eq!(
        second["params"]["update"]["entries"],
        json!([
            {"content": "Read the code", "priority": "medium", "status": "completed"},
            {"content": "Fix the bug", "priority": "medium", "status": "in_progress"},
            {"content": "Run the tests", "priority": "medium", "status": "pending"},
        ])
    );
    let done = a.wait(&json!({"id": "p1"}));
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    let (_, stderr, code) = a.finish();
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn acp_plan_mode_asks_to_approve_the_plan_and_switches_to_accept_edits() {
    let sb = Sandbox::new();
    let (mut a, session) = acp_session(&sb, "plan.json");
    let r = crate::acp::call(
        &mut a,
        "m",
        "session/set_mode",
        json!({"sessionId": session, "modeId": "plan"}),
    );
    assert!(r.get("error").is_none(), "{r}");
    crate::acp::prompt(&mut a, "p1", &session, "add notes");
    let req = a.wait(&json!({"method": "session/request_permission"}));
    assert_eq!(
        req["params"]["toolCall"]["toolCallId"], "call_plan",
        "{req}"
    );
    let options = strs(&req["params"]["options"], "optionId");
    assert_eq!(
        options,
        ["approve", "approve_accept_edits", "keep_planning"]
    );
    assert!(
        !sb.work().join("notes.txt").exists(),
        "the first write was refused"
    );
    let outcome = json!({"outcome": "selected", "optionId": "approve_accept_edits"});
    a.send(&json!({"jsonrpc": "2.0", "id": req["id"], "result": {"outcome": outcome}}));
    let mode = a.wait(&json!({"params": {"update": {"sessionUpdate": "current_mode_update"}}}));
    assert_eq!(mode["params"]["update"]["currentModeId"], "accept-edits");
    let done = a.wait(&json!({"id": "p1"}));
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    assert_eq!(
        std::fs::read_to_string(sb.work().join("notes.txt")).unwrap(),
        "done"
    );
    let (_, stderr, code) = a.finish();
    assert_eq!(code, 0, "{stderr}");
}
