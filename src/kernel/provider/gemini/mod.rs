//! The Gemini API (`POST {base}/v1beta/models/{model}:streamGenerateContent?alt=sse`, key in
//! `x-goog-api-key`): the request body built from a [`ModelRequest`] (`request`), the decoder
//! of its streamed `GenerateContentResponse` chunks (`stream`) and the mapping of its
//! `google.rpc.Status` errors to keel's error kinds (`error`). No I/O here; the HTTP transport
//! sends the body and feeds the bytes.
//!
//! Thought signatures must go back exactly as they came, on the part they came on. keel keeps
//! each one in a thinking block's signature as a [`KeptSignature`]: the signature string
//! untouched plus the kind of part it was on. The decoder passes a signature on right after
//! its part, so the turn loop keeps a thought's signature on the thought's own block and a text
//! or function call's in a thinking block just after it (or, for an empty text part that came
//! after thoughts, on the thought block still open). The request puts each back on that part.
//!
//! [`ModelRequest`]: super::ModelRequest

mod error;
mod request;
mod stream;

use serde::{Deserialize, Serialize};

pub use error::{error_from_response, retry_from_body};
pub use request::request_body;
pub use stream::GeminiDecoder;

/// The path of a streamed call of `model` under `base` (a base URL that already ends in an
/// API version, `/v1beta` or `/v1`, keeps it).
pub fn stream_url(base: &str, model: &str) -> String {
    let base = base.trim_end_matches('/');
    let versioned = base.ends_with("/v1beta") || base.ends_with("/v1");
    let version = if versioned { "" } else { "/v1beta" };
    format!("{base}{version}/models/{model}:streamGenerateContent?alt=sse")
}

/// The kind of part a thought signature came on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) enum PartKind {
    /// A thought summary (`thought: true`).
    Thought,
    /// Visible text (possibly empty: a signature alone at the end of a stream).
    Text,
    /// A `functionCall`.
    FunctionCall,
}

/// A thought signature as a thinking block keeps it: `{"part":"functionCall",
/// "thoughtSignature":"…"}`. The signature is never changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct KeptSignature {
    pub part: PartKind,
    #[serde(rename = "thoughtSignature")]
    pub signature: String,
}

impl KeptSignature {
    /// The text a thinking block keeps.
    pub fn encode(part: PartKind, signature: &str) -> String {
        let kept = KeptSignature {
            part,
            signature: signature.to_string(),
        };
        serde_json::to_string(&kept).unwrap_or_default()
    }

    /// A kept signature, if `text` is one (another API's signature is not).
    pub fn decode(text: &str) -> Option<KeptSignature> {
        serde_json::from_str(text).ok()
    }
}

/// The model the unit tests of this API build requests for and price usage with.
#[cfg(test)]
fn test_model() -> super::model::ModelInfo {
    use super::model::{ModelCost, ModelInfo, API_GEMINI};
    let mut m = ModelInfo::unlisted(
        "google",
        API_GEMINI,
        "https://generativelanguage.googleapis.com",
        "gemini-test",
    );
    m.reasoning = true;
    m.thinking_levels = ["off", "low", "medium", "high"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    m.cost = ModelCost {
        input: 4.0,
        output: 20.0,
        cache_read: 0.2,
        cache_write: 0.0,
    };
    m.max_tokens = 65_536;
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stream_url_adds_the_version_only_when_missing() {
        let want = "https://g.example/v1beta/models/m-1:streamGenerateContent?alt=sse";
        assert_eq!(stream_url("https://g.example", "m-1"), want);
        assert_eq!(stream_url("https://g.example/", "m-1"), want);
        assert_eq!(stream_url("https://g.example/v1beta/", "m-1"), want);
        assert_eq!(
            stream_url("http://h/v1", "m"),
            "http://h/v1/models/m:streamGenerateContent?alt=sse"
        );
    }

    #[test]
    fn a_kept_signature_round_trips_untouched() {
        let sig = "CiQBVKhc/x+yZ0Q2==";
        let text = KeptSignature::encode(PartKind::FunctionCall, sig);
        assert_eq!(
            text,
            r#"{"part":"functionCall","thoughtSignature":"CiQBVKhc/x+yZ0Q2=="}"#
        );
        let kept = KeptSignature::decode(&text).unwrap();
        assert_eq!(
            (kept.part, kept.signature.as_str()),
            (PartKind::FunctionCall, sig)
        );
        // Anthropic's signatures and Responses reasoning items are not Gemini's.
        assert_eq!(KeptSignature::decode("EqQBCkYIBxgCKkD"), None);
        assert_eq!(
            KeptSignature::decode(r#"{"type":"reasoning","encrypted_content":"x"}"#),
            None
        );
    }
}
