//! A Claude command's frontmatter runs its prompt as Claude Code does (issue 46 point 2):
//! `model: haiku` calls Anthropic's Haiku for that prompt only (the next plain prompt is on the
//! session's model again; a model keel cannot use is an error before anything is sent), and
//! `allowed-tools: Bash(touch:*)` runs `touch` without asking in a mode that asks, for that
//! prompt only. A skill is `/NAME` as in Claude Code (`/skill:NAME` still works), and a prompt
//! template of the same name wins.

use serde_json::{json, Value};

use crate::common::http_server::{Reply, Seen, Server};
use crate::common::rpc::Rpc;
use crate::common::support::write_text as write;
use crate::common::support::{root, scripted_args, Sandbox};

/// A stand-in for Anthropic's host: its model list, and a streamed answer to every message.
fn anthropic() -> Server {
    Server::start_with(|seen: &Seen| match seen.method.as_str() {
        "GET" => Reply::json(
            200,
            r#"{"data":[{"id":"claude-sonnet-5-5","type":"model"},{"id":"claude-haiku-4-5","type":"model"}]}"#,
        ),
        _ => Reply::sse(
            &std::fs::read(root().join("fixtures/providers/anthropic/text.sse")).unwrap(),
        ),
    })
}

/// The `model` of every message request the server was sent.
fn models_called(server: &Server) -> Vec<String> {
    server
        .seen()
        .iter()
        .filter(|s| s.method == "POST")
        .map(|s| s.json()["model"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn prompt(rpc: &mut Rpc, id: &str, message: &str) -> Value {
    let r = rpc.call(json!({"id": id, "type": "prompt", "message": message}));
    if r["success"] == true {
        rpc.wait(&json!({"type": "agent_settled"}));
    }
    r
}

#[test]
fn a_commands_model_runs_its_prompt_and_the_next_prompt_is_back_on_the_sessions() {
    let sb = Sandbox::new();
    let commands = sb.work().join(".claude/commands");
    write(
        &commands.join("quick.md"),
        "---\ndescription: Quick answer\nmodel: haiku\n---\nAnswer quickly: $ARGUMENTS\n",
    );
    write(
        &commands.join("odd.md"),
        "---\nmodel: no-such-model-9\n---\nAnything\n",
    );
    let server = anthropic();
    let url = server.base_url();
    let mut cmd = sb.cmd(&[
        "--mode",
        "rpc",
        "--provider",
        "anthropic",
        "--model",
        "claude-sonnet-5-5",
        "--no-session",
    ]);
    cmd.env("ANTHROPIC_BASE_URL", &url)
        .env("ANTHROPIC_API_KEY", "test-key");
    let mut rpc = Rpc::spawn(cmd);

    let r = prompt(&mut rpc, "q", "/quick what is 2+2");
    assert_eq!(r["success"], true, "{r}");
    let r = prompt(&mut rpc, "p", "and now plainly");
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(
        models_called(&server),
        ["claude-haiku-4-5", "claude-sonnet-5-5"]
    );
    let state = rpc.call(json!({"id": "s", "type": "get_state"}));
    assert_eq!(state["data"]["model"]["id"], "claude-sonnet-5-5", "{state}");

    // A model keel cannot use: an error naming the command and its file; nothing is sent.
    let r = prompt(&mut rpc, "o", "/odd");
    assert_eq!(r["success"], false, "{r}");
    let error = r["error"].as_str().unwrap();
    assert!(
        error.contains("/odd") && error.contains("no-such-model-9") && error.contains("odd.md"),
        "{error}"
    );
    assert_eq!(models_called(&server).len(), 2, "nothing more was sent");
    let (_, stderr, code) = rpc.finish();
    assert_eq!(code, 0, "{stderr}");
}

/// A print run that asks before `bash` (so it blocks any call that needs an approval), on a
/// script that runs `command` and then answers; `prompt` as typed.
fn touch_run(sb: &Sandbox, command: &str, prompt: &str) -> crate::common::support::Run {
    let script = sb.script(json!([
        {"chunks": [{"toolCall": {"id": "c1", "name": "bash", "arguments": {"command": command}}}]},
        {"chunks": [{"text": "done"}]}
    ]));
    let before = [
        "-p",
        "--no-session",
        "--permission",
        "ask",
        "--trust-project",
    ];
    let mut args = scripted_args(&before, &script, &[]);
    args.push(prompt);
    sb.run(&args)
}

#[test]
fn a_commands_allowed_tools_run_without_asking_for_its_prompt_only() {
    let sb = Sandbox::new();
    write(
        &sb.work().join(".claude/commands/touchit.md"),
        "---\nallowed-tools: Bash(touch:*), Read\n---\nTouch the file $1.\n",
    );
    let run = touch_run(&sb, "touch x", "/touchit x");
    assert_eq!(run.code, 0, "{run}");
    assert!(
        sb.work().join("x").exists(),
        "the command's rule let it run: {run}"
    );

    // The same call from a plain prompt still needs an approval, which a print run cannot give.
    let run = touch_run(&sb, "touch y", "touch y please");
    assert!(!sb.work().join("y").exists(), "{run}");
    assert!(
        format!("{}{}", run.stdout, run.stderr).contains("needs approval"),
        "{run}"
    );

    // A deny rule of the user's still wins over the command's allow.
    write(
        &sb.home().join("settings.json"),
        &json!({"permissions": {"deny": ["Bash(touch z)"]}}).to_string(),
    );
    let run = touch_run(&sb, "touch z", "/touchit z");
    assert!(!sb.work().join("z").exists(), "{run}");
    assert!(
        format!("{}{}", run.stdout, run.stderr).contains("denied by rule `Bash(touch z)`"),
        "{run}"
    );
}

fn skill(sb: &Sandbox, name: &str, body: &str) {
    write(
        &sb.home().join("skills").join(name).join("SKILL.md"),
        &format!("---\nname: {name}\ndescription: The {name} skill.\n---\n{body}\n"),
    );
}

/// The text of each user message the session sent, in order.
fn user_texts(rpc: &Rpc) -> Vec<String> {
    rpc.seen
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["type"] == "message_end" && v["message"]["role"] == "user")
        .map(|v| {
            v["message"]["content"][0]["text"]
                .as_str()
                .unwrap_or("")
                .to_string()
        })
        .collect()
}

#[test]
fn a_skill_runs_as_its_name_and_a_template_of_the_name_wins() {
    let sb = Sandbox::new();
    skill(&sb, "lint", "LINT BODY: run the linter");
    skill(&sb, "deploy", "DEPLOY SKILL BODY");
    write(
        &sb.work().join(".claude/commands/deploy.md"),
        "Deploy by the command\n",
    );
    let script = sb.script(json!([{"repeat": true, "chunks": [{"text": "ok"}]}]));
    let mut rpc = Rpc::spawn(sb.cmd(&scripted_args(
        &["--mode", "rpc"],
        &script,
        &["--no-session"],
    )));
    for (id, message) in [("l", "/lint src/"), ("s", "/skill:lint"), ("d", "/deploy")] {
        let r = prompt(&mut rpc, id, message);
        assert_eq!(r["success"], true, "{r}");
    }
    let sent = user_texts(&rpc);
    assert_eq!(sent.len(), 3, "{sent:?}");
    assert!(
        sent[0].starts_with("<skill name=\"lint\"")
            && sent[0].contains("LINT BODY")
            && sent[0].ends_with("src/"),
        "{sent:?}"
    );
    assert!(sent[1].contains("LINT BODY"), "{sent:?}");
    assert_eq!(sent[2], "Deploy by the command\n");

    let r = rpc.call(json!({"id": "c", "type": "get_commands"}));
    let listed: Vec<(String, String)> = r["data"]["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().into(),
                c["source"].as_str().unwrap().into(),
            )
        })
        .collect();
    let has = |n: &str, s: &str| listed.contains(&(n.to_string(), s.to_string()));
    assert!(
        has("deploy", "prompt") && has("lint", "skill"),
        "{listed:?}"
    );
    assert!(
        has("skill:lint", "skill") && has("skill:deploy", "skill"),
        "{listed:?}"
    );
    assert!(
        !has("deploy", "skill"),
        "the template has the name: {listed:?}"
    );
    let (_, stderr, code) = rpc.finish();
    assert_eq!(code, 0, "{stderr}");
}

/// In the TUI, a command whose model cannot be used is an error cell, and what was typed goes
/// back to the editor (nothing reached the model).
#[test]
fn in_the_tui_a_commands_unusable_model_is_an_error_and_the_text_comes_back() {
    use crate::common::pty::spawn;
    use crate::common::support::{fixture, keel_shell};
    let sb = Sandbox::new();
    write(
        &sb.work().join(".claude/commands/odd.md"),
        "---\nmodel: no-such-model-9\n---\nAnything\n",
    );
    let (mut s, mut child) = spawn(&sb, &keel_shell(&fixture("tui.json")));
    s.wait_for("the editor", |t| t.contains("Ask anything"));
    // The command is known once the session's commands arrived (its row in the menu).
    s.send("/od");
    s.wait_for("the command's row", |t| t.contains("/odd"));
    s.send("d hello there\r");
    s.wait_for("the error, and the text back in the editor", |t| {
        t.contains("cannot run with its model `no-such-model-9`") && t.contains("/odd hello there")
    });
    assert!(!s.text().contains("Done."), "nothing reached the model");
    s.send("\x15\x04");
    assert!(child.wait().unwrap().success());
}

/// In the kernel: a prompt's options (the model and the allow rules a command gave it) hold
/// for its turns, tool calls included, and a follow-up without options, delivered in the same
/// run, is back on the session's model and rules: its `touch` asks.
#[test]
fn a_prompts_options_end_where_a_plain_follow_up_begins() {
    use crate::common::kernel::{rt, scripted, session};
    use keel::kernel::event::{ApprovalDecision, EventPayload};
    use keel::kernel::message::Message;
    use keel::kernel::op::{PromptOptions, UserInput};
    use keel::kernel::policy::Rules;
    use keel::{AgentConfig, Permission};
    use std::sync::Arc;

    let dir = tempfile::tempdir().unwrap();
    let mut config = AgentConfig::new(dir.path().to_path_buf(), dir.path().to_path_buf());
    config.permission = Permission::Ask;
    config.can_ask = true;
    let touch = |id: &str, file: &str| json!({"toolCall": {"id": id, "name": "bash", "arguments": {"command": format!("touch {file}")}}});
    // The command's model plays the first prompt; the session's the follow-up.
    let fast = json!({"model": "fast-1", "turns": [
        {"match": "^first", "chunks": [touch("c1", "a")]},
        {"match": "^first", "chunks": [{"text": "one"}]}
    ]});
    let own = json!({"model": "own-1", "turns": [
        {"match": "^second", "chunks": [touch("c2", "b")]},
        {"repeat": true, "chunks": [{"text": "two"}]}
    ]});
    let s = session(config, scripted(&own.to_string()), Vec::new());
    let origin = "/touchit (test)".to_string();
    let (allowed, warnings) = Rules::build(
        &[],
        &[],
        &[("Bash(touch:*)".to_string(), origin)],
        dir.path(),
        dir.path(),
    );
    assert!(warnings.is_empty(), "{warnings:?}");
    let mut input = UserInput::text("first");
    input.options = PromptOptions {
        model: Some(Arc::new(scripted(&fast.to_string()))),
        allowed,
    };
    let (asked, models) = rt().block_on(async {
        let mut rx = s.subscribe();
        let run = s.prompt_input(input).unwrap();
        s.follow_up("second".into());
        let (mut asked, mut models) = (Vec::new(), Vec::new());
        while let Some(ev) = rx.recv().await {
            match &ev.payload {
                EventPayload::ApprovalRequested { call_id, args, .. } => {
                    asked.push(args["command"].as_str().unwrap_or("").to_string());
                    s.approve(call_id, ApprovalDecision::Deny);
                }
                EventPayload::MessageFinished {
                    message: Message::Assistant(a),
                    ..
                } => models.push(a.model.clone()),
                EventPayload::AgentSettled { .. } => break,
                _ => {}
            }
        }
        run.await.unwrap();
        (asked, models)
    });
    assert_eq!(models, ["fast-1", "fast-1", "own-1", "own-1"]);
    assert_eq!(asked, ["touch b"], "only the follow-up's call asked");
    assert!(dir.path().join("a").exists());
    assert!(!dir.path().join("b").exists());
    assert_eq!(s.provider().model(), "own-1");
}
