//! kill -9 at random points of multi-turn tool runs, each followed by a resume against a
//! strict local OpenAI-compatible server (one that refuses, as llama.cpp's and OpenAI's do, a
//! request with a tool call that has no result, or a `null` assistant content). The session
//! must never be poisoned and must lose at most the entry being written when the kill came.
//! `make check` runs 30 kills; `make chaos` runs 300 (`KEEL_CHAOS_KILLS`). The random seed is
//! printed and can be replayed with `KEEL_CHAOS_SEED`.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use crate::common::http_server::{Reply, Seen, Server};
use crate::common::support::Sandbox;

/// Tool rounds the server asks for per prompt before it answers.
const ROUNDS: usize = 3;

/// What is wrong with a Chat Completions request for a strict server, if anything.
fn violation(body: &Value) -> Option<String> {
    let messages = body["messages"].as_array()?;
    let mut open: Vec<String> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let role = m["role"].as_str().unwrap_or("");
        if role == "tool" {
            let id = m["tool_call_id"].as_str().unwrap_or("");
            if !open.iter().any(|o| o == id) {
                return Some(format!("message {i}: a tool result for unknown call {id}"));
            }
            open.retain(|o| o != id);
            continue;
        }
        if !open.is_empty() {
            return Some(format!(
                "message {i} ({role}): tool calls without a result: {open:?}"
            ));
        }
        if role == "assistant" {
            if m.get("content").is_some_and(Value::is_null) {
                return Some(format!("message {i}: assistant content is null"));
            }
            for call in m["tool_calls"].as_array().into_iter().flatten() {
                open.push(call["id"].as_str().unwrap_or("").to_string());
            }
        }
    }
    (!open.is_empty()).then(|| format!("the request ends with unanswered tool calls: {open:?}"))
}

fn chunk(delta: Value, finish: Option<&str>) -> String {
    let c = json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "strict",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    format!("data: {c}\n\n")
}

/// The strict server's answer: a `bash` tool call while the prompt has had fewer than
/// `ROUNDS` tool results, then a short text answer.
fn answer(seen: &Seen, violations: &Mutex<Vec<String>>) -> Reply {
    let body = seen.json();
    if let Some(v) = violation(&body) {
        violations.lock().unwrap().push(v.clone());
        let err = json!({"error": {"message": v, "type": "invalid_request_error"}});
        return Reply::json(400, &err.to_string());
    }
    let messages = body["messages"].as_array().unwrap();
    let last_user = messages
        .iter()
        .rposition(|m| m["role"] == "user")
        .unwrap_or(0);
    let results = messages[last_user..]
        .iter()
        .filter(|m| m["role"] == "tool")
        .count();
    let total = messages.iter().filter(|m| m["role"] == "tool").count();
    let mut sse = chunk(json!({"role": "assistant", "content": ""}), None);
    if results < ROUNDS {
        let id = format!("call_{total}");
        let args = json!({"command": format!("sleep 0.03; echo step {total}")}).to_string();
        let call = json!({"tool_calls": [{"index": 0, "id": id, "type": "function",
            "function": {"name": "bash", "arguments": args}}]});
        sse.push_str(&chunk(call, None));
        sse.push_str(&chunk(json!({}), Some("tool_calls")));
    } else {
        sse.push_str(&chunk(json!({"content": "All steps ran."}), None));
        sse.push_str(&chunk(json!({}), Some("stop")));
    }
    sse.push_str("data: [DONE]\n\n");
    Reply::sse(sse.as_bytes())
}

/// xorshift64*: a small deterministic generator for kill points.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n as u64) as usize
    }
}

fn message_entries(sb: &Sandbox) -> usize {
    sb.session_files()
        .iter()
        .map(|p| {
            let bytes = std::fs::read(p).unwrap();
            String::from_utf8_lossy(&bytes)
                .lines()
                .filter(|l| l.starts_with(r#"{"type":"message""#))
                .count()
        })
        .sum()
}

#[test]
fn kill_9_during_tool_runs_never_poisons_the_session() {
    let kills: usize = std::env::var("KEEL_CHAOS_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    let seed: u64 = std::env::var("KEEL_CHAOS_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
            t.map(|d| d.as_nanos() as u64).unwrap_or(1) | 1
        });
    println!("chaos seed {seed} (replay with KEEL_CHAOS_SEED={seed})");
    let mut rng = Rng(seed);
    let violations = Arc::new(Mutex::new(Vec::new()));
    let v = violations.clone();
    let server = Server::start_with(move |seen| answer(seen, &v));
    let url = server.base_url();
    let mut sb = Sandbox::new();
    let args = |prompt: &str| -> Vec<String> {
        [
            "--json",
            "--provider",
            "openai",
            "--base-url",
            &url,
            "--model",
            "strict",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain(["--session-id", "chaos", "--max-retries", "0", prompt].map(String::from))
        .collect()
    };
    let (mut killed, mut resumed, mut lost) = (0usize, 0usize, 0usize);
    let mut attempt = 0usize;
    while killed < kills {
        attempt += 1;
        assert!(
            attempt < kills * 4,
            "too few runs were still going when killed"
        );
        // A new seed each run: the fixed test clock would otherwise draw the same ids.
        sb.seed += 1;
        let before = message_entries(&sb);
        let prompt = format!("task {attempt}");
        let argv = args(&prompt);
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let mut child = sb
            .cmd(&argv)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // A full run writes about 40 lines; kill after a random one of the first 36.
        let kill_at = 1 + rng.below(36);
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut ended = 0usize;
        let mut lines = 0usize;
        let mut line = String::new();
        while lines < kill_at {
            line.clear();
            if stdout.read_line(&mut line).unwrap() == 0 {
                break;
            }
            lines += 1;
            if line.starts_with(r#"{"type":"message_end""#) {
                ended += 1;
            }
        }
        let _ = child.kill(); // SIGKILL
        let status = child.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        if status.signal() != Some(9) {
            continue; // the run ended before the kill point
        }
        killed += 1;
        let saved = message_entries(&sb) - before;
        // At most the entry being written when the kill came may be missing.
        let missing = ended.saturating_sub(saved);
        assert!(
            missing <= 1,
            "kill {killed}: {ended} messages ended, {saved} saved"
        );
        lost += missing;
        sb.seed += 1;
        let resume = sb.run(
            &argv
                .iter()
                .map(|a| if *a == prompt { "continue" } else { a })
                .collect::<Vec<_>>(),
        );
        assert_eq!(
            resume.code,
            0,
            "resume after kill {killed} (seed {seed}): {resume}\nviolations: {:?}",
            violations.lock().unwrap()
        );
        assert_eq!(
            resume.stdout_lines().pop().unwrap()["finalText"],
            "All steps ran."
        );
        resumed += 1;
    }
    assert!(
        violations.lock().unwrap().is_empty(),
        "{:?}",
        violations.lock().unwrap()
    );
    println!("chaos: {killed} kills, {resumed} resumes, {lost} entries lost, seed {seed}");
}
