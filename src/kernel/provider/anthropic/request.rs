//! The Messages API request body: system prompt with cache breakpoints, alternating-role
//! messages, tool definitions and the thinking budget (or adaptive effort) of a
//! [`ModelRequest`]. Pure.

use std::collections::HashSet;

use serde_json::{json, Map, Value};

use crate::kernel::message::{AssistantMessage, Content, Message, ToolResultMessage};
use crate::kernel::provider::model::{ModelInfo, API_ANTHROPIC};
use crate::kernel::provider::ModelRequest;

/// The smallest thinking budget the API accepts.
const MIN_THINKING_BUDGET: u64 = 1024;

/// The JSON body for a streamed `POST {base_url}/v1/messages` call.
///
/// The system prompt and the last block of the last user message carry `cache_control`
/// breakpoints (prompt caching). Assistant messages that ended in an error or an abort are left
/// out, together with the results of their tool calls; consecutive messages of the same role are
/// merged into one. Thinking is enabled with a token budget when the model reasons and the
/// clamped level is not `off`.
pub fn request_body(req: &ModelRequest, model: &ModelInfo) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(model.id));
    body.insert("max_tokens".into(), json!(model.max_tokens));
    body.insert("stream".into(), json!(true));
    let mut system = Vec::new();
    if !req.system_prompt.is_empty() {
        system.push(json!({
            "type": "text",
            "text": req.system_prompt,
            "cache_control": {"type": "ephemeral"},
        }));
    }
    if let Some(schema) = &req.output_schema {
        // An instruction, not a forced tool: forcing a tool is refused with thinking on and
        // would keep the agent from its own tools; keel validates and repairs the answer.
        system.push(json!({"type": "text", "text": schema_instruction(schema)}));
    }
    if !system.is_empty() {
        body.insert("system".into(), Value::Array(system));
    }
    body.insert("messages".into(), Value::Array(messages(&req.messages)));
    if !req.tools.is_empty() {
        let tools = req
            .tools
            .iter()
            .map(|t| {
                json!({
                    "name": t.name,
                    "description": t.description,
                    "input_schema": t.parameters,
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if model.reasoning && model.adaptive_thinking {
        let level = model.clamp_thinking(&req.thinking_level);
        if level != "off" {
            // Adaptive effort has no `minimal`.
            let effort = if level == "minimal" { "low" } else { &level };
            body.insert("thinking".into(), json!({"type": "adaptive"}));
            body.insert("output_config".into(), json!({"effort": effort}));
        }
    } else if model.reasoning {
        let level = model.clamp_thinking(&req.thinking_level);
        if let Some(budget) = thinking_budget(&level, model.max_tokens) {
            body.insert(
                "thinking".into(),
                json!({"type": "enabled", "budget_tokens": budget}),
            );
        }
    }
    Value::Object(body)
}

/// What the model is told when its final answer must match `schema`.
fn schema_instruction(schema: &Value) -> String {
    format!(
        "When you give your final answer, reply with only a JSON value (no prose, no code \
         fence) that matches this JSON Schema:\n{schema}"
    )
}

/// The thinking budget for a level, kept below `max_tokens` as the API requires. `None` for
/// `off`, unknown levels, and limits too small to fit the minimum budget.
fn thinking_budget(level: &str, max_tokens: u64) -> Option<u64> {
    let mut budget = match level {
        "minimal" => MIN_THINKING_BUDGET,
        "low" => 4096,
        "medium" => 10240,
        "high" => 20480,
        "xhigh" => 32000,
        _ => return None,
    };
    if budget >= max_tokens {
        budget = max_tokens
            .saturating_sub(MIN_THINKING_BUDGET)
            .max(MIN_THINKING_BUDGET);
    }
    (budget < max_tokens).then_some(budget)
}

/// The conversation as API messages: alternating roles, cache breakpoint on the last user turn.
fn messages(history: &[Message]) -> Vec<Value> {
    let dropped_calls: HashSet<&str> = history
        .iter()
        .filter_map(|m| match m {
            Message::Assistant(a) if a.is_failed() => Some(a),
            _ => None,
        })
        .flat_map(|a| a.content.iter())
        .filter_map(|c| match c {
            Content::ToolCall { id, .. } => Some(id.as_str()),
            _ => None,
        })
        .collect();

    let mut out: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for m in history {
        match m {
            Message::User(u) => push_blocks(&mut out, "user", plain_blocks(&u.content)),
            Message::Assistant(a) if !a.is_failed() => {
                push_blocks(&mut out, "assistant", assistant_blocks(a))
            }
            Message::Assistant(_) => {}
            Message::ToolResult(r) if !dropped_calls.contains(r.tool_call_id.as_str()) => {
                push_blocks(&mut out, "user", vec![tool_result_block(r)])
            }
            Message::ToolResult(_) => {}
        }
    }

    if let Some((_, blocks)) = out.iter_mut().rev().find(|(role, _)| *role == "user") {
        if let Some(Value::Object(last)) = blocks.last_mut() {
            last.insert("cache_control".into(), json!({"type": "ephemeral"}));
        }
    }

    out.into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect()
}

/// Appends blocks as a message of `role`, merging into the previous message when it has the
/// same role. Merged `tool_result` blocks go before any other block, as the API requires.
fn push_blocks(out: &mut Vec<(&'static str, Vec<Value>)>, role: &'static str, blocks: Vec<Value>) {
    if blocks.is_empty() {
        return;
    }
    match out.last_mut() {
        Some((last_role, existing)) if *last_role == role => {
            for block in blocks {
                if is_tool_result(&block) {
                    let at = existing.iter().take_while(|b| is_tool_result(b)).count();
                    existing.insert(at, block);
                } else {
                    existing.push(block);
                }
            }
        }
        _ => out.push((role, blocks)),
    }
}

fn is_tool_result(block: &Value) -> bool {
    block.get("type").and_then(Value::as_str) == Some("tool_result")
}

/// Text and image blocks of user or tool-result content. Empty text is dropped (the API rejects
/// empty text blocks); thinking and tool calls never appear there and are dropped too.
fn plain_blocks(content: &[Content]) -> Vec<Value> {
    content
        .iter()
        .filter_map(|c| match c {
            Content::Text { text } if !text.is_empty() => {
                Some(json!({"type": "text", "text": text}))
            }
            Content::Image { data, mime_type } => Some(json!({
                "type": "image",
                "source": {"type": "base64", "media_type": mime_type, "data": data},
            })),
            _ => None,
        })
        .collect()
}

/// The blocks of a kept assistant message, in order. Thinking without a signature is dropped
/// (the API rejects it), as is thinking another API made (its signature is not Anthropic's),
/// empty text and images.
fn assistant_blocks(m: &AssistantMessage) -> Vec<Value> {
    let own_thinking = m.api.is_empty() || m.api == API_ANTHROPIC;
    m.content
        .iter()
        .filter_map(|c| match c {
            Content::Thinking {
                thinking,
                signature: Some(signature),
            } if own_thinking && !signature.is_empty() => Some(json!({
                "type": "thinking",
                "thinking": thinking,
                "signature": signature,
            })),
            Content::Text { text } if !text.is_empty() => {
                Some(json!({"type": "text", "text": text}))
            }
            Content::ToolCall {
                id,
                name,
                arguments,
            } => {
                let input = if arguments.is_object() {
                    arguments.clone()
                } else {
                    json!({})
                };
                Some(json!({"type": "tool_use", "id": id, "name": name, "input": input}))
            }
            _ => None,
        })
        .collect()
}

/// A `tool_result` block; `content` is left out when the result has no text or image.
fn tool_result_block(r: &ToolResultMessage) -> Value {
    let mut block = Map::new();
    block.insert("type".into(), json!("tool_result"));
    block.insert("tool_use_id".into(), json!(r.tool_call_id));
    let content = plain_blocks(&r.content);
    if !content.is_empty() {
        block.insert("content".into(), Value::Array(content));
    }
    block.insert("is_error".into(), json!(r.is_error));
    Value::Object(block)
}

#[cfg(test)]
mod tests {
    use super::super::sonnet;
    use super::*;
    use crate::kernel::message::{StopReason, Usage, UserMessage};
    use crate::kernel::tool::ToolSpec;

    fn user(text: &str, timestamp: i64) -> Message {
        Message::user(text, timestamp)
    }

    fn assistant(content: Vec<Content>, stop_reason: StopReason) -> Message {
        Message::from(AssistantMessage {
            content,
            api: API_ANTHROPIC.into(),
            provider: "anthropic".into(),
            model: "claude-sonnet-4-5".into(),
            usage: Usage::default(),
            stop_reason,
            error_message: None,
            duration_ms: None,
            timestamp: 0,
        })
    }

    fn tool_result(id: &str, content: Vec<Content>, is_error: bool) -> Message {
        Message::from(ToolResultMessage {
            tool_call_id: id.into(),
            tool_name: "bash".into(),
            content,
            details: None,
            is_error,
            duration_ms: None,
            timestamp: 0,
        })
    }

    fn call(id: &str, arguments: Value) -> Content {
        Content::ToolCall {
            id: id.into(),
            name: "bash".into(),
            arguments,
        }
    }

    #[test]
    fn request_body_converts_the_conversation() {
        let req = ModelRequest {
            system_prompt: "You are keel.".into(),
            messages: vec![
                Message::from(UserMessage {
                    content: vec![
                        Content::text("What is in here?"),
                        Content::Image {
                            data: "iVBORw0KGgo=".into(),
                            mime_type: "image/png".into(),
                        },
                    ],
                    timestamp: 1,
                }),
                assistant(
                    vec![
                        Content::Thinking {
                            thinking: "Look first.".into(),
                            signature: Some("sig-1".into()),
                        },
                        Content::Thinking {
                            thinking: "unsigned, from another provider".into(),
                            signature: None,
                        },
                        Content::text("Let me look."),
                        call("toolu_a", json!({"command": "ls"})),
                        call("toolu_b", json!("{\"command\": \"cat")),
                    ],
                    StopReason::ToolUse,
                ),
                tool_result("toolu_a", vec![Content::text("a.txt\nb.txt")], false),
                tool_result("toolu_b", vec![Content::text("bad arguments")], true),
                user("Only the text files, please.", 2),
                assistant(
                    vec![
                        Content::text("Partial"),
                        call("toolu_c", json!({"command": "find"})),
                    ],
                    StopReason::Error,
                ),
                tool_result("toolu_c", vec![Content::text("never sent")], true),
                user("Try again.", 3),
            ],
            tools: vec![ToolSpec {
                name: "bash".into(),
                description: "Run a shell command".into(),
                parameters: json!({"type": "object", "properties": {"command": {"type": "string"}}}),
            }],
            thinking_level: "high".into(),
            session_id: None,
            output_schema: None,
        };
        let want = json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 64000,
            "stream": true,
            "system": [{"type": "text", "text": "You are keel.", "cache_control": {"type": "ephemeral"}}],
            "messages": [
                {"role": "user", "content": [
                    {"type": "text", "text": "What is in here?"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
                ]},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "Look first.", "signature": "sig-1"},
                    {"type": "text", "text": "Let me look."},
                    {"type": "tool_use", "id": "toolu_a", "name": "bash", "input": {"command": "ls"}},
                    {"type": "tool_use", "id": "toolu_b", "name": "bash", "input": {}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_a", "content": [{"type": "text", "text": "a.txt\nb.txt"}], "is_error": false},
                    {"type": "tool_result", "tool_use_id": "toolu_b", "content": [{"type": "text", "text": "bad arguments"}], "is_error": true},
                    {"type": "text", "text": "Only the text files, please."},
                    {"type": "text", "text": "Try again.", "cache_control": {"type": "ephemeral"}},
                ]},
            ],
            "tools": [{
                "name": "bash",
                "description": "Run a shell command",
                "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
            }],
            "thinking": {"type": "enabled", "budget_tokens": 20480},
        });
        let model = sonnet();
        assert_eq!(request_body(&req, &model), want);

        // A small output limit: the budget stays below max_tokens.
        let mut small = model.clone();
        small.max_tokens = 8192;
        let body = request_body(&req, &small);
        assert_eq!(
            body["thinking"],
            json!({"type": "enabled", "budget_tokens": 7168})
        );
        assert_eq!(body["max_tokens"], json!(8192));
        small.max_tokens = 1500;
        assert_eq!(
            request_body(&req, &small)["thinking"]["budget_tokens"],
            json!(1024)
        );
        small.max_tokens = 1024;
        assert!(request_body(&req, &small).get("thinking").is_none());
    }

    #[test]
    fn request_body_without_system_tools_or_thinking() {
        let mut model = sonnet();
        let mut req = ModelRequest {
            system_prompt: String::new(),
            messages: vec![
                user("hi", 1),
                tool_result("toolu_x", vec![], false),
                assistant(vec![Content::text("")], StopReason::Stop),
            ],
            tools: vec![],
            thinking_level: "off".into(),
            session_id: None,
            output_schema: None,
        };
        let want = json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 64000,
            "stream": true,
            "messages": [{"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_x", "is_error": false},
                {"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}},
            ]}],
        });
        assert_eq!(request_body(&req, &model), want);
        // A level the model lacks is clamped; a model without reasoning never thinks.
        model.thinking_levels = vec!["off".into(), "low".into()];
        req.thinking_level = "xhigh".into();
        assert_eq!(
            request_body(&req, &model)["thinking"],
            json!({"type": "enabled", "budget_tokens": 4096})
        );
        model.reasoning = false;
        assert!(request_body(&req, &model).get("thinking").is_none());
    }

    #[test]
    fn adaptive_models_get_an_effort_not_a_budget() {
        let mut model = sonnet();
        model.adaptive_thinking = true;
        let mut req = ModelRequest {
            system_prompt: String::new(),
            messages: vec![user("hi", 1)],
            tools: vec![],
            thinking_level: "high".into(),
            session_id: None,
            output_schema: None,
        };
        let body = request_body(&req, &model);
        assert_eq!(body["thinking"], json!({"type": "adaptive"}));
        assert_eq!(body["output_config"], json!({"effort": "high"}));
        // Adaptive effort has no `minimal`: the weakest is `low`.
        req.thinking_level = "minimal".into();
        assert_eq!(
            request_body(&req, &model)["output_config"],
            json!({"effort": "low"})
        );
        req.thinking_level = "off".into();
        let body = request_body(&req, &model);
        assert!(body.get("thinking").is_none() && body.get("output_config").is_none());
    }

    /// Regression guard: a Responses reasoning item kept as a thinking signature must never
    /// reach Anthropic as one (the API answers 400 to a signature it did not make).
    #[test]
    fn thinking_of_another_api_is_not_sent() {
        let mut other = AssistantMessage {
            content: vec![
                Content::Thinking {
                    thinking: "summary".into(),
                    signature: Some(r#"{"type":"reasoning","encrypted_content":"x"}"#.into()),
                },
                Content::text("done"),
            ],
            api: "openai-responses".into(),
            provider: "openai".into(),
            model: "gpt-6.2-sol".into(),
            usage: Usage::default(),
            stop_reason: StopReason::Stop,
            error_message: None,
            duration_ms: None,
            timestamp: 0,
        };
        let req = |m: &AssistantMessage| ModelRequest {
            system_prompt: String::new(),
            messages: vec![user("hi", 1), Message::from(m.clone()), user("more", 2)],
            tools: vec![],
            thinking_level: "off".into(),
            session_id: None,
            output_schema: None,
        };
        let body = request_body(&req(&other), &sonnet());
        assert_eq!(
            body["messages"][1]["content"],
            json!([{"type": "text", "text": "done"}])
        );
        other.api = API_ANTHROPIC.into();
        let body = request_body(&req(&other), &sonnet());
        assert_eq!(body["messages"][1]["content"][0]["type"], "thinking");
    }
}
