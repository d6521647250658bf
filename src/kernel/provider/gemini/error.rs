//! Errors of the Gemini API: a `google.rpc.Status` (`{"error":{code, message, status,
//! details}}`), as the body of a non-2xx response or as a chunk of the stream, read into a
//! stable kind (`auth`, `rate_limited`, `context_overflow`, ...), a short message and the
//! back-off `RetryInfo.retryDelay` asks for. Pure.

use crate::kernel::failure::ErrorKind;
use serde::Deserialize;

use crate::kernel::provider::openai::clip;

/// The longest server message kept in an error, in characters.
const MAX_ERROR_CHARS: usize = 500;

/// A `google.rpc.Status`, as far as keel reads it.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct Status {
    /// The HTTP status the error stands for.
    pub code: u16,
    pub message: String,
    /// The canonical code: `INVALID_ARGUMENT`, `RESOURCE_EXHAUSTED`, ...
    pub status: String,
    pub details: Vec<Detail>,
}

/// One entry of `details` (`RetryInfo`, `ErrorInfo`, ...; other fields are ignored).
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(super) struct Detail {
    /// `RetryInfo`: a duration such as `17s` or `1.5s`.
    retry_delay: Option<String>,
    /// `ErrorInfo`: a word such as `API_KEY_INVALID`.
    reason: Option<String>,
}

/// A body holding a status: `{"error":{…}}`.
#[derive(Deserialize)]
struct Body {
    error: Status,
}

impl Status {
    /// The stable error kind of this status under HTTP `http` (its own `code` inside a stream).
    pub fn kind(&self) -> ErrorKind {
        let http = self.code;
        let canonical = self.status.as_str();
        let key_invalid = self
            .details
            .iter()
            .any(|d| d.reason.as_deref() == Some("API_KEY_INVALID"));
        if http == 401
            || http == 403
            || key_invalid
            || matches!(canonical, "UNAUTHENTICATED" | "PERMISSION_DENIED")
        {
            return ErrorKind::Auth;
        }
        if http == 429 || canonical == "RESOURCE_EXHAUSTED" {
            return ErrorKind::RateLimited;
        }
        if self
            .message
            .contains("exceeds the maximum number of tokens")
        {
            return ErrorKind::ContextOverflow;
        }
        match (canonical, http) {
            ("DEADLINE_EXCEEDED", _) | (_, 504) | (_, 408) => ErrorKind::Timeout,
            ("UNAVAILABLE", _) | (_, 503) => ErrorKind::Overloaded,
            ("INTERNAL", _) | (_, 500..=599) => ErrorKind::ServerError,
            ("INVALID_ARGUMENT" | "FAILED_PRECONDITION" | "NOT_FOUND", _) => ErrorKind::BadRequest,
            (_, 400 | 404 | 413 | 422) => ErrorKind::BadRequest,
            _ => ErrorKind::ProviderError,
        }
    }

    /// The wait `RetryInfo.retryDelay` asks for, in ms.
    pub fn retry_after_ms(&self) -> Option<u64> {
        let delay = self.details.iter().find_map(|d| d.retry_delay.as_deref())?;
        let seconds: f64 = delay.trim().strip_suffix('s')?.parse().ok()?;
        Some((seconds.max(0.0) * 1000.0).round() as u64)
    }

    /// The server's message, clipped.
    pub fn said(&self) -> String {
        clip(self.message.trim(), MAX_ERROR_CHARS)
    }
}

/// The status in an error body: `{"error":…}` or a one-element array of it (the API's
/// non-SSE streaming form).
fn parse(body: &str) -> Option<Status> {
    let body = body.trim();
    let parsed = match body.strip_prefix('[') {
        Some(_) => serde_json::from_str::<Vec<Body>>(body)
            .ok()
            .and_then(|v| v.into_iter().next()),
        None => serde_json::from_str::<Body>(body).ok(),
    };
    parsed.map(|b| b.error)
}

/// A non-2xx response: `(kind, message)`, `message` being `HTTP <status>: <what the server
/// said>`.
pub fn error_from_response(status: u16, body: &str) -> (ErrorKind, String) {
    let mut parsed = parse(body).unwrap_or_default();
    // The HTTP status decides; the body's `code` only stands in when it has none.
    parsed.code = status;
    let said = match parsed.said() {
        s if s.is_empty() => clip(body.trim(), MAX_ERROR_CHARS),
        s => s,
    };
    let message = match said.is_empty() {
        true => format!("HTTP {status}"),
        false => format!("HTTP {status}: {said}"),
    };
    (parsed.kind(), message)
}

/// The back-off an error body's `RetryInfo` asks for, in ms.
pub fn retry_from_body(body: &str) -> Option<u64> {
    parse(body)?.retry_after_ms()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ERROR_429: &str = include_str!("../../../../fixtures/providers/gemini/error_429.json");
    const KEY: &str = include_str!("../../../../fixtures/providers/gemini/error_400_key.json");
    const TOO_LONG: &str =
        include_str!("../../../../fixtures/providers/gemini/error_400_too_long.json");

    #[test]
    fn error_fixtures() {
        let (kind, message) = error_from_response(429, ERROR_429);
        assert_eq!(kind, ErrorKind::RateLimited);
        assert_eq!(
            message,
            "HTTP 429: You exceeded your current quota, please check your plan and billing details."
        );
        assert_eq!(retry_from_body(ERROR_429), Some(17_000));
        assert_eq!(error_from_response(400, KEY).0, ErrorKind::Auth);
        assert_eq!(
            error_from_response(400, TOO_LONG).0,
            ErrorKind::ContextOverflow
        );
        assert_eq!(retry_from_body(KEY), None);
    }

    #[test]
    fn statuses_map_to_kinds() {
        let kind = |http: u16, status: &str| {
            let body =
                format!(r#"{{"error":{{"code":{http},"message":"m","status":"{status}"}}}}"#);
            error_from_response(http, &body).0.to_string()
        };
        assert_eq!(kind(400, "INVALID_ARGUMENT"), "bad_request");
        assert_eq!(kind(400, "FAILED_PRECONDITION"), "bad_request");
        assert_eq!(kind(403, "PERMISSION_DENIED"), "auth");
        assert_eq!(kind(404, "NOT_FOUND"), "bad_request");
        assert_eq!(kind(500, "INTERNAL"), "server_error");
        assert_eq!(kind(503, "UNAVAILABLE"), "overloaded");
        assert_eq!(kind(504, "DEADLINE_EXCEEDED"), "timeout");
        // A body in the array form, and one that is not JSON.
        let array = r#"[{"error":{"code":503,"message":"busy","status":"UNAVAILABLE"}}]"#;
        assert_eq!(
            error_from_response(503, array),
            ("overloaded".into(), "HTTP 503: busy".into())
        );
        assert_eq!(
            error_from_response(502, "<html>bad gateway</html>"),
            (
                "server_error".into(),
                "HTTP 502: <html>bad gateway</html>".into()
            )
        );
        assert_eq!(
            error_from_response(500, ""),
            ("server_error".into(), "HTTP 500".into())
        );
    }
}
