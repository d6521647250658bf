//! Model metadata and the model registry: built-in providers and models, plus custom
//! OpenAI-compatible endpoints from `$KEEL_HOME/models.json`. Pure data and lookups; the caller
//! resolves flags and environment into a [`Resolved`] model with its credentials.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::kernel::message::Usage;

/// The wire API a model speaks.
pub const API_OPENAI: &str = "openai-completions";
pub const API_ANTHROPIC: &str = "anthropic-messages";
pub const API_SCRIPTED: &str = "scripted";

/// Every thinking level, weakest first.
pub const THINKING_LEVELS: &[&str] = &["off", "minimal", "low", "medium", "high", "xhigh"];

/// What keel knows about one model (pi's `Model` shape, without `compat` internals).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelInfo {
    pub id: String,
    pub name: String,
    pub api: String,
    pub provider: String,
    pub base_url: String,
    pub reasoning: bool,
    pub input: Vec<String>,
    pub cost: ModelCost,
    pub context_window: u64,
    pub max_tokens: u64,
    /// The thinking levels the model accepts, weakest first (always starts with `off`).
    #[serde(skip)]
    pub thinking_levels: Vec<String>,
    /// Differences between OpenAI-compatible servers.
    #[serde(skip)]
    pub compat: OpenAiCompat,
}

/// USD per million tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ModelCost {
    pub input: f64,
    pub output: f64,
    pub cache_read: f64,
    pub cache_write: f64,
}

impl ModelCost {
    /// Fills `usage.cost` from its token counts.
    pub fn apply(&self, usage: &mut Usage) {
        let per = |tokens: u64, price: f64| tokens as f64 * price / 1_000_000.0;
        usage.cost.input = per(usage.input, self.input);
        usage.cost.output = per(usage.output, self.output);
        usage.cost.cache_read = per(usage.cache_read, self.cache_read);
        usage.cost.cache_write = per(usage.cache_write, self.cache_write);
        usage.cost.total =
            usage.cost.input + usage.cost.output + usage.cost.cache_read + usage.cost.cache_write;
    }
}

/// Request details that differ between OpenAI-compatible servers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenAiCompat {
    /// `max_completion_tokens` (OpenAI) or `max_tokens` (most compatible servers).
    pub max_tokens_field: &'static str,
    /// Whether to send `reasoning_effort` for reasoning models.
    pub reasoning_effort: bool,
    /// Whether to send `stream_options: {include_usage: true}`.
    pub stream_usage: bool,
}

impl Default for OpenAiCompat {
    fn default() -> Self {
        OpenAiCompat {
            max_tokens_field: "max_tokens",
            reasoning_effort: true,
            stream_usage: true,
        }
    }
}

impl OpenAiCompat {
    /// The settings for a base URL: OpenAI itself wants `max_completion_tokens`.
    pub fn for_base_url(base_url: &str) -> Self {
        let mut c = OpenAiCompat::default();
        if base_url.contains("api.openai.com") {
            c.max_tokens_field = "max_completion_tokens";
        }
        c
    }
}

impl ModelInfo {
    /// A model with default limits, for ids a registry does not list (custom endpoints).
    pub fn unlisted(provider: &str, api: &str, base_url: &str, id: &str) -> ModelInfo {
        ModelInfo {
            id: id.to_string(),
            name: id.to_string(),
            api: api.to_string(),
            provider: provider.to_string(),
            base_url: base_url.to_string(),
            reasoning: false,
            input: vec!["text".into()],
            cost: ModelCost::default(),
            context_window: 128_000,
            max_tokens: 8_192,
            thinking_levels: vec!["off".into()],
            compat: OpenAiCompat::for_base_url(base_url),
        }
    }

    /// The strongest supported level not above `requested` (`off` for models without
    /// reasoning). Unknown words count as `off`.
    pub fn clamp_thinking(&self, requested: &str) -> String {
        let rank = |l: &str| THINKING_LEVELS.iter().position(|x| *x == l).unwrap_or(0);
        let want = rank(requested);
        self.thinking_levels
            .iter()
            .filter(|l| rank(l) <= want)
            .max_by_key(|l| rank(l))
            .cloned()
            .unwrap_or_else(|| "off".into())
    }
}

/// A provider keel knows how to reach.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderInfo {
    pub name: String,
    pub api: String,
    pub base_url: String,
    /// Environment variable holding the API key; `None` when no key is needed (local servers).
    pub key_env: Option<String>,
    /// A literal key from models.json.
    pub key: Option<String>,
    /// Environment variable that overrides the base URL.
    pub base_url_env: Option<String>,
    /// The model used when only the provider is given.
    pub default_model: Option<String>,
    pub models: Vec<ModelInfo>,
}

impl ProviderInfo {
    /// Whether this provider's models are what its server lists (`GET /models`) rather than the
    /// registry's: an OpenAI-compatible server at a URL the user chose (`custom_url`: a flag or
    /// the provider's URL variable), or a keyless one without a default model (Ollama).
    pub fn served_by_server(&self, custom_url: bool) -> bool {
        self.api == API_OPENAI
            && (custom_url
                || (self.default_model.is_none() && self.key_env.is_none() && self.key.is_none()))
    }
}

/// Built-in providers plus models.json.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    pub providers: Vec<ProviderInfo>,
}

struct Builtin {
    id: &'static str,
    name: &'static str,
    reasoning: &'static [&'static str],
    /// input, output, cache read, cache write (USD per million tokens).
    cost: [f64; 4],
    context: u64,
    max_out: u64,
    image: bool,
}

const NO_REASONING: &[&str] = &["off"];
const EFFORT: &[&str] = &["off", "low", "medium", "high"];
const EFFORT_MINIMAL: &[&str] = &["off", "minimal", "low", "medium", "high"];
const BUDGET: &[&str] = &["off", "minimal", "low", "medium", "high", "xhigh"];

// Prices and limits as published by each vendor in 2025; update with the vendors' pages.
const OPENAI_MODELS: &[Builtin] = &[
    Builtin {
        id: "gpt-5",
        name: "GPT-5",
        reasoning: EFFORT_MINIMAL,
        cost: [1.25, 10.0, 0.125, 0.0],
        context: 400_000,
        max_out: 128_000,
        image: true,
    },
    Builtin {
        id: "gpt-5-mini",
        name: "GPT-5 mini",
        reasoning: EFFORT_MINIMAL,
        cost: [0.25, 2.0, 0.025, 0.0],
        context: 400_000,
        max_out: 128_000,
        image: true,
    },
    Builtin {
        id: "gpt-4.1",
        name: "GPT-4.1",
        reasoning: NO_REASONING,
        cost: [2.0, 8.0, 0.5, 0.0],
        context: 1_047_576,
        max_out: 32_768,
        image: true,
    },
    Builtin {
        id: "gpt-4.1-mini",
        name: "GPT-4.1 mini",
        reasoning: NO_REASONING,
        cost: [0.4, 1.6, 0.1, 0.0],
        context: 1_047_576,
        max_out: 32_768,
        image: true,
    },
    Builtin {
        id: "gpt-4o",
        name: "GPT-4o",
        reasoning: NO_REASONING,
        cost: [2.5, 10.0, 1.25, 0.0],
        context: 128_000,
        max_out: 16_384,
        image: true,
    },
    Builtin {
        id: "gpt-4o-mini",
        name: "GPT-4o mini",
        reasoning: NO_REASONING,
        cost: [0.15, 0.6, 0.075, 0.0],
        context: 128_000,
        max_out: 16_384,
        image: true,
    },
    Builtin {
        id: "o4-mini",
        name: "o4-mini",
        reasoning: EFFORT,
        cost: [1.1, 4.4, 0.275, 0.0],
        context: 200_000,
        max_out: 100_000,
        image: true,
    },
];

const ANTHROPIC_MODELS: &[Builtin] = &[
    Builtin {
        id: "claude-sonnet-4-5",
        name: "Claude Sonnet 4.5",
        reasoning: BUDGET,
        cost: [3.0, 15.0, 0.3, 3.75],
        context: 200_000,
        max_out: 64_000,
        image: true,
    },
    Builtin {
        id: "claude-haiku-4-5",
        name: "Claude Haiku 4.5",
        reasoning: BUDGET,
        cost: [1.0, 5.0, 0.1, 1.25],
        context: 200_000,
        max_out: 64_000,
        image: true,
    },
    Builtin {
        id: "claude-opus-4-1",
        name: "Claude Opus 4.1",
        reasoning: BUDGET,
        cost: [15.0, 75.0, 1.5, 18.75],
        context: 200_000,
        max_out: 32_000,
        image: true,
    },
];

const DEEPSEEK_MODELS: &[Builtin] = &[
    Builtin {
        id: "deepseek-chat",
        name: "DeepSeek V3 (chat)",
        reasoning: NO_REASONING,
        cost: [0.28, 0.42, 0.028, 0.0],
        context: 128_000,
        max_out: 8_192,
        image: false,
    },
    Builtin {
        id: "deepseek-reasoner",
        name: "DeepSeek V3 (reasoner)",
        reasoning: NO_REASONING,
        cost: [0.28, 0.42, 0.028, 0.0],
        context: 128_000,
        max_out: 65_536,
        image: false,
    },
];

fn builtin_models(provider: &str, api: &str, base_url: &str, list: &[Builtin]) -> Vec<ModelInfo> {
    list.iter()
        .map(|b| ModelInfo {
            id: b.id.into(),
            name: b.name.into(),
            api: api.into(),
            provider: provider.into(),
            base_url: base_url.into(),
            reasoning: b.reasoning.len() > 1,
            input: if b.image {
                vec!["text".into(), "image".into()]
            } else {
                vec!["text".into()]
            },
            cost: ModelCost {
                input: b.cost[0],
                output: b.cost[1],
                cache_read: b.cost[2],
                cache_write: b.cost[3],
            },
            context_window: b.context,
            max_tokens: b.max_out,
            thinking_levels: b.reasoning.iter().map(|s| s.to_string()).collect(),
            compat: OpenAiCompat::for_base_url(base_url),
        })
        .collect()
}

#[allow(clippy::too_many_arguments)]
fn builtin(
    name: &str,
    api: &str,
    base_url: &str,
    key_env: Option<&str>,
    base_url_env: Option<&str>,
    default_model: Option<&str>,
    models: &[Builtin],
) -> ProviderInfo {
    ProviderInfo {
        name: name.into(),
        api: api.into(),
        base_url: base_url.into(),
        key_env: key_env.map(Into::into),
        key: None,
        base_url_env: base_url_env.map(Into::into),
        default_model: default_model.map(Into::into),
        models: builtin_models(name, api, base_url, models),
    }
}

/// One provider entry of models.json.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct FileProvider {
    base_url: String,
    #[serde(default)]
    api: Option<String>,
    /// The name of the environment variable that holds the key.
    #[serde(default)]
    api_key_env: Option<String>,
    /// A literal key (prefer `apiKeyEnv`).
    #[serde(default)]
    api_key: Option<String>,
    #[serde(default)]
    models: Vec<FileModel>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct FileModel {
    id: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    reasoning: bool,
    #[serde(default)]
    input: Option<Vec<String>>,
    #[serde(default)]
    cost: ModelCost,
    #[serde(default)]
    context_window: Option<u64>,
    #[serde(default)]
    max_tokens: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelsFile {
    #[serde(default)]
    providers: BTreeMap<String, FileProvider>,
}

impl Registry {
    /// The built-in providers: openai, anthropic, deepseek, openrouter, groq, ollama.
    pub fn builtin() -> Registry {
        Registry {
            providers: vec![
                builtin(
                    "openai",
                    API_OPENAI,
                    "https://api.openai.com/v1",
                    Some("OPENAI_API_KEY"),
                    Some("OPENAI_BASE_URL"),
                    Some("gpt-4.1"),
                    OPENAI_MODELS,
                ),
                builtin(
                    "anthropic",
                    API_ANTHROPIC,
                    "https://api.anthropic.com",
                    Some("ANTHROPIC_API_KEY"),
                    Some("ANTHROPIC_BASE_URL"),
                    Some("claude-sonnet-4-5"),
                    ANTHROPIC_MODELS,
                ),
                builtin(
                    "deepseek",
                    API_OPENAI,
                    "https://api.deepseek.com/v1",
                    Some("DEEPSEEK_API_KEY"),
                    None,
                    Some("deepseek-chat"),
                    DEEPSEEK_MODELS,
                ),
                builtin(
                    "openrouter",
                    API_OPENAI,
                    "https://openrouter.ai/api/v1",
                    Some("OPENROUTER_API_KEY"),
                    None,
                    None,
                    &[],
                ),
                builtin(
                    "groq",
                    API_OPENAI,
                    "https://api.groq.com/openai/v1",
                    Some("GROQ_API_KEY"),
                    None,
                    None,
                    &[],
                ),
                builtin(
                    "ollama",
                    API_OPENAI,
                    "http://localhost:11434/v1",
                    None,
                    Some("OLLAMA_BASE_URL"),
                    None,
                    &[],
                ),
            ],
        }
    }

    /// Adds (or replaces) providers from the text of a models.json file.
    pub fn merge_file(&mut self, text: &str) -> Result<(), RegistryError> {
        let file: ModelsFile = serde_json::from_str(text).map_err(|e| RegistryError {
            kind: RegistryErrorKind::Syntax,
            message: e.to_string(),
        })?;
        for (name, p) in file.providers {
            let api = p.api.unwrap_or_else(|| API_OPENAI.to_string());
            if api != API_OPENAI && api != API_ANTHROPIC {
                return Err(RegistryError {
                    kind: RegistryErrorKind::UnknownApi,
                    message: format!(
                        "provider `{name}`: unknown api `{api}` (use `{API_OPENAI}` or `{API_ANTHROPIC}`)"
                    ),
                });
            }
            let models = p
                .models
                .into_iter()
                .map(|m| {
                    let mut info = ModelInfo::unlisted(&name, &api, &p.base_url, &m.id);
                    info.name = m.name.unwrap_or_else(|| m.id.clone());
                    info.reasoning = m.reasoning;
                    if m.reasoning {
                        info.thinking_levels =
                            EFFORT_MINIMAL.iter().map(|s| s.to_string()).collect();
                    }
                    if let Some(input) = m.input {
                        info.input = input;
                    }
                    info.cost = m.cost;
                    info.context_window = m.context_window.unwrap_or(info.context_window);
                    info.max_tokens = m.max_tokens.unwrap_or(info.max_tokens);
                    info
                })
                .collect::<Vec<_>>();
            let provider = ProviderInfo {
                default_model: models.first().map(|m| m.id.clone()),
                name: name.clone(),
                api,
                base_url: p.base_url,
                key_env: p.api_key_env,
                key: p.api_key,
                base_url_env: None,
                models,
            };
            self.providers.retain(|x| x.name != name);
            self.providers.push(provider);
        }
        Ok(())
    }

    pub fn provider(&self, name: &str) -> Option<&ProviderInfo> {
        self.providers.iter().find(|p| p.name == name)
    }

    /// Every listed model, provider by provider.
    pub fn models(&self) -> impl Iterator<Item = &ModelInfo> {
        self.providers.iter().flat_map(|p| p.models.iter())
    }
}

/// What is wrong with a models.json file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegistryErrorKind {
    /// Not JSON, or not the file's shape (an unknown field, a wrong type).
    Syntax,
    /// A provider names an `api` keel does not speak.
    UnknownApi,
}

/// A models.json file that cannot be used: its kind and what is wrong, as the user reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryError {
    pub kind: RegistryErrorKind,
    pub message: String,
}

impl std::fmt::Display for RegistryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for RegistryError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_is_per_million_tokens() {
        let r = Registry::builtin();
        let m = r
            .provider("anthropic")
            .unwrap()
            .models
            .iter()
            .find(|m| m.id == "claude-sonnet-4-5")
            .unwrap();
        let mut u = Usage {
            input: 1_000_000,
            output: 2_000,
            cache_read: 10_000,
            cache_write: 0,
            total_tokens: 1_012_000,
            ..Usage::default()
        };
        m.cost.apply(&mut u);
        assert_eq!(u.cost.input, 3.0);
        assert!((u.cost.output - 0.03).abs() < 1e-12);
        assert!((u.cost.cache_read - 0.003).abs() < 1e-12);
        assert!((u.cost.total - 3.033).abs() < 1e-12);
    }

    #[test]
    fn thinking_is_clamped_to_the_model() {
        let r = Registry::builtin();
        let find = |p: &str, id: &str| {
            r.provider(p)
                .unwrap()
                .models
                .iter()
                .find(|m| m.id == id)
                .unwrap()
                .clone()
        };
        assert_eq!(find("openai", "gpt-4o").clamp_thinking("high"), "off");
        assert_eq!(find("openai", "o4-mini").clamp_thinking("xhigh"), "high");
        assert_eq!(find("openai", "o4-mini").clamp_thinking("minimal"), "off");
        assert_eq!(find("openai", "gpt-5").clamp_thinking("minimal"), "minimal");
        assert_eq!(
            find("anthropic", "claude-haiku-4-5").clamp_thinking("xhigh"),
            "xhigh"
        );
        assert_eq!(find("openai", "gpt-5").clamp_thinking("bogus"), "off");
    }

    #[test]
    fn models_file_adds_custom_endpoints_and_rejects_typos() {
        let mut r = Registry::builtin();
        r.merge_file(
            r#"{"providers":{"local":{"baseUrl":"http://127.0.0.1:8080/v1","models":[
                {"id":"qwen","contextWindow":32768,"reasoning":true,"cost":{"input":0.1}}]}}}"#,
        )
        .unwrap();
        let p = r.provider("local").unwrap();
        assert_eq!(p.api, API_OPENAI);
        assert_eq!(p.key_env, None);
        assert_eq!(p.default_model.as_deref(), Some("qwen"));
        assert_eq!(p.models[0].context_window, 32768);
        assert_eq!(p.models[0].cost.input, 0.1);
        assert_eq!(p.models[0].clamp_thinking("high"), "high");
        let e = r
            .merge_file(r#"{"providers":{"x":{"baseUrl":"u","modles":[]}}}"#)
            .unwrap_err();
        assert!(e.message.contains("modles"), "{e}");
        assert_eq!(e.kind, RegistryErrorKind::Syntax);
        let e = r
            .merge_file(r#"{"providers":{"x":{"baseUrl":"u","api":"grpc"}}}"#)
            .unwrap_err();
        assert!(e.message.contains("grpc"), "{e}");
        assert_eq!(e.kind, RegistryErrorKind::UnknownApi);
    }
}
