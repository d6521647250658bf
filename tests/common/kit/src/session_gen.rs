//! A deterministic generator of long, realistic pi v3 session files (user prompts, assistant
//! turns with thinking, text and tool calls, tool results of a few hundred bytes to tens of
//! KB), shared by the bench and the integration tests. Only builds text; never touches disk.

use std::fmt::Write as _;

use serde_json::{json, Value};

/// The header's timestamp, and the time every entry is stamped with.
pub const SESSION_TS: &str = "2026-01-01T00:00:00.000Z";
/// Unix ms of [`SESSION_TS`].
const SESSION_MS: u64 = 1_767_225_600_000;

/// A small xorshift generator: the same seed always gives the same file.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A number in `lo..=hi`.
    fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next() % (hi - lo + 1) as u64) as usize
    }
}

const WORDS: [&str; 24] = [
    "the", "parser", "returns", "an", "error", "when", "session", "file", "is", "torn", "so", "we",
    "should", "check", "branch", "before", "writing", "entry", "tool", "result", "model",
    "context", "function", "test",
];

const CODE: [&str; 8] = [
    "    let entry = store.entry(id).ok_or(\"missing\")?;",
    "    for (i, line) in bytes.split(|b| *b == b'\\n').enumerate() {",
    "        out.push_str(&format!(\"{i}: {}\", line.trim()));",
    "    }",
    "fn parse_header(path: &Path, raw: &[u8]) -> Result<Header, Error> {",
    "\t// a tab-indented comment with \"quotes\" and a backslash \\",
    "    assert_eq!(warnings, [\"skipped torn line 3\"]);",
    "}",
];

/// Prose of `lo..=hi` bytes (rounded up to a word).
fn prose(rng: &mut Rng, lo: usize, hi: usize) -> String {
    let len = rng.range(lo, hi);
    let mut s = String::with_capacity(len + 16);
    while s.len() < len {
        if !s.is_empty() {
            s.push(if rng.next().is_multiple_of(11) {
                '\n'
            } else {
                ' '
            });
        }
        s.push_str(WORDS[rng.range(0, WORDS.len() - 1)]);
    }
    s
}

/// Source-code-like text of `lo..=hi` bytes (rounded up to a line), with the newlines, quotes,
/// tabs and backslashes that JSON escapes.
fn code(rng: &mut Rng, lo: usize, hi: usize) -> String {
    let len = rng.range(lo, hi);
    let mut s = String::with_capacity(len + 80);
    let mut n = 1;
    while s.len() < len {
        let _ = writeln!(s, "{n:>4}\t{}", CODE[rng.range(0, CODE.len() - 1)]);
        n += 1;
    }
    s
}

fn usage(rng: &mut Rng) -> Value {
    let input = rng.range(2_000, 60_000);
    let output = rng.range(50, 2_000);
    json!({
        "input": input, "output": output, "cacheRead": rng.range(0, input), "cacheWrite": 0,
        "totalTokens": input + output,
        "cost": {"input": 0.003, "output": 0.0015, "cacheRead": 0.0, "cacheWrite": 0.0, "total": 0.0045},
    })
}

fn assistant(rng: &mut Rng, content: Vec<Value>, stop: &str) -> Value {
    json!({
        "role": "assistant", "content": content, "api": "anthropic-messages",
        "provider": "anthropic", "model": "claude-sonnet-4-5", "usage": usage(rng),
        "stopReason": stop, "timestamp": SESSION_MS,
    })
}

/// One tool call with realistic arguments, and the result it got.
fn tool_round(rng: &mut Rng, call: usize) -> (Value, Value) {
    let id = format!("toolu_{call:012x}");
    let path = format!("src/kernel/module_{}.rs", rng.range(1, 40));
    let (name, args, result, details) = match rng.range(0, 3) {
        0 => {
            // Every 25th read is a big file (tens of KB), the rest a few KB.
            let text = if call.is_multiple_of(25) {
                code(rng, 20_000, 50_000)
            } else {
                code(rng, 500, 4_000)
            };
            ("read", json!({"path": path}), text, None)
        }
        1 => {
            let old = code(rng, 100, 600);
            let new = code(rng, 100, 800);
            let diff = format!("--- {path}\n+++ {path}\n@@ -1 +1 @@\n-{old}+{new}");
            let args = json!({"path": path, "oldText": old, "newText": new});
            let text = format!("Successfully replaced text in {path}.");
            (
                "edit",
                args,
                text,
                Some(json!({"diff": diff, "firstChangedLine": 1})),
            )
        }
        2 => {
            let cmd = "cargo test --locked 2>&1 | tail -n 40";
            let out = code(rng, 300, 3_000);
            ("bash", json!({"command": cmd}), out, None)
        }
        _ => {
            let out = prose(rng, 200, 1_500);
            let args = json!({"pattern": "fn parse", "path": "src"});
            ("grep", args, out, None)
        }
    };
    let call_block = json!({"type": "toolCall", "id": id, "name": name, "arguments": args});
    let mut result = json!({
        "role": "toolResult", "toolCallId": id, "toolName": name,
        "content": [{"type": "text", "text": result}], "isError": rng.next().is_multiple_of(20),
        "timestamp": SESSION_MS,
    });
    if let Some(d) = details {
        result["details"] = d;
    }
    (call_block, result)
}

/// The messages of one user turn: the prompt, then assistant/tool-result rounds, then the
/// final answer. Always ends on an assistant message without tool calls.
fn turn(rng: &mut Rng, calls: &mut usize) -> Vec<Value> {
    let mut out = vec![json!({
        "role": "user",
        "content": [{"type": "text", "text": prose(rng, 80, 1_200)}],
        "timestamp": SESSION_MS,
    })];
    for _ in 0..rng.range(1, 6) {
        *calls += 1;
        let (call, result) = tool_round(rng, *calls);
        let content = vec![
            json!({"type": "thinking", "thinking": prose(rng, 100, 900),
                   "thinkingSignature": "EqQBCkYIBxgCKkDsig"}),
            json!({"type": "text", "text": prose(rng, 40, 300)}),
            call,
        ];
        out.push(assistant(rng, content, "toolUse"));
        out.push(result);
    }
    let answer = vec![json!({"type": "text", "text": prose(rng, 200, 2_000)})];
    out.push(assistant(rng, answer, "stop"));
    out
}

/// A session file of exactly `entries` entries after the header: one `model_change`, then
/// whole turns of messages, each entry the child of the one before. The last turn is cut so
/// that the file ends on a finished assistant answer (no unanswered tool call). Every byte
/// depends only on `cwd`, `id` and `entries`.
pub fn session_text(cwd: &str, id: &str, entries: usize) -> String {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut text = String::with_capacity(entries * 2_000);
    let header = json!({
        "type": "session", "version": 3, "id": id, "timestamp": SESSION_TS, "cwd": cwd,
    });
    let _ = writeln!(text, "{header}");
    let mut line = |n: usize, parent: Option<String>, fields: Value| -> String {
        let id = format!("{:08x}", 0x1000_0000 + n);
        let mut entry = json!({"type": "message", "id": id, "parentId": parent,
                               "timestamp": SESSION_TS});
        if let (Some(e), Value::Object(f)) = (entry.as_object_mut(), fields) {
            e.extend(f);
        }
        let _ = writeln!(text, "{entry}");
        id
    };
    let change = json!({"type": "model_change", "provider": "anthropic",
                        "modelId": "claude-sonnet-4-5"});
    let mut parent = Some(line(0, None, change));
    let mut calls = 0;
    let mut n = 1;
    while n < entries {
        let mut messages = turn(&mut rng, &mut calls);
        let left = entries - n;
        if messages.len() > left {
            // Cut the turn short and close it with a plain answer.
            messages.truncate(left.saturating_sub(1));
            if messages.last().is_some_and(|m| m["role"] == "assistant") {
                messages.pop();
                messages.push(json!({"role": "user", "content": "go on", "timestamp": SESSION_MS}));
            }
            let answer = vec![json!({"type": "text", "text": "done"})];
            messages.push(assistant(&mut rng, answer, "stop"));
        }
        for m in messages {
            parent = Some(line(n, parent, json!({"message": m})));
            n += 1;
        }
    }
    text
}
