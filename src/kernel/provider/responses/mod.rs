//! The OpenAI Responses API (`POST {base_url}/responses`, streamed, `store: false`): the request
//! body built from a [`ModelRequest`] (`request`) and the decoder of its typed event stream
//! (`stream`). Error bodies have the Chat Completions shape and are read by
//! [`error_from_response`]. No I/O here; the HTTP transport sends the body and feeds the bytes.
//!
//! Reasoning items travel in thinking blocks: the whole item (with `encrypted_content`) is the
//! block's signature, so a saved and resumed session sends it back as it came.
//!
//! [`ModelRequest`]: super::ModelRequest

mod request;
mod stream;

pub use super::openai::error_from_response;
pub use request::request_body;
pub use stream::ResponsesDecoder;

/// The model the unit tests of this API build requests for.
#[cfg(test)]
fn test_model() -> super::model::ModelInfo {
    use super::model::{ModelInfo, API_RESPONSES};
    let mut m = ModelInfo::unlisted(
        "openai",
        API_RESPONSES,
        "https://api.openai.com/v1",
        "gpt-test",
    );
    m.reasoning = true;
    m.thinking_levels = ["off", "low", "medium", "high", "xhigh"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    m.max_tokens = 32_000;
    m
}
