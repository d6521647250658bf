//! Skills reach the model as a catalog (name, description, location; never the body), the
//! body is sent only on `/skill:NAME` (or `/NAME`), and RPC's `get_commands` lists skills in
//! pi's shape.

use crate::common::http_server::{Reply, Server};
use crate::common::support::{root, Sandbox};

fn sse() -> Vec<u8> {
    std::fs::read(root().join("fixtures/providers/openai/text.sse")).unwrap()
}

fn skill(dir: &std::path::Path, name: &str, front: &str, body: &str) -> std::path::PathBuf {
    let d = dir.join(name);
    std::fs::create_dir_all(&d).unwrap();
    let f = d.join("SKILL.md");
    std::fs::write(&f, format!("---\n{front}\n---\n{body}")).unwrap();
    f
}

#[test]
fn the_catalog_is_in_the_prompt_and_the_body_only_arrives_on_skill_commands() {
    let sb = Sandbox::new();
    let lint = skill(
        &sb.work().join(".agents/skills"),
        "lint",
        "name: lint\ndescription: Lints the project with the house rules.",
        "BODY: run cargo clippy -- -D warnings\n",
    );
    skill(
        &sb.home().join("skills"),
        "deploy",
        "name: deploy\ndescription: Deploys.\ndisable-model-invocation: true",
        "BODY: deploy steps\n",
    );
    let server = Server::start(vec![Reply::sse(&sse()), Reply::sse(&sse())]);
    let base = server.base_url();
    let input = concat!(
        r#"{"id":"c","type":"get_commands"}"#,
        "\n",
        r#"{"id":"p","type":"prompt","message":"/skill:lint src/"}"#,
        "\n",
    );
    let run = sb.run_stdin(
        &[
            "--mode",
            "rpc",
            "--base-url",
            &base,
            "--model",
            "m",
            "--no-session",
            "--trust-project",
        ],
        input,
    );
    assert_eq!(run.code, 0, "{run}");
    let seen = server.seen();
    assert_eq!(seen.len(), 1, "{run}");
    let body = seen[0].json();
    let system = body["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.contains(&format!(
            "<skill><name>lint</name><description>Lints the project with the house rules.</description><location>{}</location></skill>",
            lint.display()
        )),
        "{system}"
    );
    assert!(!system.contains("BODY:"), "the catalog never holds a body");
    assert!(
        !system.contains("deploy"),
        "disable-model-invocation keeps it out"
    );
    let user = body["messages"][1]["content"].to_string();
    assert!(user.contains("<skill name=\\\"lint\\\""), "{user}");
    assert!(user.contains("BODY: run cargo clippy"), "{user}");
    assert!(user.contains("src/"), "{user}");

    let commands = run
        .stdout_lines()
        .into_iter()
        .find(|l| l["id"] == "c")
        .unwrap();
    let skills: Vec<&serde_json::Value> = commands["data"]["commands"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["source"] == "skill")
        .collect();
    let names: Vec<&str> = skills.iter().map(|c| c["name"].as_str().unwrap()).collect();
    // Claude Code's `/NAME`, then pi's `/skill:NAME`.
    assert_eq!(names, ["lint", "deploy", "skill:lint", "skill:deploy"]);
    assert_eq!(skills[0]["sourceInfo"]["scope"], "project");
    assert_eq!(skills[1]["sourceInfo"]["scope"], "user");
    assert_eq!(
        skills[0]["sourceInfo"]["path"],
        lint.display().to_string().as_str()
    );
}

#[test]
fn without_the_read_tool_there_is_no_catalog() {
    let sb = Sandbox::new();
    skill(
        &sb.home().join("skills"),
        "lint",
        "name: lint\ndescription: Lints.",
        "b",
    );
    let shown = sb.run(&["debug", "prompt", "--json", "--tools", "bash"]);
    let v: serde_json::Value = serde_json::from_str(&shown.stdout).unwrap();
    assert!(!v["systemPrompt"].as_str().unwrap().contains("<skills>"));
    let shown = sb.run(&["debug", "prompt", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&shown.stdout).unwrap();
    assert!(v["systemPrompt"].as_str().unwrap().contains("<skills>"));
}

/// A project's own skills are the repository's instructions to the model: like its agents,
/// they load only in a trusted project, and a warning says why they did not (issue 43,
/// point 19). The user's own skills load either way.
#[test]
fn a_projects_skills_load_only_in_a_trusted_project() {
    let sb = Sandbox::new();
    skill(
        &sb.work().join(".keel/skills"),
        "planted",
        "name: planted\ndescription: Runs whatever the repository says.",
        "b",
    );
    skill(
        &sb.home().join("skills"),
        "mine",
        "name: mine\ndescription: The user's own.",
        "b",
    );
    let prompt = |extra: &[&str]| {
        let mut args = vec!["debug", "prompt", "--json"];
        args.extend_from_slice(extra);
        let shown = sb.run(&args);
        let v: serde_json::Value = serde_json::from_str(&shown.stdout).unwrap();
        (
            v["systemPrompt"].as_str().unwrap().to_string(),
            shown.stderr,
        )
    };
    let (system, _) = prompt(&[]);
    assert!(!system.contains("planted"), "{system}");
    assert!(system.contains("<name>mine</name>"), "{system}");
    let run = sb.scripted("-p", "hello.json", &["--no-session", "hi"]);
    assert!(
        run.stderr
            .contains("not trusted, so its skills are not loaded"),
        "{run}"
    );
    let (system, _) = prompt(&["--trust-project"]);
    assert!(system.contains("<name>planted</name>"), "{system}");
}
