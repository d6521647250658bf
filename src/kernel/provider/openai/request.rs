//! The Chat Completions request body: the system prompt, the conversation and the tools of a
//! [`ModelRequest`] as OpenAI-compatible JSON. Pure; never touches the network.

use std::collections::HashSet;

use serde_json::{json, Map, Value};

use crate::kernel::message::{joined_text, AssistantMessage, Content, Message, ToolResultMessage};
use crate::kernel::output_schema::SCHEMA_NAME;
use crate::kernel::provider::model::ModelInfo;
use crate::kernel::provider::ModelRequest;

/// JSON body for `POST {base_url}/chat/completions`: a streamed completion of `req` by `model`.
pub fn request_body(req: &ModelRequest, model: &ModelInfo) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), Value::String(model.id.clone()));
    body.insert("messages".into(), Value::Array(wire_messages(req)));
    if !req.tools.is_empty() {
        let tools = req
            .tools
            .iter()
            .map(|t| {
                json!({
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    }
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    body.insert("stream".into(), Value::Bool(true));
    if model.compat.stream_usage {
        body.insert("stream_options".into(), json!({ "include_usage": true }));
    }
    body.insert(
        model.compat.max_tokens_field.to_string(),
        json!(model.max_tokens),
    );
    let level = model.clamp_thinking(&req.thinking_level);
    if model.reasoning && model.compat.reasoning_effort && level != "off" {
        // Chat Completions knows no effort above `high`.
        let effort = if level == "xhigh" { "high" } else { &level };
        body.insert("reasoning_effort".into(), json!(effort));
    }
    if let Some(schema) = &req.output_schema {
        body.insert(
            "response_format".into(),
            json!({"type": "json_schema", "json_schema": {
                "name": SCHEMA_NAME, "schema": schema, "strict": true,
            }}),
        );
    }
    Value::Object(body)
}

/// The system prompt and the conversation as Chat Completions messages. Failed assistant
/// attempts (and the results of their tool calls) are left out.
fn wire_messages(req: &ModelRequest) -> Vec<Value> {
    let mut out = Vec::with_capacity(req.messages.len() + 1);
    if !req.system_prompt.is_empty() {
        out.push(json!({ "role": "system", "content": req.system_prompt }));
    }
    let mut dropped_calls: HashSet<&str> = HashSet::new();
    for message in &req.messages {
        match message {
            Message::User(u) => out.push(user_message(&u.content)),
            Message::Assistant(a) => match assistant_message(a) {
                Some(m) => out.push(m),
                None => dropped_calls.extend(a.content.iter().filter_map(|c| match c {
                    Content::ToolCall { id, .. } => Some(id.as_str()),
                    _ => None,
                })),
            },
            Message::ToolResult(r) => {
                if !dropped_calls.contains(r.tool_call_id.as_str()) {
                    out.push(tool_result_message(r));
                }
            }
        }
    }
    out
}

fn user_message(content: &[Content]) -> Value {
    if !content.iter().any(|c| matches!(c, Content::Image { .. })) {
        return json!({ "role": "user", "content": joined_text(content) });
    }
    let parts: Vec<Value> = content
        .iter()
        .filter_map(|c| match c {
            Content::Text { text } => Some(json!({ "type": "text", "text": text })),
            Content::Image { data, mime_type } => Some(json!({
                "type": "image_url",
                "image_url": { "url": format!("data:{mime_type};base64,{data}") },
            })),
            _ => None,
        })
        .collect();
    json!({ "role": "user", "content": parts })
}

/// `None` when the message must not be sent: a failed attempt, or nothing to say.
fn assistant_message(a: &AssistantMessage) -> Option<Value> {
    if a.is_failed() {
        return None;
    }
    let text = joined_text(&a.content);
    let calls: Vec<Value> = a
        .content
        .iter()
        .filter_map(|c| match c {
            Content::ToolCall {
                id,
                name,
                arguments,
            } => {
                // Arguments that did not parse were kept as the raw string; send them back as
                // the model wrote them.
                let arguments = match arguments {
                    Value::String(raw) => raw.clone(),
                    other => other.to_string(),
                };
                Some(json!({
                    "id": id,
                    "type": "function",
                    "function": { "name": name, "arguments": arguments },
                }))
            }
            _ => None,
        })
        .collect();
    if text.is_empty() && calls.is_empty() {
        return None;
    }
    let mut m = Map::new();
    m.insert("role".into(), json!("assistant"));
    // A message of tool calls alone still carries `content: ""`: llama.cpp's server answers a
    // `null` content with HTTP 500, and every other server takes the empty string.
    m.insert("content".into(), Value::String(text));
    if !calls.is_empty() {
        m.insert("tool_calls".into(), Value::Array(calls));
    }
    Some(Value::Object(m))
}

fn tool_result_message(r: &ToolResultMessage) -> Value {
    let mut text = String::new();
    for c in &r.content {
        let piece = match c {
            Content::Text { text } => text.as_str(),
            Content::Image { .. } => "(image omitted)",
            _ => continue,
        };
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(piece);
    }
    json!({ "role": "tool", "tool_call_id": r.tool_call_id, "content": text })
}

#[cfg(test)]
mod tests {
    use super::super::test_model as model;
    use super::*;
    use crate::kernel::message::{StopReason, Usage, UserMessage};
    use crate::kernel::tool::ToolSpec;

    fn tool(name: &'static str) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            description: "does a thing".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }
    }

    fn assistant(content: Vec<Content>, stop_reason: StopReason) -> Message {
        Message::from(AssistantMessage {
            content,
            api: String::new(),
            provider: String::new(),
            model: String::new(),
            usage: Usage::default(),
            stop_reason,
            error_message: None,
            duration_ms: None,
            timestamp: 2,
        })
    }

    fn tool_result(id: &str, content: Vec<Content>) -> Message {
        Message::from(ToolResultMessage {
            tool_call_id: id.into(),
            tool_name: "read".into(),
            content,
            details: None,
            is_error: false,
            duration_ms: None,
            timestamp: 3,
        })
    }

    fn call(id: &str, name: &str, arguments: Value) -> Content {
        Content::ToolCall {
            id: id.into(),
            name: name.into(),
            arguments,
        }
    }

    #[test]
    fn request_body_of_a_conversation() {
        let mut m = model();
        m.reasoning = true;
        m.thinking_levels = ["off", "low", "medium", "high"].map(String::from).to_vec();
        let req = ModelRequest {
            system_prompt: "You are keel.".into(),
            messages: vec![
                Message::user("hi", 1),
                Message::from(UserMessage {
                    content: vec![
                        Content::text("what is this?"),
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
                            thinking: "look first".into(),
                            signature: None,
                        },
                        Content::text("Let me look."),
                        call("c1", "read", json!({"path": "README.md"})),
                        call("c2", "ls", Value::String("{\"path\": ".into())),
                    ],
                    StopReason::ToolUse,
                ),
                tool_result(
                    "c1",
                    vec![
                        Content::text("# keel"),
                        Content::Image {
                            data: "AA==".into(),
                            mime_type: "image/png".into(),
                        },
                        Content::text("end"),
                    ],
                ),
                tool_result("c2", vec![Content::text("bad arguments")]),
                assistant(
                    vec![
                        Content::text("Partial"),
                        call("c3", "bash", json!({"command": "sleep 100"})),
                    ],
                    StopReason::Aborted,
                ),
                tool_result("c3", vec![Content::text("aborted")]),
                assistant(vec![Content::text("boom")], StopReason::Error),
                assistant(
                    vec![Content::Thinking {
                        thinking: "only thoughts".into(),
                        signature: None,
                    }],
                    StopReason::Stop,
                ),
                Message::user("go on", 4),
            ],
            tools: vec![tool("read"), tool("ls")],
            thinking_level: "xhigh".into(),
            session_id: None,
            output_schema: None,
        };
        let schema = json!({"type": "object", "properties": {"path": {"type": "string"}}});
        assert_eq!(
            request_body(&req, &m),
            json!({
                "model": "qwen",
                "messages": [
                    {"role": "system", "content": "You are keel."},
                    {"role": "user", "content": "hi"},
                    {"role": "user", "content": [
                        {"type": "text", "text": "what is this?"},
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
                    ]},
                    {"role": "assistant", "content": "Let me look.", "tool_calls": [
                        {"id": "c1", "type": "function",
                         "function": {"name": "read", "arguments": "{\"path\":\"README.md\"}"}},
                        {"id": "c2", "type": "function",
                         "function": {"name": "ls", "arguments": "{\"path\": "}},
                    ]},
                    {"role": "tool", "tool_call_id": "c1", "content": "# keel\n(image omitted)\nend"},
                    {"role": "tool", "tool_call_id": "c2", "content": "bad arguments"},
                    {"role": "user", "content": "go on"},
                ],
                "tools": [
                    {"type": "function", "function": {"name": "read", "description": "does a thing", "parameters": schema}},
                    {"type": "function", "function": {"name": "ls", "description": "does a thing", "parameters": schema}},
                ],
                "stream": true,
                "stream_options": {"include_usage": true},
                "max_tokens": 8192,
                "reasoning_effort": "high",
            })
        );
    }

    #[test]
    fn request_body_options() {
        let req = ModelRequest {
            system_prompt: String::new(),
            messages: vec![
                assistant(vec![call("c", "ls", json!({}))], StopReason::ToolUse),
                Message::user("hi", 1),
            ],
            tools: vec![],
            thinking_level: "high".into(),
            session_id: None,
            output_schema: None,
        };
        // Not a reasoning model: thinking is ignored; no system prompt, no tools.
        let mut m = model();
        m.compat.max_tokens_field = "max_completion_tokens";
        m.compat.stream_usage = false;
        m.max_tokens = 1000;
        assert_eq!(
            request_body(&req, &m),
            json!({
                "model": "qwen",
                "messages": [
                    {"role": "assistant", "content": "", "tool_calls": [
                        {"id": "c", "type": "function", "function": {"name": "ls", "arguments": "{}"}},
                    ]},
                    {"role": "user", "content": "hi"},
                ],
                "stream": true,
                "max_completion_tokens": 1000,
            })
        );
        // A reasoning model: the level is clamped, `off` sends nothing, and servers without
        // `reasoning_effort` get nothing.
        let mut m = model();
        m.reasoning = true;
        m.thinking_levels = ["off", "minimal", "low"].map(String::from).to_vec();
        assert_eq!(request_body(&req, &m)["reasoning_effort"], json!("low"));
        let off = ModelRequest {
            thinking_level: "off".into(),
            ..req.clone()
        };
        assert!(request_body(&off, &m).get("reasoning_effort").is_none());
        m.compat.reasoning_effort = false;
        assert!(request_body(&req, &m).get("reasoning_effort").is_none());
    }
}
