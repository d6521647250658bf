//! Errors of the Messages API: a non-2xx body or an in-stream `error` event read into a stable
//! kind (`auth`, `overloaded`, `context_overflow`, ...) and a short message. Pure.

use crate::kernel::failure::ErrorKind;
use serde_json::Value;

/// Whether an error message says the prompt does not fit the model's context window.
fn is_context_overflow(message: &str) -> bool {
    let m = message.to_lowercase();
    [
        "prompt is too long",
        "context window",
        "context limit",
        "context length",
    ]
    .iter()
    .any(|p| m.contains(p))
}

/// The stable error kind for an Anthropic error `type`.
pub(super) fn kind_for_type(error_type: &str, message: &str) -> ErrorKind {
    match error_type {
        "overloaded_error" => ErrorKind::Overloaded,
        "rate_limit_error" => ErrorKind::RateLimited,
        "api_error" => ErrorKind::ServerError,
        "timeout_error" => ErrorKind::Timeout,
        "authentication_error" | "permission_error" => ErrorKind::Auth,
        "invalid_request_error" if is_context_overflow(message) => ErrorKind::ContextOverflow,
        "invalid_request_error" | "request_too_large" | "not_found_error" => ErrorKind::BadRequest,
        _ => ErrorKind::ProviderError,
    }
}

/// The stable error kind for an HTTP status without a recognised error body.
fn kind_for_status(status: u16, message: &str) -> ErrorKind {
    match status {
        401 | 403 => ErrorKind::Auth,
        429 => ErrorKind::RateLimited,
        529 => ErrorKind::Overloaded,
        400 | 404 | 413 | 422 if is_context_overflow(message) => ErrorKind::ContextOverflow,
        400 | 404 | 413 | 422 => ErrorKind::BadRequest,
        408 => ErrorKind::Timeout,
        500..=599 => ErrorKind::ServerError,
        _ => ErrorKind::ProviderError,
    }
}

/// Maps a non-2xx response to `(kind, message)`.
///
/// The body is read as `{"type":"error","error":{"type","message"}}`; the kind comes from the
/// error type when there is one, else from the status. The message is
/// `HTTP <status>: <server message>`, falling back to the trimmed body (at most 500 characters),
/// or just `HTTP <status>` when the body is empty.
pub fn error_from_response(status: u16, body: &str) -> (ErrorKind, String) {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let error = parsed.as_ref().and_then(|v| v.get("error"));
    let error_type = error.and_then(|e| e.get("type")).and_then(Value::as_str);
    let server_message = error
        .and_then(|e| e.get("message"))
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| body.trim().chars().take(500).collect());
    let kind = match error_type {
        Some(t) => kind_for_type(t, &server_message),
        None => kind_for_status(status, &server_message),
    };
    let message = if server_message.is_empty() {
        format!("HTTP {status}")
    } else {
        format!("HTTP {status}: {server_message}")
    };
    (kind, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ERROR_401: &str = include_str!("../../../../fixtures/providers/anthropic/error_401.json");
    const ERROR_400_TOO_LONG: &str =
        include_str!("../../../../fixtures/providers/anthropic/error_400_too_long.json");
    const ERROR_529: &str = include_str!("../../../../fixtures/providers/anthropic/error_529.json");

    #[test]
    fn error_responses_map_to_kinds() {
        let rows: &[(u16, &str, &str, &str)] = &[
            (401, ERROR_401, "auth", "HTTP 401: invalid x-api-key"),
            (
                400,
                ERROR_400_TOO_LONG,
                "context_overflow",
                "HTTP 400: prompt is too long: 215000 tokens > 200000 maximum",
            ),
            (529, ERROR_529, "overloaded", "HTTP 529: Overloaded"),
            (
                429,
                r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#,
                "rate_limited",
                "HTTP 429: slow down",
            ),
            (
                500,
                r#"{"type":"error","error":{"type":"api_error","message":"Internal server error"}}"#,
                "server_error",
                "HTTP 500: Internal server error",
            ),
            (
                403,
                r#"{"type":"error","error":{"type":"permission_error","message":"no access"}}"#,
                "auth",
                "HTTP 403: no access",
            ),
            (
                400,
                r#"{"type":"error","error":{"type":"invalid_request_error","message":"input length and `max_tokens` exceed context limit: 197202 + 21333 > 200000"}}"#,
                "context_overflow",
                "HTTP 400: input length and `max_tokens` exceed context limit: 197202 + 21333 > 200000",
            ),
            (
                400,
                r#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: Field required"}}"#,
                "bad_request",
                "HTTP 400: max_tokens: Field required",
            ),
            (
                413,
                r#"{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum allowed number of bytes."}}"#,
                "bad_request",
                "HTTP 413: Request exceeds the maximum allowed number of bytes.",
            ),
            (
                404,
                r#"{"type":"error","error":{"type":"not_found_error","message":"model: claude-nope"}}"#,
                "bad_request",
                "HTTP 404: model: claude-nope",
            ),
            (
                402,
                r#"{"type":"error","error":{"type":"billing_error","message":"credit balance too low"}}"#,
                "provider_error",
                "HTTP 402: credit balance too low",
            ),
            // No error body: the status decides.
            (401, "Unauthorized", "auth", "HTTP 401: Unauthorized"),
            (403, "", "auth", "HTTP 403"),
            (429, "  too many  \n", "rate_limited", "HTTP 429: too many"),
            (529, "", "overloaded", "HTTP 529"),
            (400, "bad", "bad_request", "HTTP 400: bad"),
            (404, "Not Found", "bad_request", "HTTP 404: Not Found"),
            (413, "", "bad_request", "HTTP 413"),
            (422, "{}", "bad_request", "HTTP 422: {}"),
            (
                400,
                "prompt is too long",
                "context_overflow",
                "HTTP 400: prompt is too long",
            ),
            (408, "", "timeout", "HTTP 408"),
            (502, "<html>Bad Gateway</html>", "server_error", "HTTP 502: <html>Bad Gateway</html>"),
            (503, "", "server_error", "HTTP 503"),
            (418, "teapot", "provider_error", "HTTP 418: teapot"),
        ];
        for (status, body, kind, message) in rows {
            let (got, said) = error_from_response(*status, body);
            assert_eq!(
                (got.to_string(), said),
                (kind.to_string(), message.to_string()),
                "{status} {body}"
            );
        }
        let long = "é".repeat(600);
        let (kind, message) = error_from_response(500, &long);
        assert_eq!(kind, ErrorKind::ServerError);
        assert_eq!(message, format!("HTTP 500: {}", "é".repeat(500)));
    }
}
