//! The Gemini request body: the system instruction, the conversation as `contents` (roles
//! `user` and `model`; tool results as `functionResponse` parts of a user turn), function
//! declarations with JSON Schema parameters, the output limit, the thinking config and the
//! `--output-schema` (`responseJsonSchema`) of a
//! [`ModelRequest`]. A model turn goes back part for part with its thought signatures where
//! they came (see the module above). Pure; never touches the network.

use std::collections::HashSet;

use serde_json::{json, Map, Value};

use super::{KeptSignature, PartKind};
use crate::kernel::message::{AssistantMessage, Content, Message, ToolResultMessage};
use crate::kernel::provider::model::{ModelInfo, API_GEMINI};
use crate::kernel::provider::ModelRequest;

/// Tool call ids keel made up for calls the API sent without one; never sent back.
pub(super) const MADE_UP_ID: &str = "gemini-call-";

/// The signature Google documents for function calls whose own signature is unknown (history
/// made by another model): the API then skips its check.
const NO_SIGNATURE: &str = "skip_thought_signature_validator";

/// JSON body for a streamed `generateContent` call of `model` on `req`. The whole conversation
/// is sent every time.
pub fn request_body(req: &ModelRequest, model: &ModelInfo) -> Value {
    let mut body = Map::new();
    if !req.system_prompt.is_empty() {
        body.insert(
            "systemInstruction".into(),
            json!({"parts": [{"text": req.system_prompt}]}),
        );
    }
    body.insert("contents".into(), Value::Array(contents(req, model)));
    if !req.tools.is_empty() {
        let declarations: Vec<Value> = req
            .tools
            .iter()
            .map(|t| {
                json!({
                    "name": t.name,
                    "description": t.description,
                    "parametersJsonSchema": t.parameters,
                })
            })
            .collect();
        body.insert(
            "tools".into(),
            json!([{ "functionDeclarations": declarations }]),
        );
    }
    let mut config = Map::new();
    config.insert("maxOutputTokens".into(), json!(model.max_tokens));
    if let Some(thinking) = thinking_config(req, model) {
        config.insert("thinkingConfig".into(), thinking);
    }
    // `--output-schema`: Gemini's native form, a JSON answer held to the JSON Schema.
    if let Some(schema) = &req.output_schema {
        config.insert("responseMimeType".into(), json!("application/json"));
        config.insert("responseJsonSchema".into(), (**schema).clone());
    }
    body.insert("generationConfig".into(), Value::Object(config));
    Value::Object(body)
}

/// `thinkingConfig` for the requested level: Gemini 3 and later take `thinkingLevel`, 2.x a
/// token budget. `off` sends none (the model's default: Gemini 3 and later cannot turn
/// thinking off).
fn thinking_config(req: &ModelRequest, model: &ModelInfo) -> Option<Value> {
    if !model.reasoning {
        return None;
    }
    let level = model.clamp_thinking(&req.thinking_level);
    if level == "off" {
        return None;
    }
    if model.id.starts_with("gemini-2") {
        let budget = match level.as_str() {
            "minimal" => 512,
            "low" => 1024,
            "medium" => 8192,
            _ => 24_576,
        };
        return Some(json!({"thinkingBudget": budget, "includeThoughts": true}));
    }
    Some(json!({"thinkingLevel": level, "includeThoughts": true}))
}

/// The conversation as `contents`, in order; consecutive user-side messages (tool results,
/// then a steering message) share one user turn. Failed assistant attempts and the results of
/// their calls are left out.
fn contents(req: &ModelRequest, model: &ModelInfo) -> Vec<Value> {
    let mut turns: Vec<(&str, Vec<Value>)> = Vec::with_capacity(req.messages.len());
    let mut dropped_calls: HashSet<&str> = HashSet::new();
    let mut sent_ids: HashSet<&str> = HashSet::new();
    let user = |turns: &mut Vec<(&str, Vec<Value>)>, parts: Vec<Value>| {
        if parts.is_empty() {
            return;
        }
        match turns.last_mut() {
            Some(("user", last)) => last.extend(parts),
            _ => turns.push(("user", parts)),
        }
    };
    for message in &req.messages {
        match message {
            Message::User(u) => user(&mut turns, user_parts(&u.content)),
            Message::Assistant(a) if a.is_failed() => {
                dropped_calls.extend(a.content.iter().filter_map(|c| match c {
                    Content::ToolCall { id, .. } => Some(id.as_str()),
                    _ => None,
                }));
            }
            Message::Assistant(a) => {
                let parts = model_parts(a, model, &mut sent_ids);
                if !parts.is_empty() {
                    turns.push(("model", parts));
                }
            }
            Message::ToolResult(r) if !dropped_calls.contains(r.tool_call_id.as_str()) => {
                let with_id = sent_ids.contains(r.tool_call_id.as_str());
                user(&mut turns, function_response(r, with_id));
            }
            Message::ToolResult(_) => {}
        }
    }
    turns
        .into_iter()
        .map(|(role, parts)| json!({"role": role, "parts": parts}))
        .collect()
}

/// Text and images as `text` / `inlineData` parts (empty text dropped).
fn user_parts(content: &[Content]) -> Vec<Value> {
    content
        .iter()
        .filter_map(|c| match c {
            Content::Text { text } if !text.is_empty() => Some(json!({"text": text})),
            Content::Image { data, mime_type } => {
                Some(json!({"inlineData": {"mimeType": mime_type, "data": data}}))
            }
            _ => None,
        })
        .collect()
}

/// One part of a model turn being rebuilt.
struct Part {
    kind: PartKind,
    body: Map<String, Value>,
}

impl Part {
    fn new(kind: PartKind, body: Value) -> Part {
        let body = match body {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        Part { kind, body }
    }

    fn signed(&self) -> bool {
        self.body.contains_key("thoughtSignature")
    }

    fn sign(&mut self, signature: &str) {
        self.body
            .insert("thoughtSignature".into(), json!(signature));
    }
}

/// The parts of one kept assistant message, in content order. This model's own thoughts and
/// signatures go back where they came; another model's thoughts stay home and its first
/// function call gets [`NO_SIGNATURE`].
fn model_parts<'a>(
    a: &'a AssistantMessage,
    model: &ModelInfo,
    sent_ids: &mut HashSet<&'a str>,
) -> Vec<Value> {
    let own = a.api == API_GEMINI && a.model == model.id;
    let mut parts: Vec<Part> = Vec::with_capacity(a.content.len());
    for c in &a.content {
        match c {
            Content::Text { text } if !text.is_empty() => {
                parts.push(Part::new(PartKind::Text, json!({"text": text})));
            }
            Content::Thinking {
                thinking,
                signature,
            } if own => {
                let kept = signature.as_deref().and_then(KeptSignature::decode);
                let thought_signed = kept.as_ref().is_some_and(|k| k.part == PartKind::Thought);
                if !thinking.is_empty() || thought_signed {
                    let part = json!({"text": thinking, "thought": true});
                    parts.push(Part::new(PartKind::Thought, part));
                }
                if let Some(kept) = kept {
                    put_signature(&mut parts, kept);
                }
            }
            Content::ToolCall {
                id,
                name,
                arguments,
            } => {
                let mut call = Map::new();
                call.insert("name".into(), json!(name));
                call.insert("args".into(), args_object(arguments));
                if a.api == API_GEMINI && !id.starts_with(MADE_UP_ID) {
                    call.insert("id".into(), json!(id));
                    sent_ids.insert(id);
                }
                let part = json!({"functionCall": call});
                parts.push(Part::new(PartKind::FunctionCall, part));
            }
            _ => {}
        }
    }
    if !own {
        if let Some(first) = parts.iter_mut().find(|p| p.kind == PartKind::FunctionCall) {
            first.sign(NO_SIGNATURE);
        }
    }
    parts.into_iter().map(|p| Value::Object(p.body)).collect()
}

/// Puts a kept signature back on its part: the last part when it is of the signature's kind
/// and unsigned, else an empty part of that kind (a signature that came alone).
fn put_signature(parts: &mut Vec<Part>, kept: KeptSignature) {
    match parts.last_mut() {
        Some(last) if last.kind == kept.part && !last.signed() => last.sign(&kept.signature),
        _ => {
            let body = match kept.part {
                PartKind::Thought => json!({"text": "", "thought": true}),
                PartKind::Text => json!({"text": ""}),
                // A call's signature without its call: nothing to put it on.
                PartKind::FunctionCall => return,
            };
            let mut part = Part::new(kept.part, body);
            part.sign(&kept.signature);
            parts.push(part);
        }
    }
}

/// A call's arguments as the object `args` must be (arguments that did not parse are wrapped).
fn args_object(arguments: &Value) -> Value {
    match arguments {
        Value::Object(_) => arguments.clone(),
        other => json!({"arguments": other}),
    }
}

/// A tool result as a `functionResponse` part (`output`, or `error` for a failed call), with
/// the call's id when the call was sent with one; images follow as `inlineData` parts.
fn function_response(r: &ToolResultMessage, with_id: bool) -> Vec<Value> {
    let key = if r.is_error { "error" } else { "output" };
    let mut response = Map::new();
    response.insert("name".into(), json!(r.tool_name));
    if with_id {
        response.insert("id".into(), json!(r.tool_call_id));
    }
    let text = crate::kernel::message::joined_text(&r.content);
    response.insert("response".into(), json!({ key: text }));
    let mut parts = vec![json!({"functionResponse": response})];
    parts.extend(
        r.content
            .iter()
            .filter(|c| matches!(c, Content::Image { .. }))
            .flat_map(|c| user_parts(std::slice::from_ref(c))),
    );
    parts
}

#[cfg(test)]
mod tests {
    use super::super::test_model as model;
    use super::*;
    use crate::kernel::message::{StopReason, Usage, UserMessage};
    use crate::kernel::provider::model::API_ANTHROPIC;

    fn assistant(api: &str, model: &str, content: Vec<Content>, stop: StopReason) -> Message {
        Message::from(AssistantMessage {
            content,
            api: api.into(),
            provider: "google".into(),
            model: model.into(),
            usage: Usage::default(),
            stop_reason: stop,
            error_message: None,
            duration_ms: None,
            timestamp: 2,
        })
    }

    fn result(id: &str, text: &str, is_error: bool) -> Message {
        Message::from(ToolResultMessage {
            tool_call_id: id.into(),
            tool_name: "read".into(),
            content: vec![Content::text(text)],
            details: None,
            is_error,
            duration_ms: None,
            timestamp: 3,
        })
    }

    fn kept(part: PartKind, sig: &str) -> Option<String> {
        Some(KeptSignature::encode(part, sig))
    }

    fn thinking(text: &str, signature: Option<String>) -> Content {
        Content::Thinking {
            thinking: text.into(),
            signature,
        }
    }

    fn call(id: &str, arguments: Value) -> Content {
        Content::ToolCall {
            id: id.into(),
            name: "read".into(),
            arguments,
        }
    }

    fn request(messages: Vec<Message>) -> ModelRequest {
        ModelRequest {
            system_prompt: String::new(),
            messages,
            tools: vec![],
            thinking_level: "off".into(),
            session_id: None,
            output_schema: None,
        }
    }

    #[test]
    fn an_output_schema_is_sent_as_response_json_schema() {
        let m = model();
        let mut req = request(vec![Message::user("hi", 1)]);
        assert!(request_body(&req, &m)["generationConfig"]
            .get("responseJsonSchema")
            .is_none());
        let schema = json!({"type": "object", "required": ["n"]});
        req.output_schema = Some(std::sync::Arc::new(schema.clone()));
        let config = &request_body(&req, &m)["generationConfig"];
        assert_eq!(config["responseMimeType"], "application/json");
        assert_eq!(config["responseJsonSchema"], schema);
    }

    #[test]
    fn signatures_go_back_on_the_parts_they_came_on() {
        let m = model();
        let own = |content| assistant(API_GEMINI, "gemini-test", content, StopReason::Stop);
        let req = request(vec![
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
            own(vec![
                // A thought with its own signature, then one without.
                thinking("plan", kept(PartKind::Thought, "T1")),
                thinking("more", None),
                // An empty text part's signature folded into the open thought block.
                thinking("last", kept(PartKind::Text, "X1")),
                Content::text("Let me look."),
                // A text part's signature kept just after it.
                thinking("", kept(PartKind::Text, "X2")),
                call("c1", json!({"path": "a"})),
                thinking("", kept(PartKind::FunctionCall, "F1")),
                call(&format!("{MADE_UP_ID}r-2"), Value::String("{\"pa".into())),
            ]),
            result("c1", "one", false),
            result(&format!("{MADE_UP_ID}r-2"), "no such file", true),
            Message::user("go on", 4),
        ]);
        let body = request_body(&req, &m);
        assert_eq!(
            body["contents"],
            json!([
                {"role": "user", "parts": [
                    {"text": "what is this?"},
                    {"inlineData": {"mimeType": "image/png", "data": "AA=="}},
                ]},
                {"role": "model", "parts": [
                    {"text": "plan", "thought": true, "thoughtSignature": "T1"},
                    {"text": "more", "thought": true},
                    {"text": "last", "thought": true},
                    {"text": "", "thoughtSignature": "X1"},
                    {"text": "Let me look.", "thoughtSignature": "X2"},
                    {"functionCall": {"name": "read", "args": {"path": "a"}, "id": "c1"},
                     "thoughtSignature": "F1"},
                    {"functionCall": {"name": "read", "args": {"arguments": "{\"pa"}}},
                ]},
                {"role": "user", "parts": [
                    {"functionResponse": {"name": "read", "id": "c1",
                                          "response": {"output": "one"}}},
                    {"functionResponse": {"name": "read",
                                          "response": {"error": "no such file"}}},
                    {"text": "go on"},
                ]},
            ])
        );
        assert_eq!(body.get("systemInstruction"), None);
        assert_eq!(body.get("tools"), None);
        assert_eq!(body["generationConfig"], json!({"maxOutputTokens": 65536}));
    }

    #[test]
    fn another_models_turns_lose_their_thoughts_and_get_the_documented_placeholder() {
        let m = model();
        let req = request(vec![
            Message::user("hi", 1),
            // A failed attempt and its result are not sent.
            assistant(
                API_GEMINI,
                "gemini-test",
                vec![call("c0", json!({}))],
                StopReason::Error,
            ),
            result("c0", "x", false),
            assistant(
                API_ANTHROPIC,
                "claude",
                vec![
                    thinking("hmm", Some("EqQBCkYIBxgCKkD".into())),
                    call("toolu_1", json!({"path": "a"})),
                    call("toolu_2", json!({"path": "b"})),
                ],
                StopReason::ToolUse,
            ),
            result("toolu_1", "a", false),
            result("toolu_2", "b", false),
        ]);
        let contents = &request_body(&req, &m)["contents"];
        assert_eq!(contents.as_array().unwrap().len(), 3, "{contents:#}");
        assert_eq!(
            contents[1],
            json!({"role": "model", "parts": [
                {"functionCall": {"name": "read", "args": {"path": "a"}},
                 "thoughtSignature": NO_SIGNATURE},
                {"functionCall": {"name": "read", "args": {"path": "b"}}},
            ]})
        );
        assert_eq!(
            contents[2]["parts"][0],
            json!({"functionResponse": {"name": "read", "response": {"output": "a"}}})
        );
    }

    #[test]
    fn thinking_level_or_budget() {
        let mut m = model();
        let mut req = request(vec![Message::user("hi", 1)]);
        assert_eq!(
            request_body(&req, &m)["generationConfig"].get("thinkingConfig"),
            None
        );
        req.thinking_level = "xhigh".into();
        assert_eq!(
            request_body(&req, &m)["generationConfig"]["thinkingConfig"],
            json!({"thinkingLevel": "high", "includeThoughts": true})
        );
        m.id = "gemini-2.5-pro".into();
        req.thinking_level = "low".into();
        assert_eq!(
            request_body(&req, &m)["generationConfig"]["thinkingConfig"],
            json!({"thinkingBudget": 1024, "includeThoughts": true})
        );
        m.reasoning = false;
        assert_eq!(
            request_body(&req, &m)["generationConfig"].get("thinkingConfig"),
            None
        );
    }
}
