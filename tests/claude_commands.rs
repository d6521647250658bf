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
