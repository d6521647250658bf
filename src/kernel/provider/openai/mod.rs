//! The OpenAI Chat Completions wire format, as spoken by OpenAI and the servers that copy it
//! (DeepSeek, OpenRouter, Groq, Ollama, vLLM, llama.cpp): the streaming request body
//! (`request`), a decoder from the streamed chunks to [`ProviderEvent`]s (`decode`), and the
//! reading of error responses (`error`). Pure functions of their input; the HTTP transport owns
//! the connection.
//!
//! [`ProviderEvent`]: super::ProviderEvent

mod decode;
mod error;
mod request;

pub use decode::OpenAiDecoder;
pub use error::error_from_response;
pub(super) use error::{clip, ErrorDetail};
pub use request::request_body;

/// The model the unit tests of this API build requests for and price usage with.
#[cfg(test)]
fn test_model() -> super::model::ModelInfo {
    use super::model::{ModelCost, ModelInfo, API_OPENAI};
    let mut m = ModelInfo::unlisted("local", API_OPENAI, "http://127.0.0.1:8080/v1", "qwen");
    m.cost = ModelCost {
        input: 2.0,
        output: 8.0,
        cache_read: 0.5,
        cache_write: 0.0,
    };
    m
}
