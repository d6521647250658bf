//! `--output-schema FILE` (alias `--json-schema`): the final answer validated against a JSON
//! Schema (passed, repaired once, failed with `schema_mismatch`), bad schemas refused as usage
//! errors, and the schema's native form in each API's request body, captured by a server on
//! 127.0.0.1.

use std::sync::Arc;

use keel::kernel::provider::model::{ModelInfo, API_ANTHROPIC, API_OPENAI, API_RESPONSES};
use keel::kernel::provider::ModelRequest;
use serde_json::{json, Value};

use crate::common::http_server::{Reply, Server};
use crate::common::provider_stream;
use crate::common::support::{root, scripted_args, Run, Sandbox};

const PERSON: &str = r#"{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name","age"],"additionalProperties":false}"#;

/// A scripted run with `schema` written to `work/schema.json` and passed as `flag`.
fn run(mode: &str, script: &str, flag: &str, schema: &str) -> (Sandbox, Run) {
    let sb = Sandbox::new();
    std::fs::write(sb.work().join("schema.json"), schema).unwrap();
    let run = sb.scripted(
        mode,
        script,
        &[flag, "schema.json", "who wrote the first program?"],
    );
    (sb, run)
}

#[test]
fn a_matching_answer_is_printed_as_json_only() {
    let (_sb, run) = run("-p", "schema_answer.json", "--output-schema", PERSON);
    assert_eq!(run.code, 0, "{run}");
    assert_eq!(run.stdout, "{\"name\":\"Ada\",\"age\":36}\n");
}

#[test]
fn json_mode_carries_the_answer_as_structured_output() {
    let (_sb, run) = run("--json", "schema_answer.json", "--json-schema", PERSON);
    assert_eq!(run.code, 0, "{run}");
    let lines = run.stdout_lines();
    let result = lines.last().unwrap();
    assert_eq!(result["outcome"], "success");
    assert_eq!(
        result["structuredOutput"],
        json!({"name": "Ada", "age": 36})
    );
    let settled = lines.iter().find(|l| l["type"] == "agent_settled").unwrap();
    assert_eq!(
        settled["structuredOutput"],
        json!({"name": "Ada", "age": 36})
    );
}

#[test]
fn a_mismatch_is_repaired_once_by_asking_the_model() {
    let (sb, run) = run("-p", "schema_repaired.json", "--output-schema", PERSON);
    assert_eq!(run.code, 0, "{run}");
    assert_eq!(run.stdout, "{\"name\":\"Ada\",\"age\":36}\n");
    // The request for a correction is in the session, naming the violation.
    let session = std::fs::read_to_string(&sb.session_files()[0]).unwrap();
    assert!(
        session.contains("does not match the JSON Schema") && session.contains("not JSON"),
        "{session}"
    );
}

#[test]
fn a_second_mismatch_fails_with_schema_mismatch_naming_the_violation() {
    let (_sb, run) = run(
        "--json",
        "schema_wrong_twice.json",
        "--output-schema",
        PERSON,
    );
    assert_eq!(run.code, 1, "{run}");
    let result = run.stdout_lines().pop().unwrap();
    assert_eq!(result["outcome"], "failed");
    assert_eq!(result["error"]["kind"], "schema_mismatch");
    let message = result["error"]["message"].as_str().unwrap();
    assert!(message.contains("at '/age'"), "{message}");
    assert!(result.get("structuredOutput").is_none(), "{result}");
    assert!(run.stderr.contains("at '/age'"), "{}", run.stderr);
}

#[test]
fn a_schema_that_is_not_json_is_a_usage_error() {
    let (_sb, run) = run("-p", "schema_answer.json", "--output-schema", "{not json");
    assert_eq!(run.code, 2, "{run}");
    assert!(run.stderr.contains("schema.json"), "{}", run.stderr);
    assert!(run.stderr.contains("not JSON"), "{}", run.stderr);
}

#[test]
fn a_schema_that_breaks_the_metaschema_is_a_usage_error() {
    let (_sb, run) = run(
        "-p",
        "schema_answer.json",
        "--output-schema",
        r#"{"type":"fish"}"#,
    );
    assert_eq!(run.code, 2, "{run}");
    assert!(
        run.stderr.contains("not a valid JSON Schema"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_missing_schema_file_is_a_usage_error() {
    let sb = Sandbox::new();
    let run = sb.scripted(
        "-p",
        "schema_answer.json",
        &["--output-schema", "nope.json", "who"],
    );
    assert_eq!(run.code, 2, "{run}");
}

#[test]
fn claude_s_inline_schema_text_is_accepted_too() {
    let sb = Sandbox::new();
    let run = sb.scripted(
        "-p",
        "schema_answer.json",
        &["--json-schema", PERSON, "who is it"],
    );
    assert_eq!(run.code, 0, "{run}");
    assert_eq!(run.stdout, "{\"name\":\"Ada\",\"age\":36}\n");
}

// ---- the native forms in each API's request body ----

fn request() -> ModelRequest {
    ModelRequest {
        output_schema: Some(Arc::new(serde_json::from_str(PERSON).unwrap())),
        ..provider_stream::request("off", None)
    }
}

/// One call of a model speaking `api` against a server replying `sse`: the request body sent.
fn body_sent(api: &str, sse: &str, base: impl Fn(&Server) -> String) -> Value {
    let body = std::fs::read(root().join("fixtures/providers").join(sse)).unwrap();
    let server = Server::start(vec![Reply::sse(&body)]);
    let info = ModelInfo::unlisted("local", api, &base(&server), "test-model");
    provider_stream::events(info, "k", request());
    server.seen()[0].json()
}

#[test]
fn chat_completions_sends_response_format_json_schema() {
    let body = body_sent(API_OPENAI, "openai/text.sse", Server::base_url);
    assert_eq!(
        body["response_format"],
        json!({"type": "json_schema", "json_schema": {"name": "keel_output",
            "schema": serde_json::from_str::<Value>(PERSON).unwrap(), "strict": true}})
    );
}

#[test]
fn responses_sends_text_format_json_schema() {
    let body = body_sent(API_RESPONSES, "responses/text.sse", Server::base_url);
    assert_eq!(
        body["text"]["format"],
        json!({"type": "json_schema", "name": "keel_output",
            "schema": serde_json::from_str::<Value>(PERSON).unwrap(), "strict": true})
    );
}

#[test]
fn anthropic_gets_the_schema_as_an_instruction_after_the_cached_system_prompt() {
    let body = body_sent(API_ANTHROPIC, "anthropic/text.sse", |s| {
        format!("http://127.0.0.1:{}", s.port)
    });
    let system = body["system"].as_array().unwrap();
    assert_eq!(system.len(), 2, "{body}");
    assert_eq!(system[0]["text"], "be brief");
    let instruction = system[1]["text"].as_str().unwrap();
    assert!(instruction.contains(PERSON), "{instruction}");
    assert!(system[1].get("cache_control").is_none());
    // No forced tool: the agent's tools stay usable (and thinking allows no forced tool).
    assert!(body.get("tool_choice").is_none(), "{body}");
}

#[test]
fn the_flag_reaches_the_request_of_a_real_provider() {
    let answer = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"{\\\"name\\\":\\\"Ada\\\",\\\"age\\\":36}\"},\"finish_reason\":null}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
        "data: [DONE]\n\n"
    );
    let server = Server::start(vec![Reply::sse(answer.as_bytes())]);
    let sb = Sandbox::new();
    std::fs::write(sb.work().join("schema.json"), PERSON).unwrap();
    let base = server.base_url();
    let run = sb.run(&[
        "-p",
        "--base-url",
        &base,
        "--model",
        "test-model",
        "--api-key",
        "k",
        "--output-schema",
        "schema.json",
        "who",
    ]);
    assert_eq!(run.code, 0, "{run}");
    assert_eq!(run.stdout, "{\"name\":\"Ada\",\"age\":36}\n");
    let body = server.seen()[0].json();
    assert_eq!(body["response_format"]["type"], "json_schema");
}

/// The same contract through the daemon: the schema is read from the client's directory,
/// checked and repaired in the daemon's session, and reported as in-process.
#[test]
fn through_the_daemon_the_answer_is_checked_and_reported_alike() {
    let sb = Sandbox::new();
    std::fs::write(sb.work().join("schema.json"), PERSON).unwrap();
    let d = crate::common::daemon::Daemon::start(&sb, &["--idle-exit", "0"]);
    let socket = d.socket.display().to_string();
    // Each new session needs its own id under the fixed clock: its own seed.
    let via = |script: &str, mode: &str, seed: &str| {
        let script = crate::common::support::fixture(script);
        let mut cmd = sb.cmd(&scripted_args(
            &[mode],
            &script,
            &[
                "--output-schema",
                "schema.json",
                "--daemon",
                "--socket",
                &socket,
                "who wrote the first program?",
            ],
        ));
        sb.finish(cmd.env("KEEL_TEST_SEED", seed).output().unwrap())
    };
    let run = via("schema_repaired.json", "-p", "1");
    assert_eq!(run.code, 0, "{run}");
    assert_eq!(run.stdout, "{\"name\":\"Ada\",\"age\":36}\n");
    let run = via("schema_wrong_twice.json", "--json", "2");
    assert_eq!(run.code, 1, "{run}");
    let result = run.stdout_lines().pop().unwrap();
    assert_eq!(result["error"]["kind"], "schema_mismatch");
}
