//! Which models a session can switch to (`get_available_models`, `set_model`, `cycle_model`,
//! the TUI's `/model` and ACP's model option all read the host's list): what the chosen
//! server serves, plus the built-in models of providers whose own keys are configured, each
//! reached only at its own URL with its own key. Two local servers: A is the one the user
//! chose; B stands in for OpenAI's and Anthropic's hosts (their `*_BASE_URL` variables point
//! at it), so a request that would have gone to a vendor lands on B, where the test sees it.
//! The chosen server's credentials never leave it, not even in an error.

use serde_json::{json, Value};

use crate::common::http_server::{Reply, Seen, Server};
use crate::common::rpc::Rpc;
use crate::common::support::{root, Sandbox};

const KEY_A: &str = "key-for-a-only";
const KEY_B: &str = "key-for-b-only";
const OPENAI_KEY: &str = "openai-key-unused";

fn bytes(path: &str) -> Vec<u8> {
    std::fs::read(root().join("fixtures/providers").join(path)).unwrap()
}

/// An OpenAI-compatible server that lists `a-1` and `a-2` and answers every completion.
fn server_a() -> Server {
    Server::start_with(|seen: &Seen| match seen.method.as_str() {
        "GET" => Reply::json(
            200,
            r#"{"object":"list","data":[{"id":"a-1"},{"id":"a-2"}]}"#,
        ),
        _ => Reply::sse(&bytes("openai/text.sse")),
    })
}

/// A stand-in for the vendors' hosts: Anthropic Messages or Chat Completions by path.
fn server_b() -> Server {
    Server::start_with(|seen: &Seen| match seen.path.ends_with("/messages") {
        true => Reply::sse(&bytes("anthropic/text.sse")),
        false => Reply::sse(&bytes("openai/text.sse")),
    })
}

/// `keel --mode rpc ARGS` with `env` added to the sandbox's cleared environment.
fn rpc(sb: &Sandbox, args: &[&str], env: &[(&str, &str)]) -> Rpc {
    let mut all = vec!["--mode", "rpc"];
    all.extend_from_slice(args);
    let mut cmd = sb.cmd(&all);
    for (k, v) in env {
        cmd.env(k, v);
    }
    Rpc::spawn(cmd)
}

/// `provider/id` of every model `get_available_models` lists.
fn listed(rpc: &mut Rpc) -> Vec<String> {
    let r = rpc.call(json!({"id": "list", "type": "get_available_models"}));
    assert_eq!(r["success"], true, "{r}");
    r["data"]["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            format!(
                "{}/{}",
                m["provider"].as_str().unwrap(),
                m["id"].as_str().unwrap()
            )
        })
        .collect()
}

fn set_model(rpc: &mut Rpc, provider: &str, id: &str) -> Value {
    rpc.call(json!({"id": "set", "type": "set_model", "provider": provider, "modelId": id}))
}

/// Sends a prompt and waits for the run to settle.
fn prompt(rpc: &mut Rpc, id: &str) {
    let r = rpc.call(json!({"id": id, "type": "prompt", "message": "hi"}));
    assert_eq!(r["success"], true, "{r}");
    rpc.wait(&json!({"type": "agent_settled"}));
}

/// Every header and the body of a request, to look for a key anywhere in it.
fn whole(seen: &Seen) -> String {
    let headers: Vec<String> = seen
        .headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}"))
        .collect();
    format!("{}\n{}", headers.join("\n"), seen.body)
}

fn finish(rpc: Rpc) {
    let (_, stderr, code) = rpc.finish();
    assert_eq!(code, 0, "{stderr}");
}

/// Regression: after `--base-url A --api-key KEY_A`, `get_available_models` listed OpenAI's
/// built-in models and picking one sent the conversation and KEY_A to OpenAI's host.
#[test]
fn model_switching_after_base_url_never_reaches_another_server_nor_sends_it_the_key() {
    let (sb, a, b) = (Sandbox::new(), server_a(), server_b());
    let (a_url, b_url) = (a.base_url(), b.base_url());
    let env = [
        ("OPENAI_BASE_URL", b_url.as_str()),
        ("ANTHROPIC_BASE_URL", b_url.as_str()),
        ("OPENAI_API_KEY", OPENAI_KEY),
    ];
    let args = ["--base-url", &a_url, "--api-key", KEY_A, "--model", "a-1"];
    let mut rpc = rpc(&sb, &args, &env);
    assert_eq!(listed(&mut rpc), ["openai/a-1", "openai/a-2"]);

    let r = set_model(&mut rpc, "openai", "gpt-4.1");
    assert_eq!(r["success"], false, "{r}");
    let error = r["error"].as_str().unwrap();
    assert!(
        error.contains(&a_url) && error.contains("a-1, a-2"),
        "{error}"
    );
    let r = set_model(&mut rpc, "anthropic", "claude-haiku-4-5");
    assert_eq!(r["success"], false, "{r}");
    assert!(
        r["error"].as_str().unwrap().contains("ANTHROPIC_API_KEY"),
        "{r}"
    );

    let mut landed = Vec::new();
    for n in 0..3 {
        let r = rpc.call(json!({"id": format!("c{n}"), "type": "cycle_model"}));
        landed.push(r["data"]["model"]["id"].as_str().unwrap().to_string());
        assert_eq!(r["data"]["model"]["baseUrl"], a_url.as_str(), "{r}");
    }
    assert_eq!(landed, ["a-2", "a-1", "a-2"]);
    prompt(&mut rpc, "p1");
    finish(rpc);

    assert!(b.seen().is_empty(), "B was asked: {:?}", b.seen());
    let seen = a.seen();
    assert_eq!(seen.len(), 2, "one model list, one completion: {seen:?}");
    assert_eq!(seen[1].json()["model"], "a-2");
    for s in &seen {
        assert_eq!(s.header("authorization"), Some("Bearer key-for-a-only"));
    }
}

/// Another provider whose own key is configured is listed; its models are reached at its own
/// URL with its own key, and the chosen server's key never goes there (nor the reverse).
#[test]
fn another_providers_models_are_reached_only_with_its_own_key_at_its_own_url() {
    let (sb, a, b) = (Sandbox::new(), server_a(), server_b());
    let (a_url, b_url) = (a.base_url(), b.base_url());
    let env = [
        ("ANTHROPIC_BASE_URL", b_url.as_str()),
        ("ANTHROPIC_API_KEY", KEY_B),
    ];
    let args = ["--base-url", &a_url, "--api-key", KEY_A, "--model", "a-1"];
    let mut rpc = rpc(&sb, &args, &env);
    let models = listed(&mut rpc);
    assert_eq!(models[..2], ["openai/a-1", "openai/a-2"]);
    assert!(
        models.contains(&"anthropic/claude-haiku-4-5".to_string()),
        "{models:?}"
    );
    assert!(!models.iter().any(|m| m.contains("gpt")), "{models:?}");

    let r = set_model(&mut rpc, "anthropic", "claude-haiku-4-5");
    assert_eq!(r["success"], true, "{r}");
    prompt(&mut rpc, "p1");
    let r = set_model(&mut rpc, "openai", "a-1");
    assert_eq!(r["success"], true, "{r}");
    prompt(&mut rpc, "p2");
    finish(rpc);

    let to_b = b.seen();
    assert_eq!(to_b.len(), 1, "{to_b:?}");
    assert_eq!(to_b[0].path, "/v1/messages");
    assert_eq!(to_b[0].header("x-api-key"), Some(KEY_B));
    assert!(!whole(&to_b[0]).contains(KEY_A), "{:?}", to_b[0]);
    let to_a = a.seen();
    assert_eq!(to_a.last().unwrap().json()["model"], "a-1");
    assert!(to_a.iter().all(|s| !whole(s).contains(KEY_B)), "{to_a:?}");
}

/// Regression: a keyless local provider (Ollama-style) listed OpenAI's built-in models
/// instead of what its server serves.
#[test]
fn a_keyless_provider_lists_what_its_server_serves_and_no_vendor_models() {
    let (sb, a, b) = (Sandbox::new(), server_a(), server_b());
    let (a_url, b_url) = (a.base_url(), b.base_url());
    let env = [
        ("OLLAMA_BASE_URL", a_url.as_str()),
        ("OPENAI_BASE_URL", b_url.as_str()),
        ("OPENAI_API_KEY", OPENAI_KEY),
    ];
    let mut rpc = rpc(&sb, &["--provider", "ollama", "--model", "a-1"], &env);
    assert_eq!(listed(&mut rpc), ["ollama/a-1", "ollama/a-2"]);
    let r = set_model(&mut rpc, "openai", "gpt-4.1");
    assert_eq!(r["success"], false, "{r}");
    assert!(
        r["error"].as_str().unwrap().contains("OPENAI_BASE_URL"),
        "{r}"
    );
    let r = rpc.call(json!({"id": "c", "type": "cycle_model"}));
    assert_eq!(r["data"]["model"]["id"], "a-2", "{r}");
    prompt(&mut rpc, "p1");
    finish(rpc);
    assert!(b.seen().is_empty(), "B was asked: {:?}", b.seen());
    assert!(a.seen().iter().all(|s| s.header("authorization").is_none()));
}

/// With `OPENAI_BASE_URL`, the openai provider is the user's server: its models are what that
/// server lists, not OpenAI's.
#[test]
fn openai_base_url_lists_what_that_server_serves() {
    let (sb, a, b) = (Sandbox::new(), server_a(), server_b());
    let (a_url, b_url) = (a.base_url(), b.base_url());
    let env = [
        ("OPENAI_BASE_URL", a_url.as_str()),
        ("OPENAI_API_KEY", KEY_A),
        ("ANTHROPIC_BASE_URL", b_url.as_str()),
    ];
    let mut rpc = rpc(&sb, &["--model", "a-1"], &env);
    assert_eq!(listed(&mut rpc), ["openai/a-1", "openai/a-2"]);
    let r = set_model(&mut rpc, "openai", "gpt-5");
    assert_eq!(r["success"], false, "{r}");
    finish(rpc);
    assert!(b.seen().is_empty(), "B was asked: {:?}", b.seen());
    assert_eq!(a.seen().len(), 1, "only the model list: {:?}", a.seen());
}

/// A server that does not list its models offers only the model keel started with.
#[test]
fn a_server_that_lists_no_models_offers_only_the_start_model() {
    let sb = Sandbox::new();
    let a = Server::start_with(|_: &Seen| Reply::json(404, "404 page not found"));
    let a_url = a.base_url();
    let mut rpc = rpc(&sb, &["--base-url", &a_url, "--model", "a-1"], &[]);
    assert_eq!(listed(&mut rpc), ["openai/a-1"]);
    let r = rpc.call(json!({"id": "c", "type": "cycle_model"}));
    assert_eq!(r["data"], Value::Null, "{r}");
    assert_eq!(listed(&mut rpc), ["openai/a-1"]);
    finish(rpc);
    assert_eq!(
        a.seen().len(),
        1,
        "the list is asked for once: {:?}",
        a.seen()
    );
}

#[test]
fn a_base_urls_password_never_appears_in_an_error() {
    // keel printed `--base-url`'s userinfo in "cannot reach URL" errors and hints.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://keel:base-url-secret@127.0.0.1:{port}/v1");
    let sb = Sandbox::new();
    let base = [
        "-p",
        "--base-url",
        &url,
        "--api-key",
        "k",
        "--max-retries",
        "0",
    ];
    for (extra, code) in [(&[][..], 3), (&["--model", "m"][..], 1)] {
        let mut args = base.to_vec();
        args.extend_from_slice(extra);
        args.push("hi");
        let run = sb.run(&args);
        assert_eq!(run.code, code, "{run}");
        assert!(
            run.stderr.contains(&format!(
                "cannot reach http://keel:***@127.0.0.1:{port}/v1/"
            )),
            "{run}"
        );
        assert!(!run.to_string().contains("base-url-secret"), "{run}");
    }
}
