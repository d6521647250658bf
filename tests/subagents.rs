//! Subagents end to end (`DESIGN.md` §17; the real binary, the scripted provider, real bwrap):
//! a parent that delegates to `explore` (the child cannot write and the model sees why; its
//! answer is the parent's tool result; its file names the parent's), two `task` calls that run
//! at once, a custom agent definition offered to the model and obeyed, an abort that reaches
//! the child, and a PreToolUse hook inside the child that sees `agent_type`.

use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::support::{read_until, scripted_args, signal, Sandbox};

use crate::common::support::write_text as write;

fn json_run(sb: &Sandbox, script: &str, prompt: &str) -> Vec<Value> {
    let run = sb.run(&scripted_args(&["--mode", "json"], script, &[prompt]));
    assert_eq!(run.code, 0, "{run}");
    run.stdout_lines()
}

fn of_type<'a>(lines: &'a [Value], kind: &str) -> Vec<&'a Value> {
    lines.iter().filter(|l| l["type"] == kind).collect()
}

/// The entries of a session file (its header first).
fn entries(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The session file whose header names a parent, and the other one.
fn child_and_parent(sb: &Sandbox) -> (PathBuf, PathBuf) {
    let files = sb.session_files();
    assert_eq!(files.len(), 2, "{files:?}");
    let is_child = |p: &PathBuf| entries(p)[0].get("parentSession").is_some();
    let child = files
        .iter()
        .find(|p| is_child(p))
        .expect("a child file")
        .clone();
    let parent = files
        .iter()
        .find(|p| !is_child(p))
        .expect("a parent file")
        .clone();
    (child, parent)
}

#[test]
fn a_parent_delegates_to_explore_which_cannot_write_and_its_answer_is_the_tool_result() {
    let sb = Sandbox::new();
    let s = sb.script(
        json!([
            {"match": "^survey", "chunks": [{"toolCall": {"id": "t1", "name": "task", "arguments":
                {"description": "look around", "prompt": "EXPLORE and write a note", "subagent_type": "explore"}}}]},
            {"match": "^EXPLORE", "chunks": [{"toolCall": {"id": "w1", "name": "write", "arguments":
                {"path": "note.txt", "content": "x"}}}]},
            {"match": "^EXPLORE", "chunks": [{"text": "child answer: writing is not possible here"}]},
            {"match": "^survey", "chunks": [{"text": "parent done"}]}
        ]),
    );
    let lines = json_run(&sb, &s, "survey the project");
    let result = of_type(&lines, "result");
    assert_eq!(result[0]["outcome"], "success");
    assert_eq!(result[0]["finalText"], "parent done");
    assert!(!sb.work().join("note.txt").exists(), "the explorer wrote");
    let end = of_type(&lines, "tool_execution_end")
        .into_iter()
        .find(|l| l["toolCallId"] == "t1")
        .expect("the task call ended");
    assert_eq!(end["isError"], false, "{end}");
    let text = end["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("child answer: writing is not possible here\n\n[explore subagent "),
        "{text}"
    );
    assert!(text.contains(": 1 tool call,"), "{text}");
    // The parent's stream carried the child's step: the tool it ran and its session id.
    let (child, parent) = child_and_parent(&sb);
    let child_id = entries(&child)[0]["id"].as_str().unwrap().to_string();
    let steps: Vec<&Value> = of_type(&lines, "tool_execution_update")
        .into_iter()
        .filter(|l| l["toolCallId"] == "t1")
        .filter_map(|l| l["partialResult"]["details"].get("step").map(|_| l))
        .collect();
    assert_eq!(steps.len(), 1, "{lines:#?}");
    let details = &steps[0]["partialResult"]["details"];
    assert_eq!(details["sessionId"], child_id.as_str());
    assert_eq!(details["agentType"], "explore");
    assert_eq!(details["step"]["toolName"], "write");
    // The child's own file: its parent, its name, and the refusal its model saw.
    let child_entries = entries(&child);
    assert_eq!(
        child_entries[0]["parentSession"],
        parent.display().to_string()
    );
    assert!(child_entries
        .iter()
        .any(|e| e["type"] == "session_info" && e["name"] == "task: look around"));
    let refused = child_entries.iter().any(|e| {
        e["message"]["role"] == "toolResult"
            && e["message"]["isError"] == true
            && e["message"]["content"][0]["text"]
                .as_str()
                .is_some_and(|t| t.contains("Tool `write` is not available"))
    });
    assert!(refused, "{child_entries:#?}");
}

#[test]
fn two_task_calls_of_one_message_run_at_once() {
    let sb = Sandbox::new();
    let s = sb.script(
        json!([
            {"match": "^two", "chunks": [
                {"toolCall": {"id": "t1", "name": "task", "arguments": {"description": "a", "prompt": "CHILD-A"}}},
                {"toolCall": {"id": "t2", "name": "task", "arguments": {"description": "b", "prompt": "CHILD-B"}}}]},
            {"match": "^CHILD-A", "chunks": [{"toolCall": {"id": "b1", "name": "bash", "arguments": {"command": "sleep 1; echo A"}}}]},
            {"match": "^CHILD-B", "chunks": [{"toolCall": {"id": "b2", "name": "bash", "arguments": {"command": "sleep 1; echo B"}}}]},
            {"match": "^CHILD-A", "chunks": [{"text": "A done"}]},
            {"match": "^CHILD-B", "chunks": [{"text": "B done"}]},
            {"match": "^two", "chunks": [{"text": "both done"}]}
        ]),
    );
    // Real time: the durations the events report are measured, not the test clock's.
    let out = sb
        .cmd(&scripted_args(&["--mode", "json"], &s, &["two things"]))
        .env_remove("KEEL_TEST_CLOCK")
        .output()
        .unwrap();
    let run = sb.finish(out);
    assert_eq!(run.code, 0, "{run}");
    let lines = run.stdout_lines();
    let ends = of_type(&lines, "tool_execution_end");
    let task = |id: &str| *ends.iter().find(|l| l["toolCallId"] == id).unwrap();
    for (id, answer) in [("t1", "A done"), ("t2", "B done")] {
        let end = task(id);
        assert_eq!(end["isError"], false, "{end}");
        let text = end["result"]["content"][0]["text"].as_str().unwrap();
        assert!(text.starts_with(answer), "{text}");
        // Each child really waited its second.
        assert!(end["durationMs"].as_u64().unwrap() >= 1000, "{end}");
    }
    let batch = of_type(&lines, "turn_end")
        .into_iter()
        .find(|l| l["toolResults"].as_array().is_some_and(|r| r.len() == 2))
        .expect("the turn with both calls");
    assert_eq!(
        batch["toolResults"][0]["toolCallId"], "t1",
        "results keep the call order"
    );
    let result = &of_type(&lines, "result")[0];
    let ms = result["durationMs"].as_u64().unwrap();
    assert!(
        ms < 1800,
        "two 1 s children took {ms} ms: they ran one after the other"
    );
}

#[test]
fn a_custom_agent_definition_is_offered_to_the_model_and_its_tools_are_obeyed() {
    let sb = Sandbox::new();
    // A file the lister could read if `read` were its tool.
    write(&sb.work().join("x"), "readable\n");
    write(
        &sb.home().join("agents/lister.md"),
        "---\nname: lister\ndescription: Lists directories and nothing else.\ntools: LS\nmodel: inherit\n---\nYou only list.\n",
    );
    let s = sb.script(
        json!([
            {"match": "^list", "chunks": [{"toolCall": {"id": "t1", "name": "task", "arguments":
                {"description": "list it", "prompt": "LISTER go", "subagent_type": "lister"}}}]},
            {"match": "^LISTER", "chunks": [{"toolCall": {"id": "r1", "name": "read", "arguments": {"path": "x"}}}]},
            {"match": "^LISTER", "chunks": [{"toolCall": {"id": "l1", "name": "ls", "arguments": {}}}]},
            {"match": "^LISTER", "chunks": [{"text": "listed"}]},
            {"match": "^list", "chunks": [{"text": "ok"}]}
        ]),
    );
    // `keel agents list --json` shows the definition with its origin.
    let listed = sb.run(&["agents", "list", "--json"]);
    assert_eq!(listed.code, 0, "{listed}");
    let agents: Vec<Value> = serde_json::from_str(&listed.stdout).unwrap();
    let lister = agents
        .iter()
        .find(|a| a["name"] == "lister")
        .expect("listed");
    assert_eq!(lister["origin"], "user");
    assert_eq!(lister["tools"], json!(["ls"]));
    let lines = json_run(&sb, &s, "list the files");
    let (child, _) = child_and_parent(&sb);
    let child_entries = entries(&child);
    let results: Vec<&Value> = child_entries
        .iter()
        .filter(|e| e["message"]["role"] == "toolResult")
        .collect();
    assert_eq!(results.len(), 2, "{child_entries:#?}");
    assert_eq!(
        results[0]["message"]["isError"], true,
        "read is not the lister's"
    );
    let refusal = results[0]["message"]["content"][0]["text"]
        .as_str()
        .unwrap();
    assert!(
        refusal.contains("Tool `read` is not available"),
        "{refusal}"
    );
    assert_eq!(results[1]["message"]["isError"], false, "ls is");
    let end = of_type(&lines, "tool_execution_end")
        .into_iter()
        .find(|l| l["toolCallId"] == "t1")
        .unwrap();
    assert!(end["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .starts_with("listed"));
}

#[test]
fn a_pre_tool_use_hook_fires_inside_the_child_with_its_agent_type() {
    let sb = Sandbox::new();
    // In the workspace: hooks run in the session's sandbox, which writes nowhere else.
    let seen = sb.work().join("seen.jsonl");
    let hook = format!("cat >> {}; echo >> {}", seen.display(), seen.display());
    write(
        &sb.home().join("settings.json"),
        &json!({"hooks": {
            "PreToolUse": [{"matcher": "LS", "hooks": [{"type": "command", "command": hook}]}],
            "SubagentStart": [{"matcher": "explore", "hooks": [{"type": "command", "command": hook}]}],
            "SubagentStop": [{"hooks": [{"type": "command", "command": hook}]}]
        }})
        .to_string(),
    );
    let s = sb.script(json!([
        {"match": "^look", "chunks": [{"toolCall": {"id": "t1", "name": "task", "arguments":
            {"description": "ls", "prompt": "CHILD ls", "subagent_type": "explore"}}}]},
        {"match": "^CHILD", "chunks": [{"toolCall": {"id": "l1", "name": "ls", "arguments": {}}}]},
        {"match": "^CHILD", "chunks": [{"text": "seen"}]},
        {"match": "^look", "chunks": [{"text": "ok"}]}
    ]));
    json_run(&sb, &s, "look");
    let fired: Vec<Value> = std::fs::read_to_string(&seen)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let (child, parent) = child_and_parent(&sb);
    let child_id = entries(&child)[0]["id"].clone();
    let events: Vec<&str> = fired
        .iter()
        .map(|f| f["hook_event_name"].as_str().unwrap())
        .collect();
    assert_eq!(
        events,
        ["SubagentStart", "PreToolUse", "SubagentStop"],
        "{fired:#?}"
    );
    let pre = &fired[1];
    assert_eq!(pre["tool_name"], "LS");
    assert_eq!(pre["agent_type"], "explore");
    assert_eq!(pre["agent_id"], child_id);
    assert_eq!(pre["session_id"], child_id);
    assert_eq!(fired[0]["agent_id"], child_id);
    assert_eq!(fired[2]["last_assistant_message"], "seen");
    // The child's conversation as Claude's transcript, current when the parent's SubagentStop
    // hook reads it: a copy beside the parent's (the parent's sandbox reads its own directory,
    // not the child's), as `subagents/agent-<id>.jsonl`.
    let claude = parent.with_extension("output").join(format!(
        "subagents/agent-{}.jsonl",
        child_id.as_str().unwrap()
    ));
    assert_eq!(
        fired[2]["agent_transcript_path"],
        claude.display().to_string()
    );
    let lines: Vec<Value> = std::fs::read_to_string(&claude)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let last = lines.iter().rev().find(|l| l["type"] == "assistant");
    assert_eq!(
        last.map(|l| &l["message"]["content"][0]["text"]),
        Some(&json!("seen")),
        "{lines:#?}"
    );
    assert_eq!(lines[0]["isSidechain"], true);
}

#[test]
fn aborting_the_parent_aborts_its_child() {
    let sb = Sandbox::new();
    let s = sb.script(
        json!([
            {"match": "^wait", "chunks": [{"toolCall": {"id": "t1", "name": "task", "arguments":
                {"description": "long", "prompt": "CHILD sleeps"}}}]},
            {"match": "^CHILD", "chunks": [{"toolCall": {"id": "b1", "name": "bash", "arguments": {"command": "sleep 60"}}}]}
        ]),
    );
    let started = Instant::now();
    let mut child = sb.spawn(&scripted_args(&["--mode", "json"], &s, &["wait for it"]));
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    // The parent's stream shows the child running its command: then the parent is stopped.
    let mut seen = read_until(&mut stdout, r#""toolName":"bash""#).concat();
    signal(&child, nix::sys::signal::Signal::SIGINT);
    stdout.read_to_string(&mut seen).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{seen}");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the child's sleep 60 was not stopped"
    );
    let last: Value = serde_json::from_str(seen.lines().last().unwrap()).unwrap();
    assert_eq!(last["outcome"], "interrupted");
    // The child's run was aborted and its file says so.
    let (child_file, _) = child_and_parent(&sb);
    let aborted = entries(&child_file).iter().any(|e| {
        e["message"]["role"] == "toolResult"
            && e["message"]["content"][0]["text"]
                .as_str()
                .is_some_and(|t| t.contains("abort"))
    });
    assert!(aborted, "{:#?}", entries(&child_file));
}

/// The result text of the parent's `task` call `call` among daemon notifications.
pub fn task_result(notes: &[Value], call: &str) -> String {
    let end = notes
        .iter()
        .find(|v| {
            v["params"]["event"]["type"] == "tool_execution_end"
                && v["params"]["event"]["toolCallId"] == call
        })
        .expect("the task call ended");
    end["params"]["event"]["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_string()
}

/// A `session/event` of the parent's stream: a step of its child running `bash`.
pub(crate) fn child_runs_bash(v: &Value) -> bool {
    v["method"] == "session/event"
        && v["params"]["event"]["type"] == "tool_execution_update"
        && v["params"]["event"]["partialResult"]["details"]["step"]["toolName"] == "bash"
}

/// A daemon whose session (the `parent`, attached by `c`) was prompted `go` and started a
/// `task` child that runs `cat FIFO`, blocked until the test writes the FIFO; returns them and
/// the notes up to the child's `bash` step.
pub(crate) fn parent_with_a_waiting_child(
    sb: &Sandbox,
) -> (
    crate::common::daemon::Daemon,
    crate::common::daemon::Conn,
    String,
    std::path::PathBuf,
    Vec<Value>,
) {
    use crate::common::daemon::{open_script, Daemon};
    let fifo = sb.work().join("signal.fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let s = sb.script(json!([
        {"match": "^go", "chunks": [{"toolCall": {"id": "t1", "name": "task", "arguments":
            {"description": "wait for it", "prompt": "CHILD waits"}}}]},
        {"match": "^CHILD", "chunks": [{"toolCall": {"id": "b1", "name": "bash", "arguments":
            {"command": format!("cat {}", fifo.display())}}}]},
        {"match": "^CHILD", "chunks": [{"text": "child done"}]},
        {"match": "^go", "chunks": [{"text": "parent done"}]}
    ]));
    let d = Daemon::start(sb, &[]);
    let mut c = d.connect();
    c.hello(true);
    let parent = open_script(&mut c, sb, &s, &[]);
    c.call("session/attach", json!({"sessionId": parent}));
    let r = c.call("prompt", json!({"sessionId": parent, "message": "go"}));
    assert_eq!(r["result"]["disposition"], "started", "{r}");
    let seen = c.notes_until(child_runs_bash);
    (d, c, parent, fifo, seen)
}

#[test]
fn in_the_daemon_a_running_child_is_listed_under_its_parent_and_can_be_attached() {
    use crate::common::daemon::is_event;
    let sb = Sandbox::new();
    let (d, mut c, parent, fifo, seen) = parent_with_a_waiting_child(&sb);
    let child = seen.last().unwrap()["params"]["event"]["partialResult"]["details"]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    // `keel ps`: the child right under its parent, running, and `--json` names the parent.
    let socket = d.socket.display().to_string();
    let ps = sb.run(&["ps", "--socket", &socket]);
    assert_eq!(ps.code, 0, "{ps}");
    let rows: Vec<&str> = ps.stdout.lines().collect();
    assert!(
        rows[0].starts_with("SESSION") && rows[0].contains("PARENT"),
        "{ps}"
    );
    assert_eq!(rows.len(), 3, "{ps}");
    assert!(rows[1].starts_with(&parent), "{ps}");
    let cells: Vec<&str> = rows[2].split_whitespace().collect();
    assert_eq!(
        cells[..3],
        [child.as_str(), parent.as_str(), "running"],
        "{ps}"
    );
    assert!(rows[2].contains("task: wait for it"), "{ps}");
    let json_ps = sb.run(&["ps", "--json", "--socket", &socket]);
    let listed: Vec<Value> = json_ps.stdout_lines();
    let entry = listed
        .iter()
        .find(|s| s["sessionId"] == child.as_str())
        .unwrap();
    assert_eq!(entry["parentSessionId"], parent.as_str());
    // Attached to the child: its own stream, live.
    let mut w = d.client();
    let r = w.call("session/attach", json!({"sessionId": child}));
    assert!(r.get("result").is_some(), "{r}");
    // Its snapshot names what it was opened with: its own id and its agent definition.
    let spec = &r["result"]["snapshot"]["openSpec"];
    assert_eq!(spec["session"], json!({"how": "id", "id": child}), "{r}");
    assert_eq!(spec["agent"], "general", "{r}");
    std::fs::write(&fifo, "go\n").unwrap();
    let child_events = w.events_until("agent_settled");
    let texts: Vec<&Value> = child_events
        .iter()
        .filter(|(_, e)| e["type"] == "message_end")
        .map(|(_, e)| &e["message"])
        .collect();
    assert!(
        texts
            .iter()
            .any(|m| m["content"][0]["text"] == "child done"),
        "{child_events:#?}"
    );
    // The parent goes on with the child's answer as its tool result.
    let rest = c.notes_until(is_event("agent_settled"));
    let text = task_result(&rest, "t1");
    assert!(text.starts_with("child done"), "{text}");
}

#[test]
fn a_subagent_stop_hook_that_blocks_keeps_the_child_working_with_its_reason() {
    let sb = Sandbox::new();
    // In the workspace: hooks run in the session's sandbox, which writes nowhere else.
    let seen = sb.work().join("seen.jsonl");
    // Blocks the first stop only (Claude's `stop_hook_active` says the child goes on already).
    let hook = format!(
        "input=$(cat); printf '%s\\n' \"$input\" >> {}; case \"$input\" in \
         *'\"stop_hook_active\":false'*) \
         echo '{{\"decision\":\"block\",\"reason\":\"CHILD also count the tests\"}}';; esac",
        seen.display()
    );
    write(
        &sb.home().join("settings.json"),
        &json!({"hooks": {
            "SubagentStop": [{"matcher": "explore", "hooks": [{"type": "command", "command": hook}]}]
        }})
        .to_string(),
    );
    let s = sb.script(json!([
        {"match": "^look", "chunks": [{"toolCall": {"id": "t1", "name": "task", "arguments":
            {"description": "look", "prompt": "CHILD look around", "subagent_type": "explore"}}}]},
        {"match": "^CHILD look", "chunks": [{"text": "first answer"}]},
        {"match": "^CHILD also", "chunks": [{"text": "second answer: 3 tests"}]},
        {"match": "^look", "chunks": [{"text": "ok"}]}
    ]));
    let lines = json_run(&sb, &s, "look");
    let end = of_type(&lines, "tool_execution_end")
        .into_iter()
        .find(|e| e["toolCallId"] == "t1")
        .expect("the task call ended");
    assert_eq!(end["isError"], false, "{end}");
    let text = end["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("second answer: 3 tests"), "{text}");
    // The child was told the reason, in its own session, after its first answer.
    let (child, _) = child_and_parent(&sb);
    let users: Vec<String> = entries(&child)
        .iter()
        .filter(|e| e["message"]["role"] == "user")
        .map(|e| {
            e["message"]["content"][0]["text"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(users, ["CHILD look around", "CHILD also count the tests"]);
    let fired: Vec<Value> = std::fs::read_to_string(&seen)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let active: Vec<&Value> = fired.iter().map(|f| &f["stop_hook_active"]).collect();
    assert_eq!(active, [&json!(false), &json!(true)], "{fired:#?}");
    assert_eq!(fired[1]["last_assistant_message"], "second answer: 3 tests");
}
