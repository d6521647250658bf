//! Errors of OpenAI-compatible servers: the error object of a non-2xx body or of an in-stream
//! chunk, read into a stable kind (`auth`, `rate_limited`, `context_overflow`, ...) and a short
//! message. Pure.

use crate::kernel::failure::ErrorKind;
use serde_json::Value;

/// The longest server message kept in an error, in characters.
const MAX_ERROR_CHARS: usize = 500;

/// The fields of an error object, as far as the server sent them.
#[derive(Debug, Default)]
pub(in crate::kernel::provider) struct ErrorDetail {
    pub(in crate::kernel::provider) message: String,
    /// `error.type`.
    kind: String,
    /// `error.code`, a word (`rate_limit_exceeded`) or a number (OpenRouter sends HTTP codes).
    code: String,
}

impl ErrorDetail {
    /// Reads `{"message","type","code"}`, or a bare string.
    pub(in crate::kernel::provider) fn from_error(v: &Value) -> ErrorDetail {
        let word = |key: &str| match v.get(key) {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            _ => String::new(),
        };
        match v {
            Value::String(s) => ErrorDetail {
                message: s.trim().to_string(),
                ..ErrorDetail::default()
            },
            _ => ErrorDetail {
                message: word("message").trim().to_string(),
                kind: word("type"),
                code: word("code"),
            },
        }
    }

    /// A numeric code that looks like an HTTP status, else 0.
    pub(in crate::kernel::provider) fn status_hint(&self) -> u16 {
        match self.code.parse::<u16>() {
            Ok(n) if (100..600).contains(&n) => n,
            _ => 0,
        }
    }

    /// The stable error kind for this error under HTTP `status` (0 for in-stream errors).
    pub(in crate::kernel::provider) fn classify(&self, status: u16) -> ErrorKind {
        let code = self.code.to_ascii_lowercase();
        let kind = self.kind.to_ascii_lowercase();
        let either = |needle: &str| code.contains(needle) || kind.contains(needle);
        if status == 401 || status == 403 {
            return ErrorKind::Auth;
        }
        if either("insufficient_quota") {
            return ErrorKind::Quota;
        }
        if status == 429 || either("rate_limit") {
            return ErrorKind::RateLimited;
        }
        if code == "context_length_exceeded" || mentions_context_overflow(&self.message) {
            return ErrorKind::ContextOverflow;
        }
        match status {
            400 | 404 | 413 | 422 => ErrorKind::BadRequest,
            408 => ErrorKind::Timeout,
            503 | 529 => ErrorKind::Overloaded,
            _ if either("overloaded") => ErrorKind::Overloaded,
            500..=599 => ErrorKind::ServerError,
            _ if either("server_error") => ErrorKind::ServerError,
            _ => ErrorKind::ProviderError,
        }
    }
}

/// Whether a server message says the prompt does not fit the model's context.
fn mentions_context_overflow(message: &str) -> bool {
    const PHRASES: &[&str] = &[
        "context length",
        "context window",
        "maximum context",
        "too many tokens",
        "prompt is too long",
        "reduce the length",
    ];
    let lower = message.to_lowercase();
    PHRASES.iter().any(|p| lower.contains(p))
}

/// At most `max` characters of `s`, with `…` when cut.
pub(in crate::kernel::provider) fn clip(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s.to_string(),
    }
}

/// The standard reason phrase of the statuses a model API answers with.
fn reason_phrase(status: u16) -> Option<&'static str> {
    Some(match status {
        400 => "Bad Request",
        401 => "Unauthorized",
        402 => "Payment Required",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        413 => "Payload Too Large",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        529 => "Overloaded",
        _ => return None,
    })
}

/// A non-2xx response: `(kind, message)`. `kind` is one of `Auth`, `Quota`, `RateLimited`,
/// `ContextOverflow`, `BadRequest`, `Timeout`, `Overloaded`, `ServerError`, `ProviderError`;
/// `message` is `HTTP <status>: <what the server said>`.
pub fn error_from_response(status: u16, body: &str) -> (ErrorKind, String) {
    let parsed = match serde_json::from_str::<Value>(body) {
        // Some servers wrap the error in a one-element array.
        Ok(Value::Array(items)) => items.into_iter().next(),
        Ok(v) => Some(v),
        Err(_) => None,
    };
    let mut detail = match parsed {
        Some(v) => match v.get("error") {
            Some(e) if !e.is_null() => ErrorDetail::from_error(e),
            _ if v.get("message").is_some() => ErrorDetail::from_error(&v),
            _ => ErrorDetail::default(),
        },
        None => ErrorDetail::default(),
    };
    if detail.message.is_empty() {
        detail.message = body.trim().to_string();
    }
    let said = if detail.message.is_empty() {
        reason_phrase(status).map(str::to_string)
    } else {
        Some(clip(&detail.message, MAX_ERROR_CHARS))
    };
    let message = match said {
        Some(said) => format!("HTTP {status}: {said}"),
        None => format!("HTTP {status}"),
    };
    (detail.classify(status), message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const ERROR_400: &str = include_str!("../../../../fixtures/providers/openai/error_400.json");
    const ERROR_401: &str = include_str!("../../../../fixtures/providers/openai/error_401.json");
    const ERROR_429: &str = include_str!("../../../../fixtures/providers/openai/error_429.json");

    /// The kind as its wire word, and the message.
    fn classify(status: u16, body: &str) -> (String, String) {
        let (kind, message) = error_from_response(status, body);
        (kind.to_string(), message)
    }

    #[test]
    fn error_fixtures() {
        assert_eq!(
            classify(400, ERROR_400),
            (
                "context_overflow".into(),
                "HTTP 400: This model's maximum context length is 128000 tokens. However, your messages resulted in 131245 tokens. Please reduce the length of the messages.".into()
            )
        );
        let (kind, message) = classify(401, ERROR_401);
        assert_eq!(kind, "auth");
        assert!(
            message.starts_with("HTTP 401: Incorrect API key provided: sk-proj-"),
            "{message}"
        );
        let (kind, message) = classify(429, ERROR_429);
        assert_eq!(kind, "rate_limited");
        assert!(
            message.starts_with("HTTP 429: Rate limit reached for gpt-4.1"),
            "{message}"
        );
    }

    #[test]
    fn error_classification() {
        let kind = |status: u16, body: &str| classify(status, body).0;
        assert_eq!(kind(403, r#"{"error":{"message":"forbidden"}}"#), "auth");
        assert_eq!(
            kind(
                429,
                r#"{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}"#
            ),
            "quota"
        );
        assert_eq!(kind(429, "slow down"), "rate_limited");
        assert_eq!(
            kind(
                400,
                r#"{"error":{"message":"x","code":"context_length_exceeded"}}"#
            ),
            "context_overflow"
        );
        for phrase in [
            "exceeds the Context Window",
            "prompt is too long: 210000 tokens > 200000 maximum",
            "Too many tokens in request",
            "input exceeds the context length",
        ] {
            let body = json!({"error": {"message": phrase}}).to_string();
            assert_eq!(kind(413, &body), "context_overflow", "{phrase}");
        }
        // Any status: the message decides.
        assert_eq!(
            kind(500, r#"{"message":"the maximum context is 4096"}"#),
            "context_overflow"
        );
        assert_eq!(kind(400, r#"{"error":{"message":"bad"}}"#), "bad_request");
        assert_eq!(
            kind(404, r#"{"error":"model 'x' not found"}"#),
            "bad_request"
        );
        assert_eq!(kind(413, ""), "bad_request");
        assert_eq!(kind(422, "{}"), "bad_request");
        assert_eq!(kind(408, ""), "timeout");
        assert_eq!(kind(503, ""), "overloaded");
        assert_eq!(kind(529, ""), "overloaded");
        assert_eq!(
            kind(
                500,
                r#"{"error":{"type":"overloaded_error","message":"Overloaded"}}"#
            ),
            "overloaded"
        );
        assert_eq!(kind(500, ""), "server_error");
        assert_eq!(kind(502, "<html>Bad Gateway</html>"), "server_error");
        assert_eq!(
            kind(402, r#"{"error":{"message":"pay up"}}"#),
            "provider_error"
        );
        assert_eq!(kind(302, ""), "provider_error");
    }

    #[test]
    fn error_messages() {
        let message = |status: u16, body: &str| classify(status, body).1;
        assert_eq!(
            message(
                404,
                r#"{"error":"model \"llama9\" not found, try pulling it first"}"#
            ),
            "HTTP 404: model \"llama9\" not found, try pulling it first"
        );
        assert_eq!(
            message(400, r#"{"message":"Invalid request","code":400}"#),
            "HTTP 400: Invalid request"
        );
        assert_eq!(
            message(
                400,
                r#"[{"error":{"code":400,"message":"bad","status":"INVALID_ARGUMENT"}}]"#
            ),
            "HTTP 400: bad"
        );
        assert_eq!(message(502, "  \n"), "HTTP 502: Bad Gateway");
        assert_eq!(message(599, ""), "HTTP 599");
        assert_eq!(
            message(500, "  upstream connect error  \n"),
            "HTTP 500: upstream connect error"
        );
        assert_eq!(
            message(500, r#"{"detail":"x"}"#),
            r#"HTTP 500: {"detail":"x"}"#
        );
        let long = "é".repeat(600);
        assert_eq!(
            message(500, &long),
            format!("HTTP 500: {}…", "é".repeat(500))
        );
    }
}
