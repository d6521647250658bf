//! Claude Code's `.claude/` directories carry over (issue 46 point 2): an agent in a project's
//! `.claude/agents` runs a `task` call, a command in `.claude/commands/<folder>/` is `/name`
//! with `$ARGUMENTS` and `$1` in a print run and through RPC (with its origin and
//! `argument-hint` in `get_commands`), a skill in `~/.claude/skills` is in the system prompt's
//! catalog, `keel agents list` names where each definition came from, and the TUI's `/` menu
//! shows a command's origin.

use serde_json::{json, Value};

use crate::common::pty::spawn;
use crate::common::support::{fixture, keel_shell, scripted_args, Sandbox};

use crate::common::support::write_text as write;

/// `~/.claude` of the sandbox (its HOME is the sandbox's directory).
fn claude_home(sb: &Sandbox) -> std::path::PathBuf {
    sb.dir.path().join(".claude")
}

/// The text of the user message the provider was sent (its `message_end`).
fn user_text(lines: &[Value]) -> String {
    let user = lines
        .iter()
        .find(|v| v["type"] == "message_end" && v["message"]["role"] == "user")
        .expect("a user message");
    user["message"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn a_projects_claude_agent_runs_a_task_call() {
    let sb = Sandbox::new();
    write(
        &sb.work().join(".claude/agents/helper.md"),
        "---\nname: claude-helper\ndescription: Helps, from Claude's directory.\ntools: Read, Glob\nmodel: inherit\ncolor: blue\n---\nYou help.\n",
    );
    let s = sb.script(json!([
        {"match": "^go", "chunks": [{"toolCall": {"id": "t1", "name": "task", "arguments":
            {"description": "help", "prompt": "HELPER go", "subagent_type": "claude-helper"}}}]},
        {"match": "^HELPER", "chunks": [{"text": "helped"}]},
        {"match": "^go", "chunks": [{"text": "ok"}]}
    ]));
    let run = sb.run(&scripted_args(
        &["--mode", "json", "--trust-project"],
        &s,
        &["go"],
    ));
    assert_eq!(run.code, 0, "{run}");
    let lines = run.stdout_lines();
    let end = lines
        .iter()
        .find(|l| l["type"] == "tool_execution_end" && l["toolCallId"] == "t1")
        .expect("the task call ended");
    assert_eq!(end["isError"], false, "{end}");
    let text = end["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("helped"), "{text}");
}

#[test]
fn a_namespaced_claude_command_expands_in_print_and_rpc_runs() {
    let sb = Sandbox::new();
    write(
        &sb.work().join(".claude/commands/frontend/component.md"),
        "---\ndescription: Make a component\nargument-hint: <name> <size>\n---\nMake the $1 component ($ARGUMENTS).\n",
    );
    let s = sb.script(json!([{"match": "^Make", "chunks": [{"text": "made"}]}]));
    let run = sb.run(&scripted_args(
        &["--mode", "json", "--no-session"],
        &s,
        &["/component Button big"],
    ));
    assert_eq!(run.code, 0, "{run}");
    assert_eq!(
        user_text(&run.stdout_lines()),
        "Make the Button component (Button big).\n"
    );

    let s = sb.script(json!([{"match": "^Make", "chunks": [{"text": "made"}]}]));
    let input = concat!(
        r#"{"id":"c","type":"get_commands"}"#,
        "\n",
        r#"{"id":"p","type":"prompt","message":"/component Button big"}"#,
        "\n",
    );
    let run = sb.run_stdin(
        &scripted_args(&["--mode", "rpc", "--no-session"], &s, &[]),
        input,
    );
    assert_eq!(run.code, 0, "{run}");
    let lines = run.stdout_lines();
    assert_eq!(
        user_text(&lines),
        "Make the Button component (Button big).\n"
    );
    let commands = lines.iter().find(|l| l["id"] == "c").unwrap();
    let component = commands["data"]["commands"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "component")
        .expect("listed");
    assert_eq!(component["description"], "Make a component");
    assert_eq!(component["source"], "prompt");
    assert_eq!(component["argumentHint"], "<name> <size>");
    let from = &component["sourceInfo"];
    assert_eq!(from["source"], "claude");
    assert_eq!(from["scope"], "project");
    let file = sb.work().join(".claude/commands/frontend/component.md");
    assert_eq!(from["path"], file.display().to_string().as_str());
    let base = sb.work().join(".claude/commands");
    assert_eq!(from["baseDir"], base.display().to_string().as_str());
}

#[test]
fn a_users_claude_skill_is_in_the_catalog() {
    let sb = Sandbox::new();
    let file = claude_home(&sb).join("skills/notes/SKILL.md");
    write(
        &file,
        "---\nname: notes\ndescription: Takes notes the Claude way.\n---\nBODY\n",
    );
    let shown = sb.run(&["debug", "prompt", "--json"]);
    assert_eq!(shown.code, 0, "{shown}");
    let v: Value = serde_json::from_str(&shown.stdout).unwrap();
    let system = v["systemPrompt"].as_str().unwrap();
    assert!(
        system.contains(&format!(
            "<skill><name>notes</name><description>Takes notes the Claude way.</description><location>{}</location></skill>",
            file.display()
        )),
        "{system}"
    );
}

#[test]
fn keel_agents_list_names_claudes_files_and_what_is_not_supported() {
    let sb = Sandbox::new();
    write(
        &claude_home(&sb).join("agents/rev.md"),
        "---\nname: reviewer\ndescription: Reviews.\ntools: Read, Grep\nmodel: opus\n---\nReview.\n",
    );
    write(
        &sb.work().join(".claude/agents/iso.md"),
        "---\nname: iso\ndescription: Isolated.\nisolation: worktree\n---\nWork.\n",
    );
    let listed = sb.run(&["agents", "list", "--trust-project"]);
    assert_eq!(listed.code, 0, "{listed}");
    let out = &listed.stdout;
    let user_file = claude_home(&sb).join("agents/rev.md");
    assert!(
        out.contains(&format!("reviewer (user ({}))", user_file.display())),
        "{out}"
    );
    assert!(out.contains("model: anthropic/claude-opus-5-5"), "{out}");
    assert!(
        out.contains("iso (project (.claude/agents/iso.md))"),
        "{out}"
    );
    assert!(
        out.contains("isolation: worktree not supported yet"),
        "{out}"
    );
    let listed = sb.run(&["agents", "list", "--json", "--trust-project"]);
    let agents: Vec<Value> = serde_json::from_str(&listed.stdout).unwrap();
    let iso = agents.iter().find(|a| a["name"] == "iso").unwrap();
    assert_eq!(iso["origin"], "project");
    assert_eq!(iso["label"], "project (.claude/agents/iso.md)");
    assert_eq!(iso["isolation"], "worktree");
    // Untrusted: left out, and the warning says why and what trusts it.
    let listed = sb.run(&["agents", "list"]);
    assert!(!listed.stdout.contains("iso"), "{listed}");
    assert!(
        listed.stderr.contains(".claude/agents: not trusted"),
        "{listed}"
    );
}

#[test]
fn the_tui_slash_menu_shows_a_claude_commands_namespace_and_hint() {
    let sb = Sandbox::new();
    write(
        &sb.work().join(".claude/commands/frontend/component.md"),
        "---\ndescription: Make one\nargument-hint: <name>\n---\nMake $1.\n",
    );
    write(&sb.home().join("prompts/hello.md"), "Say hello\n");
    let (mut s, mut child) = spawn(&sb, &keel_shell(&fixture("tui.json")));
    s.wait_for("the editor", |t| t.contains("Ask anything"));
    // Typed at once: the menu takes the commands in when they arrive.
    s.send("/comp");
    s.wait_for("the command's row with its origin", |t| {
        t.contains("/component") && t.contains("<name>  Make one  (claude project:frontend)")
    });
    // Backspace to `/`: every template, keel's with its own origin.
    s.send("\x7f\x7f\x7f\x7fhel");
    s.wait_for("keel's template", |t| {
        t.contains("/hello") && t.contains("Say hello  (keel user)")
    });
    s.send("\x15\x04");
    assert!(child.wait().unwrap().success());
}
