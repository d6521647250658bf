//! The Gemini API provider (`google-generative-ai`) end to end: the binary against a server on
//! 127.0.0.1 replaying recorded SSE byte streams (fixtures/providers/gemini/), split at awkward
//! byte boundaries: the request's shape, thought signatures sent back byte for byte on the next
//! request and after a resume, retries, the keys and the registry. The decoder's event
//! sequences are in `gemini_stream.rs`.

use serde_json::{json, Value};

use crate::common::http_server::{Reply, Server};
use crate::common::support::{root, Run, Sandbox};

pub(crate) fn bytes(name: &str) -> Vec<u8> {
    std::fs::read(root().join("fixtures/providers/gemini").join(name)).unwrap()
}

/// The server's root URL (the Gemini API has no `/v1`).
fn base(server: &Server) -> String {
    format!("http://127.0.0.1:{}", server.port)
}

/// A run with Google's variables set (`GEMINI_API_KEY` or, with `alt_key`, `GOOGLE_API_KEY`)
/// and the API moved to `server`.
fn run_at(sb: &Sandbox, server: &Server, alt_key: bool, args: &[&str]) -> Run {
    let key = if alt_key {
        "GOOGLE_API_KEY"
    } else {
        "GEMINI_API_KEY"
    };
    let out = sb
        .cmd(args)
        .env("GOOGLE_GEMINI_BASE_URL", base(server))
        .env(key, "gk-test")
        .env("KEEL_RETRY_BASE_MS", "1")
        .output()
        .unwrap();
    sb.finish(out)
}

/// The value of `thoughtSignature` in a fixture's line that has `needle`.
fn signature_in(name: &str, needle: &str) -> String {
    let text = String::from_utf8(bytes(name)).unwrap();
    let line = text.lines().find(|l| l.contains(needle)).unwrap();
    let at = line.find("\"thoughtSignature\":\"").unwrap() + "\"thoughtSignature\":\"".len();
    line[at..].split('"').next().unwrap().to_string()
}

#[test]
fn gemini_two_turns_send_the_thought_signatures_back_byte_for_byte() {
    let sb = Sandbox::new();
    let server = Server::start(vec![
        Reply::sse(&bytes("function_call.sse")),
        Reply::sse(&bytes("text.sse")),
        Reply::sse(&bytes("text.sse")),
    ]);
    let run = run_at(
        &sb,
        &server,
        false,
        &[
            "--json",
            "--model",
            "google/gemini-4-argon",
            "--thinking",
            "high",
            "list",
        ],
    );
    assert_eq!(run.code, 0, "{run}");
    let lines = run.stdout_lines();
    let last = lines.last().unwrap();
    assert_eq!(last["finalText"], "Hello from Gemini. ✓ café 日本", "{run}");
    let seen = server.seen();
    assert_eq!(seen.len(), 2, "{run}");
    assert_eq!(seen[0].method, "POST");
    assert_eq!(
        seen[0].path,
        "/v1beta/models/gemini-4-argon:streamGenerateContent?alt=sse"
    );
    assert_eq!(seen[0].header("x-goog-api-key"), Some("gk-test"));
    assert_eq!(seen[0].header("authorization"), None);
    let first = seen[0].json();
    assert!(first["systemInstruction"]["parts"][0]["text"]
        .as_str()
        .unwrap()
        .contains("keel"));
    assert_eq!(
        first["contents"],
        json!([{"role": "user", "parts": [{"text": "list"}]}])
    );
    let ls = first["tools"][0]["functionDeclarations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == "ls")
        .unwrap();
    assert_eq!(ls["parametersJsonSchema"]["type"], "object");
    assert_eq!(
        first["generationConfig"]["thinkingConfig"],
        json!({"thinkingLevel": "high", "includeThoughts": true})
    );
    assert_eq!(first["generationConfig"]["maxOutputTokens"], 65536);

    // The second request: the model's turn as it came, the signature on the first call.
    let sig = signature_in("function_call.sse", "\"ls\"");
    let raw = &seen[1].body;
    assert!(
        raw.contains(&format!(
            r#"{{"functionCall":{{"name":"ls","args":{{"path":"."}},"id":"c1"}},"thoughtSignature":"{sig}"}}"#
        )),
        "the signature byte for byte, on its part: {raw}"
    );
    let second = seen[1].json();
    let contents = second["contents"].as_array().unwrap();
    assert_eq!(contents.len(), 3, "{contents:#?}");
    assert_eq!(
        contents[1],
        json!({"role": "model", "parts": [
            {"text": "**Listing** the directory first.", "thought": true},
            {"functionCall": {"name": "ls", "args": {"path": "."}, "id": "c1"},
             "thoughtSignature": sig},
            {"functionCall": {"name": "read", "args": {"path": "README.md", "limit": 20},
                              "id": "c2"}},
        ]})
    );
    let results = contents[2]["parts"].as_array().unwrap();
    assert_eq!(contents[2]["role"], "user");
    assert_eq!(
        results.len(),
        2,
        "both results in one user turn: {results:#?}"
    );
    assert_eq!(results[0]["functionResponse"]["name"], "ls");
    assert_eq!(results[0]["functionResponse"]["id"], "c1");
    assert!(results[0]["functionResponse"]["response"]["output"].is_string());
    assert_eq!(results[1]["functionResponse"]["id"], "c2");
    assert!(
        results[1]["functionResponse"]["response"]["error"].is_string(),
        "a failed tool is an error response: {results:#?}"
    );

    // A resumed session sends both turns' signatures: the text turn's on its text part.
    let run = run_at(
        &sb,
        &server,
        false,
        &[
            "--json",
            "--model",
            "google/gemini-4-argon",
            "--continue",
            "again",
        ],
    );
    assert_eq!(run.code, 0, "{run}");
    let third = &server.seen()[2];
    assert!(third.body.contains(&sig), "{}", third.body);
    let contents = third.json()["contents"].as_array().unwrap().clone();
    let text_sig = signature_in("text.sse", "STOP");
    assert_eq!(
        contents[3],
        json!({"role": "model", "parts": [
            {"text": "Hello from Gemini. ✓ café 日本", "thoughtSignature": text_sig},
        ]})
    );
    assert_eq!(
        contents.last().unwrap(),
        &json!({"role": "user", "parts": [{"text": "again"}]})
    );
}

#[test]
fn gemini_usage_with_cached_and_thought_tokens_reaches_the_result() {
    let sb = Sandbox::new();
    let server = Server::start(vec![Reply::sse(&bytes("thinking.sse"))]);
    let run = run_at(
        &sb,
        &server,
        true,
        &["--json", "--model", "gemini-4-argon", "what is 2 + 2?"],
    );
    assert_eq!(run.code, 0, "{run}");
    let lines = run.stdout_lines();
    let last = lines.last().unwrap();
    assert_eq!(last["finalText"], "2 + 2 = **4**.", "{run}");
    let usage = &last["usage"];
    assert_eq!(usage["input"], 64);
    assert_eq!(usage["output"], 47, "candidates and thoughts: {usage}");
    assert_eq!(usage["reasoning"], 40);
    let thinking: Vec<&Value> = lines
        .iter()
        .filter(|l| l["type"] == "message_update")
        .filter(|l| l["assistantMessageEvent"]["type"] == "thinking_end")
        .collect();
    assert!(
        thinking
            .iter()
            .any(|l| l["assistantMessageEvent"]["content"] == "Checking the sum: 2 + 2."),
        "{run}"
    );
    assert_eq!(server.seen()[0].header("x-goog-api-key"), Some("gk-test"));
}

#[test]
fn gemini_429_with_retry_info_and_503_are_retried() {
    let sb = Sandbox::new();
    let quota = r#"{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"0.05s"}]}}"#;
    let busy = r#"{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}"#;
    let server = Server::start(vec![
        Reply::json(429, quota),
        Reply::json(503, busy),
        Reply::sse(&bytes("text.sse")),
    ]);
    let run = run_at(
        &sb,
        &server,
        false,
        &["--json", "--model", "google/gemini-4-argon", "hi"],
    );
    assert_eq!(run.code, 0, "{run}");
    let lines = run.stdout_lines();
    let retries: Vec<&Value> = lines
        .iter()
        .filter(|l| l["type"] == "auto_retry_start")
        .collect();
    assert_eq!(retries.len(), 2, "{run}");
    assert_eq!(retries[0]["delayMs"], 50, "the wait RetryInfo asked for");
    assert!(retries[1]["errorMessage"]
        .as_str()
        .unwrap()
        .contains("HTTP 503"));
    assert_eq!(
        lines.last().unwrap()["finalText"],
        "Hello from Gemini. ✓ café 日本"
    );
}

#[test]
fn gemini_errors_end_the_run_with_their_kind() {
    let sb = Sandbox::new();
    let server = Server::start(vec![
        Reply::json(
            400,
            &String::from_utf8(bytes("error_400_key.json")).unwrap(),
        ),
        Reply::sse(&bytes("safety.sse")),
    ]);
    let run = run_at(
        &sb,
        &server,
        false,
        &[
            "--json",
            "--no-session",
            "--model",
            "google/gemini-4-argon",
            "hi",
        ],
    );
    assert_eq!(run.code, 1, "{run}");
    let last = run.stdout_lines().last().unwrap().clone();
    assert_eq!(last["error"]["kind"], "auth", "{run}");
    let run = run_at(
        &sb,
        &server,
        false,
        &[
            "--json",
            "--no-session",
            "--model",
            "google/gemini-4-argon",
            "hi",
        ],
    );
    assert_eq!(run.code, 1, "{run}");
    let last = run.stdout_lines().last().unwrap().clone();
    assert_eq!(last["error"]["kind"], "content_filter", "{run}");
}

#[test]
fn gemini_keys_registry_and_list_models() {
    let sb = Sandbox::new();
    // No key: exit 3 naming both variables.
    let run = sb.run(&["-p", "--model", "google/gemini-4-argon", "hi"]);
    assert_eq!(run.code, 3, "{run}");
    assert!(run.stderr.contains("GEMINI_API_KEY"), "{run}");
    assert!(run.stderr.contains("GOOGLE_API_KEY"), "{run}");
    // GOOGLE_API_KEY alone picks the provider and its default model.
    let server = Server::start(vec![Reply::sse(&bytes("text.sse"))]);
    let run = run_at(&sb, &server, true, &["-p", "hi"]);
    assert_eq!(run.code, 0, "{run}");
    assert_eq!(run.stdout, "Hello from Gemini. ✓ café 日本\n");
    assert_eq!(
        server.seen()[0].path,
        "/v1beta/models/gemini-4-argon:streamGenerateContent?alt=sse"
    );
    // `--provider gemini` is the same provider (issue 44 point 14).
    let server = Server::start(vec![Reply::sse(&bytes("text.sse"))]);
    let run = run_at(
        &sb,
        &server,
        true,
        &["--provider", "gemini", "--no-session", "-p", "hi"],
    );
    assert_eq!(run.code, 0, "{run}");
    assert_eq!(run.stdout, "Hello from Gemini. ✓ café 日本\n");
    let run = sb.run(&["--list-models", "gemini", "--json"]);
    let lines = run.stdout_lines();
    let argon = lines
        .iter()
        .find(|l| l["id"] == "gemini-4-argon")
        .unwrap_or_else(|| panic!("{run}"));
    assert_eq!(argon["api"], "google-generative-ai");
    assert_eq!(argon["provider"], "google");
    assert_eq!(argon["contextWindow"], 1_048_576);
    assert_eq!(argon["maxTokens"], 65_536);
    assert_eq!(argon["cost"]["input"], 4.0);
    assert_eq!(argon["cost"]["output"], 20.0);
    assert_eq!(argon["cost"]["cacheRead"], 0.2);
    let run = sb.run(&["--list-models", "gemini-4-argon"]);
    let row = run
        .stdout
        .lines()
        .find(|l| l.starts_with("google/gemini-4-argon"))
        .unwrap_or_else(|| panic!("{run}"));
    assert!(row.ends_with("google-generative-ai"), "{row}");
    // models.json can name the API too.
    let models = json!({"providers": {"lab": {"baseUrl": base(&server), "api": "google-generative-ai",
        "models": [{"id": "gemini-lab"}]}}});
    std::fs::write(sb.home().join("models.json"), models.to_string()).unwrap();
    let run = sb.run(&["--list-models", "gemini-lab", "--json"]);
    assert_eq!(
        run.stdout_lines()[0]["api"],
        "google-generative-ai",
        "{run}"
    );
}
