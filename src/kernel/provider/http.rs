//! The HTTP transport shared by the `openai`, `responses`, `anthropic` and `gemini` providers:
//! one POST, status and `Retry-After` handling (or the error body's own retry hint), then the SSE body through the API's decoder, with an idle-stream
//! timeout. Dropping the call (abort) drops the request and closes the connection at once.
//!
//! Error kinds it adds to the decoders' own: `connection` (no response, or the connection
//! closed before any output: retryable), `idle_timeout` (no progress for the idle timeout;
//! SSE comments such as `: ping` are not progress) and `stream_too_large` (a line, the
//! response or a tool call's arguments over its cap, see [`StreamLimits`]); a body cut after
//! output arrived is `stream_cut` (the turn fails). A 200 whose body ends cleanly without a
//! byte is `context_overflow`: llama.cpp's server answers a prompt longer than its context so.

use crate::kernel::failure::ErrorKind;
use std::time::Duration;

use tokio::time::Instant;

use reqwest::header::{HeaderMap, HeaderValue, CONTENT_TYPE};
use tokio::sync::mpsc;

use super::limits::{too_large_message, Budget, StreamLimits, MAX_ERROR_BODY_BYTES};
use super::model::{ModelInfo, API_ANTHROPIC, API_GEMINI, API_RESPONSES};
use super::sse::{SseDecoder, StreamDecoder};
use super::{anthropic, gemini, openai, responses, ModelRequest, Provider, ProviderEvent};
use crate::kernel::abort::AbortSignal;

/// Transport limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpOptions {
    /// Time allowed to establish the TCP (and TLS) connection.
    pub connect_timeout: Duration,
    /// Longest wait for the response headers, or for progress in the body (keep-alive
    /// comments do not count).
    pub idle_timeout: Duration,
    /// Caps on one streamed response.
    pub limits: StreamLimits,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            connect_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(300),
            limits: StreamLimits::default(),
        }
    }
}

/// Why an [`HttpProvider`] cannot be made: its HTTP client (TLS backend, system
/// configuration) failed to build. The only way setting one up fails, so it has no kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientError {
    /// What the user reads.
    pub message: String,
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ClientError {}

/// A provider that speaks the OpenAI Chat Completions or Responses API, the Anthropic
/// Messages API or the Gemini API over HTTP.
#[derive(Debug)]
pub struct HttpProvider {
    info: ModelInfo,
    api_key: Option<String>,
    client: reqwest::Client,
    options: HttpOptions,
}

impl HttpProvider {
    /// A provider for `info` (its `api` picks the wire format). `api_key` may be absent for
    /// local servers that need none.
    pub fn new(
        info: ModelInfo,
        api_key: Option<String>,
        options: HttpOptions,
    ) -> Result<Self, ClientError> {
        let client = reqwest::Client::builder()
            .connect_timeout(options.connect_timeout)
            .user_agent(concat!("keel/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ClientError {
                message: format!("cannot set up the HTTP client: {e}"),
            })?;
        Ok(HttpProvider {
            info,
            api_key,
            client,
            options,
        })
    }

    /// Everything API-specific about one call: URL, headers, body, decoder and the error
    /// classification of non-2xx responses.
    fn prepare(&self, request: &ModelRequest, tx: mpsc::Sender<ProviderEvent>) -> Call {
        let base = self.info.base_url.trim_end_matches('/');
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if self.info.api == API_ANTHROPIC {
            let key = self
                .api_key
                .as_deref()
                .and_then(|k| HeaderValue::from_str(k).ok());
            if let Some(k) = key {
                headers.insert("x-api-key", k);
            }
            headers.insert(
                "anthropic-version",
                HeaderValue::from_static(anthropic::API_VERSION),
            );
            let url = if base.ends_with("/v1") {
                format!("{base}/messages")
            } else {
                format!("{base}/v1/messages")
            };
            return self.call(
                url,
                headers,
                anthropic::request_body(request, &self.info),
                Box::new(anthropic::AnthropicDecoder::new(&self.info)),
                anthropic::error_from_response,
                tx,
            );
        }
        if self.info.api == API_GEMINI {
            return self.gemini(request, headers, tx);
        }
        if let Some(k) = self
            .api_key
            .as_deref()
            .and_then(|k| HeaderValue::from_str(&format!("Bearer {k}")).ok())
        {
            headers.insert(reqwest::header::AUTHORIZATION, k);
        }
        if self.info.api == API_RESPONSES {
            return self.call(
                format!("{base}/responses"),
                headers,
                responses::request_body(request, &self.info),
                Box::new(responses::ResponsesDecoder::new(&self.info)),
                responses::error_from_response,
                tx,
            );
        }
        self.call(
            format!("{base}/chat/completions"),
            headers,
            openai::request_body(request, &self.info),
            Box::new(openai::OpenAiDecoder::new(&self.info)),
            openai::error_from_response,
            tx,
        )
    }

    /// A Gemini call: the key in `x-goog-api-key`, the model in the path.
    fn gemini(
        &self,
        request: &ModelRequest,
        mut headers: HeaderMap,
        tx: mpsc::Sender<ProviderEvent>,
    ) -> Call {
        let key = self
            .api_key
            .as_deref()
            .and_then(|k| HeaderValue::from_str(k).ok());
        if let Some(k) = key {
            headers.insert("x-goog-api-key", k);
        }
        let mut call = self.call(
            gemini::stream_url(&self.info.base_url, &self.info.id),
            headers,
            gemini::request_body(request, &self.info),
            Box::new(gemini::GeminiDecoder::new(
                &self.info,
                request.messages.len(),
            )),
            gemini::error_from_response,
            tx,
        );
        call.body_retry = gemini::retry_from_body;
        call
    }

    fn call(
        &self,
        url: String,
        headers: HeaderMap,
        body: serde_json::Value,
        decoder: Box<dyn StreamDecoder>,
        classify: fn(u16, &str) -> (ErrorKind, String),
        tx: mpsc::Sender<ProviderEvent>,
    ) -> Call {
        Call {
            client: self.client.clone(),
            url,
            headers,
            body,
            decoder,
            classify,
            body_retry: |_| None,
            idle: self.options.idle_timeout,
            limits: self.options.limits,
            who: self.who(),
            tx,
        }
    }

    /// `provider (model)`: the prefix of every error message.
    fn who(&self) -> String {
        format!("{} ({})", self.info.provider, self.info.id)
    }
}

impl Provider for HttpProvider {
    fn info(&self) -> &ModelInfo {
        &self.info
    }

    fn stream(&self, request: ModelRequest, abort: AbortSignal) -> mpsc::Receiver<ProviderEvent> {
        let (tx, rx) = mpsc::channel(256);
        let call = self.prepare(&request, tx);
        tokio::spawn(async move {
            // Dropping `call.run` on abort drops the in-flight request: the connection closes.
            tokio::select! {
                _ = call.run() => {}
                _ = abort.aborted() => {}
            }
        });
        rx
    }
}

struct Call {
    client: reqwest::Client,
    url: String,
    headers: HeaderMap,
    body: serde_json::Value,
    decoder: Box<dyn StreamDecoder>,
    /// The API's (kind, message) for a non-2xx response.
    classify: fn(u16, &str) -> (ErrorKind, String),
    /// The back-off a non-2xx body asks for, when the headers ask for none.
    body_retry: fn(&str) -> Option<u64>,
    idle: Duration,
    limits: StreamLimits,
    who: String,
    tx: mpsc::Sender<ProviderEvent>,
}

fn error(kind: ErrorKind, message: String, retry_after_ms: Option<u64>) -> ProviderEvent {
    ProviderEvent::Error {
        kind,
        message,
        retry_after_ms,
    }
}

impl Call {
    async fn run(mut self) {
        let send = self
            .client
            .post(&self.url)
            .headers(std::mem::take(&mut self.headers))
            .body(serde_json::to_vec(&self.body).unwrap_or_default())
            .send();
        let response = match tokio::time::timeout(self.idle, send).await {
            Err(_) => {
                let msg = format!(
                    "{}: no response from {} within {}s",
                    self.who,
                    crate::kernel::url::redact_url(&self.url),
                    self.idle.as_secs_f64()
                );
                let _ = self.tx.send(error(ErrorKind::IdleTimeout, msg, None)).await;
                return;
            }
            Ok(Err(e)) => {
                let msg = format!("{}: cannot reach {}: {}", self.who, self.url, chain(&e));
                let msg = crate::kernel::url::redact_url(&msg);
                let _ = self.tx.send(error(ErrorKind::Connection, msg, None)).await;
                return;
            }
            Ok(Ok(r)) => r,
        };
        let status = response.status();
        if !status.is_success() {
            let retry_after = retry_after_ms(response.headers());
            let body = read_capped(response, MAX_ERROR_BODY_BYTES, self.idle)
                .await
                .unwrap_or_default();
            let body = String::from_utf8_lossy(&body);
            let retry_after = retry_after.or_else(|| (self.body_retry)(&body));
            let (kind, mut message) = (self.classify)(status.as_u16(), &body);
            if status.as_u16() == 404 {
                message.push_str(&not_found_hint("POST", &self.url));
            }
            let _ = self
                .tx
                .send(error(kind, format!("{}: {message}", self.who), retry_after))
                .await;
            return;
        }
        self.stream_body(response).await;
    }

    async fn stream_body(mut self, mut response: reqwest::Response) {
        let mut sse = SseDecoder::with_max_line(self.limits.max_line_bytes);
        let mut budget = Budget::new(self.limits);
        let mut events = Vec::new();
        let mut out = Vec::new();
        let mut deadline = Instant::now() + self.idle;
        // Data bytes at the last progress, and whether only keep-alives came since.
        let mut progress = 0;
        let mut kept_alive = false;
        let mut received = 0;
        loop {
            let chunk = match tokio::time::timeout_at(deadline, response.chunk()).await {
                Err(_) => return self.stalled(kept_alive).await,
                Ok(Err(e)) => return self.broken(&e).await,
                Ok(Ok(chunk)) => chunk,
            };
            match &chunk {
                Some(bytes) => received += bytes.len(),
                None if received == 0 => return self.empty().await,
                None => {}
            }
            let fed = match &chunk {
                Some(bytes) => budget
                    .body(bytes.len())
                    .and_then(|_| sse.push(bytes, &mut events).map_err(too_large_message)),
                None => sse.finish(&mut events).map_err(too_large_message),
            };
            if let Err(message) = fed {
                return self.too_large(message).await;
            }
            if sse.data_bytes() > progress {
                progress = sse.data_bytes();
                kept_alive = false;
                deadline = Instant::now() + self.idle;
            } else {
                kept_alive = true;
            }
            for ev in events.drain(..) {
                self.decoder.on_event(&ev, &mut out);
            }
            if chunk.is_none() {
                self.decoder.finish(&mut out);
            }
            for ev in out.drain(..) {
                if let Err(message) = budget.event(&ev) {
                    return self.too_large(message).await;
                }
                let ev = self.annotate(ev);
                let terminal =
                    matches!(ev, ProviderEvent::Done { .. } | ProviderEvent::Error { .. });
                if self.tx.send(ev).await.is_err() || terminal {
                    return;
                }
            }
            if chunk.is_none() {
                return;
            }
        }
    }

    /// No progress for the idle timeout (perhaps only keep-alive comments).
    async fn stalled(&mut self, kept_alive: bool) {
        let msg = format!(
            "{}: the stream stalled: no data for {}s{}",
            self.who,
            self.idle.as_secs_f64(),
            if kept_alive {
                " (only keep-alive comments)"
            } else {
                ""
            }
        );
        let _ = self.tx.send(error(ErrorKind::IdleTimeout, msg, None)).await;
    }

    /// The response ended cleanly without a byte: what llama.cpp's server sends for a prompt
    /// over its context (`n_ctx`), so not retried as a dropped connection.
    async fn empty(&mut self) {
        let msg = format!(
            "{}: the server answered 200 with an empty stream (a llama.cpp server does so when \
             the prompt is longer than its context)",
            self.who
        );
        let _ = self
            .tx
            .send(error(ErrorKind::ContextOverflow, msg, None))
            .await;
    }

    /// The body failed: a cut answer after output, else a connection failure (retryable).
    async fn broken(&mut self, e: &reqwest::Error) {
        let (kind, what) = if self.decoder.saw_output() {
            (ErrorKind::StreamCut, "the stream was cut mid-response")
        } else {
            (
                ErrorKind::Connection,
                "the connection failed before the response started",
            )
        };
        let msg = format!("{}: {what}: {}", self.who, chain(e));
        let _ = self.tx.send(error(kind, msg, None)).await;
    }

    async fn too_large(&mut self, message: String) {
        let msg = format!("{}: {message}", self.who);
        let _ = self
            .tx
            .send(error(ErrorKind::StreamTooLarge, msg, None))
            .await;
    }

    /// Prefixes decoder errors with who failed; a cut before any output is a connection
    /// failure (retryable), not a cut answer.
    fn annotate(&self, ev: ProviderEvent) -> ProviderEvent {
        match ev {
            ProviderEvent::Error {
                kind,
                message,
                retry_after_ms,
            } => {
                let kind = if kind == ErrorKind::StreamCut && !self.decoder.saw_output() {
                    ErrorKind::Connection
                } else {
                    kind
                };
                ProviderEvent::Error {
                    kind,
                    message: format!("{}: {message}", self.who),
                    retry_after_ms,
                }
            }
            other => other,
        }
    }
}

/// At most `max` bytes of a response body, each piece within `idle`; the rest is not read
/// (dropping the response closes the connection).
pub(super) async fn read_capped(
    mut response: reqwest::Response,
    max: u64,
    idle: Duration,
) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    while (body.len() as u64) < max {
        match tokio::time::timeout(idle, response.chunk()).await {
            Err(_) => return Err(format!("no data for {}s", idle.as_secs_f64())),
            Ok(Err(e)) => return Err(chain(&e)),
            Ok(Ok(None)) => break,
            Ok(Ok(Some(bytes))) => {
                let room = (max - body.len() as u64) as usize;
                body.extend_from_slice(&bytes[..bytes.len().min(room)]);
            }
        }
    }
    Ok(body)
}

/// Whether a URL's path has a `/v1` segment, as OpenAI-compatible endpoints have (or
/// Google's `/v1beta`).
pub fn path_has_v1(url: &str) -> bool {
    let path = url
        .split_once("://")
        .map_or(url, |(_, rest)| rest.split_once('/').map_or("", |(_, p)| p));
    path.split(['/', '?'])
        .any(|seg| seg == "v1" || seg == "v1beta")
}

/// What to add to a 404: the URL tried and, when its path has no `/v1`, the likely cause.
fn not_found_hint(method: &str, url: &str) -> String {
    let url = &crate::kernel::url::redact_url(url);
    if path_has_v1(url) {
        format!(" ({method} {url})")
    } else {
        format!(" ({method} {url}; most OpenAI-compatible servers serve under /v1: is it missing from the base URL?)")
    }
}

/// The error and its causes on one line (reqwest's top-level message alone says little).
pub(super) fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

/// `retry-after-ms` (OpenAI) or `retry-after` in seconds. HTTP-date forms are ignored.
fn retry_after_ms(headers: &HeaderMap) -> Option<u64> {
    let get = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = get("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        return Some(ms.max(0.0) as u64);
    }
    get("retry-after")
        .and_then(|v| v.parse::<f64>().ok())
        .map(|s| (s.max(0.0) * 1000.0) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_404_names_the_url_and_hints_at_v1_only_when_it_is_missing() {
        assert_eq!(
            not_found_hint("GET", "http://127.0.0.1:8080/v1/models"),
            " (GET http://127.0.0.1:8080/v1/models)"
        );
        for url in [
            "http://127.0.0.1:8080/models",
            "http://h/api/models",
            "http://h",
        ] {
            let hint = not_found_hint("GET", url);
            assert!(hint.starts_with(&format!(" (GET {url}; ")), "{hint}");
            assert!(hint.contains("/v1"), "{hint}");
        }
        assert!(
            !not_found_hint("POST", "https://openrouter.ai/api/v1/chat/completions")
                .contains("missing")
        );
        // Gemini's path is versioned too: no /v1 hint there.
        let gemini = "http://127.0.0.1:9/v1beta/models/m:streamGenerateContent?alt=sse";
        assert_eq!(not_found_hint("POST", gemini), format!(" (POST {gemini})"));
    }

    #[test]
    fn retry_after_forms() {
        let mut h = HeaderMap::new();
        assert_eq!(retry_after_ms(&h), None);
        h.insert("retry-after", HeaderValue::from_static("2"));
        assert_eq!(retry_after_ms(&h), Some(2000));
        h.insert("retry-after-ms", HeaderValue::from_static("150"));
        assert_eq!(retry_after_ms(&h), Some(150));
        let mut h = HeaderMap::new();
        h.insert(
            "retry-after",
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(retry_after_ms(&h), None);
    }
}
