//! What an OpenAI-compatible server says it serves: `GET {base_url}/models`, read in the shapes
//! OpenAI, Ollama, llama.cpp, vLLM and LM Studio answer with. Bounded in time and size; returns
//! data (model ids, or a typed failure), never prose for a person.

use std::time::Duration;

use reqwest::header::{HeaderValue, AUTHORIZATION};
use serde_json::Value;

use super::http::{chain, read_capped, HttpOptions};
use super::limits::{MAX_ERROR_BODY_BYTES, MAX_MODEL_LIST_BYTES};
use crate::kernel::url::redact_url;

/// Why the model list could not be had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListFailure {
    /// No answer: connection refused, DNS, TLS, a timeout.
    Unreachable,
    /// A non-2xx answer with this status.
    Status(u16),
    /// A 2xx answer that is not a model list.
    BadBody,
}

/// A failed `GET /models`: the URL tried, what went wrong, and the detail (the transport's
/// error chain, the server's message or the parse error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListError {
    pub url: String,
    pub failure: ListFailure,
    pub detail: String,
}

/// The URL of the model list under `base_url`.
pub fn models_url(base_url: &str) -> String {
    format!("{}/models", base_url.trim_end_matches('/'))
}

/// Asks the server at `base_url` for the ids of the models it serves, in its order.
pub async fn list_models(
    base_url: &str,
    api_key: Option<&str>,
    options: &HttpOptions,
) -> Result<Vec<String>, ListError> {
    let url = models_url(base_url);
    // Printed in errors: never with the URL's credentials.
    let fail = |failure, detail: String| ListError {
        url: redact_url(&url),
        failure,
        detail: redact_url(&detail),
    };
    let client = reqwest::Client::builder()
        .connect_timeout(options.connect_timeout)
        .user_agent(concat!("keel/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| fail(ListFailure::Unreachable, chain(&e)))?;
    let mut request = client.get(&url);
    if let Some(k) = api_key.and_then(|k| HeaderValue::from_str(&format!("Bearer {k}")).ok()) {
        request = request.header(AUTHORIZATION, k);
    }
    let idle: Duration = options.idle_timeout;
    let response = match tokio::time::timeout(idle, request.send()).await {
        Err(_) => {
            let detail = format!("no response within {}s", idle.as_secs_f64());
            return Err(fail(ListFailure::Unreachable, detail));
        }
        Ok(Err(e)) => return Err(fail(ListFailure::Unreachable, chain(&e))),
        Ok(Ok(r)) => r,
    };
    let status = response.status();
    let cap = if status.is_success() {
        MAX_MODEL_LIST_BYTES
    } else {
        MAX_ERROR_BODY_BYTES
    };
    let body = read_capped(response, cap, idle).await;
    if !status.is_success() {
        let body = body.unwrap_or_default();
        let said: String = String::from_utf8_lossy(&body)
            .trim()
            .chars()
            .take(500)
            .collect();
        return Err(fail(ListFailure::Status(status.as_u16()), said));
    }
    let body = body.map_err(|e| fail(ListFailure::Unreachable, e))?;
    parse_model_list(&String::from_utf8_lossy(&body)).map_err(|e| fail(ListFailure::BadBody, e))
}

/// The model ids of a `/models` body: OpenAI's `{"object":"list","data":[{"id"}]}` (also
/// Ollama's and llama.cpp's `/v1/models`, vLLM, LM Studio), Ollama's native
/// `{"models":[{"name"|"model"}]}`, or a bare array of either entry shape. Duplicates are
/// dropped; the server's order is kept.
pub fn parse_model_list(body: &str) -> Result<Vec<String>, String> {
    let v: Value = serde_json::from_str(body).map_err(|e| format!("not JSON: {e}"))?;
    let entries = match &v {
        Value::Array(items) => items,
        Value::Object(o) => match (o.get("data"), o.get("models")) {
            (Some(Value::Array(items)), _) => items,
            (_, Some(Value::Array(items))) => items,
            _ => return Err("no `data` or `models` array".into()),
        },
        _ => return Err("not a JSON object".into()),
    };
    let mut ids: Vec<String> = Vec::new();
    for entry in entries {
        let id = match entry {
            Value::String(s) => Some(s.as_str()),
            _ => ["id", "model", "name"]
                .iter()
                .find_map(|k| entry.get(*k).and_then(Value::as_str)),
        };
        match id.map(str::trim).filter(|s| !s.is_empty()) {
            Some(id) if !ids.iter().any(|x| x == id) => ids.push(id.to_string()),
            Some(_) => {}
            None => return Err(format!("an entry without an id: {entry}")),
        }
    }
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_list_shapes() {
        let openai = r#"{"object":"list","data":[
            {"id":"gpt-4.1","object":"model","created":1744316542,"owned_by":"system"},
            {"id":"o4-mini","object":"model","created":1744225351,"owned_by":"system"}]}"#;
        assert_eq!(parse_model_list(openai).unwrap(), ["gpt-4.1", "o4-mini"]);
        // llama.cpp sends both arrays; `data` wins.
        let llama = r#"{"models":[{"name":"qwen.gguf","model":"qwen.gguf"}],"object":"list",
            "data":[{"id":"/models/qwen.gguf","object":"model","owned_by":"llamacpp",
            "meta":{"n_ctx_train":32768}}]}"#;
        assert_eq!(parse_model_list(llama).unwrap(), ["/models/qwen.gguf"]);
        let ollama = r#"{"models":[{"name":"llama3.2:latest","model":"llama3.2:latest"},
            {"model":"qwen2.5-coder:7b"}]}"#;
        assert_eq!(
            parse_model_list(ollama).unwrap(),
            ["llama3.2:latest", "qwen2.5-coder:7b"]
        );
        assert_eq!(
            parse_model_list(r#"[{"id":" a "},"b",{"id":"a"}]"#).unwrap(),
            ["a", "b"]
        );
        assert_eq!(
            parse_model_list(r#"{"data":[]}"#).unwrap(),
            Vec::<String>::new()
        );
    }

    #[test]
    fn bodies_that_are_not_model_lists() {
        assert!(parse_model_list("<html>")
            .unwrap_err()
            .starts_with("not JSON"));
        assert_eq!(
            parse_model_list(r#"{"error":"nope"}"#).unwrap_err(),
            "no `data` or `models` array"
        );
        assert_eq!(parse_model_list("42").unwrap_err(), "not a JSON object");
        assert_eq!(
            parse_model_list(r#"{"data":[{"object":"model"}]}"#).unwrap_err(),
            r#"an entry without an id: {"object":"model"}"#
        );
        assert_eq!(models_url("http://h/v1/"), "http://h/v1/models");
    }
}
