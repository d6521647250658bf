//! The Responses API request body: instructions, the conversation as input items (messages,
//! reasoning items sent back verbatim, function calls and their outputs), flat tool
//! definitions, reasoning effort, `store: false` and the prompt-cache key of a
//! [`ModelRequest`]. Pure; never touches the network.

use std::collections::HashSet;

use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::kernel::message::{AssistantMessage, Content, Message, ToolResultMessage};
use crate::kernel::output_schema::SCHEMA_NAME;
use crate::kernel::provider::model::{ModelInfo, API_RESPONSES};
use crate::kernel::provider::ModelRequest;

/// JSON body for `POST {base_url}/responses`: a streamed, stateless (`store: false`) response
/// of `model` to `req`. The whole conversation is sent every time; reasoning items come back
/// from the thinking blocks they were kept in.
pub fn request_body(req: &ModelRequest, model: &ModelInfo) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(model.id));
    if !req.system_prompt.is_empty() {
        body.insert("instructions".into(), json!(req.system_prompt));
    }
    body.insert("input".into(), Value::Array(input_items(req, model)));
    if !req.tools.is_empty() {
        let tools = req
            .tools
            .iter()
            .map(|t| {
                json!({
                    "type": "function",
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                    "strict": false,
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        body.insert("tool_choice".into(), json!("auto"));
        body.insert("parallel_tool_calls".into(), json!(true));
    }
    if model.reasoning {
        let level = model.clamp_thinking(&req.thinking_level);
        // `off` sends no effort: the model's default (some models reject `none`).
        if level != "off" {
            body.insert(
                "reasoning".into(),
                json!({"effort": level, "summary": "auto"}),
            );
        }
        body.insert("include".into(), json!(["reasoning.encrypted_content"]));
    }
    body.insert("store".into(), json!(false));
    body.insert("stream".into(), json!(true));
    if let Some(id) = &req.session_id {
        body.insert("prompt_cache_key".into(), json!(id));
    }
    body.insert("max_output_tokens".into(), json!(model.max_tokens));
    if let Some(schema) = &req.output_schema {
        body.insert(
            "text".into(),
            json!({"format": {
                "type": "json_schema", "name": SCHEMA_NAME, "schema": schema, "strict": true,
            }}),
        );
    }
    Value::Object(body)
}

/// The conversation as input items, in order. Failed assistant attempts (and the results of
/// their tool calls) are left out.
fn input_items(req: &ModelRequest, model: &ModelInfo) -> Vec<Value> {
    let mut out = Vec::with_capacity(req.messages.len());
    let mut dropped_calls: HashSet<&str> = HashSet::new();
    for message in &req.messages {
        match message {
            Message::User(u) => {
                let parts = input_parts(&u.content);
                if !parts.is_empty() {
                    out.push(json!({"type": "message", "role": "user", "content": parts}));
                }
            }
            Message::Assistant(a) if a.is_failed() => {
                dropped_calls.extend(a.content.iter().filter_map(|c| match c {
                    Content::ToolCall { id, .. } => Some(id.as_str()),
                    _ => None,
                }));
            }
            Message::Assistant(a) => assistant_items(a, model, &mut out),
            Message::ToolResult(r) => {
                if !dropped_calls.contains(r.tool_call_id.as_str()) {
                    out.push(tool_output(r));
                }
            }
        }
    }
    out
}

/// Text and images as `input_text` / `input_image` parts (empty text dropped).
fn input_parts(content: &[Content]) -> Vec<Value> {
    content
        .iter()
        .filter_map(|c| match c {
            Content::Text { text } if !text.is_empty() => {
                Some(json!({"type": "input_text", "text": text}))
            }
            Content::Image { data, mime_type } => Some(json!({
                "type": "input_image",
                "image_url": format!("data:{mime_type};base64,{data}"),
            })),
            _ => None,
        })
        .collect()
}

/// The `type` of an item kept in a thinking signature.
#[derive(Deserialize)]
struct ItemType {
    #[serde(rename = "type")]
    kind: String,
}

/// The reasoning item a thinking block keeps, when it was made by this API and model (items
/// of another model cannot be verified by this one and are not sent).
fn reasoning_item(a: &AssistantMessage, signature: &str, model: &ModelInfo) -> Option<Value> {
    if a.api != API_RESPONSES || a.model != model.id {
        return None;
    }
    let item: Value = serde_json::from_str(signature).ok()?;
    let kind = ItemType::deserialize(&item).ok()?;
    (kind.kind == "reasoning").then_some(item)
}

/// The items of one kept assistant message, in content order: reasoning items verbatim, text
/// as an assistant `message` item (consecutive text joined), tool calls as `function_call`s.
fn assistant_items(a: &AssistantMessage, model: &ModelInfo, out: &mut Vec<Value>) {
    let mut text = String::new();
    let flush = |text: &mut String, out: &mut Vec<Value>| {
        if !text.is_empty() {
            out.push(json!({
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": std::mem::take(text)}],
            }));
        }
    };
    for c in &a.content {
        match c {
            Content::Thinking {
                signature: Some(signature),
                ..
            } => {
                if let Some(item) = reasoning_item(a, signature, model) {
                    flush(&mut text, out);
                    out.push(item);
                }
            }
            Content::Text { text: t } => text.push_str(t),
            Content::ToolCall {
                id,
                name,
                arguments,
            } => {
                flush(&mut text, out);
                // Arguments that did not parse were kept as the raw string: sent as written.
                let arguments = match arguments {
                    Value::String(raw) => raw.clone(),
                    other => other.to_string(),
                };
                out.push(json!({
                    "type": "function_call",
                    "call_id": id,
                    "name": name,
                    "arguments": arguments,
                }));
            }
            _ => {}
        }
    }
    flush(&mut text, out);
}

/// A tool result as `function_call_output`: a string, or content parts when it holds images.
fn tool_output(r: &ToolResultMessage) -> Value {
    let has_image = r.content.iter().any(|c| matches!(c, Content::Image { .. }));
    let output = if has_image {
        Value::Array(input_parts(&r.content))
    } else {
        Value::String(crate::kernel::message::joined_text(&r.content))
    };
    json!({"type": "function_call_output", "call_id": r.tool_call_id, "output": output})
}

#[cfg(test)]
mod tests {
    use super::super::test_model as model;
    use super::*;
    use crate::kernel::message::{StopReason, Usage, UserMessage};
    use crate::kernel::tool::ToolSpec;

    fn assistant(model: &str, content: Vec<Content>, stop_reason: StopReason) -> Message {
        Message::from(AssistantMessage {
            content,
            api: API_RESPONSES.into(),
            provider: "openai".into(),
            model: model.into(),
            usage: Usage::default(),
            stop_reason,
            error_message: None,
            duration_ms: None,
            timestamp: 2,
        })
    }

    fn result(id: &str, content: Vec<Content>) -> Message {
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

    fn thinking(text: &str, signature: Option<&str>) -> Content {
        Content::Thinking {
            thinking: text.into(),
            signature: signature.map(str::to_string),
        }
    }

    fn call(id: &str, arguments: Value) -> Content {
        Content::ToolCall {
            id: id.into(),
            name: "read".into(),
            arguments,
        }
    }

    const ITEM: &str = r#"{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"look"}],"encrypted_content":"gAAA=="}"#;

    #[test]
    fn a_conversation_with_reasoning_calls_and_images() {
        let m = model();
        let req = ModelRequest {
            system_prompt: "You are keel.".into(),
            messages: vec![
                Message::from(UserMessage {
                    content: vec![
                        Content::text("what is this?"),
                        Content::Image {
                            data: "AA==".into(),
                            mime_type: "image/png".into(),
                        },
                    ],
                    timestamp: 1,
                }),
                assistant(
                    "gpt-test",
                    vec![
                        thinking("look", Some(ITEM)),
                        Content::text("Let me "),
                        Content::text("look."),
                        call("call_1", json!({"path": "a"})),
                        call("call_2", Value::String("{\"pa".into())),
                    ],
                    StopReason::ToolUse,
                ),
                result("call_1", vec![Content::text("one"), Content::text("two")]),
                result(
                    "call_2",
                    vec![Content::Image {
                        data: "AA==".into(),
                        mime_type: "image/png".into(),
                    }],
                ),
                // A failed attempt and its call's result are not sent.
                assistant(
                    "gpt-test",
                    vec![call("call_3", json!({}))],
                    StopReason::Error,
                ),
                result("call_3", vec![Content::text("x")]),
                // Reasoning of another model, and an Anthropic signature, stay home.
                assistant(
                    "gpt-other",
                    vec![thinking("", Some(ITEM)), Content::text("hi")],
                    StopReason::Stop,
                ),
                assistant(
                    "gpt-test",
                    vec![thinking("t", Some("EqQBCkYIBxgCKkD")), thinking("u", None)],
                    StopReason::Stop,
                ),
                Message::user("go on", 4),
            ],
            tools: vec![ToolSpec {
                name: "read".into(),
                description: "reads".into(),
                parameters: json!({"type": "object"}),
            }],
            thinking_level: "xhigh".into(),
            session_id: Some("0199-session".into()),
            output_schema: None,
        };
        let item: Value = serde_json::from_str(ITEM).unwrap();
        assert_eq!(
            request_body(&req, &m),
            json!({
                "model": "gpt-test",
                "instructions": "You are keel.",
                "input": [
                    {"type": "message", "role": "user", "content": [
                        {"type": "input_text", "text": "what is this?"},
                        {"type": "input_image", "image_url": "data:image/png;base64,AA=="},
                    ]},
                    item,
                    {"type": "message", "role": "assistant",
                     "content": [{"type": "output_text", "text": "Let me look."}]},
                    {"type": "function_call", "call_id": "call_1", "name": "read",
                     "arguments": "{\"path\":\"a\"}"},
                    {"type": "function_call", "call_id": "call_2", "name": "read",
                     "arguments": "{\"pa"},
                    {"type": "function_call_output", "call_id": "call_1", "output": "one\ntwo"},
                    {"type": "function_call_output", "call_id": "call_2", "output": [
                        {"type": "input_image", "image_url": "data:image/png;base64,AA=="},
                    ]},
                    {"type": "message", "role": "assistant",
                     "content": [{"type": "output_text", "text": "hi"}]},
                    {"type": "message", "role": "user",
                     "content": [{"type": "input_text", "text": "go on"}]},
                ],
                "tools": [{"type": "function", "name": "read", "description": "reads",
                           "parameters": {"type": "object"}, "strict": false}],
                "tool_choice": "auto",
                "parallel_tool_calls": true,
                "reasoning": {"effort": "xhigh", "summary": "auto"},
                "include": ["reasoning.encrypted_content"],
                "store": false,
                "stream": true,
                "prompt_cache_key": "0199-session",
                "max_output_tokens": 32000,
            })
        );
    }

    #[test]
    fn effort_follows_the_thinking_level() {
        let mut m = model();
        let mut req = ModelRequest {
            system_prompt: String::new(),
            messages: vec![Message::user("hi", 1)],
            tools: vec![],
            thinking_level: "off".into(),
            session_id: None,
            output_schema: None,
        };
        // Off: the model's default effort, but reasoning items still come back.
        let body = request_body(&req, &m);
        assert!(body.get("reasoning").is_none());
        assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
        assert!(body.get("instructions").is_none());
        assert!(body.get("prompt_cache_key").is_none());
        assert!(body.get("tools").is_none());
        // A level is clamped to the model's: this one has no `minimal`.
        req.thinking_level = "minimal".into();
        assert!(request_body(&req, &m).get("reasoning").is_none());
        req.thinking_level = "medium".into();
        assert_eq!(request_body(&req, &m)["reasoning"]["effort"], "medium");
        // A model without reasoning: no reasoning fields at all.
        m.reasoning = false;
        m.thinking_levels = vec!["off".into()];
        let body = request_body(&req, &m);
        assert!(body.get("reasoning").is_none());
        assert!(body.get("include").is_none());
    }
}
