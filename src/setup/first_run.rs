//! Starting the TUI with no model provider configured: instead of exit 3, the TUI opens with a
//! first-run panel (what to set, how to reach a local server, how to try keel offline), and a
//! stand-in provider answers every prompt with the same advice as an error. Owns only that.

use tokio::sync::mpsc;

use crate::kernel::abort::AbortSignal;
use crate::kernel::provider::model::ModelInfo;
use crate::kernel::provider::{ModelRequest, Provider, ProviderEvent};

/// The first-run panel, shown as the session's first notice.
pub fn panel() -> String {
    [
        "Welcome to keel. No model provider is configured yet; keel reads it from the",
        "environment (or flags) when it starts. Quit (Ctrl+D) and set one of:",
        "  ANTHROPIC_API_KEY=sk-ant-…                   Claude",
        "  OPENAI_API_KEY=sk-…                          OpenAI",
        "  OPENAI_BASE_URL=http://localhost:11434/v1    Ollama, or any OpenAI-compatible",
        "                                               server (llama.cpp: :8080/v1, vLLM)",
        "or pass --base-url URL [--model NAME]; more providers and models in",
        "$KEEL_HOME/models.json (docs/providers.md).",
        "To try keel offline: keel --provider scripted --script fixtures/providers/hello.json",
    ]
    .join("\n")
}

/// The provider of a session started without one: each call fails with the advice.
#[derive(Debug)]
pub struct Unconfigured {
    info: ModelInfo,
}

impl Unconfigured {
    pub fn new() -> Self {
        // The default window: a zero one would make every prompt ask for a compaction.
        Unconfigured {
            info: ModelInfo::unlisted("none", "none", "", "no model"),
        }
    }
}

impl Default for Unconfigured {
    fn default() -> Self {
        Self::new()
    }
}

impl Provider for Unconfigured {
    fn info(&self) -> &ModelInfo {
        &self.info
    }

    fn stream(&self, _request: ModelRequest, _abort: AbortSignal) -> mpsc::Receiver<ProviderEvent> {
        let (tx, rx) = mpsc::channel(1);
        let _ = tx.try_send(ProviderEvent::Error {
            kind: crate::kernel::failure::ErrorKind::NotConfigured,
            message:
                "no model provider is configured: quit, set ANTHROPIC_API_KEY, \
                      OPENAI_API_KEY or OPENAI_BASE_URL (see the panel above), and start keel again"
                    .into(),
            retry_after_ms: None,
        });
        rx
    }
}
