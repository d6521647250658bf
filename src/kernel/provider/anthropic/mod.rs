//! The Anthropic Messages API (`POST /v1/messages`, streamed): the request body built from a
//! [`ModelRequest`] (`request`), the decoder that turns the response's server-sent events into
//! [`ProviderEvent`]s (`decode`), and the mapping of error responses to stable error kinds
//! (`error`). No I/O here; the HTTP transport sends the body, feeds the bytes and reads the
//! status.
//!
//! [`ModelRequest`]: super::ModelRequest
//! [`ProviderEvent`]: super::ProviderEvent

mod decode;
mod error;
mod request;

pub use decode::AnthropicDecoder;
pub use error::error_from_response;
pub use request::request_body;

/// The `anthropic-version` header value.
pub const API_VERSION: &str = "2023-06-01";

/// The model the unit tests of this API build requests for and price usage with.
#[cfg(test)]
fn sonnet() -> super::model::ModelInfo {
    use super::model::{ModelCost, ModelInfo, API_ANTHROPIC};
    let mut m = ModelInfo::unlisted(
        "anthropic",
        API_ANTHROPIC,
        "https://api.anthropic.com",
        "claude-sonnet-4-5",
    );
    m.reasoning = true;
    m.thinking_levels = ["off", "minimal", "low", "medium", "high", "xhigh"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    m.cost = ModelCost {
        input: 3.0,
        output: 15.0,
        cache_read: 0.3,
        cache_write: 3.75,
    };
    m.max_tokens = 64_000;
    m
}
